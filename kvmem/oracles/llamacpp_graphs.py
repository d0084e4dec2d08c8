"""llama.cpp's own compute buffer as the judge of the deepseek2 (MLA) and gpt-oss graphs
(kvmem.engines.llamacpp.graphs_mla_oss).

Each case draws a random config of one of the two families from a seed (DeepSeek: V2-Lite-like
"lite" layers without q_lora_rank, which llama.cpp accepts only at 26 or 27 layers, or q_lora_rank
layers; softmax or sigmoid routing with the selection bias, group-limited routing, normalised and
scaled weights, leading dense layers, 1-2 shared experts; gpt-oss: the iSWA cache with a random
window, the attention sinks, biases everywhere), lays it out with kvmem (arch_tensors, the GGUF
convert_hf_to_gguf would write: kvmem.oracles.llamacpp_family_files), loads it for real on this
CPU-only build (llama-cpp-python 0.3.36) in a forked child and creates a context of random n_ctx,
n_ubatch, flash attention, cache type, sequences and unified streams; the printed "CPU compute
buffer size" (and the four decimals ~llama_context prints) is compared with kvmem's
llamacpp_compute_buffer(backend="cpu") given the cells kvmem's own KV plan settles on. The same for glm-dsa /
deepseek32 (DSA_KINDS, graphs_dsa) and for deepseek2 GGUFs without the MLA split (per_head_case).
"""

from __future__ import annotations

import random

from ..model import Model
from .llamacpp_buffers import in_child, printed_buffers
from .llamacpp_family_files import write_family

__all__ = ["random_graph_case", "run_graph_case", "per_head_case", "run_per_head_case", "KINDS", "DSA_KINDS"]

KINDS = ("deepseek2", "deepseek2-lite", "gpt-oss")
DSA_KINDS = ("glm-dsa", "glm-dsa-shared", "deepseek32")     # kvmem.engines.llamacpp.graphs_dsa
_FA_TYPES = ("f16", "q8_0", "q4_0", "f32", "bf16", "q5_1", "iq4_nl")
_NO_FA_TYPES = ("f16", "f32", "bf16")     # MLA: V is a view of K (one type), a quantised V needs flash attention


def _deepseek(rng: random.Random, lite: bool) -> dict:
    n_layer = rng.choice((26, 27)) if lite else rng.randint(1, 5)
    n_exp = rng.choice((4, 8, 16))
    sigmoid = rng.random() < 0.5
    cfg = dict(architectures=["DeepseekV3ForCausalLM" if sigmoid else "DeepseekV2ForCausalLM"],
               model_type="deepseek_v3" if sigmoid else "deepseek_v2", num_hidden_layers=n_layer,
               hidden_size=256 * rng.randint(1, 3), intermediate_size=256 * rng.randint(1, 4),
               moe_intermediate_size=256 * rng.randint(1, 2), n_routed_experts=n_exp,
               num_experts_per_tok=rng.choice((1, 2, 4)), n_shared_experts=rng.choice((1, 2)),
               first_k_dense_replace=rng.randint(0, min(n_layer, 3)), kv_lora_rank=rng.choice((64, 128, 256, 512)),
               q_lora_rank=None if lite else rng.choice((64, 128, 384)), qk_rope_head_dim=rng.choice((32, 64)),
               qk_nope_head_dim=rng.choice((32, 64, 128)), v_head_dim=rng.choice((32, 64, 128)),
               vocab_size=rng.choice((256, 1000, 2048)), max_position_embeddings=8192, rms_norm_eps=1e-6,
               rope_theta=10000.0, tie_word_embeddings=False, moe_layer_freq=1,
               scoring_func="sigmoid" if sigmoid else "softmax", topk_method="noaux_tc" if sigmoid else "greedy",
               norm_topk_prob=rng.random() < 0.5, routed_scaling_factor=rng.choice((1.0, 2.5)))
    cfg["num_attention_heads"] = cfg["num_key_value_heads"] = rng.choice((1, 2, 4, 8, 16))
    groups = rng.choice((1, 2, 4)) if n_exp >= 8 else 1
    used = rng.randint(1, groups - 1) if groups > 1 else 1
    cfg.update(n_group=groups, topk_group=used)
    if groups > 1:      # llama-model.cpp: the experts used fit in the groups used
        top_k = cfg["num_experts_per_tok"]
        assert isinstance(top_k, int)
        cfg["num_experts_per_tok"] = min(top_k, used * (n_exp // groups))
    return cfg


def _dsa(rng: random.Random, kind: str) -> dict:
    """A GLM-5.x (glm_moe_dsa; "glm-dsa-shared": GLM-5.2's indexer_types, the first layer full) or
    DeepSeek-V3.2 (deepseek_v32) config: deepseek's MLA with q_lora, sigmoid routing, and the indexer."""
    cfg = _deepseek(rng, False)
    if cfg["scoring_func"] != "sigmoid":        # deepseek32 needs expert_gating_func; GLM-5.x routes by sigmoid
        cfg.update(scoring_func="sigmoid", topk_method="noaux_tc")
    glm = kind.startswith("glm")
    cfg.update(model_type="glm_moe_dsa" if glm else "deepseek_v32",
               architectures=["GlmMoeDsaForCausalLM" if glm else "DeepseekV32ForCausalLM"],
               index_n_heads=rng.choice((1, 2, 4, 8, 16)), index_head_dim=rng.choice((64, 128)),
               index_topk=rng.choice((1, 16, 64, 256, 2048)))
    cfg["qk_rope_head_dim"] = min(cfg["qk_rope_head_dim"], cfg["index_head_dim"])
    if kind == "glm-dsa-shared":
        n = cfg["num_hidden_layers"]
        cfg["indexer_types"] = ["full"] + [rng.choice(("full", "shared")) for _ in range(n - 1)]
    return cfg


def _gpt_oss(rng: random.Random) -> dict:
    # two layers or more: kvmem's plan gives a model with no full-attention layer one plain cache (swa_cells None)
    n_layer = rng.randint(2, 6)
    n_head, top_k = rng.choice((4, 8, 16)), rng.choice((1, 2, 4))
    return dict(architectures=["GptOssForCausalLM"], model_type="gpt_oss", num_hidden_layers=n_layer,
                hidden_size=256 * rng.randint(1, 3), head_dim=64, num_attention_heads=n_head,
                num_key_value_heads=rng.choice([h for h in (1, 2, 4, 8) if n_head % h == 0]),
                intermediate_size=256 * rng.randint(1, 3), num_local_experts=rng.choice((4, 8, 32)),
                num_experts_per_tok=top_k, experts_per_token=top_k,
                sliding_window=rng.choice((32, 128, 512)), vocab_size=rng.choice((256, 1000, 2048)),
                max_position_embeddings=8192, rms_norm_eps=1e-5, rope_theta=150000.0, tie_word_embeddings=False,
                layer_types=["sliding_attention" if il % 2 == 0 else "full_attention" for il in range(n_layer)])


def random_graph_case(seed: int, kinds: tuple = KINDS) -> tuple[Model, str, dict]:
    """(model, file type, context) of case ``seed``, its kind ``kinds[seed % len(kinds)]``."""
    rng = random.Random(f"graphs/{seed}")
    kind = kinds[seed % len(kinds)]
    if kind == "gpt-oss":
        cfg = _gpt_oss(rng)
    elif kind in ("glm-dsa", "glm-dsa-shared", "deepseek32"):
        cfg = _dsa(rng, kind)
    else:
        cfg = _deepseek(rng, kind == "deepseek2-lite")
    model = Model.from_hf_config(cfg, name=f"random-{kind}-{seed}")
    fa = rng.random() < 0.5
    type_k = rng.choice(_FA_TYPES if fa else _NO_FA_TYPES)
    mla = kind != "gpt-oss"
    ctx = dict(n_ctx=rng.choice((256, 512, 1000, 4096)), n_ubatch=rng.choice((1, 7, 32, 128, 512)),
               flash_attn=int(fa), type_k=type_k,
               type_v=type_k if mla or rng.random() < 0.5 else rng.choice(_FA_TYPES if fa else ("f16",)),
               mmap=True, n_seq=rng.choice((1, 1, 2, 3, 4)), kv_unified=rng.random() < 0.3,
               swa_full=rng.random() < 0.3)
    return model, rng.choice(("f16", "q8_0")), ctx


def run_graph_case(model: Model, fmt: str, ctx: dict, path: str) -> dict:
    """llama.cpp's printed buffers (kvmem.oracles.llamacpp_buffers.printed_buffers) for ``model`` laid out as
    ``fmt``."""
    write_family(model, fmt, path, source=False)
    return in_child(printed_buffers, path, ctx)


def per_head_case(seed: int) -> tuple[Model, str, dict]:
    """A deepseek2 case (random_graph_case over the deepseek2 kinds) for a GGUF without the MLA split
    (mla="none": per-head K and V, so V may take another type than K: a quantised V with flash attention on odd
    seeds)."""
    model, fmt, ctx = random_graph_case(seed, KINDS[:2])
    if ctx["flash_attn"] and seed % 2:
        ctx["type_v"] = "q4_0" if ctx["type_k"] != "q4_0" else "f16"
    return model, fmt, ctx


def run_per_head_case(model: Model, fmt: str, ctx: dict, path: str) -> dict:
    """llama.cpp's printed buffers for ``model`` written as a per-head deepseek2 GGUF (write_family's
    per_head_mla)."""
    write_family(model, fmt, path, source=False, per_head_mla=True)
    return in_child(printed_buffers, path, ctx)

"""Random model architectures for the oracles: HF config dicts with real attention shapes.

Each family draws the fields its HF config really has (llama, qwen2, qwen3, gemma2, gemma3,
mistral with a window, gpt-oss, llama4, deepseek_v2, gemma4 with its global layers' own
shape); ``kvmem.Model.from_hf_config`` reads them, and the llama.cpp oracle writes the same
facts into a GGUF. Deterministic for a seed (``random.Random(seed)``); the case name carries
the family and the draw index.
"""

from __future__ import annotations

import random

from ..model import Model

__all__ = ["FAMILIES", "random_config", "random_model", "in_turn"]

FAMILIES = ("llama", "qwen2", "qwen3", "gemma2", "gemma3", "mistral", "gpt_oss", "llama4", "deepseek_v2", "gemma4")

_HEAD_DIMS = (32, 48, 64, 80, 96, 112, 128, 192, 256)


def _heads(rng: random.Random) -> tuple[int, int]:
    """(attention heads, KV heads): KV heads divide the attention heads (GQA/MQA/MHA)."""
    kv = rng.choice((1, 1, 2, 4, 8, 8, 16))
    return kv * rng.choice((1, 2, 4, 8)), kv


def random_config(family: str, rng: random.Random) -> dict:
    """One HF config.json of ``family`` with drawn layer counts, heads, head dims and windows."""
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {', '.join(FAMILIES)}, got {family!r}")
    layers = rng.randint(1, 40)
    heads, kv = _heads(rng)
    head_dim = rng.choice(_HEAD_DIMS)
    cfg: dict = {"num_hidden_layers": layers, "num_attention_heads": heads, "num_key_value_heads": kv,
           "hidden_size": heads * head_dim, "intermediate_size": 64, "vocab_size": 256,
           "max_position_embeddings": rng.choice((2048, 4096, 8192, 32768, 131072)),
           "torch_dtype": "bfloat16", "rms_norm_eps": 1e-6, "rope_theta": 10000.0}
    if family in ("llama", "qwen2"):
        # head_dim = hidden_size / num_attention_heads: these configs carry no head_dim
        cfg.update(model_type=family, architectures=["LlamaForCausalLM" if family == "llama"
                                                     else "Qwen2ForCausalLM"])
    elif family == "qwen3":
        cfg.update(model_type="qwen3", architectures=["Qwen3ForCausalLM"], head_dim=head_dim,
                   hidden_size=rng.choice((256, 512, 1024, 2048)))
    elif family == "gemma2":
        cfg.update(model_type="gemma2", architectures=["Gemma2ForCausalLM"], head_dim=head_dim,
                   sliding_window=rng.choice((128, 256, 512, 1024, 4096)), query_pre_attn_scalar=head_dim,
                   hidden_size=rng.choice((256, 512, 1024)))
    elif family == "gemma3":
        cfg.update(model_type="gemma3_text", architectures=["Gemma3ForCausalLM"], head_dim=head_dim,
                   sliding_window=rng.choice((128, 256, 512, 1024, 4096)), sliding_window_pattern=6,
                   query_pre_attn_scalar=head_dim, hidden_size=rng.choice((256, 512, 1024)))
    elif family == "mistral":
        cfg.update(model_type="mistral", architectures=["MistralForCausalLM"], head_dim=head_dim,
                   sliding_window=rng.choice((256, 1024, 4096)))
    elif family == "gpt_oss":
        window = rng.choice((64, 128, 256))
        cfg.update(model_type="gpt_oss", architectures=["GptOssForCausalLM"], head_dim=head_dim,
                   sliding_window=window, num_local_experts=4, num_experts_per_tok=2,
                   layer_types=["sliding_attention" if i % 2 == 0 else "full_attention"
                                for i in range(layers)])
    elif family == "llama4":
        interval = 4
        cfg.update(model_type="llama4_text", architectures=["Llama4ForCausalLM"], head_dim=head_dim,
                   attention_chunk_size=rng.choice((1024, 2048, 8192)),
                   no_rope_layers=[int((i + 1) % interval != 0) for i in range(layers)],
                   num_local_experts=4, num_experts_per_tok=1, interleave_moe_layer_step=1)
    elif family == "gemma4":
        # full layers: global_head_dim, num_global_key_value_heads with attention_k_eq_v (configuration_gemma4.py)
        k_eq_v = rng.random() < 0.5
        head_dim = rng.choice((128, 256))     # Gemma 4's: sliding 256, global 512 (pages that vLLM can unify)
        cfg.update(model_type="gemma4_text", architectures=["Gemma4ForCausalLM"], head_dim=head_dim,
                   global_head_dim=rng.choice((head_dim, 2 * head_dim)), attention_k_eq_v=k_eq_v,
                   num_global_key_value_heads=rng.choice([d for d in (1, 2, 4, 8) if heads % d == 0]),
                   sliding_window=rng.choice((128, 512, 1024)), hidden_size=rng.choice((256, 512, 1024)),
                   layer_types=["full_attention" if (i + 1) % 6 == 0 or i == layers - 1 else "sliding_attention"
                                for i in range(layers)])
    else:
        rope = rng.choice((32, 64))
        cfg.update(model_type="deepseek_v2", architectures=["DeepseekV2ForCausalLM"],
                   num_key_value_heads=heads, kv_lora_rank=rng.choice((128, 256, 512)),
                   qk_rope_head_dim=rope, qk_nope_head_dim=rng.choice((64, 128)),
                   v_head_dim=rng.choice((64, 128)), q_lora_rank=None, n_routed_experts=4,
                   num_experts_per_tok=2, moe_intermediate_size=64, first_k_dense_replace=layers,
                   n_shared_experts=1, moe_layer_freq=1, hidden_size=rng.choice((256, 512, 1024)))
    return cfg


def random_model(seed: int, i: int, family: str) -> tuple[random.Random, Model]:
    """Draw ``i`` of ``seed`` for ``family``: its own random.Random (so each case can be drawn
    alone) and the Model of the config it drew first; the caller draws the engine settings next."""
    rng = random.Random(f"{seed}/{i}/{family}")
    return rng, Model.from_hf_config(random_config(family, rng))


def in_turn(random_case, families: tuple[str, ...], n: int, seed: int) -> list:
    """``n`` cases of ``random_case(seed, i, family)``, the families in turn."""
    return [random_case(seed, i, families[i % len(families)]) for i in range(n)]

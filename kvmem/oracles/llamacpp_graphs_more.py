"""Random cases for llama.cpp's own compute buffer as the judge of the glm4moe graph
(kvmem.engines.llamacpp.graphs_glm4moe), the hybrid Gated DeltaNet graphs (graphs_delta: qwen3next, qwen35,
qwen35moe), gemma4 (graphs_gemma4) and minimax-m2 (graphs_minimax_m2): tests/oracles/test_llamacpp_graphs_more_oracle.py
loads them in llama.cpp,
tests/engines/test_llamacpp_graphs_glm4moe.py and test_llamacpp_graphs_delta.py pin what llama.cpp printed for them.

Each case draws a glm4_moe config from a seed (1-5 layers, 0-2 leading dense ones, 1-2 shared experts, Q/K/V
biases or not, Q/K norms or not, normalised or not, routed_scaling_factor 1 or 2.5, group-limited routing
sometimes), laid out by kvmem (kvmem.oracles.llamacpp_family_files: the metadata conversion/glm.py writes), and a
context: n_ctx, n_ubatch, flash attention, cache types, sequences, unified streams.
"""

from __future__ import annotations

import random
from typing import Any

from ..model import Model

__all__ = ["random_glm4moe_case", "random_delta_case", "random_gemma4_case", "random_minimax_m2_case", "DELTA_KINDS"]

DELTA_KINDS = ("qwen3_next", "qwen3_5_moe_text", "qwen3_5_text")

_FA_TYPES = ("f16", "q8_0", "q4_0", "f32", "bf16", "q5_1", "iq4_nl")
_NO_FA_TYPES = ("f16", "f32", "bf16")


def _glm4moe(rng: random.Random) -> dict:
    n_layer = rng.randint(1, 5)
    n_exp = rng.choice((4, 8, 16))
    n_head = rng.choice((2, 4, 8, 12))
    cfg: dict[str, Any] = dict(architectures=["Glm4MoeForCausalLM"], model_type="glm4_moe", num_hidden_layers=n_layer,
               hidden_size=256 * rng.randint(1, 3), head_dim=rng.choice((64, 128)), num_attention_heads=n_head,
               num_key_value_heads=rng.choice([h for h in (1, 2, 4) if n_head % h == 0]),
               intermediate_size=256 * rng.randint(1, 4), moe_intermediate_size=128 * rng.randint(1, 3),
               n_routed_experts=n_exp, num_experts_per_tok=rng.choice((1, 2, 4)),
               n_shared_experts=rng.choice((1, 1, 2)), first_k_dense_replace=rng.randint(0, min(n_layer, 2)),
               attention_bias=rng.random() < 0.7, use_qk_norm=rng.random() < 0.5,
               norm_topk_prob=rng.random() < 0.7, routed_scaling_factor=rng.choice((1.0, 2.5)),
               partial_rotary_factor=0.5, vocab_size=rng.choice((256, 1000, 2048)), max_position_embeddings=8192,
               rms_norm_eps=1e-5, rope_theta=1000000.0, tie_word_embeddings=False, n_group=1, topk_group=1)
    if n_exp >= 8 and rng.random() < 0.25:      # llama-model.cpp#L1365-L1370: the experts used fit in the groups
        cfg.update(n_group=4, topk_group=rng.randint(1, 3))
        cfg["num_experts_per_tok"] = min(cfg["num_experts_per_tok"], cfg["topk_group"] * (n_exp // 4))
    return cfg


def random_run(rng: random.Random, contexts: tuple = (256, 512, 1000, 4096), seqs: tuple = (1, 1, 2, 3, 4)) -> tuple:
    """(file type, context) of a random case after its model is drawn: flash attention or not, the cache types it
    takes, the context, the ubatch, the sequences (a KV stream each, or unified)."""
    fa = rng.random() < 0.5
    type_k = rng.choice(_FA_TYPES if fa else _NO_FA_TYPES)
    ctx = dict(n_ctx=rng.choice(contexts), n_ubatch=rng.choice((1, 7, 32, 128, 512)),
               flash_attn=int(fa), type_k=type_k, type_v=rng.choice(_FA_TYPES) if fa else "f16", mmap=True,
               n_seq=rng.choice(seqs), kv_unified=rng.random() < 0.3, swa_full=False)
    return rng.choice(("f16", "q8_0")), ctx


def random_glm4moe_case(seed: int) -> tuple[Model, str, dict]:
    """(model, file type, context) of glm4moe case ``seed``."""
    rng = random.Random(f"graphs-more/glm4moe/{seed}")
    model = Model.from_hf_config(_glm4moe(rng), name=f"random-glm4moe-{seed}")
    return (model, *random_run(rng))


def _delta(rng: random.Random, model_type: str) -> dict:
    """A Qwen3-Next / Qwen3.5-MoE / Qwen3.5 config: 4 or 8 layers (every 4th full attention, as in every published
    config: the family writer's files of 5 layers did not load), 1-4 key heads, 1-2 value heads per key head of 32-128,
    and for the MoE kinds 4-16 experts with a shared expert."""
    n_k = rng.choice((1, 2, 4))
    n_head = rng.choice((2, 4, 8))
    d = rng.choice((32, 64, 128))
    cfg = dict(architectures=["Qwen3NextForCausalLM"], model_type=model_type, num_hidden_layers=rng.choice((4, 8)),
               hidden_size=256 * rng.randint(1, 3), head_dim=rng.choice((64, 128, 256)), num_attention_heads=n_head,
               num_key_value_heads=rng.choice([h for h in (1, 2) if n_head % h == 0]),
               intermediate_size=256 * rng.randint(1, 3), linear_conv_kernel_dim=4, linear_key_head_dim=d,
               linear_value_head_dim=d, linear_num_key_heads=n_k, linear_num_value_heads=n_k * rng.choice((1, 2)),
               full_attention_interval=4, vocab_size=rng.choice((256, 1000)), max_position_embeddings=8192,
               rms_norm_eps=1e-6, rope_theta=1e6, partial_rotary_factor=0.25, tie_word_embeddings=False)
    if model_type != "qwen3_5_text":
        cfg.update(moe_intermediate_size=128 * rng.randint(1, 3),
                   shared_expert_intermediate_size=128 * rng.randint(1, 3), num_experts=rng.choice((4, 8, 16)),
                   num_experts_per_tok=rng.choice((1, 2, 4)), norm_topk_prob=True,
                   decoder_sparse_step=1, mlp_only_layers=[])
    return cfg


def random_delta_case(seed: int) -> tuple[Model, str, dict]:
    """(model, file type, context) of hybrid case ``seed``, its kind DELTA_KINDS[seed % 3]; several sequences with a
    KV stream each or unified."""
    model_type = DELTA_KINDS[seed % len(DELTA_KINDS)]
    rng = random.Random(f"graphs-more/delta/{seed}")
    model = Model.from_hf_config(_delta(rng, model_type), name=f"random-{model_type}-{seed}")
    return (model, *random_run(rng))


def _gemma4(rng: random.Random) -> dict:
    """A Gemma 4 text config without per-layer inputs or shared-KV layers: 2-8 layers, every 6th and the last full
    attention, sliding heads of 128-256, full heads as wide or twice, K = V on full layers or not, a window of
    128-1024, the MoE block (experts beside the dense FFN) or not, a logit softcap or not."""
    n_layer = rng.randint(2, 8)
    n_head = rng.choice((2, 4, 8))
    head_dim = rng.choice((128, 256))
    cfg = dict(architectures=["Gemma4ForCausalLM"], model_type="gemma4_text", num_hidden_layers=n_layer,
               hidden_size=rng.choice((256, 512, 768)), num_attention_heads=n_head, head_dim=head_dim,
               num_key_value_heads=rng.choice([h for h in (1, 2, 4) if n_head % h == 0]),
               global_head_dim=rng.choice((head_dim, 2 * head_dim)), attention_k_eq_v=rng.random() < 0.5,
               num_global_key_value_heads=rng.choice([h for h in (1, 2) if n_head % h == 0]),
               intermediate_size=256 * rng.randint(1, 3), sliding_window=rng.choice((128, 512, 1024)),
               layer_types=["full_attention" if (i + 1) % 6 == 0 or i == n_layer - 1 else "sliding_attention"
                            for i in range(n_layer)],
               vocab_size=rng.choice((256, 1000)), max_position_embeddings=8192, rms_norm_eps=1e-6,
               final_logit_softcapping=rng.choice((None, 30.0)), hidden_size_per_layer_input=0,
               num_kv_shared_layers=0, tie_word_embeddings=True, hidden_activation="gelu_pytorch_tanh")
    if rng.random() < 0.6:
        cfg.update(enable_moe_block=True, num_experts=rng.choice((4, 8, 16)), top_k_experts=rng.choice((1, 2, 4)),
                   moe_intermediate_size=128 * rng.randint(1, 3))
    return cfg


def random_gemma4_case(seed: int) -> tuple[Model, str, dict]:
    """(model, file type, context) of gemma4 case ``seed``; the sliding cache sized with swa_full on or off."""
    rng = random.Random(f"graphs-more/gemma4/{seed}")
    model = Model.from_hf_config(_gemma4(rng), name=f"random-gemma4-{seed}")
    fa = rng.random() < 0.5
    type_k = rng.choice(_FA_TYPES if fa else _NO_FA_TYPES)
    ctx = dict(n_ctx=rng.choice((256, 512, 1000, 4096)), n_ubatch=rng.choice((1, 7, 32, 128, 512)),
               flash_attn=int(fa), type_k=type_k, type_v=rng.choice(_FA_TYPES) if fa else "f16", mmap=True,
               n_seq=rng.choice((1, 1, 2, 3, 4)), kv_unified=rng.random() < 0.3, swa_full=rng.random() < 0.3)
    return model, rng.choice(("f16", "q8_0")), ctx


def _minimax_m2(rng: random.Random) -> dict:
    """A MiniMax-M2 config: 1-5 layers, 2-8 heads of 64-128 (RoPE over half or all of a head), 4-16 experts of
    128-384, sigmoid or softmax routing (conversion/base.py writes either), Q/K norms (minimax-m2.cpp makes them)."""
    n_head = rng.choice((2, 4, 8))
    head_dim = rng.choice((64, 128))
    return dict(architectures=["MiniMaxM2ForCausalLM"], model_type="minimax_m2", num_hidden_layers=rng.randint(1, 5),
                hidden_size=256 * rng.randint(1, 3), head_dim=head_dim, num_attention_heads=n_head,
                num_key_value_heads=rng.choice([h for h in (1, 2, 4) if n_head % h == 0]),
                intermediate_size=128 * rng.randint(1, 3), num_local_experts=rng.choice((4, 8, 16)),
                num_experts_per_tok=rng.choice((1, 2, 4)), rotary_dim=rng.choice((head_dim // 2, head_dim)),
                scoring_func=rng.choice(("sigmoid", "sigmoid", "softmax")), use_qk_norm=True, use_routing_bias=True,
                vocab_size=rng.choice((256, 1000, 2048)), max_position_embeddings=8192, rms_norm_eps=1e-6,
                rope_theta=5000000, tie_word_embeddings=False, shared_intermediate_size=0)


def random_minimax_m2_case(seed: int) -> tuple[Model, str, dict]:
    """(model, file type, context) of minimax-m2 case ``seed``."""
    rng = random.Random(f"graphs-more/minimax-m2/{seed}")
    model = Model.from_hf_config(_minimax_m2(rng), name=f"random-minimax-m2-{seed}")
    return (model, *random_run(rng))

"""Random dense GLM-4 (glm4: Glm4ForCausalLM) cases for llama.cpp's own buffers as the judge of kvmem's glm4 layout
(kvmem.engines.llamacpp.arch_tensors._glm4) and graph (kvmem.engines.llamacpp.graphs_glm4):
tests/oracles/test_llamacpp_glm4_oracle.py loads them in llama.cpp, tests/engines/test_llamacpp_graphs_glm4.py pins
what llama.cpp printed for them.

Each case draws a glm4 config from a seed (1-5 layers, 2-12 heads of 64 or 128, 1-4 KV heads, Q/K/V biases or not
(attention_bias: GLM-4-9B-0414 has them, the 32B files not), partial_rotary_factor 0.5 as every 0414 config), laid
out by kvmem (kvmem.oracles.llamacpp_family_files), and a context: n_ctx, n_ubatch, flash attention, cache types,
sequences, unified streams.
"""

from __future__ import annotations

import random
from typing import Any

from ..model import Model
from .llamacpp_graphs_more import random_run

__all__ = ["random_glm4_case"]


def _glm4(rng: random.Random) -> dict:
    n_head = rng.choice((2, 4, 8, 12))
    cfg: dict[str, Any] = dict(architectures=["Glm4ForCausalLM"], model_type="glm4",
                               num_hidden_layers=rng.randint(1, 5), hidden_size=256 * rng.randint(1, 3),
                               head_dim=rng.choice((64, 128)),
                               num_attention_heads=n_head,
                               num_key_value_heads=rng.choice([h for h in (1, 2, 4) if n_head % h == 0]),
                               intermediate_size=256 * rng.randint(1, 4), attention_bias=rng.random() < 0.5,
                               partial_rotary_factor=0.5, vocab_size=rng.choice((256, 1000, 2048)),
                               max_position_embeddings=8192, rms_norm_eps=1e-5, rope_theta=10000.0,
                               tie_word_embeddings=False)
    return cfg


def random_glm4_case(seed: int) -> tuple[Model, str, dict]:
    """(model, file type, context) of glm4 case ``seed``."""
    rng = random.Random(f"graphs/glm4/{seed}")
    model = Model.from_hf_config(_glm4(rng), name=f"random-glm4-{seed}")
    return (model, *random_run(rng))

"""Llama 4 (llama4) GGUFs as convert_hf_to_gguf writes them, and random llama4 cases, for llama.cpp's own buffers as
the judge of kvmem's llama4 layout and graph (kvmem.engines.llamacpp.graphs_llama4):
tests/oracles/test_llamacpp_llama4_oracle.py loads them in llama.cpp, tests/engines/test_llamacpp_graphs_llama4.py
pins what llama.cpp printed for them.

The file: kvmem.oracles.llamacpp_family_files' metadata with Llama4Model's differences (conversion/llama.py#L379-L399):
feed_forward_length is intermediate_size_mlp (the dense layers'), expert_feed_forward_length intermediate_size,
interleave_moe_layer_step written; no sliding_window (llama.cpp then chunks by 8192). Each random case draws a
llama4_text config (1-9 layers: the 3 chunked : 1 full pattern, 2-128 experts (128: no KQ norm), top-k 1-2, MoE
every 1-3 layers, a llama3 rope_scaling or none) and a context (n_ctx up to 20000, past the chunk: the SWA cache
smaller than the full one).
"""

from __future__ import annotations

import random
from typing import Any

from ..engines.llamacpp.arch_fields import field
from ..engines.llamacpp.tensors import source_type, synthesised_tensors
from ..model import Model
from .llamacpp_buffers import write_sparse
from .llamacpp_family_files import write_metadata
from .llamacpp_graphs_more import random_run

__all__ = ["write_llama4", "random_llama4_case"]


class _Llama4Writer:
    """A GGUFWriter whose feed_forward_length is intermediate_size_mlp (Llama4Model.__init__ swaps the two)."""

    def __init__(self, writer, model: Model):
        self.writer, self.model = writer, model

    def add_feed_forward_length(self, _n):
        self.writer.add_feed_forward_length(field(self.model, "intermediate_size_mlp", 0) or 0)

    def __getattr__(self, name):
        return getattr(self.writer, name)


def write_llama4(model: Model, fmt: str, path: str, *, source: bool = False) -> list:
    """The sparse GGUF of ``model`` in ``fmt`` (``source``: the converter's F16/F32 types, for llama-quantize)."""
    import gguf
    tensors = synthesised_tensors(model, fmt)
    rows = [(t.name, t.shape, source_type(t.name, t.shape, "f16") if source else t.dtype) for t in tensors]
    writer = gguf.GGUFWriter(path, "llama4")
    write_metadata(_Llama4Writer(writer, model), model, "llama4", fmt)
    writer.add_interleave_moe_layer_step(field(model, "interleave_moe_layer_step", 1))
    write_sparse(writer, rows)
    return list(tensors)


def _llama4(rng: random.Random) -> dict:
    n_head = rng.choice((2, 4, 8))
    experts = rng.choice((2, 4, 16, 128))
    cfg: dict[str, Any] = dict(architectures=["Llama4ForCausalLM"], model_type="llama4_text",
                               num_hidden_layers=rng.randint(1, 9), hidden_size=256 * rng.randint(1, 3),
                               head_dim=rng.choice((64, 128)), num_attention_heads=n_head,
                               num_key_value_heads=rng.choice([h for h in (1, 2, 4) if n_head % h == 0]),
                               intermediate_size=128 * rng.randint(1, 4), intermediate_size_mlp=256 * rng.randint(1, 4),
                               num_local_experts=experts, num_experts_per_tok=rng.choice((1, 1, 2)),
                               interleave_moe_layer_step=rng.choice((1, 1, 2, 3)), attention_chunk_size=8192,
                               vocab_size=rng.choice((256, 1000, 2048)), max_position_embeddings=65536,
                               rms_norm_eps=1e-5, rope_theta=500000.0, use_qk_norm=experts != 128,
                               tie_word_embeddings=False)
    if rng.random() < 0.5:
        cfg["rope_scaling"] = dict(rope_type="llama3", factor=8.0, high_freq_factor=4.0, low_freq_factor=1.0,
                                   original_max_position_embeddings=8192)
    return cfg


def random_llama4_case(seed: int) -> tuple[Model, str, dict]:
    """(model, file type, context) of llama4 case ``seed``."""
    rng = random.Random(f"graphs/llama4/{seed}")
    model = Model.from_hf_config(_llama4(rng), name=f"random-llama4-{seed}")
    return (model, *random_run(rng, contexts=(256, 1000, 4096, 9000, 16384, 20000), seqs=(1, 1, 2, 3)))

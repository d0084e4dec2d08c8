"""MiniMax-Text-01 / MiniMax-M1 (minimax-01) GGUFs as convert_hf_to_gguf writes them, for llama.cpp's own load as the
judge of kvmem's minimax-01 layout (kvmem.engines.llamacpp.graphs_minimax01): tests/oracles/
test_llamacpp_minimax01_oracle.py loads them in llama.cpp, tests/engines/test_llamacpp_graphs_minimax01.py pins what
llama.cpp printed for them.

The file: kvmem.oracles.llamacpp_family_files' metadata (key/value length head_dim, rope dimension rotary_dim, the
expert counts) and residual_scale, the one key MiniMaxText01Model.set_gguf_parameters adds that load_arch_hparams
requires (conversion/minimax.py#L58-L80: layernorm_full_attention_alpha); no recurrent-layer list and no
full_attention_interval (llama.cpp falls back to every 8th layer full).

MiniMax-M3 (minimax-m3): the same metadata with MiniMaxM3Model's keys (conversion/minimax.py#L177-L198):
feed_forward_length dense_intermediate_size (conversion/base.py#L1445-L1446), the shared-expert count, routed
scaling, weights norm, the MSA indexer's head count, key length, top-k blocks, block size and local blocks, the
leading dense block count.
"""

from __future__ import annotations

import random

from ..engines.llamacpp.arch_fields import field
from ..engines.llamacpp.tensors import source_type, synthesised_tensors
from ..model import Model
from .llamacpp_buffers import write_sparse
from .llamacpp_family_files import write_metadata

__all__ = ["write_minimax01", "write_minimax_m3", "random_minimax01_case"]


def write_minimax01(model: Model, fmt: str, path: str, *, source: bool = False) -> list:
    """The sparse minimax-01 GGUF of ``model`` in ``fmt`` (``source``: the converter's F16/F32 types, for
    llama-quantize)."""
    import gguf
    tensors = synthesised_tensors(model, fmt)
    rows = [(t.name, t.shape, source_type(t.name, t.shape, "f16") if source else t.dtype) for t in tensors]
    writer = gguf.GGUFWriter(path, "minimax-01")
    write_metadata(_HeadDim(writer, model), model, "minimax-01", "f16" if source else fmt)
    writer.add_residual_scale(float(field(model, "layernorm_full_attention_alpha", 1.0)))
    write_sparse(writer, rows)
    return list(tensors)


class _HeadDim:
    """A GGUFWriter whose key/value length is the config's head_dim (conversion/base.py writes it so), not the last
    layer's: a lightning layer has no KV head."""

    def __init__(self, writer, model: Model):
        self.writer, self.model = writer, model

    def add_key_length(self, _n):
        self.writer.add_key_length(field(self.model, "head_dim"))

    def add_value_length(self, _n):
        self.writer.add_value_length(field(self.model, "head_dim"))

    def __getattr__(self, name):
        return getattr(self.writer, name)


class _M3Writer:
    """A GGUFWriter whose feed_forward_length is dense_intermediate_size (conversion/base.py's first match)."""

    def __init__(self, writer, model: Model):
        self.writer, self.model = writer, model

    def add_feed_forward_length(self, _n):
        self.writer.add_feed_forward_length(field(self.model, "dense_intermediate_size"))

    def __getattr__(self, name):
        return getattr(self.writer, name)


def write_minimax_m3(model: Model, fmt: str, path: str, *, source: bool = False) -> list:
    """The sparse minimax-m3 GGUF of ``model`` in ``fmt`` (``source``: the converter's types, the indexer's
    projections F32: MiniMaxM3Model.tensor_force_quant)."""
    import gguf
    tensors = synthesised_tensors(model, fmt)
    rows = [(t.name, t.shape, source_type(t.name, t.shape, "f16") if source else t.dtype) for t in tensors]
    writer = gguf.GGUFWriter(path, "minimax-m3")
    write_metadata(_M3Writer(writer, model), model, "minimax-m3", "f16" if source else fmt)
    sac = field(model, "sparse_attention_config")
    writer.add_expert_shared_count(field(model, "n_shared_experts"))
    writer.add_expert_weights_scale(float(field(model, "routed_scaling_factor")))
    writer.add_expert_weights_norm(True)
    writer.add_indexer_head_count(sac["sparse_num_index_heads"])
    writer.add_indexer_key_length(sac["sparse_index_dim"])
    writer.add_indexer_top_k(sac["sparse_topk_blocks"])
    writer.add_uint32("minimax-m3.attention.indexer.block_size", sac["sparse_block_size"])
    writer.add_uint32("minimax-m3.attention.indexer.local_blocks", sac["sparse_local_block"])
    freq = field(model, "moe_layer_freq")
    writer.add_leading_dense_block_count(next((i for i, v in enumerate(freq) if v != 0), len(freq)))
    write_sparse(writer, rows)
    return list(tensors)


def random_minimax01_case(seed: int, base: dict) -> tuple[Model, dict]:
    """(model, context) of minimax-01 case ``seed``: ``base`` (MiniMax-M1's config) cut to 8-16 layers (every 8th
    softmax, as llama.cpp makes them), 2-8 heads of 32-128, 1-4 KV heads, 2-8 experts of 64-256, top-1 or 2; a
    context of 256-4096 cells, n_ubatch 30-512, flash attention or not, 1-3 sequences. The sequences divide the
    prompt's tokens: llama.cpp 0c1e57098 aborts otherwise (GGML_ASSERT(ggml_can_repeat(b, a)), ggml.c#L2072, creating
    the context: min(n_ctx, n_ubatch) 32 with 3 sequences, 33 with 2, 100 with 3)."""
    rng = random.Random(f"graphs/minimax01/{seed}")
    n, heads = rng.choice((8, 9, 16)), rng.choice((2, 4, 8))
    hidden, head_dim = 64 * rng.randint(1, 4), rng.choice((32, 64, 128))
    kv_heads = rng.choice([h for h in (1, 2, 4) if heads % h == 0])
    cfg = dict(base, num_hidden_layers=n, hidden_size=hidden, num_attention_heads=heads, head_dim=head_dim,
               num_key_value_heads=kv_heads,
               intermediate_size=64 * rng.randint(1, 4), num_local_experts=rng.choice((2, 4, 8)),
               num_experts_per_tok=rng.choice((1, 2)), vocab_size=rng.choice((256, 1000)), rotary_dim=32,
               attn_type_list=[int((i + 1) % 8 == 0) for i in range(n)])
    n_seq = rng.choice((1, 1, 2, 3))
    ctx = dict(mmap=True, n_ctx=rng.choice((256, 1000, 4096)), n_ubatch=rng.choice((30, 96, 120, 510)), n_seq=n_seq,
               type_k="f16", type_v="f16", flash_attn=rng.choice((0, 1)), swa_full=False, kv_unified=False)
    return Model.from_hf_config(cfg, name=f"random-minimax01-{seed}"), ctx

"""Seeded MiniMax-M3 (minimax-m3) cases for llama.cpp's own reserve as the judge of kvmem's compute graph
(kvmem.engines.llamacpp.graphs_minimax_m3): tests/oracles/test_llamacpp_graphs_minimax_m3_oracle.py writes them with
kvmem.oracles.llamacpp_minimax01.write_minimax_m3, tests/engines/test_llamacpp_graphs_minimax_m3.py pins what
llama.cpp printed for them."""

from __future__ import annotations

import copy
import random

from ..model import Model

__all__ = ["minimax_m3_cut", "random_minimax_m3_case"]


def _text(base: dict) -> dict:
    return base["text_config"] if "text_config" in base else base


def minimax_m3_cut(base: dict, n_layer: int, name: str = "minimax-m3-cut", **fields) -> Model:
    """``base`` (MiniMax-M3's config, nested text_config or flat) with ``n_layer`` layers: its per-layer lists
    (moe_layer_freq, the sparse attention's) cut to them; ``fields`` replace text-config keys
    (sparse_attention_config's own: ``sparse``, a dict merged into it)."""
    cfg = copy.deepcopy(base)
    text = _text(cfg)
    sparse = dict(text["sparse_attention_config"], **fields.pop("sparse", {}))
    lead = fields.pop("dense_lead", None)
    if lead is None:
        freq = text["moe_layer_freq"]
        lead = next((i for i, v in enumerate(freq) if v != 0), len(freq))
    flags = [int(i >= lead) for i in range(n_layer)]
    sparse.update(sparse_disable_index_value=list(flags), sparse_attention_freq=list(flags))
    text.update(fields, num_hidden_layers=n_layer, moe_layer_freq=list(flags), sparse_attention_config=sparse)
    return Model.from_hf_config(cfg, name=name)


def random_minimax_m3_case(seed: int, base: dict) -> tuple[Model, dict]:
    """(model, context) of case ``seed``: ``base`` cut to 2-6 layers with 0-2 dense leading ones, 1-4 KV heads (as many
    indexer heads: llama.cpp's MSA asserts it) of 64 or 128, 1-4 query heads per KV head, an indexer key of 32-128,
    MSA blocks of 16-128 positions (96 too: 256 positions pad to 288), top 1-16 blocks, 4-8 experts of 64-256, top 1-2,
    vocab 256-1000; a context of 256-4096 cells, n_ubatch 1-512, flash attention on (MSA) or off (dense), 1-4
    sequences, unified or not, f16 or (with flash attention) q8_0 / q4_0 caches."""
    rng = random.Random(f"graphs/minimax_m3/{seed}")
    n = rng.randint(2, 6)
    kv_heads, head_dim = rng.choice((1, 2, 4)), rng.choice((64, 128))
    hidden = 64 * rng.randint(1, 4)
    fields = dict(hidden_size=hidden, num_attention_heads=kv_heads * rng.choice((1, 2, 4)),
                  num_key_value_heads=kv_heads, head_dim=head_dim, rotary_dim=head_dim // 2,
                  intermediate_size=64 * rng.randint(1, 4),
                  dense_intermediate_size=64 * rng.randint(1, 8), shared_intermediate_size=0,
                  num_local_experts=rng.choice((4, 8)), num_experts_per_tok=rng.choice((1, 2)),
                  vocab_size=rng.choice((256, 1000)), dense_lead=rng.choice((0, 1, 2)),
                  sparse=dict(sparse_num_index_heads=kv_heads, sparse_index_dim=rng.choice((32, 64, 128)),
                              sparse_block_size=rng.choice((16, 32, 64, 96, 128)),
                              sparse_topk_blocks=rng.choice((1, 2, 4, 16)), sparse_local_block=rng.choice((1, 2))))
    fields["shared_intermediate_size"] = fields["intermediate_size"]
    fa = rng.choice((0, 1, 1))
    type_k = rng.choice(("f16", "f16", "q8_0", "q4_0")) if fa else "f16"
    ctx = dict(mmap=True, n_ctx=rng.choice((256, 1000, 2048, 4096)), n_ubatch=rng.choice((1, 3, 32, 100, 256, 512)),
               n_seq=rng.choice((1, 1, 2, 3, 4)), kv_unified=rng.choice((False, True)), type_k=type_k, type_v=type_k,
               flash_attn=fa, swa_full=False)
    return minimax_m3_cut(base, min(n, 6), name=f"random-minimax-m3-{seed}", **fields), ctx

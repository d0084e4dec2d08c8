"""Gemma 3n (gemma3n) GGUFs as convert_hf_to_gguf writes them, and random gemma3n cases, for llama.cpp's own buffers as
the judge of kvmem's gemma3n layout (kvmem.engines.llamacpp.graphs_gemma3n):
tests/oracles/test_llamacpp_gemma3n_oracle.py loads them in llama.cpp, tests/engines/test_llamacpp_graphs_gemma3n.py
pins what llama.cpp printed for them.

The file: the keys conversion/gemma.py Gemma3NModel writes (kvmem.sources.gguf_converted.converted_metadata, from
the text config), vocab_size, and kvmem's tensors, sparse on disk. Each random case draws a gemma3n_text config
(4-26 layers: past 20 the last ones reuse the caches, llama.cpp's n_layer_kv_from_start; every 5th layer full or a
random pattern, the window 64-1024, 1-8 heads of 64-256, 1-2 KV heads; AltUp 4, LAuReL 64 and 256-wide per-layer
inputs, llama.cpp's fixed ones) and a context.
"""

from __future__ import annotations

import random
from typing import Any

from ..engines.llamacpp.quant_mix import FTYPES
from ..engines.llamacpp.tensors import source_type, synthesised_tensors
from ..model import Model
from ..sources.gguf_converted import converted_metadata
from .llamacpp_buffers import write_sparse
from .llamacpp_graphs_more import random_run

__all__ = ["write_gemma3n", "random_gemma3n_case"]


def _text(model: Model) -> dict:
    cfg = model.config or {}
    nested = cfg.get("text_config")
    text = nested if isinstance(nested, dict) else cfg
    return dict(text, model_type="gemma3n_text")


def write_gemma3n(model: Model, fmt: str, path: str, *, source: bool = False) -> list:
    """The sparse GGUF of ``model`` in ``fmt`` (``source``: the converter's F16/F32 types, for llama-quantize)."""
    import gguf
    tensors = synthesised_tensors(model, fmt)
    rows = [(t.name, t.shape, source_type(t.name, t.shape, "f16") if source else t.dtype) for t in tensors]
    arch, meta = converted_metadata(_text(model))
    meta[f"{arch}.vocab_size"] = model.facts.vocab_size
    writer = gguf.GGUFWriter(path, arch)
    for key, value in meta.items():     # typed as gguf-py's add_* calls of the converter type them
        if isinstance(value, bool):
            writer.add_bool(key, value)
        elif isinstance(value, int):
            writer.add_uint32(key, value)
        elif isinstance(value, float):
            writer.add_float32(key, value)
        else:
            writer.add_array(key, value)
    writer.add_tokenizer_model("none")
    writer.add_file_type(FTYPES["f16" if source else fmt][0])
    write_sparse(writer, rows)
    return list(tensors)


def _gemma3n(rng: random.Random) -> dict:
    n = rng.randint(4, 26)
    n_head = rng.choice((1, 2, 4, 8))
    if n > 20 or rng.random() < 0.5:     # llama.cpp reuses layer 18's cache on sliding layers, 19's on full ones
        types = ["full_attention" if (i + 1) % 5 == 0 else "sliding_attention" for i in range(n)]
    else:
        types = [rng.choice(("full_attention", "sliding_attention")) for _ in range(n)]
    vocab = rng.choice((256, 1000, 2048))
    cfg: dict[str, Any] = dict(
        architectures=["Gemma3nForCausalLM"], model_type="gemma3n_text", num_hidden_layers=n,
        hidden_size=128 * rng.randint(1, 4), head_dim=rng.choice((64, 128, 256)), num_attention_heads=n_head,
        num_key_value_heads=rng.choice([h for h in (1, 2) if n_head % h == 0]),
        intermediate_size=256 * rng.randint(1, 4),
        vocab_size=vocab, vocab_size_per_layer_input=rng.choice((vocab, vocab - 64)), hidden_size_per_layer_input=256,
        laurel_rank=64, altup_num_inputs=4, altup_active_idx=0, altup_coef_clip=120.0, altup_correct_scale=True,
        num_kv_shared_layers=max(0, n - 20), sliding_window=rng.choice((64, 512, 1024)), layer_types=types,
        activation_sparsity_pattern=[0.95] * min(n, 10) + [0.0] * max(0, n - 10), max_position_embeddings=32768,
        rms_norm_eps=1e-6, final_logit_softcapping=30.0, rope_theta=1e6, rope_local_base_freq=1e4,
        tie_word_embeddings=True)
    return cfg


def random_gemma3n_case(seed: int) -> tuple[Model, str, dict]:
    """(model, file type, context) of gemma3n case ``seed``."""
    rng = random.Random(f"graphs/gemma3n/{seed}")
    model = Model.from_hf_config(_gemma3n(rng), name=f"random-gemma3n-{seed}")
    return (model, *random_run(rng, contexts=(256, 1000, 4096, 9000), seqs=(1, 1, 2, 3)))

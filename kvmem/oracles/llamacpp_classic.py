"""falcon, gpt2 and gptneox GGUFs as convert_hf_to_gguf writes them, and random cases of each, for llama.cpp's own
buffers as the judge of kvmem's layout and graphs of these families (kvmem.engines.llamacpp.graphs_classic):
tests/oracles/test_llamacpp_classic_oracle.py loads them in llama.cpp, tests/engines/test_llamacpp_graphs_classic.py
pins what llama.cpp printed for them.

The metadata each converter's set_gguf_parameters writes (llama.cpp@0c1e57098 conversion/falcon.py#L18-L35,
conversion/gpt2.py#L77-L84, conversion/gptneox.py#L20-L30), what load_arch_hparams reads; kvmem's tensors, sparse on
disk. Random cases: falcon (multi-query or grouped, with or without the new decoder's second norm, tied or untied
output), gpt2 (tied, n_ctx rows of positions), gptneox (parallel residual or not, rotary_pct 0.25 - 1), 1-4 layers,
widths a multiple of 64, each with a context (kvmem.oracles.llamacpp_graphs_more.random_run).
"""

from __future__ import annotations

import random
from typing import Any

from ..engines.llamacpp.arch_fields import field
from ..engines.llamacpp.graphs_classic import CLASSIC
from ..engines.llamacpp.quant_mix import FTYPES
from ..engines.llamacpp.tensors import source_type, synthesised_tensors
from ..model import Model
from .llamacpp_buffers import write_sparse
from .llamacpp_graphs_more import random_run

__all__ = ["write_classic", "random_classic_case"]


def _metadata(w, model: Model, arch: str, fmt: str) -> None:
    h, first = model.hidden_size, model.layers[0]
    w.add_block_count(model.num_layers)
    w.add_embedding_length(h)
    w.add_head_count(model.num_attention_heads)
    w.add_vocab_size(model.facts.vocab_size)
    w.add_tokenizer_model("none")
    w.add_file_type(FTYPES[fmt][0])
    if arch == "falcon":
        w.add_context_length(2048)
        w.add_feed_forward_length(4 * h)
        w.add_head_count_kv(first.kv_heads)     # the checkpoint's: conversion/falcon.py#L23-L25, #L49-L57
        w.add_layer_norm_eps(float(field(model, "layer_norm_epsilon", 1e-5)))
    elif arch == "gpt2":
        w.add_context_length(field(model, "n_ctx"))
        w.add_feed_forward_length(4 * h)
        w.add_layer_norm_eps(float(field(model, "layer_norm_epsilon", 1e-5)))
    else:
        w.add_context_length(model.max_position_embeddings or 2048)
        w.add_feed_forward_length(field(model, "intermediate_size"))
        w.add_rope_dimension_count(int(field(model, "rotary_pct", 0.25) * first.head_dim_k))
        w.add_parallel_residual(bool(field(model, "use_parallel_residual", True)))
        w.add_layer_norm_eps(float(field(model, "layer_norm_eps", 1e-5)))


def write_classic(model: Model, fmt: str, path: str, *, source: bool = False) -> list:
    """The sparse GGUF of ``model`` in ``fmt`` (``source``: the converter's F16/F32 types, for llama-quantize)."""
    import gguf
    arch = CLASSIC[model.model_type]
    tensors = synthesised_tensors(model, fmt)
    rows = [(t.name, t.shape, source_type(t.name, t.shape, "f16") if source else t.dtype) for t in tensors]
    writer = gguf.GGUFWriter(path, arch)
    _metadata(writer, model, arch, fmt)
    write_sparse(writer, rows)
    return list(tensors)


def _config(rng: random.Random, kind: str) -> dict:
    n_head = rng.choice((2, 4, 8))
    hd = rng.choice((64, 128))
    h = n_head * hd
    layers, vocab = rng.randint(1, 4), rng.choice((256, 1000, 2048))
    if kind == "falcon":
        new = rng.random() < 0.5
        cfg: dict[str, Any] = dict(architectures=["FalconForCausalLM"], model_type="falcon", hidden_size=h,
                                   num_attention_heads=n_head, num_hidden_layers=layers, vocab_size=vocab,
                                   new_decoder_architecture=new, multi_query=True, parallel_attn=True, bias=False,
                                   alibi=False, layer_norm_epsilon=1e-5,
                                   tie_word_embeddings=rng.random() < 0.5)
        if new:
            cfg["num_kv_heads"] = rng.choice([k for k in (1, 2, 4) if n_head % k == 0])
            cfg["num_ln_in_parallel_attn"] = rng.choice((1, 2))
        return cfg
    if kind == "gpt2":
        n_ctx = rng.choice((256, 1024, 4096))
        return dict(architectures=["GPT2LMHeadModel"], model_type="gpt2", n_embd=h, n_head=n_head, n_layer=layers,
                    n_ctx=n_ctx, n_positions=n_ctx, vocab_size=vocab, layer_norm_epsilon=1e-5,
                    activation_function="gelu_new")
    return dict(architectures=["GPTNeoXForCausalLM"], model_type="gpt_neox", hidden_size=h, num_attention_heads=n_head,
                num_hidden_layers=layers, intermediate_size=256 * rng.randint(1, 4), vocab_size=vocab,
                max_position_embeddings=2048, rotary_pct=rng.choice((0.25, 0.5, 1.0)), rotary_emb_base=10000,
                use_parallel_residual=rng.random() < 0.7, layer_norm_eps=1e-5, hidden_act="gelu",
                tie_word_embeddings=False)


def random_classic_case(seed: int) -> tuple[Model, str, dict]:
    """(model, file type, context) of case ``seed``: falcon, gpt2, gptneox in turn."""
    kind = ("falcon", "gpt2", "gptneox")[seed % 3]
    rng = random.Random(f"graphs/classic/{seed}")
    model = Model.from_hf_config(_config(rng, kind), name=f"random-{kind}-{seed}")
    return (model, *random_run(rng))

"""Jamba and Nemotron-H (jamba, nemotron_h, nemotron_h_moe) GGUFs as convert_hf_to_gguf writes them, and random
cases of each, for llama.cpp's own buffers as the judge of kvmem's layout and graphs (kvmem.engines.llamacpp.
tensors_ssm, graphs_ssm): tests/oracles/test_llamacpp_ssm_oracle.py loads them in llama.cpp,
tests/engines/test_llamacpp_graphs_ssm.py pins what llama.cpp printed for them.

The metadata: conversion/jamba.py#L25-L55 (head_count_kv per layer, ssm.*: inner_size 2 x hidden, dt rank, one
feed_forward_length, expert counts) and conversion/nemotron.py#L325-L365 with conversion/granite.py#L486-L513
(head_count_kv and feed_forward_length per layer, key/value_length the head dim, ssm.* with group_count, the MoE keys,
layer_norm_epsilon: nemotron-h.cpp#L18 requires it).
"""

from __future__ import annotations

import random
import re
from typing import Any

from ..engines.llamacpp.arch_fields import field
from ..engines.llamacpp.quant_mix import FTYPES
from ..engines.llamacpp.tensors import source_type, synthesised_tensors
from ..engines.llamacpp.tensors_ssm import layer_kinds, mtp_block, nemotron_arch, nemotron_mtp, ssm_shape, ssm_vocab
from ..model import Model
from .llamacpp_buffers import llama_lib, printed_buffers, write_sparse
from .llamacpp_graphs_more import random_run

__all__ = ["write_ssm", "random_ssm_case", "printed_with_rs"]

_RS_LINE = re.compile(r"^\S+: +(\S+) RS buffer size = +([0-9.]+) MiB")


def printed_with_rs(path: str, ctx: dict) -> dict:
    """llamacpp_buffers.printed_buffers and the recurrent memory's "<buft> RS buffer size" line ("RS")."""
    out = printed_buffers(path, ctx)
    for line in "".join(llama_lib()[1]).splitlines():
        m = _RS_LINE.match(line.strip())
        if m:
            out["RS"] = float(m.group(2))
    return out


def write_ssm(model: Model, fmt: str, path: str, *, source: bool = False) -> list:
    """The sparse GGUF of ``model`` in ``fmt`` (``source``: the converter's F16/F32 types, for llama-quantize)."""
    import gguf
    arch = "jamba" if model.model_type == "jamba" else nemotron_arch(model)
    s = ssm_shape(model)
    assert s is not None
    tensors = synthesised_tensors(model, fmt)
    rows = [(t.name, t.shape, source_type(t.name, t.shape, "f16") if source else t.dtype) for t in tensors]
    # the MTP block (nemotron_mtp): in the file, counted in block_count, skipped at load (its types: the source's)
    n_mtp = nemotron_mtp(model)
    rows += [(name, ne, source_type(name, ne, "f16")) for name, ne in mtp_block(model, model.hidden_size)] if n_mtp \
        else []
    w = gguf.GGUFWriter(path, arch)
    w.add_context_length(model.max_position_embeddings or 4096)
    w.add_embedding_length(model.hidden_size)
    w.add_block_count(model.num_layers + n_mtp)
    if n_mtp:
        w.add_nextn_predict_layers(n_mtp)
    w.add_head_count(model.num_attention_heads)
    kinds = layer_kinds(s) + "*" * n_mtp       # the MTP block: attention and MoE (conversion/nemotron.py#L264-L267)
    w.add_head_count_kv([s.n_head_kv if k == "*" else 0 for k in kinds])
    w.add_ssm_conv_kernel(s.d_conv)
    w.add_ssm_inner_size(s.d_inner)
    w.add_ssm_state_size(s.d_state)
    w.add_vocab_size(ssm_vocab(model))
    w.add_tokenizer_model("none")
    w.add_file_type(FTYPES[fmt][0])
    if arch == "jamba":
        w.add_feed_forward_length(s.n_ff)
        w.add_ssm_time_step_rank(s.dt_rank)
        w.add_layer_norm_rms_eps(1e-6)
        w.add_expert_count(s.n_expert)
        w.add_expert_used_count(s.n_expert_used)
    else:
        ff = s.n_ff_exp if arch == "nemotron_h_moe" else s.n_ff
        w.add_feed_forward_length([ff if k in "-E" or il >= model.num_layers else 0 for il, k in enumerate(kinds)])
        w.add_key_length(s.head_dim)
        w.add_value_length(s.head_dim)
        w.add_ssm_time_step_rank(s.n_v_heads)
        w.add_ssm_group_count(s.n_k_heads)
        w.add_layer_norm_eps(1e-5)
        w.add_layer_norm_rms_eps(1e-5)
        w.add_rope_freq_base(10000.0)
        if arch == "nemotron_h_moe":
            w.add_expert_used_count(s.n_expert_used)
            w.add_expert_feed_forward_length(s.n_ff_exp)
            w.add_expert_shared_feed_forward_length(s.n_ff_shexp)
            w.add_expert_count(s.n_expert)
            w.add_expert_shared_count(field(model, "n_shared_experts", 1))
            w.add_expert_weights_norm(s.norm_w)
            w.add_expert_weights_scale(float(field(model, "routed_scaling_factor", 1.0)))
            w.add_expert_group_count(field(model, "n_group", 1))
            w.add_uint32(f"{arch}.expert_gating_func", 2)       # sigmoid (the graph passes it anyway)
            if s.latent:
                w.add_uint32(f"{arch}.moe_latent_size", s.latent)
    write_sparse(w, rows)
    return list(tensors)


def _jamba(rng: random.Random) -> dict:
    n_head = rng.choice((2, 4, 8))
    h = n_head * rng.choice((32, 64))       # the heads n_embd / n_head wide: whole blocks of a quantised cache
    return dict(architectures=["JambaForCausalLM"], model_type="jamba", num_hidden_layers=rng.randint(2, 10),
                hidden_size=h, num_attention_heads=n_head,
                num_key_value_heads=rng.choice([k for k in (1, 2, 4) if n_head % k == 0]),
                intermediate_size=128 * rng.randint(1, 4), attn_layer_offset=rng.randint(0, 3),
                attn_layer_period=rng.choice((2, 4, 8)), expert_layer_offset=1, expert_layer_period=2,
                num_experts=rng.choice((2, 4, 16)), num_experts_per_tok=rng.choice((1, 2)), mamba_d_conv=4,
                mamba_d_state=16, mamba_expand=2, mamba_dt_rank=rng.choice((16, 32, 256)), mamba_conv_bias=True,
                mamba_proj_bias=False, vocab_size=rng.choice((256, 1000, 2048)), max_position_embeddings=65536,
                rms_norm_eps=1e-6, tie_word_embeddings=False)


def _nemotron(rng: random.Random, moe: bool) -> dict:
    n = rng.randint(3, 10)
    ffn = "E" if moe else "-"
    pattern = "".join(rng.choice(("M", "M", "*", ffn)) for _ in range(n))
    n_head = rng.choice((2, 4, 8))
    cfg: dict[str, Any] = dict(
        architectures=["NemotronHForCausalLM"], model_type="nemotron_h", num_hidden_layers=n,
        hybrid_override_pattern=pattern, hidden_size=128 * rng.randint(1, 4), num_attention_heads=n_head,
        num_key_value_heads=rng.choice([k for k in (1, 2) if n_head % k == 0]), head_dim=rng.choice((64, 128)),
        intermediate_size=128 * rng.randint(1, 4), mamba_num_heads=rng.choice((4, 8, 16)),
        mamba_head_dim=rng.choice((16, 32, 64)), n_groups=rng.choice((1, 2, 4)), ssm_state_size=rng.choice((16, 64)),
        conv_kernel=4, expand=2, use_conv_bias=True, mamba_proj_bias=False, attention_bias=False, mlp_bias=False,
        vocab_size=rng.choice((256, 1000, 2048)), max_position_embeddings=65536, rms_norm_eps=1e-5,
        layer_norm_epsilon=1e-5, tie_word_embeddings=False)
    if moe:
        cfg.update(n_routed_experts=rng.choice((4, 8, 16)), num_experts_per_tok=rng.choice((1, 2, 3)),
                   moe_intermediate_size=64 * rng.randint(1, 4), moe_shared_expert_intermediate_size=128,
                   n_shared_experts=1, n_group=1, topk_group=1, norm_topk_prob=rng.random() < 0.7,
                   routed_scaling_factor=rng.choice((1.0, 2.5)))
    return cfg


def random_ssm_case(seed: int, kind: str) -> tuple[Model, str, dict]:
    """(model, file type, context) of case ``seed`` of ``kind`` ("jamba", "nemotron_h", "nemotron_h_moe")."""
    rng = random.Random(f"graphs/ssm/{kind}/{seed}")
    cfg = _jamba(rng) if kind == "jamba" else _nemotron(rng, kind == "nemotron_h_moe")
    model = Model.from_hf_config(cfg, name=f"random-{kind}-{seed}")
    return (model, *random_run(rng, contexts=(256, 1000, 4096), seqs=(1, 1, 2, 3)))

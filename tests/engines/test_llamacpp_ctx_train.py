"""n_ctx_train as llama.cpp 0c1e57098's converter writes it (kvmem/engines/llamacpp/ctx_train.py): a constant for
falcon, the Mamba models, a granite hybrid without RoPE and hunyuan's dynamic RoPE, whatever the config says; the
config's max_position_embeddings for the rest. It bounds llama.cpp's warning, llama-server's slots and max_context."""

from __future__ import annotations

import json

import kvmem
from kvmem.catalog import preset
from kvmem.engines.llamacpp.ctx_train import n_ctx_train, trained_context
from kvmem.engines.llamacpp.own_flags import own_flags
from kvmem.model import Model


def falcon_8k() -> Model:
    # falcon-7b's config with max_position_embeddings 8192: conversion/falcon.py#L27 still writes context_length 2048
    cfg = json.loads(json.dumps(preset("falcon-7b")["config"]))
    cfg["max_position_embeddings"] = 8192
    return Model.from_hf_config(cfg, name="falcon-7b-8k")


def _hybrid(model_type, **extra) -> Model:
    return Model.from_hf_config({**dict(model_type=model_type, num_hidden_layers=4, hidden_size=1024,
                                        num_attention_heads=8, num_key_value_heads=2, mamba_n_heads=32, mamba_d_head=64,
                                        mamba_n_groups=1, mamba_d_state=64, mamba_d_conv=4, mamba_expand=2,
                                        intermediate_size=2048, vocab_size=100, max_position_embeddings=131072),
                                 **extra}, name=model_type)


def test_the_converters_constants():
    assert n_ctx_train(falcon_8k()) == n_ctx_train(kvmem.get_model("falcon-7b")) == 2048
    assert trained_context(kvmem.get_model("llama-3.1-8b")) == (131072, "max_position_embeddings")
    # GraniteHybridModel: 2**20 over max_position_embeddings where it has Mamba2 layers and is not Bamba
    # (conversion/granite.py#L515-L521); Bamba keeps RoPE and the config's 131,072
    granite = _hybrid("granitemoehybrid", layer_types=["mamba", "attention", "mamba", "mamba"],
                      architectures=["GraniteMoeHybridForCausalLM"])
    assert n_ctx_train(granite) == 1_048_576
    attention_only = _hybrid("granitemoehybrid", layer_types=["attention"] * 4,
                             architectures=["GraniteMoeHybridForCausalLM"])
    assert n_ctx_train(attention_only) == 131072
    assert n_ctx_train(_hybrid("bamba", attn_layer_indices=[1], architectures=["BambaForCausalLM"])) == 131072
    # MambaModel writes 2**20 (conversion/mamba.py#L63); HunYuanModel 256k for dynamic (NTK alpha) RoPE
    # (conversion/hunyuan.py#L268-L271), the config's 32,768 otherwise
    mamba = Model.from_hf_config(dict(model_type="mamba", num_hidden_layers=2, hidden_size=768, state_size=16,
                                      conv_kernel=4, expand=2, vocab_size=100, intermediate_size=1536), name="mamba")
    assert n_ctx_train(mamba) == 1_048_576
    hunyuan = dict(model_type="hunyuan_v1_dense", num_hidden_layers=2, hidden_size=1024, num_attention_heads=8,
                   num_key_value_heads=2, head_dim=128, intermediate_size=2048, vocab_size=100,
                   max_position_embeddings=32768)
    assert n_ctx_train(Model.from_hf_config(hunyuan, name="hunyuan")) == 32768
    dynamic = dict(hunyuan, rope_scaling={"type": "dynamic", "alpha": 1000.0})
    assert n_ctx_train(Model.from_hf_config(dynamic, name="hunyuan-dynamic")) == 262_144


def test_an_8k_falcon_config_is_warned_past_2048():
    # llama.cpp: "n_ctx_seq (8192) > n_ctx_train (2048) -- possible training context overflow"; kvmem said nothing
    # (8,192 <= the config's 8,192); vLLM reads the config and says nothing still
    notes = kvmem.estimate(falcon_8k(), engine="llama.cpp", tokens=8192, n_ctx=8192).notes
    assert len(notes) == 1 and notes[0].startswith("8,192 tokens exceed the model's 2,048 positions (n_ctx_train: "
                                                   "llama.cpp's converter writes 2,048 whatever the config says, "
                                                   "conversion/falcon.py#L27)")
    assert not kvmem.estimate(falcon_8k(), engine="vllm", tokens=8192).notes


def test_max_context_stops_at_n_ctx_train():
    # every layer on one H100 at 1,024 tokens: the longest context llama-server gives a slot is n_ctx_train 2,048
    # (tools/server/server-context.cpp n_ctx_slot), as for falcon-7b itself; kvmem answered 8,192
    fit = kvmem.fit(falcon_8k(), gpu="h100-sxm-80gb", context=1024, engine="llama.cpp", weight_dtype="q4_k_m")
    assert fit.max_context == 2048
    assert "max_context stops at the model's n_ctx_train: llama.cpp's converter writes 2,048 whatever the config " \
           "says, conversion/falcon.py#L27 (2,048)" in fit.notes


def test_server_slots_are_capped_at_n_ctx_train():
    # -c 8192 -np 1: one slot of min(8,192, 2,048) cells, which holds no 8,192-token sequence (kvmem: 1 of 8,192)
    for model in (falcon_8k(), "falcon-7b"):
        got = own_flags(model, ["h100-sxm-80gb"], llama_args="-ngl 99 -c 8192 -np 1 -fa on", context=8192,
                        weight_dtype="q4_k_m")
        assert (got.n_ctx, got.n_seq, got.pool_sequences, got.slot_context) == (8192, 1, 0, 2048)

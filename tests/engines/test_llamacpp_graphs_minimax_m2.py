"""llama.cpp's minimax-m2 compute graph (kvmem/engines/llamacpp/graphs_minimax_m2.py: MiniMax-M2 / M2.1 / M2.5): the
CPU compute buffers llama.cpp 0c1e57098 printed (llama-cpp-python 0.3.36: tests/oracles/
test_llamacpp_graphs_minimax_m2_oracle.py, and kvmem.oracles.llamacpp_presets.load with no_alloc on the preset's full
shape), pinned here so they hold without llama.cpp; the shape read from the config, and where llama.cpp builds no such
graph; the weight names a placement can move; the GPU schedule of reduced layers equal to the whole graph's."""

import random

import pytest

import kvmem
from kvmem.engines.llamacpp import scheduled
from kvmem.engines.llamacpp.compute import graph_shape
from kvmem.engines.llamacpp.layouts import layout
from kvmem.engines.llamacpp.placement import buffer_mib
from kvmem.engines.llamacpp.scheduled import graph_weight_names
from kvmem.engines.llamacpp.tensors import tensors_for
from kvmem.oracles.llamacpp_graphs_more import random_minimax_m2_case
from tests.engines.test_llamacpp_graphs_glm4moe import cpu_compute, random_offload

# "CPU compute buffer size" llama.cpp printed for MiniMax-M2.5's full shape (a sparse Q4_K_M GGUF written by
# kvmem.oracles.llamacpp_family_files, no_alloc: the prompt graph's reserve), f16 cache, one sequence
PRESET = [(4096, 512, True, 402.75), (32768, 512, False, 3182.01), (65536, 2048, True, 1611.01),
          (131072, 512, True, 402.75)]


@pytest.mark.parametrize("n_ctx, n_ubatch, flash_attn, printed", PRESET)
def test_preset_cpu_compute_buffer_is_llamacpps(n_ctx, n_ubatch, flash_attn, printed):
    got = cpu_compute(kvmem.get_model("minimax-m2.5"), n_ctx, n_ubatch, flash_attn)
    assert got.exact and buffer_mib(got.bytes) == printed


# the four decimals ~llama_context printed for kvmem.oracles.llamacpp_graphs_more.random_minimax_m2_case(seed): softmax
# routing (0, 1, 3, 4, 6), sigmoid (the others), quantised and f32 caches, 1-4 sequences, unified streams, ubatches
# of 1 to 512
SEEDS = {0: "9.5098", 1: "0.0705", 2: "0.4850", 3: "0.0802", 4: "0.1423", 5: "8.2760", 6: "1.6881", 7: "1.7534",
         8: "1.5944", 9: "3.6299", 10: "0.2776", 11: "2.1899"}


@pytest.mark.parametrize("seed", sorted(SEEDS))
def test_random_minimax_m2_cases_are_llamacpps(seed):
    model, _fmt, ctx = random_minimax_m2_case(seed)
    got = cpu_compute(model, ctx["n_ctx"], ctx["n_ubatch"], bool(ctx["flash_attn"]), ctx["type_k"], ctx["type_v"],
                      ctx["n_seq"], ctx["kv_unified"])
    assert got.exact and f"{got.bytes / 1048576.0:.4f}" == SEEDS[seed]


def test_shape_read_from_the_config():
    # config.json: 62 layers, 48 heads of 128, 8 KV heads, 256 experts of 1536, 8 used, scoring_func sigmoid
    s = graph_shape(kvmem.get_model("minimax-m2.5"))
    assert (s.arch, s.n_layer, s.n_head, s.n_head_kv, s.head_dim, s.n_expert, s.n_expert_used, s.n_ff_exp) == (
        "minimax-m2", 62, 48, 8, 128, 256, 8, 1536)
    assert (s.gating, s.probs_bias, s.norm_w, s.scale_w, s.n_ff, s.qk_norm) == ("sigmoid", True, True, False, 0, True)


@pytest.mark.parametrize("change", [dict(scoring_func=None), dict(scoring_func="sqrtsoftplus"),
                                    dict(use_qk_norm=False)])
def test_graphs_llamacpp_does_not_build_are_none(change):
    # no scoring_func: conversion writes no expert_gating_func, and build_moe_ffn aborts on NONE; a function it does not
    # convert; no Q/K norms: minimax-m2.cpp creates and applies them unconditionally
    cfg = {k: v for k, v in {**kvmem.get_model("minimax-m2.5").config, **change}.items() if v is not None}
    assert graph_shape(kvmem.Model.from_hf_config(cfg, name="changed")) is None


def test_weight_names_are_the_files():
    per_layer, output = graph_weight_names(graph_shape(kvmem.get_model("minimax-m2.5")))
    assert per_layer - {"token_embd"} == {"attn_norm", "attn_q", "attn_k", "attn_v", "attn_q_norm", "attn_k_norm", "attn_output",
                         "ffn_norm", "ffn_gate_inp", "exp_probs_b.bias", "ffn_up_exps", "ffn_gate_exps",
                         "ffn_down_exps"}
    assert output == {"output_norm", "output"}


def test_partial_offload_is_scheduled():
    # -ngl 20 and --n-cpu-moe 40 on one 24 GB card: every buffer the scheduled graph's, marked exact (the estimate
    # before this graph)
    model = kvmem.get_model("minimax-m2.5")
    tensors, _ = tensors_for(model, "q4_k_m")
    for flags in (dict(n_gpu_layers=20), dict(n_cpu_moe=40)):
        lay = layout(model, tensors, gpus=("rtx-3090-24gb",), n_ctx=32768, flash_attn=True, **flags)
        assert lay.compute_exact == {"rtx-3090-24gb": True, "CPU": True}


def test_reduced_layers_keep_every_buffer_of_minimax_m2():
    # the GPU schedule of the whole graph equals that of the graph with runs of equal layers cut, on 1-3 GPUs with
    # some experts on the host
    rng = random.Random(43)
    shorter = 0
    for i in range(6):
        model, _fmt, _ctx = random_minimax_m2_case(i)
        shape, kw, whole = random_offload(rng, graph_shape(model))
        assert scheduled.gpu_graph_bytes(shape, **kw) == whole, (i, shape, kw)
        shorter += scheduled.reduced_layers(shape, kw["layer_gpu"], kw["weights"])[0].n_layer < shape.n_layer
    assert shorter >= 3

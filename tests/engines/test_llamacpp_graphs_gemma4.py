"""llama.cpp's gemma4 compute graph (kvmem/engines/llamacpp/graphs_gemma4.py): the CPU compute buffers llama.cpp
0c1e57098 printed (llama-cpp-python 0.3.36: tests/oracles/test_llamacpp_graphs_more_oracle.py, and
kvmem.oracles.llamacpp_presets.load with no_alloc on the preset's full shape), pinned here so they hold without
llama.cpp; the shape read from the config; a GPU layout's buffers scheduled; reduced layers equal to the whole graph."""

import random

import pytest

import kvmem
from kvmem.engines.llamacpp import scheduled
from kvmem.engines.llamacpp.compute import graph_shape, llamacpp_compute_buffer
from kvmem.engines.llamacpp.layouts import layout
from kvmem.engines.llamacpp.placement import buffer_mib
from kvmem.engines.llamacpp.scheduled import expert_weights, graph_weight_names
from kvmem.engines.llamacpp.tensors import tensors_for
from kvmem.oracles.llamacpp_graphs_more import random_gemma4_case


def cpu_compute(model, n_ctx, n_ubatch, flash_attn, type_k="f16", type_v="f16", n_seq=1, kv_unified=False,
                swa_full=False):
    d = kvmem.estimate(model, engine="llama.cpp", tokens=1, n_ctx=n_ctx, n_seq=n_seq, kv_unified=kv_unified,
                       swa_full=swa_full, type_k=type_k, type_v=type_v, flash_attn=flash_attn, n_ubatch=n_ubatch,
                       n_batch=n_ctx).details
    return llamacpp_compute_buffer(model, n_ctx=d.n_ctx, n_ubatch=d.n_ubatch, cells_per_stream=d.cells,
                                   flash_attn=flash_attn, type_k=type_k, type_v=type_v, n_outputs=d.n_batch,
                                   n_seq=n_seq, kv_unified=kv_unified, swa_cells=d.swa_cells, backend="cpu")


# "CPU compute buffer size" llama.cpp printed for Gemma 4 26B-A4B's full shape (a sparse Q4_K_M GGUF written by
# kvmem.oracles.llamacpp_family_files, no_alloc: the prompt graph's reserve), f16 cache, one sequence, swa_full off
PRESETS = [(4096, 512, True, 538.15), (32768, 512, False, 1167.64), (65536, 2048, True, 2130.51),
           (262144, 512, True, 532.63)]


@pytest.mark.parametrize("n_ctx, n_ubatch, flash_attn, printed", PRESETS)
def test_preset_cpu_compute_buffer_is_llamacpps(n_ctx, n_ubatch, flash_attn, printed):
    got = cpu_compute(kvmem.get_model("gemma-4-26b-a4b"), n_ctx, n_ubatch, flash_attn)
    assert got.exact and buffer_mib(got.bytes) == printed


# the four decimals ~llama_context printed for kvmem.oracles.llamacpp_graphs_more.random_gemma4_case(seed): K = V on
# full layers (2, 5, 8, 12, 13), the MoE block or not, full heads as wide as the sliding ones or twice, 2-4 sequences,
# unified (2, 5, 7, 14), quantised caches
SEEDS = {0: "4.2546", 1: "0.0779", 2: "6.2534", 3: "0.2455", 4: "0.2383", 5: "16.0215", 6: "0.1408", 7: "1.0940",
         8: "0.0802", 9: "0.7684", 10: "0.6102", 11: "2.3804", 12: "0.4299", 13: "10.5215", 14: "29.0704"}


@pytest.mark.parametrize("seed", sorted(SEEDS))
def test_random_gemma4_cases_are_llamacpps(seed):
    model, _fmt, ctx = random_gemma4_case(seed)
    got = cpu_compute(model, ctx["n_ctx"], ctx["n_ubatch"], bool(ctx["flash_attn"]), ctx["type_k"], ctx["type_v"],
                      ctx["n_seq"], ctx["kv_unified"], ctx["swa_full"])
    assert got.exact and f"{got.bytes / 1048576.0:.4f}" == SEEDS[seed]


def test_shape_read_from_the_config():
    s = graph_shape(kvmem.get_model("gemma-4-26b-a4b"))
    # text_config: 30 layers, every 6th full (global_head_dim 512, 2 global KV heads, attention_k_eq_v), sliding
    # head_dim 256 with 8 KV heads, the MoE block (128 experts of 704, 8 used) beside a dense FFN of 2112, softcap 30
    assert (s.arch, s.n_layer, s.swa[:6], sum(s.swa)) == ("gemma4", 30, (True,) * 5 + (False,), 25)
    assert (s.head_dim, s.n_head_kv, s.swa_head_dim, s.swa_n_head_kv, s.k_eq_v) == (512, 2, 256, 8, True)
    assert (s.n_ff, s.n_expert, s.n_expert_used, s.n_ff_exp, s.final_softcap) == (2112, 128, 8, 704, True)


def test_weight_names_cover_the_moe_block():
    per_layer, output = graph_weight_names(graph_shape(kvmem.get_model("gemma-4-26b-a4b")))
    assert {"ffn_gate_up_exps", "ffn_down_exps", "ffn_down_exps.scale", "ffn_gate_inp", "ffn_gate_inp.scale",
            "pre_ffw_norm_2", "post_ffw_norm_1", "post_ffw_norm_2", "post_ffw_norm", "layer_output_scale", "attn_v",
            "attn_q_norm", "attn_k_norm", "ffn_up", "ffn_gate", "ffn_down"} <= per_layer
    assert output == {"output_norm", "output"}


@pytest.mark.parametrize("flags", [dict(n_gpu_layers=20), dict(n_cpu_moe=10), dict(n_gpu_layers=0)])
def test_gpu_layouts_are_scheduled(flags):
    # -ngl 20 / --n-cpu-moe 10 / -ngl 0 on one 24 GB card at 32k: every device's buffer from the scheduled graph
    model = kvmem.get_model("gemma-4-26b-a4b")
    tensors, _ = tensors_for(model, "q4_k_m")
    lay = layout(model, tensors, gpus=("rtx-3090-24gb",), n_ctx=32768, flash_attn=True, **flags)
    assert lay.compute_exact == {"rtx-3090-24gb": True, "CPU": True}


def test_reduced_layers_keep_every_buffer_of_gemma4():
    # the GPU schedule of the whole graph equals that of the graph with runs of equal layers cut (sliding and full
    # layers apart), on 1-3 GPUs with some experts on the host
    rng = random.Random(7)
    for i in range(6):
        model, _fmt, _ctx = random_gemma4_case(i)
        shape = graph_shape(model)
        n = rng.randint(12, 24)
        shape = type(shape)(**{**shape.__dict__, "n_layer": n,
                               "swa": tuple((il + 1) % 6 != 0 and il != n - 1 for il in range(n))})
        n_gpus = rng.randint(1, 3)
        cuts = sorted(rng.randint(0, n) for _ in range(n_gpus - 1))
        layer_gpu = tuple(sum(il >= c for c in cuts) for il in range(n)) + (n_gpus - 1,)
        experts = [((il, down), 50_000) for il in range(rng.randint(0, n)) for down in (True, False)] \
            if shape.n_expert else []
        fa = rng.random() < 0.5
        kw = dict(layer_gpu=layer_gpu, n_gpus=n_gpus, n_kv=rng.choice([256, 1024]), n_ubatch=rng.choice([1, 64, 512]),
                  flash_attn=fa, type_k="f16", type_v="f16", n_seq=1, swa_cells=256,
                  weights=tuple((key, where) for key, where in expert_weights(experts, n_gpus)
                                if key[1] == "ffn_down_exps"))
        whole = scheduled._gpu_graph_bytes(shape, layer_gpu, n_gpus, kw["n_kv"], kw["n_ubatch"], fa, "f16", "f16",
                                           None, 1, False, 256, 1, True, kw["weights"], True)
        assert scheduled.gpu_graph_bytes(shape, **kw) == whole, (i, shape, kw)

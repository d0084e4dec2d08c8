"""llama.cpp's minimax-m3 compute graph (kvmem/engines/llamacpp/graphs_minimax_m3.py: MiniMax-M3's text model, MSA): the
CPU compute buffers llama.cpp 0c1e57098 printed (llama-cpp-python 0.3.36: tests/oracles/
test_llamacpp_graphs_minimax_m3_oracle.py, and kvmem.oracles.llamacpp_presets.load with no_alloc on the preset's full
shape), pinned here so they hold without llama.cpp; the shape read from the config, and where kvmem builds no such
graph; the weight names a placement can move; the GPU schedule of reduced layers equal to the whole graph's."""

import random
from dataclasses import replace

import pytest

import kvmem
from kvmem.engines.llamacpp import scheduled
from kvmem.engines.llamacpp.compute import graph_shape, llamacpp_compute_buffer
from kvmem.engines.llamacpp.graphs_minimax_m3 import filled
from kvmem.engines.llamacpp.layouts import layout
from kvmem.engines.llamacpp.placement import buffer_mib
from kvmem.engines.llamacpp.scheduled import graph_weight_names
from kvmem.engines.llamacpp.tensors import tensors_for
from kvmem.oracles.llamacpp_minimax_m3_cases import minimax_m3_cut, random_minimax_m3_case
from tests.engines.test_llamacpp_graphs_glm4moe import cpu_compute, random_offload

# "CPU compute buffer size" llama.cpp printed for MiniMax-M3's full shape (a sparse Q4_K_M GGUF written by
# kvmem.oracles.llamacpp_minimax01.write_minimax_m3, no_alloc: the prompt graph's reserve), f16 cache, one sequence;
# with flash attention the MSA block mask over every cell: 2513.02 MiB at 131072 cells, -ub 512
PRESET = [(4096, 512, True, 491.29), (32768, 512, False, 4258.76), (65536, 2048, True, 5186.34),
          (131072, 512, True, 2513.02)]
# the four decimals ~llama_context printed for MiniMax-M3 cut to 4 layers (minimax_m3_cut: 3 dense, 1 sparse):
# (n_ctx, n_ubatch, flash attention, cache type, sequences, kv_unified)
CUT = {(4096, 512, 1, "f16", 1, False): "426.7520", (4096, 512, 0, "f16", 1, False): "590.0098",
       (4096, 512, 1, "f16", 2, False): "489.2891", (4096, 512, 1, "f16", 2, True): "426.7520",
       (4096, 1, 1, "f16", 1, False): "1.1672", (1000, 7, 1, "f16", 1, False): "6.6805"}
# and for kvmem.oracles.llamacpp_minimax_m3_cases.random_minimax_m3_case(seed): MSA on (2, 3, 4, 12, 16, 17, 18, 23, 30,
# 38: prompts of 1-4 streams, one token per stream, quantised caches; 44, 61: blocks of 96), dense with flash attention
# off (5, 9) and with 2 sequences in one unified stream (0)
SEEDS = {0: "0.9060", 2: "0.2727", 3: "8.4600", 4: "5.1697", 5: "22.1348", 9: "5.4338", 12: "3.0598", 16: "0.1299",
         17: "1.0658", 18: "5.5938", 23: "0.5511", 30: "0.2913", 38: "0.4328", 44: "10.9531", 61: "0.2038"}


def _base() -> dict:
    return dict(kvmem.get_model("minimax-m3").config)


@pytest.mark.parametrize("n_ctx, n_ubatch, flash_attn, printed", PRESET)
def test_preset_cpu_compute_buffer_is_llamacpps(n_ctx, n_ubatch, flash_attn, printed):
    got = cpu_compute(kvmem.get_model("minimax-m3"), n_ctx, n_ubatch, flash_attn)
    assert got.exact and buffer_mib(got.bytes) == printed


@pytest.mark.parametrize("case", sorted(CUT))
def test_preset_cut_to_four_layers_is_llamacpps(case):
    n_ctx, n_ubatch, fa, type_k, n_seq, unified = case
    got = cpu_compute(minimax_m3_cut(_base(), 4), n_ctx, n_ubatch, bool(fa), type_k, type_k, n_seq, unified)
    assert got.exact and f"{got.bytes / 1048576.0:.4f}" == CUT[case]


@pytest.mark.parametrize("seed", sorted(SEEDS))
def test_random_minimax_m3_cases_are_llamacpps(seed):
    model, ctx = random_minimax_m3_case(seed, _base())
    got = cpu_compute(model, ctx["n_ctx"], ctx["n_ubatch"], bool(ctx["flash_attn"]), ctx["type_k"], ctx["type_v"],
                      ctx["n_seq"], ctx["kv_unified"])
    assert got.exact and f"{got.bytes / 1048576.0:.4f}" == SEEDS[seed]


def test_shape_read_from_the_config():
    # text_config: 60 layers (moe_layer_freq: 3 dense first), 64 heads of 128, 4 KV heads, 128 experts of 3072, 4 used,
    # one shared, sigmoid routing scaled by 2; sparse_attention_config: 4 indexer heads of 128, blocks of 128, top 16
    s = graph_shape(kvmem.get_model("minimax-m3"))
    assert (s.arch, s.n_layer, s.n_head, s.n_head_kv, s.head_dim, s.n_expert, s.n_expert_used, s.n_ff_exp) == (
        "minimax-m3", 60, 64, 4, 128, 128, 4, 3072)
    assert (s.n_dense_lead, s.n_ff, s.n_ff_shexp, s.gating, s.probs_bias, s.norm_w, s.scale_w) == (
        3, 12288, 3072, "sigmoid", True, True, True)
    assert (s.n_indexer_head, s.indexer_head, s.msa_block, s.indexer_top_k) == (4, 128, 128, 16)


@pytest.mark.parametrize("change", [dict(scoring_func="sqrtsoftplus"), dict(qk_norm_type="per_layer"),
                                    dict(sparse={"sparse_num_index_heads": 2})])
def test_graphs_kvmem_does_not_build_are_none(change):
    # a gating function moe_ffn does not build; Q/K norms of another kind; indexer heads other than the KV heads
    # (llama.cpp aborts reserving the MSA graph: GGML_ASSERT(HKV == Hd))
    assert graph_shape(minimax_m3_cut(_base(), 4, name="changed", **change)) is None


def test_weight_names_are_the_files():
    per_layer, output = graph_weight_names(graph_shape(kvmem.get_model("minimax-m3")))
    names = {t.name.split(".", 2)[2].removesuffix(".weight") for t in tensors_for(kvmem.get_model("minimax-m3"),
                                                                                  "q4_k_m")[0]
             if t.name.startswith("blk.")}
    assert per_layer - {"token_embd"} == names
    assert output == {"output_norm", "output"}


def test_partial_offload_is_scheduled():
    # -ngl 20 and --n-cpu-moe 40 on one 24 GB card: every buffer the scheduled graph's, marked exact (the estimate
    # before this graph)
    model = kvmem.get_model("minimax-m3")
    tensors, _ = tensors_for(model, "q4_k_m")
    for flags in (dict(n_gpu_layers=20), dict(n_cpu_moe=40)):
        lay = layout(model, tensors, gpus=("rtx-3090-24gb",), n_ctx=32768, flash_attn=True, **flags)
        assert lay.compute_exact == {"rtx-3090-24gb": True, "CPU": True}


def test_reduced_layers_keep_every_buffer_of_minimax_m3():
    # scheduled.reduced_layers cuts no layer of minimax-m3 (with MSA a GPU's buffer grows by each sparse layer's copies
    # of the MSA inputs' views), so gpu_graph_bytes is the whole graph's, on 1-3 GPUs with some experts on the host,
    # MSA on and off
    rng = random.Random(47)
    for i in range(6):
        model, _ctx = random_minimax_m3_case(i, _base())
        shape, kw, whole = random_offload(rng, graph_shape(model), flash_attn=i % 3 != 0)
        assert scheduled.gpu_graph_bytes(shape, **kw) == whole, (i, shape, kw)
        assert scheduled.reduced_layers(shape, kw["layer_gpu"], kw["weights"])[0].n_layer == shape.n_layer


@pytest.mark.parametrize("n_ctx, grown", [(4096, None), (32768, 752.77), (131072, 2771.02)])
def test_a_layout_takes_the_buffer_a_full_cache_needs(n_ctx, grown):
    # llama.cpp prints the reserve over 256 positions and grows the buffer as a prompt fills the cache: a host
    # layout's buffer is the larger of the two (graphs_minimax_m3.filled), the printed one named beside it; at 4k the
    # full cache's graph packs into less and the printed reserve stands (-ub 512, flash attention, one sequence)
    model = kvmem.get_model("minimax-m3")
    printed = cpu_compute(model, n_ctx, 512, True)
    d = kvmem.estimate(model, engine="llama.cpp", tokens=1, n_ctx=n_ctx, flash_attn=True, n_ubatch=512,
                       n_batch=n_ctx).details
    got = llamacpp_compute_buffer(model, n_ctx=d.n_ctx, n_ubatch=512, cells_per_stream=d.cells, flash_attn=True,
                                  n_outputs=d.n_batch, backend="cpu")
    if grown is None:
        assert got == printed
    else:
        assert got.exact and round(got.bytes / 2**20, 2) == grown > printed.bytes / 2**20
        assert f"context creation prints {printed.bytes / 2**20:,.2f} MiB" in got.note
    # GPUs keep the printed reserve (the module doc: the full cache's per-layer input copies are not checked against
    # CUDA): the graph of no position and of one position are one graph
    shape = graph_shape(model)
    args = dict(layer_gpu=(0,) * (shape.n_layer + 1), n_gpus=1, n_kv=d.cells, n_ubatch=512, flash_attn=True)
    assert scheduled.gpu_graph_bytes(shape, **args) == scheduled.gpu_graph_bytes(replace(shape, msa_pos=1), **args)
    assert filled(shape, d.cells).msa_pos == d.cells


def test_a_host_layout_sizes_the_grown_buffer_and_predicts_the_printed_one():
    # host only at 32k (-ub 512, flash attention): the layout holds the full cache's 752.77 MiB, while llama.cpp prints
    # the reserve over 256 positions at context creation (688.65 MiB): the predicted start-up line gives that one, and
    # check-log matches it against the layout
    from kvmem.engines.llamacpp.own_flags_record import start_up_lines
    from kvmem.logcheck import check_log
    model = kvmem.get_model("minimax-m3")
    lay = layout(model, tensors_for(model, "q4_k_m")[0], gpus=(), n_ctx=32768, flash_attn=True)
    assert (buffer_mib(lay.compute_bytes["CPU"]), buffer_mib(lay.printed_compute_bytes("CPU"))) == (752.77, 688.65)
    lines = start_up_lines(lay)
    assert "sched_reserve:        CPU compute buffer size =   688.65 MiB" in lines
    text = "\n".join(["llama-server -m MiniMax-M3-Q4_K_M.gguf -c 32768 -fa on -np 1",
                      "print_info: file type   = Q4_K - Medium", *lines])
    checks = {c.quantity: c for c in check_log(text, model="minimax-m3").checks}
    assert checks["CPU compute buffer"].matches and checks["CPU compute buffer"].kvmem == "688.65 MiB"
    # a buffer that does not grow prints what the layout holds (no printed figure kept apart): 4k
    small = layout(model, tensors_for(model, "q4_k_m")[0], gpus=(), n_ctx=4096, flash_attn=True)
    assert small.printed_compute == {} and small.printed_compute_bytes("CPU") == small.compute_bytes["CPU"]

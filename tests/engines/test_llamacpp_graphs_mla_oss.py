"""llama.cpp's deepseek2 (MLA) and gpt-oss compute graphs (kvmem/engines/llamacpp/graphs_mla_oss.py): the CPU
compute buffers llama.cpp 0c1e57098 printed (llama-cpp-python 0.3.36, tests/oracles/test_llamacpp_graphs_oracle.py
and kvmem.oracles.llamacpp_presets.load with no_alloc on the presets' full shapes), pinned here so they hold
without llama.cpp; and the GPU scheduling of the same graphs (reduced layers equal to the whole graph)."""

import random

import pytest

import kvmem
from kvmem.engines.llamacpp import scheduled
from kvmem.engines.llamacpp.compute import graph_shape, llamacpp_compute_buffer
from kvmem.engines.llamacpp.placement import buffer_mib
from kvmem.engines.llamacpp.scheduled import expert_weights, graph_weight_names
from kvmem.oracles.llamacpp_graphs import random_graph_case


def cpu_compute(model, n_ctx, n_ubatch, flash_attn, type_k="f16", type_v="f16", n_seq=1, kv_unified=False,
                 swa_full=False):
    kv = kvmem.estimate(model, engine="llama.cpp", tokens=1, n_ctx=n_ctx, n_seq=n_seq, kv_unified=kv_unified,
                        swa_full=swa_full, type_k=type_k, type_v=type_v, flash_attn=flash_attn, n_ubatch=n_ubatch,
                        n_batch=n_ctx)
    d = kv.details
    return llamacpp_compute_buffer(model, n_ctx=d.n_ctx, n_ubatch=d.n_ubatch, cells_per_stream=d.cells,
                                   flash_attn=flash_attn, type_k=type_k, type_v=type_v, n_outputs=d.n_batch,
                                   n_seq=n_seq, kv_unified=kv_unified, swa_cells=d.swa_cells, backend="cpu")


# "CPU compute buffer size" llama.cpp printed for the presets' full shapes (sparse GGUFs written by
# kvmem.oracles.llamacpp_family_files, loaded with no_alloc: the prompt graph's reserve), f16 cache, one sequence
PRESETS = [("deepseek-v2-lite", 4096, 512, True, 240.26), ("deepseek-v2-lite", 4096, 512, False, 240.26),
           ("deepseek-v2-lite", 32768, 2048, True, 961.05), ("deepseek-v2-lite", 32768, 512, False, 1174.01),
           ("gpt-oss-20b", 4096, 512, True, 414.40), ("gpt-oss-20b", 4096, 512, False, 558.39),
           ("gpt-oss-20b", 32768, 2048, True, 1638.51), ("gpt-oss-120b", 32768, 512, False, 4198.39),
           ("deepseek-v3", 4096, 512, True, 412.01), ("deepseek-v3", 4096, 512, False, 1440.01),
           ("deepseek-v3", 32768, 2048, True, 1760.04), ("deepseek-v3", 32768, 512, False, 8648.01),
           ("kimi-k2-instruct", 4096, 512, True, 380.01), ("kimi-k2-instruct", 32768, 512, False, 4376.01)]


@pytest.mark.parametrize("preset, n_ctx, n_ubatch, flash_attn, printed", PRESETS)
def test_preset_cpu_compute_buffer_is_llamacpps(preset, n_ctx, n_ubatch, flash_attn, printed):
    got = cpu_compute(kvmem.get_model(preset), n_ctx, n_ubatch, flash_attn)
    assert got.exact and buffer_mib(got.bytes) == printed


# the four decimals ~llama_context printed for kvmem.oracles.llamacpp_graphs.random_graph_case(seed): MLA with
# q_lora or "lite" 26/27-layer models, sigmoid / softmax routing, groups (seed 4), normalised and scaled weights,
# leading dense layers; gpt-oss with windows 32-512, quantised caches, several sequences
SEEDS = {0: "3.5055", 1: "3.2524", 2: "7.1911", 3: "2.1266", 4: "2.9399", 5: "2.6929", 6: "0.8703", 7: "6.9312",
         8: "5.5068", 9: "0.2169", 10: "0.8287", 11: "2.3784"}


@pytest.mark.parametrize("seed", sorted(SEEDS))
def test_random_mla_and_gpt_oss_cases_are_llamacpps(seed):
    model, _fmt, ctx = random_graph_case(seed)
    got = cpu_compute(model, ctx["n_ctx"], ctx["n_ubatch"], bool(ctx["flash_attn"]), ctx["type_k"], ctx["type_v"],
                       ctx["n_seq"], ctx["kv_unified"], ctx["swa_full"])
    assert got.exact and f"{got.bytes / 1048576.0:.4f}" == SEEDS[seed]


def test_shapes_read_from_the_configs():
    v3 = graph_shape(kvmem.get_model("deepseek-v3"))
    # config.json: kv_lora_rank 512, qk_rope_head_dim 64, qk_nope_head_dim 128, v_head_dim 128, q_lora_rank 1536,
    # first_k_dense_replace 3, n_group 8 / topk_group 4, sigmoid scoring, norm_topk_prob, routed_scaling_factor 2.5
    assert (v3.arch, v3.n_head_kv, v3.head_dim, v3.kv_lora, v3.rope_dim, v3.v_head_dim, v3.q_lora) == (
        "deepseek2", 1, 192, 512, 64, 128, 1536)
    assert (v3.n_dense_lead, v3.n_group, v3.n_group_used, v3.gating, v3.probs_bias, v3.norm_w, v3.scale_w) == (
        3, 8, 4, "sigmoid", True, True, True)
    assert v3.n_ff_shexp == 2048 and v3.n_ff == 18432
    oss = graph_shape(kvmem.get_model("gpt-oss-20b"))
    assert (oss.arch, oss.swa[:4], oss.gating, oss.qkv_bias, oss.head_dim) == (
        "gpt-oss", (True, False, True, False), "softmax_weight", True, 64)


def test_weight_names_cover_dense_and_moe_layers():
    per_layer, output = graph_weight_names(graph_shape(kvmem.get_model("deepseek-v3")))
    assert {"ffn_up", "ffn_down_exps", "ffn_up_shexp", "exp_probs_b.bias", "attn_k_b", "attn_v_b",
            "attn_kv_a_mqa", "attn_q_a_norm"} <= per_layer
    assert output == {"output_norm", "output"}
    per_layer, _ = graph_weight_names(graph_shape(kvmem.get_model("gpt-oss-20b")))
    assert {"attn_sinks", "attn_output.bias", "ffn_gate_inp.bias", "ffn_up_exps.bias", "post_attention_norm"} <= per_layer


def test_reduced_layers_keep_every_buffer_of_mla_and_gpt_oss():
    # the GPU schedule of the whole graph equals that of the graph with runs of equal layers cut (deepseek2's
    # leading dense layers kept apart from its MoE layers), on 1-3 GPUs with some experts on the host
    rng = random.Random(23)
    shorter = 0
    for i in range(8):
        oss = i % 2 == 1
        model, _fmt, _ctx = random_graph_case(2 if oss else 3)
        n = rng.randint(16, 30)
        shape = graph_shape(model)
        shape = type(shape)(**{**shape.__dict__, "n_layer": n,
                               "swa": tuple(il % 2 == 0 for il in range(n)) if oss else ()})
        n_gpus = rng.randint(1, 3)
        cuts = sorted(rng.randint(0, n) for _ in range(n_gpus - 1))
        layer_gpu = tuple(sum(il >= c for c in cuts) for il in range(n)) + (n_gpus - 1,)
        experts = [((il, down), 50_000) for il in range(rng.randint(0, n)) for down in (True, False)]
        fa = rng.random() < 0.5
        kw = dict(layer_gpu=layer_gpu, n_gpus=n_gpus, n_kv=rng.choice([256, 1024]), n_ubatch=rng.choice([1, 64, 512]),
                  flash_attn=fa, type_k="f16", type_v="f16", n_seq=1, swa_cells=256 if oss else 0,
                  weights=expert_weights(experts, n_gpus))
        whole = scheduled._gpu_graph_bytes(shape, kw["layer_gpu"], n_gpus, kw["n_kv"], kw["n_ubatch"], fa, "f16",
                                           "f16", None, 1, False, kw["swa_cells"], 1, True, kw["weights"], True)
        assert scheduled.gpu_graph_bytes(shape, **kw) == whole, (i, shape, kw)
        shorter += scheduled.reduced_layers(shape, layer_gpu, kw["weights"])[0].n_layer < n
    assert shorter >= 4


def test_mla_graph_only_over_the_latent_cache():
    # builds before PR #19067 (2026-01-25) keep a V tensor beside the latent (mla='latent+v'): another graph,
    # so the host buffer is the estimate, not marked exact; the current build's is the graph's
    from kvmem.engines.llamacpp.layouts import layout
    from kvmem.engines.llamacpp.tensors import tensors_for
    model = kvmem.get_model("deepseek-v2-lite")
    tensors, _ = tensors_for(model, "q4_k_m")
    now = layout(model, tensors, n_gpu_layers=0, n_ctx=4096, flash_attn=True)
    old = layout(model, tensors, n_gpu_layers=0, n_ctx=4096, flash_attn=True, build="2025-12-01")
    assert now.compute_exact["CPU"] and not old.compute_exact["CPU"]
    assert now.compute_bytes["CPU"] == cpu_compute(model, 4096, 512, True).bytes


@pytest.mark.parametrize("preset", ["gemma-3-27b", "gemma-2-9b", "phi-4"])
def test_gemma_and_phi3_partial_offload_reduced_equals_whole(preset):
    # gemma / phi3 weights are named in their graphs, so a partial offload is scheduled (host layers' weights
    # copied to CUDA0 for the prompt); cut to 20 layers, the last 6 on the host, gemma with 1024 SWA cells
    shape = graph_shape(kvmem.get_model(preset))
    n = 20
    shape = type(shape)(**{**shape.__dict__, "n_layer": n, "swa": shape.swa[:n]})
    per_layer, _ = graph_weight_names(shape)
    host = 1        # n_gpus = 1: device 1 is the host
    layer_gpu = tuple(0 if il < n - 6 else host for il in range(n)) + (0,)
    weights = tuple(sorted(((il, name), (host, 1_000_000)) for il in range(n - 6, n) for name in per_layer))
    kw = dict(layer_gpu=layer_gpu, n_gpus=1, n_kv=4096, n_ubatch=512, flash_attn=True, swa_cells=1024 if any(shape.swa)
              else 0, weights=weights, full_offload=False)
    whole = scheduled._gpu_graph_bytes(shape, layer_gpu, 1, 4096, 512, True, "f16", "f16", None, 1, False,
                                       kw["swa_cells"], 1, True, weights, True, False)
    got = scheduled.gpu_graph_bytes(shape, **kw)
    assert got == whole        # (gemma3's 6-layer pattern is longer than the units reduced_layers cuts)
    assert got[0] > 1_000_000  # CUDA0 holds the copy of a host weight


# deepseek2 GGUFs without the MLA split (attn_kv_b, per-head K and V: mla="none"): the four decimals llama.cpp
# printed for kvmem.oracles.llamacpp_graphs.per_head_case(seed) (tests/oracles/test_llamacpp_graphs_oracle.py);
# 3: K q8_0 and V q4_0 with flash attention; 1, 3, 5, 7: the 26/27-layer "lite" models
PER_HEAD = {0: "3.3833", 1: "3.3774", 2: "1.1256", 3: "0.0343", 4: "0.1095", 5: "1.0631", 6: "0.8706", 7: "4.7896"}


@pytest.mark.parametrize("seed", sorted(PER_HEAD))
def test_per_head_mla_cases_are_llamacpps(seed):
    from kvmem.engines.llamacpp.compute import graph_bytes
    from kvmem.engines.llamacpp.graphs_mla_oss import per_head_mla_shape
    from kvmem.oracles.llamacpp_graphs import per_head_case
    model, _fmt, ctx = per_head_case(seed)
    d = kvmem.estimate(model, engine="llama.cpp", tokens=1, n_ctx=ctx["n_ctx"], n_seq=ctx["n_seq"],
                       kv_unified=ctx["kv_unified"], type_k=ctx["type_k"], type_v=ctx["type_v"],
                       flash_attn=bool(ctx["flash_attn"]), n_ubatch=ctx["n_ubatch"], n_batch=ctx["n_ctx"],
                       mla="none").details
    got = graph_bytes(per_head_mla_shape(model), n_kv=d.cells, n_ubatch=d.n_ubatch, flash_attn=bool(ctx["flash_attn"]),
                      type_k=ctx["type_k"], type_v=ctx["type_v"], n_outputs=d.n_batch, n_seq=ctx["n_seq"],
                      kv_unified=ctx["kv_unified"])
    assert f"{got / 1048576.0:.4f}" == PER_HEAD[seed]


def test_builds_before_the_mla_split_take_the_per_head_graph():
    # a build before PR #12801 caches per-head K and V (mla='none'): the host buffer is the per-head graph's
    # (the vendored build's graph, so not marked exact at an older build), not the latent graph's
    import datetime

    from kvmem.engines.llamacpp.compute import graph_bytes
    from kvmem.engines.llamacpp.graphs_mla_oss import per_head_mla_shape
    from kvmem.engines.llamacpp.layouts import layout
    from kvmem.engines.llamacpp.tensors import tensors_for
    model = kvmem.get_model("deepseek-v2-lite")
    tensors, _ = tensors_for(model, "q4_k_m")
    old = layout(model, tensors, n_gpu_layers=0, n_ctx=32768, flash_attn=False, build="2025-03-01")
    then = graph_bytes(per_head_mla_shape(model, datetime.date(2025, 3, 1)), n_kv=32768, n_ubatch=512,
                       flash_attn=False, set_rows=False, inp_embd=False)    # the build's: before PRs #14959, #18898
    assert old.compute_bytes["CPU"] == then and not old.compute_exact["CPU"]
    # 1136.27 MiB (the vendored per-head graph, as the oracle's per-head GGUFs print it), the latent graph's 1174.01
    per_head = graph_bytes(per_head_mla_shape(model), n_kv=32768, n_ubatch=512, flash_attn=False)
    assert buffer_mib(per_head) == 1136.27 and cpu_compute(model, 32768, 512, False).bytes != per_head


def test_builds_before_pr_27382_rope_q_pe_first():
    # before PR #27382 (2026-08-21) deepseek2 ropes Q's 64-wide rope part before k_pe, and the per-head path
    # concatenates Q = (q_nope, roped q_pe): a 192 x 16 x 512 f32 CONCAT beside the 64 x 16 x 512 ROPE, where the
    # vendored build ropes the whole 192-wide Q once (ggml_rope_set_offset); deepseek-v2-lite, 512 tokens, 27 layers
    # (K = concat(k_nope, k_pe repeated) and k_pe's ROPE in both)
    import collections
    import datetime

    from kvmem.engines.llamacpp.graph_build import build_graph
    from kvmem.engines.llamacpp.graphs import Pass
    from kvmem.engines.llamacpp.graphs_mla_oss import mla_oss_shape, per_head_mla_shape
    model = kvmem.get_model("deepseek-v2-lite")
    p = Pass(512, 512, 4096, 1, True, "f16", "f16")
    before, merged = datetime.date(2026, 8, 20), datetime.date(2026, 8, 21)

    def ops(shape):
        return collections.Counter((t.op, t.ne[:3]) for t in build_graph(shape, p).nodes if t.op in ("ROPE", "CONCAT"))
    assert ops(per_head_mla_shape(model)) == {("CONCAT", (192, 16, 512)): 27, ("ROPE", (64, 1, 512)): 27,
                                              ("ROPE", (192, 16, 512)): 27}
    assert ops(per_head_mla_shape(model, before)) == {("CONCAT", (192, 16, 512)): 54, ("ROPE", (64, 1, 512)): 27,
                                                      ("ROPE", (64, 16, 512)): 27}
    assert not mla_oss_shape(model).rope_q_early and mla_oss_shape(model, before).rope_q_early
    assert not mla_oss_shape(model, merged).rope_q_early      # the merge day's build has it


def test_latent_v_cache_without_flash_attention_reads_v_transposed():
    # builds PR #12801 to PR #19067 without flash attention (v_trans): graphs_mla_attn.latent_v_attention stores the
    # latent into a transposed V cache one element a row and multiplies KQ by the cache's transposed view as it is;
    # the diff against the flash-attention latent+V graph, node by node, for deepseek-v2-lite (27 layers, 16 heads,
    # kv_lora 512, rope 64, V heads 128) at 4096 cells and 512 tokens
    from dataclasses import replace

    from kvmem.engines.llamacpp.graph_build import build_graph
    from kvmem.engines.llamacpp.graphs import Pass
    from kvmem.engines.llamacpp.graphs_mla_oss import mla_oss_shape
    shape = replace(mla_oss_shape(kvmem.get_model("deepseek-v2-lite")), mla_v=True)
    n_layer = shape.n_layer
    fa, plain = (build_graph(shape, Pass(512, 512, 4096, 1, on, "f16", "f16", mask_f32=True, qkv_order=True))
                 for on in (True, False))

    def v_stores(g):
        return [(t.src[0].ne[:2], t.src[1].ne[0]) for t in g.nodes if t.op == "SET_ROWS" and t.src[2].ne[1] != 4096]
    # flash attention: one V row of 512 per token (512 i64 indices) into the 512 x 4096 cache as K's 576-wide rows;
    # without it one row per element (512 x 512 indices) into the cache seen as 1 x (512 x 4096)
    assert v_stores(plain) == [((1, 512 * 512), 512 * 512)] * n_layer
    assert not v_stores(fa) and sum(t.op == "SET_ROWS" for t in fa.nodes) == 2 * n_layer
    # no ggml_cont of V: the transposed cache is already n_kv-major, KQV = V (4096 x 512) x softmax(KQ) -> 512 x 512 x 16
    assert not [t for t in plain.nodes if t.op == "CONT" and t.ne[:2] == (4096, 512)]
    kqv = [t for t in plain.nodes if t.op == "MUL_MAT" and t.src[0].ne[:3] == (4096, 512, 1)]
    assert len(kqv) == n_layer and kqv[0].ne[:3] == (512, 512, 16)
    # and attn_v_b after it (128 x 512 x 16 per head)
    assert sum(t.op == "MUL_MAT" and t.src[0].name == "attn_v_b" for t in plain.nodes) == n_layer

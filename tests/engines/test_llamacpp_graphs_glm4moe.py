"""llama.cpp's glm4moe compute graph (kvmem/engines/llamacpp/graphs_glm4moe.py): the CPU compute buffers llama.cpp
0c1e57098 printed (llama-cpp-python 0.3.36: tests/oracles/test_llamacpp_graphs_more_oracle.py, and
kvmem.oracles.llamacpp_presets.load with no_alloc on the presets' full shapes), pinned here so they hold without
llama.cpp; the shapes read from the configs; the weight names a placement can move; the GPU schedule of reduced
layers equal to the whole graph's."""

import random

import pytest

import kvmem
from kvmem.engines.llamacpp import scheduled
from kvmem.engines.llamacpp.compute import graph_shape, llamacpp_compute_buffer
from kvmem.engines.llamacpp.layouts import layout
from kvmem.engines.llamacpp.placement import buffer_mib
from kvmem.engines.llamacpp.scheduled import expert_weights, graph_weight_names
from kvmem.engines.llamacpp.tensors import tensors_for
from kvmem.oracles.llamacpp_graphs_more import random_glm4moe_case


def cpu_compute(model, n_ctx, n_ubatch, flash_attn, type_k="f16", type_v="f16", n_seq=1, kv_unified=False):
    d = kvmem.estimate(model, engine="llama.cpp", tokens=1, n_ctx=n_ctx, n_seq=n_seq, kv_unified=kv_unified,
                       swa_full=False, type_k=type_k, type_v=type_v, flash_attn=flash_attn, n_ubatch=n_ubatch,
                       n_batch=n_ctx).details
    return llamacpp_compute_buffer(model, n_ctx=d.n_ctx, n_ubatch=d.n_ubatch, cells_per_stream=d.cells,
                                   flash_attn=flash_attn, type_k=type_k, type_v=type_v, n_outputs=d.n_batch,
                                   n_seq=n_seq, kv_unified=kv_unified, swa_cells=d.swa_cells, backend="cpu",
                                   printed=True)    # what llama.cpp prints at context creation


def random_offload(rng, shape, flash_attn=None) -> tuple:
    """``shape`` cut to 16-30 layers on 1-3 GPUs, the routed experts of its first layers on the host, drawn from
    ``rng`` (flash attention too, unless given): (that shape, gpu_graph_bytes' keywords, the whole graph's buffers,
    scheduled._gpu_graph_bytes: what the schedule of reduced layers is checked against)."""
    n = rng.randint(16, 30)
    shape = type(shape)(**{**shape.__dict__, "n_layer": n})
    n_gpus = rng.randint(1, 3)
    cuts = sorted(rng.randint(0, n) for _ in range(n_gpus - 1))
    layer_gpu = tuple(sum(il >= c for c in cuts) for il in range(n)) + (n_gpus - 1,)
    experts = [((il, down), 50_000) for il in range(rng.randint(0, n)) for down in (True, False)]
    fa = rng.random() < 0.5 if flash_attn is None else flash_attn
    kw = dict(layer_gpu=layer_gpu, n_gpus=n_gpus, n_kv=rng.choice([256, 1024]), n_ubatch=rng.choice([1, 64, 512]),
              flash_attn=fa, type_k="f16", type_v="f16", n_seq=1, weights=expert_weights(experts, n_gpus))
    whole = scheduled._gpu_graph_bytes(shape, layer_gpu, n_gpus, kw["n_kv"], kw["n_ubatch"], fa, "f16", "f16",
                                       None, 1, False, 0, 1, True, kw["weights"], True)
    return shape, kw, whole


# "CPU compute buffer size" llama.cpp printed for the presets' full shapes (sparse Q4_K_M GGUFs written by
# kvmem.oracles.llamacpp_family_files, no_alloc: the prompt graph's reserve), f16 cache, one sequence
PRESETS = [("glm-4.5-air", 4096, 512, True, 332.01), ("glm-4.5-air", 32768, 512, False, 6292.01),
           ("glm-4.5-air", 65536, 2048, True, 1568.05), ("glm-4.5-air", 131072, 512, True, 320.00),
           ("glm-4.7", 4096, 512, True, 340.01), ("glm-4.7", 32768, 512, False, 6300.01),
           ("glm-4.7", 65536, 2048, True, 1600.05), ("glm-4.7", 131072, 512, True, 326.00)]


@pytest.mark.parametrize("preset, n_ctx, n_ubatch, flash_attn, printed", PRESETS)
def test_preset_cpu_compute_buffer_is_llamacpps(preset, n_ctx, n_ubatch, flash_attn, printed):
    got = cpu_compute(kvmem.get_model(preset), n_ctx, n_ubatch, flash_attn)
    assert got.exact and buffer_mib(got.bytes) == printed


# the four decimals ~llama_context printed for kvmem.oracles.llamacpp_graphs_more.random_glm4moe_case(seed): group
# routing (seeds 1, 4, 5, 9), Q/K norms, Q/K/V biases, 0-2 leading dense layers, weights normalised or not, scaled
# by 2.5 (5, 6, 8, 11), quantised caches, several sequences, unified streams
SEEDS = {0: "0.2061", 1: "2.3481", 2: "0.1233", 3: "0.5812", 4: "0.1855", 5: "47.1017", 6: "1.7622", 7: "11.5098",
         8: "0.1547", 9: "0.1926", 10: "22.5098", 11: "4.7642"}


@pytest.mark.parametrize("seed", sorted(SEEDS))
def test_random_glm4moe_cases_are_llamacpps(seed):
    model, _fmt, ctx = random_glm4moe_case(seed)
    got = cpu_compute(model, ctx["n_ctx"], ctx["n_ubatch"], bool(ctx["flash_attn"]), ctx["type_k"], ctx["type_v"],
                      ctx["n_seq"], ctx["kv_unified"])
    assert got.exact and f"{got.bytes / 1048576.0:.4f}" == SEEDS[seed]


def test_shapes_read_from_the_configs():
    air = graph_shape(kvmem.get_model("glm-4.5-air"))
    # config.json: 46 layers, 96 heads of 128, 8 KV heads, attention_bias, no use_qk_norm, first_k_dense_replace 1
    # (intermediate_size 10944), 128 experts of 1408, 8 used, 1 shared, norm_topk_prob, routed_scaling_factor 1.0
    assert (air.arch, air.n_layer, air.n_head, air.n_head_kv, air.head_dim, air.qkv_bias, air.qk_norm) == (
        "glm4moe", 46, 96, 8, 128, True, False)
    assert (air.n_dense_lead, air.n_ff, air.n_expert, air.n_expert_used, air.n_ff_exp, air.n_ff_shexp) == (
        1, 10944, 128, 8, 1408, 1408)
    assert (air.gating, air.probs_bias, air.norm_w, air.scale_w, air.n_group) == ("sigmoid", True, True, False, 1)
    g47 = graph_shape(kvmem.get_model("glm-4.7"))
    # use_qk_norm, first_k_dense_replace 3, 160 experts of 1536, routed_scaling_factor 2.5
    assert (g47.qk_norm, g47.n_dense_lead, g47.n_expert, g47.n_ff_shexp, g47.scale_w) == (True, 3, 160, 1536, True)


def test_no_shared_expert_is_no_graph():
    # glm4-moe.cpp builds the shared expert's FFN unconditionally: without one llama.cpp builds no graph here
    cfg = dict(kvmem.get_model("glm-4.5-air").config, n_shared_experts=0)
    assert graph_shape(kvmem.Model.from_hf_config(cfg, name="no-shared")) is None


def test_unknown_weight_normalisation_is_no_graph():
    # a config without norm_topk_prob (as kvmem.sources.gguf reads a GGUF: expert_weights_norm is not mapped) leaves
    # the normalisation's nodes unknown: the estimate, not a guessed graph
    cfg = dict(kvmem.get_model("glm-4.5-air").config)
    del cfg["norm_topk_prob"]
    assert graph_shape(kvmem.Model.from_hf_config(cfg, name="no-norm-field")) is None


def test_weight_names_cover_dense_and_moe_layers():
    per_layer, output = graph_weight_names(graph_shape(kvmem.get_model("glm-4.7")))
    assert {"ffn_up", "ffn_down_exps", "ffn_gate_shexp", "exp_probs_b.bias", "ffn_gate_inp", "post_attention_norm",
            "attn_q.bias", "attn_v.bias", "attn_q_norm", "attn_k_norm"} <= per_layer
    assert output == {"output_norm", "output"}


@pytest.mark.parametrize("flags, gpu", [
    (dict(n_gpu_layers=10), 994_101_504), (dict(n_gpu_layers=0), 994_101_504), (dict(n_cpu_moe=40), 950_020_352),
    (dict(override_tensor=((r"blk\.\d+\.ffn_.*", "CPU"),)), 950_020_352)])
def test_partial_offload_and_experts_on_the_host_are_scheduled(flags, gpu):
    # -ngl 10 / -ngl 0 / --n-cpu-moe 40 / -ot ffn_*=CPU on one 24 GB card, n_ctx 32768, flash attention: each buffer
    # from the scheduled graph, marked exact (before: the estimate). The GPU's is the scheduler's (ggml_sched: host
    # weights copied to the GPU for the prompt's ops; no published GLM-4.5-Air log of this build to check it against):
    # 948.05 MiB with layers on the host, 906.00 MiB with experts there (their copies are the largest tensors, the
    # shared expert and router stay beside the attention with --n-cpu-moe, move with -ot ffn_.*: the same buffer);
    # the host's (CUDA_Host) 48.01 MiB: the f16 mask (32768 x 512 x 2 B = 32 MiB), the token embeddings' rows and the
    # unused inp_embd input (512 x 4096 x 4 B = 8 MiB each)
    model = kvmem.get_model("glm-4.5-air")
    tensors, _ = tensors_for(model, "q4_k_m")
    lay = layout(model, tensors, gpus=("rtx-3090-24gb",), n_ctx=32768, flash_attn=True, **flags)
    assert lay.compute_exact == {"rtx-3090-24gb": True, "CPU": True}
    assert lay.compute_bytes == {"rtx-3090-24gb": gpu, "CPU": 50_343_968}


def test_reduced_layers_keep_every_buffer_of_glm4moe():
    # the GPU schedule of the whole graph equals that of the graph with runs of equal layers cut (the leading dense
    # layers apart from the MoE ones), on 1-3 GPUs with some experts on the host
    rng = random.Random(41)
    shorter = 0
    for i in range(6):
        model, _fmt, _ctx = random_glm4moe_case(5 + i)
        shape, kw, whole = random_offload(rng, graph_shape(model))
        assert scheduled.gpu_graph_bytes(shape, **kw) == whole, (i, shape, kw)
        shorter += scheduled.reduced_layers(shape, kw["layer_gpu"], kw["weights"])[0].n_layer < shape.n_layer
    assert shorter >= 3

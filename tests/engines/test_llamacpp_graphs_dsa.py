"""llama.cpp's glm-dsa (GLM-5.x) and deepseek32 (DeepSeek-V3.2) compute graphs (kvmem/engines/llamacpp/graphs_dsa.py):
the CPU compute buffers llama.cpp 0c1e57098 printed (llama-cpp-python 0.3.36: tests/oracles/test_llamacpp_graphs_oracle.py
and kvmem.oracles.llamacpp_presets.load with no_alloc on the presets' full shapes), pinned here so they hold
without llama.cpp; the shapes read from the configs; the GPU schedule of the whole graph (never cut)."""

import pytest

import kvmem
from kvmem.engines.llamacpp import scheduled
from kvmem.engines.llamacpp.compute import estimate_bytes, graph_shape
from kvmem.engines.llamacpp.layouts import layout
from kvmem.engines.llamacpp.placement import buffer_mib
from kvmem.engines.llamacpp.scheduled import graph_weight_names, reduced_layers
from kvmem.engines.llamacpp.tensors import tensors_for
from kvmem.oracles.llamacpp_graphs import DSA_KINDS, random_graph_case
from tests.engines.test_llamacpp_graphs_mla_oss import cpu_compute

# "CPU compute buffer size" llama.cpp printed for the presets' full shapes (sparse q4_k_m GGUFs written by
# kvmem.oracles.llamacpp_family_files, loaded with no_alloc: the prompt graph's reserve), f16 cache, one sequence
PRESETS = [("deepseek-v3.2", 4096, 512, True, 660.08), ("deepseek-v3.2", 32768, 512, False, 8924.08),
           ("deepseek-v3.2", 8192, 2048, True, 2672.12), ("glm-5", 4096, 512, True, 536.08),
           ("glm-5", 32768, 512, False, 4720.08), ("glm-5", 8192, 2048, True, 2176.12),
           ("glm-5.2", 4096, 512, True, 548.08), ("glm-5.2", 32768, 512, False, 4720.08),
           ("glm-5.2", 8192, 2048, True, 2182.12)]


@pytest.mark.parametrize("preset, n_ctx, n_ubatch, flash_attn, printed", PRESETS)
def test_preset_cpu_compute_buffer_is_llamacpps(preset, n_ctx, n_ubatch, flash_attn, printed):
    got = cpu_compute(kvmem.get_model(preset), n_ctx, n_ubatch, flash_attn)
    assert got.exact and buffer_mib(got.bytes) == printed


# the four decimals ~llama_context printed for random_graph_case(seed, DSA_KINDS): GLM-5.x every layer full
# (0, 3, 6, 9), with shared indexer layers (1: full, shared; 4: one full then 3 shared; 7, 10), DeepSeek-V3.2
# (2, 5, 8, 11); top-k 1 to 2048, 1-4 sequences, quantised caches (iq4_nl in 5)
SEEDS = {0: "0.0876", 1: "0.2901", 2: "2.6438", 3: "0.1017", 4: "1.4232", 5: "0.2971", 6: "24.8105", 7: "35.8492",
         8: "59.2793", 9: "0.4594", 10: "0.0705", 11: "4.6450"}


@pytest.mark.parametrize("seed", sorted(SEEDS))
def test_random_dsa_cases_are_llamacpps(seed):
    model, _fmt, ctx = random_graph_case(seed, DSA_KINDS)
    got = cpu_compute(model, ctx["n_ctx"], ctx["n_ubatch"], bool(ctx["flash_attn"]), ctx["type_k"], ctx["type_v"],
                       ctx["n_seq"], ctx["kv_unified"], ctx["swa_full"])
    assert got.exact and f"{got.bytes / 1048576.0:.4f}" == SEEDS[seed]


def test_shapes_read_from_the_configs():
    v32 = graph_shape(kvmem.get_model("deepseek-v3.2"))
    # config.json: index_n_heads 64, index_head_dim 128, index_topk 2048, q_lora_rank 1536, n_group 8 / topk_group 4
    assert (v32.arch, v32.n_indexer_head, v32.indexer_head, v32.indexer_top_k, v32.q_lora, v32.n_group) == (
        "deepseek32", 64, 128, 2048, 1536, 8)
    assert v32.indexer_full == (True,) * 61
    glm = graph_shape(kvmem.get_model("glm-5.2"))
    # GLM-5.2's indexer_types: layers 0-2 full, then one full layer in four (21 of 78)
    assert glm.arch == "glm-dsa" and glm.indexer_full[:8] == (True, True, True, False, False, False, True, False)
    assert sum(glm.indexer_full) == 21 and (glm.gating, glm.probs_bias, glm.n_indexer_head) == ("sigmoid", True, 32)
    per_layer, _ = graph_weight_names(glm)
    assert {"indexer.attn_q_b", "indexer.attn_k", "indexer.k_norm", "indexer.k_norm.bias", "indexer.proj",
            "attn_q_a", "attn_k_b", "exp_probs_b.bias"} <= per_layer


def test_dsa_graphs_are_never_cut():
    # every layer's zero rows of the top-k mask are a leaf, allocated before every node: the whole graph is
    # scheduled (cutting runs of equal layers changed 16 of 16 random GPU layouts)
    shape = graph_shape(kvmem.get_model("glm-5"))
    layer_gpu = (0,) * 40 + (1,) * 38 + (1,)
    assert reduced_layers(shape, layer_gpu)[0] is shape
    whole = scheduled._gpu_graph_bytes(shape, layer_gpu, 2, 8192, 512, True, "f16", "f16", None, 1, False, 0, 1,
                                       True, (), True)
    assert scheduled.gpu_graph_bytes(shape, layer_gpu=layer_gpu, n_gpus=2, n_kv=8192, n_ubatch=512,
                                     flash_attn=True) == whole


def test_gpu_schedule_only_where_cuda_runs_the_indexer():
    # CUDA's lightning indexer takes K as f32/bf16/f16/q8_0/q5_1/q5_0/q4_1/q4_0 (lightning-indexer.cu#L574-L586):
    # with an iq4_nl K the host runs it, its copies not modelled, so the GPU buffer is the estimate
    model = kvmem.get_model("glm-5")
    tensors, _ = tensors_for(model, "q4_k_m")
    kw = dict(n_gpu_layers=999, gpus=["h100-sxm-80gb"] * 8, n_ctx=32768, flash_attn=True)
    full = estimate_bytes(model, n_kv=32768, n_ubatch=512, flash_attn=True)
    assert layout(model, tensors, **kw).compute_bytes["h100-sxm-80gb"] != full
    assert layout(model, tensors, type_k="iq4_nl", type_v="iq4_nl", **kw).compute_bytes["h100-sxm-80gb"] == full

"""DeepSeek-V4 (deepseek4) laid out from a config (kvmem/engines/llamacpp/graphs_dsv4.py): the tensor list and bytes
llama.cpp 0c1e57098 loaded for the same GGUFs (tests/oracles/test_llamacpp_dsv4_oracle.py writes them at full shape,
runs llama-quantize's dry run over the converter's source and loads them with no_alloc), pinned."""

from __future__ import annotations

from collections import Counter

import pytest

import kvmem
from kvmem.engines.llamacpp.tensors import synthesised_tensors
from kvmem.model import Model

# (preset, file type) -> (tensors, llama_model_size, {type: count}) as llama.cpp loaded and llama-quantize typed them
LOADED = {("deepseek-v4-flash", "q4_k_m"): (1328, 151_627_664_796,
                                            {"F32": 535, "I32": 3, "MXFP4": 129, "Q4_K": 639, "Q6_K": 22}),
          ("deepseek-v4-flash", "q2_k"): (1328, 150_041_124_652,
                                          {"F32": 535, "I32": 3, "MXFP4": 129, "Q2_K": 617, "Q3_K": 43, "Q6_K": 1}),
          ("deepseek-v4-pro", "q4_k_m"): (1894, 837_454_187_276,
                                          {"F32": 762, "I32": 3, "MXFP4": 183, "Q4_K": 915, "Q6_K": 31}),
          ("deepseek-v4-pro", "q2_k"): (1894, 831_676_853_612,
                                        {"F32": 762, "I32": 3, "MXFP4": 183, "Q2_K": 884, "Q3_K": 61, "Q6_K": 1})}


@pytest.mark.parametrize("preset,fmt", sorted(LOADED))
def test_dsv4_layout_is_what_llamacpp_loaded(preset, fmt):
    tensors = synthesised_tensors(kvmem.get_model(preset), fmt)
    count, size, types = LOADED[preset, fmt]
    assert len(tensors) == count
    assert sum(t.nbytes for t in tensors) == size
    assert dict(Counter(t.dtype for t in tensors)) == types


def test_flash_tensors_by_hand():
    t = {x.name: x for x in synthesised_tensors(kvmem.get_model("deepseek-v4-flash"), "q4_k_m")}
    # the head's hyper-connection mix: hc_mult 4 x n_embd 4,096 = 16,384 wide, 4 out
    assert t["output_hc_fn.weight"].shape == (16384, 4)
    # the 3 hash layers' token -> expert table: top-6 x 129,280 tokens, int32 = 3,102,720 B, never quantised
    assert (t["blk.0.ffn_gate_tid2eid.weight"].dtype, t["blk.0.ffn_gate_tid2eid.weight"].nbytes) == ("I32", 3102720)
    assert "blk.2.ffn_gate_tid2eid.weight" in t and "blk.3.ffn_gate_tid2eid.weight" not in t
    assert "blk.3.exp_probs_b.bias" in t
    assert "blk.0.exp_probs_b.bias" not in t
    # layer 2 is ratio 4 (compressor 2 x 512 wide, the indexer), layer 3 ratio 128 (512 wide, no indexer), 0 none
    assert t["blk.2.attn_compressor_kv.weight"].shape == (4096, 1024) and "blk.2.indexer.proj.weight" in t
    assert t["blk.3.attn_compressor_kv.weight"].shape == (4096, 512) and "blk.3.indexer.proj.weight" not in t
    assert "blk.0.attn_compressor_kv.weight" not in t
    # the experts stay the converter's MXFP4: 2,048 x 4,096 x 256 values / 32 x 17 B = 1,140,850,688 B
    assert (t["blk.10.ffn_down_exps.weight"].dtype, t["blk.10.ffn_down_exps.weight"].nbytes) == ("MXFP4", 1140850688)
    # attn_output_a as the file holds it: 64 heads x 512 / 8 groups = 4,096 columns, 1,024 x 8 rows
    assert t["blk.2.attn_output_a.weight"].shape == (4096, 8192)


def test_a_config_without_a_converter_key_is_refused():
    cfg = dict(kvmem.get_model("deepseek-v4-flash").config)
    del cfg["o_groups"]
    with pytest.raises(ValueError, match="reads o_groups, which this config does not set"):
        synthesised_tensors(Model.from_hf_config(cfg, name="no-o-groups"), "q4_k_m")


def test_a_compress_ratio_llamacpp_does_not_load_is_refused():
    cfg = dict(kvmem.get_model("deepseek-v4-flash").config, num_hidden_layers=4, compress_ratios=[0, 4, 16, 128, 0])
    with pytest.raises(ValueError, match="ratio|ratios"):
        synthesised_tensors(Model.from_hf_config(cfg, name="ratio-16"), "q4_k_m")


# The forward graph (kvmem/engines/llamacpp/graphs_dsv4_fwd.py, graphs_dsv4_comp.py): llama.cpp 0c1e57098's printed
# "CPU compute buffer size" (~llama_context's four decimals) for DeepSeek-V4-Flash's config, a sparse q4_k_m GGUF at
# full shape (kvmem.oracles.llamacpp_dsv4_compute.flash_compute_case), host only, f16 cache:
# (n_ctx, n_ubatch, flash attention, sequences) -> MiB
FLASH_CPU_COMPUTE = {(8192, 512, True, 1): "268.5098", (16384, 512, True, 1): "300.5098",
                     (32768, 512, True, 1): "300.5098", (65536, 512, True, 1): "347.8427",
                     (131072, 512, True, 1): "413.1317", (262144, 512, True, 1): "574.0927",
                     (32768, 2048, True, 1): "1202.0391", (32768, 256, True, 1): "150.2549",
                     (32768, 512, False, 1): "1407.1317", (4096, 512, True, 4): "268.5020",
                     (32768, 512, True, 2): "300.5098"}


def _host(model, n_ctx, n_ubatch, fa, n_seq, **kw):
    from kvmem.engines.llamacpp.layouts import layout
    tensors = synthesised_tensors(model, kw.pop("fmt", "q4_k_m"))
    return layout(model, tensors, gpus=(), n_gpu_layers=0, n_ctx=n_ctx, n_ubatch=n_ubatch, flash_attn=fa, n_seq=n_seq,
                  n_batch=n_ctx, **kw)


@pytest.mark.parametrize("setting", sorted(FLASH_CPU_COMPUTE))
def test_flash_host_compute_is_llamacpp_printed(setting):
    lay = _host(kvmem.get_model("deepseek-v4-flash"), *setting)
    assert f"{lay.compute_bytes['CPU'] / 2**20:.4f}" == FLASH_CPU_COMPUTE[setting]
    assert lay.compute_exact["CPU"] is True


# seeded small configs (kvmem.oracles.llamacpp_dsv4_compute.random_compute_case, a q8_0 GGUF): llama.cpp's printed MiB
RANDOM_CPU_COMPUTE = {0: "21.0875", 1: "13.1337", 2: "7.8628", 3: "10.9582", 4: "9.2609", 5: "7.2722", 6: "35.6575",
                      7: "10.7619", 8: "15.3711", 9: "3.2390", 10: "21.0029", 11: "10.3910"}


@pytest.mark.parametrize("seed", sorted(RANDOM_CPU_COMPUTE))
def test_random_configs_host_compute(seed):
    from kvmem.oracles.llamacpp_dsv4_compute import random_compute_case
    _, model, s = random_compute_case(seed)
    lay = _host(model, s["n_ctx"], s["n_ubatch"], s["flash_attn"], s["n_seq"], type_k=s["type_k"], type_v=s["type_v"],
                swa_full=s["swa_full"], kv_unified=s["kv_unified"], n_rs_seq=s["n_rs_seq"], fmt="q8_0")
    assert f"{lay.compute_bytes['CPU'] / 2**20:.4f}" == RANDOM_CPU_COMPUTE[seed]


def test_flash_graph_by_hand():
    from kvmem.engines.llamacpp.compute import graph_shape
    from kvmem.engines.llamacpp.scheduled import graph_weight_names, reduced_layers
    shape = graph_shape(kvmem.get_model("deepseek-v4-flash"))
    # 43 layers: 2 raw, then CSA (ratio 4: the lightning indexer) and HCA (ratio 128) alternating to a CSA layer
    assert shape.ratios[:4] == (0, 0, 4, 128) and shape.ratios[-1] == 4 and sum(shape.indexer_full) == 21
    # each CSA layer's top-k zeros are a leaf of the compute buffer, as DSA's: no run of layers is cut
    assert reduced_layers(shape, (0,) * 44) == (shape, (0,) * 44, ())
    # the weight names the GPU schedule reads cover each kind of layer (scheduled._few_layers: through layer 3)
    per_layer, output = graph_weight_names(shape)
    assert {"attn_compressor_ape", "indexer_compressor_kv", "indexer.proj", "ffn_gate_tid2eid",
            "exp_probs_b.bias", "hc_attn_fn", "attn_sinks"} <= per_layer
    assert {"output_hc_fn", "output_hc_scale", "output"} <= output


def test_flash_gpu_layouts_schedule_the_graph():
    # kvmem's scheduled figures (ggml_sched over this graph), not yet measured on a GPU: pinned against regressions
    from kvmem.engines.llamacpp.layouts import layout
    model = kvmem.get_model("deepseek-v4-flash")
    tensors = synthesised_tensors(model, "q4_k_m")
    lay = layout(model, tensors, gpus=("h100-sxm-80gb",), n_gpu_layers=99, n_cpu_moe=43, n_ctx=32768, n_ubatch=512,
                 flash_attn=True, n_batch=2048)
    assert lay.compute_exact == {"h100-sxm-80gb": True, "CPU": True}
    assert lay.compute_bytes == {"h100-sxm-80gb": 1312038912, "CPU": 34698176}
    # -nkvo: the lightning indexer's cache on the host is not scheduled (layouts._scheduled): the estimate
    lay = layout(model, tensors, gpus=("h100-sxm-80gb",), n_gpu_layers=99, n_cpu_moe=43, n_ctx=32768, n_ubatch=512,
                 flash_attn=True, n_batch=2048, kv_offload=False)
    assert lay.compute_exact == {"h100-sxm-80gb": False}


def test_flash_swa_full_reads_the_whole_raw_cache():
    # --swa-full (the C API's default): the raw cache holds n_ctx cells, which every layer's attention reads; llama.cpp
    # printed 370.8817 MiB at 32k (the same GGUF, the oracle's run), 300.5098 without it
    lay = _host(kvmem.get_model("deepseek-v4-flash"), 32768, 512, True, 1, swa_full=True)
    assert f"{lay.compute_bytes['CPU'] / 2**20:.4f}" == "370.8817"


@pytest.mark.parametrize("setting,printed", [
    (dict(n_ctx=32768, n_ubatch=512, fa=True, n_seq=1), "513.0927"),
    (dict(n_ctx=65536, n_ubatch=1024, fa=True, n_seq=2, type_k="q8_0", type_v="q8_0", n_rs_seq=2), "1030.1293")])
def test_pro_host_compute_is_llamacpp_printed(setting, printed):
    # DeepSeek-V4-Pro (61 layers, 7,168 wide, 128 heads), a sparse q4_k_m GGUF at full shape: llama.cpp's printed MiB
    lay = _host(kvmem.get_model("deepseek-v4-pro"), **setting)
    assert f"{lay.compute_bytes['CPU'] / 2**20:.4f}" == printed

"""Llama 4 (llama4) laid out from a config and its compute graph (kvmem/engines/llamacpp/graphs_llama4.py): what
llama.cpp 0c1e57098 printed for the same GGUFs (tests/oracles/test_llamacpp_llama4_oracle.py writes and loads them;
kvmem.oracles.llamacpp_llama4 draws the random cases), pinned, and the held-out Llama-4-Scout log."""

from __future__ import annotations

import pytest

import kvmem
from kvmem.engines.llamacpp.compute import graph_bytes, graph_shape, llamacpp_compute_buffer
from kvmem.engines.llamacpp.placement import buffer_mib
from kvmem.engines.llamacpp.tensors import synthesised_tensors
from kvmem.logcheck import check_log
from kvmem.model import Model
from kvmem.oracles.llamacpp_llama4 import random_llama4_case

# seed -> llama.cpp's "CPU compute buffer size" to four decimals (~llama_context) and its KV buffer lines (MiB): the
# full cache's, then the chunked one's; one line where every layer is chunked (fewer than 4 layers)
PRINTED = {0: ("2.2854", [30.38]), 1: ("1.4390", [20.5, 61.5]), 2: ("16.5098", [1.5]), 3: ("4.2951", [0.75, 3.75]),
           4: ("0.7202", [1.5, 4.5]), 5: ("0.0226", [0.12]), 6: ("0.1980", [0.43]), 7: ("15.5547", [2.56, 12.81]),
           8: ("7.1260", [6.75, 18.56]), 9: ("1.0319", [1.5]), 10: ("0.0735", [0.38, 1.12]), 11: ("2.6095", [16.25])}


@pytest.mark.parametrize("seed", sorted(PRINTED))
def test_random_llama4_buffers_are_llamacpps(seed):
    model, _fmt, ctx = random_llama4_case(seed)
    est = kvmem.estimate(model, engine="llama.cpp", tokens=1, n_ctx=ctx["n_ctx"], n_seq=ctx["n_seq"],
                         kv_unified=ctx["kv_unified"], swa_full=False, type_k=ctx["type_k"], type_v=ctx["type_v"],
                         flash_attn=bool(ctx["flash_attn"]), n_ubatch=ctx["n_ubatch"], n_batch=ctx["n_ctx"])
    d = est.details
    compute = llamacpp_compute_buffer(model, n_ctx=d.n_ctx, n_ubatch=d.n_ubatch, cells_per_stream=d.cells,
                                      flash_attn=bool(ctx["flash_attn"]), type_k=ctx["type_k"], type_v=ctx["type_v"],
                                      n_outputs=d.n_batch, n_seq=ctx["n_seq"], kv_unified=ctx["kv_unified"],
                                      swa_cells=d.swa_cells, backend="cpu")
    compute_4dp, kv_lines = PRINTED[seed]
    assert compute.exact and f"{compute.bytes / 1048576.0:.4f}" == compute_4dp
    assert buffer_mib(est.total_bytes) == pytest.approx(sum(kv_lines), abs=0.011)


# (preset, n_ctx, n_ubatch, flash attention) -> llama.cpp's CPU compute MiB and its caches' (cells, layers, MiB)
FULL = {("llama-4-scout-17b-16e", 4096, 512, True): (424.63, [(4096, 12, 192.0), (4096, 36, 576.0)]),
        ("llama-4-scout-17b-16e", 32768, 512, False): (2699.11, [(32768, 12, 1536.0), (8704, 36, 1224.0)]),
        ("llama-4-scout-17b-16e", 131072, 2048, True): (1738.88, [(131072, 12, 6144.0), (10240, 36, 1440.0)]),
        ("llama-4-scout-17b-16e", 256000, 512, False): (20575.11, [(256000, 12, 12000.0), (8704, 36, 1224.0)]),
        ("llama-4-maverick-17b-128e", 32768, 512, False): (2699.02, [(32768, 12, 1536.0), (8704, 36, 1224.0)]),
        ("llama-4-maverick-17b-128e", 131072, 2048, True): (1698.51, [(131072, 12, 6144.0), (10240, 36, 1440.0)])}


@pytest.mark.parametrize("key", sorted(FULL), ids=[f"{k[0]}-{k[1]}-{k[2]}-fa{int(k[3])}" for k in sorted(FULL)])
def test_the_presets_at_full_shape_are_llamacpps(key):
    name, n_ctx, n_ubatch, fa = key
    model = kvmem.get_model(name)
    est = kvmem.estimate(model, engine="llama.cpp", tokens=1, n_ctx=n_ctx, flash_attn=fa, n_ubatch=n_ubatch,
                         n_batch=n_ctx, swa_full=False)
    d = est.details
    compute, caches = FULL[key]
    assert buffer_mib(graph_bytes(graph_shape(model), n_kv=d.cells, n_ubatch=d.n_ubatch, flash_attn=fa,
                                  swa_cells=d.swa_cells)) == compute
    assert [(c["cells"], c["layers"], c["size_mib"]) for c in d.caches] == caches


def test_the_presets_tensors():
    # Scout: 48 MoE layers (16 experts of 8192, a shared expert as wide), rope_freqs from its llama3 rope_scaling;
    # Maverick: MoE every other layer (interleave_moe_layer_step 2), dense layers of intermediate_size_mlp 16384
    scout = {t.name: t.shape for t in synthesised_tensors(kvmem.get_model("llama-4-scout-17b-16e"), "bf16")}
    mav = {t.name: t.shape for t in synthesised_tensors(kvmem.get_model("llama-4-maverick-17b-128e"), "bf16")}
    assert scout["rope_freqs.weight"] == (64,) and "rope_freqs.weight" not in mav
    assert scout["blk.0.ffn_gate_exps.weight"] == (5120, 8192, 16)
    assert scout["blk.0.ffn_down_shexp.weight"] == (8192, 5120)
    assert mav["blk.0.ffn_up.weight"] == (5120, 16384) and "blk.0.ffn_gate_inp.weight" not in mav
    assert mav["blk.1.ffn_up_exps.weight"] == (5120, 8192, 128)
    # 4 + 48 x 13 = 628 tensors; 3 + 24 x 9 + 24 x 13 = 531
    assert (len(scout), len(mav)) == (628, 531)


def test_llamacpps_fixed_chunks_and_pattern():
    # llama.cpp chunks every llama4 file by 8192 tokens, 3 layers of 4 (src/models/llama4.cpp#L8-L19), whatever the
    # config says: another attention_chunk_size gets llama.cpp's cache (families.config_window), another
    # no_rope_layers pattern is refused by name (families.check_family; the layout too)
    cfg = dict(kvmem.get_model("llama-4-scout-17b-16e").config)
    cfg["text_config"] = dict(cfg["text_config"], attention_chunk_size=4096)
    model = Model.from_hf_config(cfg, name="scout-chunk-4096")
    est = kvmem.estimate(model, engine="llama.cpp", tokens=1, n_ctx=32768, n_batch=32768, swa_full=False)
    assert [(c["cells"], c["layers"], c["size_mib"]) for c in est.details.caches] == FULL[
        ("llama-4-scout-17b-16e", 32768, 512, False)][1]
    assert graph_shape(model) == graph_shape(kvmem.get_model("llama-4-scout-17b-16e"))
    cfg["text_config"] = dict(cfg["text_config"], no_rope_layers=[1, 1, 0, 1] * 12)    # layer 2 NoPE (full)
    model = Model.from_hf_config(cfg, name="scout-pattern")
    with pytest.raises(ValueError, match="llama.cpp makes layer 2 sliding"):
        kvmem.estimate(model, engine="llama.cpp", tokens=1, n_ctx=32768)
    with pytest.raises(ValueError, match="every 4th layer full"):
        synthesised_tensors(model, "q4_k_m")
    assert graph_shape(model) is None


# A public GitHub notes file (search index id 1349331823; /tmp/h_logs/10.txt of docs/research/heldout/
# llamacpp_logs_2026-12-07.md): mainline llama-server of April 2025 on a Mac Pro's two FirePro D700 (Vulkan),
# Llama-4-Scout-17B-16E-Instruct UD-Q2_K_XL, -ngl 11 -nkvo -c 256000
SCOUT = """./build/bin/llama-server -m ../llm-models/Llama-4-Scout-17B-16E-Instruct-UD-Q2_K_XL.gguf -t 11 -ngl 11 -nkvo --ctx-size 256000
llama_model_load_from_file_impl: using device Vulkan0 (AMD Radeon HD - FirePro D700) - 6144 MiB free
llama_model_load_from_file_impl: using device Vulkan1 (AMD Radeon HD - FirePro D700) - 6144 MiB free
load_tensors: offloading 11 repeating layers to GPU
load_tensors: offloaded 11/49 layers to GPU
load_tensors:   CPU_Mapped model buffer size = 31730.07 MiB
load_tensors:      Vulkan1 model buffer size =  4034.57 MiB
load_tensors:      Vulkan0 model buffer size =  4841.48 MiB
init: kv_size = 256000, offload = 0, type_k = 'f16', type_v = 'f16', n_layer = 48, can_shift = 1
init:        CPU KV buffer size = 48000.00 MiB
llama_context: KV self size  = 48000.00 MiB, K (f16): 24000.00 MiB, V (f16): 24000.00 MiB
llama_context:    Vulkan0 compute buffer size =   616.06 MiB
llama_context:    Vulkan1 compute buffer size =    72.00 MiB
llama_context:        CPU compute buffer size =   404.62 MiB
llama_context: Vulkan_Host compute buffer size = 21014.01 MiB
"""


def test_the_heldout_scout_log():
    result = check_log(SCOUT, weight_format="ud_q2_k_xl")
    checks = {c.quantity: (c.logged, c.kvmem, c.matches) for c in result.checks}
    # a build before PR #13194 (2025-05-20): one cache of n_ctx cells for all 48 layers, chunked or not
    assert checks["CPU KV buffer"] == ("48000.00 MiB", "48000.00 MiB", True)
    # laid out now (was "layer 0 is 'chunked'"): the split is llama.cpp's (6 layers on Vulkan0, 5 on Vulkan1: 6/5 of
    # the bytes both ways); the bytes are llama-quantize's Q2_K mix, which Unsloth's UD-Q2_K_XL outweighs by 5.5 %
    # (Vulkan0 4841.48 / 4573.13) to 8.2 % (CPU_Mapped 31730.07 / 29333.96): a labelled approximation
    assert checks["Vulkan0 model buffer"] == ("4841.48 MiB", "4573.13 MiB", False)
    assert checks["Vulkan1 model buffer"] == ("4034.57 MiB", "3810.94 MiB", False)
    assert checks["CPU_Mapped model buffer"] == ("31730.07 MiB", "29333.96 MiB", False)
    assert not any("chunked" in n for n in result.notes)
    # -nkvo beside GPUs is scheduled (layouts._scheduled): the compute lines are compared (tests/engines/
    # test_llamacpp_nkvo.py says each one's value)
    assert checks["Vulkan_Host compute buffer"] == ("21014.01 MiB", "21014.01 MiB", True)


@pytest.mark.parametrize("preset, flags", [("llama-4-scout-17b-16e", dict(n_cpu_moe=48)),
                                           ("llama-4-maverick-17b-128e", dict(n_gpu_layers=5)),
                                           ("llama-4-maverick-17b-128e", dict(n_cpu_moe=48))])
def test_gpu_layouts_cut_with_their_moe_layers(preset, flags, monkeypatch):
    # scheduled.reduced_layers keeps each kept layer's MoE flag (Maverick: dense and MoE layers alternate, the chunked
    # / full pattern every 4th): the cut graph's buffers on the GPU and the host equal the whole graph's (Q8_0: one
    # type in every layer, so runs of 4 layers repeat; Q4_K_M's ffn_down every third makes units of 12, not cut at 48)
    from kvmem.engines.llamacpp import layouts, scheduled
    from kvmem.engines.llamacpp.offload import layout
    from kvmem.engines.llamacpp.tensors import tensors_for
    calls = []

    def kept(shape, **kw):
        calls.append((shape, kw))
        return scheduled.gpu_graph_bytes(shape, **kw)
    monkeypatch.setattr(layouts, "gpu_graph_bytes", kept)
    model = kvmem.get_model(preset)
    tensors, _ = tensors_for(model, "q8_0")
    lay = layout(model, tensors, gpus=("rtx-3090-24gb",), n_ctx=16384, flash_attn=True, **flags)
    assert lay.compute_exact == {"rtx-3090-24gb": True, "CPU": True}
    shape, kw = calls[-1]
    k = dict(kw)
    weights = tuple(sorted(k.pop("weights")))
    cut = scheduled.reduced_layers(shape, k["layer_gpu"], weights)[0]
    assert cut.n_layer < shape.n_layer
    assert cut.moe_layers == tuple(shape.moe_layers[il] for il in range(cut.n_layer - 1)) + (shape.moe_layers[-1],)
    args = [k.pop(name) for name in ("layer_gpu", "n_gpus", "n_kv", "n_ubatch", "flash_attn", "type_k", "type_v",
                                     "n_outputs", "n_seq", "kv_unified", "swa_cells", "n_copies", "set_rows")]
    whole = scheduled._gpu_graph_bytes(shape, *args, weights, k.pop("inp_embd"), **k)
    assert (lay.compute_bytes["rtx-3090-24gb"], lay.compute_bytes["CPU"]) == whole

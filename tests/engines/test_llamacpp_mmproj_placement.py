"""The multimodal projector's compute buffers where llama.cpp 0c1e57098's mtmd reserves them (the clip backend:
the first GPU, or the CPU with --no-mmproj-offload), counted in the placements, the --fit emulation and the
notes; projectors kvmem has no graph for are said NOT COMPUTED, never counted as 0."""

import dataclasses

import pytest

import kvmem
from kvmem.engines.llamacpp.fitting import _mmproj_on_first
from kvmem.engines.llamacpp.graphs_mmproj import (
    clip_compute_buffers,
    mmproj_compute_bytes,
    mmproj_shape,
    mmproj_shape_from_header,
    mmproj_weight_bytes,
)
from kvmem.engines.llamacpp.offload import llamacpp_offload, mmproj_memory, offload
from kvmem.gpus import get_gpu
from kvmem.sources import Tensor
from kvmem.sources.gguf import GGUFHeader

GEMMA3 = mmproj_shape(kvmem.get_model("gemma-3-27b"))
IMAGE = 896 * 896 * 3 * 4       # the warmup image, f32: 9,633,792 B, the graph's one input (on the CPU)


def _mib(nbytes: int) -> str:
    return f"{nbytes / 1048576.0:.2f}"


def test_gemma3_4b_on_cuda_is_the_published_log():
    # llama.cpp PR #22790 (gemma-3-4b-it, its mmproj on CUDA0, flash attention enabled, graph splits = 1):
    #   CUDA0 compute buffer size =   121.25 MiB
    #     CPU compute buffer size =     9.19 MiB
    shape = dataclasses.replace(GEMMA3, n_embd_text=2560)      # projection_dim 2560 (the 4B's hidden size)
    buffers = clip_compute_buffers(shape, gpu="CUDA0")
    assert buffers == {"CUDA0": 127_139_840, "CPU": IMAGE}
    assert (_mib(buffers["CUDA0"]), _mib(buffers["CPU"])) == ("121.25", "9.19")


def test_the_clip_backend_decides_where_the_buffers_are():
    # offloaded: every node on the GPU (the input's copy in place of the input), the image on the host
    assert clip_compute_buffers(GEMMA3, gpu="CUDA0") == {"CUDA0": 127_139_840, "CPU": IMAGE}
    # --no-mmproj-offload: one CPU buffer, the one the CPU oracle judges (test_llamacpp_graph_mmproj.py)
    assert clip_compute_buffers(GEMMA3, gpu=None) == {"CPU": mmproj_compute_bytes(GEMMA3)} == {"CPU": 127_139_840}
    # -fa off: the 16 heads' KQ, 4,096 x 4,096 x 16 x 4 B = 1,073,741,824 B, is materialised
    off = clip_compute_buffers(GEMMA3, gpu="CUDA0", flash_attn="off")
    assert off == {"CUDA0": 1_186_988_032, "CPU": IMAGE} and off["CUDA0"] - 127_139_840 > 1_073_741_824 - 2 ** 27
    # gpustack/gguf-parser-go issue #44 measured gemma3's clip compute buffer on an MI300X (ROCm0, from llama-server's
    # "[mtmd] adding N MiB to fit_params_target"): 1132 MiB with -fa off, 121 with -fa on
    assert (off["CUDA0"] // 2 ** 20, 127_139_840 // 2 ** 20) == (1132, 121)


def test_a_head_size_cuda_flash_attention_lacks_is_not_computed_but_said():
    shape = dataclasses.replace(GEMMA3, n_head=8)       # 1,152 / 8 = 144: not a size fattn.cu takes
    with pytest.raises(ValueError, match="head size 144 is not one CUDA's flash attention takes"):
        clip_compute_buffers(shape, gpu="CUDA0")
    with pytest.raises(ValueError, match="runs it on the CPU"):
        clip_compute_buffers(shape, gpu="CUDA0", flash_attn="on")
    assert clip_compute_buffers(shape, gpu="CUDA0", flash_attn=False)["CPU"] == IMAGE
    assert clip_compute_buffers(shape, gpu=None) == {"CPU": mmproj_compute_bytes(shape)}   # the CPU runs it


def _header(projector="gemma3", patch="F16", drop=()):
    s = GEMMA3
    meta = {"general.architecture": "clip", "clip.projector_type": projector, "clip.vision.image_size": s.image_size,
            "clip.vision.patch_size": s.patch_size, "clip.vision.embedding_length": s.n_embd,
            "clip.vision.feed_forward_length": s.n_ff, "clip.vision.block_count": s.n_layer,
            "clip.vision.attention.head_count": s.n_head, "clip.vision.projection_dim": s.n_embd_text}
    for key in drop:
        del meta[key]
    tensors = (Tensor("v.patch_embd.weight", patch, (14, 14, 3, 1152), 14 * 14 * 3 * 1152 * 2),
               Tensor("v.blk.0.attn_q.weight", "Q8_0", (1152, 1152), 1152 * 1152 // 32 * 34),
               Tensor("v.blk.0.ffn_up.bias", "F32", (4304,), 4304 * 4),
               Tensor("mm.input_projection.weight", "F16", (5376, 1152), 5376 * 1152 * 2))
    return GGUFHeader(meta, tensors, 0, "mmproj.gguf")


def test_an_mmproj_gguf_gives_its_shape_or_a_reason():
    assert mmproj_shape_from_header(_header()) == GEMMA3
    with pytest.raises(ValueError, match="projector_type 'phi4': kvmem transcribes the clip graphs of gemma3, "
                                         "qwen2vl_merger, qwen2.5vl_merger, qwen3vl_merger, pixtral, gemma4v, "
                                         "llama4, internvl, idefics3, lfm2, minimax_m3, glm4v, kimik25 only"):
        mmproj_shape_from_header(_header("phi4"))
    # a qwen3vl_merger file is read as Qwen3-VL's, and this one lacks its layers' output projection
    with pytest.raises(ValueError, match=r"mmproj \(qwen3vl\) has no tensor v.blk.0.attn_out.weight: clip.cpp"):
        mmproj_shape_from_header(_header("qwen3vl_merger"))
    with pytest.raises(ValueError, match="v.patch_embd.weight Q8_0"):
        mmproj_shape_from_header(_header(patch="Q8_0"))
    with pytest.raises(ValueError, match="has no clip.vision.block_count"):
        mmproj_shape_from_header(_header(drop=("clip.vision.block_count",)))


def test_mmproj_weights_are_padded_as_the_clip_backend_pads_them():
    # CUDA (ggml_backend_cuda_buffer_type_get_alloc_size, 128 B alignment):
    #   patch kernel 1,354,752 B (a multiple of 128); attn_q Q8_0 1,410,048 B + (512 - 1,152 % 512) / 32 x 34 B =
    #   408 B of row padding -> 1,410,456, padded to 1,410,560; the f32 bias 17,216 -> 17,280; the projection
    #   12,386,304 B (a multiple of 128)
    assert mmproj_weight_bytes(_header(), offload=True) == 1_354_752 + 1_410_560 + 17_280 + 12_386_304
    # CPU: each tensor padded to 32 B (all four already are)
    assert mmproj_weight_bytes(_header(), offload=False) == 1_354_752 + 1_410_048 + 17_216 + 12_386_304


def test_placement_counts_the_projector_and_records_it():
    kw = dict(gpus="rtx-3090-24gb", context="32k", weight_dtype="q4_k_m")
    base = llamacpp_offload("gemma-3-27b", **kw)
    p = llamacpp_offload("gemma-3-27b", mmproj=858_000_000, **kw)
    for lay, was in ((p.best, base.best), (p.fit, base.fit)):
        assert lay.total_bytes["CUDA0"] == was.total_bytes["CUDA0"] + 858_000_000 + 127_139_840
        assert lay.total_bytes["CPU"] == was.total_bytes["CPU"] + IMAGE
        assert lay.mmproj == {"device": "CUDA0", "weights_bytes": 858_000_000,
                              "compute_bytes": {"CUDA0": 127_139_840, "CPU": IMAGE}}
        assert lay.to_dict()["mmproj"] == lay.mmproj
    assert "mmproj: weights 858,000,000 B on CUDA0; its compute buffers CUDA0 127,139,840 B, CPU 9,633,792 B" in \
        p.notes[-1]
    assert "mmproj" not in base.best.to_dict()


def test_the_compute_buffer_moves_the_longest_context_on_one_3090():
    # gemma-3-27b q4_k_m with an 858 MB mmproj on one RTX 3090 (24 GiB): at -c 84,480 every layer fits when only
    # the projector's weights are counted (CUDA0 25,760,617,600 of 25,769,803,776 B), but the 121.25 MiB compute
    # buffer mtmd reserves beside them makes that 25,887,757,440 B: kvmem's placement there drops a layer, and
    # the longest -c with all 63 on the GPU is 82,944
    model, gpus = kvmem.get_model("gemma-3-27b"), [get_gpu("rtx-3090-24gb")]
    compute = (("CUDA0", 127_139_840), ("CPU", IMAGE))

    def ngl(context, computed):
        return offload(model, gpus=gpus, context=context, weight_format="q4_k_m", mmproj_bytes=858_000_000,
                       mmproj_compute=compute if computed else None).best.placement.offloaded_layers
    assert (ngl(84_480, False), ngl(84_480, True)) == (63, 62)
    assert (ngl(82_944, True), ngl(83_200, True)) == (63, 62)


def test_a_projector_without_a_graph_is_said_not_computed():
    p = llamacpp_offload("llama-3-8b", gpus="rtx-3090-24gb", context="8k", weight_dtype="q4_k_m", mmproj=600_000_000)
    assert p.best.mmproj == {"device": "CUDA0", "weights_bytes": 600_000_000, "compute_bytes": None}
    assert "its compute buffer is NOT COMPUTED and not counted" in p.notes[-1]
    assert "config has no vision_config kvmem builds a projector's graph from (Gemma 3, Gemma 4, Qwen2-VL" in p.notes[-1]
    model = kvmem.get_model("gemma-3-27b")
    weights, compute, note = mmproj_memory(model, 1, gpu="CUDA0", flash_attn=None)
    assert (weights, compute) == (1, (("CUDA0", 127_139_840), ("CPU", IMAGE)))
    with pytest.raises(ValueError, match="mmproj must be a GGUF path or a byte count"):
        mmproj_memory(model, 1.5, gpu="CUDA0")


def test_fit_counts_the_projector_on_the_first_gpu_only_when_offloaded():
    # server-context.cpp adds mtmd_get_memory_usage (weights + compute) to the first GPU's fit target
    kw = {"mmproj_bytes": 858_000_000, "mmproj_compute": (("CUDA0", 127_139_840), ("CPU", IMAGE))}
    assert _mmproj_on_first(kw, "CUDA0") == 858_000_000 + 127_139_840
    assert _mmproj_on_first({**kw, "mmproj_offload": False}, "CUDA0") == 0
    assert _mmproj_on_first({"mmproj_bytes": 5}, "CUDA0") == 5      # not computed: the weights alone


# ---- kvmem fit / plan: the sizing options mmproj and mmproj_offload ------------------------------------------

FIT = dict(context="32k", weight_dtype="q4_k_m", engine="llama.cpp", batch=1)


def test_fit_counts_the_projector_on_the_gpu():
    # every layer on one 3090: the projector's 858,000,000 B join the weights and its 127,139,840 B compute buffer
    # the activations; the longest context loses (858,000,000 + 127,139,840) B / 81,920 B a token (gemma-3-27b's 10
    # full layers x 16 KV heads x 128 x 2 (K, V) x 2 B; its SWA cells do not grow) = 12,025.6 tokens: 46 or 47 pads
    # of 256 by where the boundaries fall; the placement's (fit's since review finding 3): 94,720 -> 82,944, 46 pads
    # (budget.py's estimate, 288.6 MiB more compute, answered 91,392 -> 79,360)
    base = kvmem.fit("gemma-3-27b", gpu="rtx-3090-24gb", **FIT)
    with_mm = kvmem.fit("gemma-3-27b", gpu="rtx-3090-24gb", mmproj=858_000_000, **FIT)
    assert with_mm.breakdown.weights_bytes == base.breakdown.weights_bytes + 858_000_000
    assert with_mm.breakdown.activations_bytes == base.breakdown.activations_bytes + 127_139_840
    assert (base.max_context, with_mm.max_context) == (94_720, 82_944) and 94_720 - 82_944 == 46 * 256
    assert any(n.startswith("mmproj: weights 858,000,000 B on CUDA0") for n in with_mm.notes)
    host = kvmem.fit("gemma-3-27b", gpu="rtx-3090-24gb", mmproj=858_000_000, mmproj_offload=False, **FIT)
    assert host.breakdown == base.breakdown         # on the host: the GPU's parts are the text model's


def test_the_verdict_places_the_projector_and_the_plan_loads_it(tmp_path):
    from kvmem.oracles.llamacpp_mmproj import write_mmproj
    path = str(tmp_path / "mmproj-gemma-3-27b.gguf")
    write_mmproj(GEMMA3, path)      # sparse: its header and 856,359,360 B of tensors, 27 x 64 B short of 128 B each
    base = kvmem.fit("gemma-3-27b", gpu="rtx-3060-12gb", **FIT)
    fit = kvmem.fit("gemma-3-27b", gpu="rtx-3060-12gb", mmproj=path, **FIT)
    assert (base.placement["flags"], fit.placement["flags"]) == (["-ngl", "36"], ["-ngl", "33"])
    parts = fit.placement["breakdown"]
    assert parts["total_bytes"] == sum(parts[k] for k in ("weights_bytes", "kv_bytes", "activations_bytes",
                                                          "overhead_bytes", "free_bytes"))
    assert parts["total_bytes"] - parts["free_bytes"] == fit.placement["total_bytes"]["CUDA0"]
    lay = kvmem.llamacpp_offload("gemma-3-27b", gpus="rtx-3060-12gb", context="32k", weight_dtype="q4_k_m",
                                 mmproj=path)
    assert lay.best.mmproj == {"device": "CUDA0", "weights_bytes": 856_359_360 + 27 * 64,
                               "compute_bytes": {"CUDA0": 127_139_840, "CPU": IMAGE}}
    assert "'load_hparams: model size:         816.69 MiB'" in lay.notes[-1]       # 856,359,360 B, unpadded
    plan = kvmem.plan("gemma-3-27b", gpu="rtx-3090-24gb", mmproj=path, mmproj_offload=False, **FIT)
    assert plan.command.endswith(f"--mmproj {path} --no-mmproj-offload")


def test_mmproj_options_are_read_or_refused_by_name():
    from kvmem.engines.llamacpp.offload import mmproj_option
    model = kvmem.get_model("gemma-3-27b")
    assert mmproj_option(model, {"mmproj": "858MB"})[0] == 858_000_000
    assert mmproj_option(model, {}) == (0, None, "")
    with pytest.raises(ValueError, match="mmproj_offload must be true or false, got 'yes'"):
        mmproj_option(model, {"mmproj": 1, "mmproj_offload": "yes"})


def test_check_log_keeps_the_projectors_buffers_apart():
    # a published full-offload log (docs/research/llamacpp_offload_logs.json) with PR #22790's clip lines after it
    # (timestamped as llama-server prints them): the text model's CUDA0 and CUDA_Host compute lines still match
    # alone, the clip's are said not checked (before: summed with them, 379.75 MiB against kvmem's 258.50)
    import json
    from pathlib import Path

    from kvmem import logcheck
    entry = next(e for e in json.loads((Path(__file__).parents[2] / "docs/research/llamacpp_offload_logs.json")
                                       .read_text()) if e["id"] == "llama3-8b-q4km-full-offload")
    log = entry["log"] + ("\n0.00.856.041 I clip_ctx: CLIP using CUDA0 backend\n"
                          "0.01.030.317 I reserve_compute_meta:      CUDA0 compute buffer size =   121.25 MiB\n"
                          "0.01.030.323 I reserve_compute_meta:        CPU compute buffer size =     9.19 MiB\n")
    report = logcheck.check_log(log, model="llama-3-8b", engine="llama.cpp", build="2024-07-01", n_ctx=512,
                                weight_format="q4_k_m", flash_attn=False)
    compute = [c for c in report.checks if "compute buffer" in c.quantity]
    assert [(c.quantity, c.logged, c.matches) for c in compute] == [("CUDA0 compute buffer", "258.50 MiB", True),
                                                                    ("CUDA_Host compute buffer", "9.01 MiB", True)]
    assert any("projector's compute buffers (mtmd) are not checked" in n for n in report.notes)


def test_the_decode_curve_takes_the_projector_the_panel_passes():
    # the Fit page's expander passes llamacpp_offload's options on (panel.offload_options): mmproj was a TypeError
    from kvmem.engines.llamacpp.panel import panel_decode_curve
    args = dict(gpus=["rtx-3090-24gb"], context=32768, batch=1, weight_dtype="q4_k_m", kv_dtype="auto",
                host_memory=None)
    model = kvmem.get_model("gemma-3-27b")
    base, with_mm = (panel_decode_curve(model, options=o, **args)[-1] for o in ({}, {"mmproj": 858_000_000}))
    assert with_mm.total_bytes["CUDA0"] == base.total_bytes["CUDA0"] + 858_000_000 + 127_139_840
    assert with_mm.total_bytes["CPU"] == base.total_bytes["CPU"] + IMAGE


def test_a_qwen35_projector_from_its_config_is_counted():
    # qwen3.5-27b's vision_config gives Qwen3.5's tower (tests/engines/test_llamacpp_mmproj_clip.py): with an mmproj
    # given as its weight bytes, mtmd's buffers are counted on CUDA0 (248.10 MiB) and the host (24.93 MiB)
    weights, compute, note = mmproj_memory(kvmem.get_model("qwen3.5-27b"), 931_000_000, gpu="CUDA0", flash_attn=None)
    assert (weights, compute) == (931_000_000, (("CUDA0", 260_149_504), ("CPU", 26_136_832)))
    assert "'reserve_compute_meta:      CUDA0 compute buffer size =   248.10 MiB'" in note

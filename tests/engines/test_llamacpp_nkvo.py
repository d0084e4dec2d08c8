"""-nkvo beside GPUs (cparams.offload_kqv false): the KV cache in a host buffer (llama.cpp@0c1e57098
src/llama-kv-cache.cpp#L212-L221: ggml_backend_cpu_buffer_type without offload), each attention output without flash
attention pinned to the CPU backend (src/llama-graph.cpp#L2746-L2749), the rest left to ggml_backend_sched
(kvmem.engines.llamacpp.ggml_sched.sched_sizes ``kqv_host``; layouts._scheduled)."""

from __future__ import annotations

import pytest

import kvmem
from kvmem.engines.llamacpp import layouts, scheduled
from kvmem.engines.llamacpp.compute import graph_shape
from kvmem.engines.llamacpp.layouts import layout
from kvmem.engines.llamacpp.pipeline import pipeline_parallel
from kvmem.engines.llamacpp.tensors import tensors_for
from kvmem.logcheck import check_log

MIB = 1 << 20


def _llama8b(**kw):
    model = kvmem.get_model("llama-3.1-8b")
    tensors, _ = tensors_for(model, "q4_k_m")
    return layout(model, tensors, gpus=("rtx-3090-24gb",), n_ctx=32768, **kw)


def test_attention_over_a_host_cache_runs_on_the_host():
    # Llama-3.1-8B Q4_K_M, every layer on one GPU, -c 32768, -ub 512, no flash attention. With -nkvo the host buffer
    # is the attention of one layer: KQ 32768 x 512 x 32 heads x 4 B = 2048 MiB (the softmax in place) after the
    # inputs and copies it keeps: inp_tokens 2 KiB, inp_embd 512 x 4096 x 4 B = 8 MiB, inp_pos 2 KiB, the K / V row
    # indices 4 KiB and 512 x 1024 x 8 B = 4 MiB, the f32 mask 32768 x 512 x 4 B = 64 MiB, out_ids' one row (PR #23861) 4 B in 32, the hole
    # of the K and V rows copied in for the stores (2 x 1024 x 512 x 4 B = 4 MiB, freed), Q copied in
    # 128 x 512 x 32 x 4 B = 8 MiB: 2136 MiB + 8 KiB + 32 B
    nkvo = _llama8b(flash_attn=False, kv_offload=False)
    assert nkvo.compute_bytes["CPU"] == (2136 << 20) + 8192 + 32
    # the GPU keeps the projections and the FFN: its peak is the SwiGLU's (gate, up and their product, 14336 x 512 x
    # 4 B = 28 MiB each, the product placed at 80 MiB + 2 KiB), where the offloaded cache's KQ (2048 MiB) was
    assert nkvo.compute_bytes["rtx-3090-24gb"] == (108 << 20) + 2048
    assert round(_llama8b(flash_attn=False).compute_bytes["rtx-3090-24gb"] / MIB, 2) == 2148.01
    assert nkvo.compute_exact == {"rtx-3090-24gb": True, "CPU": True}


def test_flash_attention_copies_a_layers_cache_to_the_gpu():
    # flash attention has no pin: ggml_backend_sched expands the GPU of attn_output up to it, so each layer's K and V
    # views (128 x 32768 cells x 8 heads x 2 B = 64 MiB each) and the f16 mask (32768 x 512 x 2 B = 32 MiB) are
    # copied from the host; the V copy placed at 192 MiB + 2 KiB is the peak. The host keeps the inputs (48.01 MiB)
    nkvo = _llama8b(flash_attn=True, kv_offload=False)
    assert nkvo.compute_bytes["rtx-3090-24gb"] == (256 << 20) + 2048
    assert round(nkvo.compute_bytes["CPU"] / MIB, 2) == 48.01
    assert round(_llama8b(flash_attn=True).compute_bytes["rtx-3090-24gb"] / MIB, 2) == 140.01


def test_nkvo_turns_pipeline_parallelism_off(monkeypatch):
    # src/llama-context.cpp#L430-L435: pipeline_parallel needs cparams.offload_kqv; 2 GPUs, full offload
    assert not pipeline_parallel(("CUDA0", "CUDA1"), full=True, overrides=False, kv_offload=False)
    seen = []

    def kept(shape, **kw):
        seen.append(kw)
        return scheduled.gpu_graph_bytes(shape, **kw)
    monkeypatch.setattr(layouts, "gpu_graph_bytes", kept)
    model = kvmem.get_model("llama-3.1-8b")
    tensors, _ = tensors_for(model, "q4_k_m")
    for kvo in (True, False):
        layout(model, tensors, gpus=("CUDA0", "CUDA1"), n_ctx=8192, flash_attn=False, kv_offload=kvo)
    assert [(kw["n_copies"], kw["kv_host"]) for kw in seen] == [(4, False), (1, True)]


def test_graphs_without_the_pin_are_not_scheduled():
    # a DeltaNet hybrid's recurrent state goes to the host too (src/llama-memory-recurrent.cpp#L85): a layer with a
    # cache and no attention output, not modelled, so its GPU compute is the estimate, marked
    assert not scheduled.kqv_pinned(graph_shape(kvmem.get_model("qwen3.5-397b-a17b")))
    assert scheduled.kqv_pinned(graph_shape(kvmem.get_model("llama-3.1-8b")))
    assert scheduled.kqv_pinned(graph_shape(kvmem.get_model("deepseek-v3")))     # mla_mha's output is marked
    assert not scheduled.kqv_pinned(graph_shape(kvmem.get_model("glm-5.1")))    # the indexer's cache on the host too
    model = kvmem.get_model("qwen3.5-27b")
    tensors, _ = tensors_for(model, "q4_k_m")
    kw = dict(gpus=("rtx-3090-24gb",), n_ctx=8192, flash_attn=False)
    assert layout(model, tensors, **kw).compute_exact["rtx-3090-24gb"]
    assert not layout(model, tensors, kv_offload=False, **kw).compute_exact["rtx-3090-24gb"]


# the held-out log of docs/research/heldout/llamacpp_logs_2026-12-07.md row 10 (a public GitHub notes file, search
# index id 1349331823): mainline llama-server of April 2025 on a Mac Pro's two FirePro D700 (Vulkan, with BLAS),
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


def test_the_heldout_scout_log_compute_lines():
    checks = {c.quantity: (c.logged, c.kvmem, c.matches) for c in check_log(SCOUT, weight_format="ud_q2_k_xl").checks}
    # the host's two buffers to the printed hundredth: the pinned one (the host layers' and the GPU layers' attention
    # over the 256000-cell host cache, KQ 256000 x 512 x 40 heads x 4 B = 20000 MiB) and the BLAS backend's
    assert checks["Vulkan_Host compute buffer"] == ("21014.01 MiB", "21014.01 MiB", True)
    assert checks["CPU (BLAS) compute buffer"] == ("404.62 MiB", "404.62 MiB", True)
    # the GPUs, compared now (the cache's KQ on the GPUs would have given 21050.00 / 21040.10 MiB): Vulkan1 +0.09
    # (0.13 %; 88.09 with the one GLU op of builds from PR #14158: the April build's build_ffn / build_moe_ffn made
    # SwiGLU of ggml_silu then ggml_mul, both in place: graphs.glu). Vulkan0 -75.06 (331.00 with the GLU op): the
    # first GPU takes the host layers' prompt-sized MUL_MAT_ID (offload_op) and a copy of each host expert tensor;
    # the file's UD-Q2_K_XL types are not printed (Q2_K's mix: 275 MiB ffn_down_exps)
    assert checks["Vulkan0 compute buffer"] == ("616.06 MiB", "541.00 MiB", False)
    assert checks["Vulkan1 compute buffer"] == ("72.00 MiB", "72.09 MiB", False)



@pytest.mark.parametrize("name, n_gpus, ngl, fa", [("llama-3.1-8b", 2, 6, False), ("deepseek-v2-lite", 2, 999, False),
                                                    ("gemma-3-12b", 2, 38, True), ("qwen3-30b-a3b", 1, 19, False)])
def test_nkvo_graphs_cut_to_their_runs_keep_every_buffer(name, n_gpus, ngl, fa, monkeypatch):
    # scheduled.reduced_layers with the cache on the host: the cut graph's buffers are the whole graph's on every device
    # (15 of 15 seeded -nkvo layouts of five presets when it was written; these four kept)
    seen = []

    def kept(shape, **kw):
        seen.append((shape, kw))
        return scheduled.gpu_graph_bytes(shape, **kw)
    monkeypatch.setattr(layouts, "gpu_graph_bytes", kept)
    model = kvmem.get_model(name)
    tensors, _ = tensors_for(model, "q4_k_m")
    cut = layout(model, tensors, gpus=("CUDA0", "CUDA1")[:n_gpus], n_ctx=4096, flash_attn=fa, kv_offload=False,
                 n_gpu_layers=ngl)
    shape, kw = seen[-1]
    kw = dict(kw)
    whole = scheduled._gpu_graph_bytes(shape, *(kw.pop(k) for k in (
        "layer_gpu", "n_gpus", "n_kv", "n_ubatch", "flash_attn", "type_k", "type_v", "n_outputs", "n_seq", "kv_unified",
        "swa_cells", "n_copies", "set_rows")), tuple(sorted(kw.pop("weights"))), kw.pop("inp_embd"), **kw)
    assert kw["kv_host"] and list(whole) == [cut.compute_bytes[d] for d in ("CUDA0", "CUDA1")[:n_gpus]] + [
        cut.compute_bytes["CPU"]]


def test_nkvo_read_from_the_command():
    # check-log reads -nkvo / --no-kv-offload from the log's command (common/arg.cpp#L2413-L2420): at -ngl 0 the KV
    # buffers alone cannot tell it. The published -ngl 0 BLAS run of Qwen3-235B (b5269, flash attention on) given
    # -nkvo: the same three lines, as flash attention has no pin and the cache is on the host either way
    from tests.engines.test_llamacpp_compute_builds import QWEN3_235B_Q6_K_NGL0_B5269 as LOG
    command, rest = LOG.split("\n", 1)
    for flag in ("-nkvo", "--no-kv-offload"):
        result = check_log(f"{command} {flag}\n{rest}", "qwen3-235b-a22b")
        computes = {c.quantity: (c.kvmem, c.matches) for c in result.checks if "compute" in c.quantity}
        assert computes == {"CUDA0 compute buffer": ("742.00 MiB", True), "CPU (BLAS) compute buffer": (
            "304.75 MiB", True), "CUDA_Host compute buffer": ("65.01 MiB", True)}

"""Compute buffers that were estimates (issue 34 item 3) and are now llama.cpp's graphs: gemma2 / gemma3 at builds
before PR #13194 (2025-05-20), where one KV cache holds every layer and the sliding layers' mask spans its n_kv cells
(layouts._scheduled). No published log of such a build prints a compute line, so the host buffer's inputs are
derived by hand here; the CUDA figure follows from the same graph (scheduled.gpu_graph_bytes)."""

import kvmem
from kvmem.engines.llamacpp.layouts import layout
from kvmem.engines.llamacpp.tensors import tensors_for

MIB = 1048576


def test_gemma3_before_the_swa_cache_masks_every_cell():
    model = kvmem.get_model("gemma-3-1b")       # hidden 1152, window 512
    tensors, _ = tensors_for(model, "q4_k_m")
    # build_attn_inp_kv_unified of b5331 (llama.cpp@33eff4024 src/llama-graph.cpp#L1366-L1390): two f32 masks over the
    # one cache's 32768 cells x 512 tokens (no flash attention by default then); the host also holds token_embd's
    # GET_ROWS (1152 x 512 x 4 B) and the token, position and out_ids inputs (3 x 512 x 4 B)
    may_9 = layout(model, tensors, gpus=["CUDA0"], n_gpu_layers=99, n_ctx=32768, build="2025-05-09")
    assert may_9.compute_bytes["CPU"] == 2 * 32768 * 512 * 4 + 1152 * 512 * 4 + 3 * 512 * 4    # 130.26 MiB
    assert may_9.compute_exact == {"CUDA0": True, "CPU": True}
    # from PR #13194 the sliding layers' mask spans the SWA cache's cells: min(32768, pad(512 + 512, 256)) = 1024
    may_20 = layout(model, tensors, gpus=["CUDA0"], n_gpu_layers=99, n_ctx=32768, build="2025-05-20")
    assert may_20.compute_bytes["CPU"] == (32768 + 1024) * 512 * 4 + 1152 * 512 * 4 + 3 * 512 * 4     # 68.26 MiB
    # the GPU's peak here is the prompt graph's logits, not a mask: the same on both builds
    assert may_9.compute_bytes["CUDA0"] == may_20.compute_bytes["CUDA0"]


def test_deepseek2_per_head_cache_with_ggml_cpy_stores():
    # builds from PR #12181 (2025-03-13, llm_graph_context) to PR #14959 (2025-08-02) store K / V by ggml_cpy into
    # views (no index inputs): the per-head graph (graphs_mla_attn.per_head_attention, Q concatenated before PR #27382)
    # over a GGUF without the MLA split (b5331: llama.cpp@33eff4024 src/llama-model.cpp#L10275-L10308); before PR #12801
    # (2025-04-15) every deepseek2 GGUF is one. deepseek-v2-lite (hidden 2048, 16 heads, V 128), 8192 cells, 512 tokens
    model = kvmem.get_model("deepseek-v2-lite")
    tensors, _ = tensors_for(model, "q4_k_m")

    def lay(build, mla=None):
        return layout(model, tensors, gpus=["CUDA0"], n_gpu_layers=99, n_ctx=8192, build=build, mla=mla,
                      flash_attn=False)
    april = lay("2025-04-01")
    # the host: the f32 mask (8192 x 512 x 4 B), token_embd's GET_ROWS (2048 x 512 x 4 B), tokens, positions, out_ids
    assert april.compute_bytes["CPU"] == 8192 * 512 * 4 + 2048 * 512 * 4 + 3 * 512 * 4
    assert april.compute_exact == {"CUDA0": True, "CPU": True}
    assert lay("2025-06-28", "none").compute_bytes == april.compute_bytes
    # PR #14158's day (2025-06-29): the experts' SwiGLU one GLU op with its own [1408, 6, 512] f32 output, not
    # ggml_silu + ggml_mul in place (graphs.glu). No log of that day prints this model's buffers (kvmem's allocator
    # gives 12,857,344 B more), so what is checked is what the change must do: the GPU's buffer grows, by less than
    # the new output's own 17,301,504 B (the gate and up it frees are reused); the host runs no expert: equal
    july = lay("2025-07-01", "none")
    assert july.compute_bytes["CPU"] == april.compute_bytes["CPU"]
    assert 0 < july.compute_bytes["CUDA0"] - april.compute_bytes["CUDA0"] <= 1408 * 6 * 512 * 4
    # PR #14959's day: ggml_set_rows with i64 indices, K's one a token and the transposed V's one an element
    # (512 x 16 heads x 128), on the host and copied to the GPU
    aug = lay("2025-08-02", "none")
    for device in ("CPU", "CUDA0"):
        assert aug.compute_bytes[device] - july.compute_bytes[device] == 512 * 8 + 512 * 16 * 128 * 8
    # before PR #12181 the graph was llm_build_context's, not transcribed: the estimate, marked
    assert not layout(model, tensors, gpus=["CUDA0"], n_gpu_layers=99, n_ctx=8192, build="2025-03-01",
                      flash_attn=False).compute_exact["CUDA0"]

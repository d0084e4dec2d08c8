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

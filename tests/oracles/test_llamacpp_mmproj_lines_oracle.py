"""The lines kvmem says llama-server prints for a projector (graphs_mmproj.clip_log_lines, in fit's mmproj note)
against llama.cpp 0c1e57098's libmtmd (llama-cpp-python 0.3.36, CPU: --no-mmproj-offload's placement) loading a
sparse Gemma 3 mmproj GGUF, and the projector's bytes offload counts from the same file (its header's tensors
padded to the CPU's 32 B, its compute buffer): "load_hparams: model size" and "reserve_compute_meta: CPU compute
buffer size", text for text. Two cases, about 4 s."""

from tests.oracles.conftest import require

require("llama_cpp")

import ctypes  # noqa: E402

import pytest  # noqa: E402

import kvmem  # noqa: E402
from kvmem.engines.llamacpp.graphs_mmproj import clip_log_lines, mmproj_shape  # noqa: E402
from kvmem.engines.llamacpp.offload import mmproj_memory  # noqa: E402
from kvmem.oracles.llamacpp_buffers import in_child, llama_lib  # noqa: E402
from kvmem.oracles.llamacpp_mmproj import random_mmproj_shape, write_mmproj, write_text_model  # noqa: E402


def _printed(mmproj: str, text: str, flash_attn: int) -> list:
    """mtmd's lines for the two clip_log_lines names (CPU, warmup on), in a forked child."""
    from llama_cpp import mtmd_cpp
    lib, lines, callback = llama_lib()
    mtmd_cpp.mtmd_log_set(callback, ctypes.c_void_p(0))
    del lines[:]
    model = lib.llama_model_load_from_file(text.encode(), lib.llama_model_default_params())
    try:
        params = mtmd_cpp.mtmd_context_params_default()
        params.use_gpu, params.flash_attn_type = False, flash_attn
        ctx = mtmd_cpp.mtmd_init_from_file(mmproj.encode(), model, params)
        assert ctx, "".join(lines)[-2000:]
        mtmd_cpp.mtmd_free(ctx)
    finally:
        lib.llama_model_free(model)
    return [line for line in "".join(lines).splitlines()
            if line.startswith(("load_hparams: model size:", "reserve_compute_meta:")) and "MiB" in line]


@pytest.mark.parametrize("shape, flash_attn", [(mmproj_shape(kvmem.get_model("gemma-3-27b")), "auto"),
                                               (random_mmproj_shape(3), "off")])
def test_the_clip_lines_and_bytes_are_mtmds(shape, flash_attn, tmp_path):
    mmproj, text = str(tmp_path / "mmproj.gguf"), str(tmp_path / "text.gguf")
    write_mmproj(shape, mmproj)
    write_text_model(shape.n_embd_text, text)
    printed = in_child(_printed, mmproj, text, -1 if flash_attn == "auto" else 0)    # LLAMA_FLASH_ATTN_TYPE_AUTO = -1 (llama.h)
    weights, compute, note = mmproj_memory(kvmem.get_model("gemma-3-27b"), mmproj, gpu=None, flash_attn=flash_attn)
    from kvmem.sources.gguf import read_header
    unpadded = sum(t.nbytes for t in read_header(mmproj).tensors)
    assert len(printed) == 2 and printed == clip_log_lines(dict(compute), unpadded)
    assert all(f"'{line}'" in note for line in printed)

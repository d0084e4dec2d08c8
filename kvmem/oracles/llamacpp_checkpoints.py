"""llama.cpp's own state size as the judge of kvmem.engines.llamacpp.checkpoints.

The model's GGUF (kvmem/oracles/gguf_files.py) is loaded without tensor data (no_alloc) and a context
made for one sequence; ``llama_state_seq_get_size_ext(ctx, 0, LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY)`` is what
llama-server stores as a checkpoint (common/common.cpp common_prompt_checkpoint::update_tgt). Before a
decode the sequence holds no cell, so llama.cpp counts the checkpoint's headers alone: compared with
kvmem's checkpoint less its one cell (the pos and n_seq_id pair, 8 B) and the sequence's rows, whose bytes
are the "llama_memory_recurrent: size" line kvmem/oracles/llamacpp.py already checks.
"""

from __future__ import annotations

import os
import tempfile

from ..engines.llamacpp.checkpoints import checkpoint_bytes
from .gguf_files import write_gguf
from .llamacpp import _lib
from .llamacpp_buffers import in_child
from .report import Check


def _state_size(path: str) -> int:
    lib, lines, _ = _lib()
    params = lib.llama_model_default_params()
    params.no_alloc = True
    params.use_extra_bufts = False
    params.load_mode = lib.LLAMA_LOAD_MODE_NONE
    model = lib.llama_model_load_from_file(path.encode(), params)
    if not model:
        raise RuntimeError("llama.cpp could not load the GGUF:\n" + "".join(c for _, c in lines[-20:]))
    try:
        cparams = lib.llama_context_default_params()
        cparams.n_ctx, cparams.n_seq_max = 4096, 1
        ctx = lib.llama_init_from_model(model, cparams)
        try:
            return lib.llama_state_seq_get_size_ext(ctx, 0, lib.LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY)
        finally:
            lib.llama_free(ctx)
    finally:
        lib.llama_model_free(model)


def _engine(model) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.gguf")
        write_gguf(model, path)
        return _state_size(path)


def run_case(name: str, model) -> list[Check]:
    ours, _ = checkpoint_bytes(model, tokens=4096)
    from ..engines import engine_estimate
    recurrent = next(c for c in engine_estimate(model, engine="llamacpp", tokens=4096, batch=1).details.caches
                     if c["cache"] == "recurrent")
    rows = (recurrent["r_bytes"] + recurrent["s_bytes"]) // recurrent["cells"]
    theirs = in_child(_engine, model)
    return [Check(name, "checkpoint headers (no cell yet)", ours - rows - 8, theirs)]


def directed_cases() -> list[tuple[str, object]]:
    """Recurrent hybrids the GGUF writer knows: Mamba, Bamba-style granite hybrids, LFM2 (the oracle's own
    random configs, kvmem/oracles/llamacpp.py)."""
    from . import llamacpp
    cases = []
    for make in (llamacpp._mamba_model, llamacpp._granite_hybrid_model, llamacpp._lfm2_model):
        for i in range(2):
            _, model = make(7, i)
            cases.append((f"{model.model_type} {i}", model))
    return cases

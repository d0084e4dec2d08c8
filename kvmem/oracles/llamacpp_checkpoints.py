"""llama.cpp's own state size as the judge of kvmem.engines.llamacpp.checkpoints.

``llama_state_seq_get_size_ext(ctx, 0, LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY)`` is what llama-server stores
as a checkpoint (common/common.cpp common_prompt_checkpoint::update_tgt). Two judgements:
- sliding-window models (gemma2, gemma3): the model's GGUF (kvmem/oracles/gguf_files.py, zero weights) is
  loaded, a prompt of N tokens decoded, and the state size after it compared with kvmem's whole checkpoint
  (N below and above the window);
- recurrent hybrids: a decode of the writer's GGUFs aborts in ggml's SSM ops, so the GGUF is loaded without
  tensor data (no_alloc) and the state read before any decode, when the sequence holds no cell: llama.cpp
  counts the headers alone, compared with kvmem's checkpoint less its one cell (pos and n_seq_id, 8 B) and the
  sequence's rows, whose bytes are the "llama_memory_recurrent: size" line kvmem/oracles/llamacpp.py checks.
"""

from __future__ import annotations

import os
import tempfile

from ..engines.llamacpp.checkpoints import checkpoint_bytes
from .gguf_files import write_gguf
from .llamacpp_buffers import in_child
from .llamacpp_lib import load_library, load_model
from .report import Check


def _state_size(path: str) -> int:
    lib, lines, _ = load_library()
    model = load_model(lib, lines, path)
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


def _state_after_decode(model, n_tokens: int) -> int:
    lib, lines, _ = load_library()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.gguf")
        write_gguf(model, path)
        loaded = lib.llama_model_load_from_file(path.encode(), lib.llama_model_default_params())
        if not loaded:
            raise RuntimeError("llama.cpp could not load the GGUF:\n" + "".join(c for _, c in lines[-20:]))
        try:
            cparams = lib.llama_context_default_params()
            cparams.n_ctx, cparams.n_seq_max, cparams.n_batch, cparams.n_ubatch = 1024, 1, 1024, 512
            ctx = lib.llama_init_from_model(loaded, cparams)
            try:
                tokens = (lib.llama_token * n_tokens)(*[1] * n_tokens)
                if lib.llama_decode(ctx, lib.llama_batch_get_one(tokens, n_tokens)) != 0:
                    raise RuntimeError("llama_decode failed")
                return lib.llama_state_seq_get_size_ext(ctx, 0, lib.LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY)
            finally:
                lib.llama_free(ctx)
        finally:
            lib.llama_model_free(loaded)


def run_swa_case(name: str, model, n_tokens: int) -> list[Check]:
    ours, _ = checkpoint_bytes(model, tokens=n_tokens)
    return [Check(name, f"checkpoint after {n_tokens} tokens", ours, in_child(_state_after_decode, model, n_tokens))]


def swa_cases() -> list[tuple[str, object, int]]:
    """Random gemma2 / gemma3 configs (kvmem/oracles/llamacpp.py's own draws), a prompt below and above the window."""
    from . import llamacpp
    cases = []
    for family in ("gemma2", "gemma3"):
        for i in range(2):
            _, model, _ = llamacpp.random_case(7, i, family)
            window = min(layer.window for layer in model.layers if layer.window)
            cases += [(f"{family} {i}", model, 10), (f"{family} {i}", model, min(window + 44, 1000))]
    return cases


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

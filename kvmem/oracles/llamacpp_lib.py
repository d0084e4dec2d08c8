"""The vendored llama.cpp as the oracles load it: the library with its log captured, the ids of the KV
types and flash-attention modes its context parameters take (shared by kvmem.oracles.llamacpp*)."""

from __future__ import annotations

import ctypes

GGML_TYPE_IDS = {"f32": 0, "f16": 1, "q4_0": 2, "q4_1": 3, "q5_0": 6, "q5_1": 7, "q8_0": 8, "iq4_nl": 20,
                 "bf16": 30}
FLASH_ATTN = {"auto": -1, False: 0, True: 1}


def load_library():
    """llama-cpp-python's library, initialised, with every log line it prints captured: (lib, lines, the
    callback, kept alive by the caller)."""
    import llama_cpp as lib
    lines = []

    @lib.llama_log_callback
    def capture(level, text, _user_data):
        lines.append((level, text.decode("utf-8", errors="replace")))

    lib.llama_log_set(capture, ctypes.c_void_p(0))
    lib.llama_backend_init()
    return lib, lines, capture


def load_model(lib, lines: list, path: str):
    """The GGUF at ``path`` loaded with no tensor data allocated or mapped (the sizes alone); RuntimeError with
    llama.cpp's last lines when it does not load."""
    params = lib.llama_model_default_params()
    params.no_alloc = True
    params.use_extra_bufts = False
    params.load_mode = lib.LLAMA_LOAD_MODE_NONE   # no mmap: with no_alloc nothing is mapped
    model = lib.llama_model_load_from_file(path.encode(), params)
    if not model:
        raise RuntimeError("llama.cpp could not load the GGUF:\n" + "".join(c for _, c in lines[-20:]))
    return model


def context_params(lib, setting: dict):
    """llama_context_params for an oracle setting: n_ctx, n_seq, type_k, type_v, flash_attn, and the optional
    n_batch (2048), n_ubatch (512), n_rs_seq, swa_full, kv_unified."""
    cparams = lib.llama_context_default_params()
    cparams.n_ctx, cparams.n_seq_max = setting["n_ctx"], setting["n_seq"]
    cparams.n_batch, cparams.n_ubatch = setting.get("n_batch", 2048), setting.get("n_ubatch", 512)
    if "n_rs_seq" in setting:
        cparams.n_rs_seq = setting["n_rs_seq"]
    cparams.type_k, cparams.type_v = GGML_TYPE_IDS[setting["type_k"]], GGML_TYPE_IDS[setting["type_v"]]
    cparams.flash_attn_type = FLASH_ATTN[setting["flash_attn"]]
    cparams.swa_full, cparams.kv_unified = setting.get("swa_full", False), setting.get("kv_unified", False)
    return cparams


def engine_in_child(write, model, engine_side, setting: dict, *, tail: int = 2) -> tuple:
    """``engine_side(path, setting)`` on the GGUF ``write(model, path)`` makes, in a forked child: a GGML_ASSERT
    abort ends the child, not this process. ("ok", *result), ("load", llama.cpp's last ``tail`` lines) or
    ("abort", why)."""
    import multiprocessing
    import os
    import tempfile

    def child(conn):
        os.environ["GGML_NO_BACKTRACE"] = "1"
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "model.gguf")
            write(model, path)
            try:
                conn.send(("ok",) + engine_side(path, setting))
            except RuntimeError as error:
                conn.send(("load", str(error).splitlines()[-tail:]))
        conn.close()

    context = multiprocessing.get_context("fork")
    parent, sent = context.Pipe(duplex=False)
    process = context.Process(target=child, args=(sent,))
    process.start()
    sent.close()
    try:
        reply = parent.recv()
    except EOFError:
        reply = None
    process.join()
    return reply or ("abort", f"llama.cpp aborted (exit code {process.exitcode})")

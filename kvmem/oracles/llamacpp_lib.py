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

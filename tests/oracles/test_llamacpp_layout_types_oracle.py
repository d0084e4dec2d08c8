"""kvmem's one table of ggml types (kvmem.dtypes.GGML_TYPES) against ggml's own type_traits, read through
libggml-base of llama-cpp-python 0.3.36 (llama.cpp 0c1e57098): ggml_type_name, ggml_blck_size,
ggml_type_size for every id below GGML_TYPE_COUNT (43 at this build)."""

from tests.oracles.conftest import require

require("llama_cpp")

import ctypes  # noqa: E402
import os  # noqa: E402

import llama_cpp  # noqa: E402

from kvmem.dtypes import GGML_TYPES  # noqa: E402

GGML_TYPE_COUNT = 43        # ggml/include/ggml.h#L433


def test_every_ggml_type_equals_ggmls_own_traits():
    lib = ctypes.CDLL(os.path.join(os.path.dirname(llama_cpp.__file__), "lib", "libggml-base.so"))
    lib.ggml_type_name.restype = ctypes.c_char_p
    lib.ggml_blck_size.restype = ctypes.c_int64
    lib.ggml_type_size.restype = ctypes.c_size_t
    lib.ggml_is_quantized.restype = ctypes.c_bool
    theirs = {}
    for i in range(GGML_TYPE_COUNT):
        if lib.ggml_blck_size(i) == 0:      # removed types (4, 5, 31-33, 36-38): "DEPRECATED" / "... REMOVED"
            continue
        theirs[lib.ggml_type_name(i).decode()] = (i, lib.ggml_blck_size(i), lib.ggml_type_size(i),
                                                  lib.ggml_is_quantized(i))
    ours = {t.name: (t.id, t.block, t.size, t.is_quantized) for t in GGML_TYPES.values()}
    assert ours == theirs

"""llama.cpp's own quantiser, loader and context as the judge of kvmem's llama.cpp layout of the presets.

The presets' real GGUF files cannot be downloaded here, so each is built (kvmem.oracles.llamacpp_preset_files:
sparse, with the preset's real shapes and convert_hf_to_gguf's metadata). Three runs of llama.cpp
0c1e57098 (llama-cpp-python 0.3.36, CPU-only build), each in a forked child:

1. ``quantise_types``: the source GGUF as convert_hf_to_gguf.py writes it (2-D and 3-D weights F16;
   1-D tensors, norms and routers F32: TextModel.prepare_tensors "Some tensor types are always in
   float32") goes through ``llama_model_quantize`` with ``dry_run`` (llama-quantize --dry-run,
   src/llama-quant.cpp: every tensor's target type from llama_tensor_get_type, nothing quantised,
   no data read). Judged by llama.cpp's code: the ggml type of every tensor in the format
   (q4_k_m, q8_0, ...), i.e. kvmem's transcription of the quantiser's rules.
2. ``load``: the quantised GGUF written from kvmem's own tensor list (names, shapes, types, file
   order) is loaded with mmap on, no extra CPU buffer types (the --no-repack layout), and a context
   is created (n_ctx 4096, one sequence, f16 cache, flash attention on, swa_full off as on the
   command line). Judged by llama.cpp's code:
   - the tensor set: llama_model_loader creates every tensor the architecture's load_arch_tensors
     asks for, checks each shape ("tensor ... has wrong shape") and that no tensor is left over
     ("done_getting_tensors: wrong number of tensors"): a tensor kvmem lays out that llama.cpp
     does not load (or the reverse) fails the load;
   - ``llama_model_size``: the sum of ggml_nbytes over the loaded tensors, to the byte;
   - "CPU_Mapped model buffer size": the mmap span of the host tensors, to the printed MiB;
   - the KV caches: the "llama_kv_cache: layer N: dev = CPU" / "filtered" debug lines give the
     layers of each cache (the SWA cache of gemma and gpt-oss separately), "creating [non-]SWA KV
     cache, size = N cells" its cells, "CPU KV buffer size" its bytes (printed MiB);
   - "CPU compute buffer size" and, at debug level, its four-decimal figure. Under no_alloc the
     printed figure is the prompt graph's reserve size alone (llama_context::sched_reserve passes
     backend_buf_exp_size only to the first graph_reserve, src/llama-context.cpp:674), kvmem's the
     larger of the prompt and one-token graphs: equal on every preset here, the prompt graph being
     the larger at n_ubatch 512.
3. ``tensor_bytes``: every tensor of the written file read back with ggml's own GGUF reader
   (libggml-base gguf_init_from_file, no_alloc) and sized with ``ggml_nbytes``: name, ggml type,
   ne, bytes and file offset as ggml reads them, to the byte. From them the CPU_Mapped buffer of
   the files too large to map here, to the byte: llama_model_loader::get_mapping_range's span,
   min(offs) .. max(offs + ggml_nbytes) over the host tensors (src/llama-model-loader.cpp), every
   tensor being on the host in this CPU-only build.

What is only self-consistency: the grouping (kvmem.engines.llamacpp.placement.tensor_group puts
each name in attention / ffn / experts / shared_experts / other / embeddings / output and a
layer); the per-group and per-layer sums are llama.cpp's bytes (3) of llama.cpp's types (1) of the
tensors llama.cpp loads (2), grouped by kvmem. Per layer, the KV bytes of a layer are its cache's
bytes divided by the layers llama.cpp puts in that cache (every layer of a preset's cache has the
same width, as llama.cpp's log shows it). Not judged here: the GPU rules (no GPU), file order of
real uploads (the quantiser keeps the source order; kvmem's order is the one tensors.py states),
and imatrix choices.
"""

from __future__ import annotations

import ctypes
import functools
import os
import re

from .llamacpp_buffers import in_child, llama_lib
from .llamacpp_preset_files import ARCH, FTYPES, preset_cases, write_gguf

__all__ = ["ARCH", "FTYPES", "preset_cases", "write_gguf", "quantise_types", "load", "tensor_bytes",
           "in_child"]

_GGML_TYPE_NAMES = {"f32": "F32", "f16": "F16", "bf16": "BF16", "q4_0": "Q4_0", "q4_1": "Q4_1", "q5_0": "Q5_0",
                    "q5_1": "Q5_1", "q8_0": "Q8_0", "q2_K": "Q2_K", "q3_K": "Q3_K", "q4_K": "Q4_K", "q5_K": "Q5_K",
                    "q6_K": "Q6_K", "mxfp4": "MXFP4"}
BUFFER_LINE = re.compile(r"^\S+: +(\S+) (model|KV|compute) buffer size = +([0-9.]+) MiB")
COMPUTE_CHECK_LINE = re.compile(r"^\S+: +(\S+) compute buffer size is +([0-9.]+) MiB")
KV_LAYER_LINE = re.compile(r"^llama_kv_cache: layer +(\d+): (dev = \S+|filtered|does not have KV cache)")
KV_CREATE_LINE = re.compile(r"^llama_kv_cache_iswa: creating +(non-SWA|SWA) KV cache, size = (\d+) cells")
KV_SIZE_LINE = re.compile(r"^llama_kv_cache: size = +([0-9.]+) MiB \( *(\d+) cells")
DRY_RUN_LINE = re.compile(r"^\[ *\d+/ *\d+\] (\S+) +- \[([0-9, ]+)\], type = +(\S+), size = +[0-9.]+ MiB"
                          r"(?: -> +[0-9.]+ MiB \((\S+)\))?")




def quantise_types(source_path: str, weight_format: str) -> dict[str, tuple[str, tuple]]:
    """{tensor name: (ggml type name, ne)} as llama.cpp's quantiser assigns them to the F16 source
    GGUF at ``source_path`` (llama_model_quantize, dry_run)."""
    lib, lines, _ = llama_lib()
    del lines[:]
    params = lib.llama_model_quantize_default_params()
    params.ftype = FTYPES[weight_format]
    params.dry_run = True
    params.nthread = 1
    rc = lib.llama_model_quantize(source_path.encode(), os.devnull.encode(), ctypes.byref(params))
    text = "".join(lines)
    if rc != 0:
        raise RuntimeError("llama_model_quantize (dry run) failed:\n" + text[-2000:])
    out = {}
    for line in text.splitlines():
        m = DRY_RUN_LINE.match(line.strip())
        if m:
            name, ne, cur, new = m.groups()
            out[name] = (_GGML_TYPE_NAMES.get(new or cur, (new or cur).upper()),
                         tuple(int(x) for x in ne.split(",")))
    return out


def load(path: str, *, no_alloc: bool = False, n_ctx: int = 4096, n_ubatch: int = 512, flash_attn: bool = True,
         n_rs_seq: int = 0) -> dict:
    """llama.cpp's load of ``path`` (mmap on) and a context: {"size": llama_model_size, "buffers":
    {"CPU_Mapped model": MiB, "CPU KV": [MiB per cache], "CPU compute": MiB, "CPU compute 4dp": str},
    "caches": [{"cache": "kv" | "non-SWA" | "SWA", "cells": N, "layers": [...], "size_mib": "%.2f"
    text of its "llama_kv_cache: size =" line}, ...] in llama.cpp's order}."""
    lib, lines, _ = llama_lib()
    del lines[:]
    lib.llama_log_set(llama_lib()[2], ctypes.c_void_p(0))
    params = lib.llama_model_default_params()
    params.use_extra_bufts = False
    params.no_alloc = no_alloc
    params.load_mode = lib.LLAMA_LOAD_MODE_NONE if no_alloc else lib.LLAMA_LOAD_MODE_MMAP
    model = lib.llama_model_load_from_file(path.encode(), params)
    if not model:
        raise RuntimeError("llama.cpp could not load the GGUF:\n" + "".join(lines)[-3000:])
    try:
        size = lib.llama_model_size(model)
        cparams = lib.llama_context_default_params()
        cparams.n_ctx, cparams.n_batch, cparams.n_ubatch = n_ctx, n_ctx, n_ubatch
        cparams.n_seq_max = 1
        cparams.n_rs_seq = n_rs_seq     # recurrent rollback snapshots per sequence (include/llama.h)
        cparams.type_k = cparams.type_v = 1
        cparams.flash_attn_type = int(flash_attn)
        cparams.swa_full = False
        cparams.kv_unified = False
        context = lib.llama_init_from_model(model, cparams)
        if not context:
            raise RuntimeError("llama.cpp could not create the context:\n" + "".join(lines)[-3000:])
        lib.llama_free(context)
    finally:
        lib.llama_model_free(model)
    out: dict = {"size": int(size), "buffers": {"CPU KV": []}, "caches": []}
    cache: dict | None = None
    for line in "".join(lines).splitlines():
        line = line.strip()
        m = BUFFER_LINE.match(line)
        if m:
            key = f"{m.group(1)} {m.group(2)}"
            if m.group(2) == "KV":
                out["buffers"][key].append(float(m.group(3)))
            else:
                out["buffers"][key] = float(m.group(3))
        m = COMPUTE_CHECK_LINE.match(line)
        if m:
            out["buffers"][f"{m.group(1)} compute 4dp"] = m.group(2)
        m = KV_CREATE_LINE.match(line)
        if m:
            cache = {"cache": m.group(1), "cells": int(m.group(2)), "layers": []}
            out["caches"].append(cache)
        m = KV_LAYER_LINE.match(line)
        if m:
            if cache is None:                 # one cache: no "creating" line
                cache = {"cache": "kv", "cells": None, "layers": []}
                out["caches"].append(cache)
            if m.group(2).startswith("dev"):
                cache["layers"].append(int(m.group(1)))
        m = KV_SIZE_LINE.match(line)
        if m and cache is not None:
            cache["size_mib"], cells = m.group(1), int(m.group(2))
            if cache["cells"] is None:
                cache["cells"] = cells
            cache = None
    return out


@functools.cache
def _ggml():
    import llama_cpp
    base = ctypes.CDLL(os.path.join(os.path.dirname(llama_cpp.__file__), "lib", "libggml-base.so"))

    class InitParams(ctypes.Structure):       # ggml/include/gguf.h gguf_init_params
        _fields_ = [("no_alloc", ctypes.c_bool), ("ctx", ctypes.POINTER(ctypes.c_void_p))]

    base.gguf_init_from_file.restype = ctypes.c_void_p
    base.gguf_init_from_file.argtypes = [ctypes.c_char_p, InitParams]
    base.gguf_free.argtypes = [ctypes.c_void_p]
    base.ggml_free.argtypes = [ctypes.c_void_p]
    base.ggml_get_first_tensor.restype = ctypes.c_void_p
    base.ggml_get_first_tensor.argtypes = [ctypes.c_void_p]
    base.ggml_get_next_tensor.restype = ctypes.c_void_p
    base.ggml_get_next_tensor.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    base.ggml_get_name.restype = ctypes.c_char_p
    base.ggml_get_name.argtypes = [ctypes.c_void_p]
    base.ggml_nbytes.restype = ctypes.c_size_t
    base.ggml_nbytes.argtypes = [ctypes.c_void_p]
    base.ggml_type_name.restype = ctypes.c_char_p
    base.ggml_type_name.argtypes = [ctypes.c_int]
    base.ggml_n_dims.restype = ctypes.c_int
    base.ggml_n_dims.argtypes = [ctypes.c_void_p]
    base.gguf_find_tensor.restype = ctypes.c_int64
    base.gguf_find_tensor.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    base.gguf_get_tensor_offset.restype = ctypes.c_size_t
    base.gguf_get_tensor_offset.argtypes = [ctypes.c_void_p, ctypes.c_int64]
    return base, InitParams


def tensor_bytes(path: str) -> dict[str, tuple[str, tuple, int, int]]:
    """{name: (ggml type name, ne, ggml_nbytes, offset)} of every tensor in ``path``, read with ggml's
    own GGUF reader (gguf_init_from_file with no_alloc: metadata only), sized by ggml_nbytes; the
    offset is gguf_get_tensor_offset from the start of the data section, as llama_model_loader's
    tensor weights hold it (llama-model-loader.h llama_tensor_weight: offs = data offset + this)."""
    base, InitParams = _ggml()
    ctx = ctypes.c_void_p()
    gctx = base.gguf_init_from_file(path.encode(), InitParams(True, ctypes.pointer(ctx)))
    if not gctx:
        raise RuntimeError(f"ggml could not read {path}")
    out = {}
    try:
        t = base.ggml_get_first_tensor(ctx)
        while t:
            # struct ggml_tensor: enum ggml_type type (4 B, padded to 8), buffer pointer, int64_t ne[4]
            type_id = ctypes.c_int.from_address(t).value
            ne = tuple((ctypes.c_int64 * 4).from_address(t + 16))[:base.ggml_n_dims(t)]
            name = base.ggml_get_name(t).decode()
            offset = base.gguf_get_tensor_offset(gctx, base.gguf_find_tensor(gctx, name.encode()))
            out[name] = (_GGML_TYPE_NAMES.get(base.ggml_type_name(type_id).decode(),
                                              base.ggml_type_name(type_id).decode().upper()), ne, base.ggml_nbytes(t),
                         offset)
            t = base.ggml_get_next_tensor(ctx, t)
    finally:
        base.ggml_free(ctx)
        base.gguf_free(gctx)
    return out

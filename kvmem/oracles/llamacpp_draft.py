"""llama.cpp's own output buffer and n_outputs_max as the judge of kvmem.engines.llamacpp.draft.

A one-layer llama GGUF (kvmem/oracles/gguf_files.py: zero weights, a 32-token vocabulary) is loaded without
tensor data and a context made with n_seq_max, embeddings and n_outputs_max set as a case gives them; the
"output buffer size = X MiB" and "n_outputs_max = N" lines llama.cpp prints (src/llama-context.cpp) are compared
with kvmem's bytes (as llama.cpp formats them, %.2f MiB) and count.
"""

from __future__ import annotations

import os
import re
import tempfile

from ..engines.llamacpp.draft import n_outputs_max, output_buffer_bytes
from .gguf_files import write_gguf
from .llamacpp_buffers import in_child, llama_lib
from .report import Check

OUTPUT_LINE = re.compile(r"output buffer size = +([0-9.]+) MiB")
OUTPUTS_LINE = re.compile(r"n_outputs_max += (\d+)")
HIDDEN = 4096
N_VOCAB = 32       # gguf_files' vocabulary


def _model():
    from ..model import Model
    return Model.from_hf_config({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
                                 "hidden_size": HIDDEN, "intermediate_size": 64, "num_attention_heads": 32,
                                 "num_key_value_heads": 8, "num_hidden_layers": 1, "vocab_size": N_VOCAB,
                                 "max_position_embeddings": 4096, "torch_dtype": "float16"})


def _engine(case: dict) -> tuple[str, int]:
    lib, lines, _ = llama_lib()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.gguf")
        write_gguf(_model(), path)
        params = lib.llama_model_default_params()
        params.no_alloc = True
        params.use_extra_bufts = False
        params.load_mode = lib.LLAMA_LOAD_MODE_NONE
        model = lib.llama_model_load_from_file(path.encode(), params)
        if not model:
            raise RuntimeError("llama.cpp could not load the GGUF:\n" + "".join(lines[-20:]))
        try:
            del lines[:]
            cparams = lib.llama_context_default_params()
            cparams.n_ctx, cparams.n_batch, cparams.n_ubatch = 1024, case["n_batch"], min(case["n_batch"], 512)
            cparams.n_seq_max = case["n_seq_max"]
            cparams.embeddings = case["embeddings"]
            cparams.n_outputs_max = case["n_outputs_max"]
            ctx = lib.llama_init_from_model(model, cparams)
            if ctx:
                lib.llama_free(ctx)
        finally:
            lib.llama_model_free(model)
    text = "".join(lines)
    return OUTPUT_LINE.search(text).group(1), int(OUTPUTS_LINE.search(text).group(1))


def run_case(name: str, case: dict) -> list[Check]:
    size, outputs = in_child(_engine, case)
    # the buffer as the context reserves it: n_seq_max rows (it grows at decode)
    ours = output_buffer_bytes(N_VOCAB, case["n_seq_max"], n_seq_max=case["n_seq_max"], n_embd_out=HIDDEN,
                               embeddings=case["embeddings"])
    return [Check(name, "output buffer size (MiB)", f"{ours / 1024 / 1024:.2f}", size),
            Check(name, "n_outputs_max", n_outputs_max(case["n_batch"], case["n_outputs_max"]), outputs)]


def directed_cases() -> list[tuple[str, dict]]:
    """A server's draft context (n_outputs_max = n_parallel) and its target (n_parallel x (1 + n_draft)), with
    and without embeddings, and the C API's default (0: n_batch)."""
    out = []
    for n_seq, embeddings, outputs, n_batch in ((4, True, 4, 512), (64, True, 64 * 4, 512), (8, False, 0, 256),
                                                (1, True, 0, 1024), (32, True, 32, 512)):
        out.append((f"n_seq_max {n_seq} embeddings {embeddings} n_outputs_max {outputs} n_batch {n_batch}",
                    dict(n_seq_max=n_seq, embeddings=embeddings, n_outputs_max=outputs, n_batch=n_batch)))
    return out

"""llama.cpp's own model, KV and compute buffers as the judge of kvmem.engines.llamacpp.placement.

Each case writes a small GGUF of random shape (llama dense, llama with experts as Mixtral's GGUFs,
qwen2 with Q/K/V biases, qwen3 dense, qwen3moe, gemma3 with its sliding-window layers, gemma2 (every
other layer sliding, both softcaps), phi3 (fused attn_qkv or separate Q/K/V, fused ffn_up); layers,
widths, heads, experts, ggml types per tensor, tied or untied output all drawn from a seeded
random.Random), sparse on disk, loads it for real (no ``no_alloc``: llama.cpp's dry run prints
0.00 MiB for every buffer) on this CPU-only build with mmap on or off and no extra CPU buffer
types (``use_extra_bufts=False``, the --no-repack layout), creates a context, and reads the lines
llama.cpp prints: "CPU_Mapped model buffer size" (mmap) or "CPU model buffer size" (--no-mmap),
"CPU KV buffer size" (one line per cache: two for gemma3's iSWA cache, "KV lines") and "CPU
compute buffer size" (also to four decimals, "CPU compute 4dp", from the debug line
~llama_context prints when the context is freed). The machine has no GPU, so every tensor is on
the host: what this judges is each tensor's bytes, the mmap span, duplicated tensors (a tied
output), the buffer alignment and the compute graphs; the GPU rules are judged against
published logs. Caches: K any type -ctk takes (f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0,
q5_1); V the same choice with flash attention, f16 without (a quantised V cache needs flash
attention); 1 to 4 sequences (n_seq_max), one stream each or unified; swa_full on or off.

Each case runs in a forked child, so an abort in llama.cpp ends the child, not the test.
"""

from __future__ import annotations

import ctypes
import functools
import os
import random
import re

from ..units import pad

__all__ = ["random_spec", "spec_tensors", "write_spec", "write_sparse", "run_spec", "printed_buffers", "in_child",
           "llama_lib", "BUFFER_LINE"]

BUFFER_LINE = re.compile(r"^\S+: +(\S+) (model|KV|compute) buffer size = +([0-9.]+) MiB")
# ~llama_context, at debug level: "<buft> compute buffer size is %8.4f MiB, matches expectation ..."
COMPUTE_CHECK_LINE = re.compile(r"^\S+: +(\S+) compute buffer size is +([0-9.]+) MiB")
_WEIGHT_TYPES = ("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K", "Q2_K",
                 "Q3_K", "IQ4_XS", "IQ4_NL")
_GGML = {"f32": 0, "f16": 1, "q4_0": 2, "q4_1": 3, "q5_0": 6, "q5_1": 7, "q8_0": 8, "iq4_nl": 20, "bf16": 30}
# every type llama.cpp's -ctk / -ctv take (common/arg.cpp kv_cache_types)
_CACHE_TYPES = ("f16", "q8_0", "f32", "q4_0", "bf16", "q4_1", "q5_0", "q5_1", "iq4_nl")
# llama dense, llama with experts (Mixtral's GGUFs), qwen2 (Q/K/V biases), qwen3 dense (Q/K norms), qwen3moe,
# gemma3 (sliding-window layers: an iSWA cache), gemma2 (every other layer sliding, both softcaps), phi3 (a fused
# attn_qkv, or separate Q/K/V, and a fused ffn_up of 2 x n_ff)
_KINDS = ("llama", "llama-moe", "qwen2", "qwen3", "qwen3moe", "gemma3", "gemma2", "phi3")


def random_spec(seed: int) -> dict:
    """A random model: arch, shape, one ggml type per tensor, tied or not; all from ``seed``."""
    rng = random.Random(seed)
    kind = rng.choice(_KINDS)
    moe = kind in ("qwen3moe", "llama-moe")
    n_embd = 256 * rng.randint(1, 4)
    head_dim = rng.choice((64, 128))
    n_head = rng.choice((2, 4, 8))
    if kind in ("qwen2", "phi3"):       # attention n_embd wide (llama_model_qwen2/phi3::load_arch_tensors)
        n_head = n_embd // head_dim
    n_head_kv = rng.choice([h for h in (1, 2, 4, 8) if n_head % h == 0])
    spec: dict = dict(arch="llama" if kind == "llama-moe" else kind, n_layer=rng.randint(1, 6), n_embd=n_embd,
                head_dim=head_dim, n_head=n_head, n_head_kv=n_head_kv, n_vocab=rng.choice((256, 512, 1000, 2048)),
                n_ff=256 * rng.randint(1, 6), tied=rng.random() < 0.3,
                n_expert=rng.choice((4, 8, 16)) if moe else 0, n_ff_exp=256 * rng.randint(1, 2))
    if kind == "llama-moe":     # llama's experts are feed_forward_length wide (llama_model_llama::load_arch_tensors)
        spec["n_ff"] = spec["n_ff_exp"]
    spec["n_expert_used"] = rng.choice((1, 2)) if moe else 0
    if kind == "gemma3":        # every sixth layer global (llama_model_gemma3::load_arch_hparams)
        spec.update(n_layer=rng.choice((2, 6, 7, 13)), n_swa=rng.choice((64, 128, 512, 1024)))
    if kind == "gemma2":        # every other layer sliding (load_swa_pattern(ml, 2)); output = token_embd
        spec.update(n_layer=rng.randint(1, 6), n_swa=rng.choice((64, 128, 512, 1024)), tied=True)
    spec["fused_qkv"] = kind == "phi3" and rng.random() < 0.75
    spec["tensors"] = spec_tensors(spec, rng)
    spec["context"] = dict(n_ctx=rng.choice((256, 512, 1000, 4096)), n_ubatch=rng.choice((32, 128, 512)),
                           flash_attn=rng.choice((0, 1)), type_k=rng.choice(_CACHE_TYPES),
                           mmap=rng.random() < 0.5)
    # a quantised V cache needs flash attention (llama_init_from_model)
    spec["context"]["type_v"] = rng.choice(_CACHE_TYPES) if spec["context"]["flash_attn"] else "f16"
    # sequences: one cache stream each, or one stream for all (kv_unified)
    spec["context"].update(n_seq=rng.choice((1, 1, 2, 3, 4)), kv_unified=rng.random() < 0.3,
                           swa_full=rng.random() < 0.3)
    return spec


def spec_tensors(s: dict, rng: random.Random) -> list[tuple[str, tuple, str]]:
    """(name, ne, ggml type) in the order convert_hf_to_gguf.py writes them."""
    def w(ne):   # a 2-D/3-D weight: a type whose block divides ne0
        choices = [t for t in _WEIGHT_TYPES if ne[0] % (256 if t.endswith("_K") or t == "IQ4_XS" else 32) == 0]
        return rng.choice(choices)
    e, hd = s["n_embd"], s["head_dim"]
    out: list[tuple[str, tuple]] = [("token_embd.weight", (e, s["n_vocab"]))]
    for i in range(s["n_layer"]):
        b = f"blk.{i}."
        out.append((b + "attn_norm.weight", (e,)))
        if s.get("fused_qkv"):
            out.append((b + "attn_qkv.weight", (e, (s["n_head"] + 2 * s["n_head_kv"]) * hd)))
        else:
            out += [(b + "attn_q.weight", (e, s["n_head"] * hd)), (b + "attn_k.weight", (e, s["n_head_kv"] * hd)),
                    (b + "attn_v.weight", (e, s["n_head_kv"] * hd))]
        out += [(b + "attn_output.weight", (s["n_head"] * hd, e)), (b + "ffn_norm.weight", (e,))]
        if s["arch"] in ("gemma2", "gemma3"):
            out += [(b + "post_attention_norm.weight", (e,)), (b + "post_ffw_norm.weight", (e,))]
        if s["arch"] == "qwen2":
            out += [(b + "attn_q.bias", (s["n_head"] * hd,)), (b + "attn_k.bias", (s["n_head_kv"] * hd,)),
                    (b + "attn_v.bias", (s["n_head_kv"] * hd,))]
        if s["arch"] in ("qwen3", "qwen3moe", "gemma3"):
            out += [(b + "attn_q_norm.weight", (hd,)), (b + "attn_k_norm.weight", (hd,))]
        if s["n_expert"]:
            n, f = s["n_expert"], s["n_ff_exp"]
            out += [(b + "ffn_gate_inp.weight", (e, n)), (b + "ffn_gate_exps.weight", (e, f, n)),
                    (b + "ffn_down_exps.weight", (f, e, n)), (b + "ffn_up_exps.weight", (e, f, n))]
        elif s["arch"] == "phi3":      # ffn_up holds gate and up: 2 x n_ff (llama_model_phi3::load_arch_tensors)
            out += [(b + "ffn_down.weight", (s["n_ff"], e)), (b + "ffn_up.weight", (e, 2 * s["n_ff"]))]
        else:
            f = s["n_ff"]
            out += [(b + "ffn_gate.weight", (e, f)), (b + "ffn_down.weight", (f, e)), (b + "ffn_up.weight", (e, f))]
    out.append(("output_norm.weight", (e,)))
    if not s["tied"]:
        out.append(("output.weight", (e, s["n_vocab"])))
    return [(name, ne, "F32" if len(ne) == 1 else w(ne)) for name, ne in out]


def write_spec(spec: dict, path: str) -> None:
    """The GGUF of ``spec``: real metadata, sparse (all-zero) data."""
    import gguf
    arch = spec["arch"]
    writer = gguf.GGUFWriter(path, arch)
    writer.add_context_length(8192)
    writer.add_embedding_length(spec["n_embd"])
    writer.add_block_count(spec["n_layer"])
    writer.add_feed_forward_length(spec["n_ff"])
    writer.add_head_count(spec["n_head"])
    writer.add_head_count_kv(spec["n_head_kv"])
    writer.add_key_length(spec["head_dim"])
    writer.add_value_length(spec["head_dim"])
    writer.add_rope_dimension_count(spec["head_dim"])
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_vocab_size(spec["n_vocab"])
    if arch in ("gemma2", "gemma3"):
        writer.add_sliding_window(spec["n_swa"])
    if arch == "gemma2":        # conversion/gemma.py Gemma2Model (the values change no buffer)
        writer.add_attn_logit_softcapping(50.0)
        writer.add_final_logit_softcapping(30.0)
    writer.add_tokenizer_model("none")
    if spec["n_expert"]:
        writer.add_expert_count(spec["n_expert"])
        writer.add_expert_used_count(spec["n_expert_used"])
        writer.add_expert_feed_forward_length(spec["n_ff_exp"])
    write_sparse(writer, spec["tensors"])


def write_sparse(writer, tensors) -> None:
    """Add ``tensors`` ((name, ne, ggml type name), ne first as ggml counts) to a gguf.GGUFWriter
    whose metadata is written, then the header and the tensor infos, and end the file where its
    data would end: sparse on disk, all zeros."""
    import gguf
    import numpy as np
    for name, ne, type_name in tensors:
        qtype = gguf.GGMLQuantizationType[type_name]
        block, size = gguf.GGML_QUANT_SIZES[qtype]
        count = 1
        for x in ne:
            count *= x
        writer.add_tensor_info(name, tuple(reversed(ne)), np.dtype(np.float32), count // block * size,
                               raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    fout = writer.fout[0]
    fout.flush()
    align = writer.data_alignment
    start = pad(fout.tell(), align)
    fout.truncate(start + sum(pad(ti.nbytes, align) for ti in writer.tensors[0].values()))
    writer.close()


@functools.cache
def llama_lib():
    """llama-cpp-python, initialised once, with every log line it prints collected in a list:
    (the library, the lines, the callback kept alive)."""
    import llama_cpp as lib
    lines = []

    @lib.llama_log_callback
    def capture(_level, text, _user_data):
        lines.append(text.decode("utf-8", errors="replace"))

    lib.llama_log_set(capture, ctypes.c_void_p(0))
    lib.llama_backend_init()
    return lib, lines, capture


def printed_buffers(path: str, ctx: dict) -> dict:
    lib, lines, _ = llama_lib()
    del lines[:]
    params = lib.llama_model_default_params()
    params.use_extra_bufts = False
    params.load_mode = lib.LLAMA_LOAD_MODE_MMAP if ctx["mmap"] else lib.LLAMA_LOAD_MODE_NONE
    model = lib.llama_model_load_from_file(path.encode(), params)
    if not model:
        raise RuntimeError("llama.cpp could not load the GGUF:\n" + "".join(lines[-20:]))
    try:
        cparams = lib.llama_context_default_params()
        cparams.n_ctx, cparams.n_batch, cparams.n_ubatch = ctx["n_ctx"], ctx["n_ctx"], ctx["n_ubatch"]
        cparams.n_seq_max = ctx.get("n_seq", 1)
        cparams.n_rs_seq = ctx.get("n_rs_seq", 0)       # recurrent rollback snapshots (include/llama.h)
        cparams.kv_unified = ctx.get("kv_unified", False)
        cparams.swa_full = ctx.get("swa_full", True)         # the C API's default
        cparams.type_k, cparams.type_v = _GGML[ctx["type_k"]], _GGML[ctx["type_v"]]
        cparams.flash_attn_type = ctx["flash_attn"]
        context = lib.llama_init_from_model(model, cparams)
        if context:
            lib.llama_free(context)
    finally:
        lib.llama_model_free(model)
    out: dict = {}
    for line in "".join(lines).splitlines():
        m = BUFFER_LINE.match(line.strip())
        if m:
            out[f"{m.group(1)} {m.group(2)}"] = float(m.group(3))
            if m.group(2) == "KV":      # an iSWA cache prints one line per cache
                out.setdefault("KV lines", []).append(float(m.group(3)))
        m = COMPUTE_CHECK_LINE.match(line.strip())
        if m:
            out[f"{m.group(1)} compute 4dp"] = m.group(2)
    return out


def run_spec(spec: dict, path: str) -> dict:
    """llama.cpp's printed buffers for ``spec`` written at ``path`` ({"CPU_Mapped model": MiB,
    "CPU KV": ..., "CPU compute": ..., "CPU compute 4dp": "%.4f" text}), from a forked child."""
    return in_child(printed_buffers, path, spec["context"])


def in_child(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` in a forked child (an abort in llama.cpp ends the child, not the caller)."""
    import multiprocessing
    context = multiprocessing.get_context("fork")

    def child(conn):
        os.environ["GGML_NO_BACKTRACE"] = "1"
        try:
            conn.send(("ok", fn(*args, **kwargs)))
        except Exception as error:     # sent back whole: the test shows llama.cpp's own message
            conn.send(("error", f"{type(error).__name__}: {error}"))
        conn.close()

    parent, sent = context.Pipe(duplex=False)
    process = context.Process(target=child, args=(sent,))
    process.start()
    sent.close()
    try:
        reply = parent.recv()
    except EOFError:
        reply = ("abort", f"exit code {process.join() or process.exitcode}")
    process.join()
    if reply[0] != "ok":
        raise RuntimeError(f"{getattr(fn, '__name__', fn)} failed in llama.cpp: {reply[1]}")
    return reply[1]

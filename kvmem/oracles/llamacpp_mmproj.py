"""llama.cpp's own multimodal projector compute buffer as the judge of kvmem.engines.llamacpp.graphs_mmproj.

Each case writes a sparse Gemma 3 mmproj GGUF (general.architecture "clip", projector_type "gemma3": the keys
conversion/base.py MmprojModel and conversion/gemma.py Gemma3VisionModel write, the tensors
tools/mtmd/clip.cpp load_tensors reads: patch kernel and bias, position embeddings, per layer Q/K/V/output
with biases, two LayerNorms, the GELU FFN with biases, the post LayerNorm, mm.input_projection (F16) and
mm.soft_emb_norm) and a one-layer llama text model of the projection's width, loads both through
libmtmd (mtmd_init_from_file, CPU, warmup on) in a forked child and reads the
"reserve_compute_meta: CPU compute buffer size" line (printed to two decimals).
"""

from __future__ import annotations

import ctypes
import random

from ..engines.llamacpp.graphs_mmproj import MmprojShape
from .llamacpp_buffers import in_child, llama_lib, random_spec, spec_tensors, write_sparse, write_spec

__all__ = ["write_mmproj", "write_text_model", "printed_mmproj_mib", "random_mmproj_shape"]

_KERNEL = {"f16": "F16", "f32": "F32", "bf16": "BF16"}


def write_mmproj(shape: MmprojShape, path: str) -> None:
    """The mmproj GGUF of ``shape``: real metadata, sparse (all-zero) tensors."""
    import gguf
    s, w = shape, gguf.GGUFWriter(path, "clip")
    w.add_bool("clip.has_vision_encoder", True)
    w.add_string("clip.projector_type", "gemma3")
    w.add_uint32("clip.vision.projection_dim", s.n_embd_text)
    w.add_uint32("clip.vision.image_size", s.image_size)
    w.add_uint32("clip.vision.patch_size", s.patch_size)
    w.add_uint32("clip.vision.embedding_length", s.n_embd)
    w.add_uint32("clip.vision.feed_forward_length", s.n_ff)
    w.add_uint32("clip.vision.block_count", s.n_layer)
    w.add_uint32("clip.vision.attention.head_count", s.n_head)
    w.add_float32("clip.vision.attention.layer_norm_epsilon", 1e-6)
    w.add_array("clip.vision.image_mean", [0.5, 0.5, 0.5])
    w.add_array("clip.vision.image_std", [0.5, 0.5, 0.5])
    w.add_bool("clip.use_gelu", True)
    if s.n_merge != 4:      # conversion/gemma.py writes the scale factor only when it is not 4
        w.add_uint32("clip.vision.projector.scale_factor", s.n_merge)
    e, f, n_pos = s.n_embd, s.n_ff, (s.image_size // s.patch_size) ** 2
    t = [("v.patch_embd.weight", (s.patch_size, s.patch_size, 3, e), _KERNEL[s.patch_type]),
         ("v.patch_embd.bias", (e,), "F32"), ("v.position_embd.weight", (e, n_pos), "F32")]
    for il in range(s.n_layer):
        b = f"v.blk.{il}."
        for name in ("attn_q", "attn_k", "attn_v", "attn_out"):
            t += [(b + name + ".weight", (e, e), "F16"), (b + name + ".bias", (e,), "F32")]
        t += [(b + "ln1.weight", (e,), "F32"), (b + "ln1.bias", (e,), "F32"), (b + "ln2.weight", (e,), "F32"),
              (b + "ln2.bias", (e,), "F32"), (b + "ffn_up.weight", (e, f), "F16"), (b + "ffn_up.bias", (f,), "F32"),
              (b + "ffn_down.weight", (f, e), "F16"), (b + "ffn_down.bias", (e,), "F32")]
    t += [("v.post_ln.weight", (e,), "F32"), ("v.post_ln.bias", (e,), "F32"),
          ("mm.input_projection.weight", (s.n_embd_text, e), "F16"), ("mm.soft_emb_norm.weight", (e,), "F32")]
    write_sparse(w, t)


def write_text_model(n_embd: int, path: str) -> None:
    """A one-layer llama GGUF ``n_embd`` wide (mtmd_init_from_file takes the text model beside the projector)."""
    spec = random_spec(0)
    spec.update(arch="llama", n_layer=1, n_embd=n_embd, head_dim=64, n_head=n_embd // 64, n_head_kv=n_embd // 64,
                n_vocab=256, n_ff=256, n_expert=0, n_expert_used=0, tied=False, fused_qkv=False)
    tensors = spec_tensors(spec, random.Random(0))
    spec["tensors"] = [(name, ne, "F16" if len(ne) > 1 else "F32") for name, ne, _ in tensors]
    write_spec(spec, path)


def _mmproj_lines(mmproj: str, text: str, flash_attn: int) -> list:
    from llama_cpp import mtmd_cpp
    lib, lines, callback = llama_lib()
    mtmd_cpp.mtmd_log_set(callback, ctypes.c_void_p(0))
    del lines[:]
    model = lib.llama_model_load_from_file(text.encode(), lib.llama_model_default_params())
    if not model:
        raise RuntimeError("llama.cpp could not load the text model:\n" + "".join(lines)[-2000:])
    try:
        params = mtmd_cpp.mtmd_context_params_default()
        params.use_gpu, params.flash_attn_type = False, flash_attn
        ctx = mtmd_cpp.mtmd_init_from_file(mmproj.encode(), model, params)
        if not ctx:
            raise RuntimeError("mtmd could not load the mmproj:\n" + "".join(lines)[-2000:])
        mtmd_cpp.mtmd_free(ctx)
    finally:
        lib.llama_model_free(model)
    return [line for line in "".join(lines).splitlines() if "compute buffer size" in line]


def printed_mmproj_mib(shape: MmprojShape, flash_attn: bool, mmproj: str, text: str) -> str:
    """The "CPU compute buffer size" mtmd prints for ``shape`` ("%.2f" text), flash attention on or off."""
    write_mmproj(shape, mmproj)
    write_text_model(shape.n_embd_text, text)
    lines = in_child(_mmproj_lines, mmproj, text, 1 if flash_attn else 0)
    return lines[-1].split("=")[-1].split()[0]


def random_mmproj_shape(seed: int) -> MmprojShape:
    """A random SigLIP tower and Gemma 3 projector from ``seed``."""
    rng = random.Random(f"mmproj/{seed}")
    patch, merge = rng.choice((14, 16)), rng.choice((2, 4))
    n_embd = 64 * rng.randint(1, 6)
    heads = rng.choice([h for h in (1, 2, 4, 8) if n_embd % (8 * h) == 0])
    return MmprojShape(image_size=patch * merge * rng.randint(1, 5), patch_size=patch, n_embd=n_embd,
                       n_ff=64 * rng.randint(1, 8), n_layer=rng.randint(1, 3), n_head=heads,
                       n_embd_text=64 * rng.randint(1, 6), n_merge=merge, patch_type=rng.choice(("f16", "f32", "bf16")))

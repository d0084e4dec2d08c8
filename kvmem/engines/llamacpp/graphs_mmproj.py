"""llama.cpp's multimodal projector (mtmd / clip) compute buffer for Gemma 3's SigLIP vision tower, node by
node: the "reserve_compute_meta: CPU compute buffer size" line mtmd prints when it loads an mmproj GGUF.

Transcribed from the vendored llama.cpp (llama-cpp-python 0.3.36, llama.cpp 0c1e57098), tools/mtmd/:

    clip.cpp#L3700-L3722 get_dummy_batch / warmup: one image of warmup_image_size (the GGUF's image_size,
        clip.cpp#L1373) reserved with flash attention when the backend supports it (AUTO: the CPU does),
        else without; #L3805-L3818 reserve_compute_meta: ggml_backend_sched_reserve of that graph, the
        buffer printed per backend ("%8.2f MiB");
    clip.cpp#L572-L582 build_inp: the f32 image input, ggml_conv_2d of the patch kernel (ggml.c#L4762-L4784:
        im2col to F16, or F32 for a BF16 kernel, a mul_mat, a permute made contiguous), reshaped,
        transposed and made contiguous, plus the patch bias;
    clip.cpp#L337-L570 build_vit: the learned position embeddings added, per layer LayerNorm (ggml_norm,
        weight, bias), Q / K / V with biases reshaped to heads, build_attn (#L750-L822: Q, K, V ordered;
        flash attention over permuted Q, K and V cast to F16; without it V permuted (1, 2, 0, 3) and made
        contiguous, KQ, softmax, KQV, permuted and made contiguous), the output projection and bias, the
        residual, LayerNorm, build_ffn (up + bias, GELU, down + bias), the residual; the post LayerNorm;
    models/siglip.cpp#L3-L40 (PROJECTOR_TYPE_GEMMA3): the patches transposed and made contiguous as an
        image, a 2-D average pool of n_merge (4: clip.cpp#L1634-L1641, the GGUF's
        projector.scale_factor otherwise), transposed back and made contiguous, RMS-normed, scaled by
        mm.soft_emb_norm, and projected by the transposed mm.input_projection made contiguous (the
        projection weight copied into the compute buffer).

ggml-alloc then sizes the buffer as for the text graphs (kvmem.engines.llamacpp.ggml_alloc; CPU alignment 32).
Judged by llama.cpp itself: tests/oracles/test_llamacpp_mmproj_oracle.py (mtmd_init_from_file on sparse
mmproj GGUFs: random SigLIP shapes and Gemma 3's own).
"""

from __future__ import annotations

from dataclasses import dataclass

from .ggml_alloc import gallocr_size
from .ggml_graph import Graph

__all__ = ["MmprojShape", "mmproj_shape", "build_gemma3_mmproj", "mmproj_compute_bytes"]


@dataclass(frozen=True)
class MmprojShape:
    """Gemma 3's SigLIP tower and projector as the mmproj GGUF describes them (clip.vision.*)."""

    image_size: int
    patch_size: int
    n_embd: int
    n_ff: int
    n_layer: int
    n_head: int
    n_embd_text: int        # clip.vision.projection_dim: the text model's hidden size
    n_merge: int = 4        # projector.scale_factor: patches per side pooled into one token
    patch_type: str = "f16"     # the patch kernel's type (im2col writes F16, or F32 for a BF16 kernel)
    proj_type: str = "f16"      # mm.input_projection's type (conversion/gemma.py: always F16)


def mmproj_shape(model) -> MmprojShape | None:
    """The projector of a Gemma 3 config (model_type gemma3 with a siglip vision_config), or None."""
    cfg = model.config or {}
    vision, text = cfg.get("vision_config"), cfg.get("text_config")
    if cfg.get("model_type") != "gemma3" or not isinstance(vision, dict) or not isinstance(text, dict):
        return None
    image, patch = vision.get("image_size"), vision.get("patch_size")
    tokens = cfg.get("mm_tokens_per_image", 256)
    if not image or not patch:
        return None
    side = image // patch
    # conversion/gemma.py Gemma3VisionModel: scale factor = patches per side / tokens per side
    return MmprojShape(image_size=image, patch_size=patch, n_embd=vision["hidden_size"],
                       n_ff=vision["intermediate_size"], n_layer=vision["num_hidden_layers"],
                       n_head=vision["num_attention_heads"], n_embd_text=text.get("hidden_size") or model.hidden_size,
                       n_merge=side // int(tokens ** 0.5))


def _layer_norm(g: Graph, x, n_embd: int):
    """clip_graph::build_norm, NORM_TYPE_NORMAL: ggml_norm, ggml_mul by the weight, ggml_add of the bias."""
    return g.dup("ADD", g.dup("MUL", g.dup("NORM", x), g.weight(n_embd)), g.weight(n_embd))


def build_gemma3_mmproj(s: MmprojShape, flash_attn: bool) -> Graph:
    """The warmup graph (module docstring) of one image of ``s.image_size`` pixels a side."""
    g = Graph()
    e, side = s.n_embd, s.image_size // s.patch_size
    n_pos, d_head = side * side, s.n_embd // s.n_head
    # build_inp: ggml_conv_2d(patch kernel, image)
    image = g.input("f32", s.image_size, s.image_size, 3, 1)
    kernel = g.weight(s.patch_size, s.patch_size, 3, e, type_=s.patch_type)
    im2col = g.op("IM2COL", "f32" if s.patch_type == "bf16" else "f16", (3 * s.patch_size ** 2, side, side, 1),
                  kernel, image)
    conv = g.mul_mat(g.reshape(im2col, im2col.ne[0], side * side), g.reshape(kernel, 3 * s.patch_size ** 2, e))
    conv = g.cont(g.permute(g.reshape(conv, side, side, 1, e), 0, 1, 3, 2))
    inp = g.cont(g.transpose(g.reshape(conv, n_pos, e, 1)))
    inp = g.dup("ADD", inp, g.weight(e))
    # build_vit
    inp_l = g.reshape(g.dup("ADD", inp, g.weight(e, n_pos)), e, n_pos)
    for _ in range(s.n_layer):
        cur = _layer_norm(g, inp_l, e)
        q, k, v = (g.reshape(g.dup("ADD", g.mul_mat(g.weight(e, e), cur), g.weight(e)), d_head, s.n_head, n_pos, 1)
                   for _ in range(3))
        for t in (q, k, v):
            g.expand(t)
        qp, kp = g.permute(q, 0, 2, 1, 3), g.permute(k, 0, 2, 1, 3)
        if flash_attn:
            vp = g.permute(v, 0, 2, 1, 3)
            out = g.flash_attn_ext(qp, g.cast(kp, "f16"), g.cast(vp, "f16"), None)
            out = g.reshape(out, out.ne[0] * out.ne[1], out.ne[2] * out.ne[3])
        else:
            vp = g.cont(g.permute(v, 1, 2, 0, 3))
            kq = g.dup("SOFT_MAX", g.mul_mat(kp, qp))
            out = g.permute(g.mul_mat(vp, kq), 0, 2, 1, 3)
            out = g.cont(out, out.ne[0] * out.ne[1], out.ne[2] * out.ne[3])
        cur = g.dup("ADD", g.mul_mat(g.weight(e, e), out), g.weight(e))
        inp_l = g.dup("ADD", cur, inp_l)
        cur = _layer_norm(g, inp_l, e)
        cur = g.dup("ADD", g.mul_mat(g.weight(e, s.n_ff), cur), g.weight(s.n_ff))
        cur = g.dup("ADD", g.mul_mat(g.weight(s.n_ff, e), g.dup("UNARY", cur)), g.weight(e))
        inp_l = g.dup("ADD", inp_l, cur)
    inp_l = g.reshape(_layer_norm(g, inp_l, e), e, n_pos, 1)
    # models/siglip.cpp, PROJECTOR_TYPE_GEMMA3
    cur = g.cont(g.transpose(inp_l), side, side, e, 1)
    pooled = (side - s.n_merge) // s.n_merge + 1
    cur = g.op("POOL_2D", "f32", (pooled, pooled, e, 1), cur)
    cur = g.cont(g.transpose(g.reshape(cur, pooled * pooled, e, 1)))
    cur = g.dup("MUL", g.dup("RMS_NORM", cur), g.weight(e))
    proj = g.cont(g.transpose(g.weight(s.n_embd_text, e, type_=s.proj_type)))
    g.expand(g.mul_mat(proj, cur))
    return g


def mmproj_compute_bytes(shape: MmprojShape, *, flash_attn: bool = True, alignment: int = 32) -> int:
    """The compute buffer mtmd reserves for ``shape``'s warmup image (flash attention: the CPU's AUTO)."""
    return gallocr_size(build_gemma3_mmproj(shape, flash_attn), alignment)

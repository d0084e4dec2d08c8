"""llama.cpp's mtmd warmup graph for Llama 4's vision tower (clip.projector_type llama4: Llama 4 Scout and
Maverick): the compute buffer "reserve_compute_meta" prints.

Transcribed from the vendored llama.cpp (llama-cpp-python 0.3.36, llama.cpp 0c1e57098), tools/mtmd/:

    clip.cpp#L1788-L1794 load_hparams: n_merge from clip.vision.projector.scale_factor, llava-uhd tiles of
        image_size; the warmup image is one tile (warmup_image_size = image_size, #L1373), reserved once
        (#L3700-L3818, as graphs_mmproj says); #L3217-L3222 load_tensors: mm.model.fc, mm.model.mlp.1 / .2;
    models/llama4.cpp#L3-L96: pos_h and pos_w for the patches and [CLS]; Llama4UnfoldConvolution (the patch
        linear viewed as a kernel, an F32 im2col, the linear's mul_mat, [e, n_patches]); [CLS] concatenated;
        build_vit (clip.cpp#L337-L568) with the learned position embeddings added, the pre LayerNorm, per layer
        LayerNorm, Q / K / V with biases reshaped to heads, build_rope_2d (pos_w, pos_h) on Q and K, build_attn,
        residual, LayerNorm, build_ffn (up + bias, GELU, down + bias), residual, the post LayerNorm; [CLS]
        dropped (a view), the pixel shuffle (reshape, permute, contiguous twice), mlp.1 + GELU, mlp.2 + GELU,
        and the projection mm.model.fc.

Judged by llama.cpp itself: tests/oracles/test_llamacpp_mmproj_oracle.py.
"""

from __future__ import annotations

from .ggml_graph import Graph
from .graphs_mmproj_vit import ClipShape, attn, ffn, linear, norm, rope

__all__ = ["build_llama4_mmproj"]


def build_llama4_mmproj(s: ClipShape, flash_attn: bool) -> Graph:
    """The warmup graph (module docstring) of one ``s.image_size`` square tile."""
    g = Graph()
    e, px, sf = s.n_embd, s.image_size // s.patch_size, s.n_merge
    n_patches, d_head = px * px, s.n_embd // s.n_head
    n_pos = n_patches + 1
    pos_h, pos_w = g.input("i32", n_pos), g.input("i32", n_pos)
    image = g.input("f32", s.image_size, s.image_size, 3, 1)
    patch = g.weight(3 * s.patch_size ** 2, e, type_=s.patch_type)
    kernel = g.reshape(patch, s.patch_size, s.patch_size, 3, e)
    col = g.op("IM2COL", "f32", (3 * s.patch_size ** 2, px, px, 1), kernel, image)
    inp = g.reshape(g.mul_mat(patch, col), e, n_patches)
    inp = g.concat(inp, g.weight(e), 1)                                   # [CLS]
    inp = g.reshape(g.dup("ADD", inp, g.weight(e, n_pos)), e, n_pos)      # build_vit: learned positions
    inp_l = norm(g, inp, g.weight(e), g.weight(e), False)                 # v.pre_ln
    for _ in range(s.n_layer):
        cur = norm(g, inp_l, g.weight(e), g.weight(e), False)
        q, k, v = (g.reshape(linear(g, g.weight(e, e), cur, g.weight(e)), d_head, s.n_head, n_pos, 1)
                   for _ in range(3))
        q, k = (rope(g, rope(g, t, pos_w), pos_h) for t in (q, k))
        cur = attn(g, q, k, v, None, g.weight(e, e), g.weight(e), flash_attn)
        inp_l = g.dup("ADD", cur, inp_l)
        cur = norm(g, inp_l, g.weight(e), g.weight(e), False)
        cur = ffn(g, cur, g.weight(e, s.n_ff), g.weight(s.n_ff), None, None, g.weight(s.n_ff, e), g.weight(e))
        inp_l = g.dup("ADD", inp_l, cur)
    inp_l = g.reshape(norm(g, inp_l, g.weight(e), g.weight(e), False), e, n_pos, 1)     # v.post_ln
    cur = g.view(inp_l, (e, n_patches), (4, 4 * e))                       # [CLS] dropped
    cur = g.permute(g.reshape(cur, e * sf, px // sf, px, 1), 0, 2, 1, 3)
    cur = g.cont(g.cont(cur, e * sf * sf, px // sf, px // sf, 1), e * sf * sf, n_patches // (sf * sf))
    cur = g.dup("UNARY", g.mul_mat(g.weight(e * sf * sf, s.n_mm), cur))
    cur = g.dup("UNARY", g.mul_mat(g.weight(s.n_mm, s.n_mm2), cur))
    g.expand(g.mul_mat(g.weight(s.n_mm2, s.n_embd_text), cur))
    return g

"""llama.cpp's mtmd warmup graph for GLM-4.xV's vision tower (clip.projector_type glm4v: GLM-4.1V, GLM-4.5V,
GLM-4.6V, GLM-OCR): the compute buffer "reserve_compute_meta" prints.

Transcribed from the vendored llama.cpp (llama-cpp-python 0.3.36, llama.cpp 0c1e57098), tools/mtmd/:

    clip.cpp#L1766-L1774 load_hparams: n_merge 2 unless clip.vision.spatial_merge_size, set_warmup_n_tokens(46*46):
        the warmup image is 46 x patch_size x n_merge pixels a side (clip-model.h#L210-L215), reserved once
        (#L3700-L3818, as graphs_mmproj says); #L2613-L2627 load_tensors: mm.model.fc, mm.up / gate / down,
        mm.post_norm, mm.patch_merger (each bias where the file has it);
    models/glm4v.cpp#L3-L124: the two temporal patch convs added, the 2 x 2 merge order, the patch bias, the
        post-conv RMS norm (v.norm_embd) where present, the learned position embeddings (resized bicubically
        where the warmup's grid is not the table's, then put in the merge order); build_vit (clip.cpp#L337-L568:
        RMS norms, the fused QKV viewed as Q, K and V, M-RoPE on Q and K, build_attn, the gated FFN, the post
        norm); the patch merger (reshaped, permuted and made contiguous as n_merge x n_merge images, a
        ggml_conv_2d by mm.patch_merger, its bias), mm.model.fc, a LayerNorm, GELU, and the gated FFN.

Judged by llama.cpp itself: tests/oracles/test_llamacpp_mmproj_oracle.py.
"""

from __future__ import annotations

from .ggml_graph import Graph
from .graphs_mmproj_vit import ClipShape, attn_ffn_residual, conv_2d, ffn, interpolate, linear, norm, rope

__all__ = ["build_glm4v_mmproj"]


def _merge_order(g: Graph, x, e: int, px: int):
    """glm4v.cpp#L27-L37 / #L53-L62: [w, h, c] or [c, w*h] rows in the 2 x 2 merge order, [e, w*h]."""
    x = g.permute(g.reshape(x, e * 2, px // 2, 2, px // 2), 0, 2, 1, 3)
    return g.cont(x, e, px * px, 1)


def build_glm4v_mmproj(s: ClipShape, flash_attn: bool) -> Graph:
    """The warmup graph (module docstring) of one ``s.image_size`` square image."""
    g = Graph()
    e, px, m = s.n_embd, s.image_size // s.patch_size, s.n_merge
    n_pos, d_head = px * px, s.n_embd // s.n_head

    def opt(role, n):
        return g.weight(n) if s.has(role) else None

    image = g.input("f32", s.image_size, s.image_size, 3, 1)
    kernels = [g.weight(s.patch_size, s.patch_size, 3, e, type_=s.patch_type) for _ in range(2)]
    inp = g.dup("ADD", *(conv_2d(g, k, image, s.patch_type) for k in kernels))
    positions = g.input("i32", n_pos * 4)
    inp = _merge_order(g, g.cont(g.permute(inp, 1, 2, 0, 3), e * 2, px // 2, px, 1), e, px)
    inp = g.dup("ADD", inp, g.weight(e))                                     # the patch bias
    if s.has("norm_embd"):
        inp = norm(g, inp, g.weight(e), opt("norm_embd.bias", e), True)
    if s.n_pos_embd:
        pos, side = g.weight(e, s.n_pos_embd), int(s.n_pos_embd ** 0.5)
        if side != px:
            pos = g.permute(g.reshape(pos, e, side, side), 2, 0, 1, 3)
            pos = g.cont(g.permute(interpolate(pos, px, px, e, 1), 1, 2, 0, 3), e, n_pos)
        inp = g.dup("ADD", inp, _merge_order(g, g.cont(pos, e * 2, px // 2, px, 1), e, px))
    inp_l = g.reshape(inp, e, n_pos)
    if s.has("pre_ln"):
        inp_l = norm(g, inp_l, g.weight(e), opt("pre_ln.bias", e), True)
    for _ in range(s.n_layer):
        cur = norm(g, inp_l, g.weight(e), opt("ln1.bias", e), True)
        qkv = linear(g, g.weight(e, 3 * e), cur, opt("attn_qkv.bias", 3 * e))
        q, k, v = (g.view(qkv, (d_head, s.n_head, n_pos, 1), (4, 4 * d_head, qkv.nb[1], qkv.nb[1] * n_pos))
                   for _ in range(3))
        q, k = rope(g, q, positions), rope(g, k, positions)
        inp_l = attn_ffn_residual(g, s, inp_l, q, k, v, opt, True, flash_attn)
    if s.has("post_ln"):
        inp_l = norm(g, inp_l, g.weight(e), opt("post_ln.bias", e), True)
    n_out = n_pos // (m * m)
    cur = g.cont(g.permute(g.reshape(inp_l, e, m, m, n_out), 2, 0, 1, 3))
    merger = g.weight(m, m, e, s.n_mm0, type_=s.merger_type)
    cur = g.reshape(conv_2d(g, merger, cur, s.merger_type), s.n_mm0, n_out)
    cur = g.dup("ADD", cur, g.weight(s.n_mm0))
    cur = g.mul_mat(g.weight(s.n_mm0, s.n_mm), cur)
    cur = g.dup("UNARY", norm(g, cur, g.weight(s.n_mm), opt("mm.post_norm.bias", s.n_mm), False))
    g.expand(ffn(g, cur, g.weight(s.n_mm, s.n_mm2), opt("mm.up.bias", s.n_mm2), g.weight(s.n_mm, s.n_mm2),
                 opt("mm.gate.bias", s.n_mm2), g.weight(s.n_mm2, s.n_embd_text), opt("mm.down.bias", s.n_embd_text)))
    return g

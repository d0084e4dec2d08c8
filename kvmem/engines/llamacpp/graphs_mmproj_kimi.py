"""llama.cpp's mtmd warmup graph for Kimi-K2.5's MoonViT tower (clip.projector_type kimik25): the compute
buffer "reserve_compute_meta" prints.

Transcribed from the vendored llama.cpp (llama-cpp-python 0.3.36, llama.cpp 0c1e57098), tools/mtmd/:

    clip.cpp#L1592-L1608 load_hparams: n_merge from clip.vision.projector.scale_factor; the warmup image is
        (int) sqrt(clip.vision.image_max_pixels) a side where the file gives both pixel limits, else
        set_limit_image_tokens(2, 4096): 64 x patch_size x n_merge (clip-model.h#L192-L197); reserved once
        (#L3700-L3818, as graphs_mmproj says); #L2775-L2785 load_tensors: mm.input_norm (weight, bias), mm.1 /
        mm.2 with biases;
    models/kimik25.cpp#L8-L101: pos_h and pos_w; resize_position_embeddings_3d (the [e, w, h] table made
        contiguous as [e, w*h], bicubically resized where the warmup's grid is not the table's); build_inp
        (clip.cpp#L572-L582) plus the positions; build_vit (clip.cpp#L337-L568, LayerNorm: the fused QKV viewed
        as Q, K and V, build_rope_2d (pos_w, pos_h) on Q and K, build_attn, the FFN; every bias and outer norm
        the file has as nodes); build_patch_merge_permute (#L901-L930), viewed as patch rows for a LayerNorm by
        mm.input_norm, viewed back as merged rows, mm.1 + GELU + mm.2.

Judged by llama.cpp itself: tests/oracles/test_llamacpp_mmproj_oracle.py.
"""

from __future__ import annotations

from .ggml_graph import Graph
from .graphs_mmproj_siglip import merge_permute
from .graphs_mmproj_vit import ClipShape, attn_ffn_residual, conv_2d, ffn, interpolate, linear, norm, rope

__all__ = ["build_kimik25_mmproj", "kimik25_warmup_size"]


def kimik25_warmup_size(patch_size: int, n_merge: int, max_pixels: int = 0) -> int:
    """clip.cpp#L1598-L1607: sqrt(image_max_pixels) when the file gives the pixel limits, else 64 x patch x merge."""
    return int(max_pixels ** 0.5) if max_pixels > 0 else 64 * patch_size * n_merge


def build_kimik25_mmproj(s: ClipShape, flash_attn: bool) -> Graph:
    """The warmup graph (module docstring) of one ``s.image_size`` square image; ``s.n_pos_embd`` is the position
    table's side (its [e, side, side] shape)."""
    g = Graph()
    e, px, sf, side = s.n_embd, s.image_size // s.patch_size, s.n_merge, s.n_pos_embd
    n_pos, d_head = px * px, s.n_embd // s.n_head

    def opt(role, n):
        return g.weight(n) if s.has(role) else None

    pos_h, pos_w = g.input("i32", n_pos), g.input("i32", n_pos)
    table = g.weight(e, side, side)
    if side == px:
        learned = g.cont(table, e, n_pos)
    else:
        learned = interpolate(g.permute(table, 2, 1, 0, 3), px, px, e, 1)
        learned = g.cont(g.permute(learned, 2, 1, 0, 3), e, n_pos)
    image = g.input("f32", s.image_size, s.image_size, 3, 1)
    inp = conv_2d(g, g.weight(s.patch_size, s.patch_size, 3, e, type_=s.patch_type), image, s.patch_type)
    inp = g.cont(g.transpose(g.reshape(inp, n_pos, e, 1)))
    if s.has("patch_bias"):
        inp = g.dup("ADD", inp, g.weight(e))
    inp_l = g.reshape(g.dup("ADD", inp, learned), e, n_pos)
    if s.has("pre_ln"):
        inp_l = norm(g, inp_l, g.weight(e), opt("pre_ln.bias", e), False)
    for _ in range(s.n_layer):
        cur = norm(g, inp_l, g.weight(e), opt("ln1.bias", e), False)
        qkv = linear(g, g.weight(e, 3 * e), cur, opt("attn_qkv.bias", 3 * e))
        q, k, v = (g.view(qkv, (d_head, s.n_head, n_pos, 1), (4, 4 * d_head, qkv.nb[1], qkv.nb[1] * n_pos))
                   for _ in range(3))
        q, k = (rope(g, rope(g, t, pos_w), pos_h) for t in (q, k))
        inp_l = attn_ffn_residual(g, s, inp_l, q, k, v, opt, False, flash_attn)
    if s.has("post_ln"):
        inp_l = norm(g, inp_l, g.weight(e), opt("post_ln.bias", e), False)
    cur = merge_permute(g, g.reshape(inp_l, e, n_pos, 1), e, px, sf)
    m, n_merged = cur.ne[0], cur.ne[1]
    cur = g.view(cur, (e, n_merged * sf * sf), (4, 4 * e))
    cur = norm(g, cur, g.weight(e), g.weight(e), False)                      # mm.input_norm
    cur = g.view(cur, (m, n_merged), (4, 4 * m))
    g.expand(ffn(g, cur, g.weight(m, s.n_mm), g.weight(s.n_mm), None, None, g.weight(s.n_mm, s.n_embd_text),
                 g.weight(s.n_embd_text)))
    return g

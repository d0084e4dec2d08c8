"""llama.cpp's mtmd warmup graph for Pixtral's vision tower (clip.projector_type pixtral: Pixtral 12B, and with
the patch merger Mistral Small 3.1 / 3.2, Magistral Small, Devstral Small): the compute buffer
"reserve_compute_meta" prints.

Transcribed from the vendored llama.cpp (llama-cpp-python 0.3.36, llama.cpp 0c1e57098), tools/mtmd/:

    clip.cpp#L1534-L1544 load_hparams: n_merge 1 unless clip.vision.spatial_merge_size, rope theta 10000,
        set_warmup_n_tokens(256): the warmup image is 16 x patch_size x n_merge pixels a side
        (clip-model.h#L210-L215: Pixtral 12B 256 px, Mistral Small 3.1 448 px), reserved once
        (clip.cpp#L3700-L3818, as graphs_mmproj says);
    models/pixtral.cpp#L3-L86: 2-D positions pos_h and pos_w (one per patch), build_inp (clip.cpp#L572-L582:
        the patch conv, transposed and made contiguous, the patch bias if any), build_vit (#L337-L568) with
        RMS norms (the pre norm v.pre_ln), Q, K and V (biases where the file has them) reshaped to heads,
        build_rope_2d (#L824-L873: two ROPE nodes, pos_h over the first half, pos_w over the second) on Q
        and K, build_attn, residual, RMS norm, build_ffn (SiLU GLU of gate and up), residual; with
        mm.patch_merger: RMS norm times mm.input_norm, the [e, w, h] grid made contiguous as [w, h, e], an
        n_merge x n_merge F32 im2col and the merger's mul_mat; mm.1 (+ bias) + GELU + mm.2 (+ bias); the
        [IMG_BREAK] embedding added at the end of each row (a scratch tensor scaled by 0, plus
        v.token_embd.img_break, concatenated: rows of p_x + 1 tokens), viewed as its first
        p_x * p_y + p_y - 1 rows.

Judged by llama.cpp itself: tests/oracles/test_llamacpp_mmproj_oracle.py.
"""

from __future__ import annotations

from .ggml_graph import Graph, Tensor
from .graphs_mmproj_vit import ClipShape, attn, conv_2d, ffn, linear, norm, rope

__all__ = ["build_pixtral_mmproj", "pixtral_warmup_size"]


def pixtral_warmup_size(patch_size: int, n_merge: int) -> int:
    """clip.cpp#L1543 set_warmup_n_tokens(256) -> clip-model.h#L210-L215: 16 x patch_size x n_merge."""
    return 16 * patch_size * n_merge


def build_pixtral_mmproj(s: ClipShape, flash_attn: bool) -> Graph:
    """The warmup graph (module docstring) of one ``s.image_size`` square image."""
    g = Graph()
    e, px = s.n_embd, s.image_size // s.patch_size
    n_pos, d_head, n_merge = px * px, s.n_embd // s.n_head, max(s.n_merge, 1)
    pos_h, pos_w = g.input("i32", n_pos), g.input("i32", n_pos)
    image = g.input("f32", s.image_size, s.image_size, 3, 1)
    inp = conv_2d(g, g.weight(s.patch_size, s.patch_size, 3, e, type_=s.patch_type), image, s.patch_type)
    inp = g.cont(g.transpose(g.reshape(inp, n_pos, e, 1)))
    if s.has("patch_bias"):
        inp = g.dup("ADD", inp, g.weight(e))
    inp_l = g.reshape(inp, e, n_pos)
    if s.has("pre_ln"):
        inp_l = norm(g, inp_l, g.weight(e), _opt(g, s, "pre_ln.bias", e), True)
    for _ in range(s.n_layer):
        cur = norm(g, inp_l, g.weight(e), _opt(g, s, "ln1.bias", e), True)
        q, k, v = (g.reshape(linear(g, g.weight(e, e), cur, _opt(g, s, f"attn_{x}.bias", e)), d_head, s.n_head,
                             n_pos, 1) for x in "qkv")
        q, k = (rope(g, rope(g, t, pos_h), pos_w) for t in (q, k))
        cur = attn(g, q, k, v, None, g.weight(e, e), _opt(g, s, "attn_out.bias", e), flash_attn)
        inp_l = g.dup("ADD", cur, inp_l)
        cur = norm(g, inp_l, g.weight(e), _opt(g, s, "ln2.bias", e), True)
        cur = ffn(g, cur, g.weight(e, s.n_ff), _opt(g, s, "ffn_up.bias", s.n_ff),
                  g.weight(e, s.n_ff) if s.has("ffn_gate") else None, _opt(g, s, "ffn_gate.bias", s.n_ff),
                  g.weight(s.n_ff, e), _opt(g, s, "ffn_down.bias", e))
        inp_l = g.dup("ADD", inp_l, cur)
    if s.has("post_ln"):
        inp_l = norm(g, inp_l, g.weight(e), _opt(g, s, "post_ln.bias", e), True)
    cur = g.reshape(inp_l, e, n_pos, 1)
    if s.has("patch_merger"):
        cur = g.dup("MUL", g.dup("RMS_NORM", cur), g.weight(e))
        cur = g.cont(g.permute(g.reshape(cur, e, px, px), 2, 0, 1, 3))
        kernel = g.view(cur, (n_merge, n_merge, e), (4, 0, 0))
        side = (px - n_merge) // n_merge + 1
        cur = g.op("IM2COL", "f32", (e * n_merge * n_merge, side, side, 1), kernel, cur)
        cur = g.mul_mat(g.weight(e * n_merge * n_merge, e), g.reshape(cur, cur.ne[0], side * side))
    cur = ffn(g, cur, g.weight(e, s.n_mm), _opt(g, s, "mm.1.bias", s.n_mm), None, None,
              g.weight(s.n_mm, s.n_embd_text), _opt(g, s, "mm.2.bias", s.n_embd_text))
    p = px // n_merge                       # pixtral.cpp#L60-L80: the [IMG_BREAK] token after each row
    tmp = g.reshape(cur, s.n_embd_text, p, p)
    tok = g.dup("ADD", g.dup("SCALE", Tensor("f32", (s.n_embd_text, 1, p))), g.weight(s.n_embd_text))
    tmp = g.concat(tmp, tok, 1)
    g.expand(g.view(tmp, (s.n_embd_text, p * p + p - 1), (4, tmp.nb[1])))
    return g


def _opt(g: Graph, s: ClipShape, role: str, n: int):
    """The optional 1-D tensor ``role`` (a bias) where the file has it, else None (no node)."""
    return g.weight(n) if s.has(role) else None

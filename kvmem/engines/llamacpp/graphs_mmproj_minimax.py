"""llama.cpp's mtmd warmup graph for MiniMax-M3's vision tower (clip.projector_type minimax_m3): the compute
buffer "reserve_compute_meta" prints.

Transcribed from the vendored llama.cpp (llama-cpp-python 0.3.36, llama.cpp 0c1e57098), tools/mtmd/:

    clip.cpp#L1687-L1700 load_hparams: n_merge 2 unless clip.vision.spatial_merge_size, set_warmup_n_tokens(16*16):
        the warmup image is 16 x patch_size x n_merge pixels a side (clip-model.h#L210-L215: 448 px), reserved
        once (#L3700-L3818, as graphs_mmproj says); #L2528-L2540 load_tensors: mm.1 / mm.2 and mm.merger.fc1 /
        .fc2, each with its bias;
    models/minimax-m3.cpp#L3-L76: the two temporal patch kernels' convs added, the n_merge x n_merge merge order
        (permute, contiguous, reshape, permute, contiguous), pos_h and pos_w; build_vit (clip.cpp#L337-L568,
        LayerNorm, every bias and the pre norm the file has as nodes; GELU FFN) with apply_rope: two NEOX ROPE
        nodes on Q and K; mm.1 + GELU + mm.2 per patch, the n_merge^2 patches' rows as one, mm.merger.fc1 +
        GELU + mm.merger.fc2.

Judged by llama.cpp itself: tests/oracles/test_llamacpp_mmproj_oracle.py.
"""

from __future__ import annotations

from .ggml_graph import Graph
from .graphs_mmproj_vit import ClipShape, attn, conv_2d, ffn, linear, norm, rope

__all__ = ["build_minimax_m3_mmproj", "minimax_m3_warmup_size"]


def minimax_m3_warmup_size(patch_size: int, n_merge: int) -> int:
    """clip.cpp#L1699 set_warmup_n_tokens(16*16) -> clip-model.h#L210-L215: 16 x patch_size x n_merge."""
    return 16 * patch_size * n_merge


def build_minimax_m3_mmproj(s: ClipShape, flash_attn: bool) -> Graph:
    """The warmup graph (module docstring) of one ``s.image_size`` square image."""
    g = Graph()
    e, px, m = s.n_embd, s.image_size // s.patch_size, s.n_merge
    n_pos, d_head, text = px * px, s.n_embd // s.n_head, s.n_embd_text

    def opt(role, n):
        return g.weight(n) if s.has(role) else None

    image = g.input("f32", s.image_size, s.image_size, 3, 1)
    kernels = [g.weight(s.patch_size, s.patch_size, 3, e, type_=s.patch_type) for _ in range(2)]
    inp = g.dup("ADD", *(conv_2d(g, k, image, s.patch_type) for k in kernels))
    inp = g.cont(g.permute(inp, 1, 2, 0, 3), e * m, px // m, px, 1)
    inp = g.cont(g.permute(g.reshape(inp, e * m, px // m, m, px // m), 0, 2, 1, 3), e, n_pos, 1)
    pos_h, pos_w = g.input("i32", n_pos), g.input("i32", n_pos)
    inp_l = g.reshape(inp, e, n_pos)
    if s.has("pre_ln"):
        inp_l = norm(g, inp_l, g.weight(e), opt("pre_ln.bias", e), False)
    for _ in range(s.n_layer):
        cur = norm(g, inp_l, g.weight(e), opt("ln1.bias", e), False)
        q, k, v = (g.reshape(linear(g, g.weight(e, e), cur, opt(f"attn_{x}.bias", e)), d_head, s.n_head, n_pos, 1)
                   for x in "qkv")
        q, k = (rope(g, rope(g, t, pos_h), pos_w) for t in (q, k))
        cur = attn(g, q, k, v, None, g.weight(e, e), opt("attn_out.bias", e), flash_attn)
        inp_l = g.dup("ADD", cur, inp_l)
        cur = norm(g, inp_l, g.weight(e), opt("ln2.bias", e), False)
        cur = ffn(g, cur, g.weight(e, s.n_ff), opt("ffn_up.bias", s.n_ff), None, None, g.weight(s.n_ff, e),
                  opt("ffn_down.bias", e))
        inp_l = g.dup("ADD", inp_l, cur)
    if s.has("post_ln"):
        inp_l = norm(g, inp_l, g.weight(e), opt("post_ln.bias", e), False)
    cur = ffn(g, g.reshape(inp_l, e, n_pos, 1), g.weight(e, s.n_mm), g.weight(s.n_mm), None, None,
              g.weight(s.n_mm, text), g.weight(text))
    cur = g.reshape(cur, text * m * m, n_pos // (m * m))
    g.expand(ffn(g, cur, g.weight(text * m * m, s.n_mm2), g.weight(s.n_mm2), None, None, g.weight(s.n_mm2, text),
                 g.weight(text)))
    return g

"""llama.cpp's mtmd warmup graph for the Qwen-VL vision towers (clip.projector_type qwen2vl: Qwen2-VL;
qwen25vl: Qwen2.5-VL; qwen3vl: Qwen3-VL, Qwen3.5): the compute buffer "reserve_compute_meta" prints.

Transcribed from the vendored llama.cpp (llama-cpp-python 0.3.36, llama.cpp 0c1e57098), tools/mtmd/:

    clip.cpp#L1668-L1687 load_hparams: n_merge 2 unless clip.vision.spatial_merge_size, n_wa_pattern
        (clip.vision.n_wa_pattern, qwen25vl), set_warmup_n_tokens(46*46): the warmup image is
        46 x patch_size x n_merge pixels a side (clip-model.h#L210-L215; Qwen2.5-VL 1288 px, Qwen3-VL 1472 px,
        whatever --image-max-tokens says), reserved once (clip.cpp#L3700-L3818, as graphs_mmproj says);
    models/qwen2vl.cpp#L3-L30 build_inp_with_temporal_merge: the two temporal patch kernels
        (v.patch_embd.weight and .weight.1) each a ggml_conv_2d of the image, added;
    models/qwen2vl.cpp#L32-L205 (qwen2vl, qwen25vl): the 2 x 2 patch merge order (permute, contiguous,
        reshape, permute, contiguous), M-RoPE positions (4 per patch); qwen25vl: RMS norms, and window
        attention: the rows gathered by inv_window_idx, the n_pos x n_pos window mask (cast to F16 with flash
        attention, and again in build_attn) on every layer but each n_wa_pattern-th; per layer norm, Q/K/V with
        biases reshaped to heads, M-RoPE on Q and K, build_attn, residual, norm, build_ffn (up, gate: SiLU GLU;
        qwen2vl: quick GELU), residual; post norm, the 4 patches' rows as one (n_embd x 4), mm.0 + GELU + mm.2,
        and (qwen25vl) the rows put back by window_idx;
    models/qwen3vl.cpp#L3-L186 (qwen3vl): the same merge, the patch bias, the learned position embeddings
        (resize_position_embeddings: bilinear where the warmup's patch grid is not the table's, permuted
        and made contiguous as the patches are), LayerNorms, one fused QKV with bias viewed as Q, K and V,
        GELU FFN; after each deepstack layer its output's 4-patch rows normed and put through fc1 + GELU + fc2,
        concatenated; the merger as qwen2vl's, then the deepstack features concatenated to it.

Judged by llama.cpp itself: tests/oracles/test_llamacpp_mmproj_oracle.py (mtmd_init_from_file on sparse
mmproj GGUFs of these projector types).
"""

from __future__ import annotations

from .ggml_graph import Graph
from .graphs_mmproj_vit import ClipShape, attn, conv_2d, ffn, interpolate, linear, norm, rope

__all__ = ["QWEN_PROJECTORS", "build_qwen_mmproj", "qwen_warmup_size"]

QWEN_PROJECTORS = ("qwen2vl", "qwen25vl", "qwen3vl")


def qwen_warmup_size(patch_size: int, n_merge: int) -> int:
    """clip.cpp#L1679 set_warmup_n_tokens(46*46) -> clip-model.h#L210-L215: 46 x patch_size x n_merge."""
    return 46 * patch_size * n_merge


def _merge_order(g: Graph, x, e: int, px: int, py: int):
    """qwen2vl.cpp#L51-L63 / qwen3vl.cpp#L19-L31: [w, h, c] patches in the 2 x 2 merge order, [e, w*h]."""
    x = g.cont(g.permute(x, 1, 2, 0, 3), e * 2, px // 2, py, 1)
    x = g.permute(g.reshape(x, e * 2, px // 2, 2, py // 2), 0, 2, 1, 3)
    return g.cont(x, e, px * py, 1)


def build_qwen_mmproj(s: ClipShape, flash_attn: bool) -> Graph:
    """The warmup graph (module docstring) of one ``s.image_size`` square image."""
    g = Graph()
    e, px = s.n_embd, s.image_size // s.patch_size
    n_pos, d_head, qwen3 = px * px, s.n_embd // s.n_head, s.projector == "qwen3vl"
    image = g.input("f32", s.image_size, s.image_size, 3, 1)
    kernels = [g.weight(s.patch_size, s.patch_size, 3, e, type_=s.patch_type) for _ in range(2)]
    inp = g.dup("ADD", *(conv_2d(g, k, image, s.patch_type) for k in kernels))
    inp = _merge_order(g, inp, e, px, px)
    if qwen3:
        inp = g.dup("ADD", inp, g.weight(e))                        # the patch bias
        pos = g.weight(e, s.n_pos_embd)
        side = int(s.n_pos_embd ** 0.5)
        if px != side:
            pos = g.permute(g.reshape(pos, e, side, side), 2, 0, 1, 3)
            pos = g.cont(g.permute(interpolate(pos, px, px, e, 1), 1, 2, 0, 3), e, px * px)
        pos = g.permute(g.reshape(g.cont(pos, e * 2, px // 2, px, 1), e * 2, px // 2, 2, px // 2), 0, 2, 1, 3)
        inp = g.dup("ADD", inp, g.cont(pos, e, n_pos, 1))
    positions = g.input("i32", n_pos * 4)
    rms = s.projector == "qwen25vl"
    inp_l = norm(g, inp, g.weight(e), _opt(g, s, "pre_ln.bias", e), rms) if s.has("pre_ln") else inp
    mask, window = None, s.n_wa_pattern > 0 and not qwen3
    if window:
        inv_window_idx = g.input("i32", n_pos // 4)
        mask = g.input("f32", n_pos, n_pos)
        if flash_attn:
            mask = g.cast(mask, "f16")
        inp_l = g.reshape(g.get_rows(g.reshape(inp_l, e * 4, n_pos // 4), inv_window_idx), e, n_pos, 1)
    features = None
    for il in range(s.n_layer):
        cur = norm(g, inp_l, g.weight(e), _opt(g, s, "ln1.bias", e), rms)
        if qwen3:
            qkv = linear(g, g.weight(e, 3 * e), cur, g.weight(3 * e))
            q, k, v = (g.view(qkv, (d_head, s.n_head, n_pos), (4, 4 * d_head, qkv.nb[1])) for _ in range(3))
        else:
            q, k, v = (g.reshape(linear(g, g.weight(e, e), cur, _opt(g, s, f"attn_{x}.bias", e)), d_head, s.n_head,
                                 n_pos) for x in "qkv")
        q, k = rope(g, q, positions), rope(g, k, positions)
        full = not window or (il + 1) % s.n_wa_pattern == 0
        cur = attn(g, q, k, v, None if full else mask, g.weight(e, e), _opt(g, s, "attn_out.bias", e), flash_attn)
        inp_l = g.dup("ADD", cur, inp_l)
        cur = norm(g, inp_l, g.weight(e), _opt(g, s, "ln2.bias", e), rms)
        cur = ffn(g, cur, g.weight(e, s.n_ff), _opt(g, s, "ffn_up.bias", s.n_ff),
                  g.weight(e, s.n_ff) if s.has("ffn_gate") else None, _opt(g, s, "ffn_gate.bias", s.n_ff),
                  g.weight(s.n_ff, e), _opt(g, s, "ffn_down.bias", e))
        inp_l = g.dup("ADD", inp_l, cur)
        if il in s.deepstack:       # qwen3vl.cpp#L143-L158
            merge = s.n_merge * s.n_merge if s.n_merge > 0 else 4
            m = e * merge
            feat = norm(g, g.reshape(inp_l, m, n_pos // merge, 1), g.weight(m), g.weight(m), False)
            feat = ffn(g, feat, g.weight(m, s.n_mm), g.weight(s.n_mm), None, None, g.weight(s.n_mm, s.n_embd_text),
                       g.weight(s.n_embd_text))
            features = feat if features is None else g.concat(features, feat, 0)
    if s.has("post_ln"):
        inp_l = norm(g, inp_l, g.weight(e), _opt(g, s, "post_ln.bias", e), rms)
    out = ffn(g, g.reshape(inp_l, e * 4, n_pos // 4, 1), g.weight(e * 4, s.n_mm), _opt(g, s, "mm.0.bias", s.n_mm),
              None, None, g.weight(s.n_mm, s.n_embd_text), _opt(g, s, "mm.2.bias", s.n_embd_text))
    if window:
        window_idx = g.input("i32", n_pos // 4)
        out = g.get_rows(g.reshape(out, s.n_embd_text, n_pos // 4), window_idx)
        out = g.reshape(out, s.n_embd_text, n_pos // 4, 1)
    if features is not None:
        out = g.concat(out, features, 0)
    g.expand(out)
    return g


def _opt(g: Graph, s: ClipShape, role: str, n: int):
    """The optional 1-D tensor ``role`` (a bias) where the file has it, else None (no node)."""
    return g.weight(n) if s.has(role) else None

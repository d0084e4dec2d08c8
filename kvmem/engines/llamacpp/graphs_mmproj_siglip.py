"""llama.cpp's mtmd warmup graph for the SigLIP towers with a pixel-shuffle projector (clip.projector_type
idefics3: SmolVLM, Idefics3; lfm2: LFM2-VL / LFM2.5-VL): the compute buffer "reserve_compute_meta" prints.

Transcribed from the vendored llama.cpp (llama-cpp-python 0.3.36, llama.cpp 0c1e57098), tools/mtmd/:

    clip.cpp#L1509-L1525 load_hparams: n_merge from clip.vision.projector.scale_factor (1 when absent,
        clip-model.h#L60); idefics3 warms up with image_size (#L1373: set_limit_image_tokens() leaves it), lfm2
        with set_limit_image_tokens(64, 256): sqrt(256 x (patch x n_merge)^2) = 16 x patch x n_merge pixels
        (clip-model.h#L192-L197); reserved once (#L3700-L3818, as graphs_mmproj says); #L2762-L2774 load_tensors:
        idefics3's mm.model.fc, lfm2's mm.1 / mm.2 and its optional mm.input_norm weight and bias;
    models/siglip.cpp#L3-L94: build_inp (clip.cpp#L572-L582: the patch conv, transposed, contiguous, the patch
        bias), the learned position embeddings (lfm2: resize_position_embeddings, #L312-L333, bilinear where
        the warmup's patch grid is not the table's), build_vit (#L337-L568, LayerNorm: every bias, pre and post
        norm the file has, as nodes); build_patch_merge_permute (#L901-L930: [e, w, h], padded to the merge,
        reshape, permute, contiguous, permute, contiguous); idefics3: mm.model.fc; lfm2: the input LayerNorm
        (weight, bias: each if present), mm.1 (+ bias) + GELU + mm.2 (+ bias).

Judged by llama.cpp itself: tests/oracles/test_llamacpp_mmproj_oracle.py.
"""

from __future__ import annotations

from .ggml_graph import Graph, Tensor
from .graphs_mmproj_vit import ClipShape, attn_ffn_residual, conv_2d, ffn, interpolate, linear, norm

__all__ = ["build_siglip_mmproj", "lfm2_warmup_size", "merge_permute"]


def lfm2_warmup_size(patch_size: int, n_merge: int) -> int:
    """clip.cpp#L1524 set_limit_image_tokens(64, 256): (int) sqrt(256 x patch^2 x n_merge^2)."""
    return 16 * patch_size * n_merge


def merge_permute(g: Graph, cur: Tensor, e: int, px: int, sf: int) -> Tensor:
    """clip.cpp#L901-L930 build_patch_merge_permute of a px x px grid (ggml_pad where px is not a multiple)."""
    cur = g.reshape(cur, e, px, px)
    pad = -px % sf
    if pad:
        cur = Tensor("f32", (e, px + pad, px + pad, 1), "PAD", (cur,))
        px += pad
    cur = g.permute(g.reshape(cur, e * sf, px // sf, px), 0, 2, 1, 3)
    cur = g.permute(g.cont(cur, e * sf * sf, px // sf, px // sf), 0, 2, 1, 3)
    return g.cont(cur, cur.ne[0], cur.ne[1] * cur.ne[2])


def build_siglip_mmproj(s: ClipShape, flash_attn: bool) -> Graph:
    """The warmup graph (module docstring) of one ``s.image_size`` square image."""
    g = Graph()
    e, px = s.n_embd, s.image_size // s.patch_size
    n_pos, d_head = px * px, s.n_embd // s.n_head

    def opt(role, n):
        return g.weight(n) if s.has(role) else None

    image = g.input("f32", s.image_size, s.image_size, 3, 1)
    inp = conv_2d(g, g.weight(s.patch_size, s.patch_size, 3, e, type_=s.patch_type), image, s.patch_type)
    inp = g.cont(g.transpose(g.reshape(inp, n_pos, e, 1)))
    if s.has("patch_bias"):
        inp = g.dup("ADD", inp, g.weight(e))
    pos = g.weight(e, s.n_pos_embd)
    side = int(s.n_pos_embd ** 0.5)
    if s.projector == "lfm2" and side != px:
        pos = g.permute(g.reshape(pos, e, side, side), 2, 0, 1, 3)
        pos = g.cont(g.permute(interpolate(pos, px, px, e, 1), 1, 2, 0, 3), e, n_pos)
    inp_l = g.reshape(g.dup("ADD", inp, pos), e, n_pos)
    if s.has("pre_ln"):
        inp_l = norm(g, inp_l, g.weight(e), opt("pre_ln.bias", e), False)
    for _ in range(s.n_layer):
        cur = norm(g, inp_l, g.weight(e), opt("ln1.bias", e), False)
        q, k, v = (g.reshape(linear(g, g.weight(e, e), cur, opt(f"attn_{x}.bias", e)), d_head, s.n_head, n_pos, 1)
                   for x in "qkv")
        inp_l = attn_ffn_residual(g, s, inp_l, q, k, v, opt, False, flash_attn)
    if s.has("post_ln"):
        inp_l = norm(g, inp_l, g.weight(e), opt("post_ln.bias", e), False)
    cur = merge_permute(g, g.reshape(inp_l, e, n_pos, 1), e, px, s.n_merge)
    m = cur.ne[0]
    if s.projector == "idefics3":
        g.expand(g.mul_mat(g.weight(m, s.n_embd_text), cur))
        return g
    if s.has("input_norm"):
        cur = g.dup("MUL", g.dup("NORM", cur), g.weight(m))
    if s.has("input_norm.bias"):
        cur = g.dup("ADD", cur, g.weight(m))
    g.expand(ffn(g, cur, g.weight(m, s.n_mm), opt("mm.1.bias", s.n_mm), None, None,
                 g.weight(s.n_mm, s.n_embd_text), opt("mm.2.bias", s.n_embd_text)))
    return g

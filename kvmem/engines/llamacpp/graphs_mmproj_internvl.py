"""llama.cpp's mtmd warmup graph for InternVL's vision tower (clip.projector_type internvl: InternVL 2.5 / 3 /
3.5 with the 300M InternViT, Intern-S1): the compute buffer "reserve_compute_meta" prints.

Transcribed from the vendored llama.cpp (llama-cpp-python 0.3.36, llama.cpp 0c1e57098), tools/mtmd/:

    clip.cpp#L1479-L1490 load_hparams: n_merge from clip.vision.projector.scale_factor, dynamic-resolution
        tiles of image_size; the warmup image is one tile (warmup_image_size = image_size, #L1373), reserved
        once (#L3700-L3818, as graphs_mmproj says); #L3187-L3195 load_tensors: mm.model.mlp.0 / .1 / .3;
    models/internvl.cpp#L3-L73: build_inp (clip.cpp#L572-L582: the patch conv, transposed, contiguous, the
        patch bias if any), [CLS] repeated and concatenated; build_vit (clip.cpp#L337-L568) with the learned
        position embeddings, LayerNorm (RMS for the 6B ViT: 3200 wide, 45 layers), Q / K / V (biases where the
        file has them), build_attn, the layer scale ls1, residual, norm, build_ffn, ls2, residual; [CLS] dropped
        (a view made contiguous), the pixel shuffle (reshape, permute, contiguous, permute, contiguous), the
        projector's LayerNorm (mm.model.mlp.0), mlp.1 + GELU + mlp.3.

Judged by llama.cpp itself: tests/oracles/test_llamacpp_mmproj_oracle.py.
"""

from __future__ import annotations

from .ggml_graph import Graph, Tensor
from .graphs_mmproj_vit import ClipShape, attn, conv_2d, ffn, linear, norm

__all__ = ["build_internvl_mmproj"]


def build_internvl_mmproj(s: ClipShape, flash_attn: bool) -> Graph:
    """The warmup graph (module docstring) of one ``s.image_size`` square tile."""
    g = Graph()
    e, px, sf = s.n_embd, s.image_size // s.patch_size, s.n_merge
    n_patches, d_head, rms = px * px, s.n_embd // s.n_head, s.n_embd == 3200 and s.n_layer == 45
    n_pos = n_patches + 1

    def opt(role, n):
        return g.weight(n) if s.has(role) else None

    image = g.input("f32", s.image_size, s.image_size, 3, 1)
    inp = conv_2d(g, g.weight(s.patch_size, s.patch_size, 3, e, type_=s.patch_type), image, s.patch_type)
    inp = g.cont(g.transpose(g.reshape(inp, n_patches, e, 1)))
    if s.has("patch_bias"):
        inp = g.dup("ADD", inp, g.weight(e))
    cls = Tensor("f32", (e, 1, 1, 1), "REPEAT", (g.weight(e),))            # ggml_repeat_4d
    inp = g.concat(inp, cls, 1)
    inp_l = g.reshape(g.dup("ADD", inp, g.weight(e, n_pos)), e, n_pos)
    for _ in range(s.n_layer):
        cur = norm(g, inp_l, g.weight(e), opt("ln1.bias", e), rms)
        q, k, v = (g.reshape(linear(g, g.weight(e, e), cur, opt(f"attn_{x}.bias", e)), d_head, s.n_head, n_pos, 1)
                   for x in "qkv")
        cur = attn(g, q, k, v, None, g.weight(e, e), opt("attn_out.bias", e), flash_attn)
        if s.has("ls1"):
            cur = g.dup("MUL", cur, g.weight(e))
        inp_l = g.dup("ADD", cur, inp_l)
        cur = norm(g, inp_l, g.weight(e), opt("ln2.bias", e), rms)
        cur = ffn(g, cur, g.weight(e, s.n_ff), opt("ffn_up.bias", s.n_ff), None, None, g.weight(s.n_ff, e),
                  opt("ffn_down.bias", e))
        if s.has("ls2"):
            cur = g.dup("MUL", cur, g.weight(e))
        inp_l = g.dup("ADD", inp_l, cur)
    cur = g.reshape(inp_l, e, n_pos, 1)
    cur = g.cont(g.view(cur, (e, n_patches, 1), (4, cur.nb[1], cur.nb[2])))    # [CLS] dropped
    cur = g.permute(g.reshape(cur, e * sf, px // sf, px, 1), 0, 2, 1, 3)
    cur = g.permute(g.cont(cur, e * sf * sf, px // sf, px // sf, 1), 0, 2, 1, 3)
    cur = g.cont(cur, e * sf * sf, cur.ne[1] * cur.ne[2], cur.ne[3])
    m = e * sf * sf
    cur = norm(g, cur, g.weight(m), g.weight(m), False)                       # mm.model.mlp.0, LayerNorm
    g.expand(ffn(g, cur, g.weight(m, s.n_mm), g.weight(s.n_mm), None, None, g.weight(s.n_mm, s.n_embd_text),
                 g.weight(s.n_embd_text)))
    return g

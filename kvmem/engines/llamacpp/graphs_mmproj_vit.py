"""The vision towers of llama.cpp's mtmd beyond Gemma 3 (kvmem.engines.llamacpp.graphs_mmproj): the shape an
mmproj GGUF gives them (``ClipShape``) and clip_graph's shared builders, node by node, over the small ggml
(kvmem.engines.llamacpp.ggml_graph). The projector graphs that use them: graphs_mmproj_qwen (qwen2vl,
qwen25vl, qwen3vl) and graphs_mmproj_pixtral (pixtral: Pixtral, Mistral Small 3.x).

Transcribed from the vendored llama.cpp (llama-cpp-python 0.3.36, llama.cpp 0c1e57098), tools/mtmd/clip.cpp:
build_norm #L591-L614, build_ffn #L616-L706, build_attn #L750-L822, build_rope_2d #L824-L873,
resize_position_embeddings #L312-L333; and ggml/src/ggml.c for the ops they add here: ggml_conv_2d (im2col,
a mul_mat, a permute made contiguous), ggml_rope_impl #L4275-L4330 (a ROPE node shaped as its input),
ggml_glu_impl #L2915-L2939 (GLU: the split form keeps its input's shape; ggml-alloc.c ggml_op_can_inplace
#L22-L50 does not take GLU in place), ggml_interpolate_impl #L5165-L5185 (UPSCALE, F32 only),
ggml_soft_max_impl #L4154-L4186 (SOFT_MAX with the mask as src[1]).
"""

from __future__ import annotations

from dataclasses import dataclass

from .ggml_graph import Graph, Tensor

__all__ = ["ClipShape", "conv_2d", "norm", "ffn", "attn", "rope", "interpolate", "glu", "attn_ffn_residual"]


@dataclass(frozen=True)
class ClipShape:
    """A clip vision tower and projector as its mmproj GGUF gives them (clip.vision.* keys and tensor shapes).
    ``tensors``: the optional tensors the file has, each by its role without "v.blk.N." and ".weight"
    ("ln1.bias", "attn_q.bias", "ffn_gate", "ffn_up.bias", "pre_ln", "post_ln.bias", "mm.1.bias",
    "patch_merger", "patch_bias", ...): clip.cpp builds a node for each one present (build_norm's bias, the
    FFN's gate, ...)."""

    projector: str          # the graph: qwen2vl, qwen25vl, qwen3vl, pixtral, gemma4v, llama4, internvl, glm4v, ...
    image_size: int         # the warmup image's side in pixels (clip_hparams::warmup_image_size)
    patch_size: int
    n_embd: int
    n_ff: int
    n_layer: int
    n_head: int
    n_embd_text: int        # the projector's output width (the last mm.N's rows)
    n_mm: int               # the projector MLP's hidden width (rows of mm.0: qwen; mm.1: pixtral; mlp.1: the rest)
    n_merge: int = 1        # clip.vision.spatial_merge_size
    n_wa_pattern: int = 0   # clip.vision.n_wa_pattern (qwen25vl: every n-th layer attends in full)
    n_pos_embd: int = 0     # v.position_embd.weight's rows (qwen3vl's learned positions; 0: none)
    deepstack: tuple = ()   # the layers with a v.deepstack.N merger (qwen3vl)
    tensors: frozenset = frozenset()
    patch_type: str = "f16"     # v.patch_embd.weight's type (ggml_conv_2d: im2col in F16, F32 for BF16)
    n_mm2: int = 0          # llama4: mm.model.mlp.2's rows; minimax_m3: mm.merger.fc1's; glm4v: mm.up's
    n_mm0: int = 0          # glm4v: mm.patch_merger's output channels
    merger_type: str = "f16"    # glm4v: mm.patch_merger.weight's type (its ggml_conv_2d's im2col as patch_type's)

    def has(self, role: str) -> bool:
        return role in self.tensors


def conv_2d(g: Graph, kernel: Tensor, image: Tensor, kernel_type: str) -> Tensor:
    """ggml.c ggml_conv_2d with the kernel's size as its stride, no padding: im2col (F16, F32 for a BF16
    kernel), the mul_mat of the reshaped columns and kernel, reshaped and permuted (0, 1, 3, 2), contiguous."""
    kw, kh, ic, oc = kernel.ne
    ow, oh, n = (image.ne[0] - kw) // kw + 1, (image.ne[1] - kh) // kh + 1, image.ne[3]
    col = g.op("IM2COL", "f32" if kernel_type == "bf16" else "f16", (ic * kh * kw, ow, oh, n), kernel, image)
    out = g.mul_mat(g.reshape(col, col.ne[0], ow * oh * n), g.reshape(kernel, kw * kh * ic, oc))
    return g.cont(g.permute(g.reshape(out, ow, oh, n, oc), 0, 1, 3, 2))


def norm(g: Graph, x: Tensor, w: Tensor | None, b: Tensor | None, rms: bool) -> Tensor:
    """clip_graph::build_norm: ggml_rms_norm or ggml_norm, times the weight, plus the bias (each if present)."""
    cur = g.dup("RMS_NORM" if rms else "NORM", x)
    if w is not None:
        cur = g.dup("MUL", cur, w)
    if b is not None:
        cur = g.dup("ADD", cur, b)
    return cur


def glu(a: Tensor, b: Tensor) -> Tensor:
    """ggml_swiglu_split / ggml_geglu_split: GLU of a and b, a's shape (not in place: ggml_op_can_inplace)."""
    return Tensor(a.type, a.ne, "GLU", (a, b))


def linear(g: Graph, w: Tensor, x: Tensor, b: Tensor | None, mm=None) -> Tensor:
    """build_mm (``mm``: a projector's override of it; else ggml_mul_mat) then ggml_add of the bias, if any."""
    out = (mm or g.mul_mat)(w, x)
    return g.dup("ADD", out, b) if b is not None else out


def ffn(g: Graph, x: Tensor, up, up_b, gate, gate_b, down, down_b, mm=None) -> Tensor:
    """clip_graph::build_ffn: up (+ bias), the gate (+ bias) and a GLU of gate and up where there is a gate,
    else the activation (GELU, SiLU or quick GELU: one UNARY node), then down (+ bias)."""
    tmp = linear(g, up, x, up_b, mm) if up is not None else x
    cur = glu(linear(g, gate, x, gate_b, mm), tmp) if gate is not None else g.dup("UNARY", tmp)
    return linear(g, down, cur, down_b, mm) if down is not None else cur


def rope(g: Graph, a: Tensor, positions: Tensor) -> Tensor:
    """ggml_rope_ext / ggml_rope_multi: a ROPE node of a's shape, contiguous (ggml_dup_tensor)."""
    return g.dup("ROPE", a, positions)


def interpolate(a: Tensor, ne0: int, ne1: int, ne2: int, ne3: int) -> Tensor:
    """ggml_interpolate: an F32 UPSCALE node of the given shape."""
    return Tensor("f32", (ne0, ne1, ne2, ne3), "UPSCALE", (a,))


def attn(g: Graph, q_cur, k_cur, v_cur, mask, wo, wo_b, flash_attn: bool, mm=None) -> Tensor:
    """clip_graph::build_attn: Q, K and V ordered (ggml_build_forward_order), then flash attention over
    permuted Q and K, V cast to F16 (and the mask, where there is one), or KQ, the masked softmax and KQV,
    permuted and made contiguous; the output projection and its bias."""
    for t in (q_cur, k_cur, v_cur):
        g.expand(t)
    q, k = g.permute(q_cur, 0, 2, 1, 3), g.permute(k_cur, 0, 2, 1, 3)
    if flash_attn:
        v = g.cast(g.permute(v_cur, 0, 2, 1, 3), "f16")
        k = g.cast(k, "f16")
        out = g.flash_attn_ext(q, k, v, g.cast(mask, "f16") if mask is not None else None)
        out = g.reshape(out, out.ne[0] * out.ne[1], out.ne[2] * out.ne[3])
    else:
        v = g.cont(g.permute(v_cur, 1, 2, 0, 3))
        kq = g.mul_mat(k, q)
        kq = Tensor(kq.type, kq.ne, "SOFT_MAX", (kq, mask))
        out = g.permute(g.mul_mat(v, kq), 0, 2, 1, 3)
        out = g.cont(out, out.ne[0] * out.ne[1], out.ne[2] * out.ne[3])
    return linear(g, wo, out, wo_b, mm)


def attn_ffn_residual(g: Graph, s, inp_l: Tensor, q, k, v, opt, rms: bool, flash_attn: bool) -> Tensor:
    """build_vit's layer after its Q, K and V (clip.cpp build_vit): attention and its output projection, the
    residual, ln2 (RMS or LayerNorm), the FFN (gated where the tower has ffn_gate), the residual. ``opt(role, n)``:
    the tower's optional bias of that role and width, or None."""
    e = s.n_embd
    cur = attn(g, q, k, v, None, g.weight(e, e), opt("attn_out.bias", e), flash_attn)
    inp_l = g.dup("ADD", cur, inp_l)
    cur = norm(g, inp_l, g.weight(e), opt("ln2.bias", e), rms)
    cur = ffn(g, cur, g.weight(e, s.n_ff), opt("ffn_up.bias", s.n_ff),
              g.weight(e, s.n_ff) if s.has("ffn_gate") else None, opt("ffn_gate.bias", s.n_ff),
              g.weight(s.n_ff, e), opt("ffn_down.bias", e))
    return g.dup("ADD", inp_l, cur)

"""llama.cpp's mtmd warmup graph for Gemma 4's vision tower (clip.projector_type gemma4v): the compute buffer
"reserve_compute_meta" prints; the shape from an mmproj GGUF header or a Gemma 4 config.

Transcribed from the vendored llama.cpp (llama-cpp-python 0.3.36, llama.cpp 0c1e57098), tools/mtmd/:

    clip.cpp#L1644-L1658 load_hparams: n_merge (the pooling kernel) 3 unless clip.vision.projector.scale_factor,
        set_warmup_n_tokens(256): the warmup image is 16 x patch_size x n_merge pixels a side (clip-model.h
        #L210-L215: 768 px for 16-pixel patches), reserved once (clip.cpp#L3700-L3818, as graphs_mmproj says);
    clip.cpp#L2633-L2658 load_tensors: mm.input_projection, v.std_bias / v.std_scale where present, and a
        Gemma4ClippableLinear clamp entry for every ".weight" tensor (its scalars, else +-FLT_MAX);
    models/gemma4v.cpp#L120-L133 build_mm: every mul_mat of build_vit, build_attn, build_ffn and the projection
        clamps its input (a CLAMP node per use) and its output;
    models/gemma4v.cpp#L4-L118 build: the image scaled (ggml_scale_bias), the patch conv transposed and made
        contiguous, the x and y position tables (two views of v.position_embd) gathered by pos_x and pos_y and
        added; build_vit (clip.cpp#L337-L568) with RMS norms: Q, K, V reshaped to heads, the per-head Q and K norms
        (attn_q_norm / attn_k_norm as wide as a head), two NEOX ROPE nodes each on Q and K (pos_x, pos_y), V
        RMS-normed without a weight, build_attn, attn_post_norm, residual, norm, build_ffn (the gate's GLU),
        ffn_post_norm, residual; the pooler (transposed, contiguous as [x, y, e], a k x k average POOL_2D,
        transposed back, contiguous, scaled), the standardisation (ggml_sub of std_bias, ggml_mul by std_scale)
        where the file has both, an RMS norm and the clamped projection.

ggml_sub is allocated as ggml-alloc allocates it: a same-shaped node ggml_op_can_inplace takes in place, as
ADD (ggml-alloc.c#L22-L50 lists both); it is built here as an ADD node for that reason only.
Judged by llama.cpp itself: tests/oracles/test_llamacpp_mmproj_oracle.py.
"""

from __future__ import annotations

from .ggml_graph import Graph
from .graphs_mmproj_vit import ClipShape, attn, conv_2d, ffn, norm, rope

__all__ = ["build_gemma4v_mmproj", "gemma4v_warmup_size", "gemma4v_shape_from_header", "gemma4v_shape_from_config"]

_FLOAT_TYPES = {"F32": "f32", "F16": "f16", "BF16": "bf16"}
# the per-layer tensors the graph multiplies by (v.blk.N.<role>.weight), each required here
_LAYER = ("ln1", "ln2", "attn_q", "attn_k", "attn_v", "attn_out", "attn_q_norm", "attn_k_norm", "attn_post_norm",
          "ffn_post_norm", "ffn_up", "ffn_gate", "ffn_down")
# Gemma4ClippableLinear's scalars (clip.cpp#L2642-L2654): they set the clamps' bounds, not the graph
_CLAMPS = (".input_max", ".input_min", ".output_max", ".output_min")


def gemma4v_warmup_size(patch_size: int, n_merge: int) -> int:
    """clip.cpp#L1657 set_warmup_n_tokens(256) -> clip-model.h#L210-L215: 16 x patch_size x n_merge."""
    return 16 * patch_size * n_merge


def build_gemma4v_mmproj(s: ClipShape, flash_attn: bool) -> Graph:
    """The warmup graph (module docstring) of one ``s.image_size`` square image."""
    g = Graph()
    e, px, k = s.n_embd, s.image_size // s.patch_size, s.n_merge
    n_pos, d_head = px * px, s.n_embd // s.n_head

    def mm(w, x):       # gemma4v.cpp#L120-L133: the clamped mul_mat
        return g.dup("CLAMP", g.mul_mat(w, g.dup("CLAMP", x)))

    image = g.dup("SCALE", g.input("f32", s.image_size, s.image_size, 3, 1))
    inp = conv_2d(g, g.weight(s.patch_size, s.patch_size, 3, e, type_=s.patch_type), image, s.patch_type)
    inp = g.cont(g.transpose(g.reshape(inp, n_pos, e, 1)))
    pos_x, pos_y = g.input("i32", n_pos), g.input("i32", n_pos)
    table = g.weight(e, s.n_pos_embd, 2)
    for pos in (pos_x, pos_y):     # the x table, and the y table 4 * e * n_pos_embd bytes on (the same shape)
        inp = g.dup("ADD", inp, g.get_rows(g.view(table, (e, s.n_pos_embd), (4, 4 * e)), pos))
    inp_l = g.reshape(inp, e, n_pos)
    for _ in range(s.n_layer):
        cur = norm(g, inp_l, g.weight(e), None, True)
        q, k_, v = (g.reshape(mm(g.weight(e, e), cur), d_head, s.n_head, n_pos, 1) for _ in range(3))
        q, k_ = (norm(g, t, g.weight(d_head), None, True) for t in (q, k_))
        q, k_ = (rope(g, rope(g, t, pos_x), pos_y) for t in (q, k_))
        v = g.dup("RMS_NORM", v)
        cur = attn(g, q, k_, v, None, g.weight(e, e), None, flash_attn, mm)
        cur = norm(g, cur, g.weight(e), None, True)                     # attn_post_norm
        inp_l = g.dup("ADD", cur, inp_l)
        cur = norm(g, inp_l, g.weight(e), None, True)
        cur = ffn(g, cur, g.weight(e, s.n_ff), None, g.weight(e, s.n_ff), None, g.weight(s.n_ff, e), None, mm)
        cur = norm(g, cur, g.weight(e), None, True)                     # ffn_post_norm
        inp_l = g.dup("ADD", inp_l, cur)
    cur = g.reshape(inp_l, e, n_pos, 1)
    cur = g.cont(g.transpose(cur), px, px, e, 1)
    out = (px - k) // k + 1                 # ggml.c ggml_calc_pool_output_size, stride k, no padding
    cur = g.op("POOL_2D", "f32", (out, out, e, 1), cur)
    cur = g.dup("SCALE", g.cont(g.transpose(g.reshape(cur, out * out, e, 1))))
    if s.has("std"):
        cur = g.dup("MUL", g.dup("ADD", cur, g.weight(e)), g.weight(e))   # ggml_sub (module docstring), ggml_mul
    g.expand(mm(g.weight(e, s.n_embd_text), g.dup("RMS_NORM", cur)))
    return g


def gemma4v_shape_from_header(header) -> ClipShape:
    """The ClipShape of a gemma4v mmproj GGUF: clip.vision.* keys, the tensors' widths, every layer tensor the
    graph multiplies by required, any other layer tensor (a bias, a pre/post norm) refused by name."""
    meta, tensors = header.metadata, {t.name: t for t in header.tensors}

    def key(name, default=None):
        value = meta.get(f"clip.vision.{name}", default)
        if value is None:
            raise ValueError(f"mmproj GGUF has no clip.vision.{name}: clip.cpp load_hparams requires it")
        return int(value)

    e, n_head, n_layer, patch = (key(k) for k in ("embedding_length", "attention.head_count", "block_count",
                                                  "patch_size"))
    if key("attention.head_dim", e // n_head) != e // n_head:
        raise _refuse(f"clip.vision.attention.head_dim {key('attention.head_dim')} (the graph has {e // n_head})")
    names = ["v.patch_embd.weight", "v.position_embd.weight", "mm.input_projection.weight",
             *(f"v.blk.{il}.{r}.weight" for il in range(n_layer) for r in _LAYER)]
    for name in names:
        if name not in tensors:
            raise ValueError(f"mmproj (gemma4v) has no tensor {name}: kvmem's transcription of its graph multiplies "
                             "by it")
    known = set(names) | {"v.std_bias", "v.std_scale"}
    for name in tensors:
        if name not in known and not name.endswith(_CLAMPS):
            raise _refuse(f"tensor {name}")
    patch_type, pos = tensors["v.patch_embd.weight"].dtype.upper(), tensors["v.position_embd.weight"]
    if patch_type not in _FLOAT_TYPES:
        raise _refuse(f"v.patch_embd.weight {patch_type} (F32, F16 or BF16 kernels)")
    if pos.dtype.upper() != "F32" or len(pos.shape) < 3 or pos.shape[2] != 2:
        raise _refuse(f"v.position_embd.weight {pos.dtype} {tuple(pos.shape)} (two F32 tables)")
    n_merge = key("projector.scale_factor", 3)
    return ClipShape(projector="gemma4v", image_size=gemma4v_warmup_size(patch, n_merge), patch_size=patch, n_embd=e,
                     n_ff=tensors["v.blk.0.ffn_up.weight"].shape[1], n_layer=n_layer, n_head=n_head,
                     n_embd_text=tensors["mm.input_projection.weight"].shape[1], n_mm=0, n_merge=n_merge,
                     n_pos_embd=pos.shape[1],
                     tensors=frozenset({"std"} if {"v.std_bias", "v.std_scale"} <= set(tensors) else ()),
                     patch_type=_FLOAT_TYPES[patch_type])


def gemma4v_shape_from_config(cfg: dict, n_embd_text: int) -> ClipShape | None:
    """The ClipShape conversion/gemma.py Gemma4VisionAudioModel's mmproj of a Gemma 4 config would have (its
    vision_config: model_type gemma4_vision); None with an audio_config (that mmproj has an audio tower too)."""
    vision = cfg.get("vision_config")
    if cfg.get("audio_config") or not isinstance(vision, dict) or vision.get("model_type") != "gemma4_vision":
        return None
    patch, k = vision["patch_size"], vision.get("pooling_kernel_size", 3)
    return ClipShape(projector="gemma4v", image_size=gemma4v_warmup_size(patch, k), patch_size=patch,
                     n_embd=vision["hidden_size"], n_ff=vision["intermediate_size"],
                     n_layer=vision["num_hidden_layers"], n_head=vision["num_attention_heads"], n_embd_text=n_embd_text,
                     n_mm=0, n_merge=k, n_pos_embd=vision["position_embedding_size"],
                     tensors=frozenset({"std"} if vision.get("standardize") else ()))


def _refuse(what: str):
    return ValueError(f"mmproj (gemma4v) {what}: kvmem's transcription of its clip graph (graphs_mmproj_gemma4) "
                      "does not cover it, so its compute buffer is not computed")

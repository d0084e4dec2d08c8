"""The ClipShape (graphs_mmproj_vit) of a Qwen-VL, Pixtral, Llama 4, InternVL, SmolVLM (idefics3) or LFM2-VL mmproj
GGUF header, read as llama.cpp 0c1e57098's tools/mtmd/clip.cpp reads it: load_hparams (#L1300-L1320:
clip.vision.embedding_length, head_count, block_count, patch_size; #L1668-L1687 qwen: spatial_merge_size 2 when
absent, n_wa_pattern required for qwen25vl; #L1534-L1544 pixtral: spatial_merge_size 1 when absent; llama4
#L1788-L1794, internvl #L1479-L1490, idefics3 and lfm2 #L1509-L1525: projector.scale_factor, 1 when absent,
clip-model.h#L60) and load_tensors (#L2256-L2345 the layers' tensors, each optional one a node where present;
#L2496-L2510 qwen's mm.0 / mm.2; #L2798-L2809 pixtral's mm.1 / mm.2, v.token_embd.img_break, mm.input_norm and
mm.patch_merger; #L2762-L2774 idefics3's and lfm2's, #L3187-L3222 internvl's and llama4's). Widths come from the
tensors the graph multiplies by (the FFN's from ffn_up, the projector's from mm.*), as ggml takes them. A file
with a tensor the transcribed graph does not build (layer scales but InternViT's, post-attention norms, Q/K
norms, a MoE FFN) or without one it needs is refused, naming it."""

from __future__ import annotations

from .graphs_mmproj_kimi import kimik25_warmup_size
from .graphs_mmproj_minimax import minimax_m3_warmup_size
from .graphs_mmproj_pixtral import pixtral_warmup_size
from .graphs_mmproj_qwen import qwen_warmup_size
from .graphs_mmproj_siglip import lfm2_warmup_size
from .graphs_mmproj_vit import ClipShape

__all__ = ["clip_shape_from_header", "LLAMA4_TENSORS"]

_FLOAT_TYPES = {"F32": "f32", "F16": "f16", "BF16": "bf16"}
# the per-layer tensors (v.blk.N.<role>.weight, or <role> as a full suffix) whose presence adds nodes
_LAYER_ROLES = ("ln1.bias", "ln2.bias", "attn_q.bias", "attn_k.bias", "attn_v.bias", "attn_out.bias", "ffn_up.bias",
                "ffn_gate", "ffn_gate.bias", "ffn_down.bias", "ls1", "ls2", "attn_qkv.bias")
_TOP_ROLES = {"input_norm": "mm.input_norm.weight", "input_norm.bias": "mm.input_norm.bias",
              "norm_embd": "v.norm_embd.weight", "norm_embd.bias": "v.norm_embd.bias", "mm.up.bias": "mm.up.bias",
              "mm.gate.bias": "mm.gate.bias", "mm.down.bias": "mm.down.bias", "mm.post_norm.bias": "mm.post_norm.bias",
              "pre_ln": "v.pre_ln.weight", "pre_ln.bias": "v.pre_ln.bias", "post_ln": "v.post_ln.weight",
              "post_ln.bias": "v.post_ln.bias", "patch_bias": "v.patch_embd.bias", "mm.0.bias": "mm.0.bias",
              "mm.1.bias": "mm.1.bias", "mm.2.bias": "mm.2.bias", "patch_merger": "mm.patch_merger.weight"}
# clip.cpp#L2270-L2300: layer tensors build_vit would add nodes for, which these graphs do not build
_UNBUILT = ("ls1", "ls2", "ls_out", "attn_post_norm", "ffn_post_norm", "attn_q_norm", "attn_k_norm", "ffn_gate_exps",
            "attn_sinks")
# clip.cpp#L2262-L2329 requires each layer's attn_out, ffn_up and ffn_down weights; the norms' weights are optional
# there, and every graph here multiplies by them: a file without them is refused as not covered
_LAYER_WEIGHTS = ("attn_out", "ffn_up", "ffn_down")
_NORM_WEIGHTS = ("ln1", "ln2")
# tensors clip.cpp requires (get_tensor without "optional") for each projector type, with {il} per layer
_REQUIRED = {
    "qwen2vl": ("v.patch_embd.weight.1", "v.blk.{il}.attn_q.bias", "v.blk.{il}.attn_k.bias", "v.blk.{il}.attn_v.bias",
                "mm.0.weight", "mm.0.bias", "mm.2.weight", "mm.2.bias"),
    "qwen3vl": ("v.patch_embd.weight.1", "v.patch_embd.bias", "v.position_embd.weight", "v.blk.{il}.attn_qkv.weight",
                "v.blk.{il}.attn_qkv.bias", "mm.0.weight", "mm.0.bias", "mm.2.weight", "mm.2.bias"),
    "pixtral": ("v.blk.{il}.attn_q.weight", "v.blk.{il}.attn_k.weight", "v.blk.{il}.attn_v.weight", "mm.1.weight",
                "mm.2.weight", "v.token_embd.img_break"),
}
_REQUIRED["qwen25vl"] = _REQUIRED["qwen2vl"]
# llama4: every optional tensor its graph builds is there (conversion/llama4.py of Llama4VisionModel)
LLAMA4_TENSORS = frozenset({"ln1.bias", "ln2.bias", "attn_q.bias", "attn_k.bias", "attn_v.bias", "attn_out.bias",
                     "ffn_up.bias", "ffn_down.bias", "pre_ln", "pre_ln.bias", "post_ln", "post_ln.bias"})
_REQUIRED["internvl"] = ("v.class_embd", "v.position_embd.weight", "v.blk.{il}.attn_q.weight",
                         "v.blk.{il}.attn_k.weight", "v.blk.{il}.attn_v.weight", "mm.model.mlp.0.weight",
                         "mm.model.mlp.0.bias", "mm.model.mlp.1.weight", "mm.model.mlp.1.bias", "mm.model.mlp.3.weight",
                         "mm.model.mlp.3.bias")
_REQUIRED["idefics3"] = ("v.position_embd.weight", "v.blk.{il}.attn_q.weight", "v.blk.{il}.attn_k.weight",
                         "v.blk.{il}.attn_v.weight", "mm.model.fc.weight")
_REQUIRED["lfm2"] = ("v.position_embd.weight", "v.blk.{il}.attn_q.weight", "v.blk.{il}.attn_k.weight",
                     "v.blk.{il}.attn_v.weight", "mm.1.weight", "mm.1.bias", "mm.2.weight", "mm.2.bias")
_REQUIRED["minimax_m3"] = ("v.patch_embd.weight.1", "v.blk.{il}.attn_q.weight", "v.blk.{il}.attn_k.weight",
                           "v.blk.{il}.attn_v.weight", "mm.1.weight", "mm.1.bias", "mm.2.weight", "mm.2.bias",
                           "mm.merger.fc1.weight", "mm.merger.fc1.bias", "mm.merger.fc2.weight", "mm.merger.fc2.bias")
_REQUIRED["glm4v"] = ("v.patch_embd.weight.1", "v.patch_embd.bias", "v.blk.{il}.attn_qkv.weight",
                      "mm.patch_merger.weight", "mm.patch_merger.bias", "mm.model.fc.weight", "mm.up.weight",
                      "mm.gate.weight", "mm.down.weight", "mm.post_norm.weight")
_REQUIRED["kimik25"] = ("v.position_embd.weight", "v.blk.{il}.attn_qkv.weight", "mm.input_norm.weight",
                        "mm.input_norm.bias", "mm.1.weight", "mm.1.bias", "mm.2.weight", "mm.2.bias")
_REQUIRED["llama4"] = ("v.class_embd", "v.position_embd.weight", "v.blk.{il}.attn_q.weight",
                       "v.blk.{il}.attn_k.weight", "v.blk.{il}.attn_v.weight", "mm.model.mlp.1.weight",
                       "mm.model.mlp.2.weight", "mm.model.fc.weight")


def _refuse(kind: str, what: str):
    return ValueError(f"mmproj ({kind}) {what}: kvmem's transcription of its clip graph (graphs_mmproj_{kind}) "
                      "does not cover it, so its compute buffer is not computed")


def _present(kind: str, family: str, tensors: dict, n_layer: int) -> frozenset:
    """The optional tensor roles the file has (the same in every layer), after the required ones are checked."""
    required = [name.format(il=il) for name in _REQUIRED[kind]
                for il in (range(n_layer) if "{il}" in name else (0,))]
    for name in ["v.patch_embd.weight", *(f"v.blk.{il}.{r}.weight" for il in range(n_layer) for r in _LAYER_WEIGHTS),
                 *required]:
        if name not in tensors:
            raise ValueError(f"mmproj ({kind}) has no tensor {name}: clip.cpp load_tensors requires it")
    unbuilt = set(_UNBUILT) - ({"ls1", "ls2"} if kind == "internvl" else set())    # InternViT's layer scales
    for t in tensors:
        if t.startswith("v.blk.") and t.split(".")[3] in unbuilt:
            raise _refuse(family, f"tensor {t}")
    for name in (f"v.blk.{il}.{r}.weight" for il in range(n_layer) for r in _NORM_WEIGHTS):
        if name not in tensors:
            raise _refuse(family, f"a layer without {name}")
    roles = {il: frozenset(r for r in _LAYER_ROLES if f"v.blk.{il}.{r}" + ("" if "." in r else ".weight") in tensors)
             for il in range(n_layer)}
    if len(set(roles.values())) > 1:
        raise _refuse(family, "layers with different optional tensors")
    top = {role for role, name in _TOP_ROLES.items() if name in tensors}
    if kind != "lfm2":      # pixtral's mm.input_norm goes with its merger (patch_merger); no other graph reads it
        top -= {"input_norm", "input_norm.bias"}
    return frozenset(roles[0] | top)


def clip_shape_from_header(header, kind: str) -> ClipShape:
    """The ClipShape of an mmproj GGUF of projector type ``kind`` (module docstring); ValueError naming the key or
    tensor where clip.cpp would refuse the file or kvmem's graph would not be llama.cpp's."""
    meta, tensors = header.metadata, {t.name: t for t in header.tensors}
    family = "qwen" if kind.startswith("qwen") else kind

    def key(name, default=None):
        value = meta.get(f"clip.vision.{name}", default)
        if value is None:
            raise ValueError(f"mmproj GGUF has no clip.vision.{name}: clip.cpp load_hparams requires it") from None
        return int(value)

    e, n_head, n_layer, patch = (key(k) for k in ("embedding_length", "attention.head_count", "block_count",
                                                  "patch_size"))
    for extra, expected in (("attention.head_dim", e // n_head), ("attention.head_count_kv", n_head)):
        if key(extra, expected) != expected:
            raise _refuse(family, f"clip.vision.{extra} {key(extra)} (the graph has {expected})")
    n_merge = key("projector.scale_factor", 1) if kind in ("llama4", "internvl", "idefics3", "lfm2", "kimik25") \
        else key("spatial_merge_size", 2 if family in ("qwen", "minimax_m3", "glm4v") else 1)
    present = _present(kind, family, tensors, n_layer)
    if kind == "qwen3vl":       # its QKV bias is required (qwen3vl.cpp#L82 adds it unconditionally): not a role
        present -= {"attn_qkv.bias"}
    reader = {"llama4": _tiled_shape, "internvl": _tiled_shape, "idefics3": _siglip_shape, "lfm2": _siglip_shape,
              "minimax_m3": _minimax_shape, "glm4v": _glm4v_shape, "kimik25": _kimik25_shape}.get(kind)
    if reader is not None:
        return reader(kind, meta, tensors, present, (e, n_head, n_layer, patch, n_merge))
    patch_type = tensors["v.patch_embd.weight"].dtype.upper()
    if patch_type not in _FLOAT_TYPES or tensors.get("v.patch_embd.weight.1", tensors["v.patch_embd.weight"]).dtype \
            .upper() != patch_type:
        raise _refuse(family, f"v.patch_embd.weight {patch_type} (F32, F16 or BF16 kernels, both alike)")
    up = tensors["v.blk.0.ffn_up.weight"].shape
    n_ff = up[1] if up[0] == e else up[0]       # clip.cpp#L2330-L2361: legacy files swap up and down
    first, last = ("mm.0.weight", "mm.2.weight") if family == "qwen" else ("mm.1.weight", "mm.2.weight")
    n_pos_embd, n_wa = 0, 0
    deepstack: tuple[int, ...] = ()
    if kind == "qwen3vl":
        pos = tensors["v.position_embd.weight"]
        if pos.dtype.upper() != "F32":
            raise _refuse(family, f"v.position_embd.weight {pos.dtype} (ggml_interpolate takes F32 only)")
        n_pos_embd = pos.shape[1]
        deepstack = tuple(il for il in range(n_layer) if f"v.deepstack.{il}.fc1.weight" in tensors)
        if any(tensors[f"v.deepstack.{il}.fc1.weight"].shape[1] != tensors[first].shape[1] for il in deepstack):
            raise _refuse(family, "deepstack fc1 widths other than mm.0's")
    elif kind == "qwen25vl":
        n_wa = key("n_wa_pattern")
    elif kind == "qwen2vl":
        n_wa = key("n_wa_pattern", 0)
    if family == "pixtral" and "patch_merger" in present and "mm.input_norm.weight" not in tensors:
        raise ValueError("mmproj (pixtral) has mm.patch_merger.weight without mm.input_norm.weight: clip.cpp's "
                         "pixtral graph multiplies by both")
    if family == "pixtral" and "patch_merger" not in present and n_merge != 1:
        raise _refuse(family, f"clip.vision.spatial_merge_size {n_merge} without mm.patch_merger.weight")
    warmup = (qwen_warmup_size if family == "qwen" else pixtral_warmup_size)(patch, n_merge)
    return ClipShape(projector=kind, image_size=warmup, patch_size=patch, n_embd=e, n_ff=n_ff, n_layer=n_layer,
                     n_head=n_head, n_embd_text=tensors[last].shape[1], n_mm=tensors[first].shape[1],
                     n_merge=n_merge, n_wa_pattern=n_wa, n_pos_embd=n_pos_embd, deepstack=deepstack,
                     tensors=frozenset(present), patch_type=_FLOAT_TYPES[patch_type])


def _tiled_shape(kind: str, meta, tensors, present, dims) -> ClipShape:
    """The llama4 or internvl ClipShape: one image_size tile warms up; llama4's graph adds every bias and both
    outer LayerNorms (graphs_mmproj_llama4), internvl's has none of them (graphs_mmproj_internvl)."""
    e, n_head, n_layer, patch, n_merge = dims
    if kind == "llama4" and present != LLAMA4_TENSORS:
        raise _refuse(kind, f"optional tensors {sorted(present ^ LLAMA4_TENSORS)} other than Llama 4's")
    if kind == "internvl" and present & {"pre_ln", "post_ln", "ffn_gate"}:
        raise _refuse(kind, f"tensors {sorted(present & {'pre_ln', 'post_ln', 'ffn_gate'})}")
    if "clip.vision.image_size" not in meta:
        raise ValueError("mmproj GGUF has no clip.vision.image_size: clip.cpp load_hparams requires it")
    patch_type = tensors["v.patch_embd.weight"].dtype.upper()
    if patch_type not in _FLOAT_TYPES:
        raise _refuse(kind, f"v.patch_embd.weight {patch_type} (F32, F16 or BF16 kernels)")
    up = tensors["v.blk.0.ffn_up.weight"].shape
    first, mid, last = (("mm.model.mlp.1.weight", "mm.model.mlp.2.weight", "mm.model.fc.weight") if kind == "llama4"
                        else ("mm.model.mlp.1.weight", None, "mm.model.mlp.3.weight"))
    return ClipShape(projector=kind, image_size=int(meta["clip.vision.image_size"]), patch_size=patch, n_embd=e,
                     n_ff=up[1] if up[0] == e else up[0], n_layer=n_layer, n_head=n_head,
                     n_embd_text=tensors[last].shape[1], n_mm=tensors[first].shape[1], n_merge=n_merge,
                     tensors=present, patch_type=_FLOAT_TYPES[patch_type],
                     n_mm2=tensors[mid].shape[1] if mid else 0)


def _siglip_shape(kind: str, meta, tensors, present, dims) -> ClipShape:
    """The idefics3 or lfm2 ClipShape (graphs_mmproj_siglip): idefics3 warms up with image_size, lfm2 with 16 x 16
    merged tokens; the position table's rows from the file."""
    e, n_head, n_layer, patch, n_merge = dims
    if "clip.vision.image_size" not in meta:
        raise ValueError("mmproj GGUF has no clip.vision.image_size: clip.cpp load_hparams requires it")
    if n_merge <= 1:
        raise ValueError(f"mmproj ({kind}) clip.vision.projector.scale_factor {n_merge}: llama.cpp aborts its warmup "
                         "(clip.cpp#L902 build_patch_merge_permute asserts a scale factor over 1)")
    patch_type = tensors["v.patch_embd.weight"].dtype.upper()
    pos = tensors["v.position_embd.weight"]
    if patch_type not in _FLOAT_TYPES:
        raise _refuse(kind, f"v.patch_embd.weight {patch_type} (F32, F16 or BF16 kernels)")
    if kind == "lfm2" and pos.dtype.upper() != "F32":
        raise _refuse(kind, f"v.position_embd.weight {pos.dtype} (ggml_interpolate takes F32 only)")
    image = lfm2_warmup_size(patch, n_merge) if kind == "lfm2" else int(meta["clip.vision.image_size"])
    if kind == "idefics3" and (image // patch) ** 2 != pos.shape[1]:
        raise _refuse(kind, f"a {image // patch} x {image // patch} patch grid with {pos.shape[1]} learned positions")
    up = tensors["v.blk.0.ffn_up.weight"].shape
    last = "mm.model.fc.weight" if kind == "idefics3" else "mm.2.weight"
    return ClipShape(projector=kind, image_size=image, patch_size=patch, n_embd=e, n_ff=up[1] if up[0] == e else up[0],
                     n_layer=n_layer, n_head=n_head, n_embd_text=tensors[last].shape[1],
                     n_mm=tensors["mm.1.weight"].shape[1] if kind == "lfm2" else 0, n_merge=n_merge,
                     n_pos_embd=pos.shape[1], tensors=present, patch_type=_FLOAT_TYPES[patch_type])


def _minimax_shape(_kind, _meta, tensors, present, dims) -> ClipShape:
    """The minimax_m3 ClipShape (graphs_mmproj_minimax): mm.1 / mm.2 per patch, then mm.merger.fc1 / fc2."""
    e, n_head, n_layer, patch, n_merge = dims
    patch_type = tensors["v.patch_embd.weight"].dtype.upper()
    if patch_type not in _FLOAT_TYPES or tensors["v.patch_embd.weight.1"].dtype.upper() != patch_type:
        raise _refuse("minimax_m3", f"v.patch_embd.weight {patch_type} (F32, F16 or BF16 kernels, both alike)")
    if "ffn_gate" in present:
        raise _refuse("minimax_m3", "a gated FFN (v.blk.0.ffn_gate.weight)")
    text = tensors["mm.2.weight"].shape[1]
    if tensors["mm.merger.fc2.weight"].shape[1] != text:
        raise _refuse("minimax_m3", "mm.merger.fc2 rows other than mm.2's")
    up = tensors["v.blk.0.ffn_up.weight"].shape
    return ClipShape(projector="minimax_m3", image_size=minimax_m3_warmup_size(patch, n_merge), patch_size=patch,
                     n_embd=e, n_ff=up[1] if up[0] == e else up[0], n_layer=n_layer, n_head=n_head, n_embd_text=text,
                     n_mm=tensors["mm.1.weight"].shape[1], n_merge=n_merge,
                     tensors=present - {"mm.1.bias", "mm.2.bias"},      # required here: the graph always adds them
                     patch_type=_FLOAT_TYPES[patch_type], n_mm2=tensors["mm.merger.fc1.weight"].shape[1])


def _glm4v_shape(kind, _meta, tensors, present, dims) -> ClipShape:
    """The glm4v ClipShape (graphs_mmproj_glm4v): widths from the merger's conv and mm.model.fc / up / down."""
    e, n_head, n_layer, patch, n_merge = dims
    patch_type, merger = tensors["v.patch_embd.weight"].dtype.upper(), tensors["mm.patch_merger.weight"]
    if patch_type not in _FLOAT_TYPES or tensors["v.patch_embd.weight.1"].dtype.upper() != patch_type:
        raise _refuse(kind, f"v.patch_embd.weight {patch_type} (F32, F16 or BF16 kernels, both alike)")
    if merger.dtype.upper() not in _FLOAT_TYPES:
        raise _refuse(kind, f"mm.patch_merger.weight {merger.dtype} (F32, F16 or BF16)")
    pos = tensors.get("v.position_embd.weight")
    if pos is not None and pos.dtype.upper() != "F32":
        raise _refuse(kind, f"v.position_embd.weight {pos.dtype} (ggml_interpolate takes F32 only)")
    up = tensors["v.blk.0.ffn_up.weight"].shape
    return ClipShape(projector=kind, image_size=qwen_warmup_size(patch, n_merge), patch_size=patch, n_embd=e,
                     n_ff=up[1] if up[0] == e else up[0], n_layer=n_layer, n_head=n_head,
                     n_embd_text=tensors["mm.down.weight"].shape[1], n_mm=tensors["mm.model.fc.weight"].shape[1],
                     n_merge=n_merge, n_pos_embd=pos.shape[1] if pos is not None else 0,
                     tensors=present - {"patch_bias", "patch_merger"},      # required here: always nodes
                     patch_type=_FLOAT_TYPES[patch_type], n_mm2=tensors["mm.up.weight"].shape[1],
                     n_mm0=merger.shape[3], merger_type=_FLOAT_TYPES[merger.dtype.upper()])


def _kimik25_shape(kind, meta, tensors, present, dims) -> ClipShape:
    """The kimik25 ClipShape (graphs_mmproj_kimi): the warmup from the file's pixel limits, the square [e, w, h]
    position table's side in n_pos_embd."""
    e, n_head, n_layer, patch, n_merge = dims
    patch_type, pos = tensors["v.patch_embd.weight"].dtype.upper(), tensors["v.position_embd.weight"]
    if patch_type not in _FLOAT_TYPES:
        raise _refuse(kind, f"v.patch_embd.weight {patch_type} (F32, F16 or BF16 kernels)")
    if n_merge <= 1:
        raise ValueError(f"mmproj ({kind}) clip.vision.projector.scale_factor {n_merge}: llama.cpp aborts its warmup "
                         "(clip.cpp#L902 build_patch_merge_permute asserts a scale factor over 1)")
    if len(pos.shape) < 3 or pos.shape[1] != pos.shape[2] or pos.dtype.upper() != "F32":
        raise _refuse(kind, f"v.position_embd.weight {pos.dtype} {tuple(pos.shape)} (a square F32 [e, w, h] table)")
    limits = [int(meta.get(f"clip.vision.image_{b}_pixels", 0)) for b in ("min", "max")]
    up = tensors["v.blk.0.ffn_up.weight"].shape
    return ClipShape(projector=kind, image_size=kimik25_warmup_size(patch, n_merge, limits[1] if all(limits) else 0),
                     patch_size=patch, n_embd=e, n_ff=up[1] if up[0] == e else up[0], n_layer=n_layer, n_head=n_head,
                     n_embd_text=tensors["mm.2.weight"].shape[1], n_mm=tensors["mm.1.weight"].shape[1],
                     n_merge=n_merge, n_pos_embd=pos.shape[1], tensors=present - {"mm.1.bias", "mm.2.bias"},
                     patch_type=_FLOAT_TYPES[patch_type])

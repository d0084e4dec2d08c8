"""llama.cpp's multimodal projector (mtmd / clip) compute buffer, node by node: the "reserve_compute_meta: CPU
compute buffer size" line mtmd prints when it loads an mmproj GGUF. Gemma 3's SigLIP tower is built here; the
others from the shape mmproj_shape_from_header reads (graphs_mmproj_vit.ClipShape): the Qwen-VL towers
(clip.projector_type qwen2vl_merger, qwen2.5vl_merger, qwen3vl_merger) in graphs_mmproj_qwen, pixtral in
graphs_mmproj_pixtral, gemma4v in graphs_mmproj_gemma4, llama4 in graphs_mmproj_llama4, internvl in
graphs_mmproj_internvl, idefics3 and lfm2 in graphs_mmproj_siglip, minimax_m3 in graphs_mmproj_minimax, glm4v
in graphs_mmproj_glm4v, kimik25 in graphs_mmproj_kimi. Any other projector type, and an mmproj with an audio
encoder, is refused by name (its graph is not transcribed).

Transcribed from the vendored llama.cpp (llama-cpp-python 0.3.36, llama.cpp 0c1e57098), tools/mtmd/:

    clip.cpp#L3700-L3722 get_dummy_batch / warmup: one image of warmup_image_size (the GGUF's image_size,
        clip.cpp#L1373) reserved with flash attention when the backend supports it (AUTO: the CPU does),
        else without; #L3805-L3818 reserve_compute_meta: ggml_backend_sched_reserve of that graph, the
        buffer printed per backend ("%8.2f MiB");
    clip.cpp#L572-L582 build_inp: the f32 image input, ggml_conv_2d of the patch kernel (ggml.c#L4762-L4784:
        im2col to F16, or F32 for a BF16 kernel, a mul_mat, a permute made contiguous), reshaped,
        transposed and made contiguous, plus the patch bias;
    clip.cpp#L337-L570 build_vit: the learned position embeddings added, per layer LayerNorm (ggml_norm,
        weight, bias), Q / K / V with biases reshaped to heads, build_attn (#L750-L822: Q, K, V ordered;
        flash attention over permuted Q, K and V cast to F16; without it V permuted (1, 2, 0, 3) and made
        contiguous, KQ, softmax, KQV, permuted and made contiguous), the output projection and bias, the
        residual, LayerNorm, build_ffn (up + bias, GELU, down + bias), the residual; the post LayerNorm;
    models/siglip.cpp#L3-L40 (PROJECTOR_TYPE_GEMMA3): the patches transposed and made contiguous as an
        image, a 2-D average pool of n_merge (4: clip.cpp#L1634-L1641, the GGUF's
        projector.scale_factor otherwise), transposed back and made contiguous, RMS-normed, scaled by
        mm.soft_emb_norm, and projected by the transposed mm.input_projection made contiguous (the
        projection weight copied into the compute buffer).

ggml-alloc then sizes the buffer as for the text graphs (kvmem.engines.llamacpp.ggml_alloc; CPU alignment 32).
Judged by llama.cpp itself: tests/oracles/test_llamacpp_mmproj_oracle.py (mtmd_init_from_file on sparse
mmproj GGUFs: random SigLIP shapes and Gemma 3's own).

Where the buffers live (``clip_compute_buffers``), clip.cpp#L181-L222 clip_ctx: the clip backend is the
mmproj device (llama-server: -mmdev, else the first of --device, common/arg.cpp#L889-L893), else the first
GPU (ggml_backend_init_by_type GPU); --no-mmproj-offload (use_gpu false) keeps it on the CPU. The scheduler
gets that backend and the CPU's, so with a GPU two buffers are reserved and printed (#L3810-L3819): the
image input on the CPU (a graph input: ggml_backend_sched's last backend) and on the GPU every node plus the
input's copy, scheduled as kvmem.engines.llamacpp.ggml_sched does the text graphs (CUDA alignment 128). A
published CUDA log of Gemma 3's mmproj (llama.cpp PR #22790) prints "CUDA0 compute buffer size = 121.25 MiB",
"CPU compute buffer size = 9.19 MiB", graph splits 1: these functions give 127,139,840 and 9,633,792 B (and
gpustack/gguf-parser-go issue #44 measured 121 MiB, 1132 with -fa off, on ROCm: 1,186,988,032 B here).
Flash attention "auto" stays on where the backend runs FLASH_ATTN_EXT (warmup, #L3737-L3770): the CPU
always; CUDA for the head sizes CUDA_FA_HEAD_SIZES. Elsewhere (CUDA with another head size) mtmd reserves
twice and keeps the larger of each buffer: not computed here, said so by a ValueError.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...units import pad
from .ggml_alloc import gallocr_size
from .ggml_graph import Graph
from .ggml_sched import sched_sizes
from .graphs_mmproj_gemma4 import build_gemma4v_mmproj, gemma4v_shape_from_config
from .graphs_mmproj_glm4v import build_glm4v_mmproj
from .graphs_mmproj_internvl import build_internvl_mmproj
from .graphs_mmproj_kimi import build_kimik25_mmproj
from .graphs_mmproj_llama4 import build_llama4_mmproj
from .graphs_mmproj_minimax import build_minimax_m3_mmproj
from .graphs_mmproj_pixtral import build_pixtral_mmproj
from .graphs_mmproj_qwen import QWEN_PROJECTORS, build_qwen_mmproj
from .graphs_mmproj_siglip import build_siglip_mmproj
from .graphs_mmproj_vit import ClipShape

__all__ = ["MmprojShape", "mmproj_shape", "mmproj_shape_from_header", "build_gemma3_mmproj", "build_mmproj",
           "mmproj_compute_bytes", "clip_compute_buffers", "mmproj_weight_bytes", "clip_log_lines",
           "CUDA_FA_HEAD_SIZES", "PROJECTORS"]

# ggml-cuda/fattn.cu#L576-L627 ggml_cuda_get_best_fattn_kernel: CUDA's FLASH_ATTN_EXT takes these K head sizes
# with V's equal; 192, 320, 512 and 576 need a mask (gqa_opt_applies), which the vision tower's attention has not
CUDA_FA_HEAD_SIZES = frozenset({40, 64, 72, 80, 96, 112, 128, 256})
_FLOAT_TYPES = {"F32": "f32", "F16": "f16", "BF16": "bf16"}
# clip.projector_type (the GGUF's string, clip-impl.h#L500-L540 PROJECTOR_TYPE_NAMES) -> the graph kvmem builds
PROJECTORS = {"gemma3": "gemma3", "qwen2vl_merger": "qwen2vl", "qwen2.5vl_merger": "qwen25vl",
              "qwen3vl_merger": "qwen3vl", "pixtral": "pixtral", "gemma4v": "gemma4v", "llama4": "llama4",
              "internvl": "internvl", "idefics3": "idefics3", "lfm2": "lfm2", "minimax_m3": "minimax_m3",
              "glm4v": "glm4v", "kimik25": "kimik25"}


@dataclass(frozen=True)
class MmprojShape:
    """Gemma 3's SigLIP tower and projector as the mmproj GGUF describes them (clip.vision.*)."""

    image_size: int
    patch_size: int
    n_embd: int
    n_ff: int
    n_layer: int
    n_head: int
    n_embd_text: int        # clip.vision.projection_dim: the text model's hidden size
    n_merge: int = 4        # projector.scale_factor: patches per side pooled into one token
    patch_type: str = "f16"     # the patch kernel's type (im2col writes F16, or F32 for a BF16 kernel)
    proj_type: str = "f16"      # mm.input_projection's type (conversion/gemma.py: always F16)


def mmproj_shape(model) -> MmprojShape | ClipShape | None:
    """The projector convert_hf_to_gguf would write for ``model``'s config: Gemma 3 (model_type gemma3 with a
    siglip vision_config), Gemma 4 (graphs_mmproj_gemma4), the Qwen-VL and Pixtral configs
    graphs_mmproj_config.clip_shape_from_config reads; None for any other config."""
    from .graphs_mmproj_config import CONFIG_PROJECTORS
    cfg = model.config or {}
    vision, text = cfg.get("vision_config"), cfg.get("text_config")
    if cfg.get("model_type") not in CONFIG_PROJECTORS:      # the list a refusal names (offload.mmproj_memory)
        return None
    if cfg.get("model_type") != "gemma3":
        from .graphs_mmproj_config import clip_shape_from_config
        text = text if isinstance(text, dict) else {}
        n_embd_text = text.get("hidden_size") or cfg.get("hidden_size") or model.hidden_size
        if cfg.get("model_type") == "gemma4":
            return gemma4v_shape_from_config(cfg, n_embd_text)
        return clip_shape_from_config(cfg, n_embd_text)
    if not isinstance(vision, dict) or not isinstance(text, dict):
        return None
    image, patch = vision.get("image_size"), vision.get("patch_size")
    tokens = cfg.get("mm_tokens_per_image", 256)
    if not image or not patch:
        return None
    side = image // patch
    # conversion/gemma.py Gemma3VisionModel: scale factor = patches per side / tokens per side
    return MmprojShape(image_size=image, patch_size=patch, n_embd=vision["hidden_size"],
                       n_ff=vision["intermediate_size"], n_layer=vision["num_hidden_layers"],
                       n_head=vision["num_attention_heads"], n_embd_text=text.get("hidden_size") or model.hidden_size,
                       n_merge=side // int(tokens ** 0.5))


def _layer_norm(g: Graph, x, n_embd: int):
    """clip_graph::build_norm, NORM_TYPE_NORMAL: ggml_norm, ggml_mul by the weight, ggml_add of the bias."""
    return g.dup("ADD", g.dup("MUL", g.dup("NORM", x), g.weight(n_embd)), g.weight(n_embd))


def build_gemma3_mmproj(s: MmprojShape, flash_attn: bool) -> Graph:
    """The warmup graph (module docstring) of one image of ``s.image_size`` pixels a side."""
    g = Graph()
    e, side = s.n_embd, s.image_size // s.patch_size
    n_pos, d_head = side * side, s.n_embd // s.n_head
    # build_inp: ggml_conv_2d(patch kernel, image)
    image = g.input("f32", s.image_size, s.image_size, 3, 1)
    kernel = g.weight(s.patch_size, s.patch_size, 3, e, type_=s.patch_type)
    im2col = g.op("IM2COL", "f32" if s.patch_type == "bf16" else "f16", (3 * s.patch_size ** 2, side, side, 1),
                  kernel, image)
    conv = g.mul_mat(g.reshape(im2col, im2col.ne[0], side * side), g.reshape(kernel, 3 * s.patch_size ** 2, e))
    conv = g.cont(g.permute(g.reshape(conv, side, side, 1, e), 0, 1, 3, 2))
    inp = g.cont(g.transpose(g.reshape(conv, n_pos, e, 1)))
    inp = g.dup("ADD", inp, g.weight(e))
    # build_vit
    inp_l = g.reshape(g.dup("ADD", inp, g.weight(e, n_pos)), e, n_pos)
    for _ in range(s.n_layer):
        cur = _layer_norm(g, inp_l, e)
        q, k, v = (g.reshape(g.dup("ADD", g.mul_mat(g.weight(e, e), cur), g.weight(e)), d_head, s.n_head, n_pos, 1)
                   for _ in range(3))
        for t in (q, k, v):
            g.expand(t)
        qp, kp = g.permute(q, 0, 2, 1, 3), g.permute(k, 0, 2, 1, 3)
        if flash_attn:
            vp = g.permute(v, 0, 2, 1, 3)
            out = g.flash_attn_ext(qp, g.cast(kp, "f16"), g.cast(vp, "f16"), None)
            out = g.reshape(out, out.ne[0] * out.ne[1], out.ne[2] * out.ne[3])
        else:
            vp = g.cont(g.permute(v, 1, 2, 0, 3))
            kq = g.dup("SOFT_MAX", g.mul_mat(kp, qp))
            out = g.permute(g.mul_mat(vp, kq), 0, 2, 1, 3)
            out = g.cont(out, out.ne[0] * out.ne[1], out.ne[2] * out.ne[3])
        cur = g.dup("ADD", g.mul_mat(g.weight(e, e), out), g.weight(e))
        inp_l = g.dup("ADD", cur, inp_l)
        cur = _layer_norm(g, inp_l, e)
        cur = g.dup("ADD", g.mul_mat(g.weight(e, s.n_ff), cur), g.weight(s.n_ff))
        cur = g.dup("ADD", g.mul_mat(g.weight(s.n_ff, e), g.dup("UNARY", cur)), g.weight(e))
        inp_l = g.dup("ADD", inp_l, cur)
    inp_l = g.reshape(_layer_norm(g, inp_l, e), e, n_pos, 1)
    # models/siglip.cpp, PROJECTOR_TYPE_GEMMA3
    cur = g.cont(g.transpose(inp_l), side, side, e, 1)
    pooled = (side - s.n_merge) // s.n_merge + 1
    cur = g.op("POOL_2D", "f32", (pooled, pooled, e, 1), cur)
    cur = g.cont(g.transpose(g.reshape(cur, pooled * pooled, e, 1)))
    cur = g.dup("MUL", g.dup("RMS_NORM", cur), g.weight(e))
    proj = g.cont(g.transpose(g.weight(s.n_embd_text, e, type_=s.proj_type)))
    g.expand(g.mul_mat(proj, cur))
    return g


def build_mmproj(shape: MmprojShape | ClipShape, flash_attn: bool) -> Graph:
    """The warmup graph of ``shape``'s projector (clip.cpp#L932-L1090 clip_get_graph_builder by projector type)."""
    if isinstance(shape, MmprojShape):
        return build_gemma3_mmproj(shape, flash_attn)
    if shape.projector in QWEN_PROJECTORS:
        return build_qwen_mmproj(shape, flash_attn)
    if shape.projector == "gemma4v":
        return build_gemma4v_mmproj(shape, flash_attn)
    if shape.projector == "llama4":
        return build_llama4_mmproj(shape, flash_attn)
    if shape.projector == "internvl":
        return build_internvl_mmproj(shape, flash_attn)
    if shape.projector in ("idefics3", "lfm2"):
        return build_siglip_mmproj(shape, flash_attn)
    if shape.projector == "minimax_m3":
        return build_minimax_m3_mmproj(shape, flash_attn)
    if shape.projector == "glm4v":
        return build_glm4v_mmproj(shape, flash_attn)
    if shape.projector == "kimik25":
        return build_kimik25_mmproj(shape, flash_attn)
    return build_pixtral_mmproj(shape, flash_attn)


def mmproj_compute_bytes(shape: MmprojShape | ClipShape, *, flash_attn: bool = True, alignment: int = 32) -> int:
    """The compute buffer mtmd reserves for ``shape``'s warmup image (flash attention: the CPU's AUTO)."""
    return gallocr_size(build_mmproj(shape, flash_attn), alignment)


def mmproj_shape_from_header(header) -> MmprojShape | ClipShape:
    """The projector of an mmproj GGUF header (kvmem.sources.gguf.read_header): clip.projector_type "gemma3"
    with its clip.vision.* keys (clip.cpp load_hparams; projector.scale_factor 4 when absent, #L1634-L1641),
    or one of PROJECTORS (graphs_mmproj_header.clip_shape_from_header). Any other projector: ValueError naming
    it (its graph is not transcribed here)."""
    meta = header.metadata
    kind = meta.get("clip.projector_type") or meta.get("clip.vision.projector_type")
    if meta.get("clip.has_audio_encoder"):      # mtmd.cpp builds an audio clip context beside the vision one
        raise ValueError(f"mmproj ({kind}) has an audio encoder (clip.has_audio_encoder): its compute buffers are "
                         "not transcribed, so the projector's compute buffer is not computed")
    if kind == "gemma4v":
        from .graphs_mmproj_gemma4 import gemma4v_shape_from_header
        return gemma4v_shape_from_header(header)
    if kind in PROJECTORS and kind != "gemma3":
        from .graphs_mmproj_header import clip_shape_from_header
        return clip_shape_from_header(header, PROJECTORS[kind])
    if kind != "gemma3":
        raise ValueError(f"mmproj projector_type {kind!r}: kvmem transcribes the clip graphs of "
                         f"{', '.join(PROJECTORS)} only (graphs_mmproj*), so its compute buffer is not computed")
    types = {t.name: t.dtype.upper() for t in header.tensors}
    patch, proj = types.get("v.patch_embd.weight"), types.get("mm.input_projection.weight")
    if patch not in _FLOAT_TYPES or proj not in _FLOAT_TYPES:
        raise ValueError(f"mmproj v.patch_embd.weight {patch} / mm.input_projection.weight {proj}: the graph is "
                         "transcribed for F32, F16 or BF16 ones only, so its compute buffer is not computed")
    try:
        return MmprojShape(image_size=int(meta["clip.vision.image_size"]),
                           patch_size=int(meta["clip.vision.patch_size"]),
                           n_embd=int(meta["clip.vision.embedding_length"]),
                           n_ff=int(meta["clip.vision.feed_forward_length"]),
                           n_layer=int(meta["clip.vision.block_count"]),
                           n_head=int(meta["clip.vision.attention.head_count"]),
                           n_embd_text=int(meta["clip.vision.projection_dim"]),
                           n_merge=int(meta.get("clip.vision.projector.scale_factor", 4)),
                           patch_type=_FLOAT_TYPES[patch], proj_type=_FLOAT_TYPES[proj])
    except KeyError as exc:
        raise ValueError(f"mmproj GGUF has no {exc.args[0]}: clip.cpp load_hparams requires it") from None


def mmproj_weight_bytes(header, *, offload: bool) -> int:
    """The projector's weight buffer (clip.cpp#L3642-L3644 ggml_backend_alloc_ctx_tensors_from_buft in the clip
    backend's buffer type): each tensor padded to CUDA's 128 B with its quantised-row padding
    (placement.cuda_alloc_bytes), or, on the CPU, to 32 B."""
    from .placed import PlacedTensor
    from .placement import cuda_alloc_bytes
    if offload:
        return sum(cuda_alloc_bytes(PlacedTensor(t.name, t.dtype.upper(), tuple(t.shape), t.nbytes, 0, "mmproj", None,
                                                 "CUDA0")) for t in header.tensors)
    return sum(pad(t.nbytes, 32) for t in header.tensors)


def clip_compute_buffers(shape: MmprojShape | ClipShape, *, gpu: str | None, flash_attn=None) -> dict:
    """The compute buffers mtmd reserves for ``shape`` (module doc), buffer -> bytes: {gpu: ..., "CPU": ...}
    with the clip backend on ``gpu`` (a device name, "CUDA0"), {"CPU": ...} without (--no-mmproj-offload).
    ``flash_attn``: llama-server's -fa, passed to mtmd (server-context.cpp#L1033): True/"on", False/"off",
    None/"auto". ValueError where the buffers are not computed (CUDA's flash attention without this head size; a
    GPU op the scheduler emulation would have to move to the CPU)."""
    words = {"on": True, "off": False, "auto": None, "enabled": True, "disabled": False}
    fa = words.get(flash_attn.strip().lower(), flash_attn) if isinstance(flash_attn, str) else flash_attn
    if fa is not None and not isinstance(fa, bool):
        raise ValueError(f"flash_attn must be True/'on', False/'off', 'auto' or None, got {flash_attn!r}")
    if gpu is None:
        return {"CPU": mmproj_compute_bytes(shape, flash_attn=fa is not False)}
    head = shape.n_embd // shape.n_head
    if fa is not False and head not in CUDA_FA_HEAD_SIZES:
        raise ValueError(f"the vision tower's head size {head} is not one CUDA's flash attention takes "
                         f"({', '.join(map(str, sorted(CUDA_FA_HEAD_SIZES)))}): mtmd "
                         + ("runs it on the CPU" if fa else "reserves with and without it")
                         + ", not computed by kvmem (give flash_attn='off' to size it without)")
    if isinstance(shape, ClipShape) and shape.has("patch_merger"):
        # ggml-cuda.cu#L5541-L5544 supports_op: IM2COL wants contiguous sources, and pixtral.cpp#L41-L42's merger
        # kernel is a strided view, so ggml_backend_sched runs that im2col on the CPU between two GPU splits
        raise ValueError("Pixtral's patch merger (mm.patch_merger: Mistral Small 3.x) runs its im2col on the CPU "
                         "(CUDA takes contiguous im2col sources only), a split kvmem's scheduler emulation does not "
                         f"make: its {gpu} buffers are not computed (with --no-mmproj-offload its CPU buffer is)")
    on_gpu, on_host = sched_sizes(build_mmproj(shape, fa is not False), lambda _t, _e: 0, 1)
    return {gpu: on_gpu, "CPU": on_host}


def clip_log_lines(compute: dict, model_size: int) -> list[str]:
    """The lines mtmd prints for these buffers: clip.cpp#L2125 "load_hparams: model size: %.2f MiB" (the
    tensors' ggml_nbytes, unpadded) and #L3813-L3817 one "reserve_compute_meta: %10s compute buffer size =
    %8.2f MiB" per buffer type over 1 byte (the GPU's, then "CPU")."""
    lines = [f"load_hparams: model size:         {model_size / 1048576.0:.2f} MiB"]
    lines += [f"reserve_compute_meta: {device:>10} compute buffer size = {nbytes / 1048576.0:8.2f} MiB"
              for device, nbytes in compute.items() if nbytes > 1]
    return lines

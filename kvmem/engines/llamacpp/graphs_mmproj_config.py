"""The ClipShape (graphs_mmproj_vit) convert_hf_to_gguf's mmproj of a Hugging Face config would have, for the
projectors kvmem builds from a config (the sizing option mmproj given as bytes): Qwen2-VL, Qwen2.5-VL, Qwen3-VL,
Qwen3.5, Mistral 3 / Pixtral, Llama 4 and MiniMax-M3 (Gemma 3's and Gemma 4's are in graphs_mmproj and
graphs_mmproj_gemma4). The optional tensors each conversion writes are named here with their source."""

from __future__ import annotations

from .graphs_mmproj_header import LLAMA4_TENSORS
from .graphs_mmproj_minimax import minimax_m3_warmup_size
from .graphs_mmproj_pixtral import pixtral_warmup_size
from .graphs_mmproj_qwen import qwen_warmup_size
from .graphs_mmproj_vit import ClipShape

__all__ = ["CONFIG_PROJECTORS", "clip_shape_from_config", "config_projector_names"]


# the mmproj tensors convert_hf_to_gguf writes for each projector (conversion/qwenvl.py Qwen2VLVisionModel,
# conversion/qwen3vl.py Qwen3VLVisionModel, conversion/llava.py LlavaVisionModel; the HF modules they map)
_CONVERTED = {
    "qwen2vl": frozenset({"ln1.bias", "ln2.bias", "attn_q.bias", "attn_k.bias", "attn_v.bias", "attn_out.bias",
                          "ffn_up.bias", "ffn_down.bias", "post_ln", "post_ln.bias", "mm.0.bias", "mm.2.bias"}),
    "qwen25vl": frozenset({"attn_q.bias", "attn_k.bias", "attn_v.bias", "attn_out.bias", "ffn_up.bias", "ffn_gate",
                           "ffn_gate.bias", "ffn_down.bias", "post_ln", "mm.0.bias", "mm.2.bias"}),
    "qwen3vl": frozenset({"ln1.bias", "ln2.bias", "attn_out.bias", "ffn_up.bias", "ffn_down.bias", "post_ln",
                          "post_ln.bias", "mm.0.bias", "mm.2.bias", "patch_bias"}),
    "pixtral": frozenset({"pre_ln", "ffn_gate"}),
}
# MiniMax-M3's CLIP tower: LayerNorms, attention and MLP with biases, the pre LayerNorm (no post one)
_MINIMAX = frozenset({"ln1.bias", "ln2.bias", "attn_q.bias", "attn_k.bias", "attn_v.bias", "attn_out.bias",
                      "ffn_up.bias", "ffn_down.bias", "pre_ln", "pre_ln.bias"})
_QWEN_CONFIGS = {"qwen2_vl": "qwen2vl", "qwen2_5_vl": "qwen25vl", "qwen3_vl": "qwen3vl", "qwen3_vl_moe": "qwen3vl",
                 "qwen3_5": "qwen3vl", "qwen3_5_moe": "qwen3vl"}
# every config (model_type) whose projector kvmem builds from config.json alone, with the name said for it: the
# Qwen-VL ones, Mistral 3 / Llava with a pixtral tower, Llama 4, MiniMax-M3 (here), Gemma 3 and Gemma 4
# (graphs_mmproj.mmproj_shape, which returns None for any model_type not listed)
CONFIG_PROJECTORS = {"gemma3": "Gemma 3", "gemma4": "Gemma 4", "qwen2_vl": "Qwen2-VL", "qwen2_5_vl": "Qwen2.5-VL",
                     "qwen3_vl": "Qwen3-VL", "qwen3_vl_moe": "Qwen3-VL", "qwen3_5": "Qwen3.5", "qwen3_5_moe": "Qwen3.5",
                     "mistral3": "Mistral 3 / Pixtral", "llava": "Llava / Pixtral", "llama4": "Llama 4",
                     "minimax_m3_vl": "MiniMax-M3"}


def config_projector_names() -> str:
    """CONFIG_PROJECTORS as a message lists them: each name once, in order."""
    return ", ".join(dict.fromkeys(CONFIG_PROJECTORS.values()))


def clip_shape_from_config(cfg: dict, n_embd_text: int) -> ClipShape | None:
    """The ClipShape convert_hf_to_gguf's mmproj of an HF config would have (Qwen2-VL, Qwen2.5-VL, Qwen3-VL,
    Qwen3.5: vision_config; Mistral 3 and Llava with a pixtral vision_config; Llama 4: conversion/llama4.py,
    scale factor 1 / pixel_shuffle_ratio), or None for any other config.
    ``n_embd_text``: the text model's hidden size (MmprojModel's projection_dim)."""
    vision, model_type = cfg.get("vision_config"), cfg.get("model_type")
    if not isinstance(vision, dict):
        return None
    if model_type in _QWEN_CONFIGS:
        kind = _QWEN_CONFIGS[model_type]
        e = vision.get("embed_dim") or vision["hidden_size"]          # qwen2vl: embed_dim, mlp_ratio
        n_ff = e * vision.get("mlp_ratio", 4) if "embed_dim" in vision else vision["intermediate_size"]
        patch, merge = vision.get("patch_size", 14), vision.get("spatial_merge_size", 2)
        text = vision.get("out_hidden_size") or (vision["hidden_size"] if "embed_dim" in vision else n_embd_text)
        full = vision.get("fullatt_block_indexes", (7, 15, 23, 31)) if kind == "qwen25vl" else ()
        deep = vision.get("deepstack_visual_indexes", (8, 16, 24)) if model_type.startswith("qwen3_vl") else ()
        return ClipShape(projector=kind, image_size=qwen_warmup_size(patch, merge), patch_size=patch, n_embd=e,
                         n_ff=n_ff, n_layer=vision["depth"], n_head=vision["num_heads"], n_embd_text=text,
                         n_mm=e * merge * merge, n_merge=merge, n_wa_pattern=full[0] + 1 if full else 0,
                         n_pos_embd=vision.get("num_position_embeddings", 2304) if kind == "qwen3vl" else 0,
                         deepstack=tuple(deep), tensors=_CONVERTED[kind])
    if vision.get("model_type") == "pixtral" and model_type in ("mistral3", "llava"):
        merge = cfg.get("spatial_merge_size", 2) if model_type == "mistral3" else 1
        bias = cfg.get("multimodal_projector_bias", model_type == "llava")     # Mistral3Config / LlavaConfig
        tensors = _CONVERTED["pixtral"] | ({"mm.1.bias", "mm.2.bias"} if bias else set()) \
            | ({"patch_merger"} if model_type == "mistral3" else set())
        patch = vision.get("patch_size", 16)
        return ClipShape(projector="pixtral", image_size=pixtral_warmup_size(patch, merge), patch_size=patch,
                         n_embd=vision["hidden_size"], n_ff=vision["intermediate_size"],
                         n_layer=vision["num_hidden_layers"], n_head=vision["num_attention_heads"],
                         n_embd_text=n_embd_text, n_mm=n_embd_text, n_merge=merge, tensors=tensors)
    if model_type == "minimax_m3_vl":       # conversion/minimax.py MiniMaxM3VisionModel; MiniMaxM3VLMultiModalProjector
        merge = (vision.get("img_token_compression_config") or {}).get("spatial_merge_size", 2)
        patch = vision["patch_size"]
        return ClipShape(projector="minimax_m3", image_size=minimax_m3_warmup_size(patch, merge), patch_size=patch,
                         n_embd=vision["hidden_size"], n_ff=vision["intermediate_size"],
                         n_layer=vision["num_hidden_layers"], n_head=vision["num_attention_heads"],
                         n_embd_text=n_embd_text, n_mm=cfg.get("projector_hidden_size", 6144), n_merge=merge,
                         tensors=_MINIMAX, n_mm2=cfg.get("projector_hidden_size", 6144))
    if vision.get("model_type") == "llama4_vision_model" and model_type == "llama4":
        return ClipShape(projector="llama4", image_size=vision["image_size"], patch_size=vision["patch_size"],
                         n_embd=vision["hidden_size"], n_ff=vision["intermediate_size"],
                         n_layer=vision["num_hidden_layers"], n_head=vision["num_attention_heads"],
                         n_embd_text=n_embd_text, n_mm=vision["projector_input_dim"],
                         n_merge=round(1 / vision["pixel_shuffle_ratio"]), tensors=LLAMA4_TENSORS,
                         n_mm2=vision["projector_output_dim"])
    return None

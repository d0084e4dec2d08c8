"""GGUF metadata -> config.json fields for the llama.cpp 0c1e57098 architectures whose attention shape differs per
layer (split from kvmem/sources/gguf_more.py for length), each read as src/models/<arch>.cpp load_arch_hparams
and the shared loader read it, as the Hugging Face config fields kvmem.configs reads:

    deci      Nemotron-NAS / DeciLM (conversion/deci.py): per-layer head_count, head_count_kv and
              feed_forward_length as block_configs (no-op and linear-replaced attention where head_count_kv is 0)
"""

from __future__ import annotations

from . import SourceError

__all__ = ["LAYERED_MODEL_TYPES", "PER_LAYER_HEADS", "PER_LAYER_KV", "layered_fields"]

# llama.cpp arch (src/llama-arch.cpp LLM_ARCH_NAMES) -> the model_type kvmem.configs reads
LAYERED_MODEL_TYPES = {"deci": "nemotron-nas"}
# architectures whose head_count / head_count_kv gguf_config takes per layer (the widest as the model's count; the
# per-layer shapes are set here)
PER_LAYER_HEADS = ("laguna", "deci")
PER_LAYER_KV = ("deci",)


def _per_layer(value, trunk: int) -> list:
    return list(value[:trunk]) if isinstance(value, list) else [value] * trunk


def layered_fields(arch: str, cfg: dict, key, trunk: int) -> None:
    """Add the fields of ``arch`` (one of LAYERED_MODEL_TYPES) to ``cfg``."""
    if arch == "deci":
        _deci(cfg, key, trunk)


def _deci(cfg: dict, key, trunk: int) -> None:
    """DeciLM / Nemotron-NAS as configuration_decilm.py's block_configs. conversion/deci.py DeciModel L35-L80,
    L104-L120 writes per layer: head_count_kv = num_attention_heads // n_heads_in_group and head_count
    num_attention_heads for an attention block; 0 and num_attention_heads where it is replace_with_linear; 0 and 0
    for a no-op one; feed_forward_length the FFN's width (0: no FFN). DeciLM-7B writes head_count once and
    head_count_kv per layer (num_key_value_heads_per_layer). src/models/deci.cpp#L36-L46 builds attention where
    n_head_kv > 0, a linear map where n_head_kv == 0 < n_head, nothing where both are 0; the KV cache gives every
    layer its K and V tensors (0 wide where n_head_kv is 0: kvmem.engines.llamacpp.families.ZERO_WIDTH_LAYERS)."""
    heads = _per_layer(key("attention.head_count"), trunk)
    kv = _per_layer(key("attention.head_count_kv"), trunk)
    ffn = _per_layer(key("feed_forward_length"), trunk)
    blocks = []
    for i, (h, k, f) in enumerate(zip(heads, kv, ffn, strict=True)):
        if k and (not h or h % k):
            raise SourceError(f"GGUF deci.attention.head_count_kv[{i}] is {k}, which does not divide head_count[{i}] "
                              f"({h}): Nemotron-NAS groups num_attention_heads // n_heads_in_group query heads per "
                              "K/V head")
        if k:
            attention = {"n_heads_in_group": h // k, "no_op": False, "replace_with_linear": False}
        else:
            attention = {"n_heads_in_group": None, "no_op": not h, "replace_with_linear": bool(h)}
        blocks.append({"attention": attention,
                       "ffn": {"intermediate_size": f, "no_op": False} if f else {"no_op": True}})
    cfg["block_configs"] = blocks
    cfg.pop("intermediate_size", None)      # the blocks' own widths; the model has none (Nemotron-Super: null)
    cfg["head_dim"] = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]

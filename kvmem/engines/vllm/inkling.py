"""Inkling (inkling_text) as vLLM 0.33.0 builds it: vllm/models/inkling.

vLLM reads an Inkling checkpoint through its own config classes (vllm/transformers_utils/config.py#L174-L175:
inkling_mm_model -> InklingMMConfig, whose text_config is an InklingModelConfig, vllm/models/inkling/configs.py),
and builds per decoder layer (nvidia/model.py InklingDecoderLayer #L126-L200):
    attention   a FullAttentionSpec of num_key_value_heads x head_dim, or on the layers in local_layer_ids a
                SlidingWindowSpec of swa_num_key_value_heads x swa_head_dim and window sliding_window_size
                (nvidia/attention.py#L183-L199), the cache dtype's, kv heads max(1, heads // tp)
    conv state  one SlidingWindowSpec for its four short convolutions (K, V, attention and MLP outputs), packed
                head-major: block_size = sliding_window = sconv_kernel_size, num_kv_heads = the layer's KV heads
                // tp, head_size the next power of two of 2 x head_dim + 2 x (hidden_size // KV heads), no V,
                in the model dtype (bfloat16 only) (nvidia/sconv_swa_attn.py#L121-L193 InklingConvState)
local_layer_ids is read as given (none: every layer full); transformers' layer_types is not; swa_* fields the file
omits are the full layers' (configs.py#L70-L81), as vLLM derives them. A file without a model-wide field whose
default differs between vLLM's InklingModelConfig and transformers' InklingTextConfig is refused.
"""

from __future__ import annotations

from ...layer import FULL, SLIDING, Layer
from ...model import Model
from ...parallel import divides
from .pages import PageSpec

__all__ = ["INKLING_TYPES", "inkling_layers", "sconv_spec"]

INKLING_TYPES = ("inkling_text",)

# vllm@v0.33.0 vllm/models/inkling/configs.py#L18-L84 InklingModelConfig.__init__ defaults, and transformers
# 5.24 configuration_inkling.py InklingTextConfig's, for the fields that shape the cache (None: derived)
_DEFAULTS = {  # name: (vLLM's, transformers')
    "hidden_size": (1536, 6144), "num_hidden_layers": (16, 66), "num_attention_heads": (12, 64),
    "num_key_value_heads": (4, 8), "head_dim": (None, 128), "sliding_window_size": (512, 512),
    "local_layer_ids": (None, None),
}
_DERIVED = ("swa_num_attention_heads", "swa_num_key_value_heads", "swa_head_dim")   # None: the full layers' value


def _text(model: Model) -> dict:
    """The text model's fields: the wrapper's text_config (vLLM's InklingMMConfig reads it alone)."""
    cfg = model.config or {}
    return cfg["text_config"] if isinstance(cfg.get("text_config"), dict) else cfg


def _field(model: Model, name: str):
    """The file's value, else vLLM's default where it equals transformers' (kvmem's reading); else refused."""
    cfg = _text(model)
    if name in cfg and cfg[name] is not None:
        return cfg[name]
    if name in _DERIVED:
        return None
    ours, theirs = _DEFAULTS[name]
    if ours != theirs:
        raise ValueError(f"config field {name!r} is not set, and vLLM 0.33.0's InklingModelConfig defaults it "
                         f"{'from other fields' if ours is None else f'to {ours}'} where transformers' "
                         f"InklingTextConfig says {theirs} (vllm/models/inkling/configs.py): refused")
    return ours


def _int(model: Model, name: str) -> int:
    value = _field(model, name)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"config field {name!r} must be a positive integer, got {value!r}")
    return value


def inkling_layers(model: Model, tp: int, draft) -> tuple[Layer, ...]:
    """The attention layers vLLM 0.33.0's Inkling builds (their conv states: sconv_spec)."""
    arch = model.facts.architectures[0] if model.facts.architectures else None
    if arch == "InklingForCausalLM":
        # registry.py#L173 -> nvidia/model.py InklingForCausalLM on the hf_config itself: a transformers
        # InklingTextConfig (model_type inkling_text, not in vLLM's config registry), which has no
        # padded_vocab_size, read first by InklingModel.__init__ (#L275-L277): AttributeError
        raise ValueError("vLLM 0.33.0 cannot build this model: a text-only Inkling config (model_type inkling_text) "
                         "is read by transformers' InklingTextConfig, and vLLM's InklingForCausalLM reads "
                         "config.padded_vocab_size, which that class does not have (vllm/models/inkling/nvidia/"
                         "model.py InklingModel.__init__): AttributeError; the multimodal checkpoint "
                         "(model_type inkling_mm_model) loads")
    if arch != "InklingForConditionalGeneration":
        raise ValueError(f"architectures {arch!r}: vLLM 0.33.0 runs Inkling as InklingForConditionalGeneration "
                         "(registry.py#L173-L177) on model_type inkling_mm_model")
    if model.dtype not in ("bf16", "fp32"):
        # the conv state asserts the model dtype (fp32 checkpoints run as bfloat16): sconv_swa_attn.py#L170-L174
        raise ValueError(f"vLLM 0.33.0's Inkling conv state \"supports bfloat16 only\" (nvidia/sconv_swa_attn.py "
                         f"InklingConvState), and this checkpoint's dtype is {model.dtype}")
    if draft is not None:
        raise ValueError("draft with Inkling: the layers of vLLM 0.33.0's InklingMTP are not modelled")
    heads, kv = _int(model, "num_attention_heads"), _int(model, "num_key_value_heads")
    hidden, n = _int(model, "hidden_size"), _int(model, "num_hidden_layers")
    head = _field(model, "head_dim") or hidden // heads
    swa_heads = _field(model, "swa_num_attention_heads") or heads
    swa_kv = _field(model, "swa_num_key_value_heads") or kv
    swa_head = _field(model, "swa_head_dim") or head
    window = _int(model, "sliding_window_size")
    local = _field(model, "local_layer_ids") or []
    if n != len(model.layers) or not isinstance(local, list) or any(
            isinstance(i, bool) or not isinstance(i, int) for i in local):
        raise ValueError("local_layer_ids must list layer indices, and num_hidden_layers be the layers kvmem read")
    local = set(local)
    for what, q, k in (("", heads, kv), ("sliding ", swa_heads, swa_kv)):
        if what and not local:
            continue
        # nvidia/attention.py#L94-L103: tp divides the heads, and the KV heads (kv >= tp) or they it;
        # sconv_swa_attn.py#L141-L146:
        # tp <= kv heads
        if not divides(tp, q) or (k >= tp and not divides(tp, k)) or tp > k:
            raise ValueError(f"vLLM 0.33.0's Inkling asserts tp {tp} divides the {what}layers' {q} attention heads "
                             f"and is at most their {k} KV heads (nvidia/attention.py, sconv_swa_attn.py)")
    return tuple(Layer(SLIDING, kv_heads=swa_kv, head_dim_k=swa_head, head_dim_v=swa_head, window=window)
                 if i in local else Layer(FULL, kv_heads=kv, head_dim_k=head, head_dim_v=head) for i in range(n))


def sconv_spec(model: Model, layer: Layer, tp: int) -> PageSpec:
    """A layer's conv-state spec (vllm@v0.33.0 vllm/models/inkling/nvidia/sconv_swa_attn.py#L140-L193)."""
    cfg = _text(model)
    kernel = cfg.get("sconv_kernel_size") or cfg.get("conv_kernel_size") or 4   # configs.py#L96-L98
    raw = 2 * layer.head_dim_k + 2 * (_int(model, "hidden_size") // layer.kv_heads)
    head_size = 1 << (raw - 1).bit_length()       # padded to a power of two
    return PageSpec("sliding", kernel, layer.kv_heads // tp, head_size, 0, 2, "", kernel, role="state")

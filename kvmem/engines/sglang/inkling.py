"""Inkling (inkling_text) as SGLang 0.5.23 runs it: models/inkling.py InklingForConditionalGeneration.

SGLang reads an Inkling checkpoint (model_type inkling_mm_model) with its own InklingMMConfig, whose text_config
is an InklingModelConfig (sglang@v0.5.23 python/sglang/srt/configs/inkling.py#L17-L215, #L309-L358), and gives it
three pools:
    full pool   the layers not in local_layer_ids: num_key_value_heads x (head_dim + v_head_dim) a token
    SWA pool    the layers in local_layer_ids: swa_num_key_value_heads x (swa_head_dim + swa_v_head_dim)
                (configs/model_config.py#L2781-L2797 get_hybrid_layer_ids; #L2676 is_hybrid_swa_model)
    conv state  one slot a request on every layer, six short-convolution windows of sconv_kernel_size - 1
                rows: K and V at the full layers' width, K and V at the sliding layers' width, the
                attention and MLP outputs at hidden_size, all in bfloat16, whichever the layer's kind
                (configs/inkling.py#L217-L256 mamba2_cache_params; configs/mamba_utils.py#L115-L125
                mamba_cache_per_req)
KV heads per rank are max(1, heads // attn_tp) (configs/inkling.py#L225-L226; models/inkling_common/attn.py
#L316-L323 asserts tp divides the query heads and divides or is divided by the KV heads).

Sizing: the conv pool first, from mamba_full_memory_ratio of the budget (kv_cache_configurator.py#L3229-L3403
_handle_max_mamba_cache), then HybridSWAPoolConfigurator splits the rest between the full and SWA pools by
swa_full_tokens_ratio (pool_configurator.py#L656-L917). Inkling's own defaults (model_overrides/inkling.py
#L16-L78 _inkling_overrides, each yielding to a given flag): swa_full_tokens_ratio 0.1, mamba_full_memory_ratio
0.1, --mamba-radix-cache-strategy extra_buffer (two more state slots a request with overlap scheduling:
kv_cache_configurator.py#L3062-L3087, so the requests are capped at slots // 5). The model asserts the radix cache
and the hybrid SWA pool stay on (models/inkling.py#L974-L977). Its sliding window for the SWA pool is
sliding_window_size - 1 (models/inkling.py#L1104-L1105 get_attention_sliding_window_size).
"""

from __future__ import annotations

from ...dtypes import DType
from ...model import Model
from ...parallel import divides, kv_heads_per_rank

__all__ = ["INKLING", "ARCHITECTURE", "is_inkling", "resolve_options", "inkling_layout"]

INKLING = "inkling_text"
ARCHITECTURE = "InklingForConditionalGeneration"   # models/inkling.py#L1991 EntryClass
WRAPPER = "inkling_mm_model"                        # configs/inkling.py#L310 InklingMMConfig.model_type
# sglang@v0.5.23 python/sglang/srt/arg_groups/model_overrides/inkling.py#L41-L44: both ratios 0.1 when not given
SWA_FULL_TOKENS_RATIO = 0.1
MAMBA_FULL_MEMORY_RATIO = 0.1
_GENERIC = {"swa_full_tokens_ratio": 0.8, "mamba_full_memory_ratio": 0.9}   # kvmem's defaults (pools.DEFAULTS)
CONV_STATE_BYTES = 2   # configs/inkling.py#L253 InklingStateDType(conv=torch.bfloat16)

# sglang@v0.5.23 python/sglang/srt/configs/inkling.py#L21-L74 InklingModelConfig.__init__ defaults, and transformers
# 5.24 configuration_inkling.py InklingTextConfig's, for the model-wide fields that shape the cache (None: derived)
_DEFAULTS = {  # name: (SGLang's, transformers')
    "hidden_size": (1536, 6144), "num_hidden_layers": (16, 66), "num_attention_heads": (12, 64),
    "num_key_value_heads": (4, 8), "head_dim": (None, 128), "sliding_window_size": (512, 512),
}


def is_inkling(model: Model) -> bool:
    return model.model_type == INKLING


def _text(model: Model) -> dict:
    cfg = model.config or {}
    return cfg["text_config"] if isinstance(cfg.get("text_config"), dict) else cfg


def _int(cfg: dict, name: str, default=None) -> int:
    value = cfg.get(name)
    if value is None:
        value = default
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"config field {name!r} must be a positive integer, got {value!r}")
    return value


def _model_wide(cfg: dict, name: str, derived=None):
    """The file's value, else SGLang's default (``derived`` where SGLang derives it) where it equals transformers'
    (the model kvmem reads); else refused."""
    if cfg.get(name) is not None:
        return cfg[name]
    ours, theirs = _DEFAULTS[name]
    ours = derived if ours is None else ours
    if ours != theirs:
        raise ValueError(f"config field {name!r} is not set, and SGLang 0.5.23's InklingModelConfig makes it {ours} "
                         f"where transformers' InklingTextConfig says {theirs} (python/sglang/srt/configs/inkling.py): "
                         "refused")
    return ours


def _check_run(model: Model) -> None:
    """SGLang runs Inkling only as InklingForConditionalGeneration read by its InklingMMConfig."""
    archs = model.facts.architectures
    arch = archs[0] if archs else None
    if arch != ARCHITECTURE:
        # sglang@v0.5.23 python/sglang/srt/models/inkling.py#L1991 (EntryClass), model_loader/utils.py
        # resolve_transformers_arch; transformers 5.24 modeling_inkling.py#L611 (_supports_attention_backend False)
        raise ValueError(f"SGLang 0.5.23 has no model file for {arch or 'a config without architectures'} (its "
                         "Inkling EntryClass is InklingForConditionalGeneration, python/sglang/srt/models/inkling.py), "
                         "and its Transformers fallback refuses transformers' Inkling classes: not backend-compatible "
                         "(_supports_attention_backend False), so resolve_transformers_arch raises ValueError")
    if (model.config or {}).get("model_type") != WRAPPER or not isinstance(model.config.get("text_config"), dict):
        # InklingForConditionalGeneration.__init__ reads config.text_config (models/inkling.py#L964-L972)
        raise ValueError(f"SGLang 0.5.23's InklingForConditionalGeneration reads its config's text_config as "
                         f"InklingMMConfig builds it (model_type {WRAPPER}, python/sglang/srt/configs/inkling.py); "
                         "a text-only inkling_text config has no text_config, and the model raises AttributeError")


def resolve_options(options: dict) -> tuple[dict, list[str]]:
    """Inkling's defaults for the pool options (module docstring), and SGLang's assertions on the others."""
    if options.get("disable_radix_cache"):
        raise ValueError("SGLang 0.5.23's Inkling asserts the radix cache is on (models/inkling.py "
                         "InklingForConditionalGeneration.__init__: assert not disable_radix_cache)")
    if options.get("disable_hybrid_swa_memory"):
        raise ValueError("SGLang 0.5.23's Inkling asserts the hybrid SWA pool is on (models/inkling.py "
                         "InklingForConditionalGeneration.__init__: assert not disable_hybrid_swa_memory)")
    out, notes = dict(options), []
    for name, value in _GENERIC.items():
        if out.get(name, value) == value:
            # a given 0.8 / 0.9 is read as not given, as for DeepSeek-V4 (kvmem.engines.sglang.dsv4)
            out[name] = SWA_FULL_TOKENS_RATIO if name == "swa_full_tokens_ratio" else MAMBA_FULL_MEMORY_RATIO
            notes.append(f"{name} {out[name]} (SGLang's Inkling default, model_overrides/inkling.py; a given "
                         f"{value} is read as not given)")
    # --mamba-radix-cache-strategy extra_buffer (model_overrides/inkling.py#L45-L56; the model asserts it)
    out["mamba_extra_buffer"] = True
    return out, notes


def inkling_layout(model: Model, tp: int, k_dtype: DType) -> dict:
    """SGLang's pools for an Inkling checkpoint: Layout fields (pools.make_layout builds the Layout)."""
    _check_run(model)
    cfg = _text(model)
    n = _int(cfg, "num_hidden_layers", _model_wide(cfg, "num_hidden_layers"))
    hidden = _int(cfg, "hidden_size", _model_wide(cfg, "hidden_size"))
    heads = _int(cfg, "num_attention_heads", _model_wide(cfg, "num_attention_heads"))
    kv = _int(cfg, "num_key_value_heads", _model_wide(cfg, "num_key_value_heads"))
    # configs/inkling.py#L77-L90: head_dim hidden // heads, v_head_dim head_dim, swa_* the full layers' when unset
    head = _int(cfg, "head_dim", _model_wide(cfg, "head_dim", hidden // heads))
    v_head = _int(cfg, "v_head_dim", head)
    swa_heads = _int(cfg, "swa_num_attention_heads", heads)
    swa_kv = _int(cfg, "swa_num_key_value_heads", kv)
    swa_head = _int(cfg, "swa_head_dim", head)
    swa_v_head = _int(cfg, "swa_v_head_dim", swa_head)
    window = _int(cfg, "sliding_window_size", _model_wide(cfg, "sliding_window_size"))
    # configs/inkling.py#L52 sconv_kernel_size (default 4); transformers names it conv_kernel_size (attribute_map)
    kernel = _int(cfg, "sconv_kernel_size", 4)
    if cfg.get("sconv_kernel_size") is None and cfg.get("conv_kernel_size") not in (None, kernel):
        raise ValueError(f"config field 'conv_kernel_size' is {cfg['conv_kernel_size']!r} and sconv_kernel_size is "
                         "not set: SGLang 0.5.23's InklingModelConfig reads only sconv_kernel_size (default 4), so its "
                         "convolutions would not match the checkpoint's (python/sglang/srt/configs/inkling.py)")
    if cfg.get("num_hidden_layers") is not None and n != model.num_layers:
        raise ValueError(f"num_hidden_layers {n} is not the {model.num_layers} layers kvmem read")
    local = cfg.get("local_layer_ids")
    if not local:
        # configs/inkling.py#L91-L92 (None -> []): no sliding layer, and HybridSWAPoolConfigurator asserts one
        # (model_executor/pool_configurator.py#L668-L670)
        raise ValueError("local_layer_ids is not set or empty: SGLang 0.5.23's InklingModelConfig then has no sliding "
                         "layer (configs/inkling.py), and HybridSWAPoolConfigurator asserts \"Hybrid SWA model must "
                         "have at least one SWA layer\" (model_executor/pool_configurator.py)")
    if not isinstance(local, list) or any(isinstance(i, bool) or not isinstance(i, int) for i in local) \
            or len(set(local)) != len(local) or not all(0 <= i < n for i in local):
        # configs/model_config.py#L2781-L2792: unique, each in [0, num_hidden_layers)
        raise ValueError(f"local_layer_ids must list distinct layer indices in [0, {n}): SGLang 0.5.23 asserts it "
                         f"(configs/model_config.py get_hybrid_layer_ids), got {local!r}")
    swa = tuple(sorted(set(local)))
    full = tuple(i for i in range(n) if i not in set(swa))
    read = tuple(i for i, layer in enumerate(model.layers) if layer.kind.windowed)
    if read != swa:
        # SGLang reads local_layer_ids alone (configs/model_config.py#L2781-L2797); transformers' layer_types, where
        # the file has it, wins in transformers (configuration_inkling.py __post_init__) and in kvmem's reader
        raise ValueError(f"layer_types makes layers {list(read)} sliding and local_layer_ids {list(swa)}: SGLang "
                         "0.5.23 reads local_layer_ids alone (configs/model_config.py get_hybrid_layer_ids), "
                         "transformers layer_types, so the two would serve different models: refused")
    for what, q, k in (("", heads, kv), ("sliding ", swa_heads, swa_kv)):
        # models/inkling_common/attn.py#L316-L323
        if not divides(tp, q) or not (divides(tp, k) if k >= tp else divides(k, tp)):
            raise ValueError(f"SGLang 0.5.23's Inkling attention asserts tp {tp} divides the {what}layers' {q} "
                             f"attention heads and divides (or is a multiple of) their {k} KV heads "
                             "(models/inkling_common/attn.py)")
    kv_rank, swa_rank = kv_heads_per_rank(kv, tp), kv_heads_per_rank(swa_kv, tp)
    # configs/inkling.py#L225-L252: (kernel - 1, dim) windows for K, V (full), K, V (sliding), attention and MLP
    # outputs; --enable-scattered-sconv (not modelled: off by default) would shard the last two over tp
    conv = (kernel - 1) * (2 * kv_rank * head + 2 * swa_rank * swa_head + 2 * hidden) * CONV_STATE_BYTES
    k_row = {"full": kv_rank * k_dtype.row_bytes(head), "swa": swa_rank * k_dtype.row_bytes(swa_head)}
    v_row = {"full": kv_rank * k_dtype.row_bytes(v_head), "swa": swa_rank * k_dtype.row_bytes(swa_v_head)}
    return dict(full=full, swa=swa, linear=tuple(range(n)), k_row=k_row, v_row=v_row,
                cell={role: k_row[role] + v_row[role] for role in k_row},
                # models/inkling.py#L1104-L1105: the SWA pool's window (SGLang's sliding_window_size) is one short
                window=window - 1, heads=kv_rank, states={i: (conv, 0) for i in range(n)},
                notes=(f"{len(full)} full and {len(swa)} sliding layers (local_layer_ids) in two pools, and a "
                       f"{conv:,} B bfloat16 short-convolution state a request on each of the {n} layers "
                       "(InklingConvCacheParams)",))

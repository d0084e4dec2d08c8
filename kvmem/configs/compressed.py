"""DeepSeek-V4's layers: a sliding window of K=V rows, and compressed rows on CSA / HCA layers.

transformers 5.24 configuration_deepseek_v4.py and modeling_deepseek_v4.py:

    layer_types    "sliding_attention", "compressed_sparse_attention" (CSA) or
                   "heavily_compressed_attention" (HCA), one per layer; else the published
                   files' ``compress_ratios`` (0 sliding, 4 CSA, 128 HCA; entries past
                   num_hidden_layers are the MTP layers', which transformers does not build);
                   else 2 HCA layers, then HCA and CSA alternating (DeepseekV4Config.__post_init__)
    compress_rates the tokens per compressed row of each compressed type, {CSA: 4, HCA: 128} by
                   default; compress_rate_csa / compress_rate_hca replace one
    every layer    one head_dim row per token, shared by K, V and every query head (kv_proj to
                   head_dim; DeepseekV4Attention), for the last sliding_window tokens
    HCA            + DeepseekV4HCACache's compressor: one head_dim row per compress rate tokens
    CSA            + the same with overlapping windows (two series per token, the last closed
                   window's Ca slice kept) and a lightning indexer keeping its own compressed
                   keys of index_head_dim (DeepseekV4CSACache, DeepseekV4Indexer)

What each keeps per token and per sequence is kvmem.layer.Compressor's docstring.
"""

from __future__ import annotations

from ..errors import ConfigError
from ..layer import COMPRESSED, Compressor, Layer
from ..units import show_value
from .fields import Fields, check_int

__all__ = ["compressed_layers", "SLIDING_TYPE", "CSA", "HCA"]

SLIDING_TYPE, CSA, HCA = "sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention"
# configuration_deepseek_v4.py _COMPRESS_RATIO_TO_LAYER_TYPE
_RATIO_TYPES = {0: SLIDING_TYPE, 4: CSA, 128: HCA}
# DeepseekV4Config.default_compress_rates
_DEFAULT_RATES = {CSA: 4, HCA: 128}


def _layer_types(f: Fields, n_layers: int) -> list[str]:
    """layer_types, else compress_ratios, else the default; DeepseekV4Config.__post_init__ keeps the
    first num_hidden_layers entries of either (the published compress_ratios name the MTP layer too)."""
    given = f.get("layer_types", default=None)
    if given is not None:
        if not isinstance(given, list) or len(given) < n_layers or any(t not in _RATIO_TYPES.values()
                                                                       for t in given):
            raise ConfigError(f"config field 'layer_types' must list one of {', '.join(_RATIO_TYPES.values())} for "
                              f"each of the {n_layers} layers of model_type 'deepseek_v4', got {show_value(given)}")
        return list(given[:n_layers])
    ratios = f.get("compress_ratios", default=None)
    if ratios is not None:
        if not isinstance(ratios, list) or len(ratios) < n_layers or any(
                isinstance(r, bool) or r not in _RATIO_TYPES for r in ratios):
            raise ConfigError(f"config field 'compress_ratios' must list 0, 4 or 128 for each of the {n_layers} "
                              f"layers (configuration_deepseek_v4.py maps no other), got {show_value(ratios)}")
        return [_RATIO_TYPES[r] for r in ratios[:n_layers]]
    return [HCA] * min(n_layers, 2) + [CSA if i % 2 else HCA for i in range(max(n_layers - 2, 0))]


def _rates(f: Fields) -> dict[str, int]:
    """compress_rates (both types named), the legacy compress_rate_csa / compress_rate_hca folded in."""
    given = f.get("compress_rates", default=None)
    if given is None:
        rates = dict(_DEFAULT_RATES)
    elif not isinstance(given, dict) or set(given) != set(_DEFAULT_RATES):
        raise ConfigError(f"config field 'compress_rates' must give a rate for exactly {CSA!r} and {HCA!r} "
                          f"(DeepseekV4HCACache reads both), got {show_value(given)}")
    else:
        rates = {name: check_int(f"compress_rates.{name}", rate) for name, rate in given.items()}
    for field, name in (("compress_rate_csa", CSA), ("compress_rate_hca", HCA)):
        if f.has(field):
            rates[name] = f.int(field)
    return rates


def compressed_layers(f: Fields, n_layers: int) -> tuple[Layer, ...]:
    """Every DeepSeek-V4 layer: a compressed layer, with the compressor its type keeps."""
    kv_heads = f.int("num_key_value_heads", default=1)
    if kv_heads != 1:
        raise ConfigError(f"config field 'num_key_value_heads' is {kv_heads}: DeepSeek-V4 caches one row shared by "
                          "every head (modeling_deepseek_v4.py DeepseekV4Attention projects K=V to one head_dim)")
    head_dim, window = f.int("head_dim"), f.int("sliding_window")
    types = _layer_types(f, n_layers)
    rates = _rates(f) if set(types) - {SLIDING_TYPE} else {}
    index_head_dim = f.int("index_head_dim") if CSA in types else 0
    compressors: dict[str, Compressor | None] = {SLIDING_TYPE: None}
    if HCA in rates:
        compressors[HCA] = Compressor(rates[HCA], head_dim)
        compressors[CSA] = Compressor(rates[CSA], head_dim, index_head_dim, overlap=True)
    return tuple(Layer(COMPRESSED, kv_heads=1, head_dim_k=head_dim, window=window, compressor=compressors[t])
                 for t in types)

"""The families vLLM 0.33.0 reads with its own config class (vllm@v0.33.0 vllm/transformers_utils/config.py#L122-L176
_CONFIG_REGISTRY), where that class makes of a config.json that leaves a field out something else than transformers'
class (and so kvmem's reader) makes of it: vLLM's value is taken, or, where vLLM's class raises or leaves the field
None, the file is refused with vLLM's reason. Found and judged by kvmem/oracles/vllm_absent.py
(tests/oracles/test_vllm_absent_oracle.py)."""

from __future__ import annotations

from dataclasses import replace

from ...layer import SLIDING, Layer
from ...model import Model

__all__ = ["OWN_CLASS_LAYERS", "BEAM_DEFAULTS", "MUSE_SPARK_REQUIRED", "minimax_m3_sparse"]


# vLLM 0.33.0 reads a beam config.json with its own BeamConfig (vllm/transformers_utils/config.py#L126
# _CONFIG_REGISTRY), whose defaults are not transformers' (kvmem's reader fills transformers'):
# vllm@v0.33.0 vllm/transformers_utils/configs/beam.py#L24-L32 (num_hidden_layers 24, num_key_value_heads 4,
# head_dim None, sliding_window 4096)
BEAM_DEFAULTS = {"num_hidden_layers": 24, "num_key_value_heads": 4, "sliding_window": 4096}


def _beam_layers(model: Model) -> tuple[Layer, ...]:
    """Beam as vLLM's BeamConfig fills a file that leaves fields out (BEAM_DEFAULTS)."""
    cfg = model.config
    layer_types = cfg.get("layer_types")
    layers = cfg.get("num_hidden_layers", BEAM_DEFAULTS["num_hidden_layers"])
    if layer_types is not None and len(layer_types) != layers:
        # vllm@v0.33.0 vllm/transformers_utils/configs/beam.py#L52-L57: BeamConfig raises
        raise ValueError(f"vLLM 0.33.0's BeamConfig raises 'layer_types must contain one valid attention type per "
                         f"layer.': {len(layer_types)} layer_types for num_hidden_layers {layers} (the file "
                         "gives none: BeamConfig's default 24, configs/beam.py#L24, #L52-L57)")
    kv_heads = cfg.get("num_key_value_heads", BEAM_DEFAULTS["num_key_value_heads"])
    window = cfg.get("sliding_window", BEAM_DEFAULTS["sliding_window"])
    # vllm@v0.33.0 vllm/models/beam/nvidia/attention.py#L66: head_dim = config.head_dim or hidden // heads
    head_dim = cfg.get("head_dim") or model.hidden_size // model.num_attention_heads
    shape = dict(kv_heads=kv_heads, head_dim_k=head_dim, head_dim_v=head_dim)
    if layer_types is None:
        # configs/beam.py#L50-L51: every layer sliding (transformers': every 6th and the last full)
        return (replace(model.layers[0], kind=SLIDING, window=window, **shape),) * layers
    return tuple(replace(layer, **shape, **({"window": window} if layer.kind == SLIDING else {}))
                 for layer in model.layers)


# vllm@v0.33.0 vllm/transformers_utils/configs/muse_spark.py#L321-L343 MuseSparkTextConfig: has_no_defaults_at_init,
# and __init__ reads these attributes of the file (an absent one: AttributeError, the server does not start)
MUSE_SPARK_REQUIRED = ("hidden_act", "attention_bias", "rope_parameters", "num_shared_experts", "layer_types",
                       "mlp_layer_types", "num_hidden_layers", "layer_rope_theta")


def _check_muse_spark(model: Model) -> None:
    """Muse Spark: vLLM 0.33.0 reads the text config with its own MuseSparkTextConfig, which fills nothing in."""
    text = model.config.get("text_config") or model.config
    # every field kvmem's reader took from transformers' defaults is one vLLM's class does not have
    defaulted = dict(model.reading.from_defaults) if model.reading is not None else {}
    missing = [name for name in (*MUSE_SPARK_REQUIRED, *defaulted) if name not in text]
    if missing:
        raise ValueError(f"vLLM 0.33.0's MuseSparkTextConfig has no defaults (configs/muse_spark.py#L321-L343) and "
                         f"reads {missing[0]!r}, which this config.json does not give: AttributeError, vLLM refuses "
                         "the file")


def _check_kimi_linear(model: Model) -> None:
    """vLLM 0.33.0 reads a kimi_linear file with its own KimiLinearConfig (vllm/transformers_utils/config.py#L142),
    whose defaults are not transformers' (vllm@v0.33.0 vllm/transformers_utils/configs/kimi_linear.py#L18,
    #L43-L45: num_hidden_layers 32, kv_lora_rank and qk_rope_head_dim None, where transformers' class fills
    in the Kimi-Linear-48B values kvmem's reader takes)."""
    text = model.config.get("text_config") or model.config
    missing = [name for name in ("num_hidden_layers", "kv_lora_rank", "qk_rope_head_dim") if name not in text]
    if missing:
        raise ValueError(f"config field {missing[0]!r} is absent: vLLM 0.33.0's own KimiLinearConfig fills it "
                         "otherwise than transformers' (configs/kimi_linear.py#L18, #L43-L45: 32 layers, no MLA "
                         "latent), so this file does not run as kvmem's reading sizes it: refused")


def _kimi_linear_layers(model: Model) -> tuple[Layer, ...]:
    _check_kimi_linear(model)
    return model.layers


def _muse_spark_layers(model: Model) -> tuple[Layer, ...]:
    _check_muse_spark(model)
    return model.layers


# model_type -> its layers under vLLM's own config class (vllm/transformers_utils/config.py#L122-L176)
OWN_CLASS_LAYERS = {"beam": _beam_layers, "kimi_linear": _kimi_linear_layers, "muse_spark_text": _muse_spark_layers}


def minimax_m3_sparse(model: Model, sparse):
    """MiniMax-M3's sparse_attention_config as vLLM reads it: the file's, else, for a minimax_m3_vl file (read with
    vLLM's own MiniMaxM3Config, vllm/transformers_utils/config.py#L155), its text config's default:
    sparse_attention_freq [0] * 3 + [1] * 57, sparse_index_dim 128 (vllm@v0.33.0
    vllm/transformers_utils/configs/minimax_m3.py#L89-L104); a transformers-read file without one: None."""
    if sparse is not None or model.config.get("model_type") != "minimax_m3_vl":
        return sparse
    n = len(model.layers)
    if n != 60:
        raise ValueError("vLLM 0.33.0's MiniMaxM3Config fills a missing sparse_attention_config with 60 layers' "
                         f"sparse_attention_freq (configs/minimax_m3.py#L89-L104); this file has {n} layers: refused")
    return {"sparse_attention_freq": [0] * 3 + [1] * 57, "sparse_index_dim": 128}

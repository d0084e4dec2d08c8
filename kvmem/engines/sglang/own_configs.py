"""The families SGLang 0.5.23 reads with its own config class, and what those classes make of a config.json
that leaves a field out, where it is not what transformers' class (and so kvmem's reader) makes of it.

SGLang builds the config from its own registry first (sglang@v0.5.23
python/sglang/srt/utils/hf_transformers/common.py#L117-L180 _CONFIG_REGISTRY, then get_config), transformers'
AutoConfig otherwise. Each entry below is judged by SGLang's own ModelConfig on a file without the field
(kvmem/oracles/sglang_absent.py, tests/oracles/test_sglang_absent_oracle.py):
    a value      SGLang's class fills the field with it: kvmem's SGLang mode reads the file with it filled in
    Required     SGLang's class has no usable default and SGLang raises: kvmem refuses, with SGLang's reason
    a phrase     a rule sglang_model applies: GraniteMoeHybrid's layer pattern, Muse Spark's all-full layers,
                 DeepSeek-V3.2 without index_topk read as plain MLA, EXAONE's KV heads = its query heads
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ...layer import FULL, SLIDING
from ...model import Model

__all__ = ["Required", "OWN_DEFAULTS", "sglang_model", "check_interval"]


@dataclass(frozen=True)
class Required:
    """A field SGLang's own class cannot do without: ``why`` is what SGLang does without it."""

    why: str


_KIMI = ("sglang@v0.5.23 python/sglang/srt/configs/kimi_linear.py#L50-L56, #L89-L91: KimiLinearConfig leaves it "
         "None (transformers' class fills in Kimi-Linear-48B's value), and ModelConfig's MLA widths then add None: "
         "TypeError")

# kvmem model_type -> {field: SGLang's own default | Required}; only fields kvmem reads whose SGLang default is not
# transformers' (in SGLang 0.5.23's python/sglang/srt/configs/, the file and lines named beside each)
OWN_DEFAULTS: dict[str, dict[str, object]] = {
    "qwen3_next": {
        # configs/qwen3_next.py#L259-L268 layers_block_type reads self.full_attention_interval, which only the file
        # sets (no __init__ argument): AttributeError without it
        "full_attention_interval": Required("SGLang 0.5.23's Qwen3NextConfig reads full_attention_interval "
                                            "(configs/qwen3_next.py#L259-L268), which only the file sets: "
                                            "AttributeError"),
        "num_key_value_heads": 2,   # configs/qwen3_next.py#L190
    },
    "qwen3_5_text": {   # Qwen3_5TextConfig(Qwen3NextConfig), configs/qwen3_5.py#L15-L34
        "full_attention_interval": Required("SGLang 0.5.23's Qwen3_5TextConfig (a Qwen3NextConfig, configs/qwen3_5.py"
                                            "#L15) reads full_attention_interval (configs/qwen3_next.py#L259-L268), "
                                            "which only the file sets: AttributeError"),
        "num_key_value_heads": 2,   # configs/qwen3_next.py#L190
    },
    "qwen3_5_moe_text": {
        "full_attention_interval": Required("SGLang 0.5.23's Qwen3_5MoeTextConfig (a Qwen3NextConfig) reads "
                                            "full_attention_interval (configs/qwen3_next.py#L259-L268), which only "
                                            "the file sets: AttributeError"),
    },
    "kimi_linear": {
        "kv_lora_rank": Required(_KIMI), "qk_nope_head_dim": Required(_KIMI), "qk_rope_head_dim": Required(_KIMI),
        "linear_attn_config": Required("SGLang 0.5.23's KimiLinearConfig leaves linear_attn_config None "
                                       "(configs/kimi_linear.py#L56, #L119-L122) and its layer ids index it: "
                                       "TypeError"),
        # configs/kimi_linear.py#L23: 32 layers, the ones past linear_attn_config's lists full attention; kvmem's
        # reader requires the lists to name every layer
        "num_hidden_layers": Required("SGLang 0.5.23's KimiLinearConfig takes 32 layers when the file gives no "
                                      "num_hidden_layers (configs/kimi_linear.py#L23), the ones linear_attn_config "
                                      "does not list full attention, where transformers' class takes 27: give "
                                      "num_hidden_layers in the file"),
    },
    "granitemoehybrid": {   # configs/granitemoehybrid.py#L142-L165, #L186-L195
        "num_hidden_layers": 40, "num_key_value_heads": 8, "mamba_d_state": 128, "mamba_n_heads": 64,
        "layer_types": "attention every 6th layer",   # (i + 1) % 6 == 0 attention, else mamba (#L186-L193)
    },
    "longcat_flash": {"qk_rope_head_dim": 128},   # configs/longcat_flash.py#L26
    # configs/exaone.py#L151, #L172-L174: ExaoneConfig's num_key_value_heads None -> num_attention_heads (MHA;
    # transformers' ExaoneConfig: 8)
    "exaone": {"num_key_value_heads": "num_attention_heads"},
    "nemotron_h": {
        # configs/nemotron_h.py#L425-L430 mamba2_cache_params reads self.n_groups, which only the file sets
        "n_groups": Required("SGLang 0.5.23's NemotronHConfig reads n_groups for its Mamba2 state "
                             "(configs/nemotron_h.py#L425-L430), which only the file sets: AttributeError"),
    },
    "step3p5": {
        "layer_types": Required("SGLang 0.5.23's Step3p5Config keeps layer_types None when the file gives none "
                                "(configs/step3p5.py#L29, #L96) and iterates it: TypeError"),
    },
    "muse_spark_text": {"layer_types": "every layer full"},   # configs/muse_spark.py#L55-L59
    "deepseek_v32": {
        # python/sglang/srt/configs/model_config.py#L191-L212 is_deepseek_dsa: needs index_topk; SGLang's
        # _DeepseekV32ConfigAlias (utils/hf_transformers/common.py#L201) has none, so the file is plain MLA
        "index_topk": "no indexer",
        "index_head_dim": Required("SGLang 0.5.23 reads the DSA indexer's index_head_dim from the config "
                                   "(_DeepseekV32ConfigAlias has no default, utils/hf_transformers/common.py#L201): "
                                   "AttributeError"),
    },
}


def _text(config: dict) -> dict:
    text = config.get("text_config")
    return text if isinstance(text, dict) else config


def sglang_model(model: Model) -> Model:
    """``model`` as SGLang 0.5.23 reads its config.json (OWN_DEFAULTS): refused where SGLang raises, re-read with
    SGLang's values where its class fills a left-out field otherwise than transformers'. A model not read from a
    config.json (GGUF), or whose file gives every field, is returned as it is."""
    rules = OWN_DEFAULTS.get(model.model_type)
    config = model.config
    if not rules or not isinstance(config, dict) or not config:
        return model
    text = _text(config)
    absent = [name for name in rules if text.get(name) is None]
    for name in absent:
        rule = rules[name]
        if isinstance(rule, Required):
            raise ValueError(f"config field {name!r} is absent: {rule.why}")
    fills = {name: rules[name] for name in absent if isinstance(rules[name], int) and not isinstance(rules[name], bool)}
    if rules.get("num_key_value_heads") == "num_attention_heads" and "num_key_value_heads" in absent:
        fills["num_key_value_heads"] = model.num_attention_heads
    if "layer_types" in absent and model.model_type == "granitemoehybrid":
        layers = text.get("num_hidden_layers") or fills.get("num_hidden_layers")
        if isinstance(layers, int):
            fills["layer_types"] = ["attention" if (i + 1) % 6 == 0 else "mamba" for i in range(layers)]
    if model.model_type == "granitemoehybrid":
        _check_granite({**text, **fills}, fills)
    if fills:
        import copy
        new = copy.deepcopy(config)
        _text(new).update(fills)
        model = Model.from_hf_config(new, name=model.name)
    if rules.get("layer_types") == "every layer full" and "layer_types" in absent:
        # SGLang's MuseSparkTextConfig (registered over transformers', configs/muse_spark.py#L254-L259) makes every
        # layer full attention when the file gives no layer_types (#L55-L59); transformers' class a 3:1 pattern
        model = replace(model, layers=tuple(replace(layer, kind=FULL, window=0) if layer.kind == SLIDING else layer
                                            for layer in model.layers))
    if "index_topk" in absent and rules.get("index_topk") == "no indexer":
        model = replace(model, layers=tuple(replace(layer, index_head_dim=0) for layer in model.layers))
    return model


def _check_granite(text: dict, fills: dict) -> None:
    """sglang@v0.5.23 python/sglang/srt/configs/granitemoehybrid.py#L239-L253: GraniteMoeHybridConfig raises unless
    mamba_d_head x mamba_n_heads = mamba_expand x hidden_size (its own defaults where the file gives none: hidden_size
    2048, mamba_expand 2, mamba_d_head 64, #L140, #L162-L164)."""
    hidden, expand = text.get("hidden_size") or 2048, text.get("mamba_expand") or 2
    d_head, n_heads = text.get("mamba_d_head") or 64, text.get("mamba_n_heads") or 64
    if not all(isinstance(v, int) for v in (hidden, expand, d_head, n_heads)):
        return
    if d_head * n_heads != expand * hidden:
        filled = f" (SGLang's defaults for {', '.join(sorted(fills))})" if fills else ""
        raise ValueError(f"SGLang 0.5.23's GraniteMoeHybridConfig raises ValueError: mamba_d_head ({d_head}) * "
                         f"mamba_n_heads ({n_heads}) must equal mamba_intermediate_size ({expand * hidden}){filled} "
                         "(configs/granitemoehybrid.py#L248-L253)")


def check_interval(model: Model) -> None:
    """Qwen3-Next / Qwen3.5 under SGLang: the attention layers are those of full_attention_interval
    (configs/qwen3_next.py#L259-L284 layers_block_type, full_attention_layer_ids), whatever layer_types says."""
    if model.model_type not in ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text"):
        return
    text = _text(model.config) if isinstance(model.config, dict) else {}
    interval, types = text.get("full_attention_interval"), text.get("layer_types")
    if not isinstance(interval, int) or interval < 1 or not isinstance(types, list):
        return
    # the file's layer_types (a what-if that rewrites kvmem's layers, strategies' "no hybrid", keeps its file)
    ours = [kind != "linear_attention" for kind in types]
    theirs = [(i + 1) % interval == 0 for i in range(len(types))]
    if ours != theirs:
        first = next(i for i, (a, b) in enumerate(zip(ours, theirs, strict=True)) if a != b)
        raise ValueError(f"layer {first}: the config's layer_types make it {'attention' if ours[first] else 'linear'}, "
                         f"but SGLang 0.5.23 takes the layers from full_attention_interval {interval} alone "
                         "(configs/qwen3_next.py#L259-L284), which makes it "
                         f"{'attention' if theirs[first] else 'linear'}: refused")

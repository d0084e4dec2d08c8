"""No silent reading: every model_type transformers defines is read by its own family's rule or
refused by name, and a known family carrying a cache field its rule does not read is refused.

transformers is a test dependency only. For every decoder config class of the pinned
transformers (causal LMs and image-text-to-text models), the class's default config, written
out as a config.json would be, is read by kvmem; kvmem must either refuse it (ConfigError) or
read per layer what transformers' own config reading gives: cache_utils.get_layer_types_and_kwargs
(the layer types and windows DynamicCache builds) and configuration_utils.get_head_shapes
(KV heads and head dims per layer). The modeling code is judged separately, by building the
models (kvmem validate --engine transformers, tests/oracles/test_transformers_oracle.py).
"""

import warnings

import pytest

from kvmem import ConfigError, Model
from kvmem.configs import CACHE_FIELDS, FAMILIES

transformers = pytest.importorskip("transformers")
from transformers import CONFIG_MAPPING  # noqa: E402
from transformers.cache_utils import get_layer_types_and_kwargs  # noqa: E402
from transformers.configuration_utils import get_head_shapes  # noqa: E402
from transformers.models.auto.modeling_auto import (  # noqa: E402
    MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
    MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES,
)
from transformers.utils import logging  # noqa: E402

DECODER_TYPES = sorted(set(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES) | set(MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES))
HF_KIND = {"full_attention": "full", "sliding_attention": "sliding", "chunked_attention": "chunked",
           "indexed_attention": "full", "linear_attention": "linear", "conv": "linear", "dummy": "none",
           "moe": "none", "mlp": "none", "hybrid": "full",   # hybrid: attention beside a state (kept apart)
           "hybrid_sliding": "sliding"}
# Where transformers' modeling code caches another shape than the config's head shapes say, the
# family's rule follows the modeling code (checked by building the model, tests/oracles):
# MiMo-V2-Flash's sliding layers hold 2 x num_key_value_heads (MiMoV2FlashAttention); Falcon, GPT-BigCode
# and DBRX take their K/V heads from multi_query / new_decoder_architecture / attn_config;
# Inkling's sliding layers take swa_num_key_value_heads (InklingAttention), and Inkling-2-Loop's
# forward appends copies of its looped layers' caches. DeepSeek-V4's layers are compressed ones (one K=V
# row in the window, compressed rows: DeepseekV4HCACache / DeepseekV4CSACache), tests/configs/test_deepseek_v4.py.
MODELING_SHAPES = {"mimo_v2_flash", "falcon", "gpt_bigcode", "dbrx", "inkling_text", "inkling2_text",
                   "inkling2_loop_text", "deepseek_v4"}


def default_config(model_type: str):
    logging.set_verbosity_error()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return CONFIG_MAPPING[model_type]()


def hf_reading(config) -> list[tuple]:
    """Per layer (kind, KV heads, head dim, window) as transformers' config reading gives them."""
    text = config.get_text_config(decoder=True)
    kinds, kwargs = get_layer_types_and_kwargs(text)
    attention_free = not hasattr(text, "num_attention_heads")       # Mamba, Mamba2: no head shapes
    heads, dims = (0, 0) if attention_free else get_head_shapes(text)
    n = len(kinds)
    heads = heads if isinstance(heads, list) else [heads] * n
    dims = dims if isinstance(dims, list) else [dims] * n
    rows = []
    for i, (kind, kw) in enumerate(zip(kinds, kwargs, strict=True)):
        kind = HF_KIND.get(kind, kind)
        if kind in ("full", "sliding", "chunked"):
            rows.append((kind, heads[i], dims[i], kw.get("sliding_window") or kw.get("attention_chunk_size") or 0))
        else:
            rows.append((kind,))
    return rows


def kvmem_reading(model: Model) -> list[tuple]:
    rows = []
    for layer in model.layers:
        if layer.kind in ("full", "sliding", "chunked"):
            rows.append((layer.kind, layer.kv_heads, layer.head_dim_k, layer.window))
        elif layer.kind == "mla":
            rows.append(("full",))
        elif layer.kind == "shared":
            rows.append(("shared",))
        else:
            rows.append((layer.kind,))
    return rows


def comparable(hf: list[tuple], kv: list[tuple], model: Model) -> tuple[list, list]:
    """MLA layers compare by kind (their widths are the latent's); layers that read another
    layer's KV (Gemma-3n/4 kv sharing) are the config's type in transformers, shared in kvmem."""
    hf = [row[:1] if kv[i] == ("full",) and model.layers[i].kind == "mla" else row for i, row in enumerate(hf)]
    hf = [("shared",) if kv[i] == ("shared",) else row for i, row in enumerate(hf)]
    return hf, kv


@pytest.mark.parametrize("model_type", DECODER_TYPES)
def test_every_transformers_model_type_is_read_by_its_family_or_refused(model_type):
    try:
        config = default_config(model_type)
        as_file = config.to_dict()
    except Exception as error:  # transformers' own default config cannot be built: nothing to read
        pytest.skip(f"transformers cannot build the default {model_type} config: {type(error).__name__}")
    try:
        model = Model.from_hf_config(as_file)
    except ConfigError as refusal:
        assert str(refusal), "a refusal says why"
        return
    assert model.model_type in FAMILIES, f"{model_type} read as {model.model_type!r}, which is no family"
    if model.model_type in MODELING_SHAPES:
        return
    hf, kv = comparable(hf_reading(config), kvmem_reading(model), model)
    assert kv == hf


def test_the_families_the_issue_names_are_read():
    # the family list is deliberate: a type is added only with its rule and a check against transformers
    assert {"llama", "gemma4_text", "mimo_v2_flash", "kimi_linear", "minimax", "lfm2", "glm_moe_dsa",
            "dbrx"} <= set(FAMILIES)


@pytest.mark.parametrize("cfg, message", [
    ({"model_type": "brand_new_arch", "num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 64},
     "model_type 'brand_new_arch' is not a family kvmem reads"),
    ({"model_type": "llamma", "num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 64},
     "closest supported: llama"),
    ({"num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 64}, "config has no 'model_type'"),
    # DeciLM / Nemotron-NAS publishes block_configs under its own model_type; under llama it is refused
    ({"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 64,
      "block_configs": [{"attention": {"no_op": True}}] * 2}, "'block_configs' shapes the cache"),
    ({"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 64,
      "kv_lora_rank": 512}, "'kv_lora_rank' shapes the cache, and kvmem's reading of model_type 'llama'"),
    ({"model_type": "nemotron-nas", "num_hidden_layers": 2, "num_attention_heads": 8, "hidden_size": 64},
     "config field 'block_configs' is missing and model_type 'nemotron-nas' has no default"),
    ({"model_type": "deepseek_v4", "num_hidden_layers": 2, "num_attention_heads": 4, "head_dim": 64,
      "sliding_window": 8, "num_key_value_heads": 2}, "'num_key_value_heads' is 2: DeepSeek-V4 caches one row"),
])
def test_what_kvmem_cannot_read_is_refused_by_name(cfg, message):
    with pytest.raises(ConfigError, match=message):
        Model.from_hf_config(cfg)


@pytest.mark.parametrize("value", [None, False, 0, [], {}])
def test_an_unset_cache_field_is_no_reason_to_refuse(value):
    cfg = {"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 64,
           "kv_lora_rank": value, "block_configs": value}
    assert Model.from_hf_config(cfg).kinds == {"full": 2}


def test_cache_fields_cover_every_layer_map_the_issue_names():
    assert {"attn_type_list", "hybrid_layer_pattern", "linear_attn_config", "block_configs", "compress_ratios",
            "global_head_dim", "num_global_key_value_heads", "attention_k_eq_v", "index_topk",
            "layers_block_type", "per_layer_config", "swa_head_dim"} <= CACHE_FIELDS

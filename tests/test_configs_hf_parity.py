"""kvmem's per-layer reading of every real config equals transformers' own config classes.

transformers is a test dependency only: the core never imports it. For each preset and
fixture config, the config class for its model_type fills its defaults and derives its
layer types (cache_utils.get_layer_types_and_kwargs, the rule DynamicCache follows);
kvmem must read the same kinds, KV heads, head dims and windows.
"""

import json
import pathlib

import pytest

from kvmem import Model
from kvmem.catalog import presets

transformers = pytest.importorskip("transformers")
from transformers import CONFIG_MAPPING  # noqa: E402
from transformers.cache_utils import get_layer_types_and_kwargs  # noqa: E402

FIXTURES = pathlib.Path(__file__).parent / "fixtures" / "configs"
HF_KIND = {"full_attention": "full", "sliding_attention": "sliding", "chunked_attention": "chunked",
           "linear_attention": "linear", "dummy": "none", "moe": "none", "mlp": "none",
           "indexed_attention": "full"}


# Published remote-code configs whose layer map transformers' own class for the family ignores:
# MiniMax-M1's attn_type_list (10 softmax layers of 80; MiniMaxConfig without layer_types makes every
# other layer full). kvmem reads the list, as the model's own code does (tests/configs).
# Two presets this helper's generic reading cannot build: Kimi-K3's model_type kimi_k3 is remote code
# (configuration_kimi_k3.py; no CONFIG_MAPPING entry), and Gemma 4's per-layer heads are read through
# per_layer_config (a global num_key_value_heads raises AmbiguousGlobalPerLayerAttributeError); both are
# read in tests/configs (test_families, test_new_families) and by tests/oracles/test_transformers_oracle.py.
# MiniMax-M3's published config is remote code (auto_map) whose text_config names no model_type: transformers
# 5.24's MiniMaxM3VLConfig then builds it as "minimax_m3_sparse", which CONFIG_MAPPING lacks; kvmem reads it as
# minimax_m3_vl_text, judged by SGLang's own pools in tests/oracles/test_sglang_families_oracle.py.
IGNORED_BY_TRANSFORMERS = {"minimax-m1", "kimi-k3", "gemma-4-26b-a4b", "minimax-m3"}


def _all_configs():
    for name, data in presets().items():
        if name not in IGNORED_BY_TRANSFORMERS:
            yield pytest.param(data["config"], id=name)
    for path in sorted(FIXTURES.glob("*.json")):
        yield pytest.param(json.loads(path.read_text()), id=f"fixture:{path.stem}")


# Published model_types that transformers reads with another family's class (Kimi K2 ships
# DeepseekV3ForCausalLM under model_type "kimi_k2").
SAME_AS = {"kimi_k2": "deepseek_v3", "minimax_m1": "minimax"}


def hf_text_config(cfg: dict):
    config = CONFIG_MAPPING[SAME_AS.get(cfg["model_type"], cfg["model_type"])](**{k: v for k, v in cfg.items() if k != "model_type"})
    return config.get_text_config(decoder=True)


def hf_reading(cfg: dict) -> list[dict]:
    """Per layer: kind, KV heads, K/V head dims, window as transformers sees them."""
    text = hf_text_config(cfg)
    kinds, kwargs = get_layer_types_and_kwargs(text)
    if text.model_type == "deepseek_v4":   # every layer a window of K=V rows, CSA / HCA ones compressed too
        return [{"kind": "compressed", "window": text.sliding_window, "rate": text.compress_rates.get(kind)}
                for kind in kinds]
    kinds = [HF_KIND[k] for k in kinds]
    heads = text.num_attention_heads
    kv_heads = getattr(text, "num_key_value_heads", None) or heads
    if text.model_type == "falcon":
        kv_heads = text.num_kv_heads if text.new_decoder_architecture else 1 if text.multi_query else heads
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // heads
    v_head_dim = getattr(text, "v_head_dim", None) or head_dim
    shared = getattr(text, "num_kv_shared_layers", 0) or 0
    rows = []
    for i, (kind, kw) in enumerate(zip(kinds, kwargs, strict=True)):
        if shared and i >= len(kinds) - shared:
            rows.append({"kind": "shared"})
        elif getattr(text, "kv_lora_rank", None) and kind == "full":
            rows.append({"kind": "mla", "kv_lora_rank": text.kv_lora_rank,
                         "qk_rope_head_dim": text.qk_rope_head_dim})
        elif kind in ("full", "sliding", "chunked"):
            rows.append({"kind": kind, "kv_heads": kv_heads, "head_dim_k": head_dim, "head_dim_v": v_head_dim,
                         "window": kw.get("sliding_window") or 0})
        else:
            rows.append({"kind": kind})
    return rows


def kvmem_reading(cfg: dict) -> list[dict]:
    rows = []
    for layer in Model.from_hf_config(cfg).layers:
        if layer.kind == "mla":
            rows.append({"kind": "mla", "kv_lora_rank": layer.kv_lora_rank,
                         "qk_rope_head_dim": layer.qk_rope_head_dim})
        elif layer.kind in ("full", "sliding", "chunked"):
            rows.append({"kind": layer.kind, "kv_heads": layer.kv_heads, "head_dim_k": layer.head_dim_k,
                         "head_dim_v": layer.head_dim_v, "window": layer.window})
        elif layer.kind == "compressed":
            rows.append({"kind": "compressed", "window": layer.window,
                         "rate": layer.compressor.rate if layer.compressor else None})
        else:
            rows.append({"kind": layer.kind})
    return rows


@pytest.mark.parametrize("cfg", list(_all_configs()))
def test_per_layer_reading_matches_transformers(cfg):
    assert kvmem_reading(cfg) == hf_reading(cfg)

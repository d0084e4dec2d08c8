"""transformers' own modeling code as the judge of kvmem's parameter counts (kvmem/configs/params.py).

``meta_count(config)`` builds the text decoder of a config.json dict with transformers 5.24 on
the meta device (``with torch.device("meta"): AutoModelForCausalLM.from_config(cfg)``: no memory,
no weights) and sums ``numel`` over its parameters, a tied output head counted once; a multimodal
wrapper (Gemma 4's ``gemma4``) is judged by its ``text_config``'s causal LM (the text model and the
head, not the vision or audio towers). MiniMax-M1's ``minimax_m1`` is read as transformers'
``minimax`` with its ``attn_type_list`` (1: softmax, 0: lightning) written as ``layer_types``, as
kvmem's reader reads it (kvmem/configs/layouts.py).

``shrink(config, seed)`` is a seeded small variation of a preset's config (a few layers, tiny
widths, a few experts, the per-layer lists cut to the layer count) that both sides build in
milliseconds. torch and transformers are imported inside the functions.
"""

from __future__ import annotations

import copy
import random

__all__ = ["meta_count", "shrink", "text_config"]

# MiniMax-M1 as transformers' minimax; MiniMax-M3's text model under MiniMax's / vLLM's names as
# transformers' minimax_m3_vl_text (its config class reads their sparse_attention_config and moe_layer_freq)
_ALIASES = {"minimax_m1": "minimax", "minimax_m3": "minimax_m3_vl_text", "minimax_m3_text": "minimax_m3_vl_text",
            "deepseek_ref": "deepseek_v4"}   # SGLang's DeepSeek-V4 reference-format configs: the same fields
_DROP = ("auto_map", "architectures", "quantization_config")


def text_config(config: dict) -> dict:
    """The text decoder's part of a config dict (a wrapper's text_config), copied."""
    inner = config.get("text_config")
    return copy.deepcopy(inner if isinstance(inner, dict) else config)


def meta_count(config: dict) -> int:
    """Parameters of the causal LM transformers 5.24 builds from the config (tied weights once)."""
    import torch
    from transformers import CONFIG_MAPPING, AutoModelForCausalLM

    d = text_config(config)
    model_type = _ALIASES.get(d.get("model_type"), d.get("model_type"))
    d.pop("model_type", None)
    for key in _DROP:
        d.pop(key, None)
    if model_type == "minimax" and "attn_type_list" in d:
        d["layer_types"] = ["full_attention" if x else "linear_attention" for x in d.pop("attn_type_list")]
    cfg = CONFIG_MAPPING[model_type](**d)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(cfg)
    return sum(p.numel() for p in model.parameters())   # parameters() yields a shared tensor once


_WIDTHS = (16, 32)
# fields set (where the config has them) to a seeded choice
_CHOICES = {"intermediate_size": (16, 24, 40), "moe_intermediate_size": (16, 24, 40),
            **dict.fromkeys(("head_dim", "global_head_dim", "v_head_dim", "qk_nope_head_dim", "kv_lora_rank",
                             "q_lora_rank", "o_lora_rank", "index_head_dim"), _WIDTHS),
            "qk_rope_head_dim": (4, 8), "index_n_heads": (2, 4), "o_groups": (1, 2), "hc_mult": (2, 4),
            "num_global_key_value_heads": (1, 2),
            **dict.fromkeys(("n_routed_experts", "num_experts", "num_local_experts"), (4, 8)),
            **dict.fromkeys(("num_experts_per_tok", "num_experts_per_token", "top_k_experts"), (1, 2, 3)),
            **dict.fromkeys(("n_shared_experts", "num_shared_experts"), (1, 2)),
            "num_hash_layers": (0, 1, 2)}


def _cut(values, n):
    return list(values[:n]) if isinstance(values, list) else values


def shrink(config: dict, seed: str) -> dict:
    """A seeded small variation of a config dict (the wrapper kept, its text_config shrunk)."""
    rng = random.Random(seed)
    out = copy.deepcopy(config)
    t = out["text_config"] if isinstance(out.get("text_config"), dict) else out
    n = rng.choice((4, 5, 6))
    t["num_hidden_layers"] = n
    t["hidden_size"] = rng.choice((32, 48, 64))
    t["vocab_size"] = rng.randrange(97, 300)
    if "vocab_size_per_layer_input" in t:
        t["vocab_size_per_layer_input"] = t["vocab_size"]
    heads = rng.choice((2, 4, 8))
    kv = t.get("num_key_value_heads")
    t["num_attention_heads"] = heads
    if kv is not None:
        t["num_key_value_heads"] = 1 if kv == 1 else heads if kv == config_heads(config) else rng.choice((1, 2))
    for key, choices in _CHOICES.items():
        if t.get(key) and not (key == "n_shared_experts" and t.get("model_type") in ("deepseek_v4", "deepseek_ref")):
            t[key] = rng.choice(choices)
    if "first_k_dense_replace" in t:
        t["first_k_dense_replace"] = rng.choice((0, 1, 2))
        if "mlp_layer_types" in t:
            k = t["first_k_dense_replace"]
            t["mlp_layer_types"] = ["dense"] * k + ["sparse"] * (n - k)
    if t.get("num_hash_layers"):
        t["num_hash_layers"] = rng.choice((0, 1, 2))
    if isinstance(t.get("indexer_types"), list):
        t["indexer_types"] = [rng.choice(("full", "shared")) if i else "full" for i in range(n)]
    if isinstance(t.get("compress_ratios"), list):
        t["compress_ratios"] = [rng.choice((0, 4, 128)) for _ in range(n)] + [0]
    for key in ("layer_types", "attn_type_list"):
        t[key] = _cut(t.get(key), n) if key in t else None
        if t[key] is None:
            del t[key]
    for key in ("pad_token_id", "bos_token_id", "eos_token_id"):
        t[key] = None   # ids of the real vocabulary: past the shrunk one (None, not a class default)
    _family_lists(t, n, rng)
    return out


def _family_lists(t: dict, n: int, rng) -> None:
    """The per-family layer patterns of a shrunk text config, kept valid for n layers."""
    if t.get("model_type") == "gemma4_text" and t.get("layer_types"):
        t["layer_types"][-1] = "full_attention"   # Gemma4TextConfig forces the last layer full
    if t.get("model_type") == "gemma3n_text":
        # full every other layer, so that each KV-shared layer (the last ones) finds its type earlier
        t["layer_types"] = ["full_attention" if i % 2 else "sliding_attention" for i in range(n)]
        t.update(num_kv_shared_layers=rng.choice((0, 2)), hidden_size_per_layer_input=rng.choice((4, 8)),
                 laurel_rank=rng.choice((2, 4)), altup_num_inputs=rng.choice((2, 4)))
        if isinstance(t.get("activation_sparsity_pattern"), list):   # Gemma3nTextConfig wants one value a layer
            t["activation_sparsity_pattern"] = _cut(t["activation_sparsity_pattern"], n)
    if t.get("model_type") == "mimo_v2_flash":
        # transformers builds sliding layers with 2 x num_key_value_heads and the full layers' dims, and its
        # default layer pattern (full at 0 and every 6th): the published swa_* fields and lists agree with it
        t.update(swa_num_key_value_heads=2 * t["num_key_value_heads"], swa_head_dim=t["head_dim"],
                 swa_v_head_dim=t["v_head_dim"], swa_num_attention_heads=t["num_attention_heads"])
        for key in ("hybrid_layer_pattern", "moe_layer_freq"):
            t[key] = _cut(t.get(key), n)
    if t.get("model_type") == "laguna":
        heads = t["num_attention_heads"]
        t["num_attention_heads_per_layer"] = [rng.choice((heads, 2 * heads)) for _ in range(n)]
        t["mlp_layer_types"] = _cut(t.get("mlp_layer_types"), n)
        t["gating"] = rng.choice((True, "per-head", "per-element"))
    if t.get("model_type") == "lfm2":
        if "conv_dim" in t:
            t["conv_dim"] = t["hidden_size"]
        t.update(conv_bias=rng.choice((False, True)), conv_L_cache=rng.choice((2, 3)),
                 block_auto_adjust_ff_dim=rng.choice((False, True)), block_multiple_of=rng.choice((8, 16)),
                 block_ffn_dim_multiplier=rng.choice((1.0, 1.5, 0.75)), intermediate_size=rng.choice((48, 96)))
        if "full_attention" not in t.get("layer_types", []):
            t["layer_types"][-1] = "full_attention"
    if "attn_type_list" in t and 1 not in t["attn_type_list"]:
        t["attn_type_list"][-1] = 1
    _kda_layers(t, n, rng)


def _kda_layers(t: dict, n: int, rng) -> None:
    """Kimi-Linear's linear_attn_config: 1-indexed full/KDA layer lists for n layers, small KDA heads."""
    lin = t.get("linear_attn_config")
    if isinstance(lin, dict):
        full = sorted({rng.randrange(1, n + 1) for _ in range(2)})
        lin.update(full_attn_layers=full, kda_layers=[i for i in range(1, n + 1) if i not in full],
                   num_heads=rng.choice((2, 4)), head_dim=rng.choice((8, 16)),
                   short_conv_kernel_size=rng.choice((2, 4)))


def config_heads(config: dict) -> int | None:
    return text_config(config).get("num_attention_heads")

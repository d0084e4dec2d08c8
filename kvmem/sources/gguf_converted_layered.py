"""The GGUF keys convert_hf_to_gguf (llama.cpp 0c1e57098, conversion/*.py) writes for the architectures of
kvmem/sources/gguf_layered.py, for kvmem/sources/gguf_converted.py (split for length): config.json -> keys, each
converter's set_gguf_parameters writing them all itself."""

from __future__ import annotations

from collections.abc import Callable

from .gguf_converted_keys import mla_keys

__all__ = ["LAYERED_KEYS", "LAYERED_EXTRA", "LAYERED_ALIASES"]

# the other model_types a converter class of these takes (conversion/minimax.py L167-L169: MiniMax-M3's text model)
LAYERED_ALIASES = {"minimax_m3_vl_text": "minimax-m3", "minimax_m3_text": "minimax-m3"}


def _deci(c: dict) -> dict:
    """conversion/deci.py DeciModel L35-L80 (block_configs -> per-layer heads, K/V heads, FFN widths), L97-L125
    (the keys, vocab_size, rope over head_dim or the head)."""
    heads, kv, ffn = [], [], []
    for block in c["block_configs"]:
        group = block["attention"]["n_heads_in_group"]
        if group is None:       # replace_with_linear: query heads and no K/V; else no attention at all
            linear = block["attention"]["replace_with_linear"] is True
            kv.append(0)
            heads.append(c["num_attention_heads"] if linear else 0)
        else:
            kv.append(c["num_attention_heads"] // group)
            heads.append(c["num_attention_heads"])
        mult = block["ffn"]["ffn_mult"] or 0.0
        width = int(2 * mult * c["hidden_size"] / 3)        # DeciModel._ffn_mult_to_intermediate_size, to 256
        ffn.append(width if width % 256 == 0 else width + 256 - width % 256)
    head = c["hidden_size"] // c["num_attention_heads"]
    out = {"head_count_kv": kv, "head_count": heads, "feed_forward_length": ffn, "block_count": len(heads),
           "context_length": c["max_position_embeddings"], "embedding_length": c["hidden_size"],
           "attention.layer_norm_rms_epsilon": c["rms_norm_eps"], "attention.key_length": head,
           "attention.value_length": head, "vocab_size": c["vocab_size"],
           "rope.dimension_count": c.get("head_dim") or head}
    if c.get("rope_theta") is not None:
        out["rope.freq_base"] = float(c["rope_theta"])
    return {("attention." + k if k.startswith("head_count") else k): v for k, v in out.items()}


# llama.cpp arch -> the keys (without the "<arch>." prefix) its converter writes for a config
LAYERED_KEYS: dict[str, Callable[[dict], dict]] = {"deci": _deci}


def _step35(c: dict) -> dict:
    """conversion/step3.py Step35Model L134-L226 over the base keys: block_count with the MTP layers (L114-L123),
    heads and K/V heads per layer (attention_other_setting's on sliding layers), the window and its pattern
    (layer_types padded with full layers), the MoE keys; the leading dense blocks from moe_layers_enum."""
    n = c["num_hidden_layers"] + int(c.get("num_nextn_predict_layers", 0))
    types = (list(c.get("layer_types") or []) + ["full_attention"] * n)[:n]
    other = c.get("attention_other_setting") or {}
    sliding = [t == "sliding_attention" for t in types]
    enum = c.get("moe_layers_enum")
    moe = sorted(int(i) for i in enum.strip().split(",")) if isinstance(enum, str) and enum.strip() else []
    out = {"block_count": n, "attention.head_count": [other.get("num_attention_heads", c["num_attention_heads"])
                                                      if s else c["num_attention_heads"] for s in sliding],
           "attention.head_count_kv": [other.get("num_attention_groups", c["num_attention_groups"])
                                       if s else c["num_attention_groups"] for s in sliding],
           "attention.sliding_window": c["sliding_window"], "attention.sliding_window_pattern": sliding,
           "attention.value_length": c["head_dim"], "expert_count": c["moe_num_experts"],
           "expert_used_count": c["moe_top_k"], "expert_feed_forward_length": c["moe_intermediate_size"],
           "expert_shared_feed_forward_length": c["share_expert_dim"],
           "leading_dense_block_count": max(0, moe[0]) if moe else 0,
           "moe_every_n_layers": int(c.get("moe_every_n_layer", 1)),
           "attention.layer_norm_rms_epsilon": c.get("rms_norm_eps", 1e-5)}
    if c.get("num_nextn_predict_layers"):
        out["nextn_predict_layers"] = int(c["num_nextn_predict_layers"])
    return out


def _mimo2(c: dict) -> dict:
    """conversion/mimo.py MimoV2Model L18-L32, L143-L175 over the base keys: three MTP layers in block_count (the
    count hard-coded, L24; --no-mtp drops them), head_count_kv per layer and the pattern extended with sliding MTP
    entries, value_length v_head_dim, the experts, rope over partial_rotary_factor of the head."""
    n_mtp = 3
    hybrid = list(c["hybrid_layer_pattern"]) + [1] * n_mtp
    rope = c.get("rope_parameters") or {}
    out = {"block_count": c["num_hidden_layers"] + n_mtp, "nextn_predict_layers": n_mtp,
           "attention.head_count_kv": [c["swa_num_key_value_heads"] if s == 1 else c["num_key_value_heads"]
                                       for s in hybrid],
           "attention.sliding_window": c["sliding_window"], "attention.sliding_window_pattern": hybrid,
           "attention.value_length": c["v_head_dim"], "expert_count": c["n_routed_experts"],
           "expert_feed_forward_length": c["moe_intermediate_size"],
           "rope.dimension_count": int(c["head_dim"] * rope.get("partial_rotary_factor",
                                                                c.get("partial_rotary_factor", 1.0))),
           "attention.layer_norm_rms_epsilon": c.get("layernorm_epsilon", 1e-5)}
    if c.get("attention_value_scale") is not None:
        out["attention.value_scale"] = float(c["attention_value_scale"])
    return out


def _minimax_m3(c: dict) -> dict:
    """conversion/minimax.py MiniMaxM2Model L128-L132 (the experts' width intermediate_size, rope rotary_dim) and
    MiniMaxM3Model L177-L198 over the base keys (feed_forward_length dense_intermediate_size, base.py L1445)."""
    sac, freq = c["sparse_attention_config"], c["moe_layer_freq"]
    return {"expert_feed_forward_length": c["intermediate_size"], "rope.dimension_count": c["rotary_dim"],
            "expert_shared_count": c["n_shared_experts"],
            "expert_weights_scale": float(c["routed_scaling_factor"]), "expert_weights_norm": True,
            "attention.indexer.head_count": sac["sparse_num_index_heads"],
            "attention.indexer.key_length": sac["sparse_index_dim"],
            "attention.indexer.top_k": sac["sparse_topk_blocks"],
            "attention.indexer.block_size": sac["sparse_block_size"],
            "attention.indexer.local_blocks": sac["sparse_local_block"],
            "leading_dense_block_count": next((i for i, v in enumerate(freq) if v != 0), len(freq))}


def _hy_v4(c: dict) -> dict:
    """conversion/hy_v4.py HYV4Model L102-L175: n_group / topk_group of 1 dropped, first_k_dense_replace (else
    mlp_layer_types' leading dense blocks), DeepseekV2Model's MLA keys and vocab_size (conversion/deepseek.py
    L319-L386, L343), sigmoid gating, the routed experts' clamp, the hyper-connection keys, the indexer where
    indexer_types (else the sparse layer_types) names one."""
    c = dict(c)
    if c.get("n_group") == 1 and c.get("topk_group") == 1:
        c.pop("n_group")
        c.pop("topk_group")
    if c.get("first_k_dense_replace") is None:
        types = c["mlp_layer_types"]
        c["first_k_dense_replace"] = next((i for i, t in enumerate(types) if t != "dense"), len(types))
    out: dict = {}
    mla_keys(c, out)
    n = c["num_hidden_layers"]
    out.update({"vocab_size": c["vocab_size"], "expert_gating_func": 2, "hyper_connection.count": c["hc_mult"],
                "hyper_connection.epsilon": float(c["hc_eps"]), "hyper_connection.magnitude": float(c["hc_magnitude"])})
    if float(c.get("swiglu_limit") or 0.0) > 0.0:
        out["swiglu_clamp_exp"] = [float(c["swiglu_limit"])] * n
    sparse = ("sparse_attention", "deepseek_sparse_attention")
    full: list[bool] | None = None
    if c.get("indexer_types") is not None:
        full = [t == "full" for t in c["indexer_types"][:n]]
    elif any(t in sparse for t in c.get("layer_types") or []):
        full = [t in sparse for t in c["layer_types"][:n]]
    if full is not None:
        out.update({"attention.indexer.head_count": c["index_n_heads"],
                    "attention.indexer.key_length": c["index_head_dim"], "attention.indexer.top_k": c["index_topk"],
                    "attention.indexer.types": full})
    return out


def _deepseek2_ocr(c: dict) -> dict:
    """conversion/deepseek.py DeepseekV2Model L319-L383, is_ocr (L248-L255: DeepseekOCR(2)ForCausalLM,
    UnlimitedOCRForCausalLM): over the base keys, no MLA keys; first_k_dense_replace (else from mlp_layer_types'
    leading dense blocks, as transformers' class keeps it), the experts, rope qk_rope_head_dim (the language
    config's; transformers' text class has none: the head), the window where the config names one."""
    types = c.get("mlp_layer_types")
    lead = c.get("first_k_dense_replace")
    if lead is None:
        lead = (next((i for i, t in enumerate(types) if t != "dense"), len(types)) if types
                else 0 if c.get("n_routed_experts") is not None else c["num_hidden_layers"])
    out = {"leading_dense_block_count": lead, "vocab_size": c["vocab_size"],
           "expert_feed_forward_length": c.get("moe_intermediate_size") or c["intermediate_size"],
           "expert_shared_count": c.get("n_shared_experts", 0),
           "rope.dimension_count": c.get("qk_rope_head_dim") or c["hidden_size"] // c["num_attention_heads"],
           "attention.layer_norm_rms_epsilon": c.get("rms_norm_eps", 1e-6)}
    if c.get("n_routed_experts") is not None:
        out["expert_count"] = c["n_routed_experts"]
    if c.get("routed_scaling_factor") is not None:
        out["expert_weights_scale"] = float(c["routed_scaling_factor"])
    if c.get("norm_topk_prob"):
        out["expert_weights_norm"] = True
    window = c.get("sliding_window_size") or c.get("sliding_window")
    if window:
        out["attention.sliding_window"] = window
    return out


def _hrm_text(c: dict) -> dict:
    """conversion/hrm_text.py HrmTextModel L18-L44 over the base keys: block_count the cache slots (the per-stack
    count from num_layers_per_stack, else num_hidden_layers), rope over the head, the HRM keys."""
    per_stack = c.get("num_layers_per_stack") or c["num_hidden_layers"]
    out = {"block_count": per_stack * c["H_cycles"] * (c["L_cycles"] + 1),
           "rope.dimension_count": c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"],
           "hrm.layers_per_stack": per_stack, "hrm.h_cycles": c["H_cycles"], "hrm.l_cycles": c["L_cycles"],
           "hrm.prefix_lm": bool(c.get("prefix_lm", False))}
    if c.get("embedding_scale") is not None:
        out["embedding_scale"] = float(c["embedding_scale"])
    return out


# llama.cpp arch -> the keys its converter writes over conversion/base.py's (gguf_converted._required)
LAYERED_EXTRA: dict[str, Callable[[dict], dict]] = {"step35": _step35, "mimo2": _mimo2,
                                                    "minimax-m3": _minimax_m3, "hy_v4": _hy_v4,
                                                    "deepseek2-ocr": _deepseek2_ocr, "hrm_text": _hrm_text}

"""Tables and the MLA keys of kvmem/sources/gguf_converted.py (split for length): the converters that write every
key themselves, the few keys some add on top of conversion/base.py's, and DeepseekV2Model's MLA keys."""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["OWN_KEYS", "EXTRA", "mla_keys", "kimi_keys"]


def _find(cfg: dict, names: tuple):
    return next((cfg[n] for n in names if cfg.get(n) is not None), None)


# Converters that write every key themselves (their set_gguf_parameters calls no base): config.json -> keys
OWN_KEYS: dict[str, Callable[[dict], dict]] = {
    # conversion/minicpm.py MiniCPM3Model L69-L85
    "minicpm3": lambda c: {"context_length": c["max_position_embeddings"], "embedding_length": c["hidden_size"],
                           "block_count": c["num_hidden_layers"], "feed_forward_length": c["intermediate_size"],
                           "attention.head_count": c["num_attention_heads"],
                           "attention.head_count_kv": c["num_key_value_heads"],
                           "attention.layer_norm_rms_epsilon": c["rms_norm_eps"],
                           **({"attention.q_lora_rank": c["q_lora_rank"]} if c.get("q_lora_rank") else {}),
                           "attention.kv_lora_rank": c["kv_lora_rank"],
                           "attention.key_length": c["qk_nope_head_dim"] + c["qk_rope_head_dim"],
                           "rope.dimension_count": c["qk_rope_head_dim"]},
    # conversion/mpt.py MPTModel: d_model, n_heads, attn_config's kv_n_heads / clip_qkv / alibi
    "mpt": lambda c: {"block_count": c["n_layers"], "context_length": c["max_seq_len"],
                      "embedding_length": c["d_model"],
                      "feed_forward_length": 4 * c["d_model"], "attention.head_count": c["n_heads"],
                      **({"attention.head_count_kv": c["attn_config"]["kv_n_heads"]}
                         if c["attn_config"].get("kv_n_heads") else {}),
                      "attention.layer_norm_epsilon": 1e-5,
                      "attention.max_alibi_bias": float(c["attn_config"].get("alibi_bias_max", 8.0)
                                                        if c["attn_config"].get("alibi") else 0.0)},
    # conversion/gpt2.py GPT2Model: n_ctx, n_embd, 4 x n_embd, n_head, layer_norm_epsilon
    "gpt2": lambda c: {"block_count": c["n_layer"], "context_length": c["n_ctx"], "embedding_length": c["n_embd"],
                       "feed_forward_length": 4 * c["n_embd"], "attention.head_count": c["n_head"],
                       "attention.layer_norm_epsilon": c["layer_norm_epsilon"]},
    # conversion/starcoder.py StarCoderModel: as gpt2, n_positions, head_count_kv 1 (multi-query)
    "starcoder": lambda c: {"block_count": c["n_layer"], "context_length": c["n_positions"],
                            "embedding_length": c["n_embd"], "feed_forward_length": 4 * c["n_embd"],
                            "attention.head_count": c["n_head"], "attention.head_count_kv": 1,
                            "attention.layer_norm_epsilon": c["layer_norm_epsilon"]},
    # conversion/bloom.py BloomModel: seq_length (else n_embed), head_count_kv = n_head
    "bloom": lambda c: {"block_count": c["n_layer"], "context_length": c.get("seq_length", c["hidden_size"]),
                        "embedding_length": c["hidden_size"], "feed_forward_length": 4 * c["hidden_size"],
                        "attention.head_count": c["n_head"], "attention.head_count_kv": c["n_head"],
                        "attention.layer_norm_epsilon": c["layer_norm_epsilon"]},
    # conversion/gptneox.py GPTNeoXModel: rope dims rotary_pct x head size, parallel residual
    "gptneox": lambda c: {"block_count": c["num_hidden_layers"], "context_length": c["max_position_embeddings"],
                          "embedding_length": c["hidden_size"], "feed_forward_length": c["intermediate_size"],
                          "rope.dimension_count": int(c.get("rotary_pct", (c.get("rope_parameters") or {}).get(
                              "partial_rotary_factor", 0.25)) * (c["hidden_size"] // c["num_attention_heads"])),
                          "attention.head_count": c["num_attention_heads"],
                          "use_parallel_residual": bool(c.get("use_parallel_residual", True)),
                          "attention.layer_norm_epsilon": c["layer_norm_eps"]},
    # conversion/dbrx.py DbrxModel: d_model, n_heads, attn_config.kv_n_heads, ffn_config's experts
    "dbrx": lambda c: {"block_count": c["n_layers"], "context_length": c["max_seq_len"],
                       "embedding_length": c["d_model"],
                       "feed_forward_length": c["ffn_config"]["ffn_hidden_size"], "attention.head_count": c["n_heads"],
                       "attention.head_count_kv": c["attn_config"]["kv_n_heads"],
                       "attention.clamp_kqv": float(c["attn_config"].get("clip_qkv") or 8.0),
                       "expert_count": c["ffn_config"]["moe_num_experts"],
                       "expert_used_count": c["ffn_config"]["moe_top_k"], "attention.layer_norm_epsilon": 1e-5},
}



def mla_keys(cfg: dict, out: dict) -> None:
    """conversion/deepseek.py DeepseekV2Model.set_gguf_parameters L319-L386 (Mistral 4 through
    conversion/mistral3.py Mistral4Model): MLA written as one KV head of kv_lora_rank + rope."""
    kv_lora, rope = cfg.get("kv_lora_rank", 512), cfg["qk_rope_head_dim"]
    moe = cfg.get("n_routed_experts") is not None
    out.update({"attention.head_count_kv": 1, "attention.layer_norm_rms_epsilon": cfg.get("rms_norm_eps", 1e-6),
                "leading_dense_block_count": cfg.get("first_k_dense_replace",
                                                     0 if moe else cfg["num_hidden_layers"]),
                "attention.kv_lora_rank": kv_lora, "attention.key_length": kv_lora + rope,
                "attention.value_length": kv_lora, "attention.key_length_mla": cfg["qk_nope_head_dim"] + rope,
                "attention.value_length_mla": cfg["v_head_dim"],
                "expert_feed_forward_length": _find(cfg, ("moe_intermediate_size", "intermediate_size")),
                "expert_shared_count": cfg.get("n_shared_experts", 0), "rope.dimension_count": rope})
    if cfg.get("q_lora_rank") is not None:
        out["attention.q_lora_rank"] = cfg["q_lora_rank"]
    if cfg.get("routed_scaling_factor") is not None:
        out["expert_weights_scale"] = float(cfg["routed_scaling_factor"])
    if cfg.get("norm_topk_prob"):
        out["expert_weights_norm"] = True
    for name, key in (("n_group", "expert_group_count"), ("topk_group", "expert_group_used_count")):
        if cfg.get(name) is not None:       # conversion/base.py L1523-L1527
            out[key] = cfg[name]


# A few keys more on top of the base ones
EXTRA: dict[str, Callable[[dict], dict]] = {
    # conversion/minimax.py MiniMaxText01Model: the layernorm alpha as residual_scale, rotary_dim
    "minimax-01": lambda c: {"residual_scale": float(c["layernorm_full_attention_alpha"]),
                             "rope.dimension_count": c["rotary_dim"]},
    # conversion/laguna.py LagunaModel L64-L117: query heads per layer, the window where there is one, the MoE keys
    "laguna": lambda c: {"attention.head_count": c.get("num_attention_heads_per_layer")
                         or [c["num_attention_heads"]] * c["num_hidden_layers"],
                         **({"attention.sliding_window": c["sliding_window"]} if c.get("sliding_window") else {}),
                         "expert_feed_forward_length": c["moe_intermediate_size"],
                         "expert_shared_feed_forward_length": c["shared_expert_intermediate_size"],
                         "expert_weights_norm": True, "expert_weights_scale": float(c["moe_routed_scaling_factor"]),
                         "expert_gating_func": 2,
                         "leading_dense_block_count": next((i for i, t in enumerate(c["mlp_layer_types"])
                                                            if t != "dense"), len(c["mlp_layer_types"]))},
    # conversion/hunyuan.py HunyuanVLTextModel L345-L360: the XD-RoPE sections
    "hunyuan_vl": lambda c: {"rope.dimension_sections": list(c["rope_parameters"]["xdrope_section"])},
    # conversion/exaone.py ExaoneModel L22-L30: rope over partial_rotary_factor (1.0) of the head
    "exaone": lambda c: {"rope.dimension_count": int((c.get("partial_rotary_factor") or 1.0)
                                                     * (c["hidden_size"] // c["num_attention_heads"]))},
    # conversion/phi.py Phi3MiniModel L149-L173 (PhiMoeModel's parent): rope dims over the head, the window or 0
    "phimoe": lambda c: {"rope.dimension_count": c["hidden_size"] // c["num_attention_heads"],
                         "attention.sliding_window": c.get("sliding_window") or 0},
    # conversion/hunyuan.py HYV3Model: the experts' keys, sigmoid routing
    "hy_v3": lambda c: {"expert_feed_forward_length": c["moe_intermediate_size"],
                        "expert_shared_feed_forward_length": c["moe_intermediate_size"]
                        * c.get("num_shared_experts", 1),
                        "expert_weights_norm": bool(c.get("route_norm", True)),
                        "expert_weights_scale": float(c.get("router_scaling_factor", 1.0)), "expert_gating_func": 2},
    # conversion/granite.py GraniteSWAModel L91-L110: the window (128 unless named), the pattern from layer_types
    # or i % 4 != 0
    "granite_swa": lambda c: {"attention.sliding_window": c.get("sliding_window", 128),
                              "attention.sliding_window_pattern": [t == "sliding_attention" for t in c["layer_types"]]
                              if c.get("layer_types") else [i % 4 != 0 for i in range(c["num_hidden_layers"])]},
    "olmo": lambda _c: {"attention.layer_norm_epsilon": 1e-5},          # conversion/olmo.py OlmoModel L21-L23
    "olmoe": lambda _c: {"attention.layer_norm_rms_epsilon": 1e-5},     # olmo.py OlmoeModel
    # conversion/jais.py Jais2Model: rope over the whole head
    "jais2": lambda c: {"rope.dimension_count": c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]},
    "chameleon": lambda c: {"swin_norm": bool(c.get("swin_norm", False))},     # conversion/chameleon.py
    # conversion/muse_glimmer.py MuseGlimmerModel
    "muse-glimmer": lambda c: {"final_logit_softcapping": float(c["final_logit_softcapping"]),
                               "logit_scale": float(c["output_multiplier"]),
                               "attention.sliding_window": c["sliding_window"],
                               "attention.sliding_window_pattern": [t == "sliding_attention"
                                                                    for t in c["layer_types"]]},
}


def kimi_keys(cfg: dict, out: dict) -> None:
    """conversion/kimi_linear.py KimiLinearModel.set_gguf_parameters L78-L142 over the base keys: head_count_kv 1 on
    the MLA layers (linear_attn_config's full_attn_layers, 1-indexed), 0 on the KDA ones; key_length the latent
    and rope; key/value_length_mla the heads' widths."""
    linear, n = cfg["linear_attn_config"], cfg["num_hidden_layers"]
    kv_lora, rope = cfg["kv_lora_rank"], cfg["qk_rope_head_dim"]
    out.update({"attention.head_count_kv": [1 if i + 1 in linear["full_attn_layers"] else 0 for i in range(n)],
                "ssm.conv_kernel": linear["short_conv_kernel_size"], "kda.head_dim": linear["head_dim"],
                "attention.kv_lora_rank": kv_lora, "rope.dimension_count": rope, "attention.key_length": kv_lora + rope,
                "attention.key_length_mla": cfg["qk_nope_head_dim"] + rope,
                "attention.value_length_mla": cfg["v_head_dim"],
                "expert_feed_forward_length": cfg["moe_intermediate_size"],
                "expert_shared_count": cfg["num_shared_experts"],
                "leading_dense_block_count": cfg["first_k_dense_replace"],
                "expert_weights_scale": float(cfg["routed_scaling_factor"])})
    if cfg.get("q_lora_rank") is not None:
        out["attention.q_lora_rank"] = cfg["q_lora_rank"]

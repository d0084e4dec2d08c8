"""The GGUF metadata llama.cpp's converter (convert_hf_to_gguf.py at 0c1e57098, conversion/*.py) writes for a
config.json of the architectures kvmem/sources/gguf_more.py maps: ``converted_metadata(config)`` returns
(arch, {key: value}), the keys its set_gguf_parameters writes that load_arch_hparams reads (tokenizer,
rope scaling and the per-tensor data left out). Ints are written as uint32, floats as float32, lists as
arrays, as gguf-py's GGUFWriter.add_uint32 / add_float32 / add_array write them. tests/sources and
tests/oracles use it to write the header a converted checkpoint would carry (the round trip, and llama.cpp
itself building that model).
"""

from __future__ import annotations

from .gguf_converted_keys import EXTRA, OWN_KEYS, kimi_keys, mla_keys
from .gguf_converted_layered import LAYERED_ALIASES, LAYERED_EXTRA, LAYERED_KEYS
from .gguf_more import MORE_MODEL_TYPES

__all__ = ["converted_metadata", "CONVERTED_ARCHES"]

# Hugging Face model_type -> llama.cpp arch, by the converter class registered for its architectures
# (conversion/<file>.py ModelBase.register)
CONVERTED_ARCHES = {**{t: a for a, t in MORE_MODEL_TYPES.items()}, "olmo3": "olmo2", "falcon_mamba": "mamba",
                    "granitemoe_swa": "granite_swa", "minimax_text_01": "minimax-01", "minimax": "minimax-01",
                    "granitemoeshared": "granitemoe", **LAYERED_ALIASES}
# conversion/base.py TextModel.set_gguf_parameters L1434-L1550: find_hparam's names, first found wins
_BASE = (("context_length", ("max_position_embeddings", "n_ctx", "n_positions", "max_length",
                             "max_sequence_length", "model_max_length")),
         ("embedding_length", ("hidden_size", "n_embd", "dim")),
         ("feed_forward_length", ("prefix_dense_intermediate_size", "dense_intermediate_size", "intermediate_size",
                                  "n_inner", "hidden_dim")),
         ("attention.head_count", ("num_attention_heads", "n_head", "n_heads")),
         ("attention.head_count_kv", ("num_key_value_heads", "n_kv_heads")),
         ("attention.layer_norm_rms_epsilon", ("rms_norm_eps", "norm_eps")),
         ("attention.layer_norm_epsilon", ("layer_norm_eps", "layer_norm_epsilon", "norm_epsilon")),
         ("expert_count", ("num_local_experts", "num_experts", "n_routed_experts")),
         ("expert_used_count", ("num_experts_per_tok", "num_experts_per_token", "top_k_experts")))
# converters that write every key themselves
_OWN_KEYS = {**OWN_KEYS, **LAYERED_KEYS}
_EXTRA = {**EXTRA, **LAYERED_EXTRA}         # keys some write over the base ones
_GATING = {"sigmoid": 2, "softmax": 1, "sqrtsoftplus": 4}     # base.py L1530-L1539, gguf.ExpertGatingFuncType


def _find(cfg: dict, names: tuple):
    return next((cfg[n] for n in names if cfg.get(n) is not None), None)


def _first(value):
    return value[0] if isinstance(value, list) else value


def converted_metadata(config: dict) -> tuple[str, dict]:
    """(llama.cpp arch, {"<arch>.<key>": value}) for a config.json (its text_config where it nests one)."""
    cfg = config["text_config"] if isinstance(config.get("text_config"), dict) else config
    if cfg["model_type"] == "nemotron_h":
        return _nemotron_h(cfg)
    arch = CONVERTED_ARCHES[cfg["model_type"]]
    out = {"block_count": _find(cfg, ("n_layers", "num_hidden_layers", "n_layer", "num_layers"))}
    for key, names in _BASE:
        value = _find(cfg, names)
        if value is not None:
            out[key] = value
    score = _find(cfg, ("score_function", "scoring_func", "score_func", "moe_router_activation",
                        "moe_router_activation_func", "expert_selection_fn"))
    if score is not None:
        out["expert_gating_func"] = _GATING[score]
    if cfg.get("head_dim") is not None and arch not in ("granite", "granitemoe", "granite_swa"):  # granite.py L33
        out["attention.key_length"] = out["attention.value_length"] = cfg["head_dim"]
    _required(cfg, arch, out)
    if arch in _OWN_KEYS:
        return arch, {f"{arch}.{key}": value for key, value in _OWN_KEYS[arch](cfg).items()}
    if arch in ("lfm2", "lfm2moe", "granitehybrid"):
        _zero_kv(cfg, arch, out)
    if arch == "kimi-linear":
        kimi_keys(cfg, out)
    if arch in ("mamba", "mamba2"):
        return arch, _mamba(cfg, arch)
    if arch == "falcon-h1":
        # conversion/falcon_h1.py FalconH1Model L98-L119: Mamba2Model's keys (the mamba_ names first), then the
        # attention's over them
        mixer = _mamba({**cfg, "mamba_d_ssm": cfg["mamba_d_ssm"], "state_size": cfg["mamba_d_state"],
                        "conv_kernel": cfg["mamba_d_conv"], "n_groups": cfg["mamba_n_groups"]}, "mamba2")
        out.update({key.removeprefix("mamba2."): value for key, value in mixer.items()
                    if key.startswith("mamba2.ssm.")})
        out.update({"context_length": cfg.get("max_position_embeddings", 0),
                    "attention.key_length": cfg["head_dim"], "attention.value_length": cfg["head_dim"]})
    if arch == "mistral4":
        mla_keys(cfg, out)
    if arch == "deepseek4":
        _deepseek4(cfg, out)
    elif arch == "gemma3n":
        _gemma3n(cfg, out)
    elif cfg.get("sliding_window") and arch in ("olmo2", "exaone4", "mellum", "afmoe", "exaone-moe"):
        _sliding(cfg, arch, out)
    _moe_sliding(cfg, arch, out)
    _moe_and_rope(cfg, config, arch, out)
    # llama-arch.cpp L428-L431: the xIELU keys carry no architecture prefix
    return arch, {key if key.startswith("xielu.") else f"{arch}.{key}": value for key, value in out.items()}


def _moe_sliding(cfg: dict, arch: str, out: dict) -> None:
    """The MoE keys of cohere2moe and exaone-moe, whose window and pattern come with them."""
    if arch == "cohere2moe":
        # conversion/command_r.py Cohere2MoeModel L91-L116: the experts are intermediate_size wide; the dense lead
        # from mlp_layer_types
        types = cfg.get("mlp_layer_types")
        lead = (next((i for i, t in enumerate(types) if t != "dense"), len(types)) if types is not None
                else cfg.get("first_k_dense_replace", 0))
        out.update({"logit_scale": float(cfg["logit_scale"]), "attention.sliding_window": cfg["sliding_window"],
                    "attention.sliding_window_pattern": [t == "sliding_attention" for t in cfg["layer_types"]],
                    "expert_feed_forward_length": cfg["intermediate_size"], "leading_dense_block_count": lead,
                    "expert_weights_norm": bool(cfg.get("norm_topk_prob", False)),
                    "rope.dimension_count": cfg["head_dim"]})
        if cfg.get("num_shared_experts", 0) > 0:
            out.update({"expert_shared_count": cfg["num_shared_experts"],
                        "expert_shared_feed_forward_length": cfg["intermediate_size"] * cfg["num_shared_experts"]})
    if arch == "exaone-moe":
        # conversion/exaone.py ExaoneMoEModel L135-L151: Exaone4Model's keys, block_count with the MTP layers
        nextn, moe = cfg.get("num_nextn_predict_layers", 0), cfg["moe_intermediate_size"]
        out.update({"block_count": cfg["num_hidden_layers"] + nextn, "nextn_predict_layers": nextn,
                    "expert_feed_forward_length": moe, "expert_shared_count": cfg["num_shared_experts"],
                    "expert_shared_feed_forward_length": moe * cfg["num_shared_experts"],
                    "expert_weights_scale": float(cfg["routed_scaling_factor"]),
                    "expert_weights_norm": bool(cfg["norm_topk_prob"]),
                    "leading_dense_block_count": cfg.get("first_k_dense_replace",
                                                         cfg.get("first_last_k_dense_replace", 0))})


def _moe_and_rope(cfg: dict, config: dict, arch: str, out: dict) -> None:
    """The MoE and rope-section keys of llama4, the Qwen VL models, granitemoe, dots1 and hunyuan-moe."""
    if arch == "llama4":        # conversion/llama.py Llama4Model L383-L397
        out.update({"feed_forward_length": cfg["intermediate_size_mlp"],
                    "expert_feed_forward_length": cfg["intermediate_size"],
                    "interleave_moe_layer_step": cfg["interleave_moe_layer_step"]})
        if cfg.get("layer_types") and all(t == "full_attention" for t in cfg["layer_types"]):
            out["attention.sliding_window"] = 0
    rope = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
    if rope.get("mrope_section"):       # base.py L1495-L1502: padded to 4
        out["rope.dimension_sections"] = (list(rope["mrope_section"]) + [0] * 4)[:4]
    if arch in ("qwen3vl", "qwen3vlmoe"):     # conversion/qwen3vl.py L285-L292: the vision config's count
        out["n_deepstack_layers"] = len((config.get("vision_config") or {}).get("deepstack_visual_indexes", []))
    if arch == "granitemoe" and cfg.get("shared_intermediate_size"):     # granite.py L185-L192
        out["expert_shared_feed_forward_length"] = cfg["shared_intermediate_size"]
    if arch == "dots1":      # conversion/dots1.py Dots1Model L22-L27
        out.update({"leading_dense_block_count": cfg["first_k_dense_replace"],
                    "expert_shared_count": cfg["n_shared_experts"],
                    "expert_weights_scale": float(cfg["routed_scaling_factor"]),
                    "expert_weights_norm": bool(cfg["norm_topk_prob"]),
                    "expert_feed_forward_length": cfg["moe_intermediate_size"]})
    if arch == "hunyuan-moe":      # conversion/hunyuan.py HunYuanMoEModel L75-L91: one value of each per-layer list
        out.update({"expert_shared_feed_forward_length": cfg["intermediate_size"],
                    "expert_feed_forward_length": _first(cfg["moe_intermediate_size"]),
                    "expert_used_count": _first(cfg["moe_topk"]),
                    "expert_shared_count": _first(cfg["num_shared_expert"])})


def _deepseek4(cfg: dict, out: dict) -> None:
    # conversion/deepseek.py DeepseekV4Model.set_gguf_parameters L659-L689 (hparams[...]: KeyError if absent);
    # block_count num_hidden_layers (L24-L26: the MTP layers only with --mtp-only)
    n = cfg["num_hidden_layers"]
    out.update({"rope.dimension_count": cfg["qk_rope_head_dim"], "attention.q_lora_rank": cfg["q_lora_rank"],
                "attention.sliding_window": cfg["sliding_window"],
                "expert_feed_forward_length": cfg["moe_intermediate_size"],
                "expert_shared_count": cfg["n_shared_experts"],
                "expert_weights_scale": float(cfg["routed_scaling_factor"]),
                "expert_weights_norm": bool(cfg["norm_topk_prob"]),
                "swiglu_clamp_exp": [float(cfg["swiglu_limit"])] * n,
                "swiglu_clamp_shexp": [float(cfg["swiglu_limit"])] * n,
                "attention.indexer.head_count": cfg["index_n_heads"],
                "attention.indexer.key_length": cfg["index_head_dim"],
                "attention.indexer.top_k": cfg["index_topk"],
                "attention.output_group_count": cfg["o_groups"], "attention.output_lora_rank": cfg["o_lora_rank"],
                "attention.compress_ratios": list(cfg["compress_ratios"]),
                "attention.compress_rope_freq_base": float(cfg["compress_rope_theta"]),
                "hyper_connection.count": cfg["hc_mult"],
                "hyper_connection.sinkhorn_iterations": cfg["hc_sinkhorn_iters"],
                "hyper_connection.epsilon": float(cfg["hc_eps"]), "hash_layer_count": cfg["num_hash_layers"],
                "embedding_length_out": cfg["hidden_size"] * cfg["hc_mult"]})


def _gemma3n(cfg: dict, out: dict) -> None:
    # conversion/gemma.py Gemma3Model.set_gguf_parameters L141-L158 (its defaults where the config has none),
    # Gemma3NModel L533-L550; activation_sparsity_scale (normal quantiles of the pattern) left out: no cache key
    head_dim = cfg.get("head_dim", 256)
    out.update({"context_length": cfg.get("max_position_embeddings", 131072),
                "attention.head_count": cfg.get("num_attention_heads", 8),
                "attention.layer_norm_rms_epsilon": cfg.get("rms_norm_eps", 1e-6),
                "attention.key_length": head_dim, "attention.value_length": head_dim,
                "attention.head_count_kv": cfg.get("num_key_value_heads", 4),
                "altup.active_idx": cfg["altup_active_idx"], "altup.num_inputs": cfg["altup_num_inputs"],
                "embedding_length_per_layer_input": cfg["hidden_size_per_layer_input"],
                "attention.shared_kv_layers": cfg["num_kv_shared_layers"],
                "attention.sliding_window_pattern": [t == "sliding_attention" for t in cfg["layer_types"]]})
    if cfg.get("sliding_window_pattern") != 1:
        out["attention.sliding_window"] = cfg["sliding_window"]


def _sliding(cfg: dict, arch: str, out: dict) -> None:
    """The window and per-layer pattern: conversion/olmo.py Olmo2Model L52-L68 (layer_types, else every 4th
    full), exaone.py Exaone4Model L13-L31 (layer_types, else sliding_window_pattern as an int or "LLLG"),
    mellum.py L3-L15 (when use_sliding_window is not false; layer_types), afmoe.py L37-L39 (the window only)."""
    if arch == "mellum" and cfg.get("use_sliding_window") is False:
        return
    n, types, pattern = cfg["num_hidden_layers"], cfg.get("layer_types"), cfg.get("sliding_window_pattern")
    out["attention.sliding_window"] = cfg["sliding_window"]
    if arch == "afmoe":
        return
    if types:
        out["attention.sliding_window_pattern"] = [t == "sliding_attention" for t in types]
    elif arch == "olmo2":
        out["attention.sliding_window_pattern"] = [(i + 1) % 4 != 0 for i in range(n)]
    elif arch in ("exaone4", "exaone-moe") and isinstance(pattern, str) and pattern:
        out["attention.sliding_window_pattern"] = [pattern[i % len(pattern)] == "L" for i in range(n)]
    elif arch in ("exaone4", "exaone-moe") and isinstance(pattern, int) and pattern:
        out["attention.sliding_window_pattern"] = [(i + 1) % pattern != 0 for i in range(n)]


def _required(cfg: dict, arch: str, out: dict) -> None:
    """Keys the converter writes that llama.cpp's loader requires though the cache does not read them."""
    n = out["block_count"]
    if arch == "nemotron":    # conversion/nemotron.py NemotronModel L165-L177
        out["attention.layer_norm_epsilon"] = _find(cfg, ("layer_norm_eps", "layer_norm_epsilon", "norm_epsilon",
                                                           "norm_eps"))
        rot = (cfg.get("rope_parameters") or {}).get("partial_rotary_factor", cfg.get("partial_rotary_factor"))
        out["rope.dimension_count"] = int(rot * cfg["hidden_size"]) // cfg["num_attention_heads"]
    elif arch in ("granite", "granitemoe", "granitehybrid", "granite_swa"):      # conversion/granite.py L38-L48
        for name, key in (("attention_multiplier", "attention.scale"), ("embedding_multiplier", "embedding_scale"),
                          ("residual_multiplier", "residual_scale"), ("logits_scaling", "logit_scale")):
            if cfg.get(name):
                out[key] = float(cfg[name])
    elif arch == "ernie4_5-moe":     # conversion/ernie.py Ernie4_5MoeModel L86-L97
        out.update({"expert_count": cfg["moe_num_experts"], "expert_used_count": cfg["moe_k"],
                    "interleave_moe_layer_step": cfg["moe_layer_interval"],
                    "leading_dense_block_count": cfg["moe_layer_start_index"],
                    "expert_feed_forward_length": cfg["moe_intermediate_size"]})
        if cfg.get("moe_num_shared_experts"):
            out["expert_shared_count"] = cfg["moe_num_shared_experts"]
    elif arch == "mellum" and cfg.get("moe_intermediate_size"):     # conversion/mellum.py L5-L6
        out["expert_feed_forward_length"] = cfg["moe_intermediate_size"]
    elif arch == "afmoe":            # conversion/afmoe.py AfmoeModel L20-L39
        for name, key in (("num_shared_experts", "expert_shared_count"), ("moe_intermediate_size",
                          "expert_feed_forward_length"), ("num_dense_layers", "leading_dense_block_count"),
                          ("route_norm", "expert_weights_norm"), ("route_scale", "expert_weights_scale")):
            if cfg.get(name) is not None:
                out[key] = cfg[name]
    if arch in _EXTRA:
        out.update(_EXTRA[arch](cfg))
    elif arch == "apertus":
        # conversion/llama.py ApertusModel L442-L464: the xIELU parameters, one per layer, from each layer's
        # act_fn tensors (not in config.json): the checkpoint's values, here transformers' XIELUActivation defaults
        out.update({"xielu.alpha_n": [0.8] * n, "xielu.alpha_p": [0.8] * n, "xielu.beta": [0.5] * n,
                    "xielu.eps": [-1e-6] * n})


def _mamba(cfg: dict, arch: str) -> dict:
    """conversion/mamba.py MambaModel.set_gguf_parameters L46-L74 and Mamba2Model L143-L166: every key of its
    own (the base keys are not written), with their defaults where the config has none."""
    d_model = _find(cfg, ("hidden_size", "d_model"))
    d_conv = _find(cfg, ("conv_kernel", "d_conv")) or 4
    eps = _find(cfg, ("layer_norm_epsilon", "rms_norm_eps")) or 1e-5
    out = {"context_length": 2**20, "embedding_length": d_model, "feed_forward_length": 0,
           "attention.head_count": 0, "block_count": cfg["num_hidden_layers"], "ssm.conv_kernel": d_conv,
           "attention.layer_norm_rms_epsilon": eps}
    if arch == "mamba":
        d_inner = _find(cfg, ("intermediate_size", "d_inner")) or 2 * d_model
        out.update({"ssm.inner_size": d_inner, "ssm.state_size": _find(cfg, ("state_size", "d_state")) or 16,
                    "ssm.time_step_rank": _find(cfg, ("time_step_rank", "dt_rank")) or -(d_model // -16),
                    "ssm.dt_b_c_rms": cfg.get("model_type") == "falcon_mamba"})
    else:
        # Mamba2Model.__init__ L119-L121: expand, d_inner (else expand x d_model), n_group
        expand = _find(cfg, ("mamba_expand", "expand")) or 2
        d_inner = _find(cfg, ("mamba_d_ssm", "intermediate_size", "d_inner")) or expand * d_model
        head_dim = _find(cfg, ("mamba_d_head", "head_dim")) or 64
        out.update({"ssm.inner_size": d_inner, "ssm.state_size": _find(cfg, ("state_size", "d_state")) or 128,
                    "ssm.time_step_rank": d_inner // head_dim, "ssm.group_count": cfg.get("n_groups") or 1})
    return {f"{arch}.{key}": value for key, value in out.items()}


def _zero_kv(cfg: dict, arch: str, out: dict) -> None:
    """conversion/lfm2.py LFM2Model L35-L46, LFM2MoeModel L102-L116: head_count_kv 0 on the conv layers;
    conversion/granite.py GraniteHybridModel L486-L521: 0 on the Mamba layers, the Mamba-2 mixer's keys."""
    types = cfg["layer_types"]
    if arch == "granitehybrid":
        expand, hidden = cfg.get("mamba_expand", 2), cfg["hidden_size"]
        out.update({"attention.head_count_kv": [cfg["num_key_value_heads"] if t == "attention" else 0 for t in types],
                    "ssm.conv_kernel": cfg["mamba_d_conv"], "ssm.state_size": cfg["mamba_d_state"],
                    "ssm.group_count": cfg["mamba_n_groups"], "ssm.inner_size": expand * hidden,
                    "ssm.time_step_rank": cfg["mamba_n_heads"], "rope.scaling.finetuned": True})
        if cfg.get("shared_intermediate_size"):
            out["expert_shared_feed_forward_length"] = cfg["shared_intermediate_size"]
        return
    attends = "full_attention"
    out.update({"attention.head_count_kv": [cfg["num_key_value_heads"] if t == attends else 0 for t in types],
                "shortconv.l_cache": cfg["conv_L_cache"], "attention.layer_norm_rms_epsilon": cfg["norm_eps"]})
    if arch == "lfm2moe":
        out.update({"expert_feed_forward_length": cfg["moe_intermediate_size"],
                    "leading_dense_block_count": cfg["num_dense_layers"], "expert_gating_func": 2})


def _nemotron_h(cfg: dict) -> tuple[str, dict]:
    """conversion/nemotron.py NemotronHModel (L198-L365, on GraniteHybridModel): nemotron_h_moe where the config
    names num_experts_per_tok; head_count_kv on the '*' layers, feed_forward_length on the MLP / MoE layers
    ('-' / 'E'), the Mamba-2 mixer of mamba_num_heads x mamba_head_dim."""
    moe = "num_experts_per_tok" in cfg
    arch, pattern = ("nemotron_h_moe" if moe else "nemotron_h"), cfg["hybrid_override_pattern"]
    ff = cfg["moe_intermediate_size"] if moe else cfg["intermediate_size"]
    heads, head_dim = cfg["mamba_num_heads"], cfg["mamba_head_dim"]
    out = {"block_count": cfg["num_hidden_layers"], "context_length": cfg["max_position_embeddings"],
           "embedding_length": cfg["hidden_size"], "attention.head_count": cfg["num_attention_heads"],
           "attention.head_count_kv": [cfg["num_key_value_heads"] if c == "*" else 0 for c in pattern],
           "attention.key_length": cfg.get("head_dim") or cfg["attention_head_dim"],
           "attention.value_length": cfg.get("head_dim") or cfg["attention_head_dim"],
           "attention.layer_norm_epsilon": cfg.get("layer_norm_epsilon", 1e-5),
           "feed_forward_length": [ff if c in "-E" else 0 for c in pattern],
           "ssm.conv_kernel": cfg["conv_kernel"], "ssm.state_size": cfg["ssm_state_size"],
           "ssm.group_count": cfg["n_groups"], "ssm.inner_size": heads * head_dim, "ssm.time_step_rank": heads}
    if moe:
        out.update({"expert_used_count": cfg["num_experts_per_tok"], "expert_feed_forward_length": ff,
                    "expert_shared_feed_forward_length": cfg["moe_shared_expert_intermediate_size"],
                    "expert_count": cfg["n_routed_experts"], "expert_shared_count": cfg["n_shared_experts"],
                    "expert_weights_norm": bool(cfg["norm_topk_prob"]),
                    "expert_weights_scale": float(cfg["routed_scaling_factor"]), "expert_group_count": cfg["n_group"]})
    return arch, {f"{arch}.{key}": value for key, value in out.items()}

"""What llama.cpp 0c1e57098 (vendored by llama-cpp-python 0.3.36) makes of a family's config, where it
differs from the layers kvmem reads: its converter (convert_hf_to_gguf.py, conversion/*.py) writes the
GGUF, and src/models/<arch>.cpp load_arch_hparams reads it back. A config whose GGUF would not hold the
layers kvmem read is refused here with llama.cpp's rule, never sized by kvmem's.

Sliding windows (hparams.is_swa, set_swa_pattern in llama.cpp@0c1e57098 src/llama-hparams.cpp#L8-L22):
    afmoe        il % 4 < 3 sliding when sliding_window > 0: conversion/afmoe.py writes the window and
                 no pattern, src/models/afmoe.cpp calls load_swa_pattern(ml, 4)
    laguna       il % 4 != 0 sliding when sliding_window > 0 (llama.cpp@0c1e57098 conversion/laguna.py#L85-L90 writes no
                 pattern; src/models/laguna.cpp load_swa_pattern(ml, 4, dense_first=true))
    cohere2_moe  layer_types as written (llama.cpp@0c1e57098 conversion/command_r.py#L102-L103)
    step3p5      layer_types as written (llama.cpp@0c1e57098 conversion/step3.py#L176-L182)
    exaone4      a window only with 64 layers, EXAONE-4.5's text model too (src/models/exaone4.cpp: swa_type
                 is set for the 32B alone); other layer counts hold n_ctx cells in every layer
    exaone_moe   one n_swa for every sliding layer: the config's sliding_window (conversion/exaone.py
                 L83-L84), whatever per-layer sliding_windows it lists
    mimo_v2_flash  n_swa = the config's sliding_window (conversion/mimo.py add_sliding_window), not the
                 window + 1 transformers masks with; layers by hybrid_layer_pattern as written
    llama4       il % 4 < 3 chunked, n_swa 8192, whatever no_rope_layers / attention_chunk_size say
                 (src/models/llama4.cpp#L8-L19; conversion/llama.py#L396-L399 writes only sliding_window 0, for
                 layer_types all full_attention: then no layer is chunked)
Recurrent rows per layer and sequence (src/llama-hparams.cpp n_embd_r L208-L234, n_embd_s L236-L261;
f32), from the GGUF the converter writes:
    mamba, falcon_mamba  R = (d_conv - 1) x d_inner, S = d_state x d_inner; d_inner = intermediate_size
                 else 2 x hidden (llama.cpp@0c1e57098 conversion/mamba.py#L49, L61)
    mamba2       R = (d_conv - 1) x (d_inner + 2 x n_groups x d_state), S = d_state x d_inner;
                 d_inner = intermediate_size else expand x hidden (conversion/mamba.py Mamba2Model)
    granitemoehybrid, bamba  as mamba2 with d_inner = mamba_expand x hidden (conversion/granite.py L436)
    falcon_h1    as mamba2 with d_inner = mamba_d_ssm (llama.cpp@0c1e57098 conversion/falcon_h1.py#L31)
    lfm2, lfm2_moe  R = hidden x (conv_L_cache - 1), S = 0 (the short convolution; n_shortconv_l_cache)
    kimi_linear  R = 3 x (d_conv - 1) x n_head x kda_head_dim, S = kda_head_dim^2 x n_head, with n_head
                 the attention heads (hparams.n_head()), d_conv short_conv_kernel_size
    minimax      R = 0, S = head_dim^2 x n_head (lightning attention, n_embd_head_la); recurrent layers
                 are (il + 1) % 8 != 0: conversion/minimax.py writes neither the recurrent layers nor
                 the interval, and src/models/minimax-01.cpp falls back to 8
"""

from __future__ import annotations

from ...model import Model

__all__ = ["window_ignored", "config_window", "check_family", "ZERO_WIDTH_LAYERS"]

# Families whose blocks without attention still get K and V tensors of width 0 (head_count_kv 0 in
# the GGUF: src/llama-kv-cache.cpp allocates every layer hparams.has_kv marks, all of them here), so
# they count in the cache's layers and, without flash attention, take V rows padded to the widest
# ([TAG_V_CACHE_VARIABLE]): Nemotron-NAS / DeciLM (conversion/deci.py)
ZERO_WIDTH_LAYERS = {"nemotron-nas"}
_LLAMA4 = ("llama4", "llama4_text")


def _cfg(model: Model, name: str, default=None):
    cfg = model.config or {}
    text = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else {}
    value = cfg.get(name, text.get(name, default))
    return default if value is None else value


def window_ignored(model: Model) -> bool:
    """llama.cpp reads no window for this config: every layer holds n_ctx cells."""
    # src/models/exaone4.cpp load_arch_hparams: swa_type STANDARD only when n_layer == 64; EXAONE-4.5's text
    # model converts to the same architecture (llama.cpp@0c1e57098 conversion/exaone.py#L219-L224)
    return model.model_type in ("exaone4", "exaone4_5_text") and model.num_layers != 64


def config_window(model: Model) -> int | None:
    """The one n_swa llama.cpp takes where it is not the layers' own window (exaone_moe, mimo_v2_flash)."""
    if model.model_type in ("exaone_moe", "mimo_v2_flash"):
        return int(_cfg(model, "sliding_window"))
    return 8192 if model.model_type in _LLAMA4 else None


def _swa_layers(model: Model) -> list[bool] | None:
    """hparams.is_swa(il) as the family's GGUF sets it, where the rule is not kvmem's layer kinds."""
    n, t = model.num_layers, model.model_type
    window = _cfg(model, "sliding_window", 0) or 0
    if t == "afmoe":
        return [window > 0 and il % 4 < 3 for il in range(n)]
    if t in _LLAMA4:
        if getattr(model.checkpoint, "format", None) == "gguf":
            return None     # the file's own sliding_window (0: none chunked) and pattern, read as llama4.cpp reads them
        types = _cfg(model, "layer_types")              # (kvmem.sources.gguf_more._llama4)
        chunked = not (isinstance(types, list) and types and all(x == "full_attention" for x in types))
        return [chunked and il % 4 < 3 for il in range(n)]
    if t == "laguna":
        return [window > 0 and il % 4 != 0 for il in range(n)]
    if t == "step3p5":
        # llama.cpp@0c1e57098 conversion/step3.py#L144-L182: the pattern array from layer_types (full past its end)
        types = list(_cfg(model, "layer_types", []))[:n]
        types += ["full_attention"] * (n - len(types))
        return [kind == "sliding_attention" for kind in types]
    if t == "cohere2_moe":
        types = _cfg(model, "layer_types")
        if not isinstance(types, list) or len(types) != n:
            raise ValueError(f"{model.name}: llama.cpp's converter reads cohere2_moe's layer_types "
                             "(conversion/command_r.py L103); the config has none")
        return [kind == "sliding_attention" for kind in types]
    return None


def _mamba2_rows(d_conv: int, d_inner: int, n_group: int, d_state: int) -> tuple[int, int]:
    return (d_conv - 1) * (d_inner + 2 * n_group * d_state), d_state * d_inner


def _state_rows(model: Model) -> tuple[int, int] | None:
    """(R, S) elements per recurrent layer and sequence in llama.cpp's GGUF of this config."""
    t, hidden = model.model_type, model.hidden_size
    if t in ("mamba", "falcon_mamba"):
        d_inner = _cfg(model, "intermediate_size") or 2 * hidden
        d_conv, d_state = _cfg(model, "conv_kernel"), _cfg(model, "state_size")
        return _mamba2_rows(d_conv, d_inner, 0, d_state)
    if t == "mamba2":
        d_inner = _cfg(model, "intermediate_size") or (_cfg(model, "expand") or 2) * hidden
        return _mamba2_rows(_cfg(model, "conv_kernel"), d_inner, _cfg(model, "n_groups") or 1,
                            _cfg(model, "state_size"))
    if t in ("granitemoehybrid", "bamba", "falcon_h1"):
        d_inner = _cfg(model, "mamba_d_ssm") if t == "falcon_h1" else _cfg(model, "mamba_expand") * hidden
        return _mamba2_rows(_cfg(model, "mamba_d_conv"), d_inner, _cfg(model, "mamba_n_groups"),
                            _cfg(model, "mamba_d_state"))
    if t in ("lfm2", "lfm2_moe"):
        return hidden * (_cfg(model, "conv_L_cache") - 1), 0
    if t == "kimi_linear":
        linear = _cfg(model, "linear_attn_config")
        if not isinstance(linear, dict) or not linear.get("head_dim"):
            # llama.cpp@0c1e57098 conversion/kimi_linear.py#L90-L103: full_attn_layers and the KDA head_dim come from it
            raise ValueError(f"{model.name}: llama.cpp's converter reads Kimi-Linear's layers and KDA head_dim from "
                             "linear_attn_config (conversion/kimi_linear.py), which this config lacks")
        kda, heads = linear["head_dim"], model.num_attention_heads
        d_conv = linear.get("short_conv_kernel_size")
        return 3 * ((d_conv - 1) if d_conv else 3) * heads * kda, kda * kda * heads
    if t == "minimax":
        head_dim = _cfg(model, "head_dim") or hidden // model.num_attention_heads
        return 0, head_dim * head_dim * model.num_attention_heads
    return None


def check_family(model: Model) -> None:
    """Refuse a config whose llama.cpp GGUF would not hold the layers kvmem read."""
    t = model.model_type
    swa = _swa_layers(model)
    if swa is not None:
        ours = [layer.kind.windowed for layer in model.layers]
        if swa != ours:
            first = next(i for i in range(model.num_layers) if swa[i] != ours[i])
            raise ValueError(f"{model.name}: llama.cpp makes layer {first} {'sliding' if swa[first] else 'full'} "
                             f"({t}'s fixed pattern, kvmem.engines.llamacpp.families), where this config makes it "
                             f"{'sliding' if ours[first] else 'full'}; kvmem does not size the mix")
    if t == "gpt_bigcode" and any(layer.kv_heads != 1 for layer in model.layers if layer.caches_tokens):
        # llama.cpp@0c1e57098 conversion/starcoder.py#L17 writes head_count_kv 1 for every GPTBigCode checkpoint; a
        # multi_query=false c_attn (3 x n_embd wide) does not fit src/models/starcoder.cpp's attn_qkv
        raise ValueError(f"{model.name}: llama.cpp converts GPTBigCode as multi-query only (head_count_kv 1, "
                         "conversion/starcoder.py); a multi_query=false checkpoint does not load")
    d_inner = _cfg(model, "intermediate_size") or 2 * model.hidden_size
    if t in ("mamba", "falcon_mamba") and d_inner != 2 * model.hidden_size:
        # src/models/mamba.cpp load_arch_tensors: "only an expansion factor of 2 is supported for now"
        # (llama.cpp@0c1e57098 conversion/mamba.py#L61 asserts it too)
        raise ValueError(f"{model.name}: llama.cpp's mamba takes only d_inner = 2 x hidden_size (\"only an expansion "
                         "factor of 2 is supported for now\", src/models/mamba.cpp)")
    if t in ("granitemoehybrid", "bamba") and _cfg(model, "mamba_expand") != 2:
        # src/models/granite-hybrid.cpp load_arch_tensors: GGML_ASSERT(2 * n_embd == d_inner), d_inner being
        # mamba_expand x hidden (llama.cpp@0c1e57098 conversion/granite.py#L436)
        raise ValueError(f"{model.name}: llama.cpp's granitehybrid asserts d_inner = 2 x hidden_size "
                         f"(src/models/granite-hybrid.cpp); mamba_expand is {_cfg(model, 'mamba_expand')}")
    if t == "mimo_v2_flash" and _cfg(model, "swa_num_key_value_heads") is None:
        # conversion/mimo.py MimoV2Model.set_gguf_parameters reads swa_num_key_value_heads (and asserts the
        # SWA head dims equal the full ones): a config without it does not convert
        raise ValueError(f"{model.name}: llama.cpp's converter reads MiMo-V2's swa_num_key_value_heads "
                         "(conversion/mimo.py), which this config lacks")
    if t == "step3p5":
        # llama.cpp@0c1e57098 conversion/step3.py#L146-L152: sliding layers' head_count_kv from attention_other_setting
        base = _cfg(model, "num_attention_groups")
        if base is None:
            raise ValueError(f"{model.name}: llama.cpp's converter reads Step-3.5's num_attention_groups "
                             "(conversion/step3.py L149), which this config lacks")
        swa = (_cfg(model, "attention_other_setting") or {}).get("num_attention_groups", base)
        for i, layer in enumerate(model.layers):
            want = swa if layer.kind.windowed else base
            if layer.caches_tokens and layer.kv_heads != want:
                raise ValueError(f"{model.name}: layer {i} keeps {layer.kv_heads} K/V heads in kvmem's reading but "
                                 f"{want} in llama.cpp's step35 GGUF (conversion/step3.py head_count_kv)")
    if t == "minimax":
        recurrent = [layer.state is not None for layer in model.layers]
        if recurrent != [(il + 1) % 8 != 0 for il in range(model.num_layers)]:
            raise ValueError(f"{model.name}: llama.cpp's minimax-01 takes every eighth layer as full attention "
                             "and the rest as lightning attention (src/models/minimax-01.cpp: the converter writes "
                             "no layer list); this config's attn_type_list differs")
    rows = _state_rows(model)
    if rows is not None:
        for i, layer in enumerate(model.layers):
            if layer.state is None:
                continue
            ours = (layer.state.conv_channels * max(layer.state.conv_kernel - 1, 0), layer.state.ssm_elements)
            if ours != rows:
                raise ValueError(f"{model.name}: layer {i}'s recurrent state is {ours[0]} + {ours[1]} values in "
                                 f"kvmem's reading but {rows[0]} + {rows[1]} in llama.cpp's {t} GGUF (n_embd_r, "
                                 "n_embd_s); kvmem does not size the difference")
            break

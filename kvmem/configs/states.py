"""The per-sequence state of a linear-attention or SSM layer, by family (modeling files named).

    interval (qwen3_next, qwen3_5)  gated DeltaNet: conv over 2 x key_dim + value_dim channels,
                                    recurrent [v_heads, k_dim, v_dim] (modeling_qwen3_next.py) in
                                    mamba_ssm_dtype where the config names it (Qwen3.5: float32)
    jamba                           Mamba: conv over inner = mamba_expand x hidden, recurrent
                                    [inner, mamba_d_state] (modeling_jamba.py JambaMambaMixer)
    nemotron_h                      Mamba2: conv over inner + 2 x n_groups x ssm_state_size,
                                    recurrent [heads, head_dim, ssm_state_size]
                                    (modeling_nemotron_h.py NemotronHMamba2Mixer) in
                                    mamba_ssm_cache_dtype (float32 by default)
    kimi_linear                     KDA: conv over 3 x heads x head_dim channels, recurrent
                                    [heads, head_dim, head_dim] (modeling_kimi_linear.py
                                    KimiLinearDeltaAttention; linear_attn_config names them), fp32
    minimax                         lightning attention: no conv, recurrent [heads, head_dim,
                                    head_dim] (modeling_minimax.py MiniMaxLightningAttention)
    granite_hybrid, bamba, falcon_h1  Mamba2: conv over inner + 2 x mamba_n_groups x mamba_d_state,
                                    inner = mamba_expand x hidden (Falcon-H1: mamba_d_ssm when set),
                                    recurrent [mamba_n_heads, mamba_d_head, mamba_d_state]
                                    (modeling_granitemoehybrid.py, modeling_bamba.py, modeling_falcon_h1.py)
    mamba (falcon_mamba)            Mamba: conv over inner = expand x hidden, recurrent [inner, state_size]
                                    (modeling_mamba.py MambaMixer)
    mamba2                          Mamba2: conv over inner + 2 x n_groups x state_size, recurrent
                                    [num_heads, head_dim, state_size] (modeling_mamba2.py Mamba2Mixer)
    lfm2                            short convolution: conv over hidden_size channels, kernel
                                    conv_L_cache, no recurrent state (modeling_lfm2.py)
    inkling (per layer)             four short convolutions beside the attention, kernel
                                    conv_kernel_size: over K and V (that layer's KV heads x head dim
                                    each) and over the attention's and the MLP's outputs (hidden_size
                                    each), kept in float32 (modeling_inkling.py InklingShortConvolution
                                    runs in fp32); no recurrent state
    bailing (bailing_hybrid)        KDA as kimi_linear: conv over 3 x linear_num_heads x linear_head_dim,
                                    recurrent [heads, head_dim, head_dim] in fp32
                                    (modeling_bailing_hybrid.py BailingHybridDeltaAttention)
    zaya                            CCA: conv over (num_attention_heads + num_key_value_heads) x
                                    head_dim channels, a receptive field of cca_time0 + cca_time1 - 1
                                    tokens; recurrent: the previous token's delayed value projection,
                                    num_key_value_heads x head_dim / 2 (modeling_zaya.py ZayaCCAProjection)
"""

from __future__ import annotations

from ..errors import ConfigError
from ..layer import RecurrentState
from .families import Family
from .fields import Fields, check_int

__all__ = ["recurrent_state", "hybrid_state"]

_STATE_DTYPES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}


def _ssm_dtype(f: Fields, *names: str) -> str | None:
    """The recurrent state's dtype the config names (``mamba_ssm_dtype`` ...), or None."""
    value = f.get(*names, default=None)
    if value is None:
        return None
    name = str(value).removeprefix("torch.")
    if name not in _STATE_DTYPES:
        raise ConfigError(f"config field {names[0]!r} is {value!r}; kvmem reads {', '.join(_STATE_DTYPES)}")
    return _STATE_DTYPES[name]


def _whole(f: Fields, name: str) -> int:
    """An expansion factor (mamba_expand, expand): a whole number in every published config."""
    expand = f.get(name)
    if isinstance(expand, float) and expand.is_integer():
        expand = int(expand)
    return check_int(name, expand)


def recurrent_state(f: Fields, family: Family) -> RecurrentState:
    """The per-sequence state of this family's linear-attention or SSM layers."""
    if family.layout == "interval":
        k_heads, v_heads = f.int("linear_num_key_heads"), f.int("linear_num_value_heads")
        k_dim, v_dim = f.int("linear_key_head_dim"), f.int("linear_value_head_dim")
        conv = 2 * k_heads * k_dim + v_heads * v_dim
        return RecurrentState(conv, f.int("linear_conv_kernel_dim"), v_heads * k_dim * v_dim, v_heads,
                              _ssm_dtype(f, "mamba_ssm_dtype"))
    if family.layout == "jamba":
        inner = f.int("mamba_expand") * f.int("hidden_size")
        return RecurrentState(inner, f.int("mamba_d_conv"), inner * f.int("mamba_d_state"), inner)
    if family.layout == "nemotron_h":
        heads, head_dim = f.int("mamba_num_heads"), f.int("mamba_head_dim")
        state, groups = f.int("ssm_state_size"), f.int("n_groups")
        inner = heads * head_dim
        return RecurrentState(inner + 2 * groups * state, f.int("conv_kernel"), inner * state, heads,
                              _ssm_dtype(f, "mamba_ssm_cache_dtype"))
    if family.layout == "kimi_linear":
        lac = f.get("linear_attn_config", default=None) or {}
        heads = check_int("linear_attn_config.num_heads", lac.get("num_heads", f.get("linear_num_heads", default=None)))
        dim = check_int("linear_attn_config.head_dim", lac.get("head_dim", f.get("linear_head_dim", default=None)))
        kernel = check_int("linear_attn_config.short_conv_kernel_size",
                           lac.get("short_conv_kernel_size", f.get("linear_conv_kernel_dim", default=None)))
        # modeling_kimi_linear.py: update_recurrent_state(last_recurrent_state.to(torch.float32))
        return RecurrentState(3 * heads * dim, kernel, heads * dim * dim, heads, "fp32")
    if family.layout == "bailing":
        # BailingHybridConfig.__post_init__: linear_num_heads = num_attention_heads, linear_head_dim =
        # head_dim, linear_conv_kernel_dim = short_conv_kernel_size, unless the file names them
        heads = f.int("linear_num_heads" if f.has("linear_num_heads") else "num_attention_heads")
        dim = f.int("linear_head_dim" if f.has("linear_head_dim") else "head_dim")
        kernel = f.int("linear_conv_kernel_dim" if f.has("linear_conv_kernel_dim") else "short_conv_kernel_size")
        # modeling_bailing_hybrid.py: update_recurrent_state(last_recurrent_state.to(torch.float32))
        return RecurrentState(3 * heads * dim, kernel, heads * dim * dim, heads, "fp32")
    if family.layout == "minimax":
        heads = f.int("num_attention_heads")
        dim = f.int("head_dim", default=None) or f.int("hidden_size") // heads
        return RecurrentState(0, 0, heads * dim * dim, heads)
    if family.layout in ("granite_hybrid", "bamba", "falcon_h1"):
        hidden, heads = f.int("hidden_size"), f.int("mamba_n_heads")
        given = f.int("mamba_d_ssm", default=None) if family.layout == "falcon_h1" else None
        inner = given or _whole(f, "mamba_expand") * hidden
        head_dim = f.get("mamba_d_head", default="auto")
        head_dim = inner // heads if head_dim == "auto" else f.int("mamba_d_head")
        if heads * head_dim != inner:
            raise ConfigError(f"mamba_n_heads ({heads}) x mamba_d_head ({head_dim}) must equal the mixer's "
                              f"inner width ({inner})")
        groups, d_state = f.int("mamba_n_groups"), f.int("mamba_d_state")
        return RecurrentState(inner + 2 * groups * d_state, f.int("mamba_d_conv"), inner * d_state, heads)
    if family.layout == "mamba":
        inner = _whole(f, "expand") * f.int("hidden_size")
        return RecurrentState(inner, f.int("conv_kernel"), inner * f.int("state_size"), inner)
    if family.layout == "mamba2":
        heads, head_dim, d_state = f.int("num_heads"), f.int("head_dim"), f.int("state_size")
        inner = _whole(f, "expand") * f.int("hidden_size")
        if heads * head_dim != inner:
            raise ConfigError(f"num_heads ({heads}) x head_dim ({head_dim}) must equal expand x hidden_size ({inner})")
        return RecurrentState(inner + 2 * f.int("n_groups") * d_state, f.int("conv_kernel"), inner * d_state, heads)
    if family.layout == "lfm2":
        return RecurrentState(f.int("hidden_size"), f.int("conv_L_cache"), 0, 1)
    if family.layout == "zaya":
        q_heads, kv_heads, head_dim = f.int("num_attention_heads"), f.int("num_key_value_heads"), f.int("head_dim")
        field = f.int("cca_time0") + f.int("cca_time1") - 1
        return RecurrentState((q_heads + kv_heads) * head_dim, field, kv_heads * head_dim // 2, kv_heads)
    raise ConfigError(f"model_type {f.model_type!r} has linear/mamba layers but kvmem does not know its state "
                      "layout; it reads the states of qwen3_next, qwen3_5, jamba, nemotron_h, kimi_linear, "
                      "minimax and lfm2")


def hybrid_state(f: Fields, kv_heads: int, head_dim: int) -> RecurrentState:
    """Inkling: the short convolutions beside one layer's attention of ``kv_heads`` x ``head_dim``."""
    # the file's own values only: a family default filled in beside the file's alias (transformers' class default
    # conv_kernel_size 4) would "disagree" with a real checkpoint's sconv_kernel_size 3
    kernel = f.int("conv_kernel_size") if f.has("conv_kernel_size") else None
    alias = f.int("sconv_kernel_size") if f.has("sconv_kernel_size") else None
    if kernel and alias and kernel != alias:
        raise ConfigError(f"config fields 'conv_kernel_size' ({kernel}) and 'sconv_kernel_size' ({alias}) name one "
                          f"setting (configuration_inkling.py attribute_map) and disagree")
    states = f.int("number_of_conv_states", default=4)
    if states != 4:
        raise ConfigError(f"config field 'number_of_conv_states' is {states}; model_type {f.model_type!r} keeps 4 "
                          "(K, V, attention output, MLP output)")
    channels = 2 * kv_heads * head_dim + 2 * f.int("hidden_size")
    # neither in the file: the config class's default (4)
    width = kernel or alias or f.int("conv_kernel_size")
    return RecurrentState(channels, width, 0, kv_heads, conv_dtype="fp32")

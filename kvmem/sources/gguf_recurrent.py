"""The recurrent llama.cpp architectures of kvmem/sources/gguf_more.py (split for length): Mamba / Mamba-2,
Falcon-H1, the hybrids whose recurrent layers have head_count_kv 0 (LFM2, Granite 4, Kimi-Linear), read as each
src/models/<arch>.cpp load_arch_hparams reads them, as their Hugging Face config fields."""

from __future__ import annotations

from . import SourceError

__all__ = ["mamba_fields", "falcon_h1_fields", "recurrent_by_kv_fields", "kimi_linear_fields"]


def mamba_fields(cfg: dict, key, arch: str) -> None:
    """Mamba / Mamba-2 (mamba.cpp, mamba2.cpp load_arch_hparams: ssm.conv_kernel, inner_size, state_size,
    time_step_rank, group_count; conversion/mamba.py MambaModel L46-L74, Mamba2Model L143-L166 write head_count 0
    and time_step_rank = inner / head_dim for Mamba-2) as configuration_mamba.py / configuration_mamba2.py fields;
    ssm.dt_b_c_rms marks Falcon-Mamba (L56-L59)."""
    hidden, inner = cfg["hidden_size"], key("ssm.inner_size")
    if not hidden or inner % hidden:
        raise SourceError(f"GGUF {arch}.ssm.inner_size ({inner}) is not a multiple of embedding_length ({hidden}); "
                          "kvmem reads the mixer's width as expand x hidden_size")
    for name in ("num_attention_heads", "num_key_value_heads", "intermediate_size", "head_dim"):
        cfg.pop(name, None)
    cfg.update(state_size=key("ssm.state_size"), conv_kernel=key("ssm.conv_kernel"), expand=inner // hidden)
    if arch == "mamba":
        cfg.update(model_type="falcon_mamba" if key("ssm.dt_b_c_rms", 0) else "mamba", intermediate_size=inner,
                   time_step_rank=key("ssm.time_step_rank"))
        return
    heads = key("ssm.time_step_rank")
    if not heads or inner % heads:
        raise SourceError(f"GGUF mamba2.ssm.time_step_rank ({heads}) does not divide ssm.inner_size ({inner})")
    cfg.update(num_heads=heads, head_dim=inner // heads, n_groups=key("ssm.group_count"))

def falcon_h1_fields(cfg: dict, key) -> None:
    """Falcon-H1: attention and a Mamba-2 mixer in every layer (falcon-h1.cpp#L3-L14); conversion/falcon_h1.py
    FalconH1Model L98-L119 writes Mamba2Model's ssm keys (inner_size mamba_d_ssm, time_step_rank = inner /
    mamba_d_head) and the attention's; configuration_falcon_h1.py fields."""
    inner, heads = key("ssm.inner_size"), key("ssm.time_step_rank")
    if not heads or inner % heads:
        raise SourceError(f"GGUF falcon-h1.ssm.time_step_rank ({heads}) does not divide ssm.inner_size ({inner})")
    cfg.update(mamba_d_ssm=inner, mamba_n_heads=heads, mamba_d_head=inner // heads, mamba_n_groups=key(
        "ssm.group_count"), mamba_d_state=key("ssm.state_size"), mamba_d_conv=key("ssm.conv_kernel"))

def recurrent_by_kv_fields(cfg: dict, key, arch: str, trunk: int) -> None:
    """LFM2 / LFM2-MoE (short convolutions where head_count_kv is 0; shortconv.l_cache) and Granite 4 hybrids
    (Mamba-2 there: ssm.inner_size, time_step_rank = heads, group_count, state_size, conv_kernel; conversion/granite.py
    GraniteHybridModel L486-L512) as configuration_lfm2(_moe).py / configuration_granitemoehybrid.py fields."""
    kv = key("attention.head_count_kv")
    kv = kv if isinstance(kv, list) else [kv] * trunk
    if arch != "granitehybrid":
        if cfg.get("sliding_window"):
            # lfm2.cpp#L26-L30: a window makes every attention layer sliding, which configuration_lfm2.py has not
            raise SourceError(f"GGUF {arch}.attention.sliding_window is {cfg['sliding_window']}: llama.cpp slides "
                              "every attention layer of it; kvmem reads LFM2's attention layers as full")
        cfg.update(conv_L_cache=key("shortconv.l_cache"),
                   layer_types=["full_attention" if h else "conv" for h in kv[:trunk]])
        if arch == "lfm2moe":
            cfg["num_dense_layers"] = key("leading_dense_block_count", 0)
        return
    hidden, inner, heads = cfg["hidden_size"], key("ssm.inner_size"), key("ssm.time_step_rank")
    if not hidden or not heads or inner % hidden or inner % heads:
        raise SourceError(f"GGUF granitehybrid.ssm.inner_size ({inner}) is not a multiple of embedding_length "
                          f"({hidden}) and ssm.time_step_rank ({heads}); kvmem reads it as mamba_expand x hidden_size")
    cfg.update(layer_types=["attention" if h else "mamba" for h in kv[:trunk]], mamba_n_heads=heads,
               mamba_d_head=inner // heads, mamba_n_groups=key("ssm.group_count"), mamba_d_state=key("ssm.state_size"),
               mamba_d_conv=key("ssm.conv_kernel"), mamba_expand=inner // hidden,
               shared_intermediate_size=key("expert_shared_feed_forward_length", 0))


def kimi_linear_fields(cfg: dict, key, trunk: int) -> None:
    """Kimi-Linear: MLA where head_count_kv > 0, KDA (kda.head_dim, ssm.conv_kernel) elsewhere (kimi-linear.cpp
    L4-L26); conversion/kimi_linear.py L78-L142 writes value_length the config's head_dim (base.py L1545) and the
    MLA widths as key/value_length_mla: configuration_kimi_linear.py's linear_attn_config (1-indexed layers)."""
    kv = key("attention.head_count_kv")
    kv = kv if isinstance(kv, list) else [kv] * trunk
    rope, heads = key("rope.dimension_count"), cfg["num_attention_heads"]
    cfg.update(linear_attn_config={"full_attn_layers": [i + 1 for i in range(trunk) if kv[i]],
                                   "kda_layers": [i + 1 for i in range(trunk) if not kv[i]], "num_heads": heads,
                                   "head_dim": key("kda.head_dim"), "short_conv_kernel_size": key("ssm.conv_kernel")},
               kv_lora_rank=key("attention.kv_lora_rank"), q_lora_rank=key("attention.q_lora_rank", None),
               qk_rope_head_dim=rope, qk_nope_head_dim=key("attention.key_length_mla") - rope,
               v_head_dim=key("attention.value_length_mla"), head_dim=key("attention.value_length"),
               num_key_value_heads=heads, first_k_dense_replace=key("leading_dense_block_count", 0),
               num_shared_experts=key("expert_shared_count", 0))

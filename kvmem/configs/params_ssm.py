"""Parameter layouts of the Mamba-2 families (kvmem/configs/params.py asks here).

    mamba2   a Mamba-2 mixer and one RMSNorm a layer
    bamba    a Mamba-2 mixer or (attn_layer_indices) a plain attention, then a gated MLP on every
             layer; input_layernorm and pre_ff_layernorm
    granitemoehybrid  (Granite 4.0) a Mamba-2 mixer or an attention by layer, then the routed
             experts (num_local_experts of intermediate_size, a router; none when 0) beside a shared
             gated MLP of shared_intermediate_size on every layer (modeling_granitemoehybrid.py
             GraniteMoeHybridDecoderLayer, #L953-L955)
    falcon_h1  every layer an attention and a Mamba-2 mixer side by side, then a gated MLP; the mixer's
             width is mamba_d_ssm (else expand x hidden), its gated norm only under mamba_rms_norm,
             out_proj biased under projectors_bias (modeling_falcon_h1.py FalconH1Mixer #L598-L653)

A Mamba-2 mixer (transformers@5.24.0 models/mamba2/modeling_mamba2.py Mamba2Mixer, the same in
models/bamba/modeling_bamba.py BambaMixer): in_proj hidden -> inner + conv channels + heads (gate,
x/B/C, dt), a depthwise conv over the conv channels (inner + 2 x n_groups x state), dt_bias,
A_log and D per head, a gated RMSNorm of inner, out_proj inner -> hidden; biases under
use_bias / mamba_proj_bias and use_conv_bias / mamba_conv_bias. The conv channels, kernel and heads
are kvmem's reading of the state (kvmem.configs.states); inner is int(expand x hidden), as the mixer
takes it. Judged by transformers 5.24 on the meta device (tests/oracles/test_params_oracle.py).
"""

from __future__ import annotations

from ..layer import LINEAR

__all__ = ["SSM_FAMILIES", "ssm_body"]

SSM_FAMILIES = frozenset({"mamba2", "bamba", "granitemoehybrid", "falcon_h1"})
# family: (expand, projection bias, conv bias) field names and the conv bias default
_NAMES = {"mamba2": ("expand", "use_bias", "use_conv_bias"),
          "bamba": ("mamba_expand", "mamba_proj_bias", "mamba_conv_bias"),
          "granitemoehybrid": ("mamba_expand", "mamba_proj_bias", "mamba_conv_bias")}


def _mixer(f, layer, hidden: int) -> int:
    expand, proj_bias, conv_bias = _NAMES[f.model_type]
    s = layer.state
    inner = int(f.get(expand) * hidden)
    width = inner + s.conv_channels + s.ssm_heads
    n = hidden * width + s.conv_channels * s.conv_kernel + 3 * s.ssm_heads + inner + inner * hidden
    if f.get(proj_bias, default=False):
        n += width + hidden
    if f.get(conv_bias, default=True):
        n += s.conv_channels
    return n


def _falcon_h1_mixer(f, hidden: int) -> int:
    inner = f.int("mamba_d_ssm", default=None) or int(f.get("mamba_expand") * hidden)
    heads, conv = f.int("mamba_n_heads"), inner + 2 * f.int("mamba_n_groups") * f.int("mamba_d_state")
    width = inner + conv + heads
    n = hidden * width + conv * f.int("mamba_d_conv") + 3 * heads + inner * hidden
    n += width if f.get("mamba_proj_bias", default=False) else 0
    n += conv if f.get("mamba_conv_bias", default=True) else 0
    n += inner if f.get("mamba_rms_norm", default=False) else 0
    return n + (hidden if f.get("projectors_bias", default=False) else 0)


def _mlp(f, hidden: int) -> tuple[int, int]:
    """(all, active) of one layer's MLP block."""
    if f.model_type == "granitemoehybrid":
        shared = 3 * hidden * f.int("shared_intermediate_size")
        experts = f.int("num_local_experts", default=0, minimum=0)
        if not experts:
            return shared, shared
        one = 3 * hidden * f.int("intermediate_size")
        common = shared + experts * hidden   # + the router
        return experts * one + common, f.int("num_experts_per_tok") * one + common
    inter = f.int("intermediate_size")
    n = 3 * hidden * inter + ((2 * inter + hidden) if f.get("mlp_bias", default=False) else 0)
    return n, n


def ssm_body(f, layers, *, hidden: int, heads: int) -> tuple[int, int]:
    """(total, active) of the decoder layers of a SSM_FAMILIES config."""
    total = active = 0
    for layer in layers:
        if f.model_type == "mamba2":
            n = _mixer(f, layer, hidden) + hidden
            total, active = total + n, active + n
            continue
        if layer.kind == LINEAR:
            mix = _mixer(f, layer, hidden)
        else:   # Bamba / GraniteMoeHybrid / FalconH1 attention: q, k, v, o (attention_bias)
            hd, kv = layer.head_dim_k, layer.kv_heads
            mix = 2 * hidden * heads * hd + 2 * hidden * kv * hd
            if f.get("attention_bias", default=False):
                mix += heads * hd + 2 * kv * hd + hidden
            if f.model_type == "falcon_h1":
                mix += _falcon_h1_mixer(f, hidden)
        mlp, mlp_active = _mlp(f, hidden)
        total += mix + mlp + 2 * hidden
        active += mix + mlp_active + 2 * hidden
    return total, active

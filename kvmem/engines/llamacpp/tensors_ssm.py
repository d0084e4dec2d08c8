"""llama.cpp's Mamba hybrids laid out from a config: jamba (AI21 Jamba: Mamba-1 layers, attention every
attn_layer_period-th, MoE every expert_layer_period-th) and nemotron_h / nemotron_h_moe (NVIDIA Nemotron-H,
Nemotron 3: Mamba-2, attention and MLP or MoE layers by hybrid_override_pattern), their tensors as convert_hf_to_gguf
writes them and load_arch_tensors asks for them, and the widths their graphs (graphs_ssm) read.

From the vendored llama.cpp (llama-cpp-python 0.3.36, llama.cpp 0c1e57098):

    jamba       conversion/jamba.py#L25-L55 set_gguf_parameters: d_inner = mamba_expand x hidden, d_conv
                mamba_d_conv (else 4), d_state mamba_d_state (else 16), dt_rank mamba_dt_rank (else ceil(hidden /
                16)), head_count_kv per layer (attn_layer_offset / attn_layer_period, 0 elsewhere), one
                feed_forward_length (intermediate_size); #L59-L69: a layer's FFN is routed where il >=
                expert_layer_offset and (il - offset) % expert_layer_period == 0. src/models/jamba.cpp#L23-L102
                load_arch_tensors: 2 x n_embd == d_inner asserted; per layer attn_norm, a Mamba-1 layer (n_head_kv
                0: ssm_in, ssm_conv1d and its bias, ssm_x, ssm_dt_norm, ssm_dt and its bias, ssm_b_norm,
                ssm_c_norm, ssm_a [d_state, d_inner], ssm_d, ssm_out) or Q/K/V/output, ffn_norm, then a router
                and gate/down/up experts, or a dense gate/down/up FFN.
    nemotron_h  conversion/nemotron.py#L211-L252: the architecture is nemotron_h_moe where the config has
                num_experts_per_tok; 'M' Mamba-2, '*' attention, '-' (dense) or 'E' (MoE) an FFN layer of
                hybrid_override_pattern; d_inner = mamba_num_heads x mamba_head_dim (#L236-L237), ssm heads
                mamba_num_heads, n_groups, ssm_state_size, conv_kernel (conversion/granite.py#L434-L436,
                #L497-L503); head_dim / attention_head_dim (#L233), feed_forward_length per layer (#L337-L346),
                the MoE keys (#L343-L361, moe_latent_size optional); the vocabulary padded to a multiple of 8
                (#L378-L385). src/models/nemotron-h.cpp#L49-L140 load_arch_tensors: attn_norm, then ssm_in
                [n_embd, 2 d_inner + 2 n_group d_state + n_head], ssm_conv1d (+ bias), ssm_dt.bias, ssm_a and ssm_d
                [1, n_head], ssm_norm [d_inner / n_group, n_group], ssm_out; or Q/K/V/output (biases optional); or
                ffn_up/ffn_down (biases optional), or router, exp_probs_b, the optional latent projections,
                down/up experts (no gate: relu^2) and the shared expert's up/down. The NextN block of a config with
                num_nextn_predict_layers: its MTP block (nemotron_mtp) counted, not loaded.
"""

from __future__ import annotations

from dataclasses import dataclass

from .arch_fields import field
from .graphs_delta import DeltaShape
from .settings import PR_26725, build_date

__all__ = ["SSM", "SsmShape", "layer_kinds", "mtp_block", "nemotron_arch", "nemotron_mtp", "ssm_tensors", "ssm_shape",
           "ssm_vocab"]

# TextModel.set_gguf_parameters' layer_norm_eps keys (conversion/base.py#L1514), with GraniteHybridModel's prefix
_EPS = ("layer_norm_eps", "layer_norm_epsilon", "norm_epsilon", "mamba_layer_norm_eps", "mamba_layer_norm_epsilon",
        "mamba_norm_epsilon")
# kvmem model_type -> llama.cpp architecture (llama-arch.cpp LLM_ARCH_NAMES); nemotron_h may be nemotron_h_moe
SSM = {"jamba": "jamba", "nemotron_h": "nemotron_h"}


@dataclass(frozen=True)
class SsmShape(DeltaShape):
    """DeltaShape's widths (recurrent: a Mamba layer; n_v_heads: the ssm heads, n_k_heads: the groups) and, per
    layer, moe_layers: jamba's routed FFNs; nemotron_h's FFN layers (MoE in nemotron_h_moe, relu^2 in nemotron_h),
    its other non-Mamba layers attention (scheduled.reduced_layers keeps both with the layers it keeps)."""

    moe_layers: tuple = ()
    dt_rank: int = 0            # jamba's Mamba-1 dt rank
    latent: int = 0             # nemotron_h_moe's moe_latent_size (0: none)
    mlp_bias: bool = False      # nemotron_h's ffn_up / ffn_down biases


def nemotron_mtp(model, build=None) -> int:
    """The MTP blocks the default converter writes after a Nemotron-H MoE trunk (counted in block_count, written as
    nextn_predict_layers; conversion/nemotron.py#L254-L267, #L363-L365): num_nextn_predict_layers, from PR #26725
    (2026-08-10); the converter before it skipped mtp.* (conversion/nemotron.py#L353-L360 at 7a20b417f's parent),
    so a ``build`` (its date) before it reads a trunk-only file. llama.cpp creates the block's tensors with
    TENSOR_SKIP without load_mtp (nemotron-h.cpp#L142-L181): none is loaded, the block is counted (-ts, quantiser)."""
    # llama.cpp@0c1e57098 src/models/nemotron-h.cpp#L142-L181
    if model.model_type != "nemotron_h" or nemotron_arch(model) != "nemotron_h_moe":
        return 0
    if build is not None and build_date(build) < PR_26725:
        return 0
    n = field(model, "num_nextn_predict_layers", 0) or 0
    return n if n == 1 else 0


def mtp_block(model, h: int) -> list:
    """(name, ne) of the MTP block as the converter writes it (for a GGUF's full tensor list: the oracle's files),
    from nemotron-h.cpp#L144-L181: the NextN input fusion, the attention sub-layer, the MoE one."""
    s = ssm_shape(model)
    if s is None:
        raise ValueError(f"{model.name}: not a jamba / nemotron_h config llama.cpp loads (tensors_ssm)")
    b, q, kv = f"blk.{model.num_layers}.", s.n_head * s.head_dim, s.n_head_kv * s.head_dim
    lat = s.latent or h
    out = [(b + "nextn.enorm.weight", (h,)), (b + "nextn.hnorm.weight", (h,)), (b + "nextn.eh_proj.weight", (2 * h, h)),
           (b + "nextn.shared_head_norm.weight", (h,)), (b + "attn_norm.weight", (h,)), (b + "attn_q.weight", (h, q)),
           (b + "attn_k.weight", (h, kv)), (b + "attn_v.weight", (h, kv)), (b + "attn_output.weight", (q, h)),
           (b + "post_attention_norm.weight", (h,)), (b + "ffn_gate_inp.weight", (h, s.n_expert)),
           (b + "exp_probs_b.bias", (s.n_expert,))]
    out += [(b + "ffn_latent_down.weight", (h, lat)), (b + "ffn_latent_up.weight", (lat, h))] if s.latent else []
    return out + [(b + "ffn_down_exps.weight", (s.n_ff_exp, lat, s.n_expert)),
                  (b + "ffn_up_exps.weight", (lat, s.n_ff_exp, s.n_expert)),
                  (b + "ffn_down_shexp.weight", (s.n_ff_shexp, h)), (b + "ffn_up_shexp.weight", (h, s.n_ff_shexp))]


def layer_kinds(s: SsmShape) -> str:
    """Each layer's letter: "M" Mamba, "*" attention, "-" a dense FFN layer, "E" a MoE one (nemotron_h's; jamba's
    layers are "M" or "*")."""
    ffn = "E" if s.n_expert else "-"
    pairs = zip(s.recurrent, s.moe_layers, strict=True)
    return "".join("M" if r else ffn if m and s.arch != "jamba" else "*" for r, m in pairs)


def _int(model, name: str, default=None) -> int:
    value = field(model, name, default)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{model.name}: config field {name!r} is {value!r}; llama.cpp's converter reads it as a "
                         f"positive integer for {model.model_type} (kvmem.engines.llamacpp.tensors_ssm)")
    return value


def _first(model, keys: tuple) -> int:
    """find_hparam: the first of ``keys`` the config has (conversion/base.py#L211-L217), a positive integer."""
    name = next((k for k in keys if field(model, k) is not None), keys[0])
    return _int(model, name)


def nemotron_arch(model) -> str:
    """nemotron_h_moe where the config has num_experts_per_tok (conversion/nemotron.py#L219-L226), else nemotron_h."""
    cfg = model.config or {}
    merged = {**cfg, **(cfg.get("llm_config") or {})}
    return "nemotron_h_moe" if "num_experts_per_tok" in merged else "nemotron_h"


def ssm_vocab(model) -> int:
    """The GGUF's vocabulary: nemotron_h pads it to a multiple of 8 (conversion/nemotron.py#L378-L385)."""
    vocab = model.facts.vocab_size
    return -(vocab // -8) * 8 if vocab and model.model_type == "nemotron_h" else vocab


def _whole(model, name: str) -> int:
    value = field(model, name)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{model.name}: config field {name!r} is {value!r}; llama.cpp's converter reads it as a "
                         "whole number (conversion/jamba.py#L36, #L64)")
    return value


def _jamba_kinds(model) -> tuple[str, str]:
    # conversion/jamba.py#L36-L40 (attn_layer_offset / _period), #L64-L67 (expert_layer_offset / _period): read
    # with hparams[...], no default
    n = model.num_layers
    a_off, a_per = _whole(model, "attn_layer_offset"), _int(model, "attn_layer_period")
    e_off, e_per = _whole(model, "expert_layer_offset"), _int(model, "expert_layer_period")
    routed = _first(model, ("num_local_experts", "num_experts")) > 1
    kinds = "".join("*" if il >= a_off and (il - a_off) % a_per == 0 else "M" for il in range(n))
    ffns = "".join("E" if routed and il >= e_off and (il - e_off) % e_per == 0 else "-" for il in range(n))
    return kinds, ffns


def _nemotron_kinds(model, arch: str) -> str:
    pattern = field(model, "hybrid_override_pattern") or field(model, "layers_block_type")
    if isinstance(pattern, list):     # conversion/nemotron.py#L207-L209, #L250-L252: layer type names
        pattern = "".join("M" if t in ("mamba", "linear_attention") else "*" if t in ("attention", "full_attention")
                          else "E" if t == "moe" else "?" for t in pattern)
    ffn = "E" if arch == "nemotron_h_moe" else "-"
    if not isinstance(pattern, str) or len(pattern) != model.num_layers or set(pattern) - {"M", "*", ffn}:
        raise ValueError(f"{model.name}: llama.cpp's {arch} reads each layer from hybrid_override_pattern ('M', '*', "
                         f"'{ffn}'; conversion/nemotron.py#L243-L252), and this config's is {str(pattern)[:80]!r} for "
                         f"{model.num_layers} layers: a layer with neither state, heads nor FFN does not load")
    return pattern


def _check(model, arch: str) -> None:
    n_mtp = field(model, "num_nextn_predict_layers", 0) or 0
    if arch == "nemotron_h_moe" and n_mtp not in (0, 1):
        raise ValueError(f"{model.name}: num_nextn_predict_layers {n_mtp!r}: llama.cpp's converter asserts one MTP "
                         "block (\"NemotronH MTP conversion currently supports num_nextn_predict_layers == 1\", "
                         "conversion/nemotron.py#L256-L261)")
    if field(model, "mamba_proj_bias", False) or field(model, "use_bias", False):
        raise ValueError(f"{model.name}: mamba_proj_bias / use_bias: the checkpoint's in/out projection biases are "
                         f"not tensors llama.cpp's {arch} loads (src/models/{arch.replace('_moe', '')}.cpp "
                         "load_arch_tensors: 'wrong number of tensors')")
    if arch != "jamba" and field(model, "use_conv_bias", True) is False:
        raise ValueError(f"{model.name}: use_conv_bias false: llama.cpp's {arch} graph adds ssm_conv1d.bias to every "
                         "Mamba-2 convolution (src/models/mamba-base.cpp#L235), which such a checkpoint lacks")
    if arch != "jamba" and all(field(model, k) is None for k in _EPS):
        raise ValueError(f"{model.name}: config field 'layer_norm_epsilon' (or layer_norm_eps / norm_epsilon) is "
                         f"missing: llama.cpp's {arch} requires attention.layer_norm_epsilon (src/models/nemotron-h.cpp"
                         "#L18), which the converter writes from those fields alone (conversion/base.py#L1514-L1515)")
    experts, used = field(model, "n_routed_experts" if arch != "jamba" else "num_experts"), \
        field(model, "num_experts_per_tok")
    if arch != "nemotron_h" and isinstance(experts, int) and isinstance(used, int) and used > experts:
        raise ValueError(f"{model.name}: num_experts_per_tok {used} > {experts} experts: llama.cpp asserts "
                         "n_expert_used <= n_expert at load (src/llama-model.cpp#L1362)")
    if arch == "jamba":
        for name in ("mamba_expand", "num_key_value_heads", "intermediate_size", "num_experts_per_tok"):
            _int(model, name)       # conversion/jamba.py#L28-L54: hparams[...] / find_hparam, no default
        if field(model, "mamba_expand", 2) != 2:
            raise ValueError(f"{model.name}: llama.cpp's jamba asserts d_inner = 2 x hidden_size (\"only an "
                             "expansion factor of 2 is supported for now\", src/models/jamba.cpp#L31-L32); "
                             f"mamba_expand is {field(model, 'mamba_expand')!r}")
        if field(model, "mamba_conv_bias", True) is False:
            raise ValueError(f"{model.name}: mamba_conv_bias false: llama.cpp's jamba requires ssm_conv1d.bias "
                             "(src/models/jamba.cpp#L61), which such a checkpoint lacks")


def ssm_shape_fields(model, arch: str) -> dict:
    """The widths the converter writes (module docstring)."""
    h = model.hidden_size
    if arch == "jamba":
        kinds, ffns = _jamba_kinds(model)
        d_conv = field(model, "mamba_d_conv") or 4
        d_state = field(model, "mamba_d_state") or 16
        return dict(kinds=kinds, ffns=ffns, d_conv=d_conv, d_state=d_state, d_inner=2 * h, n_v_heads=2 * h,
                    n_k_heads=0, dt_rank=field(model, "mamba_dt_rank") or -(h // -16),
                    n_ff=_int(model, "intermediate_size"))
    kinds = _nemotron_kinds(model, arch)
    # GraniteHybridModel.find_hparam: the keys, then each with the "mamba_" prefix (conversion/granite.py#L459-L467)
    n_head = _first(model, ("num_heads", "mamba_num_heads"))
    d_model = _first(model, ("mamba_head_dim", "hidden_size", "d_model"))      # conversion/granite.py#L434
    out = dict(kinds=kinds, ffns="", n_ff=0, d_conv=_first(model, ("conv_kernel", "d_conv", "mamba_conv_kernel")),
               d_state=_first(model, ("state_size", "d_state", "state_dim", "ssm_state_size", "mamba_state_size",
                                      "mamba_d_state")),
               d_inner=n_head * d_model, n_v_heads=_first(model, ("n_heads", "num_heads", "mamba_n_heads",
                                                                   "mamba_num_heads")),
               n_k_heads=_first(model, ("n_groups", "num_groups", "mamba_n_groups")))
    if arch == "nemotron_h_moe":
        out.update(n_ff_exp=_int(model, "moe_intermediate_size"),
                   n_ff_shexp=_int(model, "moe_shared_expert_intermediate_size"),
                   n_expert=_int(model, "n_routed_experts"), n_expert_used=_int(model, "num_experts_per_tok"),
                   latent=field(model, "moe_latent_size", 0) or 0,
                   scale_w=float(field(model, "routed_scaling_factor", 1.0)) not in (0.0, 1.0),
                   norm_w=bool(field(model, "norm_topk_prob")), gating="sigmoid", probs_bias=True)
        for name in ("n_shared_experts", "n_group"):       # conversion/nemotron.py#L350-L354 read them
            _int(model, name)
    elif "-" in kinds:
        out["n_ff"] = _int(model, "intermediate_size")
    return out


def _attn_dims(model, arch: str) -> tuple[int, int]:
    """(head_dim, n_head_kv) of the attention layers."""
    n_kv = _int(model, "num_key_value_heads")
    if arch == "jamba":
        return model.hidden_size // model.num_attention_heads, n_kv
    head = field(model, "head_dim") or field(model, "attention_head_dim")      # conversion/nemotron.py#L233-L234
    if not isinstance(head, int) or head <= 0:
        raise ValueError(f"{model.name}: config field 'head_dim' / 'attention_head_dim' is {head!r}; llama.cpp's "
                         "converter reads it for the attention layers (conversion/nemotron.py#L233-L234)")
    return head, n_kv


def ssm_tensors(model, h: int) -> list:
    """(name, ne) of a jamba / nemotron_h / nemotron_h_moe GGUF's trunk in load order (after output /
    output_norm / token_embd: arch_tensors.arch_specs adds the head)."""
    # llama.cpp@0c1e57098 src/models/jamba.cpp#L47-L101, src/models/nemotron-h.cpp#L79-L140
    arch = "jamba" if model.model_type == "jamba" else nemotron_arch(model)
    _check(model, arch)
    w = ssm_shape_fields(model, arch)
    hd, n_kv = _attn_dims(model, arch)
    n_e = w.get("n_expert") or (_first(model, ("num_local_experts", "num_experts")) if arch == "jamba" else 0)
    q, kv = model.num_attention_heads * hd, n_kv * hd
    d_in, d_st, d_cv, n_h, n_g = w["d_inner"], w["d_state"], w["d_conv"], w["n_v_heads"], w["n_k_heads"]
    attn_b = bool(field(model, "attention_bias", False)) and arch != "jamba"
    mlp_b = bool(field(model, "mlp_bias", False))
    out: list[tuple[str, tuple[int, ...]]] = []
    for il, kind in enumerate(w["kinds"]):
        b = f"blk.{il}."
        out.append((b + "attn_norm.weight", (h,)))
        if kind == "M" and arch == "jamba":
            r = w["dt_rank"]
            out += [(b + "ssm_in.weight", (h, 2 * d_in)), (b + "ssm_conv1d.weight", (d_cv, d_in)),
                    (b + "ssm_conv1d.bias", (d_in,)), (b + "ssm_x.weight", (d_in, r + 2 * d_st)),
                    (b + "ssm_dt_norm.weight", (r,)), (b + "ssm_dt.weight", (r, d_in)), (b + "ssm_dt.bias", (d_in,)),
                    (b + "ssm_b_norm.weight", (d_st,)), (b + "ssm_c_norm.weight", (d_st,)),
                    (b + "ssm_a", (d_st, d_in)), (b + "ssm_d", (d_in,)), (b + "ssm_out.weight", (d_in, h))]
        elif kind == "M":
            ch = d_in + 2 * n_g * d_st
            out += [(b + "ssm_in.weight", (h, 2 * d_in + 2 * n_g * d_st + n_h)), (b + "ssm_conv1d.weight", (d_cv, ch)),
                    (b + "ssm_conv1d.bias", (ch,)), (b + "ssm_dt.bias", (n_h,)), (b + "ssm_a", (1, n_h)),
                    (b + "ssm_d", (1, n_h)),
                    (b + "ssm_norm.weight", (d_in // n_g, n_g)), (b + "ssm_out.weight", (d_in, h))]
        elif kind == "*":
            out += [(b + "attn_q.weight", (h, q)), (b + "attn_k.weight", (h, kv)), (b + "attn_v.weight", (h, kv))]
            out += [(b + "attn_q.bias", (q,)), (b + "attn_k.bias", (kv,)), (b + "attn_v.bias", (kv,))] if attn_b else []
            out.append((b + "attn_output.weight", (q, h)))
            out += [(b + "attn_output.bias", (h,))] if attn_b else []
        elif kind == "-":
            f = w["n_ff"]
            out += [(b + "ffn_down.weight", (f, h)), (b + "ffn_up.weight", (h, f))]
            out += [(b + "ffn_down.bias", (h,)), (b + "ffn_up.bias", (f,))] if mlp_b else []
        else:
            lat, f, s = w["latent"] or h, w["n_ff_exp"], w["n_ff_shexp"]
            out += [(b + "ffn_gate_inp.weight", (h, n_e)), (b + "exp_probs_b.bias", (n_e,))]
            out += [(b + "ffn_latent_down.weight", (h, lat)), (b + "ffn_latent_up.weight", (lat, h))] \
                if w["latent"] else []
            out += [(b + "ffn_down_exps.weight", (f, lat, n_e)), (b + "ffn_up_exps.weight", (lat, f, n_e)),
                    (b + "ffn_down_shexp.weight", (s, h)), (b + "ffn_up_shexp.weight", (h, s))]
        if arch != "jamba":
            continue
        out.append((b + "ffn_norm.weight", (h,)))
        f = w["n_ff"]
        if w["ffns"][il] == "E":
            out += [(b + "ffn_gate_inp.weight", (h, n_e)), (b + "ffn_gate_exps.weight", (h, f, n_e)),
                    (b + "ffn_down_exps.weight", (f, h, n_e)), (b + "ffn_up_exps.weight", (h, f, n_e))]
        else:
            out += [(b + "ffn_gate.weight", (h, f)), (b + "ffn_down.weight", (f, h)), (b + "ffn_up.weight", (h, f))]
    return out


def ssm_shape(model) -> SsmShape | None:
    """The graph widths of a jamba / nemotron_h ``model`` (graphs_ssm), or None where its GGUF is refused above."""
    if model.model_type not in SSM or not model.facts.vocab_size:
        return None
    arch = "jamba" if model.model_type == "jamba" else nemotron_arch(model)
    try:
        _check(model, arch)
        w = ssm_shape_fields(model, arch)
        hd, n_kv = _attn_dims(model, arch)
    except ValueError:
        return None
    if arch == "jamba":
        w.update(n_expert=_first(model, ("num_local_experts", "num_experts")), n_ff_exp=w["n_ff"], gating="softmax",
                 n_expert_used=field(model, "num_experts_per_tok", 0) or 0)
    kinds, ffns = w.pop("kinds"), w.pop("ffns")
    moe_layers = tuple(f == "E" for f in ffns) if arch == "jamba" else tuple(k in "-E" for k in kinds)
    return SsmShape(arch=arch, n_layer=model.num_layers, n_embd=model.hidden_size, n_head=model.num_attention_heads,
                    n_head_kv=n_kv, head_dim=hd, n_vocab=ssm_vocab(model), recurrent=tuple(k == "M" for k in kinds),
                    moe_layers=moe_layers, qkv_bias=arch != "jamba" and bool(field(model, "attention_bias", False)),
                    mlp_bias=bool(field(model, "mlp_bias", False)), **w)

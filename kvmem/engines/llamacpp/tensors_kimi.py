"""llama.cpp's kimi-linear (Kimi-Linear-48B-A3B) and kimi-k3 (Kimi-K3's text model) tensors from a config, as the
converter writes them and load_arch_tensors creates them (graphs_kimi, graphs_kimi_k3 have their graphs).

Transcribed from the vendored llama.cpp (llama-cpp-python 0.3.36, llama.cpp 0c1e57098):

    converter   conversion/kimi_linear.py#L79-L142 (set_gguf_parameters): head_count_kv per layer, 1 (MLA written as
                MQA) for the layers in linear_attn_config.full_attn_layers (1-indexed), 0 for the KDA layers;
                ssm.conv_kernel short_conv_kernel_size, kda.head_dim head_dim; kv_lora_rank, qk_rope_head_dim,
                qk_nope_head_dim + qk_rope_head_dim, v_head_dim; moe_intermediate_size, num_shared_experts,
                first_k_dense_replace, routed_scaling_factor; the gating function from moe_router_activation_func
                (conversion/base.py#L1530-L1539); feed_forward_length the first of prefix_dense_intermediate_size,
                dense_intermediate_size, intermediate_size (#L1445). conversion/kimi_k3.py#L165-L227 the same and
                K3's own keys (q_lora_rank, expert_latent_length, the situ betas, attn_res_block_size).
    kimi-linear src/models/kimi-linear.cpp load_arch_hparams (L4-L32): no q_lora_rank read (n_lora_q stays 0);
                load_arch_tensors (L34-L167): token_embd, output_norm, output; per layer attn_norm; a KDA layer
                (is_recr: head_count_kv 0) ssm_conv1d_q/k/v [d_conv, 1, d_inner, 1], attn_q/k/v [n_embd, d_inner]
                (d_inner = n_head x kda head_dim), ssm_f_a, ssm_f_b, ssm_beta, ssm_a [1, n_head, 1, 1],
                ssm_dt.bias, ssm_g_a, ssm_g_b, ssm_norm, attn_output; an MLA layer attn_kv_a_norm, attn_q (no Q
                compression), attn_kv_a_mqa, attn_k_b, attn_v_b, attn_output; ffn_norm; the leading dense FFN or
                router, routed experts, shared experts (moe_intermediate_size x num_shared_experts) and exp_probs_b.
    kimi-k3     src/models/kimi-k3.cpp load_arch_tensors (L53-L167): output_res_score, per layer attn_norm, ffn_norm,
                attn_res_score and ffn_res_score (attn_res_block_size > 0), a KDA layer's full-rank ssm_g
                [n_embd, d_inner] for ssm_g_a/ssm_g_b and a 1-D ssm_a [n_head], an MLA layer's attn_q_a/attn_q_b
                (q_lora_rank) and attn_gate [n_embd, n_head x v_head_dim] (mla_use_output_gate: the checkpoint's
                g_proj, conversion/kimi_k3.py#L297-L306); router and exp_probs_b before the routed experts, which run
                over routed_expert_hidden_size with ffn_routed_down/up (and ffn_routed_norm: latent_moe_use_norm).
                An MXFP4 checkpoint's experts (quantization_config mxfp4-pack-quantized) are written MXFP4 by the
                converter (conversion/kimi_k3.py#L87-L154) and llama-quantize does not requantize them
                (tensors.GPT_OSS_EXPERTS).
"""

from __future__ import annotations

from ...layer import LINEAR
from .arch_fields import field

__all__ = ["KIMI", "check_kimi_cache", "check_kimi_streams", "kimi_arch", "kimi_head_dims", "kimi_kv0", "kimi_mxfp4",
           "kimi_tensors", "linear_config", "kda_layers", "need", "dense_ff"]

KIMI = {"kimi_linear": "kimi-linear"}       # kvmem model_type -> llama.cpp arch (kimi-k3: kimi_arch)
_NO_FIELD = object()


def kimi_arch(model) -> str:
    """kimi-k3 for a KimiK3 config (its text_config is a kimi_linear one), else kimi-linear."""
    return "kimi-k3" if (model.config or {}).get("model_type") == "kimi_k3" else "kimi-linear"


def linear_config(model) -> dict:
    cfg = field(model, "linear_attn_config")
    if not isinstance(cfg, dict) or not isinstance(cfg.get("full_attn_layers"), list):
        raise ValueError(f"{model.name}: config field 'linear_attn_config' (with full_attn_layers) is {cfg!r}; "
                         "llama.cpp's converter reads the MLA layers from it (conversion/kimi_linear.py#L87-L98)")
    for key in ("head_dim", "short_conv_kernel_size"):
        value = cfg.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ValueError(f"{model.name}: config field 'linear_attn_config.{key}' is {value!r}; llama.cpp reads "
                             "it as kda.head_dim / ssm.conv_kernel (conversion/kimi_linear.py#L100-L103, "
                             "src/models/kimi-linear.cpp#L9-L10)")
    return cfg


def kda_layers(model) -> tuple:
    full = linear_config(model)["full_attn_layers"]
    recurrent = tuple(il + 1 not in full for il in range(model.num_layers))
    ours = tuple(layer.kind == LINEAR for layer in model.layers)
    if recurrent != ours:
        first = next(i for i in range(model.num_layers) if recurrent[i] != ours[i])
        raise ValueError(f"{model.name}: layer {first} is {model.layers[first].kind.value!r} where llama.cpp's "
                         "converter makes it " + ("KDA" if recurrent[first] else "MLA") + " (full_attn_layers, "
                         "conversion/kimi_linear.py#L92-L98): give the GGUF file itself")
    return recurrent


def need(model, name: str, *, zero: bool = False):
    value = field(model, name, _NO_FIELD)
    if value is _NO_FIELD or not isinstance(value, int) or isinstance(value, bool) or value < (0 if zero else 1):
        raise ValueError(f"{model.name}: config field {name!r} is "
                         f"{'missing' if value is _NO_FIELD else repr(value)}; llama.cpp's {kimi_arch(model)} "
                         "tensors need it (conversion/kimi_linear.py, conversion/kimi_k3.py set_gguf_parameters)")
    return value


def dense_ff(model) -> int:
    # conversion/base.py#L1445: feed_forward_length from the first of these the config has
    for name in ("prefix_dense_intermediate_size", "dense_intermediate_size", "intermediate_size"):
        if field(model, name) is not None:
            return need(model, name)
    return need(model, "intermediate_size")


def kimi_kv0(model) -> int:
    """head_count_kv of layer 0 as the converter writes it (1 on an MLA layer, 0 on a KDA one): llama-quant.cpp's
    n_gqa() reads layer 0's."""
    return 0 if kda_layers(model)[0] else 1


def kimi_tensors(model, h: int) -> list:
    """(name, ne) of a kimi-linear / kimi-k3 GGUF's trunk in load_arch_tensors order (module docstring);
    arch_tensors.arch_specs adds the head."""
    k3 = kimi_arch(model) == "kimi-k3"
    moe = model.facts.moe
    if moe is None or not moe.experts:
        raise ValueError(f"{model.name}: llama.cpp's {kimi_arch(model)} layers route (num_experts), and the config "
                         "gives no experts")
    recurrent, cfg = kda_layers(model), linear_config(model)
    n_head, kda, d_conv = model.num_attention_heads, cfg["head_dim"], cfg["short_conv_kernel_size"]
    d_inner = n_head * kda
    kv_lora, rope = need(model, "kv_lora_rank"), need(model, "qk_rope_head_dim")
    nope, vd = need(model, "qk_nope_head_dim"), need(model, "v_head_dim")
    q_lora = field(model, "q_lora_rank")
    if q_lora and not k3:
        raise ValueError(f"{model.name}: llama.cpp's kimi-linear reads no q_lora_rank (src/models/kimi-linear.cpp#L4-"
                         "L32) and creates attn_q_a_norm 0 wide: a config with q_lora_rank does not load")
    n_dense, dense_f = need(model, "first_k_dense_replace", zero=True), dense_ff(model)
    res = k3 and need(model, "attn_res_block_size", zero=True) > 0
    for name in ("activation_situ_beta", "activation_situ_linear_beta") if k3 else ():
        if not isinstance(field(model, name), (int, float)):    # conversion/kimi_k3.py#L220-L224, kimi-k3.cpp#L43-L45
            raise ValueError(f"{model.name}: config field {name!r} is {field(model, name)!r}; llama.cpp's kimi-k3 "
                             "converter writes it and its loader requires it")
    out: list[tuple[str, tuple[int, ...]]] = [("output_res_score.weight", (h,))] if res else []
    for il in range(model.num_layers):
        b = f"blk.{il}."
        out.append((b + "attn_norm.weight", (h,)))
        if k3:
            out.append((b + "ffn_norm.weight", (h,)))
            if res:
                out += [(b + "attn_res_score.weight", (h,)), (b + "ffn_res_score.weight", (h,))]
        if recurrent[il]:
            out += [(b + f"ssm_conv1d_{x}.weight", (d_conv, 1, d_inner, 1)) for x in "qkv"]
            out += [(b + "attn_q.weight", (h, d_inner)), (b + "attn_k.weight", (h, d_inner)),
                    (b + "attn_v.weight", (h, d_inner)), (b + "ssm_f_a.weight", (h, kda)),
                    (b + "ssm_f_b.weight", (kda, d_inner)), (b + "ssm_beta.weight", (h, n_head)),
                    (b + "ssm_a", (n_head,) if k3 else (1, n_head, 1, 1)), (b + "ssm_dt.bias", (d_inner,))]
            out += [(b + "ssm_g.weight", (h, d_inner))] if k3 else \
                [(b + "ssm_g_a.weight", (h, kda)), (b + "ssm_g_b.weight", (kda, d_inner))]
            out += [(b + "ssm_norm.weight", (kda,)), (b + "attn_output.weight", (d_inner, h))]
        else:
            hk = nope + rope
            if q_lora:
                out.append((b + "attn_q_a_norm.weight", (q_lora,)))
            out.append((b + "attn_kv_a_norm.weight", (kv_lora,)))
            out += [(b + "attn_q_a.weight", (h, q_lora)), (b + "attn_q_b.weight", (q_lora, n_head * hk))] if q_lora \
                else [(b + "attn_q.weight", (h, n_head * hk))]
            out += [(b + "attn_kv_a_mqa.weight", (h, kv_lora + rope)), (b + "attn_k_b.weight", (nope, kv_lora, n_head)),
                    (b + "attn_v_b.weight", (kv_lora, vd, n_head))]
            if k3 and field(model, "mla_use_output_gate", False):
                out.append((b + "attn_gate.weight", (h, n_head * vd)))
            out.append((b + "attn_output.weight", (n_head * vd, h)))
        if not k3:
            out.append((b + "ffn_norm.weight", (h,)))
        out += _ffn(model, b, h, il < n_dense, k3, dense_f)
    return out


def _ffn(model, b: str, h: int, dense: bool, k3: bool, dense_f: int) -> list:
    """One layer's FFN tensors after its attention (kimi-linear.cpp#L139-L165, kimi-k3.cpp#L134-L165)."""
    if dense:
        return [(b + "ffn_gate.weight", (h, dense_f)), (b + "ffn_down.weight", (dense_f, h)),
                (b + "ffn_up.weight", (h, dense_f))]
    e, f = model.facts.moe.experts, need(model, "moe_intermediate_size")
    n_shared = need(model, "num_shared_experts", zero=True)
    latent = field(model, "routed_expert_hidden_size") if k3 else None
    lh = latent or h
    out: list[tuple[str, tuple[int, ...]]] = [(b + "ffn_gate_inp.weight", (h, e))]
    out += [(b + "exp_probs_b.bias", (e,))] if k3 else []
    out += [(b + "ffn_gate_exps.weight", (lh, f, e)), (b + "ffn_down_exps.weight", (f, lh, e)),
            (b + "ffn_up_exps.weight", (lh, f, e))]
    if latent:
        out += [(b + "ffn_routed_down.weight", (h, latent)), (b + "ffn_routed_up.weight", (latent, h))]
        if field(model, "latent_moe_use_norm", False):
            out.append((b + "ffn_routed_norm.weight", (latent,)))
    if n_shared:
        s = f * n_shared
        out += [(b + "ffn_gate_shexp.weight", (h, s)), (b + "ffn_down_shexp.weight", (s, h)),
                (b + "ffn_up_shexp.weight", (h, s))]
    return out + ([] if k3 else [(b + "exp_probs_b.bias", (e,))])


def kimi_mxfp4(model) -> bool:
    """Whether the converter writes this kimi-k3 checkpoint's routed experts as MXFP4 (compressed-tensors
    mxfp4-pack-quantized: conversion/kimi_k3.py#L87-L90 _is_mxfp4_packed)."""
    q = field(model, "quantization_config") or {}
    return kimi_arch(model) == "kimi-k3" and isinstance(q, dict) and q.get("quant_method") == "compressed-tensors" \
        and q.get("format") == "mxfp4-pack-quantized"


def kimi_head_dims(model) -> tuple[int, int]:
    """(n_embd_head_k, n_embd_head_v) of every layer, KDA ones too, as the GGUF gives them to llama_init_from_model's
    cache-type checks (llama.cpp@0c1e57098 src/llama-context.cpp#L3851-L3870, src/llama-hparams.cpp#L148-L154):
    key_length kv_lora_rank + qk_rope_head_dim; value_length kv_lora_rank on kimi-k3 (conversion/kimi_k3.py#L204),
    on kimi-linear the config's head_dim (TextModel, conversion/base.py#L1541-L1543: 72 on Kimi-Linear-48B-A3B, which
    no quantised V cache's 32-value block divides), else n_embd / n_head (src/llama-model.cpp#L1442-L1443)."""
    kv_lora, rope = need(model, "kv_lora_rank"), need(model, "qk_rope_head_dim")
    if kimi_arch(model) == "kimi-k3":
        return kv_lora + rope, kv_lora
    head = field(model, "head_dim")
    own = isinstance(head, int) and head > 0
    return kv_lora + rope, head if own else model.hidden_size // model.num_attention_heads


def check_kimi_cache(model, type_v: str, flash_attn) -> None:
    """llama_init_from_model's V cache check over every layer, with flash attention (on or auto) and a quantised V
    type (every -ctv type is 32 values a block): kimi-linear's n_embd_head_v is value_length (kimi_head_dims), 72 on
    Kimi-Linear-48B-A3B, KDA layers included, so no quantised V cache loads (settings._check_blocks_divide_heads
    checks the MLA layers' own widths)."""
    if model.model_type != "kimi_linear" or not flash_attn or type_v in ("f32", "f16", "bf16"):
        return
    head = kimi_head_dims(model)[1]
    if head % 32:
        raise ValueError(f"type_v={type_v}: llama_init_from_model: V cache type {type_v} with block size 32 does not "
                         f"divide n_embd_head_v={head}")


def check_kimi_streams(model, n_seq: int, unified: bool, n_tokens: int) -> None:
    """kimi-linear's second prompt reserve (one sequence, ``n_tokens`` = min(n_ctx, n_ubatch) not rounded:
    graphs_kimi.one_seq_prompt) over n_seq KV streams aborts llama.cpp 0c1e57098 where n_tokens is not a multiple of
    the streams and an MLA layer comes before the last: GGML_ASSERT(ggml_can_repeat(b, a)) (ggml/src/ggml.c#L2072)
    while the context is created. Seen here, llama.cpp run on sparse GGUFs: Kimi-Linear-48B-A3B with 3 sequences and
    -ub 512 aborts, -ub 510 or --kv-unified builds; 7 of 7 random such configs abort, the others (divisible, unified,
    or MLA in the last layer alone) build (tests/oracles/test_llamacpp_kimi_oracle.py)."""
    if model.model_type != "kimi_linear" or kimi_arch(model) != "kimi-linear" or unified or n_seq <= 1 \
            or n_tokens % n_seq == 0:
        return
    if all(kda_layers(model)[:-1]):
        return
    raise ValueError(f"{model.name}: n_ubatch {n_tokens} over {n_seq} sequences with a KV stream each: llama.cpp "
                     "aborts creating this kimi-linear context (GGML_ASSERT(ggml_can_repeat(b, a)) in its second "
                     f"prompt reserve, one sequence of {n_tokens} tokens); give -ub a multiple of {n_seq}, or "
                     "--kv-unified")

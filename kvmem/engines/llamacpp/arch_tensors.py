"""The tensors of llama.cpp architectures whose layout is not llama's, as their load_arch_tensors
creates them (names from src/llama-arch.cpp LLM_TENSOR_NAMES, shapes ne0 first) and convert_hf_to_gguf
writes them; tensors.synthesised_tensors types them with quant_mix.

    gpt-oss    src/models/openai-moe.cpp#L22-L56: attention with q/k/v/output biases, attn_sinks
               [n_head], post_attention_norm, router with bias, expert tensors with biases
    glm4       src/models/glm4.cpp#L15-L58 load_arch_tensors (dense GLM-4-0414, GLM-Z1): create_tensor_qkv's
               separate Q/K/V with their optional biases (attention_bias; llama-model.cpp#L3424-L3431),
               post_attention_norm, ffn_norm, ffn_up of 2 x n_ff (the fused gate_up_proj), ffn_down,
               post_ffw_norm; no NextN blocks (conversion/glm.py Glm4Model writes none, GlmOCRModel only)
    glm4moe    src/models/glm4-moe.cpp load_arch_tensors: q/k/v biases, optional q/k norms
               (use_qk_norm), post_attention_norm as the FFN norm, first_k_dense_replace dense
               layers, then router, exp_probs_b, routed and shared experts
    deepseek2  src/models/deepseek2.cpp load_arch_tensors, the MLA GGUF convert writes
               (conversion/deepseek.py DeepseekV2Model: kv_b_proj split into attn_k_b
               [nope, kv_lora, n_head] and attn_v_b [kv_lora, v_dim, n_head]); q_lora_rank
               None (V2-Lite): one attn_q; exp_probs_b where the router scores with a
               correction bias (scoring_func sigmoid: V3, R1, Kimi K2)
    glm-dsa    src/models/glm-dsa.cpp load_arch_tensors: deepseek2's MLA and MoE tensors (always
               q_lora, exp_probs_b) and the DSA indexer per layer: indexer.k_norm (weight and bias),
               indexer.proj [n_embd, index_n_heads] (F32: conversion/base.py INDEXER_PROJ),
               indexer.attn_k, indexer.attn_q_b; none on GLM-5.2's "shared" layers (indexer_types),
               which transformers builds without an indexer
    deepseek32 src/models/deepseek32.cpp load_arch_tensors (DeepSeek-V3.2): glm-dsa's tensors, the
               indexer required in every layer
    minimax-m2 src/models/minimax-m2.cpp load_arch_tensors: attn_q_norm over all heads
               [n_head x head_dim], attn_k_norm [n_kv x head_dim], router, exp_probs_b, experts of
               intermediate_size (conversion/minimax.py: the MTP modules are not converted)
    qwen35 / qwen35moe  src/models/qwen35.cpp, qwen35moe.cpp load_block_trunk: full-attention
               layers (attn_q holds q and its gate: 2 x n_head x head_dim) and Gated DeltaNet
               layers (attn_qkv, attn_gate, ssm_conv1d, ssm_dt.bias, ssm_a, ssm_beta,
               ssm_alpha, ssm_norm, ssm_out); MoE: router, experts, the shared expert and its
               1-D gate ffn_gate_inp_shexp
    qwen3next  src/models/qwen3next.cpp: qwen35moe's layers, beta and alpha in one ssm_ba
               [n_embd, 2 x n_v_heads] (conversion/qwen.py writes attn_qkv and attn_gate, not ssm_in)
    gemma4     src/models/gemma4.cpp load_arch_tensors, the checkpoint transformers' Gemma4TextDecoderLayer
               holds, named by gguf-py's tensor_mapping (conversion/gemma.py Gemma4Model): per-layer
               head dims and KV heads (sliding head_dim, full global_head_dim), q/k norms, no attn_v on
               full layers when attention_k_eq_v, layer_output_scale, the dense FFN with post_ffw_norm,
               and with enable_moe_block a router (ffn_gate_inp, its .scale), ffn_gate_up_exps fused,
               ffn_down_exps and its .scale, three more norms; one rope_freqs (global_head_dim / 2, the
               proportional rope's factors). Per-layer inputs (E2B/E4B) and shared-KV layers are refused.
The NextN/MTP blocks: convert_hf_to_gguf writes them by default (--no-mtp drops them), counted in block_count with
nextn_predict_layers (nextn.gguf_nextn_layers). llama.cpp loads their tensors only with load_mtp (TENSOR_SKIP
otherwise: placement's module doc), so their tensors are not listed here but for those loaded all the same
(glm-dsa/deepseek32's exp_probs_b.bias: nextn.mtp_loaded); the blocks still take a share of the -ts split
(placement.place n_nextn) and count in the quantiser's n_layer_all (tensors._typed).
"""

from __future__ import annotations

from ...layer import FULL
from ...model import Model
from .arch_fields import ARCHS, field, need
from .graphs_classic import CLASSIC, classic_tensors
from .graphs_dsv4 import dsv4_tensors
from .graphs_gemma3n import gemma3n_tensors
from .graphs_llama4 import llama4_tensors
from .graphs_minimax01 import minimax01_tensors, minimax_m3_tensors
from .nextn import mtp_loaded
from .tensors_kimi import kimi_arch, kimi_tensors
from .tensors_ssm import nemotron_arch, ssm_tensors, ssm_vocab

__all__ = ["arch_specs"]


def _head(model: Model, h: int, vocab: int) -> list:
    out = [] if model.facts.tie_word_embeddings else [("output.weight", (h, vocab))]
    return out + [("output_norm.weight", (h,)), ("token_embd.weight", (h, vocab))]


def _experts(b: str, h: int, f: int, e: int, *, bias: bool = False) -> list:
    out: list[tuple[str, tuple[int, ...]]] = [
        (b + "ffn_gate_exps.weight", (h, f, e)), (b + "ffn_down_exps.weight", (f, h, e)),
        (b + "ffn_up_exps.weight", (h, f, e))]
    if bias:
        out += [(b + "ffn_gate_exps.bias", (f, e)), (b + "ffn_down_exps.bias", (h, e)),
                (b + "ffn_up_exps.bias", (f, e))]
    return out


def _shared(b: str, h: int, s: int) -> list:
    return [(b + "ffn_gate_shexp.weight", (h, s)), (b + "ffn_down_shexp.weight", (s, h)),
            (b + "ffn_up_shexp.weight", (h, s))]


def _dense(b: str, h: int, f: int) -> list:
    return [(b + "ffn_gate.weight", (h, f)), (b + "ffn_down.weight", (f, h)), (b + "ffn_up.weight", (h, f))]


def _gpt_oss(model: Model, h: int) -> list:
    # arch_specs refuses gpt-oss without MoE, so facts.moe is set here
    n_head, e, f = model.num_attention_heads, model.facts.moe.experts, model.facts.moe.intermediate_size  # type: ignore[union-attr]  # set: above
    out: list[tuple[str, tuple[int, ...]]] = []
    for i, layer in enumerate(model.layers):
        b, hd = f"blk.{i}.", layer.head_dim_k
        q, kv = n_head * hd, layer.kv_heads * hd
        out += [(b + "attn_norm.weight", (h,)), (b + "post_attention_norm.weight", (h,)),
                (b + "attn_q.weight", (h, q)), (b + "attn_k.weight", (h, kv)), (b + "attn_v.weight", (h, kv)),
                (b + "attn_q.bias", (q,)), (b + "attn_k.bias", (kv,)), (b + "attn_v.bias", (kv,)),
                (b + "attn_output.weight", (q, h)), (b + "attn_output.bias", (h,)),
                (b + "attn_sinks.weight", (n_head,)),
                (b + "ffn_gate_inp.weight", (h, e)), (b + "ffn_gate_inp.bias", (e,))]
        out += _experts(b, h, f, e, bias=True)
    return out


def _glm4(model: Model, h: int) -> list:
    # llama.cpp@0c1e57098 src/models/glm4.cpp#L28-L50 (the n_layer trunk; create_tensor_qkv llama-model.cpp#L3424-L3431)
    n_head, f = model.num_attention_heads, need(model, "intermediate_size")
    bias = bool(field(model, "attention_bias", False))
    out: list[tuple[str, tuple[int, ...]]] = []
    for i, layer in enumerate(model.layers):
        b, hd = f"blk.{i}.", layer.head_dim_k
        q, kv = n_head * hd, layer.kv_heads * hd
        out += [(b + "attn_norm.weight", (h,)), (b + "attn_q.weight", (h, q)), (b + "attn_k.weight", (h, kv)),
                (b + "attn_v.weight", (h, kv))]
        if bias:
            out += [(b + "attn_q.bias", (q,)), (b + "attn_k.bias", (kv,)), (b + "attn_v.bias", (kv,))]
        out += [(b + "attn_output.weight", (q, h)), (b + "post_attention_norm.weight", (h,)),
                (b + "ffn_norm.weight", (h,)), (b + "ffn_down.weight", (f, h)), (b + "ffn_up.weight", (h, 2 * f)),
                (b + "post_ffw_norm.weight", (h,))]
    return out


def _glm4_moe(model: Model, h: int) -> list:
    moe = model.facts.moe
    n_head, e, f = model.num_attention_heads, moe.experts, moe.intermediate_size  # type: ignore[union-attr]  # arch_specs refuses this arch without MoE
    dense_f = need(model, "intermediate_size")
    first_dense = field(model, "first_k_dense_replace", 0)
    shared = field(model, "n_shared_experts", 0)
    qk_norm = bool(field(model, "use_qk_norm", False))
    bias = bool(field(model, "attention_bias", False))
    out: list[tuple[str, tuple[int, ...]]] = []
    for i, layer in enumerate(model.layers):
        b, hd = f"blk.{i}.", layer.head_dim_k
        q, kv = n_head * hd, layer.kv_heads * hd
        out += [(b + "attn_norm.weight", (h,)), (b + "attn_q.weight", (h, q)), (b + "attn_k.weight", (h, kv)),
                (b + "attn_v.weight", (h, kv))]
        if bias:
            out += [(b + "attn_q.bias", (q,)), (b + "attn_k.bias", (kv,)), (b + "attn_v.bias", (kv,))]
        out.append((b + "attn_output.weight", (q, h)))
        if qk_norm:
            out += [(b + "attn_q_norm.weight", (hd,)), (b + "attn_k_norm.weight", (hd,))]
        out.append((b + "post_attention_norm.weight", (h,)))
        if i < first_dense:
            out += _dense(b, h, dense_f)
            continue
        out += [(b + "ffn_gate_inp.weight", (h, e)), (b + "exp_probs_b.bias", (e,))] + _experts(b, h, f, e)
        if shared:
            out += _shared(b, h, f * shared)
    return out


def _deepseek2(model: Model, h: int, indexer: bool = False) -> list:
    moe = model.facts.moe
    n_head = model.num_attention_heads
    kv_lora, rope = need(model, "kv_lora_rank"), need(model, "qk_rope_head_dim")
    nope, v_dim = need(model, "qk_nope_head_dim"), need(model, "v_head_dim")
    q_lora = field(model, "q_lora_rank")
    first_dense = field(model, "first_k_dense_replace", 0)
    dense_f = need(model, "intermediate_size")
    probs_b = field(model, "scoring_func") == "sigmoid"     # e_score_correction_bias -> exp_probs_b
    # GLM-5.2's "shared" layers reuse the previous full layer's top-k and hold no indexer
    # (transformers@v5.24.0 src/transformers/models/glm_moe_dsa/modeling_glm_moe_dsa.py#L348-L349:
    # indexer None when shared)
    types = field(model, "indexer_types") or ["full"] * model.num_layers
    own_indexer = [t != "shared" for t in types]
    out: list[tuple[str, tuple[int, ...]]] = []
    for i in range(model.num_layers):
        b = f"blk.{i}."
        out.append((b + "attn_norm.weight", (h,)))
        if q_lora:
            out.append((b + "attn_q_a_norm.weight", (q_lora,)))
        out.append((b + "attn_kv_a_norm.weight", (kv_lora,)))
        if q_lora:
            out += [(b + "attn_q_a.weight", (h, q_lora)), (b + "attn_q_b.weight", (q_lora, n_head * (nope + rope)))]
        else:
            out.append((b + "attn_q.weight", (h, n_head * (nope + rope))))
        out += [(b + "attn_kv_a_mqa.weight", (h, kv_lora + rope)), (b + "attn_k_b.weight", (nope, kv_lora, n_head)),
                (b + "attn_v_b.weight", (kv_lora, v_dim, n_head)), (b + "attn_output.weight", (n_head * v_dim, h)),
                (b + "ffn_norm.weight", (h,))]
        if indexer and own_indexer[i]:      # models/glm-dsa.cpp: the lightning indexer's weights
            ih, ihd = need(model, "index_n_heads"), need(model, "index_head_dim")
            out += [(b + "indexer.k_norm.weight", (ihd,)), (b + "indexer.k_norm.bias", (ihd,)),
                    (b + "indexer.proj.weight", (h, ih)), (b + "indexer.attn_k.weight", (h, ihd)),
                    (b + "indexer.attn_q_b.weight", (q_lora, ih * ihd))]
        if moe is None or i < first_dense:
            out += _dense(b, h, dense_f)
            continue
        e, f = moe.experts, moe.intermediate_size
        out.append((b + "ffn_gate_inp.weight", (h, e)))
        if probs_b:
            out.append((b + "exp_probs_b.bias", (e,)))
        out += _experts(b, h, f, e) + _shared(b, h, f * field(model, "n_shared_experts", 1))
    return out


def _glm_dsa(model: Model, h: int) -> list:
    return _deepseek2(model, h, indexer=True)


def _minimax_m2(model: Model, h: int) -> list:
    moe = model.facts.moe
    n_head, e, f = model.num_attention_heads, moe.experts, moe.intermediate_size  # type: ignore[union-attr]  # arch_specs refuses this arch without MoE
    out: list[tuple[str, tuple[int, ...]]] = []
    for i, layer in enumerate(model.layers):
        b, hd = f"blk.{i}.", layer.head_dim_k
        q, kv = n_head * hd, layer.kv_heads * hd
        out += [(b + "attn_q.weight", (h, q)), (b + "attn_k.weight", (h, kv)), (b + "attn_v.weight", (h, kv)),
                (b + "attn_output.weight", (q, h)), (b + "attn_norm.weight", (h,)), (b + "attn_q_norm.weight", (q,)),
                (b + "attn_k_norm.weight", (kv,)), (b + "ffn_norm.weight", (h,)), (b + "ffn_gate_inp.weight", (h, e))]
        out += _experts(b, h, f, e) + [(b + "exp_probs_b.bias", (e,))]
    return out


def _gemma4(model: Model, h: int) -> list:
    if field(model, "hidden_size_per_layer_input", 0) or field(model, "num_kv_shared_layers", 0):
        raise ValueError(f"{model.name}: kvmem lays out Gemma 4 from a config only without per-layer inputs and "
                         "shared-KV layers (hidden_size_per_layer_input and num_kv_shared_layers 0): give the GGUF "
                         "file itself")
    moe = model.facts.moe if field(model, "enable_moe_block", False) else None
    n_head, f = model.num_attention_heads, need(model, "intermediate_size")
    k_eq_v = bool(field(model, "attention_k_eq_v", False))
    full_hd = max((layer.head_dim_k for layer in model.layers if layer.kind == FULL), default=0)
    out: list[tuple[str, tuple[int, ...]]] = [("rope_freqs.weight", (full_hd // 2,))] if full_hd else []
    for i, layer in enumerate(model.layers):
        b, hd = f"blk.{i}.", layer.head_dim_k
        out += [(b + "attn_norm.weight", (h,)), (b + "attn_q.weight", (h, n_head * hd)),
                (b + "attn_k.weight", (h, layer.kv_heads * hd))]
        if layer.kind != FULL or not k_eq_v:
            out.append((b + "attn_v.weight", (h, layer.kv_heads * hd)))
        out += [(b + "attn_output.weight", (n_head * hd, h)), (b + "attn_q_norm.weight", (hd,)),
                (b + "attn_k_norm.weight", (hd,)), (b + "post_attention_norm.weight", (h,)),
                (b + "layer_output_scale.weight", (1,)), (b + "ffn_norm.weight", (h,))]
        out += _dense(b, h, f) + [(b + "post_ffw_norm.weight", (h,))]
        if moe is not None:
            e, fe = moe.experts, moe.intermediate_size
            out += [(b + "ffn_gate_inp.weight", (h, e)), (b + "ffn_gate_inp.scale", (h,)),
                    (b + "pre_ffw_norm_2.weight", (h,)), (b + "post_ffw_norm_1.weight", (h,)),
                    (b + "post_ffw_norm_2.weight", (h,)), (b + "ffn_gate_up_exps.weight", (h, 2 * fe, e)),
                    (b + "ffn_down_exps.weight", (fe, h, e)), (b + "ffn_down_exps.scale", (e,))]
    return out


def _qwen35(model: Model, h: int, fused_ba: bool = False) -> list:
    moe = model.facts.moe
    n_head = model.num_attention_heads
    d_state, k_heads = need(model, "linear_key_head_dim"), need(model, "linear_num_key_heads")
    v_heads, d_conv = need(model, "linear_num_value_heads"), need(model, "linear_conv_kernel_dim")
    key_dim, value_dim = d_state * k_heads, d_state * v_heads     # head_k_dim = head_v_dim = ssm_d_state
    interval = field(model, "full_attention_interval", 4)
    out: list[tuple[str, tuple[int, ...]]] = []
    for i, layer in enumerate(model.layers):
        b = f"blk.{i}."
        out += [(b + "attn_norm.weight", (h,)), (b + "post_attention_norm.weight", (h,))]
        if (i + 1) % interval == 0:              # is_recr: (i + 1) % full_attention_interval != 0
            hd = layer.head_dim_k
            out += [(b + "attn_q.weight", (h, 2 * n_head * hd)), (b + "attn_k.weight", (h, layer.kv_heads * hd)),
                    (b + "attn_v.weight", (h, layer.kv_heads * layer.head_dim_v)),
                    (b + "attn_output.weight", (n_head * hd, h)), (b + "attn_q_norm.weight", (hd,)),
                    (b + "attn_k_norm.weight", (hd,))]
        else:
            out += [(b + "attn_qkv.weight", (h, 2 * key_dim + value_dim)), (b + "attn_gate.weight", (h, value_dim)),
                    (b + "ssm_conv1d.weight", (d_conv, 2 * key_dim + value_dim)), (b + "ssm_dt.bias", (v_heads,)),
                    (b + "ssm_a", (v_heads,))]
            out += [(b + "ssm_ba.weight", (h, 2 * v_heads))] if fused_ba else \
                [(b + "ssm_beta.weight", (h, v_heads)), (b + "ssm_alpha.weight", (h, v_heads))]
            out += [(b + "ssm_norm.weight", (d_state,)), (b + "ssm_out.weight", (value_dim, h))]
        if moe is None:
            out += _dense(b, h, need(model, "intermediate_size"))
            continue
        e, f = moe.experts, moe.intermediate_size
        s = moe.shared_intermediate_size or f
        out += [(b + "ffn_gate_inp.weight", (h, e))] + _experts(b, h, f, e)
        out += [(b + "ffn_gate_inp_shexp.weight", (h,))] + _shared(b, h, s)
    return out


_LAYOUTS = {"gpt-oss": _gpt_oss, "glm4": _glm4, "glm4moe": _glm4_moe, "deepseek2": _deepseek2, "glm-dsa": _glm_dsa,
            "deepseek32": lambda model, h: _deepseek2(model, h, indexer=True), "minimax-m2": _minimax_m2,
            "qwen35": _qwen35, "qwen35moe": _qwen35, "qwen3next": lambda model, h: _qwen35(model, h, fused_ba=True),
            "gemma4": _gemma4, "llama4": llama4_tensors,     # llama4: graphs_llama4 (its module doc)
            "jamba": ssm_tensors, "nemotron_h": ssm_tensors, "nemotron_h_moe": ssm_tensors}     # tensors_ssm
_LAYOUTS["deepseek4"] = dsv4_tensors     # graphs_dsv4 (its module doc)
_LAYOUTS["minimax-01"] = minimax01_tensors     # graphs_minimax01 (its module doc)
_LAYOUTS["minimax-m3"] = minimax_m3_tensors     # graphs_minimax01
_LAYOUTS.update({"kimi-linear": kimi_tensors, "kimi-k3": kimi_tensors})     # tensors_kimi (its module doc)
_LAYOUTS.update(dict.fromkeys(CLASSIC.values(), classic_tensors))     # falcon, gpt2, gptneox: graphs_classic
_LAYOUTS["gemma3n"] = gemma3n_tensors     # graphs_gemma3n (its module doc)


def arch_specs(model: Model) -> tuple[str, list] | None:
    """(llama.cpp architecture, [(name, ne)] in file order) of a model whose architecture is here,
    else None (llama's layout, or refused by tensors.synthesised_tensors)."""
    arch = ARCHS.get(model.model_type)
    if arch is None:
        return None
    arch = nemotron_arch(model) if arch == "nemotron_h" else arch       # tensors_ssm: by num_experts_per_tok
    arch = kimi_arch(model) if arch == "kimi-linear" else arch          # tensors_kimi: kimi-k3 by its config
    h, vocab = model.hidden_size, ssm_vocab(model)
    if not vocab:
        raise ValueError(f"{model.name}: vocab_size is unknown; the embedding and output tensors cannot be sized")
    if arch in ("gpt-oss", "glm4moe", "qwen35moe", "qwen3next", "glm-dsa", "deepseek32", "minimax-m2") \
            and model.facts.moe is None:
        raise ValueError(f"{model.name}: llama.cpp's {arch} layers are MoE, and the config gives no experts")
    return arch, _head(model, h, vocab) + _LAYOUTS[arch](model, h) + mtp_loaded(model, arch)

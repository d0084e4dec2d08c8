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
nextn_predict_layers (gguf_nextn_layers below). llama.cpp loads their tensors only with load_mtp (TENSOR_SKIP
otherwise: placement's module doc), so their tensors are not listed here but for those loaded all the same
(glm-dsa/deepseek32's exp_probs_b.bias: _mtp_loaded); the blocks still take a share of the -ts split
(placement.place n_nextn) and count in the quantiser's n_layer_all (tensors._typed).
"""

from __future__ import annotations

import re

from ...layer import FULL
from ...model import Model
from .graphs_llama4 import llama4_tensors
from .settings import PR_22673, _build

__all__ = ["ARCHS", "arch_specs", "gguf_nextn_layers", "nextn_loaded"]

# kvmem model_type -> llama.cpp architecture (llama-arch.cpp LLM_ARCH_NAMES)
ARCHS = {"gpt_oss": "gpt-oss", "glm4_moe": "glm4moe", "deepseek_v2": "deepseek2", "deepseek_v3": "deepseek2",
         "kimi_k2": "deepseek2", "qwen3_5": "qwen35", "qwen3_5_text": "qwen35", "qwen3_5_moe": "qwen35moe",
         "qwen3_5_moe_text": "qwen35moe", "glm_moe_dsa": "glm-dsa", "minimax_m2": "minimax-m2",
         "deepseek_v32": "deepseek32", "qwen3_next": "qwen3next", "gemma4": "gemma4", "gemma4_text": "gemma4",
         "glm4": "glm4", "llama4": "llama4", "llama4_text": "llama4"}


def field(model: Model, name: str, default=None):
    """A config field, from text_config where the config nests it (Qwen3.5's)."""
    cfg = model.config or {}
    text = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else {}
    value = text.get(name, cfg.get(name))  # type: ignore[union-attr]  # text is a dict: the isinstance above
    return default if value is None else value


# llama.cpp architecture -> the config field convert_hf_to_gguf adds to block_count without --no-mtp (and writes as
# nextn_predict_layers): llama.cpp@0c1e57098 conversion/glm.py#L117-L122 (glm4moe), #L328-L333 (glm-dsa),
# conversion/deepseek.py#L472-L476 (deepseek32), conversion/qwen.py#L296-L306 (qwen35, qwen35moe, qwen3next:
# _QwenMtpMixin). deepseek2 writes none (DeepseekV2Model skip_mtp, conversion/deepseek.py#L240, #L398-L402); nor do
# gpt-oss, minimax-m2 (conversion/minimax.py) and gemma4, nor the llama-like types.
_NEXTN_FIELD = {"glm4moe": "num_nextn_predict_layers", "glm-dsa": "num_nextn_predict_layers",
                "deepseek32": "num_nextn_predict_layers", "qwen35": "mtp_num_hidden_layers",
                "qwen35moe": "mtp_num_hidden_layers", "qwen3next": "mtp_num_hidden_layers"}


def gguf_nextn_layers(model: Model, build=None) -> int:
    """The NextN/MTP blocks a llama.cpp GGUF of ``model`` carries after its trunk (block_count - n_layer): a model
    read from a GGUF, its nextn_predict_layers (kvmem.sources.gguf_config: Model.mtp_layers); from a config, what
    convert_hf_to_gguf writes by default (_NEXTN_FIELD). Qwen3-Next's config names no count: its converter counts
    the checkpoint's (model.)mtp.layers.N tensors (conversion/qwen.py#L301-L305, #L316-L337), read here from a
    safetensors checkpoint when one is attached, else 0 (the published Qwen3-Next GGUFs predate _QwenMtpMixin).
    ``build`` (the llama.cpp build's date, None: current): a build before PR #22673 (settings.PR_22673) loads a
    qwen35 / qwen35moe file written without the MTP block (the converter of its day skipped mtp.*): 0 there."""
    checkpoint = model.checkpoint
    if getattr(checkpoint, "format", None) == "gguf":
        return model.mtp_layers
    arch = ARCHS.get(model.model_type, "")
    name = _NEXTN_FIELD.get(arch)
    if name is None or (arch in ("qwen35", "qwen35moe") and build is not None and _build(build) < PR_22673):
        return 0
    count = field(model, name, 0) or 0
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise ValueError(f"{model.name}: config field {name!r} is {count!r}; convert_hf_to_gguf adds it to "
                         "block_count as a whole number of MTP layers")
    if count == 0 and name == "mtp_num_hidden_layers" and getattr(checkpoint, "format", None) == "safetensors":
        found = {int(m.group(1)) for t in getattr(checkpoint, "tensors", ())
                 if (m := _MTP_TENSOR.match(t.name))}
        count = max(found) + 1 if found else 0
    return count


def nextn_loaded(model: Model) -> tuple:
    """Name endings of the MTP block's tensors llama.cpp creates with TENSOR_NOT_REQUIRED alone, so loads without
    load_mtp: glm-dsa's and deepseek32's exp_probs_b.bias (llama.cpp@0c1e57098 src/models/glm-dsa.cpp#L155,
    deepseek32.cpp#L121); step35's block but attn_norm, Q/K/V/output, ffn_norm, eh_proj/enorm/hnorm (step35.cpp
    #L115-L171). Not listed: cohere2moe's and hy-v3's nextn tensors (cohere2moe.cpp#L102, hy-v3.cpp#L91-L95)."""
    if model.model_type == "step3p5":
        return (".exp_probs_b.bias", *(f".{n}.weight" for n in "attn_q_norm attn_k_norm attn_gate ffn_gate ffn_down "
                "ffn_up ffn_gate_inp ffn_gate_exps ffn_down_exps ffn_up_exps ffn_gate_shexp ffn_up_shexp "
                "ffn_down_shexp nextn.embed_tokens nextn.shared_head_head nextn.shared_head_norm".split()))
    return (".exp_probs_b.bias",) if ARCHS.get(model.model_type) in ("glm-dsa", "deepseek32") else ()


_MTP_TENSOR = re.compile(r"^(?:model\.)?mtp\.layers\.(\d+)\.")    # conversion/qwen.py#L322-L337


def _need(model: Model, name: str) -> int:
    value = field(model, name)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{model.name}: config field {name!r} is {value!r}; llama.cpp's "
                         f"{ARCHS[model.model_type]} tensors need it as a positive integer")
    return value


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
    n_head, f = model.num_attention_heads, _need(model, "intermediate_size")
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
    dense_f = _need(model, "intermediate_size")
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
    kv_lora, rope = _need(model, "kv_lora_rank"), _need(model, "qk_rope_head_dim")
    nope, v_dim = _need(model, "qk_nope_head_dim"), _need(model, "v_head_dim")
    q_lora = field(model, "q_lora_rank")
    first_dense = field(model, "first_k_dense_replace", 0)
    dense_f = _need(model, "intermediate_size")
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
            ih, ihd = _need(model, "index_n_heads"), _need(model, "index_head_dim")
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
    n_head, f = model.num_attention_heads, _need(model, "intermediate_size")
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
    d_state, k_heads = _need(model, "linear_key_head_dim"), _need(model, "linear_num_key_heads")
    v_heads, d_conv = _need(model, "linear_num_value_heads"), _need(model, "linear_conv_kernel_dim")
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
            out += _dense(b, h, _need(model, "intermediate_size"))
            continue
        e, f = moe.experts, moe.intermediate_size
        s = moe.shared_intermediate_size or f
        out += [(b + "ffn_gate_inp.weight", (h, e))] + _experts(b, h, f, e)
        out += [(b + "ffn_gate_inp_shexp.weight", (h,))] + _shared(b, h, s)
    return out


_LAYOUTS = {"gpt-oss": _gpt_oss, "glm4": _glm4, "glm4moe": _glm4_moe, "deepseek2": _deepseek2, "glm-dsa": _glm_dsa,
            "deepseek32": lambda model, h: _deepseek2(model, h, indexer=True), "minimax-m2": _minimax_m2,
            "qwen35": _qwen35, "qwen35moe": _qwen35, "qwen3next": lambda model, h: _qwen35(model, h, fused_ba=True),
            "gemma4": _gemma4, "llama4": llama4_tensors}     # llama4: graphs_llama4 (its module doc)


def arch_specs(model: Model) -> tuple[str, list] | None:
    """(llama.cpp architecture, [(name, ne)] in file order) of a model whose architecture is here,
    else None (llama's layout, or refused by tensors.synthesised_tensors)."""
    arch = ARCHS.get(model.model_type)
    if arch is None:
        return None
    h, vocab = model.hidden_size, model.facts.vocab_size
    if not vocab:
        raise ValueError(f"{model.name}: vocab_size is unknown; the embedding and output tensors cannot be sized")
    if arch in ("gpt-oss", "glm4moe", "qwen35moe", "qwen3next", "glm-dsa", "deepseek32", "minimax-m2") \
            and model.facts.moe is None:
        raise ValueError(f"{model.name}: llama.cpp's {arch} layers are MoE, and the config gives no experts")
    return arch, _head(model, h, vocab) + _LAYOUTS[arch](model, h) + _mtp_loaded(model, arch)


def _mtp_loaded(model: Model, arch: str) -> list:
    """The MTP blocks' tensors llama.cpp loads without load_mtp (nextn_loaded), after the trunk: glm-dsa's and
    deepseek32's exp_probs_b.bias [n_expert], which the converter writes from each block's e_score_correction_bias
    (scoring_func sigmoid). The blocks' other tensors are skipped at load and not listed."""
    moe = model.facts.moe
    if arch not in ("glm-dsa", "deepseek32") or moe is None or field(model, "scoring_func") != "sigmoid":
        return []
    n, e = model.num_layers, moe.experts
    return [(f"blk.{n + j}.exp_probs_b.bias", (e,)) for j in range(gguf_nextn_layers(model))]

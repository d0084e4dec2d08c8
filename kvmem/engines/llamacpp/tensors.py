"""The tensor list of a llama.cpp GGUF: the file's own, or one written from a config and a weight format.

A model read from a GGUF (kvmem.sources.gguf) carries the file's tensor infos: those are used as
they are. For a config without a file, the tensors llama.cpp's converter writes are laid out
(llama-arch.cpp tensor names; ne0 first, a Linear of out x in is [in, out]) and each gets the
ggml type llama.cpp's quantiser gives it for the weight format (src/llama-quant.cpp
llama_tensor_get_type, the main rules only):

    q4_k_m / q5_k_m  Q4_K / Q5_K; Q6_K for output.weight (token_embd when the output is tied to
                     it), and for attn_v and ffn_down (ffn_down_exps too) on the layers
                     use_more_bits() picks (the first and last eighth, and every third in between);
                     an LLM_TYPE_70B model (80 layers: llama with GQA, qwen2) gets Q5_K on its
                     other attn_v
    q4_0             Q4_0; Q6_K for output.weight (token_embd when tied) ("else if (new_type !=
                     GGML_TYPE_Q8_0) new_type = GGML_TYPE_Q6_K"); quantised with an importance
                     matrix (imatrix=True), Q4_1 for ffn_down on the first eighth of the layers
                     ("qs.has_imatrix && i_layer < n_layer/8")
    q6_k, q8_0       Q6_K, Q8_0 for every weight matrix
    f16, bf16        F16, BF16
    phi3 (Phi-3, Phi-4)  one attn_qkv per layer (Q5_K under q4_k_m, Q6_K under q5_k_m: the
                     ATTENTION_QKV rule) and one ffn_up holding gate and up (2 x n_ff), as
                     convert_hf_to_gguf writes Phi-3's qkv_proj and gate_up_proj (models/phi3.cpp:
                     ffn_up "{ n_embd, 2 * n_ff }"); checked on ollama's phi4 (issue #13552)
    an 8-expert model (Mixtral): Q8_0 on every attn_k and attn_v whatever the format
                     ("hparams.n_expert == 8 ... bumping this to Q8_0 trades just ~128MB"), and with
                     q4_k_m Q5_K on attn_output (the ATTENTION_OUTPUT rule for n_expert == 8)
    norms, routers (ffn_gate_inp), biases (qwen2's attn_q/k/v.bias) and other 1-D tensors F32
    (tensor_allows_quantization: "quantize only 2D and 3D tensors"); the output rule gives
    Q8_0 when ne0 is not whole blocks of the format ("nx % qk_k != 0"); a K-quant whose ne0 is
    not whole 256-blocks falls back (tensor_type_fallback: Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0).
Rules as src/llama-quant.cpp llama_tensor_get_type_impl holds them in llama.cpp 0c1e57098.
Llama 3.1+ configs (rope_scaling llama3) also get rope_freqs.weight (head_dim / 2 floats), which
llama.cpp loads once per layer.
Order: output.weight, output_norm, token_embd, then blk.0, blk.1, ... as the Qwen3-30B-A3B log of
    llama.cpp issue #13729 shows it (its CPU_Mapped span holds output, token_embd and the first
    layers and nothing else). Checked: Qwen3-30B-A3B Q4_K_M, 241 f32 + 289 q4_K + 49 q6_K tensors,
    17.28 GiB (issue #14235); Llama-3-8B Q4_K_M, 65 + 193 + 33 tensors, 4403.49 + 281.81 MiB;
    Llama-3.x-70B Q8_0 on two GPUs, 24277.75 + 46151.91 + 1064.62 MiB (ollama issue #11986)
    (tests/engines/test_llamacpp_logs.py).

This is a model of a file, not a file: real Q4_K_M GGUFs differ (the quantiser's other rules,
imatrix choices, per-uploader overrides) by a few percent; the result says so in its notes.
Refused by name: gpt_neox, gpt_oss and glm4_moe, whose llama.cpp tensors are not llama's (llama.cpp
0c1e57098 refuses kvmem's llama-style layout of them: "check_tensor_dims: tensor 'output_norm.bias' not
found" for gptneox, models/gptneox.cpp; "tensor 'blk.0.post_attention_norm.weight' not found" for
gpt-oss, models/openai-moe.cpp, and glm4moe, models/glm4-moe.cpp; tests/oracles/
test_llamacpp_presets_oracle.py); MLA, linear-attention and SSM layers (their tensors are not laid out here;
give the GGUF itself); a GGUF whose tensor list lacks layers or token_embd (one part of a split
GGUF: placement needs every tensor).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...model import FULL, SLIDING, Model
from .placement import GGML_TYPES

__all__ = ["GGUFTensor", "FORMATS", "tensors_for", "synthesised_tensors"]

FORMATS = ("q4_k_m", "q5_k_m", "q4_0", "q6_k", "q8_0", "f16", "bf16")
_BASE = {"q4_k_m": "Q4_K", "q5_k_m": "Q5_K", "q4_0": "Q4_0", "q6_k": "Q6_K", "q8_0": "Q8_0", "f16": "F16",
         "bf16": "BF16"}
_QKV_BIAS = {"qwen2", "qwen2_moe"}           # convert_hf_to_gguf writes attn_q/k/v.bias
_QK_NORM = {"qwen3", "qwen3_moe", "gemma3", "gemma3_text"}
_POST_NORMS = {"gemma2", "gemma3", "gemma3_text"}
_FUSED = {"phi3"}                             # llama-arch.cpp LLM_ARCH_PHI3: attn_qkv, and ffn_up = gate|up
# llama.cpp's own tensors for these (src/models/*.cpp load_arch_tensors), which kvmem does not write
_NOT_LAID_OUT = {"gpt_neox": "fused attn_qkv, biases, LayerNorm biases, ungated FFN",
                 "gpt_oss": "attn_sinks, post_attention_norm, biases, MXFP4 experts",
                 "glm4_moe": "leading dense layers, shared experts, exp_probs_b, biases, the NextN layer"}
_FALLBACK = {"Q2_K": "Q4_0", "Q3_K": "Q4_0", "Q4_K": "Q5_0", "Q5_K": "Q5_1", "Q6_K": "Q8_0"}


@dataclass(frozen=True)
class GGUFTensor:
    """One tensor info as a GGUF holds it (the fields placement reads: name, dtype, shape, nbytes)."""

    name: str
    dtype: str
    shape: tuple
    nbytes: int


def _tensor(name: str, ne: tuple, ggml_type: str) -> GGUFTensor:
    block, size = GGML_TYPES[ggml_type]
    if ne[0] % block:
        # llama-quant.cpp: "tensor cols are not divisible by 256, required for <type> - using fallback"
        ggml_type = _FALLBACK.get(ggml_type, "F16")
        block, size = GGML_TYPES[ggml_type]
    count = 1
    for x in ne:
        count *= x
    return GGUFTensor(name, ggml_type, tuple(ne), count // block * size)


def _use_more_bits(i: int, n: int) -> bool:
    """llama-quant.cpp use_more_bits(i_layer, n_layers)."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def synthesised_tensors(model: Model, weight_format: str, *, imatrix: bool = False) -> tuple[GGUFTensor, ...]:
    """The tensors a llama.cpp GGUF of ``model`` in ``weight_format`` would hold (see the module doc);
    ``imatrix``: the file was quantised with an importance matrix (only q4_0's ffn_down rule reads it)."""
    fmt = str(weight_format).lower().replace("-", "_")
    if fmt not in _BASE:
        raise ValueError(f"weight_format must be one of {', '.join(FORMATS)} for a llama.cpp layout without a "
                         f"GGUF file, got {weight_format!r}")
    if model.model_type in _NOT_LAID_OUT:
        raise ValueError(f"{model.name}: kvmem does not lay out llama.cpp's {model.model_type} tensors "
                         f"({_NOT_LAID_OUT[model.model_type]}): give the GGUF file itself")
    bad = [i for i, layer in enumerate(model.layers) if layer.kind not in (FULL, SLIDING)]
    if bad:
        raise ValueError(f"{model.name}: layer {bad[0]} is {model.layers[bad[0]].kind!r}; kvmem lays out llama.cpp "
                         "tensors only for full/sliding attention layers: give the GGUF file itself")
    base = _BASE[fmt]
    mixed = fmt in ("q4_k_m", "q5_k_m")
    facts = model.facts
    h, n, vocab = model.hidden_size, model.num_layers, facts.vocab_size
    if not vocab:
        raise ValueError(f"{model.name}: vocab_size is unknown; the embedding and output tensors cannot be sized")
    moe = facts.moe
    quantised = GGML_TYPES[base][0] > 1
    head = "Q6_K" if quantised and base != "Q8_0" else base     # the output rule: Q6_K unless Q8_0
    if quantised and h % GGML_TYPES[base][0]:
        head = "Q8_0"                            # "nx % qk_k != 0": Q8_0
    eight = moe is not None and moe.experts == 8 and quantised
    # LLM_TYPE_70B (models/llama.cpp, models/qwen2.cpp load_hparams): 80 layers, llama's with GQA
    seventy = n == 80 and (model.model_type == "qwen2" or (model.model_type == "llama"
                                                          and model.layers[0].kv_heads != model.num_attention_heads))
    fused = model.model_type in _FUSED
    out = []
    if not facts.tie_word_embeddings:
        out.append(_tensor("output.weight", (h, vocab), head))
    out += [_tensor("output_norm.weight", (h,), "F32"),
            _tensor("token_embd.weight", (h, vocab), base if not facts.tie_word_embeddings else head)]
    rope = (model.config or {}).get("rope_scaling") or {}
    if model.model_type == "llama" and rope.get("rope_type") == "llama3":   # convert_hf_to_gguf: the llama3 factors
        out.append(_tensor("rope_freqs.weight", (model.layers[0].head_dim_k // 2,), "F32"))
    for i, layer in enumerate(model.layers):
        b = f"blk.{i}."
        more = "Q6_K" if mixed and _use_more_bits(i, n) else base
        # q4_0 with an imatrix: "qs.has_imatrix && i_layer < n_layer/8" -> Q4_1 ffn_down
        down = "Q4_1" if fmt == "q4_0" and imatrix and i < n // 8 else more
        attn_v = more
        if mixed and attn_v == "Q4_K" and seventy:
            attn_v = "Q5_K"                      # LLM_TYPE_70B: a Q4_K attn_v one step up
        attn_k, attn_o = base, base
        if eight:                                # n_expert == 8: attn_k and attn_v Q8_0
            attn_k = attn_v = "Q8_0"
            attn_o = "Q5_K" if fmt == "q4_k_m" else base
        q, kv_k, kv_v = model.num_attention_heads * layer.head_dim_k, layer.kv_heads * layer.head_dim_k, \
            layer.kv_heads * layer.head_dim_v
        out.append(_tensor(b + "attn_norm.weight", (h,), "F32"))
        if fused:                                # ATTENTION_QKV: Q4_K_M -> Q5_K, Q5_K_M -> Q6_K
            qkv = {"q4_k_m": "Q5_K", "q5_k_m": "Q6_K"}.get(fmt, base)
            out.append(_tensor(b + "attn_qkv.weight", (h, q + kv_k + kv_v), qkv))
        else:
            out += [_tensor(b + "attn_q.weight", (h, q), base), _tensor(b + "attn_k.weight", (h, kv_k), attn_k),
                    _tensor(b + "attn_v.weight", (h, kv_v), attn_v)]
        out.append(_tensor(b + "attn_output.weight", (model.num_attention_heads * layer.head_dim_v, h), attn_o))
        if model.model_type in _QKV_BIAS:
            out += [_tensor(b + "attn_q.bias", (q,), "F32"), _tensor(b + "attn_k.bias", (kv_k,), "F32"),
                    _tensor(b + "attn_v.bias", (kv_v,), "F32")]
        if model.model_type in _QK_NORM:
            out += [_tensor(b + "attn_q_norm.weight", (layer.head_dim_k,), "F32"),
                    _tensor(b + "attn_k_norm.weight", (layer.head_dim_k,), "F32")]
        if model.model_type in _POST_NORMS:
            out += [_tensor(b + "post_attention_norm.weight", (h,), "F32"),
                    _tensor(b + "post_ffw_norm.weight", (h,), "F32")]
        out.append(_tensor(b + "ffn_norm.weight", (h,), "F32"))
        routed = moe is not None and (not moe.moe_layers or moe.moe_layers[i])
        if routed:
            e, f = moe.experts, moe.intermediate_size
            out += [_tensor(b + "ffn_gate_inp.weight", (h, e), "F32"),
                    _tensor(b + "ffn_gate_exps.weight", (h, f, e), base),
                    _tensor(b + "ffn_up_exps.weight", (h, f, e), base),
                    _tensor(b + "ffn_down_exps.weight", (f, h, e), down)]
            if moe.shared_intermediate_size:
                s = moe.shared_intermediate_size
                out += [_tensor(b + "ffn_gate_shexp.weight", (h, s), base),
                        _tensor(b + "ffn_up_shexp.weight", (h, s), base),
                        _tensor(b + "ffn_down_shexp.weight", (s, h), down)]
        else:
            f = moe.dense_intermediate_size if moe is not None else facts.intermediate_size
            if not f:
                raise ValueError(f"{model.name}: intermediate_size is unknown; the FFN tensors cannot be sized")
            gate_up = [_tensor(b + "ffn_up.weight", (h, 2 * f), base)] if fused else \
                [_tensor(b + "ffn_gate.weight", (h, f), base), _tensor(b + "ffn_up.weight", (h, f), base)]
            out += gate_up + [_tensor(b + "ffn_down.weight", (f, h), down)]
    return tuple(out)


def tensors_for(model: Model, weight_format: str | None) -> tuple[tuple, str]:
    """(tensors, source): the GGUF's own tensor infos when ``model`` was read from one (and
    weight_format is None or "auto"), else the synthesised layout."""
    checkpoint = model.checkpoint
    if checkpoint is not None and getattr(checkpoint, "format", None) == "gguf" and weight_format in (None, "auto"):
        tensors = tuple(checkpoint.tensors)
        parts = [t.name.split(".") for t in tensors]
        layers = {int(p[1]) for p in parts if p[0] == "blk" and len(p) > 1 and p[1].isdigit()}
        missing = sorted(set(range(model.num_layers)) - layers)
        if missing or not any(t.name == "token_embd.weight" for t in tensors):
            raise ValueError(f"{checkpoint.source}: the GGUF's tensor list lacks "
                             + (f"layers {missing[0]}..{missing[-1]}" if missing else "token_embd.weight")
                             + " (one part of a split GGUF?): placement needs every tensor; merge the parts "
                               "(llama-gguf-split --merge) or give a weight format")
        return tensors, f"the GGUF's own tensor infos ({checkpoint.source})"
    if weight_format in (None, "auto"):
        raise ValueError(f"{model.name}: no GGUF file was read, so the llama.cpp layout needs a weight format "
                         f"({', '.join(FORMATS)})")
    return synthesised_tensors(model, weight_format), (
        f"laid out from the config with llama.cpp's {weight_format} mix (src/llama-quant.cpp main rules); a real "
        "GGUF differs by a few percent: give the file for exact bytes")

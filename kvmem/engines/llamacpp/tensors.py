"""The tensor list of a llama.cpp GGUF: the file's own, or one written from a config and a weight format.

A model read from a GGUF (kvmem.sources.gguf) carries the file's tensor infos: those are used as
they are. For a config without a file, the tensors llama.cpp's converter writes are laid out
(llama-arch.cpp tensor names; ne0 first, a Linear of out x in is [in, out]) and each gets the
ggml type llama.cpp's quantiser gives it for the file type (kvmem.engines.llamacpp.quant_mix: every
llama-quantize type, Q4_K_M to IQ1_S, TQ1_0 and MXFP4_MOE, llama_tensor_get_type transcribed and
judged by llama.cpp's own --dry-run), from the source types convert_hf_to_gguf writes (F32 for 1-D
tensors, norms and routers; F16 else, BF16/F32 for those file types). One build difference is kept:
phi3 (Phi-3, Phi-4): one attn_qkv per layer and one ffn_up holding gate and up (2 x n_ff), as
    convert_hf_to_gguf writes Phi-3's qkv_proj and gate_up_proj (models/phi3.cpp: ffn_up
    "{ n_embd, 2 * n_ff }"); its attn_qkv gets the ATTENTION_QKV rule of the quantiser that wrote
    the published files (Q5_K under q4_k_m, Q6_K under q5_k_m; checked on ollama's phi4, issue
    #13552), which 0c1e57098's category_is_attn_v shadows.
Llama 3.1+ configs (rope_scaling llama3) also get rope_freqs.weight (head_dim / 2 floats), which
llama.cpp loads once per layer.
Order: output.weight, output_norm, token_embd, then blk.0, blk.1, ... as the Qwen3-30B-A3B log of
    llama.cpp issue #13729 shows it (its CPU_Mapped span holds output, token_embd and the first
    layers and nothing else). Checked: Qwen3-30B-A3B Q4_K_M, 241 f32 + 289 q4_K + 49 q6_K tensors,
    17.28 GiB (issue #14235); Llama-3-8B Q4_K_M, 65 + 193 + 33 tensors, 4403.49 + 281.81 MiB;
    Llama-3.x-70B Q8_0 on two GPUs, 24277.75 + 46151.91 + 1064.62 MiB (ollama issue #11986)
    (tests/engines/test_llamacpp_logs.py).

This is a model of a file, not a file: real GGUFs differ (an importance matrix, per-uploader
--tensor-type overrides such as the Unsloth UD mixes) by a few percent; the result says so in its notes.
Architectures whose tensors are not llama's: gpt-oss, glm4 (dense GLM-4-0414: test_llamacpp_glm4_oracle.py),
glm4moe, deepseek2 (MLA), glm-dsa and deepseek32
(MLA + indexer), minimax-m2, gemma4, qwen35, qwen35moe and qwen3next (Gated DeltaNet) from
kvmem.engines.llamacpp.arch_tensors, llama4 (Llama 4 Scout / Maverick: graphs_llama4.llama4_tensors,
test_llamacpp_llama4_oracle.py), each checked against llama.cpp loading a sparse
GGUF of it (tests/oracles/test_llamacpp_layout_families_oracle.py); falcon, gpt2 and gptneox (fused QKV, LayerNorm
biases: graphs_classic, tests/oracles/test_llamacpp_classic_oracle.py). Refused by name:
other MLA, linear-attention and SSM layers (give the GGUF itself); a GGUF
whose tensor list lacks layers or token_embd (one part of a split GGUF: placement needs every tensor).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...layer import FULL, SLIDING
from ...model import Model
from .arch_fields import ARCHS, field
from .arch_tensors import arch_specs
from .nextn import gguf_nextn_layers
from .placement import GGML_TYPES
from .quant_mix import FTYPES, UD_MIXES, QuantModel, ftype_names, quant_types, ud_base
from .tensors_kimi import kimi_kv0, kimi_mxfp4

__all__ = ["GGUFTensor", "FORMATS", "GGUF_ARCH", "source_type", "tensors_for", "synthesised_tensors"]

FORMATS = tuple(ftype_names())              # llama-quantize's file types (quant_mix.FTYPES), aliases after
_SOURCE = {"f32": "F32", "bf16": "BF16"}    # convert_hf_to_gguf --outtype: 2-D weights in F16 unless f32 / bf16
_QKV_BIAS = {"qwen2", "qwen2_moe"}           # convert_hf_to_gguf writes attn_q/k/v.bias
_QK_NORM = {"qwen3", "qwen3_moe", "gemma3", "gemma3_text"}
_POST_NORMS = {"gemma2", "gemma3", "gemma3_text"}
_FUSED = {"phi3"}                             # llama-arch.cpp LLM_ARCH_PHI3: attn_qkv, and ffn_up = gate|up
# llama.cpp's own tensors for these (src/models/*.cpp load_arch_tensors), which kvmem does not write
_NOT_LAID_OUT: dict[str, str] = {}      # gpt_neox: laid out by graphs_classic
# the model types laid out llama's way, each judged by llama.cpp loading its GGUF
# (tests/oracles/test_llamacpp_presets_oracle.py, test_llamacpp_layout_families_oracle.py for qwen2_moe)
_LLAMA_LIKE = {"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gemma2", "gemma3",
               "gemma3_text", "phi3"}
# kvmem model_type -> llama.cpp architecture (llama-arch.cpp LLM_ARCH_NAMES) for the quantiser's arch rules
GGUF_ARCH = {"mistral": "llama", "mixtral": "llama", "qwen3_moe": "qwen3moe", "qwen2_moe": "qwen2moe",
             "gemma3_text": "gemma3"}


@dataclass(frozen=True)
class GGUFTensor:
    """One tensor info as a GGUF holds it (the fields placement reads: name, dtype, shape, nbytes)."""

    name: str
    dtype: str
    shape: tuple
    nbytes: int


def _nbytes(ne: tuple, ggml_type: str) -> int:
    block, size = GGML_TYPES[ggml_type]
    count = 1
    for x in ne:
        count *= x
    return count // block * size


def source_type(name: str, ne: tuple, fmt: str) -> str:
    """The type convert_hf_to_gguf.py writes a tensor in: F32 for 1-D tensors, norms and the router
    (FFN_GATE_INP: TextModel.prepare_tensors "Some tensor types are always in float32"), else the
    --outtype (F16 for a file quantised from it)."""
    if ".ffn_gate_tid2eid." in name:    # conversion/deepseek.py#L748-L763: DeepSeek-V4's hash routing table, int32
        return "I32"
    if ".indexer.q_proj." in name or ".indexer.k_proj." in name:   # conversion/minimax.py#L172-L175: MSA's, F32
        return "F32"
    if ".altup_correct_coef." in name or ".altup_predict_coef." in name:   # gemma3n (conversion/base.py#L1109-L1110)
        return "F32"
    if ".ssm_conv1d_" in name:     # Kimi SSM_CONV1D_Q/K/V: F32 (llama.cpp@0c1e57098 conversion/base.py#L1111-L1114)
        return "F32"
    if (len(ne) == 1 or name.endswith("_norm.weight") or ".ffn_gate_inp" in name or ".ssm_conv1d." in name
            or ".indexer.proj." in name or not name.endswith(".weight")   # conversion/base.py prepare_tensors
            or name == "position_embd.weight"):     # POS_EMBD: llama.cpp@0c1e57098 conversion/base.py#L1088-L1095
        return "F32"
    return _SOURCE.get(fmt, "F16")


# gpt-oss: convert_hf_to_gguf writes the routed experts in the checkpoint's own MXFP4 (conversion/gpt_oss.py
# repack_mxfp4), and every published gpt-oss GGUF keeps them so whatever its label (llama-quantize will not
# requantize them: "requantizing from type mxfp4 is disabled", src/llama-quant.cpp#L1306-L1308; the headers of
# ggml-org's, Unsloth's, bartowski's and lmstudio's files, NousResearch/hermes-agent#116681): laid out as
# llama-quantize with --tensor-type ffn_(gate|up|down)_exps.weight=mxfp4
GPT_OSS_EXPERTS = ((r"ffn_(gate|up|down)_exps\.weight", "mxfp4"),)


def _typed(model: Model, specs: list, fmt: str, *, imatrix: bool, arch: str, n_head_kv: int = 0,
           qkv_is_attn_v: bool = True, build=None, tensor_types=()) -> tuple:
    """GGUFTensors of ``specs`` ((name, ne) in file order) typed by llama.cpp's quantiser (quant_mix)."""
    first = model.layers[0]
    moe = model.facts.moe
    n = model.num_layers
    # LLM_TYPE_70B (models/llama.cpp, models/qwen2.cpp load_hparams): 80 layers, llama's with GQA
    seventy = n == 80 and (arch == "qwen2" or (arch == "llama" and first.kv_heads != model.num_attention_heads))
    # the quantiser's layer count is n_layer_all, the file's MTP blocks included (llama.cpp@0c1e57098
    # src/llama-quant.cpp#L940: n_ffn_down = n_ffn_gate = n_ffn_up = hparams.n_layer_all), and the MTP blocks'
    # attention in n_attention_wv (#L927-L940, counted over the file's tensors): one attn_v each where the block is
    # an attention layer with V (glm4-moe.cpp#L62, qwen35.cpp#L100, qwen35moe.cpp#L116, qwen3next's trunk layer);
    # MLA blocks write attn_k_b / attn_v_b, in no attn_v category
    nextn = gguf_nextn_layers(model, build)
    qm = QuantModel(arch=arch, n_layer=n + nextn, n_expert=moe.experts if moe else 0,
                    n_head=model.num_attention_heads,
                    n_head_kv=n_head_kv or first.kv_heads or model.num_attention_heads, llm_type_70b=seventy,
                    unlisted_attn_v=nextn if arch in ("glm4moe", "qwen35", "qwen35moe", "qwen3next",
                                                      "nemotron_h_moe") else 0)
    keep = GPT_OSS_EXPERTS if arch in ("gpt-oss", "deepseek4") else ()     # deepseek4: graphs_dsv4's module doc
    keep = GPT_OSS_EXPERTS if arch == "kimi-k3" and kimi_mxfp4(model) else keep     # tensors_kimi's module doc
    types = quant_types([(name, ne, source_type(name, ne, fmt)) for name, ne in specs], fmt, qm, imatrix=imatrix,
                        qkv_is_attn_v=qkv_is_attn_v, tensor_types=tuple(tensor_types) + keep)
    for pattern, ggml in keep:         # F16/BF16/F32 files: the converter's own MXFP4 experts (no quantiser run)
        types.update({name: ggml.upper() for name, _ in specs if re.search(pattern, name)})
    return tuple(GGUFTensor(name, types[name], tuple(ne), _nbytes(ne, types[name])) for name, ne in specs)


def synthesised_tensors(model: Model, weight_format: str, *, imatrix: bool = False, build=None,
                        tensor_types=()) -> tuple[GGUFTensor, ...]:
    """The tensors a llama.cpp GGUF of ``model`` in ``weight_format`` (a llama-quantize file type)
    would hold (see the module doc); ``imatrix``: the file was quantised with an importance matrix; ``build``: the
    date of the llama.cpp build that loads it (None: current), which bounds the file's MTP blocks
    (arch_tensors.gguf_nextn_layers) and so the quantiser's layer count; ``tensor_types``: llama-quantize's
    --tensor-type PATTERN=TYPE rules, in order (quant_mix.quant_types), for a file quantised with them."""
    fmt = str(weight_format).lower().replace("-", "_")
    if fmt.startswith("ud_"):          # an Unsloth UD-* mix: approximated by llama-quantize's mix (quant_mix.UD_MIXES)
        base = ud_base(fmt)
        if base is None:
            raise ValueError(f"{str(weight_format)[:100]!r} is not an Unsloth UD mix kvmem approximates "
                             f"({', '.join(UD_MIXES)})")
        fmt = base
    if fmt not in FORMATS:
        raise ValueError(f"weight_format must be one of {', '.join(FORMATS)} for a llama.cpp layout without a "
                         f"GGUF file, got {weight_format!r}")
    fmt = {"q3_k": "q3_k_m", "q4_k": "q4_k_m", "q5_k": "q5_k_m", "mxfp4": "mxfp4_moe"}.get(fmt, fmt)
    assert fmt in FTYPES
    own = arch_specs(model)
    if own is not None:     # head_count_kv as convert_hf_to_gguf writes it: num_key_value_heads
        # jamba / nemotron_h write head_count_kv per layer (tensors_ssm): n_gqa() of a Mamba layer 0 is 0
        kv0 = model.layers[0].kv_heads if own[0] in ("jamba", "nemotron_h", "nemotron_h_moe") else None
        kv0 = kimi_kv0(model) if own[0] in ("kimi-linear", "kimi-k3") else kv0     # tensors_kimi: 1 on MLA, 0 on KDA
        return _typed(model, own[1], fmt, imatrix=imatrix, arch=own[0], n_head_kv=field(
            model, "num_key_value_heads", 0) if kv0 is None else kv0, build=build, tensor_types=tensor_types)
    if model.model_type in _NOT_LAID_OUT:
        raise ValueError(f"{model.name}: kvmem does not lay out llama.cpp's {model.model_type} tensors "
                         f"({_NOT_LAID_OUT[model.model_type]}): give the GGUF file itself")
    bad = [i for i, layer in enumerate(model.layers) if layer.kind not in (FULL, SLIDING)]
    if not bad and model.model_type not in _LLAMA_LIKE:
        raise ValueError(f"{model.name}: kvmem lays out llama.cpp tensors from a config for "
                         f"{', '.join(sorted(_LLAMA_LIKE | set(ARCHS)))}; {model.model_type!r} is not one of them (its "
                         "load_arch_tensors in llama.cpp's src/models/ is not transcribed): give the GGUF file itself")
    if bad:
        kind = model.layers[bad[0]].kind.value
        raise ValueError(f"{model.name}: layer {bad[0]} is {kind!r}; kvmem lays out llama.cpp "
                         "tensors from a config only for full/sliding attention layers and for the "
                         f"{', '.join(sorted(set(ARCHS.values())))} architectures, not {model.model_type}: give the "
                         "GGUF file itself")
    facts = model.facts
    h, vocab = model.hidden_size, facts.vocab_size
    if not vocab:
        raise ValueError(f"{model.name}: vocab_size is unknown; the embedding and output tensors cannot be sized")
    moe = facts.moe
    fused = model.model_type in _FUSED
    out: list[tuple[str, tuple[int, ...]]] = []
    if not facts.tie_word_embeddings:
        out.append(("output.weight", (h, vocab)))
    out += [("output_norm.weight", (h,)), ("token_embd.weight", (h, vocab))]
    rope = (model.config or {}).get("rope_scaling") or {}
    if model.model_type == "llama" and rope.get("rope_type") == "llama3":   # convert_hf_to_gguf: the llama3 factors
        out.append(("rope_freqs.weight", (model.layers[0].head_dim_k // 2,)))
    for i, layer in enumerate(model.layers):
        b = f"blk.{i}."
        q, kv_k, kv_v = model.num_attention_heads * layer.head_dim_k, layer.kv_heads * layer.head_dim_k, \
            layer.kv_heads * layer.head_dim_v
        out.append((b + "attn_norm.weight", (h,)))
        if fused:
            out.append((b + "attn_qkv.weight", (h, q + kv_k + kv_v)))
        else:
            out += [(b + "attn_q.weight", (h, q)), (b + "attn_k.weight", (h, kv_k)), (b + "attn_v.weight", (h, kv_v))]
        out.append((b + "attn_output.weight", (model.num_attention_heads * layer.head_dim_v, h)))
        if model.model_type in _QKV_BIAS:
            out += [(b + "attn_q.bias", (q,)), (b + "attn_k.bias", (kv_k,)), (b + "attn_v.bias", (kv_v,))]
        if model.model_type in _QK_NORM:
            out += [(b + "attn_q_norm.weight", (layer.head_dim_k,)), (b + "attn_k_norm.weight", (layer.head_dim_k,))]
        if model.model_type in _POST_NORMS:
            out += [(b + "post_attention_norm.weight", (h,)), (b + "post_ffw_norm.weight", (h,))]
        out.append((b + "ffn_norm.weight", (h,)))
        routed = moe is not None and (not moe.moe_layers or moe.moe_layers[i])
        if routed:
            e, f = moe.experts, moe.intermediate_size  # type: ignore[union-attr]  # routed: moe is not None
            out += [(b + "ffn_gate_inp.weight", (h, e)), (b + "ffn_gate_exps.weight", (h, f, e)),
                    (b + "ffn_up_exps.weight", (h, f, e)), (b + "ffn_down_exps.weight", (f, h, e))]
            if moe.shared_intermediate_size:  # type: ignore[union-attr]  # routed: moe is not None
                s = moe.shared_intermediate_size  # type: ignore[union-attr]  # routed: moe is not None
                if model.model_type == "qwen2_moe":     # models/qwen2moe.cpp: the shared expert's sigmoid gate
                    out.append((b + "ffn_gate_inp_shexp.weight", (h,)))
                out += [(b + "ffn_gate_shexp.weight", (h, s)), (b + "ffn_up_shexp.weight", (h, s)),
                        (b + "ffn_down_shexp.weight", (s, h))]
        else:
            f = moe.dense_intermediate_size if moe is not None else facts.intermediate_size
            if not f:
                raise ValueError(f"{model.name}: intermediate_size is unknown; the FFN tensors cannot be sized")
            gate_up = [(b + "ffn_up.weight", (h, 2 * f))] if fused else \
                [(b + "ffn_gate.weight", (h, f)), (b + "ffn_up.weight", (h, f))]
            out += gate_up + [(b + "ffn_down.weight", (f, h))]
    # phi3's fused attn_qkv: the published files' quantiser had its own ATTENTION_QKV rule (Q5_K under
    # q4_k_m), which 0c1e57098's category_is_attn_v shadows (tests/oracles/test_llamacpp_presets_oracle.py)
    return _typed(model, out, fmt, imatrix=imatrix, arch=GGUF_ARCH.get(model.model_type, model.model_type),
                  qkv_is_attn_v=not fused, build=build, tensor_types=tensor_types)


def tensors_for(model: Model, weight_format: str | None, build=None) -> tuple[tuple, str]:
    """(tensors, source): the GGUF's own tensor infos when ``model`` was read from one (and
    weight_format is None or "auto"), else the synthesised layout for the file a llama.cpp of ``build`` (its date,
    None: current) loads, with its MTP blocks (arch_tensors.gguf_nextn_layers)."""
    checkpoint = model.checkpoint
    if checkpoint is not None and getattr(checkpoint, "format", None) == "gguf" and weight_format in (None, "auto"):
        tensors = tuple(checkpoint.tensors)  # type: ignore[attr-defined]  # a GGUF checkpoint: format == "gguf"
        parts = [t.name.split(".") for t in tensors]
        layers = {int(p[1]) for p in parts if p[0] == "blk" and len(p) > 1 and p[1].isdigit()}
        missing = sorted(set(range(model.num_layers)) - layers)
        if missing or not any(t.name == "token_embd.weight" for t in tensors):
            raise ValueError(f"{checkpoint.source}: the GGUF's tensor list lacks "  # type: ignore[attr-defined]  # GGUF
                             + (f"layers {missing[0]}..{missing[-1]}" if missing else "token_embd.weight")
                             + " (one part of a split GGUF?): placement needs every tensor; merge the parts "
                               "(llama-gguf-split --merge) or give a weight format")
        return tensors, f"the GGUF's own tensor infos ({checkpoint.source})"  # type: ignore[attr-defined]  # GGUF
    if weight_format in (None, "auto"):
        raise ValueError(f"{model.name}: no GGUF file was read, so the llama.cpp layout needs a weight format "
                         f"({', '.join(FORMATS)})")
    tensors = synthesised_tensors(model, weight_format, build=build)
    nextn = gguf_nextn_layers(model, build)
    mtp = (f"; the file carries {nextn} NextN/MTP block{'s' * (nextn > 1)} after the {model.num_layers} trunk layers, "
           "as convert_hf_to_gguf writes it by default: not loaded (no --spec-type draft-mtp), but counted in the -ts "
           "split (a --no-mtp file splits one block fewer)") if nextn else ""
    base = ud_base(weight_format)
    if base is not None:
        return tensors, (f"APPROXIMATION: Unsloth's {weight_format} chooses every tensor's type per model and "
                         f"publishes no rule (https://unsloth.ai/docs/basics/unsloth-dynamic-2.0-ggufs); laid out "
                         f"here as llama.cpp's {base} mix; published UD files are 0.87 to 1.41 times its bytes "
                         "(kvmem.engines.llamacpp.quant_mix.UD_PUBLISHED): give the file for its bytes" + mtp)
    return tensors, (
        f"laid out from the config with llama.cpp's {weight_format} mix (src/llama-quant.cpp llama_tensor_get_type, "
        "no importance matrix); a real GGUF differs by a few percent: give the file for exact bytes" + mtp)

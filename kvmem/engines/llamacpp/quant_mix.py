"""The ggml type llama.cpp's quantiser gives each tensor of a GGUF for a file type (llama-quantize's
Q4_K_M, IQ2_XXS, MXFP4_MOE, ...): src/llama-quant.cpp llama_tensor_get_type, transcribed.

Source: llama.cpp 0c1e57098 (vendored by llama-cpp-python 0.3.36), src/llama-quant.cpp; the line
ranges are beside each rule. Judge: llama.cpp's own quantiser in --dry-run over sparse GGUFs
(tests/oracles/test_llamacpp_layout_quant_oracle.py: every tensor's type, every file type).

The walk (llama_model_quantize_impl): tensors in the loader's order (weight_name_comparer: by
layer, input/output tensors first, then by name), counters over that order (n_attention_wv counts
the attn_v-like tensors; n_ffn_down/gate/up = n_layer), and per tensor:
    not quantisable (tensor_allows_quantization: 1-D, norms, routers, ...) -> its source type
    --token-embedding-type / --output-tensor-type                           -> that type
    else, when the file type's default type is quantised: the first --tensor-type pattern that
    regex_search-es the name, else the mix's rules (llama_tensor_get_type_impl, unless --pure);
    then the shape fallback (tensor_type_fallback: ne0 not whole blocks of the type).
What the rules read of the model: its architecture (falcon, bailingmoe3 and glm5-next have rules of
their own), n_expert, n_gqa() of layer 0 (n_head / n_head_kv), n_layer and LLM_TYPE_70B, and whether
an importance matrix was given (has_imatrix: only the IQ3_XXS, IQ4_NL/IQ4_XS and Q4_0/Q5_0 ffn_down
and IQ3_XXS attn_v rules read it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...dtypes import GGML_TYPES
from .file_types import FILE_TYPE_NAMES, FTYPES, UD_MIXES, UD_PUBLISHED, ftype_names, ftype_of, ud_base

__all__ = ["FTYPES", "FILE_TYPE_NAMES", "QuantModel", "quant_types", "ftype_of", "ftype_names", "UD_MIXES",
           "UD_PUBLISHED", "ud_base"]

_QUANTISED = {name.upper() for name, t in GGML_TYPES.items() if t.is_quantized}
_BLOCK = {name.upper(): t.block for name, t in GGML_TYPES.items()}

_IQ_LOW = {"iq2_xxs", "iq2_xs", "iq1_s", "iq2_s", "iq2_m", "iq1_m"}        # llama-quant.cpp#L543-L544
_OUT_Q5K = _IQ_LOW | {"iq3_xxs"}                                          # #L503-L505
_EIGHT_EXPERT_O = {"q2_k", "iq3_xs", "iq3_xxs", "q3_k_s", "q3_k_m", "iq4_nl", "q4_k_s", "q4_k_m", "iq3_s", "iq3_m",
                   "iq4_xs"}                                              # #L672-L675
# tensor_type_fallback (#L390-L443): a type whose block does not divide ne0 -> this one
_FALLBACK = {**dict.fromkeys(("IQ1_S", "IQ1_M", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ4_XS"), "IQ4_NL"),
             **dict.fromkeys(("Q2_0", "Q2_K", "Q3_K", "TQ1_0", "TQ2_0"), "Q4_0"),
             "Q4_K": "Q5_0", "Q5_K": "Q5_1", "Q6_K": "Q8_0"}
# tensor_allows_quantization (#L287-L386): name parts never quantised (the ones an LLM's GGUF can hold)
_NEVER = ("_norm.weight", "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup", "laurel", "per_layer_model_proj",
          "ssm_conv1d", "shortconv.conv.weight", "indexer.k_proj.weight", "indexer.q_proj.weight",
          "attn_rel_b.weight", ".position_embd", ".rel_pos", ".patch_embd", ".patch_merger")
_GLM5_NEXT_NEVER = ("hc_", "indexer.attn_q_b", "indexer.attn_k", "indexer.proj", "indexer_compressor_gate",
                    "indexer_compressor_ape", "ssm_f_a.weight", "ssm_f_b.weight", "ssm_g_a.weight", "ssm_g_b.weight",
                    "ssm_beta.weight", "attn_kv_a_mqa.weight", "attn_k_b.weight", "attn_v_b.weight")  # #L330-L345
_RWKV = ("time_mix_first", "time_mix_w0", "time_mix_w1", "time_mix_w2", "time_mix_v0", "time_mix_v1", "time_mix_v2",
         "time_mix_a0", "time_mix_a1", "time_mix_a2", "time_mix_g1", "time_mix_g2", "time_mix_decay_w1",
         "time_mix_decay_w2", "time_mix_lerp_fused")
_LAYER = re.compile(r"^blk\.(\d+)\.")
# a name holding any of _NEVER, of _RWKV's weights: one search each, not one substring test per part (quant_types asks
# every tensor name: Kimi-K3's 2,573 took 40 of its 80 ms in _allows)
_NEVER_IN = re.compile("|".join(map(re.escape, _NEVER)))
_RWKV_IN = re.compile("|".join(re.escape(f"{part}.weight") for part in _RWKV))


@dataclass(frozen=True)
class QuantModel:
    """What llama_tensor_get_type reads of the model (llama_model hparams, llm_type)."""

    arch: str                  # llama-arch.cpp LLM_ARCH_NAMES: "llama", "deepseek2", "gpt-oss", ...
    n_layer: int               # hparams.n_layer_all (NextN/MTP layers included)
    n_expert: int = 0
    n_head: int = 1            # of layer 0: n_gqa() = n_head / n_head_kv
    n_head_kv: int = 1
    llm_type_70b: bool = False  # LLM_TYPE_70B (llama: 80 layers with GQA; qwen2: 80 layers)
    unlisted_attn_v: int = 0   # the file's attn_v-like tensors not in the list quantised (its MTP blocks')

    @property
    def n_gqa(self) -> int:
        return self.n_head // self.n_head_kv if self.n_head_kv else 0    # llama-hparams.cpp n_gqa


def _category(name: str, qkv_is_attn_v: bool) -> str:
    """tensor_get_category (#L119-L155): the first name part it finds."""
    if name == "output.weight":
        return "output"
    if name in ("token_embd.weight", "per_layer_token_embd.weight"):
        return "token_embd"
    for part, cat in (("attn_qkv.weight", "attn_qkv"), ("attn_kv_b.weight", "attn_kv_b"), ("attn_v.weight", "attn_v"),
                      ("attn_k.weight", "attn_k"), ("attn_q.weight", "attn_q"),
                      ("attn_output.weight", "attn_output"), ("ffn_up", "ffn_up"), ("ffn_gate", "ffn_gate"),
                      ("ffn_down", "ffn_down")):
        if part in name:
            return "attn_v" if cat == "attn_qkv" and qkv_is_attn_v else cat
    return "other"


def _allows(name: str, ne: tuple, arch: str, quantize_output: bool) -> bool:
    """tensor_allows_quantization (#L287-L386), for the names an LLM's GGUF holds."""
    dims = len(ne)
    while dims > 1 and ne[dims - 1] == 1:       # ggml_n_dims: trailing 1s do not count
        dims -= 1
    if dims < 2 or not name.endswith("weight") or _NEVER_IN.search(name):
        return False
    if name == "output.weight" and not quantize_output:
        return False
    if arch == "glm5-next" and any(part in name for part in _GLM5_NEXT_NEVER):
        return False
    return not _RWKV_IN.search(name) and name not in ("position_embd.weight", "token_types.weight")


def _use_more_bits(i: int, n: int) -> bool:
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2      # #L452-L454


class _State:
    """quantize_state_impl's counters (#L166-L199), set by init_quantize_state_counters (#L927-L941)."""

    def __init__(self, model: QuantModel, cats: list, imatrix: bool):
        self.n_attention_wv = sum(c in ("attn_v", "attn_kv_b") for c in cats) + model.unlisted_attn_v
        self.tied = "output" not in cats
        self.n_ffn = model.n_layer
        self.i_attention_wv = self.i_ffn_down = self.i_ffn_gate = self.i_ffn_up = 0
        self.has_imatrix = imatrix


def _layer(model: QuantModel, counter: int, name: str) -> int:
    """layer_info (#L456-L470): the layer from the name when n_expert > 1, else the counter."""
    if max(1, model.n_expert) > 1:
        m = _LAYER.match(name)
        if m is None or int(m.group(1)) >= model.n_layer:
            raise ValueError(f"llama.cpp's quantiser cannot place {name!r} in one of {model.n_layer} layers")
        return int(m.group(1))
    return counter


def _impl(qs: _State, model: QuantModel, new: str, name: str, ne: tuple, ftype: str, cat: str) -> str:  # noqa: C901
    """llama_tensor_get_type_impl (#L446-L714), branch for branch."""
    arch, n_expert, gqa = model.arch, model.n_expert, model.n_gqa
    if arch == "glm5-next" and any(p in name for p in ("attn_q_a", "attn_q_b", "nextn.eh_proj")):   # #L473-L485
        if new not in ("F32", "BF16", "F16"):
            return "Q8_0"
    if cat == "output" or (qs.tied and cat == "token_embd"):                                 # #L489-L510
        if ftype == "mxfp4_moe":
            return "Q8_0"
        if arch == "falcon" or ne[0] % _BLOCK[new]:
            return "Q8_0"
        if ftype in _OUT_Q5K:
            return "Q5_K"
        return "Q6_K" if new != "Q8_0" else new
    if ftype == "mxfp4_moe":                                                                 # #L512-L526
        expert = arch != "bailingmoe3" or cat in ("ffn_up", "ffn_gate", "ffn_down")
        return "MXFP4" if len(ne) > 2 and ne[2] > 1 and expert else "Q8_0"
    if cat == "token_embd":                                                                  # #L527-L542
        if ftype in ("iq2_xxs", "iq2_xs", "iq1_s", "iq1_m"):
            return "Q2_K"
        if ftype in ("iq2_s", "iq2_m", "iq3_xxs"):
            return "IQ3_S"
        if ftype in ("tq1_0", "tq2_0", "q2_0"):
            return "Q4_K"
        return new
    if ftype in _IQ_LOW:                                                                     # #L543-L566
        s_or_m = ftype in ("iq2_s", "iq2_m")
        if cat in ("attn_v", "attn_kv_b"):
            qs.i_attention_wv += 1
            if gqa >= 4 or n_expert >= 4:
                return "Q4_K"
            return "IQ3_S" if s_or_m else "Q2_K"
        if n_expert == 8 and cat == "attn_k":
            return "Q4_K"
        if cat == "ffn_down":
            low = qs.i_ffn_down < qs.n_ffn // 8
            qs.i_ffn_down += 1
            return ("IQ3_S" if s_or_m else "Q2_K") if low else new
        if cat == "attn_output":
            if n_expert == 8:
                return "Q5_K"
            if ftype in ("iq1_s", "iq1_m"):
                return "IQ2_XXS"
            return "IQ3_S" if s_or_m else new
        return new
    if cat in ("attn_v", "attn_kv_b"):                                                       # #L567-L605
        i, n = qs.i_attention_wv, qs.n_attention_wv
        qs.i_attention_wv += 1
        if ftype == "q2_k":
            new = "Q4_K" if gqa >= 4 else "Q3_K"
        elif ftype == "q2_k_s" and gqa >= 4:
            new = "Q4_K"
        elif ftype == "iq3_xxs":
            new = "Q4_K" if gqa >= 4 else "IQ3_S" if not qs.has_imatrix else "IQ3_XXS"
        elif ftype in ("iq3_xs", "iq3_s") and gqa >= 4:
            new = "Q4_K"
        elif ftype == "iq3_m":
            new = "Q4_K"
        elif ftype == "q3_k_m":
            new = "Q5_K" if i < 2 else "Q4_K"
        elif ftype == "q3_k_l":
            new = "Q5_K"
        elif ftype in ("iq4_nl", "iq4_xs") and gqa >= 4:
            new = "Q5_K"
        elif ftype in ("q4_k_m", "q5_k_m") and _use_more_bits(i, n):
            new = "Q6_K"
        elif ftype == "q4_k_s" and i < 4:
            new = "Q5_K"
        if model.llm_type_70b and new in ("Q3_K", "Q4_K"):
            new = "Q5_K"
        return "Q8_0" if n_expert == 8 else new
    if cat == "attn_k":                                                                      # #L606-L617
        if n_expert == 8:
            return "Q8_0"
        return {"iq3_xs": "IQ3_XXS", "iq3_xxs": "IQ2_S"}.get(ftype, new)
    if cat == "attn_q":                                                                      # #L618-L625
        return {"iq3_xs": "IQ3_XXS", "iq3_xxs": "IQ2_S"}.get(ftype, new)
    if cat == "ffn_down":                                                                    # #L626-L669
        il, n = _layer(model, qs.i_ffn_down, name), qs.n_ffn
        qs.i_ffn_down += 1
        falcon = arch == "falcon"
        if ftype == "q2_k":
            return "Q3_K"
        if ftype == "q2_k_s":
            return "Q4_K" if il < n // 8 else new
        if ftype == "iq3_xxs" and not qs.has_imatrix:
            return "Q4_K" if il < n // 8 else "Q3_K"
        if ftype == "q3_k_m":
            return "Q5_K" if il < n // 16 else "Q4_K" if not falcon or _use_more_bits(il, n) else "Q3_K"
        if ftype == "iq3_m" and (il < n // 8 or (n_expert == 8 and _use_more_bits(il, n))):
            return "Q4_K"
        if ftype == "q3_k_l":
            return "Q4_K" if falcon else "Q5_K"
        if ftype == "q4_k_m":
            if falcon:
                return "Q6_K" if il < n // 16 else "Q5_K" if _use_more_bits(il, n) else "Q4_K"
            return "Q6_K" if _use_more_bits(il, n) else new
        if il < n // 8 and ftype in ("iq4_nl", "iq4_xs") and not qs.has_imatrix:
            return "Q5_K"
        if ftype == "q5_k_m" and _use_more_bits(il, n):
            return "Q6_K"
        if ftype == "q4_k_s" and not falcon and il < n // 8:
            return "Q5_K"
        if ftype in ("q4_0", "q5_0") and qs.has_imatrix and il < n // 8:
            return "Q4_1" if ftype == "q4_0" else "Q5_1"
        return new
    if cat == "attn_output":                                                                 # #L670-L688
        if arch == "falcon":
            return "Q4_K" if ftype == "q3_k_l" else new
        if n_expert == 8:
            return "Q5_K" if ftype in _EIGHT_EXPERT_O else new
        return {"q2_k": "Q3_K", "iq3_xxs": "IQ3_S", "q3_k_m": "Q4_K", "q3_k_l": "Q5_K", "iq3_m": "Q4_K"}.get(ftype, new)
    if cat == "attn_qkv":                                                                    # #L689-L695
        if ftype in ("q3_k_m", "q3_k_l", "iq3_m"):
            return "Q4_K"
        return {"q4_k_m": "Q5_K", "q5_k_m": "Q6_K"}.get(ftype, new)
    if cat in ("ffn_gate", "ffn_up"):                                                        # #L696-L711
        counter = qs.i_ffn_gate if cat == "ffn_gate" else qs.i_ffn_up
        il, n = _layer(model, counter, name), qs.n_ffn
        if cat == "ffn_gate":
            qs.i_ffn_gate += 1
        else:
            qs.i_ffn_up += 1
        if ftype == "iq3_xs" and n // 8 <= il < 7 * n // 8:
            return "IQ3_XXS"
    return new


def _fallback(name: str, ne0: int, new: str) -> str:
    """tensor_type_fallback (#L390-L443)."""
    if ne0 % _BLOCK[new] == 0:
        return new
    if new in _FALLBACK:
        out = _FALLBACK[new]
    elif _BLOCK[new] <= 32:
        out = new
    else:
        raise ValueError(f"{name}: ne0 {ne0} is not whole {new} blocks of {_BLOCK[new]}, and llama.cpp's quantiser "
                         f"has no fallback for {new} (src/llama-quant.cpp tensor_type_fallback)")
    return out if ne0 % _BLOCK[out] == 0 else "F16"


def _loader_order(name: str) -> tuple:
    """weight_name_comparer (src/llama-model-loader.h#L54-L65): layer (-1 outside blk.N), then name."""
    m = _LAYER.match(name)
    return (int(m.group(1)) if m else -1, name)


def quant_types(tensors, ftype: str, model: QuantModel, *, imatrix: bool = False, tensor_types=(),
                token_embedding_type: str | None = None, output_tensor_type: str | None = None, pure: bool = False,
                quantize_output: bool = True, qkv_is_attn_v: bool = True) -> dict[str, str]:
    """{name: ggml type (upper case)} llama-quantize gives ``tensors`` ((name, ne, source type) in any
    order; ne0 first) for file type ``ftype``. ``tensor_types``: --tensor-type PATTERN=TYPE rules in
    order; ``token_embedding_type`` / ``output_tensor_type``: --token-embedding-type /
    --output-tensor-type; ``pure``: --pure; ``quantize_output``: not --leave-output-tensor;
    ``qkv_is_attn_v``: category_is_attn_v counts a fused attn_qkv (#L157-L161; builds before the
    tensor_category rewrite gave it its own ATTENTION_QKV rule: False)."""
    ftype = ftype_of(ftype)
    default = FTYPES[ftype][1]
    rules = [(re.compile(p), ggml) for p, ggml in ((p, t.upper()) for p, t in tensor_types)]
    for _, ggml in rules:
        if ggml not in _BLOCK:
            raise ValueError(f"--tensor-type names {ggml!r}, not a ggml type")
    ordered = sorted(tensors, key=lambda t: _loader_order(t[0]))
    cats = [_category(t[0], qkv_is_attn_v) for t in ordered]
    qs = _State(model, cats, imatrix)
    out = {}
    for (name, ne, source), cat in zip(ordered, cats, strict=True):
        ne = tuple(ne)
        if not _allows(name, ne, model.arch, quantize_output):              # llama_tensor_get_type #L717-L778
            out[name] = source
            continue
        if token_embedding_type and cat == "token_embd":
            out[name] = token_embedding_type.upper()
            continue
        if output_tensor_type and cat == "output":
            out[name] = output_tensor_type.upper()
            continue
        new = default
        if default in _QUANTISED:
            manual = next((ggml for pattern, ggml in rules if pattern.search(name)), None)
            if manual is not None:
                new = manual
            elif not pure:
                new = _impl(qs, model, new, name, ne, ftype, cat)
            new = _fallback(name, ne[0], new)
        out[name] = new
    return out

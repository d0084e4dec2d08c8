"""Weight storage formats: bytes per weight of each group a format quantises, and "auto" read
from the config.

Formats (bytes per weight of the groups they quantise; docs/research/weight_formats.md):

"auto" is the checkpoint's own format: ``quantization_config`` when the config has one
(fp8 with weight_block_size -> fp8-block; mxfp4; awq; gptq; compressed-tensors int8/fp8/int4/MXFP4;
modelopt FP8/NVFP4), else the published checkpoints of gpt-oss (MXFP4 experts, model card)
and DeepSeek-V3/V3.2/R1 and Kimi K2 (block FP8, DeepSeek README_WEIGHTS), else the config dtype.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

from ..model import Model
from ..regex_guard import slow_pattern

EMBED_16 = Fraction(2)


@dataclass(frozen=True)
class _Format:
    name: str
    linear: Fraction                  # bytes per weight of dense linears (and experts, unless set)
    embedding: Fraction = EMBED_16   # bytes per weight of the embedding and lm_head
    experts: Fraction | None = None   # bytes per routed-expert weight, when it differs
    experts_only: bool = False        # mxfp4: only experts quantised in MoE models
    per_hidden: int = 0               # + this many bytes per output channel / input row (/ hidden)
    block_scale: int = 0              # fp8-block: + 4 B per block of this many weights
    note: str = ""


def _gguf(name: str, bpw: str) -> _Format:
    rate = Fraction(bpw) / 8
    return _Format(name, rate, rate, note=f"GGUF {name.upper()} at {bpw} bits per weight, measured on Llama-3.1-8B")


FORMATS = {
    "fp32": _Format("fp32", Fraction(4), Fraction(4)),
    "bf16": _Format("bf16", Fraction(2)),
    "fp16": _Format("fp16", Fraction(2)),
    "fp8": _Format("fp8", Fraction(1)),
    "fp8-block": _Format("fp8-block", Fraction(1), block_scale=128 * 128),
    "int8": _Format("int8", Fraction(1), per_hidden=4),
    "awq": _Format("awq", Fraction(133, 256)),
    "gptq": _Format("gptq", Fraction(133, 256), per_hidden=4),
    "nvfp4": _Format("nvfp4", Fraction(9, 16)),
    "mxfp4": _Format("mxfp4", Fraction(17, 32), experts_only=True),
    # compressed-tensors pack-quantized int4, 32 symmetric weights per 16-bit scale, on the routed experts
    # only (Kimi K2-Thinking / K2.5's ignore list keeps attention, shared experts, dense MLP, lm_head BF16)
    "int4-g32": _Format("int4-g32", Fraction(9, 16), experts_only=True),
    "q8_0": _gguf("q8_0", "8.5008"), "q6_k": _gguf("q6_k", "6.5633"),
    "q5_k_m": _gguf("q5_k_m", "5.7036"), "q5_k_s": _gguf("q5_k_s", "5.5704"),
    "q4_k_m": _gguf("q4_k_m", "4.8944"), "q4_k_s": _gguf("q4_k_s", "4.6672"),
    "q3_k_l": _gguf("q3_k_l", "4.2979"), "q3_k_m": _gguf("q3_k_m", "4.00"),
    "q3_k_s": _gguf("q3_k_s", "3.6429"), "q2_k": _gguf("q2_k", "3.1593"),
    # the rest of llama-quantize's file types, measured the same way on kvmem's llama.cpp layout of
    # Llama-3.1-8B (kvmem.engines.llamacpp.quant_mix: llama.cpp's quantiser, no importance matrix)
    "q5_1": _gguf("q5_1", "6.0377"), "q5_0": _gguf("q5_0", "5.5704"), "q4_1": _gguf("q4_1", "5.1031"),
    "q4_0": _gguf("q4_0", "4.6358"), "iq4_nl": _gguf("iq4_nl", "4.6818"), "iq4_xs": _gguf("iq4_xs", "4.4597"),
    "iq3_m": _gguf("iq3_m", "3.7628"), "iq3_s": _gguf("iq3_s", "3.6606"), "iq3_xs": _gguf("iq3_xs", "3.4977"),
    "iq3_xxs": _gguf("iq3_xxs", "3.3736"), "q2_k_s": _gguf("q2_k_s", "2.9697"), "iq2_m": _gguf("iq2_m", "2.9294"),
    "iq2_s": _gguf("iq2_s", "2.7403"), "q2_0": _gguf("q2_0", "2.6803"), "iq2_xs": _gguf("iq2_xs", "2.5882"),
    "tq2_0": _gguf("tq2_0", "2.5173"), "iq2_xxs": _gguf("iq2_xxs", "2.3824"), "tq1_0": _gguf("tq1_0", "2.1914"),
    "iq1_m": _gguf("iq1_m", "2.1460"), "iq1_s": _gguf("iq1_s", "2.0042"), "q1_0": _gguf("q1_0", "1.4817"),
}


GGUF_FORMATS = tuple(name for name in FORMATS if name.startswith(("q", "iq", "tq")))


_ALIASES = {
    "float32": "fp32", "f32": "fp32", "bfloat16": "bf16", "float16": "fp16", "f16": "fp16", "half": "fp16",
    "fp8_e4m3": "fp8", "fp8-e4m3": "fp8", "float8": "fp8", "fbgemm_fp8": "fp8",
    "fp8_block": "fp8-block", "fp8-128x128": "fp8-block", "block-fp8": "fp8-block",
    "w8a8": "int8", "int8-w8a8": "int8",
    "int4": "awq", "awq-int4": "awq", "int4-awq": "awq", "w4a16": "awq", "awq_marlin": "awq",
    "gptq-int4": "gptq", "gptq_marlin": "gptq", "fp4": "nvfp4",
    # llama-quantize's names for the same formats (llama.cpp@0c1e57098 tools/quantize/quantize.cpp#L34-L75:
    # MXFP4_MOE, and Q3_K / Q4_K / Q5_K for their _M mixes; kvmem.engines.llamacpp.file_types._ALIASES), so
    # that --weight-dtype takes every name check-log's weight_format does (kvmem.engines.llamacpp.tensors.FORMATS)
    "mxfp4_moe": "mxfp4", "q3_k": "q3_k_m", "q4_k": "q4_k_m", "q5_k": "q5_k_m",
}


# Published checkpoints stored quantised although their config carries no quantization_config.
_NATIVE = {"gpt_oss": ("mxfp4", "gpt-oss is published with MXFP4 MoE weights (OpenAI model card)"),
           "deepseek_v3": ("fp8-block", "DeepSeek-V3/R1 and Kimi K2 are published in block FP8 (README_WEIGHTS)"),
           "deepseek_v32": ("fp8-block", "DeepSeek-V3.2 is published in block FP8")}


def weight_formats() -> list[str]:
    """Every weight format name weights()/fit() accept (besides "auto" and the aliases)."""
    return list(FORMATS)


def _lookup(name: str) -> _Format:
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    if key not in FORMATS:
        from ..sources.bounded import quote
        raise ValueError(f"unknown weight_dtype {quote(name)}; formats: auto, {', '.join(FORMATS)}")
    return FORMATS[key]


# A compressed-tensors checkpoint whose ignore list keeps every non-expert linear 16-bit quantises the routed
# experts only (kvmem's experts_only formats): these modules (with or without a multimodal wrapper's
# "language_model." prefix) must be ignored where the model has them, and a routed expert's must not.
# An ignored linear gets no scheme and loads unquantised: vllm@v0.33.0
# vllm/model_executor/layers/quantization/compressed_tensors/compressed_tensors.py#L171-L175, #L1011-L1014;
# the match is the exact name or a "re:" regex (compressed_tensors/utils.py#L53-L120, should_ignore_layer)
_KEPT_16BIT = {
    "attention": ("model.layers.0.self_attn.o_proj",),
    "shared experts": ("model.layers.1.block_sparse_moe.shared_experts.down_proj",
                       "model.layers.1.mlp.shared_experts.down_proj"),
    "dense MLP": ("model.layers.0.mlp.down_proj",),
    "lm_head": ("lm_head",),
}
_EXPERT = ("model.layers.1.block_sparse_moe.experts.0.w2", "model.layers.1.mlp.experts.0.down_proj")


def _ignored(ignore: list, name: str) -> bool:
    """compressed-tensors' match of a module name against its ignore list: "re:" a regex (re.match),
    else the exact name."""
    for entry in ignore:
        entry = str(entry)
        if entry.startswith("re:") and (slow := slow_pattern(entry[3:])) is not None:
            raise ValueError(f"quantization_config ignore entry {entry[:80]!r} {slow}: its backtracking can take hours "
                             "on a module name, and kvmem does not search names with it")
        for candidate in (name, "language_model." + name):
            if entry.startswith("re:") and re.match(entry[3:], candidate) or entry == candidate:
                return True
    return False


def _experts_only_refusal(model: Model, qc: dict) -> str:
    """Why the checkpoint is not routed-experts-only quantised ("" when it is)."""
    moe = model.facts.moe
    if not moe:
        return "the model has no routed experts"
    ignore = list(qc.get("ignore") or [])
    present = {"attention": True, "shared experts": bool(moe.shared_intermediate_size),
               "dense MLP": not all(moe.moe_layers), "lm_head": True}
    quantised = [group for group, names in _KEPT_16BIT.items()
                 if present[group] and not any(_ignored(ignore, name) for name in names)]
    if quantised:
        return f"its ignore list {ignore!r} quantises {', '.join(quantised)} as well"
    if all(_ignored(ignore, name) for name in _EXPERT):
        return f"its ignore list {ignore!r} quantises the routed experts themselves as well"
    return ""


def _compressed_4bit(model: Model, qc: dict, weights: dict, kind: str) -> str | None:
    """A compressed-tensors 4-bit group as an experts-only format, None to fall back (int), or a refusal."""
    mx = kind == "float"
    group, scale = weights.get("group_size"), str(weights.get("scale_dtype") or "")
    why = _experts_only_refusal(model, qc)
    if why and not mx:
        return None          # int4 on every linear: sized as awq, as before
    if why:
        raise ValueError(f"compressed-tensors MXFP4 where {why}: kvmem's mxfp4 keeps everything but the routed "
                         "experts 16-bit; pass weight_dtype=")
    if mx and (group != 32 or scale not in ("", "torch.uint8")):
        raise ValueError(f"compressed-tensors 4-bit float weights with group_size {group!r} and scale_dtype "
                         f"{scale!r}: kvmem sizes MXFP4 only as 32 weights per uint8 scale (17/32 B a weight); "
                         "pass weight_dtype=")
    if not mx and (group != 32 or weights.get("symmetric") is False or scale not in ("", "None")):
        raise ValueError(f"compressed-tensors int4 experts with group_size {group!r}, symmetric "
                         f"{weights.get('symmetric')!r}, scale_dtype {scale!r}: kvmem sizes them only as 32 "
                         "symmetric weights per 16-bit scale (int4-g32, 9/16 B a weight); pass weight_dtype=")
    # Kimi-K3's ignore list does not name block_sparse_moe.routed_expert_{down,up}_proj, yet the published
    # checkpoint keeps them BF16 (1,559,943,192,768 B = the 1.42 TiB of its 96 shards; 1.41 TiB were
    # they MXFP4) and SGLang builds them unquantised under compressed-tensors:
    # sglang@v0.5.23 python/sglang/srt/models/kimi_k3.py#L654-L681 (quant_config=None unless the method
    # declares supports_kimi_k3_quantized_latent_projections; only modelslim and expert_pack do)
    return "mxfp4" if mx else "int4-g32"


def _from_quantization_config(qc: dict, model: Model | None = None) -> str:
    method = str(qc.get("quant_method", "")).lower()
    if method == "fp8":
        return "fp8-block" if qc.get("weight_block_size") else "fp8"
    if method in ("fbgemm_fp8", "mxfp4", "awq", "gptq"):
        return _ALIASES.get(method, method)
    if method == "modelopt":
        algo = str(qc.get("quant_algo", "")).upper()
        if algo in ("FP8", "NVFP4"):
            return algo.lower()
    if method == "compressed-tensors":
        groups = qc.get("config_groups") or {}
        for group in groups.values():
            w = (group or {}).get("weights") or {}
            bits, kind = w.get("num_bits"), w.get("type")
            if bits == 8:
                return "fp8" if kind == "float" else "int8"
            if bits == 4 and model is not None and (kind == "int" or (
                    kind == "float" and str(qc.get("format", group.get("format", ""))) == "mxfp4-pack-quantized")):
                name = _compressed_4bit(model, qc, w, kind)
                if name:
                    return name
            if bits == 4 and kind == "int":
                return "awq"
    raise ValueError(f"quantization_config.quant_method {qc.get('quant_method')!r} is not a format kvmem "
                     f"sizes; pass weight_dtype= one of: {', '.join(FORMATS)}")


def resolve_weight_dtype(model: Model, weight_dtype="auto") -> tuple[str, str]:
    """(format name, why): "auto" resolved from the config, aliases to canonical names."""
    if not isinstance(weight_dtype, str) or not weight_dtype.strip():
        raise ValueError(f"weight_dtype must be a format name or 'auto', got {weight_dtype!r}")
    if weight_dtype.strip().lower() != "auto":
        return _lookup(weight_dtype).name, ""
    qc = model.facts.quantization_config
    if qc is not None:
        name = _from_quantization_config(qc, model)
        return name, f"weight_dtype auto = {name} from the config's quantization_config"
    if model.model_type in _NATIVE:
        name, why = _NATIVE[model.model_type]
        return name, f"weight_dtype auto = {name}: {why}"
    return _lookup(model.dtype).name, ""

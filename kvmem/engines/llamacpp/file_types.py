"""llama-quantize's file types (Q4_K_M, IQ2_XXS, MXFP4_MOE, ...): their ids, default ggml types, printed
names, and Unsloth's UD-* mixes as a labelled approximation of them. The rules that type each tensor are
kvmem.engines.llamacpp.quant_mix. Source: llama.cpp 0c1e57098 (vendored by llama-cpp-python 0.3.36).
"""

from __future__ import annotations

__all__ = ["FTYPES", "FILE_TYPE_NAMES", "UD_MIXES", "UD_PUBLISHED", "ftype_of", "ftype_names", "ud_base"]

# include/llama.h#L118-L159 llama_ftype (id) and src/llama-quant.cpp#L881-L925 llama_ftype_get_default_type;
# names as tools/quantize/quantize.cpp#L34-L75 QUANT_OPTIONS spells them, lower case
FTYPES = {
    "f32": (0, "F32"), "f16": (1, "F16"), "q4_0": (2, "Q4_0"), "q4_1": (3, "Q4_1"), "q8_0": (7, "Q8_0"),
    "q5_0": (8, "Q5_0"), "q5_1": (9, "Q5_1"), "q2_k": (10, "Q2_K"), "q3_k_s": (11, "Q3_K"), "q3_k_m": (12, "Q3_K"),
    "q3_k_l": (13, "Q3_K"), "q4_k_s": (14, "Q4_K"), "q4_k_m": (15, "Q4_K"), "q5_k_s": (16, "Q5_K"),
    "q5_k_m": (17, "Q5_K"), "q6_k": (18, "Q6_K"), "iq2_xxs": (19, "IQ2_XXS"), "iq2_xs": (20, "IQ2_XS"),
    "q2_k_s": (21, "Q2_K"), "iq3_xs": (22, "IQ3_S"), "iq3_xxs": (23, "IQ3_XXS"), "iq1_s": (24, "IQ1_S"),
    "iq4_nl": (25, "IQ4_NL"), "iq3_s": (26, "IQ3_S"), "iq3_m": (27, "IQ3_S"), "iq2_s": (28, "IQ2_XS"),
    "iq2_m": (29, "IQ2_S"), "iq4_xs": (30, "IQ4_XS"), "iq1_m": (31, "IQ1_M"), "bf16": (32, "BF16"),
    "tq1_0": (36, "TQ1_0"), "tq2_0": (37, "TQ2_0"), "mxfp4_moe": (38, "MXFP4"), "q1_0": (40, "Q1_0"),
    "q2_0": (41, "Q2_0"),
}
# in the enum, not written: llama_ftype_get_default_type has no case for it, so llama_model_quantize
# throws "invalid output file type 39" (src/llama-quant.cpp#L956-L958)
_UNWRITTEN = {"nvfp4": "LLAMA_FTYPE_MOSTLY_NVFP4 (39)"}
_ALIASES = {"q3_k": "q3_k_m", "q4_k": "q4_k_m", "q5_k": "q5_k_m", "mxfp4": "mxfp4_moe"}   # quantize.cpp#L55,62,65
# src/llama-model-loader.cpp#L33-L76 llama_ftype_name: general.file_type as "print_info: file type = " prints it
FILE_TYPE_NAMES = {
    "f32": "all F32", "f16": "F16", "bf16": "BF16", "q1_0": "Q1_0", "q2_0": "Q2_0", "q4_0": "Q4_0", "q4_1": "Q4_1",
    "q5_0": "Q5_0", "q5_1": "Q5_1", "q8_0": "Q8_0", "mxfp4_moe": "MXFP4 MoE", "q2_k": "Q2_K - Medium",
    "q2_k_s": "Q2_K - Small", "q3_k_s": "Q3_K - Small", "q3_k_m": "Q3_K - Medium", "q3_k_l": "Q3_K - Large",
    "q4_k_s": "Q4_K - Small", "q4_k_m": "Q4_K - Medium", "q5_k_s": "Q5_K - Small", "q5_k_m": "Q5_K - Medium",
    "q6_k": "Q6_K", "tq1_0": "TQ1_0 - 1.69 bpw ternary", "tq2_0": "TQ2_0 - 2.06 bpw ternary",
    "iq2_xxs": "IQ2_XXS - 2.0625 bpw", "iq2_xs": "IQ2_XS - 2.3125 bpw", "iq2_s": "IQ2_S - 2.5 bpw",
    "iq2_m": "IQ2_M - 2.7 bpw", "iq3_xs": "IQ3_XS - 3.3 bpw", "iq3_xxs": "IQ3_XXS - 3.0625 bpw",
    "iq1_s": "IQ1_S - 1.5625 bpw", "iq1_m": "IQ1_M - 1.75 bpw", "iq4_nl": "IQ4_NL - 4.5 bpw",
    "iq4_xs": "IQ4_XS - 4.25 bpw", "iq3_s": "IQ3_S - 3.4375 bpw", "iq3_m": "IQ3_S mix - 3.66 bpw",
}

# Unsloth's "Dynamic 2.0" GGUFs (UD-*): an APPROXIMATION, never exact. Unsloth chooses each tensor's type
# per model ("Model-Specific Quants: each model uses a custom-tailored quantization scheme",
# https://unsloth.ai/docs/basics/unsloth-dynamic-2.0-ggufs) and publishes no rule, so kvmem lays out a UD
# file as llama-quantize's mix of the same name (UD-Q4_K_XL as Q4_K_M, ...), labelled as such. Published
# files measure how far that is (UD_PUBLISHED): their bytes are above the plain mix's.
UD_MIXES = {"ud-iq1_s": "iq1_s", "ud-iq1_m": "iq1_m", "ud-iq2_xxs": "iq2_xxs", "ud-iq2_m": "iq2_m",
            "ud-iq3_xxs": "iq3_xxs", "ud-q2_k_xl": "q2_k", "ud-q3_k_xl": "q3_k_m", "ud-q4_k_xl": "q4_k_m",
            "ud-q5_k_xl": "q5_k_m", "ud-q6_k_xl": "q6_k", "ud-q8_k_xl": "q8_0", "ud-tq1_0": "tq1_0"}
# (model config or preset, UD file, published bytes, source): the file sizes people printed or Unsloth published
_R1 = "https://unsloth.ai/blog/deepseekr1-dynamic (DeepSeek-R1 dynamic GGUFs: disk sizes in GB)"
UD_PUBLISHED = (
    ("qwen3-30b-a3b", "ud-iq1_s", round(8.42 * 2**30), "https://github.com/ggml-org/llama.cpp/issues/14199 "
     "(print_info: file size 8.42 GiB, 2.37 BPW; 241 f32, 1 q4_K, 16 q5_K, 11 q6_K, 24 iq2_xxs, 72 iq3_xxs, 58 iq1_s, "
     "84 iq3_s, 22 iq2_s, 36 iq4_xs, 14 iq1_m)"),
    ("Qwen3.6-35B-A3B", "ud-q4_k_xl", round(21.28 * 2**30), "https://github.com/joryirving/home-ops/pull/9398 "
     "(Qwen3.6-35B-A3B-UD-Q4_K_XL.gguf 21.28 GiB, 733 tensors, 40 blocks)"),
    ("deepseek-r1", "ud-iq1_s", 131 * 10**9, _R1), ("deepseek-r1", "ud-iq1_m", 158 * 10**9, _R1),
    ("deepseek-r1", "ud-iq2_xxs", 183 * 10**9, _R1), ("deepseek-r1", "ud-q2_k_xl", 212 * 10**9, _R1),
)


_UD_KEYS = {name.replace("-", "_"): base for name, base in UD_MIXES.items()}


def ud_base(name: str) -> str | None:
    """The llama-quantize file type kvmem approximates an Unsloth UD-* mix with, else None."""
    return _UD_KEYS.get(str(name).strip().lower().replace("-", "_"))


def ftype_names() -> list[str]:
    """Every file type kvmem lays out (llama-quantize's names, lower case), aliases after."""
    return list(FTYPES) + list(_ALIASES)


def ftype_of(name: str) -> str:
    """The canonical file type called ``name`` (case-blind; "q4_k" is q4_k_m as llama-quantize reads it)."""
    key = str(name).strip().lower().replace("-", "_")
    key = _ALIASES.get(key, key)
    if key in _UNWRITTEN:
        raise ValueError(f"llama.cpp 0c1e57098's quantiser writes no {_UNWRITTEN[key]} file: "
                         "llama_ftype_get_default_type has no case for it (llama_model_quantize: 'invalid output "
                         "file type')")
    if key not in FTYPES:
        raise ValueError(f"{str(name)[:100]!r} is not a llama-quantize file type (tools/quantize/quantize.cpp "
                         f"QUANT_OPTIONS): {', '.join(FTYPES)}")
    return key

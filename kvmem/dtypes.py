"""Element formats of a KV cache and the exact bytes of a row of n elements.

A format stores elements in blocks: ``block_bytes`` bytes hold ``block_elements``
values, scales included where the format keeps them inline. ggml's block formats
(ggml/src/ggml-common.h) are the model:

    q8_0    32 values: fp16 scale + 32 int8                    = 34 bytes  (8.5 bits)
    q5_1    32 values: fp16 scale + fp16 min + 4 B high bits + 16 B = 24 bytes (6.0 bits)
    q5_0    32 values: fp16 scale + 4 B high bits + 16 B        = 22 bytes  (5.5 bits)
    q4_1    32 values: fp16 scale + fp16 min + 16 B             = 20 bytes  (5.0 bits)
    q4_0    32 values: fp16 scale + 16 B                        = 18 bytes  (4.5 bits)
    iq4_nl  32 values: fp16 scale + 16 B (non-linear grid)      = 18 bytes  (4.5 bits)
    nvfp4   e2m1 pairs in a byte + one fp8 scale per 16 values: ceil(n/2) + ceil(n/16) bytes
            (4.5 bits; TensorRT-LLM's count; the fp32 tensor scale is per tensor)
    mxfp4   e2m1 pairs in a byte + one e8m0 scale per 32 values: ceil(n/2) + ceil(n/32) bytes
            (4.25 bits, OCP Microscaling Formats v1.0)

Group-wise quantisation with the scales and zero points kept beside the packed
values (Hugging Face QuantizedCache, KIVI) is ``dtype("int4", group_size=64,
scale_dtype="fp32", zero_point=True)``: a row of n values takes ceil(n * bits / 8)
bytes of packed values plus ceil(n / group_size) groups of (scale + zero) bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

from .units import cdiv

__all__ = ["DType", "dtype", "dtype_names", "float_bytes", "FLOAT_NAMES", "kv_pair", "GGMLType", "GGML_TYPES",
           "ggml_type"]


@dataclass(frozen=True)
class GGMLType:
    """One ggml tensor type as ggml's ``type_traits`` holds it: ``block`` values in ``size`` bytes."""

    name: str       # ggml_type_name: the spelling ggml prints ("q4_K", "iq2_xxs")
    id: int         # enum ggml_type: the number a GGUF tensor info stores
    block: int      # blck_size
    size: int       # type_size: bytes per block

    @property
    def is_quantized(self) -> bool:
        """ggml_is_quantized (ggml.c: type_traits[type].is_quantized): every type of more than one value a block."""
        return self.block > 1


# The one table of ggml's types: name, enum ggml_type, blck_size, type_size, as llama.cpp 0c1e57098
# (vendored by llama-cpp-python 0.3.36) holds them: ggml/include/ggml.h#L390-L433 (the enum) and
# ggml/src/ggml.c#L632-L944 (type_traits, the line of each entry beside it; the block structs are
# ggml/src/ggml-common.h's). Checked against ggml's own ggml_type_name / ggml_blck_size /
# ggml_type_size for every id (tests/oracles/test_llamacpp_layout_types_oracle.py).
GGML_TYPES = {t.name: t for t in (
    GGMLType("f32", 0, 1, 4),            # ggml.c#L663
    GGMLType("f16", 1, 1, 2),            # ggml.c#L669
    GGMLType("q4_0", 2, 32, 18),         # ggml.c#L693: fp16 d + 16 B of nibbles
    GGMLType("q4_1", 3, 32, 20),         # ggml.c#L701: fp16 d, m + 16 B
    GGMLType("q5_0", 6, 32, 22),         # ggml.c#L721: fp16 d + 4 B high bits + 16 B
    GGMLType("q5_1", 7, 32, 24),         # ggml.c#L729
    GGMLType("q8_0", 8, 32, 34),         # ggml.c#L737: fp16 d + 32 int8
    GGMLType("q8_1", 9, 32, 36),         # ggml.c#L745
    GGMLType("q2_K", 10, 256, 84),       # ggml.c#L768
    GGMLType("q3_K", 11, 256, 110),      # ggml.c#L776
    GGMLType("q4_K", 12, 256, 144),      # ggml.c#L784
    GGMLType("q5_K", 13, 256, 176),      # ggml.c#L792
    GGMLType("q6_K", 14, 256, 210),      # ggml.c#L800
    GGMLType("q8_K", 15, 256, 292),      # ggml.c#L880
    GGMLType("iq2_xxs", 16, 256, 66),    # ggml.c#L808
    GGMLType("iq2_xs", 17, 256, 74),     # ggml.c#L816
    GGMLType("iq3_xxs", 18, 256, 98),    # ggml.c#L824
    GGMLType("iq1_s", 19, 256, 50),      # ggml.c#L848
    GGMLType("iq4_nl", 20, 32, 18),      # ggml.c#L864
    GGMLType("iq3_s", 21, 256, 110),     # ggml.c#L832
    GGMLType("iq2_s", 22, 256, 82),      # ggml.c#L840
    GGMLType("iq4_xs", 23, 256, 136),    # ggml.c#L872
    GGMLType("i8", 24, 1, 1),            # ggml.c#L633
    GGMLType("i16", 25, 1, 2),           # ggml.c#L639
    GGMLType("i32", 26, 1, 4),           # ggml.c#L645
    GGMLType("i64", 27, 1, 8),           # ggml.c#L651
    GGMLType("f64", 28, 1, 8),           # ggml.c#L657
    GGMLType("iq1_m", 29, 256, 56),      # ggml.c#L856
    GGMLType("bf16", 30, 1, 2),          # ggml.c#L886
    GGMLType("tq1_0", 34, 256, 54),      # ggml.c#L912
    GGMLType("tq2_0", 35, 256, 66),      # ggml.c#L920
    GGMLType("mxfp4", 39, 32, 17),       # ggml.c#L752: e8m0 scale + 16 B of e2m1 pairs
    GGMLType("nvfp4", 40, 64, 36),       # ggml.c#L760: 4 sub-blocks of 16, an e4m3 scale each
    GGMLType("q1_0", 41, 128, 18),       # ggml.c#L677
    GGMLType("q2_0", 42, 64, 18),        # ggml.c#L685
)}
_GGML_BY_KEY = {name.lower(): t for name, t in GGML_TYPES.items()}


def ggml_type(name: str) -> GGMLType:
    """The ggml type called ``name``, in any case ("Q4_K", "q4_K", "iq4_xs")."""
    t = _GGML_BY_KEY.get(name.lower()) if isinstance(name, str) else None
    if t is None:
        from .sources.bounded import quote
        raise ValueError(f"unknown ggml type {quote(name)}; ggml's types: {', '.join(GGML_TYPES)}")
    return t


@dataclass(frozen=True)
class DType:
    """An element format: ``block_bytes`` bytes per ``block_elements`` values.

    ``group_size`` > 0 adds, per group of that many values, ``scale_bytes`` +
    ``zero_bytes`` stored beside the packed values.
    """

    name: str
    block_elements: int
    block_bytes: int
    group_size: int = 0
    scale_bytes: int = 0
    zero_bytes: int = 0
    whole_blocks: bool = False  # ggml: a row must be a whole number of blocks

    @property
    def bits(self) -> float:
        """Effective bits per element, scales and zero points included."""
        bits = 8 * self.block_bytes / self.block_elements
        if self.group_size:
            bits += 8 * (self.scale_bytes + self.zero_bytes) / self.group_size
        return bits

    @property
    def is_quantized(self) -> bool:
        return self.name not in FLOAT_NAMES

    def row_bytes(self, n: int) -> int:
        """Exact bytes of a row of ``n`` elements: whole blocks, plus group scales/zeros."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"row length must be a non-negative integer, got {n!r}")
        if self.whole_blocks and n % self.block_elements:
            raise ValueError(
                f"{self.name} stores rows in blocks of {self.block_elements} values; "
                f"a row of {n} is not a whole number of blocks")
        nbytes = cdiv(n, self.block_elements) * self.block_bytes
        if self.group_size:
            nbytes += cdiv(n, self.group_size) * (self.scale_bytes + self.zero_bytes)
        return nbytes

    def __str__(self) -> str:
        return self.name


FLOAT_NAMES = ("fp32", "fp16", "bf16")     # the compute formats; the one table of their bytes is _FORMATS

_FORMATS = {
    "fp32": DType("fp32", 1, 4),
    "fp16": DType("fp16", 1, 2),
    "bf16": DType("bf16", 1, 2),
    "fp8_e4m3": DType("fp8_e4m3", 1, 1),
    "fp8_e5m2": DType("fp8_e5m2", 1, 1),
    "int8": DType("int8", 1, 1),
    "int4": DType("int4", 2, 1),
    "int2": DType("int2", 4, 1),
    "nvfp4": DType("nvfp4", 2, 1, group_size=16, scale_bytes=1),
    "mxfp4": DType("mxfp4", 2, 1, group_size=32, scale_bytes=1),
    # llama.cpp's quantised cache types (common/arg.cpp kv_cache_types), their blocks from GGML_TYPES
    **{name: DType(name, GGML_TYPES[name].block, GGML_TYPES[name].size, whole_blocks=True)
       for name in ("q8_0", "q5_1", "q5_0", "q4_1", "q4_0", "iq4_nl")},
}

_ALIASES = {
    "float32": "fp32", "f32": "fp32", "float": "fp32",
    "float16": "fp16", "f16": "fp16", "half": "fp16",
    "bfloat16": "bf16",
    "fp8": "fp8_e4m3", "float8_e4m3fn": "fp8_e4m3", "fp8_e4m3fn": "fp8_e4m3", "e4m3": "fp8_e4m3",
    "float8_e5m2": "fp8_e5m2", "e5m2": "fp8_e5m2",
    "uint8": "int8", "i8": "int8", "uint4": "int4", "int4_packed": "int4",
}

_SIDE_DTYPES = {name: _FORMATS[name].block_bytes for name in (*FLOAT_NAMES, "fp8_e4m3", "int8")}
_GROUPED_BASES = {"int8", "int4", "int2"}


def float_bytes(name) -> int | None:
    """Bytes per element of a compute format (fp32 4, fp16 and bf16 2, by any of their names), else None."""
    try:
        key = _canonical(name)
    except ValueError:
        return None
    return _FORMATS[key].block_bytes if key in FLOAT_NAMES else None


def kv_pair(kv_dtype) -> tuple[str, str]:
    """(K, V) format names of a KV dtype as results spell it: one name for both ("bf16"), llama.cpp's
    type_k/type_v pair ("q8_0/f16") or a quantisation strategy's label ("K int4 / V int2")."""
    text = str(kv_dtype).strip()
    k, slash, v = text.partition("/")
    if not slash:
        return text, text
    k, v = k.strip(), v.strip()
    if k[:2] == "K " and v[:2] == "V ":
        k, v = k[2:].strip(), v[2:].strip()
    return k, v or k


def dtype_names() -> list[str]:
    """Every accepted format name (canonical names first, then aliases, then 'auto')."""
    return sorted(_FORMATS) + sorted(_ALIASES) + ["auto"]


def _canonical(name: object) -> str:
    if isinstance(name, DType):
        return name.name
    if not isinstance(name, str):
        from .sources.bounded import quote
        raise ValueError(f"dtype must be a format name such as 'bf16', got {quote(name)}")
    key = name.strip().lower().replace("-", "_")
    key = key.removeprefix("torch.")
    key = _ALIASES.get(key, key)
    if key == "auto" or key in _FORMATS:
        return key
    from .sources.bounded import quote
    raise ValueError(f"unknown dtype {quote(name)}; valid names: {', '.join(dtype_names())}")


def dtype(name: object, *, model_dtype: str | None = None, group_size: int = 0,
          scale_dtype: str = "fp16", zero_point: bool = False) -> DType:
    """The format called ``name`` (case-insensitive; aliases accepted).

    ``"auto"`` is the model's own dtype (``model_dtype``), bf16 when unknown.
    ``group_size`` > 0 makes a group-wise integer format (int8/int4/int2) with one
    ``scale_dtype`` scale, and with ``zero_point`` one zero point of the same size,
    per ``group_size`` values.
    """
    if isinstance(name, DType) and not group_size:
        return name
    key = _canonical(name)
    if key == "auto":
        key = _canonical(model_dtype) if model_dtype else "bf16"
        if key == "auto":
            key = "bf16"
    base = _FORMATS[key]
    if not group_size:
        return base
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 1:
        raise ValueError(f"group_size must be a positive integer, got {group_size!r}")
    if key not in _GROUPED_BASES:
        raise ValueError(f"group_size applies to {sorted(_GROUPED_BASES)}, not {key!r}")
    side = _canonical(scale_dtype)
    if side not in _SIDE_DTYPES:
        raise ValueError(f"scale_dtype must be one of {sorted(_SIDE_DTYPES)}, got {scale_dtype!r}")
    scale = _SIDE_DTYPES[side]
    label = f"{key}-g{group_size}-{side}{'-zp' if zero_point else ''}"
    return DType(label, base.block_elements, base.block_bytes, group_size, scale,
                 scale if zero_point else 0)

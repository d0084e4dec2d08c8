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

__all__ = ["DType", "dtype", "dtype_names", "float_bytes", "FLOAT_NAMES", "kv_pair"]


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
        nbytes = -(-n // self.block_elements) * self.block_bytes
        if self.group_size:
            nbytes += -(-n // self.group_size) * (self.scale_bytes + self.zero_bytes)
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
    "q8_0": DType("q8_0", 32, 34, whole_blocks=True),
    "q5_1": DType("q5_1", 32, 24, whole_blocks=True),
    "q5_0": DType("q5_0", 32, 22, whole_blocks=True),
    "q4_1": DType("q4_1", 32, 20, whole_blocks=True),
    "q4_0": DType("q4_0", 32, 18, whole_blocks=True),
    "iq4_nl": DType("iq4_nl", 32, 18, whole_blocks=True),
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

"""KV quantisation what-ifs: every format of kvmem.dtypes, K and V apart, with a full-precision residual."""

from __future__ import annotations

from ..catalog import as_model
from ..dtypes import DType, dtype, dtype_names
from ..engines.base import resolve_dtypes, state_bytes
from ..engines.results import Estimate, IdealDetails, assemble
from ..parallel import layer_heads
from ..textbook import ideal_layer_bytes
from ..units import parse_tokens, require_positive_int
from .inputs import count, refuse_compressed
from .quality import quality_text
from .rows import QuantRow


def quantized_estimate(model, *, tokens, batch: int = 1, k_dtype="auto", v_dtype=None,
                       residual_length: int = 0, residual_dtype="auto", tp: int = 1, pp: int = 1) -> Estimate:
    """The ideal count with K and V in their own formats and the ``residual_length`` most
    recent tokens of each layer in ``residual_dtype`` (full precision, KIVI-style).

    Per layer holding h tokens: r = min(h, residual_length) rows in the residual format,
    h - r in the quantised ones; MLA latents use ``k_dtype``. Formats are names or DTypes
    (``kvmem.dtype("int2", group_size=32, scale_dtype="fp16", zero_point=True)``).
    """
    model = as_model(model)
    refuse_compressed(model, "a KIVI-style quantised cache")
    tokens = parse_tokens(tokens)
    batch = require_positive_int("batch", batch)
    residual_length = count("residual_length", residual_length)
    k_fmt, v_fmt, _ = resolve_dtypes(model, k_dtype, v_dtype=v_dtype)
    res = dtype(residual_dtype, model_dtype=model.dtype)
    rows = []
    for layer in model.layers:
        held = layer.held_tokens(tokens)
        full = min(held, residual_length)
        heads = layer_heads(layer, tp)
        kq, vq = ideal_layer_bytes(layer, tokens=held - full, batch=batch, k_dtype=k_fmt, v_dtype=v_fmt,
                                    kv_heads=heads)
        kr, vr = ideal_layer_bytes(layer, tokens=full, batch=batch, k_dtype=res, v_dtype=res, kv_heads=heads)
        state = batch * state_bytes(layer.state, model.dtype, tp) if layer.state else 0
        rows.append((kq + kr, vq + vr, state))
    label = k_fmt.name if k_fmt.name == v_fmt.name else f"K {k_fmt.name} / V {v_fmt.name}"
    notes = [f"{residual_length} most recent tokens per layer in {res.name}"] if residual_length else []
    return assemble(model, "ideal", tokens=tokens, batch=batch, kv_dtype=label, tp=tp, pp=pp, rows=rows,
                    notes=notes, details=IdealDetails(residual_length=residual_length, residual_dtype=res.name),
                    k_dtype=k_fmt.name, v_dtype=v_fmt.name)


def _canonical_formats() -> list[str]:
    return [name for name in dtype_names() if name != "auto" and dtype(name).name == name]


# KIVI's settings (group 32, fp16 scale and zero point, 128 residual tokens): its long_bench.md.
KIVI = {"kivi-4": ("int4", 32), "kivi-2": ("int2", 32)}


def kivi_dtype(name: str) -> DType:
    base, group = KIVI[name]
    return dtype(base, group_size=group, scale_dtype="fp16", zero_point=True)


def quantization_options(model, *, tokens, batch: int = 1, formats=None, residual_length: int = 0,
                         tp: int = 1, pp: int = 1) -> list[QuantRow]:
    """Every KV format (default: each canonical format of kvmem.dtypes plus KIVI-4/KIVI-2 and
    transformers' default int4 group-64 fp32 scale+zero) against the model's own dtype.

    ``formats`` items: a name, a DType, or a (K, V) pair. A format that cannot store the
    model's rows (ggml blocks of 32 with a head_dim not a multiple of 32) gets bytes None
    and the reason. Each row a QuantRow, read like the dict it was.
    """
    model = as_model(model)
    if formats is None:
        formats = _canonical_formats() + [kivi_dtype("kivi-4"), kivi_dtype("kivi-2"),
                                          dtype("int4", group_size=64, scale_dtype="fp32", zero_point=True)]
    base = quantized_estimate(model, tokens=tokens, batch=batch, tp=tp, pp=pp).kv_bytes
    rows = []
    for item in formats:
        k, v = item if isinstance(item, tuple) else (item, item)
        try:
            est = quantized_estimate(model, tokens=tokens, batch=batch, k_dtype=k, v_dtype=v,
                                     residual_length=residual_length, tp=tp, pp=pp)
        except ValueError as exc:
            rows.append(QuantRow(k_dtype=str(k), v_dtype=str(v), kv_bytes=None, saving_bytes=None,
                                 saving_fraction=None, cost=f"not applicable: {exc}"))
            continue
        kd, vd = dtype(k, model_dtype=model.dtype), dtype(v, model_dtype=model.dtype)
        saving = base - est.kv_bytes
        rows.append(QuantRow(k_dtype=kd.name, v_dtype=vd.name, bits_k=kd.bits, bits_v=vd.bits,
                             residual_length=residual_length, kv_bytes=est.kv_bytes, saving_bytes=saving,
                             saving_fraction=saving / base if base else 0.0, cost=quant_cost(kd, vd)))
    return rows


def quant_cost(kd: DType, vd: DType) -> str:
    if not (kd.is_quantized or vd.is_quantized):
        return "lossless (a float format)"
    keys = {kd.name, vd.name, kd.name.split("-")[0], vd.name.split("-")[0]}
    if keys & {"fp8_e4m3", "fp8_e5m2"}:
        keys.add("fp8")
    return "lossy: " + (quality_text(keys) or "no measured quality delta recorded in kvmem/data/quality.json")

"""compare_strategies: one row per strategy, its saving and its cost, side by side."""

from __future__ import annotations

from ..catalog import as_model
from ..dtypes import dtype
from ..engines import ENGINES
from ..engines.results import Estimate
from ..units import parse_tokens, require_positive_int
from .estimate import estimate, offload_transfer_seconds
from .eviction import DEFAULT_SINK, Eviction
from .quality import no_quality_text, quality_entries, quality_text, quotable
from .quantisation import kivi_dtype, quant_cost, quantized_estimate
from .rows import StrategyRow
from .variants import architecture_variants


def _row(strategy: str, family: str, est_or_bytes, base: int, cost: str, *, lossless: bool,
         needs_retraining: bool = False, settings=None, quality=(), budget: int | None = None) -> StrategyRow:
    total = est_or_bytes.total_bytes if isinstance(est_or_bytes, Estimate) else est_or_bytes
    saving = None if total is None else base - total
    return StrategyRow(strategy=strategy, family=family, total_bytes=total, saving_bytes=saving,
                       saving_fraction=None if saving is None else (saving / base if base else 0.0),
                       cost=cost, lossless=lossless, needs_retraining=needs_retraining,
                       settings=dict(settings or {}),
                       quality=[e["id"] for e in quality_entries(quality) if quotable(e, budget)])


def compare_strategies(model, *, tokens, batch: int = 1, engine: str = "ideal", kv_dtype="auto", tp: int = 1,
                       pp: int = 1, budget: int = 1024, sink: int = DEFAULT_SINK, shared_prefix=0, offload=0.0,
                       gpu=None, link: str = "pcie", max_model_len=None, residual_length: int = 128,
                       variants: bool = True, **options) -> list[StrategyRow]:
    """One row per strategy, a StrategyRow read as a dict: ``row["bytes"]`` (KV + state on one
    device), ``saving_bytes`` and ``saving_fraction`` against the engine's baseline, ``cost`` (text, with the measured
    quality delta where kvmem/data/quality.json has one), ``lossless``, ``needs_retraining``,
    ``settings`` and ``quality`` (ids of the cited measurements).

    Rows: the baseline; FP8/INT8/q8_0/q4_0/NVFP4 through the engine (bytes None where the
    engine refuses a format); KIVI-4 and KIVI-2 (``residual_length`` full-precision tokens;
    engine="ideal" only, bytes None elsewhere); StreamingLLM (``sink`` + budget - sink), H2O
    and SnapKV at ``budget`` tokens; the shared prefix and offload when given (offload quotes
    the per-step transfer time when ``gpu`` is given); pre-allocation to ``max_model_len`` when
    given; the architecture variants when ``variants``.
    """
    model = as_model(model)
    tokens = parse_tokens(tokens)
    if "residual_length" in getattr(ENGINES.get(str(engine).strip().lower()), "options", {}):
        # hf-quantized's own option of that name is the same thing (QuantizedCache residual_length):
        # one value for the baseline and the KIVI rows, so a caller passes it once
        options = {**options, "residual_length": residual_length}
    run = lambda **kw: estimate(model, engine=engine, tokens=kw.pop("tokens", tokens), batch=batch,  # noqa: E731
                                kv_dtype=kw.pop("kv_dtype", kv_dtype), tp=tp, pp=pp, **options, **kw)
    baseline = run()
    base = baseline.total_bytes
    rows = [_row(f"baseline ({baseline.engine}, {baseline.kv_dtype})", "baseline", baseline, base,
                 "none", lossless=True)]
    model_dtype = dtype(kv_dtype, model_dtype=model.dtype).name
    for fmt, keys in (("fp8_e4m3", {"fp8"}), ("int8", {"int8"}), ("q8_0", {"q8_0"}), ("q4_0", {"q4_0"}),
                      ("nvfp4", {"nvfp4"})):
        if fmt == model_dtype:
            continue
        try:
            est = run(kv_dtype=fmt)
        except ValueError as exc:
            est, cost = None, f"not available in engine {engine!r}: {exc}"
        else:
            cost = quant_cost(dtype(fmt), dtype(fmt)) + "; on-the-fly dequantisation costs decode time without " \
                "native kernels"
        rows.append(_row(f"KV {fmt}", "quantization", est, base, cost, lossless=False,
                         settings={"kv_dtype": fmt}, quality=keys))
    for name in ("kivi-4", "kivi-2"):
        kivi = kivi_dtype(name)
        label = f"{name.upper()} ({kivi.name}, {residual_length} full-precision tokens)"
        settings = {"kv_dtype": kivi.name, "residual_length": residual_length}
        if baseline.engine != "ideal":  # counted the ideal way only: comparing it with an engine's pool would mislead
            rows.append(_row(label, "quantization", None, base, f"not available in engine {engine!r}: it has no "
                             "KIVI-style cache; compare with engine='ideal'", lossless=False, settings=settings,
                             quality={name}))
            continue
        try:
            est = quantized_estimate(model, tokens=tokens, batch=batch, k_dtype=kivi,
                                     residual_length=residual_length, tp=tp, pp=pp)
        except ValueError as exc:
            rows.append(_row(label, "quantization", None, base, f"not available: {exc}", lossless=False,
                             settings=settings, quality={name}))
            continue
        rows.append(_row(label, "quantization", est, base, quant_cost(kivi, kivi) + "; needs a KIVI-style kernel",
                         lossless=False, settings=settings, quality={name}))
    budget = require_positive_int("budget", budget)
    for ev in (Eviction("streaming", sink=min(sink, budget), window=budget - min(sink, budget)),
               Eviction("h2o", budget=budget), Eviction("snapkv", budget=budget)):
        try:
            est = run(eviction=ev)
        except ValueError as exc:
            rows.append(_row(ev.describe(), "eviction", None, base, f"not available: {exc}", lossless=False,
                             settings=ev.to_dict(), quality={ev.policy}, budget=budget))
            continue
        cost = ("irreversible context loss: evicted tokens cannot be attended again; " + (
            "scores attention every step" if ev.policy != "streaming" else "no scoring overhead")
            + "; " + (quality_text({ev.policy}, budget=budget) or no_quality_text({ev.policy}, budget)))
        rows.append(_row(ev.describe(), "eviction", est, base, cost, lossless=False, settings=ev.to_dict(),
                         quality={ev.policy}, budget=budget))
    if shared_prefix:
        est = run(shared_prefix=shared_prefix)
        shared = est.shared_prefix            # a PrefixShared record: the strategy was applied
        cost = "lossless; only when the requests really share the prefix (copy-on-write blocks)"
        if getattr(shared, "saved_bytes", 0) <= 0:
            cost += "; " + est.notes[-1]
        rows.append(_row(f"shared prefix of {parse_tokens(shared_prefix)} tokens", "memory allocation", est, base,
                         cost, lossless=True, settings=shared.to_dict() if shared is not None else {}))
    if offload:
        est = run(offload=offload)
        host = getattr(est.offload, "host_kv_bytes", 0)     # an Offloaded record: the strategy was applied
        cost = f"lossless; {host:,} bytes in host memory cross the host link every decode step"
        if gpu is not None:
            cost += f" ({offload_transfer_seconds(host, gpu=gpu, link=link) * 1000:.3g} ms per step over {link})"
        rows.append(_row(f"offload {float(offload):g} of the KV to host memory", "memory allocation", est, base,
                         cost, lossless=True, settings={"offload": float(offload), "host_kv_bytes": host}))
    if max_model_len is not None:
        est = run(tokens=parse_tokens(max_model_len))
        rows.append(_row(f"contiguous pre-allocation to max_model_len={parse_tokens(max_model_len)}",
                         "memory allocation", est, base, "what paging avoids: reserved but unused memory",
                         lossless=True, settings={"max_model_len": parse_tokens(max_model_len)}))
    if variants and any(layer.caches_tokens for layer in model.layers):
        for v in architecture_variants(model, tokens=tokens, batch=batch, engine=engine, kv_dtype=kv_dtype,
                                       tp=tp, pp=pp, **options)[1:]:
            if v.model.layers == model.layers:
                continue  # the model already has this layout (e.g. GQA-8 of an 8-KV-head model)
            rows.append(_row(v.variant, "architecture", v.total_bytes, base, v.cost, lossless=False,
                             needs_retraining=True, settings=v.settings))
    return rows

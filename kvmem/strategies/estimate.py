"""kvmem.estimate: the engine's count, then eviction, a shared prefix and offload on top of it.

The rules (what a paged engine shares, how offload splits the bytes): kvmem.strategies.
"""

from __future__ import annotations

import math
from dataclasses import replace
from fractions import Fraction
from numbers import Rational, Real

from ..catalog import as_model
from ..engines import engine_estimate, engine_spec, with_defaults
from ..engines.base import PrefixSharing
from ..engines.results import Estimate
from ..gpus import get_gpu
from ..model import Model
from ..units import parse_tokens, show_value
from .eviction import EVICTION_POLICIES, Eviction
from .inputs import refuse_compressed
from .records import EvictionApplied, Offloaded, PrefixShared

_NVLINK_DIRECTIONS = 2  # gpus.json NVLink figures are NVIDIA's aggregate bidirectional numbers


def _check_prefix(shared_prefix, tokens: int) -> int:
    if shared_prefix is None or shared_prefix is False or shared_prefix == 0:
        return 0
    if isinstance(shared_prefix, int) and not isinstance(shared_prefix, bool) and shared_prefix < 0:
        raise ValueError(f"shared_prefix must be a non-negative token count, got {shared_prefix}")
    try:
        prefix = parse_tokens(shared_prefix)
    except ValueError as exc:
        raise ValueError(f"shared_prefix: {exc}") from None
    if prefix >= tokens:
        raise ValueError(f"shared_prefix={prefix} must be smaller than tokens={tokens}: the prefix is part of "
                         "each sequence, and each sequence holds at least one token of its own")
    return prefix


def _check_offload(offload) -> Fraction:
    if offload is None or offload is False:
        return Fraction(0)
    if (isinstance(offload, bool) or not isinstance(offload, Real)
            or (isinstance(offload, float) and not math.isfinite(offload))):
        raise ValueError(f"offload must be a fraction between 0 and 1, got {show_value(offload)}")
    if isinstance(offload, float):
        fraction = Fraction(str(offload))
    elif isinstance(offload, Rational):
        fraction = Fraction(offload)
    else:                                   # a Real that is neither (no exact value to take)
        raise ValueError(f"offload must be a fraction between 0 and 1, got {show_value(offload)}")
    if not 0 <= fraction <= 1:
        raise ValueError(f"offload must be a fraction between 0 and 1, got {show_value(offload)}")
    return fraction


def estimate(model, *, engine: str = "ideal", tokens, batch: int = 1, kv_dtype="auto", tp: int = 1, pp: int = 1,
             eviction=None, shared_prefix=0, offload=0.0, **options) -> Estimate:
    """kvmem.estimate: the engine's count (kvmem.engines.engine_estimate), then eviction, a shared
    prefix and offload applied on top of it (the rules in this module's docstring)."""
    base = engine_estimate(model, engine=engine, tokens=tokens, batch=batch, kv_dtype=kv_dtype, tp=tp, pp=pp, **options)
    if eviction is None and not shared_prefix and not offload:
        return base
    spec = engine_spec(engine)

    def rerun(t: int, b: int) -> Estimate:
        return engine_estimate(model, engine=spec.name, tokens=t, batch=b, kv_dtype=kv_dtype, tp=tp, pp=pp, **options)

    return apply_strategies(base, model=as_model(model), rerun=rerun, engine=spec.name,
                            options=with_defaults(spec, options), eviction=eviction, shared_prefix=shared_prefix,
                            offload=offload)


def apply_strategies(base: Estimate, *, model: Model, rerun, engine: str, options: dict,
                     eviction=None, shared_prefix=0, offload=0.0) -> Estimate:
    """``base`` (the engine's Estimate) with eviction, a shared prefix and offload applied.

    ``rerun(tokens, batch)`` is the same engine's estimate at another workload, with the
    same model, dtype, parallelism and options.
    """
    if eviction is not None and not isinstance(eviction, Eviction):
        raise ValueError(f"eviction must be a kvmem.Eviction (policies: {', '.join(EVICTION_POLICIES)}), "
                         f"got {eviction!r}")
    prefix = _check_prefix(shared_prefix, base.tokens)
    fraction = _check_offload(offload)
    if eviction is not None and prefix:
        raise ValueError("shared_prefix cannot be combined with eviction: each sequence evicts its own "
                         "tokens, so the evicted caches are no longer shared")
    result = base
    if eviction is not None:
        refuse_compressed(model, "eviction")
        result = _evict(result, eviction, rerun)
    if prefix:
        refuse_compressed(model, "shared-prefix sizing")   # a window and buffers per sequence beside shared rows
        result = _share(result, prefix, rerun, engine, options)
    if fraction:
        result = _offload(result, fraction, model)
    return result


def _evict(base: Estimate, eviction: Eviction, rerun) -> Estimate:
    held = eviction.held_tokens(base.tokens)
    info = EvictionApplied(policy=eviction, held_tokens=held)
    if held >= base.tokens:
        return replace(base, notes=base.notes + (f"{eviction.describe()}: all {base.tokens} tokens fit, "
                                                 "nothing evicted",), eviction=info)
    capped = rerun(held, base.batch)
    note = (f"{eviction.describe()}: each layer holds {held} of {base.tokens} tokens "
            f"(sliding layers min(window, {held})); the K/V of the other {base.tokens - held:,} tokens are "
            "discarded for good — if one of them matters later, the model can no longer attend to it")
    return replace(capped, tokens=base.tokens, notes=base.notes + (note,), eviction=info,
                   refusal=capped.refusal or base.refusal)


def _sharing(engine: str, options: dict, est: Estimate) -> tuple[PrefixSharing, int]:
    """The engine's prefix-sharing rule and its unit (tokens), checked."""
    rule = engine_spec(engine).prefix(options, est)
    unit = rule.unit_tokens
    if isinstance(unit, bool) or not isinstance(unit, int) or unit < 1:
        name = rule.unit_option or "block size"
        raise ValueError(f"cannot tell the {engine} {name} that sets which whole blocks are shared; pass {name}=")
    return rule, unit


def _same_stage(*estimates: Estimate) -> None:
    patterns = {tuple(x != 0 for x in e.per_layer) for e in estimates}
    if len(patterns) > 1:
        raise ValueError("shared_prefix with pp>1: the largest pipeline stage differs between the suffix "
                         "and the prefix counts; estimate with pp=1")


def _share(base: Estimate, prefix: int, rerun, engine: str, options: dict) -> Estimate:
    rule, unit = _sharing(engine, options, base)
    shared = prefix // unit * unit
    notes = list(base.notes) + list(rule.notes)
    if base.batch == 1 or shared == 0 or rule.refusal:
        why = ("batch=1 has no other sequence" if base.batch == 1 else
               rule.refusal or f"no whole {unit}-token block in {prefix} tokens")
        notes.append(f"shared prefix of {prefix} tokens saves nothing: {why}")
        return replace(base, notes=tuple(notes), shared_prefix=PrefixShared(prefix, shared, unit, saved_bytes=0))
    rest = rerun(base.tokens - shared, base.batch)
    one = rerun(base.tokens, 1)
    one_rest = rerun(base.tokens - shared, 1)
    _same_stage(base, rest, one, one_rest)
    combine = lambda f: f(rest) + f(one) - f(one_rest)  # noqa: E731
    k = combine(lambda e: e.k_bytes)
    v = combine(lambda e: e.v_bytes)
    per_layer = tuple(a + b - c for a, b, c in zip(rest.per_layer, one.per_layer, one_rest.per_layer, strict=True))
    all_devices = combine(lambda e: e.kv_bytes_all_devices)
    peak = k + v + max(0, rest.peak_bytes - rest.kv_bytes)
    info = PrefixShared(prefix, shared, unit, saved_bytes=base.kv_bytes - (k + v))
    notes.append(f"{base.batch} sequences share their first {shared} tokens"
                 + (f" ({shared // unit} whole {unit}-token blocks of {prefix})" if unit > 1 else "")
                 + ", stored once"
                 + ("" if info.saved_bytes > 0 else "; the engine's pre-allocated cache does not shrink"))
    return replace(base, k_bytes=k, v_bytes=v, per_layer=per_layer, kv_bytes_all_devices=all_devices,
                   peak_bytes=peak, notes=tuple(notes), shared_prefix=info)


def _apportion(total: int, weights: list[int]) -> list[int]:
    """Split ``total`` over ``weights`` proportionally in whole bytes (largest remainder)."""
    whole = sum(weights)
    if not whole:
        return [0] * len(weights)
    shares = [total * w // whole for w in weights]
    order = sorted(range(len(weights)), key=lambda i: (-(total * weights[i] % whole), i))
    for i in order[:total - sum(shares)]:
        shares[i] += 1
    return shares


def _offload(base: Estimate, fraction: Fraction, model: Model) -> Estimate:
    host_k = base.k_bytes * fraction.numerator // fraction.denominator
    host_v = base.v_bytes * fraction.numerator // fraction.denominator
    host = host_k + host_v
    if base.kv_bytes_all_devices == base.tp * base.kv_bytes:
        host_all = base.tp * host  # every rank holds the same: the same split on each
    else:  # pipeline stages differ: the fraction of the sum, never more than leaves one device's share
        host_all = min(base.kv_bytes_all_devices * fraction.numerator // fraction.denominator,
                       base.kv_bytes_all_devices - (base.kv_bytes - host))
    # the layers whose bytes are KV: their own, or a shared layer's where the engine allocates it (SGLang,
    # Gemma-3n); the split is over what each holds, so no layer's entry goes below 0
    caching = [i for i, layer in enumerate(model.layers)
               if (layer.caches_tokens or layer.kind == "shared") and i < len(base.per_layer)]
    held = [base.per_layer[i] for i in caching]
    moved = _apportion(min(host, sum(held)), held)   # vLLM's padding slots belong to no layer: none goes below 0
    per_layer = list(base.per_layer)
    for i, m in zip(caching, moved, strict=True):
        per_layer[i] -= m
    info = Offloaded(fraction=float(fraction), host_kv_bytes=host, host_kv_bytes_all_devices=host_all,
                     device_kv_bytes=base.kv_bytes - host)
    note = (f"offload: {float(fraction):g} of the KV ({host:,} bytes) in host memory; every decode step "
            "reads it over the host link")
    return replace(base, k_bytes=base.k_bytes - host_k, v_bytes=base.v_bytes - host_v, per_layer=tuple(per_layer),
                   kv_bytes_all_devices=base.kv_bytes_all_devices - host_all,
                   peak_bytes=max(base.peak_bytes - host, base.kv_bytes - host), notes=base.notes + (note,),
                   offload=info)


def _link_bandwidth(gpu, link: str) -> float:
    if link not in ("pcie", "nvlink"):
        raise ValueError(f"link must be 'pcie' or 'nvlink', got {link!r}")
    if isinstance(gpu, Real) and not isinstance(gpu, bool):
        if gpu <= 0:
            raise ValueError(f"a link bandwidth must be positive bytes/s, got {gpu!r}")
        return float(gpu)
    device = get_gpu(gpu)
    figure = device.nvlink_bytes_per_s if link == "nvlink" else device.pcie_bytes_per_s
    if not figure:
        raise ValueError(f"gpu {device.name!r} has no {link} bandwidth in the catalog; pass the link bandwidth "
                         "in bytes/s as gpu=")
    return figure / _NVLINK_DIRECTIONS if link == "nvlink" else float(figure)


def offload_transfer_seconds(host_bytes, *, gpu, link: str = "pcie") -> float:
    """Seconds one decode step spends moving the offloaded KV to the GPU.

    ``host_bytes``: bytes in host memory, or an Estimate made with ``offload=``. ``gpu``: any
    GPU kvmem.get_gpu takes (catalog names and aliases, "custom:...", a GPU), or the link's bytes/s.
    PCIe figures there are per direction; NVLink figures are aggregate bidirectional, so one
    direction gets half. A lower bound: it ignores latency and overlap with compute.
    """
    if isinstance(host_bytes, Estimate):
        host_bytes = getattr(host_bytes.offload, "host_kv_bytes", 0)     # an Offloaded record, or None
    if isinstance(host_bytes, bool) or not isinstance(host_bytes, int) or host_bytes < 0:
        raise ValueError(f"host_bytes must be a non-negative integer, got {host_bytes!r}")
    return host_bytes / _link_bandwidth(gpu, link)

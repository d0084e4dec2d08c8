"""What-if strategies: the seed's memory-reduction families, counted in exact bytes.

The seed notebook ("KV Caching", section Memory Tradeoff) names four families. Each is
applied here on top of the Estimate an engine mode returns, so it works for every engine:

Eviction (token dropping) — ``kvmem.Eviction``; each layer keeps a capped number of tokens:
    streaming  sink + window tokens: the first ``sink`` (attention sinks) and the most recent
               ``window`` (StreamingLLM, Xiao et al. 2024, arXiv:2309.17453; 4 sink tokens
               "suffice", §3.1, hence the default sink=4)
    h2o        ``budget`` tokens: heavy hitters by accumulated attention + the ``recent`` most
               recent (H2O, Zhang et al. 2023, arXiv:2306.14048; its h2o_hf scripts split the
               budget half and half, hence the default recent = budget // 2)
    snapkv     the prompt is compressed once, after prefill, to ``budget`` tokens per layer (the
               ``observation_window`` last prompt tokens included, default 32 as in SnapKV,
               Li et al. 2024, arXiv:2404.14469, §5.3); the ``new_tokens`` decoded afterwards are
               all kept: held = min(prompt, budget) + new_tokens, prompt = tokens - new_tokens
    The cap C is uniform over layers, so the engine's own estimate is re-run with tokens=C:
    full and MLA layers hold C, sliding/chunked layers min(own window, C), linear/SSM state is
    unchanged, and the engine's blocks, pads and pre-allocations apply to what is held. An
    engine that pre-allocates (hf-static max_cache_len, llama.cpp n_ctx given) therefore
    saves nothing, which is what it would do. A window or budget of at least ``tokens``
    holds every token (no error): the cache is bounded, it just is not reached yet.

Shared prefix (copy-on-write) — ``shared_prefix=P``: the batch's sequences start with the same
    P tokens, stored once. Paged engines share whole blocks only: S = floor(P / block) x block
    tokens (vLLM hashes full blocks only, docs.vllm.ai/en/latest/design/prefix_caching/, and
    shares them through prefix caching; SGLang pages of ``page_size`` and TensorRT-LLM blocks of
    ``tokens_per_block`` by the same page-granular reasoning, not checked against their source
    here); others share every token (S = P). llama.cpp shares cells only in a unified cache
    (``kv_unified``): with one stream per sequence nothing is shared. With E(t, b) the
    engine's estimate:
        shared = E(T - S, B) + E(T, 1) - E(T - S, 1)
    i.e. B private suffixes plus one copy of what the prefix adds to a sequence. Fixed
    per-sequence state and per-layer pads cancel in the difference; for a sliding layer the
    difference is exactly the part of the prefix still inside its window. Requires S < T
    (each sequence owns at least one token) and cannot be combined with eviction (evicted
    caches differ per sequence). Transformers caches keep one row per sequence and share
    nothing: for hf-* engines this is a what-if, and the Estimate says so.

Offload — ``offload=f``: the fraction f of the KV lives in host memory. On the device K and V
    each shrink by floor(bytes x f) (f read as its decimal value); recurrent state stays.
    ``details["host_kv_bytes"]`` holds what moved; ``per_layer`` spreads it over the caching
    layers in proportion to their bytes (whole bytes, largest remainder; a layer holding both
    KV and a recurrent state counts its state in that weight). Every decode step attends to all tokens,
    so the host part crosses the host link once per step: ``offload_transfer_seconds``
    (PCIe per direction, NVLink half its aggregate bidirectional figure, kvmem/data/gpus.json).

Quantisation — ``quantized_estimate``/``quantization_options``: every format of kvmem.dtypes,
    scales and zero points included, K and V chosen separately, with an optional full-precision
    residual of the most recent tokens (KIVI keeps 128; transformers QuantizedCache
    ``residual_length``). Counted the ideal way (every element once).

Paged vs contiguous — ``preallocation_waste``, ``simulate_admission``, ``allocation_sweep``:
    reserved vs used bytes for request-length distributions (fixed, uniform, the cited
    ShareGPT/Alpaca means of kvmem/data/request_lengths.json, or a log-normal from a mean and
    a median) under pre-allocation to max_model_len and under blocks of several sizes.

Architecture variants — ``architecture_variants``: the same model's cache as MHA, GQA with g
    groups, MQA, MLA with a latent rank, and cross-layer sharing every k layers. All need
    (re)training.

``compare_strategies`` puts one row per strategy side by side with its saving and its cost,
quoting the measured quality deltas of kvmem/data/quality.json where they exist.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import asdict, dataclass, replace
from fractions import Fraction
from functools import lru_cache
from importlib import resources
from numbers import Real

from .dtypes import DType, dtype, dtype_names
from .catalog import as_model
from .engines import ENGINES
from .engines import estimate as _estimate
from .engines.base import Estimate, assemble, cdiv, layer_heads, resolve_dtypes, state_share
from .formula import ideal_layer_bytes
from .model import CHUNKED, FULL, MLA, SHARED, SLIDING, Layer, Model
from .units import parse_bytes, parse_tokens, require_positive_int, show_value

__all__ = ["Eviction", "EVICTION_POLICIES", "apply_strategies", "offload_transfer_seconds",
           "quantized_estimate", "quantization_options", "architecture_variants",
           "preallocation_waste", "simulate_admission", "allocation_sweep", "request_lengths",
           "compare_strategies", "quality_results", "REQUEST_DISTRIBUTIONS"]

EVICTION_POLICIES = ("streaming", "h2o", "snapkv")
_POLICY_ALIASES = {"streamingllm": "streaming", "sink": "streaming", "attention_sink": "streaming",
                   "heavy_hitter": "h2o", "h2o_eviction": "h2o"}
# Defaults, each from its paper (see the module docstring).
_DEFAULT_SINK = 4                 # StreamingLLM §3.1: four initial tokens suffice
_DEFAULT_OBSERVATION_WINDOW = 32  # SnapKV §5.3: observation window size 32
_POLICY_FIELDS = {"streaming": ("sink", "window"), "h2o": ("budget", "recent"),
                  "snapkv": ("budget", "observation_window", "new_tokens")}
# Engines that share a prefix in whole blocks: the option naming their block, in tokens.
_SHARE_UNIT_OPTION = {"vllm": "block_size", "sglang": "page_size", "trtllm": "tokens_per_block"}
_NVLINK_DIRECTIONS = 2  # gpus.json NVLink figures are NVIDIA's aggregate bidirectional numbers


def _count(name: str, value, *, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        kind = "a positive integer" if minimum == 1 else "a non-negative integer"
        raise ValueError(f"{name} must be {kind}, got {value!r}")
    return value


@dataclass(frozen=True)
class Eviction:
    """A token-eviction policy: ``Eviction("streaming", sink=4, window=1020)``,
    ``Eviction("h2o", budget=1024, recent=256)``, ``Eviction("snapkv", budget=1024)``."""

    policy: str
    sink: int | None = None
    window: int | None = None
    budget: int | None = None
    recent: int | None = None
    observation_window: int | None = None
    new_tokens: int | None = None

    def __post_init__(self):
        key = str(self.policy).strip().lower().replace("-", "_") if isinstance(self.policy, str) else None
        key = _POLICY_ALIASES.get(key, key)
        if key not in EVICTION_POLICIES:
            raise ValueError(f"unknown eviction policy {self.policy!r}; policies: {', '.join(EVICTION_POLICIES)}")
        given = [f for f in ("sink", "window", "budget", "recent", "observation_window", "new_tokens")
                 if getattr(self, f) is not None]
        stray = [f for f in given if f not in _POLICY_FIELDS[key]]
        if stray:
            raise ValueError(f"Eviction({key!r}) takes {', '.join(_POLICY_FIELDS[key])}, not {stray[0]}")
        set_ = lambda name, value: object.__setattr__(self, name, value)  # noqa: E731 (frozen)
        set_("policy", key)
        if key == "streaming":
            sink = _count("sink", _DEFAULT_SINK if self.sink is None else self.sink)
            if self.window is None:
                raise ValueError("Eviction('streaming') needs window= (recent tokens kept besides the sink)")
            window = _count("window", self.window)
            if sink + window < 1:
                raise ValueError(f"sink + window must be at least 1 token, got {sink} + {window}")
            set_("sink", sink)
            set_("window", window)
            return
        if self.budget is None:
            raise ValueError(f"Eviction({key!r}) needs budget= (tokens kept per layer)")
        budget = _count("budget", self.budget, minimum=1)
        set_("budget", budget)
        if key == "h2o":
            recent = _count("recent", budget // 2 if self.recent is None else self.recent)
            if recent > budget:
                raise ValueError(f"recent must not exceed budget, got recent={recent} > budget={budget}")
            set_("recent", recent)
            return
        window = _count("observation_window", min(_DEFAULT_OBSERVATION_WINDOW, budget)
                        if self.observation_window is None else self.observation_window, minimum=1)
        if window > budget:
            raise ValueError(f"observation_window must not exceed budget, got {window} > {budget}")
        set_("observation_window", window)
        set_("new_tokens", _count("new_tokens", 0 if self.new_tokens is None else self.new_tokens))

    @property
    def cap(self) -> int | None:
        """The most tokens a layer holds, or None (SnapKV keeps every decoded token)."""
        if self.policy == "streaming":
            return self.sink + self.window
        return self.budget if self.policy == "h2o" else None

    def held_tokens(self, tokens: int) -> int:
        """Tokens each full layer holds for a sequence of ``tokens`` under this policy."""
        tokens = require_positive_int("tokens", tokens)
        if self.policy == "snapkv":
            if self.new_tokens > tokens:
                raise ValueError(f"new_tokens={self.new_tokens} exceeds tokens={tokens}")
            prompt = tokens - self.new_tokens
            return min(prompt, self.budget) + self.new_tokens
        return min(tokens, self.cap)

    def describe(self) -> str:
        if self.policy == "streaming":
            return f"StreamingLLM: {self.sink} sink + {self.window} recent tokens"
        if self.policy == "h2o":
            return f"H2O: {self.budget} tokens ({self.budget - self.recent} heavy hitters + {self.recent} recent)"
        return (f"SnapKV: prompt compressed to {self.budget} tokens (observation window "
                f"{self.observation_window}), {self.new_tokens} decoded tokens kept")

    def to_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}


# --------------------------------------------------------------------------- estimate() hooks

def eviction_policies(budget: int, *, sink: int = 4) -> dict:
    """The seed's eviction families at one token budget, for side-by-side curves: nothing evicted,
    StreamingLLM (``sink`` sinks + the rest of the budget as the recent window) and H2O (half heavy
    hitters, half recent tokens)."""
    budget = _count("budget", budget, minimum=1)
    window = max(budget - sink, 1)
    return {"keep everything": None,
            f"StreamingLLM {sink} + {window}": Eviction("streaming", sink=sink, window=window),
            f"H2O {budget}": Eviction("h2o", budget=budget, recent=budget // 2)}


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
    if isinstance(offload, bool) or not isinstance(offload, Real) or not math.isfinite(float(offload)):
        raise ValueError(f"offload must be a fraction between 0 and 1, got {offload!r}")
    fraction = Fraction(str(offload)) if isinstance(offload, float) else Fraction(offload)
    if not 0 <= fraction <= 1:
        raise ValueError(f"offload must be a fraction between 0 and 1, got {offload!r}")
    return fraction


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
        result = _evict(result, eviction, rerun)
    if prefix:
        result = _share(result, prefix, rerun, engine, options)
    if fraction:
        result = _offload(result, fraction, model)
    return result


def _evict(base: Estimate, eviction: Eviction, rerun) -> Estimate:
    held = eviction.held_tokens(base.tokens)
    info = {**eviction.to_dict(), "held_tokens": held}
    if held >= base.tokens:
        return replace(base, notes=base.notes + (f"{eviction.describe()}: all {base.tokens} tokens fit, "
                                                 "nothing evicted",), details={**base.details, "eviction": info})
    capped = rerun(held, base.batch)
    note = (f"{eviction.describe()}: each layer holds {held} of {base.tokens} tokens "
            f"(sliding layers min(window, {held})); the K/V of the other {base.tokens - held:,} tokens are "
            "discarded for good — if one of them matters later, the model can no longer attend to it")
    return replace(capped, tokens=base.tokens, notes=base.notes + (note,),
                   details={**base.details, **capped.details, "eviction": info})


def _share_unit(engine: str, options: dict, est: Estimate) -> int:
    name = _SHARE_UNIT_OPTION.get(engine)
    if name is None:
        return 1
    value = options.get(name)
    if value is None:
        value = est.details.get(name, est.details.get("block_size"))
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"cannot tell the {engine} {name} that sets which whole blocks are shared; pass {name}=")
    return value


def _same_stage(*estimates: Estimate) -> None:
    patterns = {tuple(x != 0 for x in e.per_layer) for e in estimates}
    if len(patterns) > 1:
        raise ValueError("shared_prefix with pp>1: the largest pipeline stage differs between the suffix "
                         "and the prefix counts; estimate with pp=1")


def _share(base: Estimate, prefix: int, rerun, engine: str, options: dict) -> Estimate:
    unit = _share_unit(engine, options, base)
    shared = prefix // unit * unit
    info = {"tokens": prefix, "shared_tokens": shared, "unit_tokens": unit, "saved_bytes": 0}
    notes = list(base.notes)
    if engine.startswith("hf"):
        notes.append("transformers caches keep one row per sequence and share nothing: prefix sharing is a what-if")
    if engine == "vllm" and options.get("enable_prefix_caching") is False:
        notes.append("vLLM shares prefix blocks through prefix caching: counted as if enable_prefix_caching=True")
    separate = engine == "llama.cpp" and base.details.get("kv_unified") is False
    if base.batch == 1 or shared == 0 or separate:
        why = ("batch=1 has no other sequence" if base.batch == 1 else
               "llama.cpp keeps one cache stream per sequence unless kv_unified=True" if separate else
               f"no whole {unit}-token block in {prefix} tokens")
        notes.append(f"shared prefix of {prefix} tokens saves nothing: {why}")
        return replace(base, notes=tuple(notes), details={**base.details, "shared_prefix": info})
    rest = rerun(base.tokens - shared, base.batch)
    one = rerun(base.tokens, 1)
    one_rest = rerun(base.tokens - shared, 1)
    _same_stage(base, rest, one, one_rest)
    combine = lambda f: f(rest) + f(one) - f(one_rest)  # noqa: E731
    k = combine(lambda e: e.k_bytes)
    v = combine(lambda e: e.v_bytes)
    per_layer = tuple(a + b - c for a, b, c in zip(rest.per_layer, one.per_layer, one_rest.per_layer))
    all_devices = combine(lambda e: e.kv_bytes_all_devices)
    peak = k + v + max(0, rest.peak_bytes - rest.kv_bytes)
    info["saved_bytes"] = base.kv_bytes - (k + v)
    notes.append(f"{base.batch} sequences share their first {shared} tokens"
                 + (f" ({shared // unit} whole {unit}-token blocks of {prefix})" if unit > 1 else "")
                 + ", stored once"
                 + ("" if info["saved_bytes"] > 0 else "; the engine's pre-allocated cache does not shrink"))
    return replace(base, k_bytes=k, v_bytes=v, per_layer=per_layer, kv_bytes_all_devices=all_devices,
                   peak_bytes=peak, notes=tuple(notes), details={**base.details, "shared_prefix": info})


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
    caching = [i for i, layer in enumerate(model.layers) if layer.caches_tokens and i < len(base.per_layer)]
    moved = _apportion(host, [base.per_layer[i] for i in caching])
    per_layer = list(base.per_layer)
    for i, m in zip(caching, moved):
        per_layer[i] -= m
    info = {"fraction": float(fraction), "host_kv_bytes": host, "host_kv_bytes_all_devices": host_all,
            "device_kv_bytes": base.kv_bytes - host}
    note = (f"offload: {float(fraction):g} of the KV ({host:,} bytes) in host memory; every decode step "
            "reads it over the host link")
    return replace(base, k_bytes=base.k_bytes - host_k, v_bytes=base.v_bytes - host_v, per_layer=tuple(per_layer),
                   kv_bytes_all_devices=base.kv_bytes_all_devices - host_all,
                   peak_bytes=max(base.peak_bytes - host, base.kv_bytes - host), notes=base.notes + (note,),
                   details={**base.details, "offload": info, "host_kv_bytes": host})


@lru_cache(maxsize=1)
def _gpus() -> dict:
    return json.loads(resources.files("kvmem").joinpath("data/gpus.json").read_text(encoding="utf-8"))


def _link_bandwidth(gpu, link: str) -> float:
    if link not in ("pcie", "nvlink"):
        raise ValueError(f"link must be 'pcie' or 'nvlink', got {link!r}")
    if isinstance(gpu, Real) and not isinstance(gpu, bool):
        if gpu <= 0:
            raise ValueError(f"a link bandwidth must be positive bytes/s, got {gpu!r}")
        return float(gpu)
    if isinstance(gpu, str):
        key = gpu.strip().lower()
        if key not in _gpus():
            raise ValueError(f"unknown gpu {gpu!r}; gpus: {', '.join(_gpus())}")
        spec, name = _gpus()[key], key
    elif isinstance(gpu, dict):
        spec, name = gpu, gpu.get("name", "custom gpu")
    else:
        raise ValueError(f"gpu must be a catalog name, a spec dict or a bandwidth in bytes/s, got {gpu!r}")
    figure = (spec.get("interconnect") or {}).get(f"{link}_bytes_per_s")
    if not figure:
        raise ValueError(f"gpu {name!r} has no {link} bandwidth in the catalog; pass the link bandwidth "
                         "in bytes/s as gpu=")
    return figure / _NVLINK_DIRECTIONS if link == "nvlink" else float(figure)


def offload_transfer_seconds(host_bytes, *, gpu, link: str = "pcie") -> float:
    """Seconds one decode step spends moving the offloaded KV to the GPU.

    ``host_bytes``: bytes in host memory, or an Estimate made with ``offload=``. ``gpu``: a
    name from kvmem/data/gpus.json, a spec dict with ``interconnect``, or the link's bytes/s.
    PCIe figures there are per direction; NVLink figures are aggregate bidirectional, so one
    direction gets half. A lower bound: it ignores latency and overlap with compute.
    """
    if isinstance(host_bytes, Estimate):
        host_bytes = host_bytes.details.get("host_kv_bytes", 0)
    if isinstance(host_bytes, bool) or not isinstance(host_bytes, int) or host_bytes < 0:
        raise ValueError(f"host_bytes must be a non-negative integer, got {host_bytes!r}")
    return host_bytes / _link_bandwidth(gpu, link)


# --------------------------------------------------------------------------- quantisation

def quantized_estimate(model, *, tokens, batch: int = 1, k_dtype="auto", v_dtype=None,
                       residual_length: int = 0, residual_dtype="auto", tp: int = 1, pp: int = 1) -> Estimate:
    """The ideal count with K and V in their own formats and the ``residual_length`` most
    recent tokens of each layer in ``residual_dtype`` (full precision, KIVI-style).

    Per layer holding h tokens: r = min(h, residual_length) rows in the residual format,
    h - r in the quantised ones; MLA latents use ``k_dtype``. Formats are names or DTypes
    (``kvmem.dtype("int2", group_size=32, scale_dtype="fp16", zero_point=True)``).
    """
    model = as_model(model)
    tokens = parse_tokens(tokens)
    batch = require_positive_int("batch", batch)
    residual_length = _count("residual_length", residual_length)
    k_fmt, v_fmt, state_dtype = resolve_dtypes(model, k_dtype, type_v=v_dtype if v_dtype is not None else k_dtype)
    res = dtype(residual_dtype, model_dtype=model.dtype)
    rows = []
    for layer in model.layers:
        held = layer.held_tokens(tokens)
        full = min(held, residual_length)
        heads = layer_heads(layer, tp)
        kq, vq, _ = ideal_layer_bytes(layer, tokens=held - full, batch=batch, k_dtype=k_fmt, v_dtype=v_fmt,
                                          state_dtype=state_dtype, kv_heads=heads)
        kr, vr, _ = ideal_layer_bytes(layer, tokens=full, batch=batch, k_dtype=res, v_dtype=res,
                                      state_dtype=state_dtype, kv_heads=heads)
        state = 0
        if layer.state:
            state = batch * state_dtype.row_bytes(state_share(layer.state.elements(), layer.state.ssm_heads, tp))
        rows.append((kq + kr, vq + vr, state))
    label = k_fmt.name if k_fmt.name == v_fmt.name else f"K {k_fmt.name} / V {v_fmt.name}"
    notes = [f"{residual_length} most recent tokens per layer in {res.name}"] if residual_length else []
    return assemble(model, "ideal", tokens=tokens, batch=batch, kv_dtype=label, tp=tp, pp=pp, rows=rows,
                    notes=notes, details={"k_dtype": k_fmt.name, "v_dtype": v_fmt.name,
                                          "residual_length": residual_length, "residual_dtype": res.name})


def _canonical_formats() -> list[str]:
    return [name for name in dtype_names() if name != "auto" and dtype(name).name == name]


# KIVI's settings (group 32, fp16 scale and zero point, 128 residual tokens): its long_bench.md.
KIVI = {"kivi-4": ("int4", 32), "kivi-2": ("int2", 32)}


def _kivi_dtype(name: str) -> DType:
    base, group = KIVI[name]
    return dtype(base, group_size=group, scale_dtype="fp16", zero_point=True)


def quantization_options(model, *, tokens, batch: int = 1, formats=None, residual_length: int = 0,
                         tp: int = 1, pp: int = 1) -> list[dict]:
    """Every KV format (default: each canonical format of kvmem.dtypes plus KIVI-4/KIVI-2 and
    transformers' default int4 group-64 fp32 scale+zero) against the model's own dtype.

    ``formats`` items: a name, a DType, or a (K, V) pair. A format that cannot store the
    model's rows (ggml blocks of 32 with a head_dim not a multiple of 32) gets bytes None
    and the reason.
    """
    model = as_model(model)
    if formats is None:
        formats = _canonical_formats() + [_kivi_dtype("kivi-4"), _kivi_dtype("kivi-2"),
                                          dtype("int4", group_size=64, scale_dtype="fp32", zero_point=True)]
    base = quantized_estimate(model, tokens=tokens, batch=batch, tp=tp, pp=pp).kv_bytes
    rows = []
    for item in formats:
        k, v = item if isinstance(item, tuple) else (item, item)
        try:
            est = quantized_estimate(model, tokens=tokens, batch=batch, k_dtype=k, v_dtype=v,
                                     residual_length=residual_length, tp=tp, pp=pp)
        except ValueError as exc:
            rows.append({"k_dtype": str(k), "v_dtype": str(v), "bytes": None, "saving_bytes": None,
                         "saving_fraction": None, "cost": f"not applicable: {exc}"})
            continue
        kd, vd = dtype(k, model_dtype=model.dtype), dtype(v, model_dtype=model.dtype)
        saving = base - est.kv_bytes
        rows.append({"k_dtype": kd.name, "v_dtype": vd.name, "bits_k": kd.bits, "bits_v": vd.bits,
                     "residual_length": residual_length, "bytes": est.kv_bytes, "saving_bytes": saving,
                     "saving_fraction": saving / base if base else 0.0, "cost": _quant_cost(kd, vd)})
    return rows


def _quant_cost(kd: DType, vd: DType) -> str:
    if not (kd.is_quantized or vd.is_quantized):
        return "lossless (a float format)"
    keys = {kd.name, vd.name, kd.name.split("-")[0], vd.name.split("-")[0]}
    if keys & {"fp8_e4m3", "fp8_e5m2"}:
        keys.add("fp8")
    return "lossy: " + (_quality_text(keys) or "no measured quality delta recorded in kvmem/data/quality.json")


# --------------------------------------------------------------------------- quality data

@lru_cache(maxsize=1)
def quality_results() -> tuple[dict, ...]:
    """The cited quality measurements of kvmem/data/quality.json."""
    data = json.loads(resources.files("kvmem").joinpath("data/quality.json").read_text(encoding="utf-8"))
    return tuple(data["entries"])


def _quality_entries(keys) -> list[dict]:
    keys = set(keys)
    return [e for e in quality_results() if keys & set(e["applies_to"])]


def _quality_text(keys, limit: int = 2) -> str:
    parts = []
    for e in _quality_entries(keys)[:limit]:
        if e["delta"] is None:
            parts.append(f"{e['method']}: < {e['delta_bound']} {e['metric'].split(' ')[0]} change on "
                         f"{e['benchmark']} ({e['model']}) [{e['paper'].split(',')[0]}]")
            continue
        parts.append(f"{e['method']}: {e['benchmark']} {e['metric'].split(' ')[0]} {e['baseline']} -> {e['value']} "
                     f"({e['delta']:+g}) on {e['model']} [{e['source'].split(' ')[0]}]")
    return "; ".join(parts)


# --------------------------------------------------------------------------- architecture variants

def _config_value(model: Model, key: str):
    cfg = model.config or {}
    return cfg.get(key, (cfg.get("text_config") or {}).get(key))


def _as_heads(model: Model, layer: Layer, kv_heads: int) -> Layer:
    if layer.kind in (FULL, SLIDING, CHUNKED):
        return replace(layer, kv_heads=kv_heads)
    if layer.kind == MLA:
        nope, rope, v = (_config_value(model, k) for k in ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"))
        if nope and rope and v:
            return Layer(FULL, kv_heads=kv_heads, head_dim_k=nope + rope, head_dim_v=v)
    return layer


def _head_variant(model: Model, kv_heads: int) -> Model:
    heads = model.num_attention_heads
    if kv_heads < 1 or heads % kv_heads:
        raise ValueError(f"GQA groups must divide the {heads} query heads, got {kv_heads}")
    return model.with_layers([_as_heads(model, layer, kv_heads) for layer in model.layers])


def _mla_variant(model: Model, rank: int, rope: int) -> Model:
    rank = _count("mla_rank", rank, minimum=1)
    rope = _count("mla_rope_dim", rope)
    return model.with_layers([Layer(MLA, kv_lora_rank=rank, qk_rope_head_dim=rope, state=layer.state)
                              if layer.kind == FULL else layer for layer in model.layers])


def _cross_layer_variant(model: Model, every: int) -> Model:
    every = _count("share_every", every, minimum=1)
    layers, seen, anchor = [], {}, {}
    for i, layer in enumerate(model.layers):
        if not layer.caches_tokens:
            layers.append(layer)
            continue
        key = replace(layer, state=None)
        n = seen.get(key, 0)
        seen[key] = n + 1
        if n % every == 0:
            anchor[key] = i
            layers.append(layer)
        else:
            layers.append(Layer(SHARED, shared_with=anchor[key], state=layer.state))
    return model.with_layers(layers)


def architecture_variants(model, *, tokens, batch: int = 1, engine: str = "ideal", kv_dtype="auto",
                          gqa_groups=(8,), mla_rank: int = 512, mla_rope_dim: int = 64, share_every: int = 2,
                          tp: int = 1, pp: int = 1, **options) -> list[dict]:
    """The model's cache as it is, as MHA, GQA with each of ``gqa_groups`` KV heads, MQA, MLA
    (full layers to a ``mla_rank`` latent + ``mla_rope_dim`` rope key, DeepSeek-V2's 512 + 64
    by default) and with cross-layer KV sharing (each run of ``share_every`` layers of the
    same shape shares the first one's cache). Every variant but "as is" needs retraining.

    Sliding and chunked layers keep their windows; MLA layers become per-head layers only
    when the config gives qk_nope_head_dim, qk_rope_head_dim and v_head_dim.
    """
    model = as_model(model)
    heads = model.num_attention_heads
    variants = [("as is", model, {}), ("MHA", _head_variant(model, heads), {"kv_heads": heads})]
    for g in gqa_groups or ():
        if 1 < g < heads:
            variants.append((f"GQA-{g}", _head_variant(model, g), {"kv_heads": g}))
    variants.append(("MQA", _head_variant(model, 1), {"kv_heads": 1}))
    variants.append((f"MLA (latent {mla_rank} + rope {mla_rope_dim})", _mla_variant(model, mla_rank, mla_rope_dim),
                     {"kv_lora_rank": mla_rank, "qk_rope_head_dim": mla_rope_dim}))
    variants.append((f"cross-layer KV sharing every {share_every}", _cross_layer_variant(model, share_every),
                     {"share_every": share_every}))
    base = None
    rows = []
    for name, variant, settings in variants:
        try:
            est = _estimate(variant, engine=engine, tokens=tokens, batch=batch, kv_dtype=kv_dtype, tp=tp, pp=pp,
                           **options)
        except ValueError as exc:
            if base is None:
                raise
            rows.append({"variant": name, "strategy": name, "family": "architecture", "bytes": None,
                         "saving_bytes": None, "saving_fraction": None, "needs_retraining": True, "lossless": False,
                         "settings": settings, "cost": f"not available in engine {engine!r}: {exc}",
                         "model": variant})
            continue
        base = est.total_bytes if base is None else base
        saving = base - est.total_bytes
        rows.append({"variant": name, "strategy": name, "family": "architecture", "bytes": est.total_bytes,
                     "saving_bytes": saving, "saving_fraction": saving / base if base else 0.0,
                     "needs_retraining": name != "as is", "lossless": name == "as is", "settings": settings,
                     "cost": "none (the model as trained)" if name == "as is" else
                     "needs retraining: the attention layout is baked into the weights (pre-training or costly "
                     "up-training); sharing heads or layers can cost capacity",
                     "model": variant})
    return rows


# --------------------------------------------------------------------------- paged vs contiguous

def _layer_token_bytes(model: Model, kv_dtype) -> list[tuple[Layer, int]]:
    k_dtype, v_dtype, state_dtype = resolve_dtypes(model, kv_dtype)
    out = []
    for layer in model.layers:
        if layer.caches_tokens:
            k, v, _ = ideal_layer_bytes(layer, tokens=1, batch=1, k_dtype=k_dtype, v_dtype=v_dtype,
                                        state_dtype=state_dtype)
            out.append((layer, k + v))
    return out


_MAX_REQUESTS = 10**6  # request lengths one call sizes (the app samples 500)


def _check_lengths(lengths, max_model_len: int) -> list[int]:
    if isinstance(lengths, (str, bytes, dict)) or not hasattr(lengths, "__iter__"):
        raise ValueError(f"lengths must be a list of request lengths in tokens, got {show_value(lengths)}")
    lengths = list(lengths)
    if len(lengths) > _MAX_REQUESTS:
        raise ValueError(f"lengths must hold at most {_MAX_REQUESTS:,} requests, got {len(lengths):,}")
    if not lengths:
        raise ValueError("lengths must hold at least one request length")
    for n in lengths:
        _count("each request length", n, minimum=1)
        if n > max_model_len:
            raise ValueError(f"a request of {n} tokens exceeds max_model_len={max_model_len}")
    return lengths


class _Sizer:
    """Per-request KV bytes: exact, block-rounded per layer, and pre-allocated to max_model_len."""

    def __init__(self, model, kv_dtype, max_model_len: int, block_size: int):
        self.per_layer = _layer_token_bytes(as_model(model), kv_dtype)
        self.block = require_positive_int("block_size", block_size)
        self.contiguous = self.used(max_model_len)

    def used(self, n: int) -> int:
        return sum(b * layer.held_tokens(n) for layer, b in self.per_layer)

    def paged(self, n: int) -> int:
        return sum(b * cdiv(layer.held_tokens(n), self.block) * self.block for layer, b in self.per_layer)


def _admit(sizes, kv_memory: int) -> int:
    admitted = total = 0
    for size in sizes:
        if total + size > kv_memory:
            break
        total += size
        admitted += 1
    return admitted


def preallocation_waste(model, *, lengths, max_model_len, block_size: int = 16, kv_dtype="auto",
                        kv_memory=None) -> dict:
    """Reserved vs used KV bytes for requests of ``lengths`` tokens (final lengths, prompt +
    output): pre-allocating max_model_len per request (contiguous) against whole blocks of
    ``block_size`` tokens per layer (paged, PagedAttention). Waste = reserved - used; the
    paged waste is internal fragmentation, under one block per layer and request.

    Sliding layers hold min(length, window) and round that up to blocks. With ``kv_memory``
    the dict also counts the requests admitted in arrival order (see simulate_admission).
    """
    max_model_len = parse_tokens(max_model_len)
    lengths = _check_lengths(lengths, max_model_len)
    sizer = _Sizer(model, kv_dtype, max_model_len, block_size)
    used = sum(sizer.used(n) for n in lengths)
    paged = sum(sizer.paged(n) for n in lengths)
    contiguous = sizer.contiguous * len(lengths)
    frag_tokens = sum(cdiv(n, sizer.block) * sizer.block - n for n in lengths)
    result = {
        "model": as_model(model).name, "requests": len(lengths), "max_model_len": max_model_len,
        "mean_length": sum(lengths) / len(lengths), "used_bytes": used,
        "contiguous": {"reserved_bytes": contiguous, "waste_bytes": contiguous - used,
                       "waste_fraction": (contiguous - used) / contiguous if contiguous else 0.0},
        "paged": {"block_size": sizer.block, "reserved_bytes": paged, "waste_bytes": paged - used,
                  "waste_fraction": (paged - used) / paged if paged else 0.0,
                  "internal_fragmentation_tokens": frag_tokens},
    }
    if kv_memory is not None:
        result["admitted"] = simulate_admission(model, lengths=lengths, kv_memory=kv_memory,
                                                max_model_len=max_model_len, block_size=sizer.block,
                                                kv_dtype=kv_dtype)["admitted"]
    return result


def simulate_admission(model, *, lengths, kv_memory, max_model_len, block_size: int = 16,
                       kv_dtype="auto") -> dict:
    """How many of the requests fit in ``kv_memory`` bytes, admitted first come first served
    (the first request that does not fit stops admission, as a FCFS scheduler waits on its
    head), when each reserves: max_model_len (contiguous), its blocks (paged) or its exact
    bytes. Lengths are final lengths: an engine that grows blocks on demand admits more at
    first and preempts later; this is the count at completion.
    """
    max_model_len = parse_tokens(max_model_len)
    lengths = _check_lengths(lengths, max_model_len)
    kv_memory = parse_bytes(kv_memory)
    sizer = _Sizer(model, kv_dtype, max_model_len, block_size)
    admitted = {"contiguous": _admit([sizer.contiguous] * len(lengths), kv_memory),
                "paged": _admit([sizer.paged(n) for n in lengths], kv_memory),
                "exact": _admit([sizer.used(n) for n in lengths], kv_memory)}
    return {"model": as_model(model).name, "kv_memory": kv_memory, "requests": len(lengths), "block_size": sizer.block,
            "max_model_len": max_model_len, "admitted": admitted}


REQUEST_DISTRIBUTIONS = ("fixed", "uniform", "sharegpt", "alpaca", "lognormal")


@lru_cache(maxsize=1)
def _length_stats() -> dict:
    data = json.loads(resources.files("kvmem").joinpath("data/request_lengths.json").read_text(encoding="utf-8"))
    return data["datasets"]


def _geometric(rng: random.Random, mean: float) -> int:
    """A whole number >= 1 with the given mean (geometric law, p = 1 / mean), by inversion."""
    if mean <= 1:
        return 1
    p = 1.0 / mean
    return 1 + int(math.log(1.0 - rng.random()) / math.log(1.0 - p))


def request_lengths(distribution: str, n: int, *, seed: int = 0, max_model_len=None, length=None,
                    low=None, high=None, mean=None, median=None) -> list[int]:
    """``n`` request lengths (prompt + output tokens), reproducible from ``seed``.

    fixed: every request ``length``. uniform: whole numbers in [low, high]. sharegpt / alpaca:
    prompt and output each geometric with the means of kvmem/data/request_lengths.json (the
    vLLM paper's Figure 11). lognormal: given ``mean`` > ``median`` (mu = ln median,
    sigma^2 = 2 ln(mean / median)), rounded up to whole tokens. ``max_model_len`` truncates
    longer requests to it, as a server's max_tokens would.
    """
    n = require_positive_int("n", n)
    rng = random.Random(seed)
    key = str(distribution).lower()
    if key == "fixed":
        if length is None:
            raise ValueError("distribution 'fixed' needs length=")
        out = [parse_tokens(length)] * n
    elif key == "uniform":
        if low is None or high is None:
            raise ValueError("distribution 'uniform' needs low= and high=")
        low, high = parse_tokens(low), parse_tokens(high)
        if low > high:
            raise ValueError(f"low must not exceed high, got low={low} > high={high}")
        out = [rng.randint(low, high) for _ in range(n)]
    elif key in _length_stats():
        stats = _length_stats()[key]
        out = [_geometric(rng, stats["prompt_mean_tokens"]) + _geometric(rng, stats["output_mean_tokens"])
               for _ in range(n)]
    elif key == "lognormal":
        if mean is None or median is None or not 0 < median < mean:
            raise ValueError(f"distribution 'lognormal' needs mean > median > 0, got mean={mean}, median={median}")
        mu, sigma = math.log(median), math.sqrt(2 * math.log(mean / median))
        out = [max(1, math.ceil(rng.lognormvariate(mu, sigma))) for _ in range(n)]
    else:
        raise ValueError(f"unknown distribution {distribution!r}; distributions: {', '.join(REQUEST_DISTRIBUTIONS)}")
    if max_model_len is not None:
        cap = parse_tokens(max_model_len)
        out = [min(x, cap) for x in out]
    return out


def allocation_sweep(model, *, max_model_len, kv_memory, n: int = 1000, seed: int = 0,
                     block_sizes=(1, 16, 32, 64, 128), distributions=("fixed", "uniform", "sharegpt"),
                     kv_dtype="auto") -> list[dict]:
    """Contiguous pre-allocation against paged blocks of several sizes, for several length
    distributions: reserved, used, waste and requests admitted into ``kv_memory``.

    fixed = every request max_model_len // 2 tokens; uniform = 1..max_model_len; the cited
    ones as in request_lengths, truncated to max_model_len.
    """
    max_model_len = parse_tokens(max_model_len)
    try:
        kv_memory = parse_bytes(kv_memory)
    except ValueError as exc:
        raise ValueError(f"kv_memory: {exc}") from None
    n = require_positive_int("n", n, _MAX_REQUESTS)
    rows = []
    for dist in distributions:
        params = {"fixed": {"length": max(1, max_model_len // 2)}, "uniform": {"low": 1, "high": max_model_len}}
        lengths = request_lengths(dist, n, seed=seed, max_model_len=max_model_len, **params.get(dist, {}))
        for i, bs in enumerate(block_sizes):
            w = preallocation_waste(model, lengths=lengths, max_model_len=max_model_len, block_size=bs,
                                    kv_dtype=kv_dtype, kv_memory=kv_memory)
            if i == 0:
                rows.append({"distribution": dist, "allocation": "contiguous (max_model_len)", "block_size": None,
                             "used_bytes": w["used_bytes"], **{k: v for k, v in w["contiguous"].items()},
                             "admitted": w["admitted"]["contiguous"], "mean_length": w["mean_length"]})
            rows.append({"distribution": dist, "allocation": f"paged, block {bs}", "block_size": bs,
                         "used_bytes": w["used_bytes"], "reserved_bytes": w["paged"]["reserved_bytes"],
                         "waste_bytes": w["paged"]["waste_bytes"], "waste_fraction": w["paged"]["waste_fraction"],
                         "admitted": w["admitted"]["paged"], "mean_length": w["mean_length"]})
    return rows


# --------------------------------------------------------------------------- side by side

def _row(strategy: str, family: str, est_or_bytes, base: int, cost: str, *, lossless: bool,
         needs_retraining: bool = False, settings=None, quality=()) -> dict:
    total = est_or_bytes.total_bytes if isinstance(est_or_bytes, Estimate) else est_or_bytes
    saving = None if total is None else base - total
    return {"strategy": strategy, "family": family, "bytes": total, "saving_bytes": saving,
            "saving_fraction": None if saving is None else (saving / base if base else 0.0),
            "cost": cost, "lossless": lossless, "needs_retraining": needs_retraining,
            "settings": settings or {}, "quality": [e["id"] for e in _quality_entries(quality)]}


def compare_strategies(model, *, tokens, batch: int = 1, engine: str = "ideal", kv_dtype="auto", tp: int = 1,
                       pp: int = 1, budget: int = 1024, sink: int = _DEFAULT_SINK, shared_prefix=0, offload=0.0,
                       gpu=None, link: str = "pcie", max_model_len=None, residual_length: int = 128,
                       variants: bool = True, **options) -> list[dict]:
    """One row per strategy: ``bytes`` (KV + state on one device), ``saving_bytes`` and
    ``saving_fraction`` against the engine's baseline, ``cost`` (text, with the measured
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
    run = lambda **kw: _estimate(model, engine=engine, tokens=kw.pop("tokens", tokens), batch=batch,  # noqa: E731
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
            est, cost = run(kv_dtype=fmt), None
        except ValueError as exc:
            est, cost = None, f"not available in engine {engine!r}: {exc}"
        if est is not None:
            cost = _quant_cost(dtype(fmt), dtype(fmt))
            cost += "; on-the-fly dequantisation costs decode time without native kernels"
        rows.append(_row(f"KV {fmt}", "quantization", est, base, cost, lossless=False,
                         settings={"kv_dtype": fmt}, quality=keys))
    for name in ("kivi-4", "kivi-2"):
        fmt = _kivi_dtype(name)
        label = f"{name.upper()} ({fmt.name}, {residual_length} full-precision tokens)"
        settings = {"kv_dtype": fmt.name, "residual_length": residual_length}
        if baseline.engine != "ideal":  # counted the ideal way only: comparing it with an engine's pool would mislead
            rows.append(_row(label, "quantization", None, base, f"not available in engine {engine!r}: it has no "
                             "KIVI-style cache; compare with engine='ideal'", lossless=False, settings=settings,
                             quality={name}))
            continue
        est = quantized_estimate(model, tokens=tokens, batch=batch, k_dtype=fmt, residual_length=residual_length,
                                 tp=tp, pp=pp)
        rows.append(_row(label, "quantization", est, base, _quant_cost(fmt, fmt) + "; needs a KIVI-style kernel",
                         lossless=False, settings=settings, quality={name}))
    budget = require_positive_int("budget", budget)
    for ev in (Eviction("streaming", sink=min(sink, budget), window=budget - min(sink, budget)),
               Eviction("h2o", budget=budget), Eviction("snapkv", budget=budget)):
        est = run(eviction=ev)
        cost = ("irreversible context loss: evicted tokens cannot be attended again; " + (
            "scores attention every step" if ev.policy != "streaming" else "no scoring overhead")
            + "; " + (_quality_text({ev.policy}) or "no measured quality delta recorded"))
        rows.append(_row(ev.describe(), "eviction", est, base, cost, lossless=False, settings=ev.to_dict(),
                         quality={ev.policy}))
    if shared_prefix:
        est = run(shared_prefix=shared_prefix)
        cost = "lossless; only when the requests really share the prefix (copy-on-write blocks)"
        if est.details["shared_prefix"]["saved_bytes"] <= 0:
            cost += "; " + est.notes[-1]
        rows.append(_row(f"shared prefix of {parse_tokens(shared_prefix)} tokens", "memory allocation", est, base,
                         cost, lossless=True, settings=est.details["shared_prefix"]))
    if offload:
        est = run(offload=offload)
        host = est.details["host_kv_bytes"]
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
    if variants:
        for v in architecture_variants(model, tokens=tokens, batch=batch, engine=engine, kv_dtype=kv_dtype,
                                       tp=tp, pp=pp, **options)[1:]:
            if v["model"].layers == model.layers:
                continue  # the model already has this layout (e.g. GQA-8 of an 8-KV-head model)
            rows.append(_row(v["variant"], "architecture", v["bytes"], base, v["cost"], lossless=False,
                             needs_retraining=True, settings=v["settings"]))
    return rows

"""The CUDA validation report (issue 25): kvmem's predictions against torch.cuda's allocator.

``tools/cuda_validate.sh`` runs this on a GPU machine, one phase per process (each under its
own time limit, so that a phase that hangs costs only itself), and assembles
``$OUT/cuda_report.json`` and ``$OUT/cuda.md``:

* ``suite`` -- not here: the script runs ``python3 -m kvmem validate --device cuda --json``
  (kvmem.validation, the whole suite) and this module reads its JSON;
* ``formats`` -- the KV formats (bf16, fp16, fp8, hqq int8 / int4, quanto int4 / int2) through
  kvmem.measure, entries of this module only (the default suite's cost is unchanged);
* ``seed`` -- the seed notebook's experiment at full size: LLaMA-2-7B's shapes (32 layers, 32
  heads, d_head 128) with random weights (kvmem.lab's Decoder), fp16, b = 32, t = 500: the
  cache's bytes against 8,388,608,000 and the time per generated token with and without the
  cache;
* ``long`` -- a long-context point: 128k tokens of Llama-3.1-8B's shapes (bf16) through the
  real transformers caches (dynamic and static), predicted against the allocator's counters;
* ``report`` -- the machine, every case and every figure in one JSON and one markdown file.

``--dry`` runs the same phases on the CPU at reduced sizes (tiny seed shapes, 2k context), with
the same report format: tests/test_cuda_report.py runs it. torch is imported inside the
functions only.

Over 300 lines by design: the phases of one GPU run and the report they fill, in the one file the
script runs phase by phase.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import time

SEED_BYTES = 8_388_608_000  # the seed's figure: 2 x 2 B x 32 x 32 layers x 32 heads x 128 x 500

# Full size (a GPU) and the CPU dry run's reduced sizes.
SIZES: dict[str, dict] = {
    "full": {
        "seed": dict(layers=32, heads=32, head_dim=128, tokens=500, batch=32, vocab=32000, dtype="fp16",
                     prompt=1, uncached_lengths=(125, 250, 500), repeats=3, warmup=1),
        "long": dict(model="llama-3.1-8b", tokens=131072, decode=16, batch=1),
        "formats_tokens": (64, 56),
    },
    "dry": {
        "seed": dict(layers=2, heads=4, head_dim=16, tokens=24, batch=3, vocab=64, dtype="fp16",
                     prompt=1, uncached_lengths=(6, 12, 24), repeats=2, warmup=1),
        "long": dict(model="llama-3.1-8b", tokens=1024, decode=4, batch=1),
        "formats_tokens": (10, 8),
    },
}

# The KV formats on the device: (label, model, engine, batch, kv_dtype, options). The last entry
# is the suite's own quanto entry, run here too because the script keeps optimum-quanto out of
# the suite's process (its CUDA kernels compile on first use: that phase has its own limit).
FORMATS: tuple[tuple, ...] = (
    ("bf16", "llama-3.1-8b", "hf-dynamic", 2, "bf16", {}),
    ("fp16", "llama-3.1-8b", "hf-dynamic", 2, "fp16", {}),
    ("fp32", "llama-3.2-1b", "hf-dynamic", 2, "fp32", {}),
    ("bf16 static", "llama-3.1-8b", "hf-static", 2, "bf16", {"max_cache_len": 96}),
    ("fp8 (e4m3, per tensor)", "llama-3.2-1b", "hf-quantized", 2, "bf16", {"backend": "fp8"}),
    ("int8 (hqq, g64)", "llama-3.2-1b", "hf-quantized", 2, "bf16",
     {"backend": "hqq", "nbits": 8, "q_group_size": 64, "residual_length": 4}),
    ("int4 (hqq, g64)", "llama-3.2-1b", "hf-quantized", 2, "bf16",
     {"backend": "hqq", "nbits": 4, "q_group_size": 64, "residual_length": 4}),
    ("int4 (hqq, g64), fp16", "llama-3.2-1b", "hf-quantized", 2, "fp16",
     {"backend": "hqq", "nbits": 4, "q_group_size": 64, "residual_length": 4}),
    ("int4 (quanto, g64)", "llama-3.2-1b", "hf-quantized", 2, "bf16",
     {"backend": "quanto", "nbits": 4, "q_group_size": 64, "residual_length": 4}),
    ("int2 (quanto, g64), the suite's entry", "qwen2.5-0.5b", "hf-quantized", 2, "bf16",
     {"backend": "quanto", "nbits": 2, "q_group_size": 64, "residual_length": 4}),
)

PHASES = ("suite", "formats", "seed", "long")


def _device(name: str):
    from . import resolve_device
    return resolve_device(name)


def _sync(dev) -> None:
    import torch
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def _version(package: str) -> str | None:
    from importlib import metadata
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def machine(device: str) -> dict:
    """The machine the report was measured on: GPU, driver, CUDA, library versions."""
    import torch
    dev = _device(device)
    info = {"device": str(dev), "python": platform.python_version(), "platform": platform.platform(),
            "cpus": os.cpu_count(), "torch": torch.__version__, "cuda": torch.version.cuda,
            "transformers": _version("transformers"), "hqq": _version("hqq"),
            "optimum-quanto": _version("optimum-quanto"), "gpu": None, "gpu_memory_bytes": None,
            "driver": None, "compute_capability": None}
    try:
        import transformers
        info["transformers"] = transformers.__version__  # the one imported (PYTHONPATH), not the dist's
    except ImportError:
        pass
    if dev.type == "cuda":
        props = torch.cuda.get_device_properties(dev)
        info.update(gpu=props.name, gpu_memory_bytes=props.total_memory,
                    compute_capability=f"{props.major}.{props.minor}")
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=30)
            info["driver"] = out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout else None
        except (OSError, subprocess.SubprocessError, IndexError):
            pass
    return info


def _measure_row(label, model, engine, batch, kv_dtype, options, *, tokens, device, skip=()) -> dict:
    """One kvmem.measure as a report row (or the reason it did not run)."""
    from . import backend_problem, measure
    total, prompt = tokens
    row = {"label": label, "model": model, "engine": engine, "tokens": total, "batch": batch,
           "kv_dtype": kv_dtype, "options": {**options, "prompt_tokens": prompt}}
    backend = options.get("backend")
    if backend in skip:
        return {**row, "skipped": f"{backend} left out of this run (KVMEM_CUDA_SKIP_BACKENDS)", "matches": None}
    problem = backend_problem(backend) if backend in ("quanto", "hqq") else None
    if problem:
        return {**row, "skipped": problem, "matches": None}
    started = time.perf_counter()
    try:
        m = measure(model, engine=engine, tokens=total, batch=batch, kv_dtype=kv_dtype, device=device,
                    prompt_tokens=prompt, **options)
    except Exception as exc:  # a format that does not run on this device: the report says why
        return {**row, "error": f"{type(exc).__name__}: {exc}", "matches": None,
                "seconds": round(time.perf_counter() - started, 3)}
    return {**m.to_dict(), "label": label}


def _rows(entries, *, save, **kwargs) -> dict:
    """Measure ``entries`` one by one; ``save(partial)`` after each, so that a phase stopped at its
    time limit still leaves the rows it finished (and names those it did not reach)."""
    rows: list = []
    for i, entry in enumerate(entries):
        if save:
            save({"rows": rows, "not_reached": [e[0] for e in entries[i:]]})
        rows.append(_measure_row(*entry, **kwargs))
    return {"rows": rows, "not_reached": []}


def run_formats(device: str, size: str, *, save=None, skip=()) -> dict:
    return _rows(FORMATS, save=save, tokens=SIZES[size]["formats_tokens"], device=device, skip=skip)


def run_long(device: str, size: str, *, save=None, skip=()) -> dict:
    """The long-context point: the dynamic cache (prefill, then decode steps that cat-grow every
    layer: the allocator's rounding and fragmentation at scale) and the static one (one
    preallocation)."""
    spec = SIZES[size]["long"]
    tokens, prompt = spec["tokens"], spec["tokens"] - spec["decode"]
    entries: tuple[tuple, ...] = (
        (f"{tokens:,} tokens, dynamic", spec["model"], "hf-dynamic", spec["batch"], "bf16", {}),
        (f"{tokens:,} tokens, static", spec["model"], "hf-static", spec["batch"], "bf16", {"max_cache_len": tokens}))
    return {**_rows(entries, save=save, tokens=(tokens, prompt), device=device, skip=skip), "spec": spec}


def _build_decoder(spec: dict, dev):
    """kvmem.lab's Decoder at ``spec``'s shapes, random weights (seed 0), built on ``dev`` in its dtype."""
    import torch

    from ..lab import Decoder, DecoderConfig
    config = DecoderConfig(vocab_size=spec["vocab"], d_model=spec["heads"] * spec["head_dim"],
                           n_layers=spec["layers"], n_heads=spec["heads"], kv_heads=spec["heads"],
                           max_tokens=spec["tokens"])
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[spec["dtype"]]
    saved = torch.get_default_dtype()
    try:
        torch.set_default_dtype(dtype)  # the weights are drawn in their own dtype, on the device
        torch.manual_seed(0)
        with dev:
            model = Decoder(config).eval()
    finally:
        torch.set_default_dtype(saved)
    return model


def _timed(fn, dev) -> float:
    """Seconds of ``fn()``, the device synchronised before and after."""
    _sync(dev)
    start = time.perf_counter()
    fn()
    _sync(dev)
    return time.perf_counter() - start


def _allocated(dev) -> int:
    import torch
    return torch.cuda.memory_allocated(dev) if dev.type == "cuda" else 0


def run_seed(device: str, size: str) -> dict:
    """The seed's experiment: a b x t fp16 generation with the lab's cat-grown cache, its bytes
    against the formula, and the time per generated token with and without the cache."""
    import torch
    spec = SIZES[size]["seed"]
    dev = _device(device)
    t, b = spec["tokens"], spec["batch"]
    started = time.perf_counter()
    model = _build_decoder(spec, dev)
    params = sum(p.numel() for p in model.parameters())
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    build_seconds = time.perf_counter() - started
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(spec["vocab"], (b, t), generator=generator).to(dev)
    out = {"spec": spec, "device": str(dev), "parameters": params, "weight_bytes": weight_bytes,
           "build_seconds": round(build_seconds, 3)}
    saved_threads = torch.get_num_threads()
    if dev.type == "cpu":  # tensors this small gain nothing from threads, and lose much on a busy machine
        torch.set_num_threads(1)
    try:
        out.update(_generate(model, ids, spec, dev))
    finally:
        torch.set_num_threads(saved_threads)
    out["matches"] = out["matches"] and (size != "full" or out["tensor_bytes"] == SEED_BYTES)
    out["seed_bytes"] = SEED_BYTES if size == "full" else None
    return out


def _generate(model, ids, spec, dev) -> dict:
    """The cached generation (its bytes, the allocator's view, per-step times), then the uncached
    steps at a few context lengths."""
    import torch

    from ..lab import memory_check
    from ..lab.cache import tensor_bytes
    from .allocators import cuda_block_model
    t, b = spec["tokens"], spec["batch"]
    with torch.inference_mode():
        # one warm-up generation step outside the measurement (kernels, cuBLAS handles)
        warm = model.new_cache()
        model(ids[:, :spec["prompt"]], warm)
        model(ids[:, spec["prompt"]:spec["prompt"] + 1], warm)
        del warm
        _sync(dev)
        if dev.type == "cuda":
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(dev)
        base = _allocated(dev)
        base_reserved = torch.cuda.memory_reserved(dev) if dev.type == "cuda" else 0
        cache = model.new_cache()
        step_seconds = []
        token = None

        def prefill():
            nonlocal token
            token = model(ids[:, :spec["prompt"]], cache)[:, -1].argmax(-1, keepdim=True)

        prefill_seconds = _timed(prefill, dev)
        while len(cache) < t:  # greedy generation up to t tokens in the cache

            def step():
                nonlocal token
                token = model(token, cache)[:, -1].argmax(-1, keepdim=True)

            step_seconds.append(_timed(step, dev))
        _sync(dev)
        check = memory_check(model, cache, batch=b)
        held = [tensor for layer in cache for tensor in (layer.keys, layer.values)]
        blocks = cuda_block_model(tensor.untyped_storage().nbytes() for tensor in held)
        allocator = None
        if dev.type == "cuda":
            allocator = {"memory_allocated_delta": _allocated(dev) - base,
                         "max_memory_allocated_delta": torch.cuda.max_memory_allocated(dev) - base,
                         "memory_reserved_delta": torch.cuda.memory_reserved(dev) - base_reserved,
                         "max_memory_reserved": torch.cuda.max_memory_reserved(dev),
                         "memory_allocated": torch.cuda.memory_allocated(dev),
                         "memory_reserved": torch.cuda.memory_reserved(dev), **blocks}
        cache_bytes = tensor_bytes(held)
        cache = held = token = None  # type: ignore[assignment]  # the cache's memory back before the uncached steps (the names are dead after)
        # Without the cache each new token reruns the whole sequence; timed at a few context
        # lengths (median of repeats after warm-up), not over all t steps.
        uncached = []
        for length in spec["uncached_lengths"]:
            prefix = ids[:, :length]
            times = [_timed(lambda prefix=prefix: model(prefix)[:, -1].argmax(-1), dev)
                     for _ in range(spec["warmup"] + spec["repeats"])][spec["warmup"]:]
            cached = step_seconds[length - spec["prompt"] - 1] if length > spec["prompt"] else prefill_seconds
            uncached.append({"context": length, "ms_uncached": statistics.median(times) * 1e3,
                             "ms_cached": cached * 1e3, "speedup": statistics.median(times) / cached})
    # the uncached generation of all t tokens, estimated: its step time grows about linearly
    # with the context, so a least-squares line through the timed lengths, summed over 1..t
    xs = [row["context"] for row in uncached]
    ys = [row["ms_uncached"] for row in uncached]
    slope, intercept = _line(xs, ys)
    steps = range(spec["prompt"] + 1, t + 1)
    estimated_uncached_s = sum(max(intercept + slope * n, 0.0) for n in steps) / 1e3
    cached_total = prefill_seconds + sum(step_seconds)
    return dict(
        tokens=t, batch=b, dtype=spec["dtype"],
        formula_bytes=check.formula_bytes, estimate_bytes=check.estimate_bytes, tensor_bytes=cache_bytes,
        matches=check.matches, allocator=allocator, blocks=blocks,
        cached={"steps": len(step_seconds), "prefill_ms": prefill_seconds * 1e3,
                "ms_per_token_median": statistics.median(step_seconds) * 1e3,
                "ms_per_token_mean": sum(step_seconds) / len(step_seconds) * 1e3,
                "ms_first_step": step_seconds[0] * 1e3, "ms_last_step": step_seconds[-1] * 1e3,
                "total_s": cached_total, "tokens_per_s": b * len(step_seconds) / sum(step_seconds)},
        uncached={"timed_at": uncached, "line_ms": {"slope_per_token": slope, "intercept": intercept},
                  "estimated_total_s": estimated_uncached_s,
                  "estimated_speedup_whole_generation": estimated_uncached_s / cached_total,
                  "note": (f"uncached: timed at contexts {', '.join(map(str, xs))} (median of "
                           f"{spec['repeats']} after {spec['warmup']} warm-up), not over all {t - spec['prompt']} "
                           "steps; the whole generation's time is a least-squares line through them, summed")})


def _line(xs, ys) -> tuple[float, float]:
    """Least-squares (slope, intercept)."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    var = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var if var else 0.0
    return slope, my - slope * mx


# --- the report ---------------------------------------------------------------------------

def _read(path: pathlib.Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        return {"missing": f"{path.name}: {type(exc).__name__}: {exc}"}


def assemble(out: pathlib.Path, *, size: str, statuses: dict | None = None) -> dict:
    """cuda_report.json from the phases' files in ``out`` (a phase that failed is named with why)."""
    statuses = statuses or {}
    suite = _read(out / "validate.json")
    report = {"dry_run": size == "dry", "size": size, "machine": _read(out / "machine.json"),
              "phase_exit_codes": statuses,
              "suite": suite if isinstance(suite, list) else [], "suite_problem": None,
              "formats": _read(out / "formats.json"), "seed": _read(out / "seed.json"),
              "long": _read(out / "long.json")}
    if not isinstance(suite, list):
        report["suite_problem"] = suite.get("missing") if isinstance(suite, dict) else str(suite)
    rows = list(report["suite"]) + list(report["formats"].get("rows", [])) + list(report["long"].get("rows", []))
    ran = [r for r in rows if r.get("matches") is not None]
    report["summary"] = {"cases": len(rows), "ran": len(ran), "matched": sum(bool(r["matches"]) for r in ran),
                         "bytes_matched": sum(bool(r.get("bytes_match")) for r in ran),
                         "skipped_or_failed": len(rows) - len(ran),
                         "not_reached": sum(len(report[k].get("not_reached", [])) for k in ("formats", "long")),
                         "seed_matches": report["seed"].get("matches")}
    (out / "cuda_report.json").write_text(json.dumps(report, indent=2, default=str))
    (out / "cuda.md").write_text(markdown(report))
    return report


def _n(value) -> str:
    return "—" if value is None else f"{value:,}" if isinstance(value, int) else str(value)


def _mib(value) -> str:
    return "—" if value is None else f"{value / 2**20:,.2f} MiB"


def _case_table(rows) -> list[str]:
    lines = ["| case | model | engine | kv | tokens | batch | predicted | tensors | diff | peak pred. | "
             "peak (max_memory_allocated Δ) | memory_allocated Δ | rounded to 512 B | fresh blocks | "
             "memory_reserved Δ | peak reserved Δ | segments | inactive split | ok |",
             "|" + "---|" * 19]
    for r in rows:
        c = r.get("cuda") or {}
        head = (f"| {r.get('label') or r.get('about', '')} | {r['model']} | {r['engine']} | {r.get('kv_dtype', '')} "
                f"| {_n(r.get('tokens'))} | {_n(r.get('batch'))} ")
        why = r.get("skipped") or r.get("error")
        if why:
            lines.append(head + f"| {'skipped' if r.get('skipped') else 'error'}: {why} |" + " |" * 12)
            continue
        ok = "yes" if r["matches"] else ("bytes yes, peak NO" if r.get("bytes_match") else "NO")
        lines.append(head + f"| {_n(r['predicted_bytes'])} | {_n(r['tensor_bytes'])} | {_n(r['difference_bytes'])} "
                     f"| {_n(r['predicted_peak_bytes'])} | {_n(r['peak_bytes'])} | {_n(r['allocated_bytes'])} "
                     f"| {_n(c.get('rounded_bytes'))} | {_n(c.get('fresh_block_bytes'))} "
                     f"| {_n(r.get('reserved_bytes'))} | {_n(c.get('peak_reserved_bytes'))} | {_n(c.get('segments'))} "
                     f"| {_n(c.get('inactive_split_bytes'))} | {ok} |")
    return lines


def markdown(report: dict) -> str:
    """cuda.md: the machine, every case and every figure of ``report``."""
    m, s = report["machine"], report["summary"]
    title = ("# kvmem validate on CUDA — CPU DRY RUN (reduced sizes; not a GPU measurement)" if report["dry_run"]
             else "# Measured validation on CUDA")
    lines = [title, "",
             "Written by `bash tools/cuda_validate.sh` (kvmem/measurement/cuda_report.py). Every figure below is "
             "a reading of this run; nothing is typed in.", "",
             "## Machine", "",
             f"- device: {m.get('device')}; GPU: {m.get('gpu') or 'none'}"
             + (f" ({_mib(m.get('gpu_memory_bytes'))}, compute capability {m.get('compute_capability')})"
                if m.get("gpu") else ""),
             f"- driver: {m.get('driver') or '—'}; CUDA (torch build): {m.get('cuda') or '—'}",
             f"- torch {m.get('torch')}, transformers {m.get('transformers')}, hqq {m.get('hqq') or 'not installed'}, "
             f"optimum-quanto {m.get('optimum-quanto') or 'not installed'}; Python {m.get('python')}, "
             f"{m.get('cpus')} CPUs, {m.get('platform')}",
             f"- phases' exit codes: {', '.join(f'{k} {v}' for k, v in report['phase_exit_codes'].items()) or '—'}",
             "",
             f"**{s['matched']} of {s['ran']} cases match** (tensor bytes equal to the prediction and the peak within "
             f"its tolerance; {s['bytes_matched']} of {s['ran']} match to the byte on tensors); "
             f"{s['skipped_or_failed']} skipped or failed, {s['not_reached']} not reached in time; "
             "the seed's experiment "
             + ("matches." if s["seed_matches"] else "does not match." if s["seed_matches"] is False
                else "did not finish."), "",
             "Columns: *predicted* kvmem.estimate's K + V + state; *tensors* the unique storages the cache holds; "
             "*peak* the allocator's high-water mark above the start (`max_memory_allocated` − baseline); "
             "*memory_allocated Δ* what is allocated at the end above the start; *rounded to 512 B* the storages "
             "each rounded up to 512 B (the least the caching allocator counts); *fresh blocks* the blocks they "
             "would get from fresh segments (a large block keeps up to 1 MiB it does not split off); "
             "*memory_reserved Δ* / *peak reserved Δ* whole segments; *inactive split* free pieces of segments "
             "still in use (fragmentation). Raw per-case counters are in cuda_report.json.", ""]
    lines += ["## The suite (`kvmem validate --device … --json`)", ""]
    if report.get("suite_problem"):
        lines += [f"The suite did not produce its JSON: {report['suite_problem']}", ""]
    lines += _case_table(report["suite"]) + [""]
    for key, heading in (("formats", "KV formats"), ("long", "Long context")):
        lines += [f"## {heading}", ""] + _phase_lines(report[key])
    lines += _seed_lines(report["seed"])
    return "\n".join(lines) + "\n"


def _phase_lines(phase: dict) -> list[str]:
    if "missing" in phase:
        return [f"Did not run: {phase['missing']}", ""]
    lines = _case_table(phase["rows"]) + [""]
    if phase.get("not_reached"):
        lines += [f"Stopped at its time limit before: {'; '.join(phase['not_reached'])}.", ""]
    return lines


def _seed_lines(seed: dict) -> list[str]:
    lines = ["## The seed's experiment", ""]
    if "missing" in seed:
        return lines + [f"Did not run: {seed['missing']}", ""]
    sp, c, u = seed["spec"], seed["cached"], seed["uncached"]
    lines += [f"kvmem.lab's decoder at {sp['layers']} layers × {sp['heads']} heads × d_head {sp['head_dim']} "
              f"(vocab {sp['vocab']:,}; {seed['parameters']:,} parameters, {_mib(seed['weight_bytes'])} of "
              f"{sp['dtype']} weights, random, built in {seed['build_seconds']:.1f} s) on {seed['device']}: greedy "
              f"generation of b = {seed['batch']} sequences up to t = {seed['tokens']} tokens with the seed's "
              "cat-grown cache.", "",
              "| figure | bytes |", "|---|---|",
              f"| the cache's tensors (unique storages) | {seed['tensor_bytes']:,} |",
              f"| the seed's formula 2 × p × b × layers × heads × d_head × t | {seed['formula_bytes']:,} |",
              f"| kvmem.estimate (ideal) | {seed['estimate_bytes']:,} |"]
    if seed.get("seed_bytes"):
        lines.append(f"| the seed's figure | {seed['seed_bytes']:,} |")
    b = seed["blocks"]
    lines += [f"| storages rounded to 512 B ({b['storage_sizes']} storages) | {b['rounded_bytes']:,} |",
              f"| their blocks from fresh segments (allocator rule) | {b['fresh_block_bytes']:,} |"]
    a = seed.get("allocator")
    if a:
        lines += [f"| memory_allocated Δ over the generation (cache + last token) | {a['memory_allocated_delta']:,} |",
                  f"| max_memory_allocated Δ (peak: cache, cat, activations) | {a['max_memory_allocated_delta']:,} |",
                  f"| memory_reserved Δ | {a['memory_reserved_delta']:,} |"]
    lines += ["", f"Matches: {'yes' if seed['matches'] else 'NO'}.", "",
              "| time per generated token (the batch of " f"{seed['batch']}) | ms |", "|---|---|",
              f"| with the cache, median over {c['steps']} decode steps | {c['ms_per_token_median']:.3f} |",
              f"| with the cache, mean | {c['ms_per_token_mean']:.3f} |",
              f"| with the cache, first / last step | {c['ms_first_step']:.3f} / {c['ms_last_step']:.3f} |",
              f"| prefill of {sp['prompt']} token(s) | {c['prefill_ms']:.3f} |", "",
              "| context | ms uncached | ms cached | speedup |", "|---|---|---|---|"]
    lines += [f"| {r['context']} | {r['ms_uncached']:.3f} | {r['ms_cached']:.3f} | {r['speedup']:.1f}× |"
              for r in u["timed_at"]]
    lines += ["", f"Whole generation: {c['total_s']:.2f} s with the cache ({c['tokens_per_s']:,.0f} tokens/s); "
              f"about {u['estimated_total_s']:.2f} s without it (estimated, "
              f"{u['estimated_speedup_whole_generation']:.1f}×). {u['note']}.", ""]
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kvmem.measurement.cuda_report", description=__doc__.split("\n")[0])
    parser.add_argument("phase", choices=("machine", *PHASES[1:], "report"))
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--out", required=True, type=pathlib.Path)
    parser.add_argument("--dry", action="store_true", help="reduced sizes (the CPU dry run)")
    parser.add_argument("--status", action="append", default=[], metavar="PHASE=CODE",
                        help="a phase's exit code, for the report (repeatable)")
    args = parser.parse_args(argv)
    size = "dry" if args.dry else "full"
    args.out.mkdir(parents=True, exist_ok=True)
    if args.phase == "report":
        statuses = dict(item.split("=", 1) for item in args.status)
        report = assemble(args.out, size=size, statuses=statuses)
        s = report["summary"]
        print(f"{s['matched']} of {s['ran']} cases match, {s['skipped_or_failed']} skipped or failed; "
              f"seed matches: {s['seed_matches']}")
        return 0
    path = args.out / f"{args.phase}.json"
    started = time.perf_counter()

    def save(partial: dict) -> None:
        partial = {**partial, "seconds": round(time.perf_counter() - started, 3), "finished": False}
        path.write_text(json.dumps(partial, indent=2, default=str))

    if args.phase == "machine":
        result = machine(args.device)
    elif args.phase == "seed":
        result = run_seed(args.device, size)
    else:
        skip = tuple(os.environ.get("KVMEM_CUDA_SKIP_BACKENDS", "").replace(",", " ").split())
        run = run_formats if args.phase == "formats" else run_long
        result = run(args.device, size, save=save, skip=skip)
    result.update(seconds=round(time.perf_counter() - started, 3), finished=True)
    path.write_text(json.dumps(result, indent=2, default=str))
    print(f"{args.phase}: {result['seconds']:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

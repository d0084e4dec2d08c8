"""The validation suite (``kvmem validate``): kvmem.measure over presets that cover every layer kind.

Each entry names a model, an engine, a batch, options, what it checks, and (tokens,
prompt_tokens) for the full run and for --quick; ``validate`` measures each one (or says why it
was skipped) and returns plain rows for the CLI, the app and docs/validation.
"""

from __future__ import annotations

import pathlib

from . import admission, catalog
from .measurement import backend_problem, measure, resolve_device

__all__ = ["SUITE", "suite", "skipped", "validate", "ALLOCATOR_NOTE", "CUDA_REPORT"]

# The committed GPU run (in a source checkout): tools/cuda_validate.sh's cuda.md, which the app's
# Validate page shows beside its live measurements; absent until a session with a GPU records one.
CUDA_REPORT = pathlib.Path(__file__).resolve().parents[1] / "docs" / "validation" / "cuda.md"


# Each entry: model, engine, batch, options, what it checks, and (tokens, prompt_tokens) for the
# full run and for --quick. Token counts are small so that the whole suite runs in well under
# two minutes on two CPU cores with every layer at its real shape; prompt < tokens adds decode
# steps after the prefill (cat growth, residual flushes, sliding-window rolls).
SUITE: tuple[dict, ...] = (
    dict(model="gpt2", engine="toy", batch=2, full=(64, 56), quick=(10, 8), about="MHA, the seed's cat-grown cache"),
    dict(model="llama-2-7b", engine="hf-dynamic", batch=2, full=(40, 32), quick=(10, 8),
         about="MHA, DynamicLayer cat growth"),
    dict(model="llama-3.1-8b", engine="hf-dynamic", batch=2, full=(64, 56), quick=(10, 8), about="GQA (8 KV heads)"),
    dict(model="falcon-7b", engine="hf-dynamic", batch=2, full=(64, 56), quick=(10, 8), about="MQA (1 KV head)"),
    dict(model="deepseek-v2-lite", engine="hf-dynamic", batch=2, full=(64, 56), quick=(10, 8),
         about="MLA: latent in the K slot, rope key in the V slot"),
    dict(model="mistral-7b-v0.1", engine="hf-dynamic", batch=1, full=(48, 40), quick=(10, 8),
         about="sliding-window class below its 4096 window"),
    dict(model="gemma-3-1b", engine="hf-dynamic", batch=1, full=(524, 520), quick=(515, 513),
         about="sliding window 512: the view pins the prefill, then window tokens"),
    dict(model="gemma-3-1b", engine="hf-static", batch=1, options={"max_cache_len": 520}, full=(518, 510),
         quick=(514, 511), about="static sliding layers roll once full"),
    dict(model="llama-4-scout-17b-16e", engine="hf-dynamic", batch=1, full=(40, 32), quick=(10, 8),
         about="chunked attention (3 of 4 layers)"),
    dict(model="qwen3-next-80b-a3b", engine="hf-dynamic", batch=1, full=(32, 24), quick=(10, 8),
         about="gated DeltaNet + attention hybrid: fixed states"),
    dict(model="qwen3.5-27b", engine="hf-dynamic", batch=1, full=(6, 3), quick=(4, 3),
         about="linear hybrid, prefill shorter than the conv kernel"),
    dict(model="nemotron-h-8b", engine="hf-dynamic", batch=1, full=(32, 24), quick=(10, 8),
         about="Mamba2 + attention + MLP-only blocks"),
    dict(model="gemma-3n-e2b", engine="hf-dynamic", batch=1, full=(64, 56), quick=(10, 8),
         about="KV shared by the last 10 layers"),
    dict(model="llama-3.1-8b", engine="hf-static", batch=2, options={"max_cache_len": 96}, full=(64, 56),
         quick=(10, 8), about="StaticCache preallocation"),
    dict(model="gpt2", engine="hf-quantized", batch=1,
         options={"backend": "hqq", "nbits": 4, "q_group_size": 64, "residual_length": 4},
         full=(22, 16), quick=(11, 8), about="hqq int4: prefill, residual, re-quantisation"),
    dict(model="qwen2.5-0.5b", engine="hf-quantized", batch=2,
         options={"backend": "quanto", "nbits": 2, "q_group_size": 64, "residual_length": 4},
         full=(29, 24), quick=(13, 8), about="quanto int2: prefill, residual, re-quantisation"),
    dict(model="llama-3.2-1b", engine="hf-quantized", batch=2, options={"backend": "fp8"}, full=(40, 36),
         quick=(10, 8), about="fp8 per-tensor, appended"),
)


def suite(*, models=None, quick: bool = False) -> list[dict]:
    """The validation entries (model, engine, tokens, batch, options, about), filtered by model."""
    wanted = {catalog.preset(m)["name"] for m in models} if models else None
    entries = []
    for row in SUITE:
        if wanted is not None and row["model"] not in wanted:
            continue
        tokens, prompt = row["quick" if quick else "full"]
        options = {**row.get("options", {}), "prompt_tokens": prompt}
        entries.append({"model": row["model"], "engine": row["engine"], "tokens": tokens, "batch": row["batch"],
                        "options": options, "about": row["about"]})
    if models and not entries:
        raise ValueError(f"no validation entry for {', '.join(models)}; suite models: "
                         + ", ".join(sorted({row['model'] for row in SUITE})))
    return entries


def skipped(entry: dict, device: str, reason: str) -> dict:
    """A result row for an entry that could not run here (JSON-shaped like Measurement.to_dict)."""
    return {"model": entry["model"], "engine": entry["engine"], "tokens": entry["tokens"],
            "batch": entry["batch"], "kv_dtype": "bf16", "device": device, "options": entry["options"],
            "predicted_bytes": None, "tensor_bytes": None, "allocated_bytes": None, "peak_bytes": None,
            "predicted_peak_bytes": None, "reserved_bytes": None, "matches": None, "skipped": reason}


def validate(*, device="auto", models=None, quick: bool = False, progress=None) -> list[dict]:
    """Run the suite; one dict per entry (Measurement.to_dict(), or a skip with its reason).

    ``progress(index, total, entry)`` is called before each entry.
    """
    with admission.serialised():
        return _validate(device=device, models=models, quick=quick, progress=progress)


def _validate(*, device, models, quick: bool, progress) -> list[dict]:
    entries = suite(models=models, quick=quick)
    dev = str(resolve_device(device))
    rows = []
    for index, entry in enumerate(entries):
        if progress:
            progress(index, len(entries), entry)
        backend = entry["options"].get("backend")
        problem = backend_problem(backend) if backend in ("quanto", "hqq") else None
        if problem:
            rows.append(skipped(entry, dev, problem))
            continue
        result = measure(entry["model"], engine=entry["engine"], tokens=entry["tokens"], batch=entry["batch"],
                         kv_dtype="bf16", device=dev, **entry["options"])
        rows.append({**result.to_dict(), "about": entry["about"]})
    if progress:
        progress(len(entries), len(entries), None)
    return rows


ALLOCATOR_NOTE = (
    "CPU: allocated/peak are the profiler's memory events (bytes requested; the CPU allocator adds "
    "no rounding). CUDA: the caching allocator rounds each request up to 512 B, carves requests up "
    "to 1 MiB from 2 MiB segments and larger ones below 10 MiB from 20 MiB segments (bigger ones "
    "rounded to 2 MiB); memory_allocated counts the rounded blocks, memory_reserved whole segments.")

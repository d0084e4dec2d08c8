"""Sweeps over context, batch, models and formats -> rows and pandas DataFrames (tables, charts).

Every number comes from kvmem.estimate; this module only arranges them in rows. pandas is
imported when a DataFrame is first built, so a page that only plots rows (the calculator)
does not pay for importing it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .records import Record
from .strategies import estimate
from .units import format_bytes

__all__ = ["context_points", "context_rows", "as_columns", "context_sweep", "estimate_summary", "EstimateSummary",
           "per_layer_frame",
           "compare_frame", "fit_grid", "breakdown_frame", "eviction_curves", "rows_frame", "sweep_frame",
           "sweep_matrix", "sweep_status", "SWEEP_STATUS", "write_sweep", "SWEEP_SHOWS", "SWEEP_FORMATS",
           "fit_grid_inversions"]

if TYPE_CHECKING:                 # pandas only where a DataFrame is built
    import pandas as pd

GIB = 2**30


def _frame(data):
    """A pandas DataFrame of ``data`` (pandas imported on first use)."""
    import pandas as pd

    return pd.DataFrame(data)


def as_columns(rows: list[dict]) -> dict[str, list]:
    """Rows (dicts with the same keys) as columns: {key: [values...]}, for plotting without pandas."""
    return {key: [row[key] for row in rows] for key in rows[0]} if rows else {}


def context_points(max_tokens: int, *, start: int = 256, at_least: int = 0) -> list[int]:
    """Powers of two from ``start`` up to max(``max_tokens``, ``at_least``), and that end itself."""
    max_tokens = max(max_tokens, at_least)
    points = []
    tokens = start
    while tokens < max_tokens:
        points.append(tokens)
        tokens *= 2
    points.append(max_tokens)
    return points


def context_rows(model, *, contexts, batch: int = 1, kv_dtype="auto", engine: str = "ideal",
                 tp: int = 1, pp: int = 1, weights_bytes: int = 0, **options) -> list[dict]:
    """One row per context length: KV, K, V and state bytes on one device (+ weights), and GiB."""
    rows = []
    for tokens in contexts:
        result = estimate(model, engine=engine, tokens=tokens, batch=batch, kv_dtype=kv_dtype, tp=tp, pp=pp,
                          **options)
        rows.append({"tokens": tokens, "batch": batch, "kv_bytes": result.kv_bytes, "k_bytes": result.k_bytes,
                     "v_bytes": result.v_bytes, "state_bytes": result.state_bytes,
                     "total_bytes": result.total_bytes, "weights_bytes": weights_bytes,
                     "device_bytes": weights_bytes + result.total_bytes,
                     "kv_gib": result.kv_bytes / GIB, "total_gib": result.total_bytes / GIB})
    return rows


def context_sweep(model, **kwargs) -> "pd.DataFrame":
    """context_rows as a DataFrame."""
    return _frame(context_rows(model, **kwargs))


def per_layer_frame(model, result) -> "pd.DataFrame":
    """One row per layer: index, attention kind, bytes on the reported device."""
    return _frame({"layer": range(model.num_layers), "kind": [layer.kind for layer in model.layers],
                         "bytes": list(result.per_layer)})


def compare_frame(rows) -> "pd.DataFrame":
    """Side-by-side estimates: rows of (label, Estimate) -> bytes per token, totals, GiB."""
    data = []
    for label, result in rows:
        data.append({"label": label, "model": result.model, "engine": result.engine, "kv_dtype": result.kv_dtype,
                     "tokens": result.tokens, "batch": result.batch, "kv_bytes": result.kv_bytes,
                     "state_bytes": result.state_bytes, "total_bytes": result.total_bytes,
                     "bytes_per_token": result.kv_bytes / (result.tokens * result.batch),
                     "total_gib": result.total_bytes / GIB})
    return _frame(data)


def eviction_contexts(tokens: int, budget: int) -> list[int]:
    """Context points reaching four budgets past the start, so an eviction curve shows its plateau."""
    return context_points(tokens, at_least=4 * budget)


def model_contexts(model, tokens: int) -> list[int]:
    """Context points for a model's chart: up to its max context (or ``tokens``, if longer)."""
    return context_points(tokens, at_least=model.max_position_embeddings or 0)


@dataclass(frozen=True)
class EstimateSummary(Record):
    """estimate_summary's headline numbers (``summary.total_gib``): bytes, and the same as text in GiB
    and GB; ``to_dict()`` gives them under the same names."""

    weights_bytes: int
    device_bytes: int
    gpu_share: float | None
    total_bytes: int
    total_gib: str
    total_gb: str
    kv_bytes: int
    state_bytes: int
    per_token_bytes: float
    per_sequence_bytes: int
    per_sequence_gib: str
    per_sequence_gb: str

    @property
    def per_token_text(self) -> str:
        """K + V bytes per cached token as read: exact where every token costs the same ("131,072 B"), else
        the mean, said so ("≈ 536,870.9 B, the mean": sliding or compressed layers hold fewer tokens)."""
        if float(self.per_token_bytes).is_integer():
            return f"{int(self.per_token_bytes):,} B"
        return f"≈ {self.per_token_bytes:,.1f} B, the mean"


def estimate_summary(result, *, weights_bytes: int = 0, gpu_memory_bytes: int | None = None) -> EstimateSummary:
    """Headline numbers of an Estimate: totals, per token and per sequence, in B, GiB and GB; with
    the weights on the same device, their sum and its share of the GPU's memory."""
    per_sequence = result.total_bytes // result.batch
    per_token = result.kv_bytes / (result.tokens * result.batch)
    device_bytes = weights_bytes + result.total_bytes
    return EstimateSummary(
        weights_bytes=weights_bytes, device_bytes=device_bytes,
        gpu_share=device_bytes / gpu_memory_bytes if gpu_memory_bytes else None,
        total_bytes=result.total_bytes, total_gib=format_bytes(result.total_bytes),
        total_gb=format_bytes(result.total_bytes, binary=False), kv_bytes=result.kv_bytes,
        state_bytes=result.state_bytes, per_token_bytes=per_token, per_sequence_bytes=per_sequence,
        per_sequence_gib=format_bytes(per_sequence), per_sequence_gb=format_bytes(per_sequence, binary=False))


def _fit_or_refusal(model, **kwargs):
    """kvmem.fit, with a workload that does not fit at all returned as its (not fitting) Fit."""
    from .sizing import fit

    return fit(model, **kwargs)


def fit_grid(model, *, gpus, contexts, num_gpus: int = 1, batch: int | None = None, **kwargs) -> "pd.DataFrame":
    """One row per (GPU, context): fits, max batch, max context, fewest GPUs, decode bound."""
    rows = []
    for gpu in gpus:
        for context in contexts:
            result = _fit_or_refusal(model, gpu=gpu, num_gpus=num_gpus, context=context, batch=batch, **kwargs)
            rows.append({"gpu": result.gpu, "context": context, "fits": result.fits, "max_batch": result.max_batch,
                         "max_context": result.max_context, "min_gpus": result.min_gpus,
                         "decode_tokens_per_s": result.decode_tokens_per_s,
                         "decode_tokens_per_s_aggregate": result.decode_tokens_per_s_aggregate,
                         "kv_memory_gib": result.kv_memory_bytes / GIB})
    return _frame(rows)


def fit_grid_inversions(grid) -> list[tuple[int, str, str, int, int]]:
    """Where a GPU with as much usable memory as another (within 1%) or more holds fewer sequences in a
    fit_grid: (context, that GPU, the other, its max batch, the other's), the largest gap first. Under
    an engine's own defaults this happens (vLLM batches 8,192 tokens on an H100 80 GB but 2,048 on an
    A100 80 GB: get_batch_defaults, kvmem.sizing.engine_defaults); the page says why."""
    from .gpus import get_gpu

    rows = grid.to_dict("records") if hasattr(grid, "to_dict") else list(grid)
    memory = {row["gpu"]: get_gpu(row["gpu"]).usable_memory_bytes for row in rows}
    out = []
    for a in rows:
        for b in rows:
            near = 100 * memory[a["gpu"]] >= 99 * memory[b["gpu"]]
            if a["context"] == b["context"] and a["gpu"] != b["gpu"] and near and a["max_batch"] < b["max_batch"]:
                out.append((a["context"], a["gpu"], b["gpu"], a["max_batch"], b["max_batch"]))
    return sorted(out, key=lambda x: (x[3] - x[4], x[0]))


def breakdown_frame(result) -> "pd.DataFrame":
    """A Fit's per-device memory breakdown as rows of (part, bytes, GiB)."""
    from .sizing.results import shown_parts
    parts = [(name, value) for name, value in shown_parts(result.breakdown, result.fits).items() if name != "total"]
    return _frame({"part": [p for p, _ in parts], "bytes": [v for _, v in parts],
                         "gib": [v / GIB for _, v in parts]})


def eviction_curves(model, *, contexts, evictions: dict, batch: int = 1, engine: str = "ideal", kv_dtype="auto",
                    **options) -> dict:
    """{label: context_sweep frame} for the cache with each eviction policy (None = keep everything)."""
    frames = {}
    for label, eviction in evictions.items():
        rows = []
        for tokens in contexts:
            result = estimate(model, engine=engine, tokens=tokens, batch=batch, kv_dtype=kv_dtype, eviction=eviction,
                              **options)
            rows.append({"tokens": tokens, "kv_bytes": result.kv_bytes, "total_bytes": result.total_bytes})
        frames[label] = _frame(rows)
    return frames


def saving_text(fraction) -> str:
    """A saving as people say it: "50.0%" when smaller, "71× larger" when the variant is bigger
    (a saving of -7011% is 71x the baseline); "—" when missing."""
    if fraction is None or fraction != fraction:
        return "—"
    if fraction >= 0:
        return f"{fraction:.1%}"
    ratio = 1 - fraction
    return (f"{ratio:,.0f}" if ratio >= 10 else f"{ratio:.2g}") + "× larger"


def rows_frame(rows, *, drop=("model", "settings", "quality")) -> "pd.DataFrame":
    """A list of result rows (compare_strategies, architecture_variants, ...; dicts or records) as a
    table, GiB added."""
    frame = _frame([{k: v for k, v in (row.to_dict() if isinstance(row, Record) else row).items() if k not in drop}
                    for row in rows])
    if "bytes" in frame:
        frame["gib"] = frame["bytes"].map(lambda b: None if b is None or b != b else b / GIB)
    return frame


# ----------------------------------------------------------------------------- the overview (kvmem.sweep)

SWEEP_SHOWS = {"max_batch": "max batch", "fits": "fits", "max_context": "max context",
               "max_concurrency": "max concurrency"}
SWEEP_FORMATS = ("csv", "json", "parquet")


def sweep_frame(cells) -> "pd.DataFrame":
    """kvmem.sweep's cells, one row each, with pandas' nullable types: a refused cell's numbers are
    missing (empty in CSV, null in JSON), never 0, and whole numbers stay whole."""
    return _frame([cell.to_dict() for cell in cells]).convert_dtypes()


def _matrix_text(cell, show: str, reasons: str = "cell") -> str:
    if cell.refused:
        return f"refused: {cell.refused}" if reasons == "cell" else "refused"
    value = getattr(cell, show)
    if show == "fits":
        return "yes" if value else "no"
    if show == "max_concurrency":
        return "—" if value is None else f"{value:,.2f}x"
    return f"{value:,}"


SWEEP_STATUS = ("fits", "does not fit", "refused")     # what a matrix cell is, for its colour


def _status(cell) -> str:
    return "refused" if cell.refused else "fits" if cell.fits else "does not fit"


def sweep_matrix(cells, *, show: str = "max_batch", reasons: str = "cell") -> "pd.DataFrame":
    """Models (rows) x GPUs (columns) of one engine and one context: each cell's ``show`` value as
    text, or a refusal where kvmem or the engine refuses the workload (never a number). ``reasons``:
    "cell" writes "refused: <reason>" in each refused cell; "row" writes "refused" there and each
    row's reasons once, in a last column "why refused" (a model refused on every GPU for one reason
    says it once, not once per GPU)."""
    if show not in SWEEP_SHOWS:
        raise ValueError(f"show must be one of {', '.join(SWEEP_SHOWS)}, got {show!r}")
    if reasons not in ("cell", "row"):
        raise ValueError(f"reasons must be 'cell' or 'row', got {reasons!r}")
    models, gpus, by_cell = _matrix_cells(cells)
    columns = {"model": models, **{gpu: [_matrix_text(by_cell[m, gpu], show, reasons) if (m, gpu) in by_cell else ""
                                         for m in models] for gpu in gpus}}
    if reasons == "row":
        columns["why refused"] = ["; ".join(dict.fromkeys(by_cell[m, g].refused for g in gpus
                                                          if (m, g) in by_cell and by_cell[m, g].refused))
                                  for m in models]
    return _frame(columns)


def sweep_status(cells) -> "pd.DataFrame":
    """sweep_matrix's shape (model, then one column per GPU) with each cell's SWEEP_STATUS: what the
    Overview colours it by."""
    models, gpus, by_cell = _matrix_cells(cells)
    return _frame({"model": models, **{gpu: [_status(by_cell[m, gpu]) if (m, gpu) in by_cell else ""
                                             for m in models] for gpu in gpus}})


def _matrix_cells(cells):
    cells = list(cells)
    for name in ("engine", "context", "num_gpus"):
        values = {getattr(c, name) for c in cells}
        if len(values) > 1:
            raise ValueError(f"a matrix is one {name}; these cells have {len(values)}: choose one first")
    models = list(dict.fromkeys(c.model for c in cells))
    gpus = list(dict.fromkeys(c.gpu for c in cells))
    return models, gpus, {(c.model, c.gpu): c for c in cells}


def write_sweep(cells, target, fmt: str) -> None:
    """The sweep's rows (sweep_frame) as CSV, JSON (one array of objects) or Parquet into ``target``
    (a path or a writable file object; Parquet needs a binary one and pyarrow)."""
    if fmt not in SWEEP_FORMATS:
        raise ValueError(f"format must be one of {', '.join(SWEEP_FORMATS)}, got {fmt!r}")
    frame = sweep_frame(cells)
    if fmt == "csv":
        frame.to_csv(target, index=False)
    elif fmt == "json":
        frame.to_json(target, orient="records", indent=2)
    else:
        frame.to_parquet(target, index=False)

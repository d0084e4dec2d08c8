"""estimate() and capacity(): llama.cpp's cells for a workload, and the n_ctx a budget holds.

Capacity: the most cells (whole pads per stream) whose caches and recurrent state fit ``kv_memory`` on the
fullest device; blocks = tokens = total cells, block_size 1.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ...model import Model
from ...records import Record
from ..results import Capacity, Estimate
from .log_lines import log_lines
from .plan import run_plan
from .settings import CURRENT, PR_14363, count_option, resolve_settings


@dataclass(frozen=True)
class LlamacppDetails(Record):
    """Estimate.details: the context llama.cpp builds, its settings, caches and devices, and the
    lines it logs for them (keys as the fields)."""

    build: str
    n_ctx: int
    n_ctx_requested: int | None
    n_ctx_seq: int
    cells: int                  # cells per stream (n_ctx_seq)
    cells_total: int            # n_ctx
    swa_cells: int | None
    n_swa: int | None
    n_seq: int
    n_stream: int
    kv_unified: bool
    n_batch: int
    n_ubatch: int
    n_pad: int
    flash_attn: object
    swa_full: bool
    type_k: str
    type_v: str
    mla: object
    n_rs_seq: int | None
    caches: list
    devices: list
    log: tuple | list = ()     # filled in from the estimate itself (logs.log_lines)


@dataclass(frozen=True)
class LlamacppCapacityDetails(Record):
    """Capacity.details: the largest n_ctx that fits, in whole pads per stream."""

    n_ctx: int
    n_ctx_seq: int
    n_seq: int
    kv_unified: bool
    pad: int
    swa_cells: int | None
    caches: list


# ---- public ---------------------------------------------------------------------------------

def estimate(model: Model, *, tokens: int, batch: int, kv_dtype, tp: int, pp: int, **options) -> Estimate:
    s, plan, devices = run_plan(model, tokens=tokens, batch=batch, kv_dtype=kv_dtype, tp=tp, pp=pp, options=options)
    if plan.caches and plan.caches[0]["cache"] == "kv":
        need, room = (tokens * batch, plan.n_ctx_seq) if plan.unified else (tokens, plan.n_ctx_seq)
        if need > room:
            where = "the shared cache" if plan.unified else "each sequence's stream"
            raise ValueError(f"n_ctx: {batch} sequence(s) of {tokens} tokens need {need} cells in {where}, "
                             f"which holds {room} (n_ctx={plan.n_ctx}, n_seq={s.n_seq})")
    largest = max(devices, key=lambda d: d["kv_bytes"] + d["state_bytes"])
    held = set(largest["layers"])
    rows = plan.rows
    per_layer = tuple(sum(rows[i]) if i in held else 0 for i in range(len(rows)))
    k = sum(rows[i][0] for i in held)
    v = sum(rows[i][1] for i in held)
    details = LlamacppDetails(
        build="current" if s.build == CURRENT else s.build.isoformat(),
        n_ctx=plan.n_ctx, n_ctx_requested=s.n_ctx_requested, n_ctx_seq=plan.n_ctx_seq,
        cells=plan.n_ctx_seq, cells_total=plan.n_ctx, swa_cells=plan.swa_cells, n_swa=plan.n_swa,
        n_seq=s.n_seq, n_stream=plan.n_stream, kv_unified=plan.unified, n_batch=s.n_batch,
        n_ubatch=s.n_ubatch, n_pad=s.n_pad, flash_attn=s.flash_attn, swa_full=s.swa_full,
        type_k=s.type_k, type_v=s.type_v, mla=plan.mla, n_rs_seq=s.n_rs_seq,
        caches=plan.caches, devices=devices)
    kv_dtype_name = s.type_k if s.type_k == s.type_v else f"{s.type_k}/{s.type_v}"
    result = Estimate(model=model.name, engine="llama.cpp", tokens=tokens, batch=batch, kv_dtype=kv_dtype_name,
                      tp=tp, pp=pp, k_bytes=k, v_bytes=v, state_bytes=sum(rows[i][2] for i in held),
                      per_layer=per_layer, kv_bytes_all_devices=sum(r[0] + r[1] for r in rows),
                      state_bytes_all_devices=sum(r[2] for r in rows),
                      peak_bytes=k + v, notes=tuple(plan.notes), details=details, k_dtype=s.type_k,
                      v_dtype=s.type_v)
    log = log_lines(result)  # the lines llama.cpp itself prints for these caches
    return replace(result, details=replace(details, log=log), log_lines=tuple(log))


def startup_cells(est: Estimate) -> tuple[int, int]:
    """What llama.cpp prints at start-up for a workload (SizingRules.startup): the cells -c makes,
    all streams ("llama_kv_cache: size = ... (C cells, ...)", n_ctx), and the sequences they serve (-np)."""
    return est.details.cells_total, est.details.n_seq


def capacity(model: Model, *, kv_memory: int, kv_dtype, tp: int, pp: int, max_model_len: int | None,
             **options) -> Capacity:
    """The largest n_ctx (whole pads per stream) whose caches and state fit ``kv_memory`` on one device."""
    if options["n_ctx"] is not None:
        raise ValueError("capacity finds n_ctx itself; leave n_ctx unset")
    n_seq = count_option("n_seq", options["n_seq"] if options["n_seq"] is not None else 1)
    probe = resolve_settings(model, tokens=1, batch=1, kv_dtype=kv_dtype, tp=tp, options={**options, "n_seq": n_seq})
    unified = probe.kv_unified or probe.build < PR_14363
    step = probe.n_pad * (1 if unified else n_seq)

    def fits(units: int):
        s, plan, devices = run_plan(model, tokens=1, batch=1, kv_dtype=kv_dtype, tp=tp, pp=pp,
                                options={**options, "n_seq": n_seq, "n_ctx": units * step})
        return max(d["kv_bytes"] + d["state_bytes"] for d in devices) <= kv_memory, plan

    ok, plan = fits(1)
    if not ok:
        return Capacity(model=model.name, engine="llama.cpp", kv_memory=kv_memory, blocks=0, tokens=0,
                        max_concurrency=0.0 if max_model_len else None, longest_request_tokens=0, block_size=1,
                        notes=(f"not even {step} cells fit in {kv_memory} bytes",),
                        details=LlamacppCapacityDetails(n_ctx=0, n_ctx_seq=0, n_seq=n_seq, kv_unified=unified,
                                                        pad=step, swa_cells=None, caches=[]),
                        k_dtype=probe.type_k, v_dtype=probe.type_v)
    low, high = 1, 2
    while fits(high)[0]:
        low, high = high, high * 2
        if high > 1 << 40:
            raise ValueError(f"{model.name} holds no per-token cache under llama.cpp: any n_ctx fits")
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if fits(mid)[0] else (low, mid)
    plan = fits(low)[1]
    cells, per_seq = plan.n_ctx, plan.n_ctx_seq
    concurrency = None
    if max_model_len:
        if plan.unified:
            concurrency = min(float(n_seq), cells / max_model_len)
        else:
            concurrency = float(n_seq) if max_model_len <= per_seq else 0.0
    return Capacity(model=model.name, engine="llama.cpp", kv_memory=kv_memory, blocks=cells, tokens=cells,
                    max_concurrency=concurrency, longest_request_tokens=per_seq, block_size=1,
                    notes=tuple(plan.notes), k_dtype=probe.type_k, v_dtype=probe.type_v,
                    details=LlamacppCapacityDetails(n_ctx=cells, n_ctx_seq=per_seq, n_seq=n_seq,
                                                    kv_unified=plan.unified, pad=step, swa_cells=plan.swa_cells,
                                                    caches=plan.caches))

"""Which engine? One workload under every engine mode that sizes hardware, side by side (kvmem
compare, ``kvmem fit --engine all``, the Fit page): each row one kvmem.fit and one kvmem.plan, so a
row says what fit and plan say for that engine, nothing else."""

from __future__ import annotations

from dataclasses import dataclass

from .records import Record

__all__ = ["EngineRow", "engine_rows"]


@dataclass(frozen=True)
class EngineRow(Record):
    """One engine mode's answer for a workload ("which engine?", engine_rows): kvmem.fit's verdict, max
    batch and max context, the concurrency the engine prints, and kvmem.plan's command (or why none)."""

    engine: str
    fits: bool | None              # None: the engine refuses the set-up (why in ``refused``)
    max_batch: int | None
    max_context: int | None
    max_concurrency: float | None  # the engine's own figure for the command's (else the fit's) workload
    command: str | None
    refused: str | None            # why the engine refuses the set-up, or why the workload does not fit
    no_command: str | None = None  # why there is no command where it fits (no server, a setting with no flag)
    options: tuple[str, ...] = ()  # the options given that this engine ran with


def engine_rows(model, *, engines=None, batch: int | None = None, **kwargs) -> list[EngineRow]:
    """One workload under every engine mode that sizes hardware (or ``engines``), side by side: one
    kvmem.fit and one kvmem.plan each (target "workload" for a batch given, else "max_batch", the batch
    the fit answers). Options go to the engines that declare them; gpu_memory_utilization to those
    that take it; the rest run with their defaults."""
    from .engines import ENGINES
    from .launch import launchers, plan
    from .sizing import fit

    names = list(engines) if engines else [name for name, spec in ENGINES.items() if spec.sizing is not None]
    utilization = kwargs.pop("gpu_memory_utilization", None)
    options = {k: kwargs.pop(k) for k in list(kwargs) if k not in _FIT_ARGUMENTS}
    rows = []
    for name in names:
        spec = ENGINES[name]
        own = {k: v for k, v in options.items() if k in spec.options or (spec.sizing and k in spec.sizing.options)}
        args = dict(kwargs, engine=name, batch=batch, **own)
        if utilization is not None and spec.sizing is not None and spec.sizing.takes_utilization:
            args["gpu_memory_utilization"] = utilization
        try:
            result = fit(model, **args)
            refused = result.why_not
        except ValueError as exc:
            rows.append(EngineRow(engine=name, fits=None, max_batch=None, max_context=None, max_concurrency=None,
                                  command=None, refused=str(exc), options=tuple(own)))
            continue
        command, numbers, no_command = None, result.engine_numbers, None
        if spec.launch is None:
            no_command = f"no server command (kvmem plan writes one for {', '.join(launchers())})"
        elif result.fits:
            try:
                planned = plan(model, target="workload" if batch else "max_batch", **args)
                command, numbers = planned.command, planned.fit.engine_numbers
            except ValueError as exc:
                no_command = str(exc).removeprefix("no command: ")
        rows.append(EngineRow(engine=name, fits=result.fits, max_batch=result.max_batch,
                              max_context=result.max_context,
                              max_concurrency=numbers.max_concurrency if numbers else None, command=command,
                              refused=refused, no_command=no_command, options=tuple(own)))
    return rows


_FIT_ARGUMENTS = frozenset({"gpu", "num_gpus", "tp", "pp", "context", "weight_dtype", "kv_dtype"})

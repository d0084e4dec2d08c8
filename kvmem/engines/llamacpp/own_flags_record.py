"""own_flags' record (OwnFlags: what kvmem fit --llama-args, kvmem plan --llama-args --json and the Fit page read)
and its text: the lines kvmem fit prints, its dict, and the buffer lines llama.cpp would print at start-up.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["OwnFlags", "start_up_lines"]


@dataclass(frozen=True)
class OwnFlags:
    """The user's llama-server flags at one workload: ``kvmem fit --llama-args``, ``kvmem plan --llama-args
    --json`` and the Fit page read this one record (to_dict, lines).

    ``layout``: the flags laid out (layouts.Layout; --fit on's where the flags leave it to place: ``placed_by``);
    ``devices``: per device its weights, KV, compute, total and the memory it has (None on the host unless
    host_memory_bytes bounds it) and whether it holds them; ``fits``: every device holds its share;
    ``pool_sequences`` / ``slot_context``: what the flags' own -c and -np give (0 where they do not fit): the
    sequences of ``context`` tokens the KV pool holds at once and the longest context one sequence (slot) gets;
    ``max_batch`` / ``max_context``: the largest workloads these flags' placement holds with -c (and -np) raised to
    what they need, ``raised``'s n_ctx and n_seq for each (0 where they do not fit);
    ``plan``: kvmem's placement and --fit on's at the same workload (offload.OffloadPlan); ``log_lines``: what
    llama.cpp prints for these buffers at start-up."""

    engine: str
    gpus: tuple
    given: str                    # the flags as given, shell-quoted back
    settings: dict                # the flags as read (kvmem names)
    context: int
    batch: int
    n_ctx: int
    n_seq: int
    kv_unified: bool
    placed_by: str                # "your flags" or "--fit on" (the flags leave the placement to it)
    layout: Any = field(repr=False)
    devices: tuple
    host_bytes: int
    host_shortfall: str | None
    fits: bool
    max_batch: int
    max_context: int
    pool_sequences: int
    slot_context: int
    raised: dict                  # {"max_batch" | "max_context": {"n_ctx", "n_seq"}}: the -c and -np each needs
    command: str                  # the command kvmem sized: llama-server, the model, -c, -np and the flags
    plan: Any = field(repr=False)
    log_lines: tuple
    notes: tuple

    def to_dict(self) -> dict:
        p = self.plan
        return {"engine": self.engine, "gpus": list(self.gpus), "llama_args": self.given,
                "settings": {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.settings.items()},
                "context": self.context, "batch": self.batch, "n_ctx": self.n_ctx, "n_seq": self.n_seq,
                "kv_unified": self.kv_unified, "placed_by": self.placed_by, "fits": self.fits,
                "devices": [dict(d) for d in self.devices], "host_bytes": self.host_bytes,
                "host_shortfall": self.host_shortfall, "pool_sequences": self.pool_sequences,
                "slot_context": self.slot_context, "max_batch": self.max_batch, "max_context": self.max_context,
                "raised": {k: dict(v) for k, v in self.raised.items()},
                "command": self.command, "layout": self.layout.to_dict(),
                "instead": {"kvmem": _alternative(p.best, p.budgets, p.command_best),
                            "fit_on": _alternative(p.fit, p.budgets, p.command_fit)},
                "log_lines": list(self.log_lines), "notes": list(self.notes)}

    def lines(self) -> list[str]:
        """The record as kvmem fit prints it: the verdict first, per device, what it holds, the other placements."""
        from ...units import format_bytes
        from .server_slots import raised_words
        head = (f"your flags on {' + '.join(self.gpus)} · llama.cpp: "
                + ("fit" if self.fits else "do not fit") + f" — {self.batch} x {self.context:,} tokens "
                f"(-c {self.n_ctx:,}, {self.n_seq} slot{'s' * (self.n_seq != 1)}"
                f"{', one unified KV pool' if self.kv_unified else ''})")
        out = [head, f"  flags: {self.given or '(none)'}" + (" (placed by --fit on: they leave -ngl, -ts and -ot to it)"
                                                  if self.placed_by == "--fit on" else "")]
        if self.host_shortfall:
            out.append(f"  {self.host_shortfall}")
        for d in self.devices:
            have = (f" of {format_bytes(d['memory_bytes'])}" if d["memory_bytes"] is not None else
                    " (host RAM not given: not checked)")
            verdict = "" if d["memory_bytes"] is None else (" ok" if d["fits"] else " OVER")
            out.append(f"  {d['device']}: weights {format_bytes(d['model_bytes'])}, KV {format_bytes(d['kv_bytes'])}"
                       f", compute {format_bytes(d['compute_bytes'])}{'' if d['compute_exact'] else ' (estimate)'}"
                       + (f", CUDA context {format_bytes(d['context_bytes'])}" if d["context_bytes"] else "")
                       + f" = {format_bytes(d['total_bytes'])}{have}{verdict}")
        slots = f"{self.n_seq} slot{'s' * (self.n_seq != 1)}" + (", one pool" if self.kv_unified else "")
        out += [f"  with -c {self.n_ctx:,} ({slots}): " + (
                    f"{self.pool_sequences} sequence{'s' * (self.pool_sequences != 1)} of {self.context:,} tokens at "
                    f"once; a sequence up to {self.slot_context:,} tokens" if self.fits else "nothing runs"),
                f"  max batch at {self.context:,} tokens: {self.max_batch}, {raised_words(self, 'max_batch')}",
                f"  max context at batch {self.batch}: {self.max_context:,} tokens a sequence, "
                f"{raised_words(self, 'max_context')}",
                f"  sized as: {self.command}"]
        p = self.plan
        for label, lay, cmd in (("instead, kvmem", p.best, p.command_best), ("instead, --fit on", p.fit,
                                                                              p.command_fit)):
            alt = _alternative(lay, p.budgets, cmd)
            out.append(f"  {label}: " + ("nothing fits" if alt is None else
                                         f"{' '.join(alt['flags'])}; " + ", ".join(
                                             f"{dev} {format_bytes(n)}" for dev, n in alt["total_bytes"].items())
                                         + ("" if alt["fits"] else " (over)")))
        out.append("  llama.cpp would print:")
        out += [f"    {line}" for line in self.log_lines]
        out += [f"  note: {note}" for note in self.notes]
        return out


def _alternative(lay, budgets: dict, command: str) -> dict | None:
    if lay is None:
        return None
    return {"flags": lay.flags(), "total_bytes": dict(lay.total_bytes), "fits": lay.fits(budgets),
            "command": command}


def start_up_lines(lay, cache_lines: tuple = ()) -> list[str]:
    """The buffer lines llama.cpp prints for a layout, in its formats at 0c1e57098: "load_tensors: offloaded N/M
    layers to GPU" (src/llama-model.cpp#L1924), "%12s model buffer size = %8.2f MiB" (#L1930), the KV cache's
    "%10s KV buffer size" (src/llama-kv-cache.cpp#L291) then its ``cache_lines`` (the estimate's "size =" lines,
    log_lines), and sched_reserve's "%10s compute buffer size"
    (src/llama-context.cpp#L740, buffers over 1 B); MiB as placement.buffer_mib. The host's compute buffer is the
    pinned CUDA_Host one where a GPU holds layers, else the CPU backend's (layouts.layout's one host figure); each
    compute buffer as context creation prints it (Layout.printed_compute_bytes: MiniMax-M3's host reserve, less than the
    buffer a long prompt grows it to)."""
    from .placement import CPU, buffer_mib
    p = lay.placement
    out = []
    if p.gpus:
        out.append(f"load_tensors: offloaded {p.offloaded_layers}/{p.layers_total} layers to GPU")
    host, gpus = p.devices[-1], p.devices[:-1]
    for d in (host, *gpus):
        if d.model_bytes:
            out.append(f"load_tensors: {d.buffer_name:>12} model buffer size = {buffer_mib(d.model_bytes):8.2f} MiB")
    # one cache (one size line): one KV buffer a device; SWA / indexer / recurrent caches print their buffers each
    # apart, which the placement sums per device (said in own_flags' notes, not printed as one line)
    if len(cache_lines) == 1 and cache_lines[0].startswith("llama_kv_cache"):
        for d in (*gpus, host):
            if d.kv_bytes:
                out.append(f"llama_kv_cache: {d.device:>10} KV buffer size = {buffer_mib(d.kv_bytes):8.2f} MiB")
    out += cache_lines
    for d in (*gpus, host):
        nbytes = lay.printed_compute_bytes(d.device)
        name = ("CUDA_Host" if p.gpus and p.offloaded_layers else CPU) if d.device == CPU else d.device
        if nbytes > 1:
            out.append(f"sched_reserve: {name:>10} compute buffer size = {buffer_mib(nbytes):8.2f} MiB")
    return out

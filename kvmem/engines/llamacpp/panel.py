"""What the Fit page's offload panel and ``kvmem fit``'s offload report (EngineSpec.panels
"offload") pass to kvmem.llamacpp_offload beside the placement they give it: the options it takes,
read from its own signature, so neither lists them; the workload as fit sizes it (panel_offload);
and whether the host RAM given (the sizing option host_memory_bytes) holds kvmem's placement."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# given by the panel and the report themselves: the model, the cards, the context, the formats, the host
PLACED = frozenset({"model", "gpus", "context", "weight_dtype", "kv_dtype", "host_memory", "hold"})


# options that shape no buffer of the placement: the host RAM bound (host_shortfall, the verdict), the host terms
# beside it (checkpoints.host_terms), byte counts given (the verdict then places nothing), and fit's own n_ctx, n_seq
NOT_PLACED = frozenset({"host_memory_bytes", "ctx_checkpoints", "cache_ram_mib", "weights_bytes", "activation_bytes",
                        "non_torch_bytes", "n_ctx", "n_seq"})
# budget.SIZING_OPTIONS that shape the placement's buffers (not imported: budget imports the verdict, which imports
# this module); tests/engines/test_llamacpp_options_reach.py checks that the two sets cover SIZING_OPTIONS
PLACEMENT_SIZING = frozenset({"mmproj", "mmproj_offload"})


def offload_options(options: dict, function=None) -> dict:
    """The entries of ``options`` that ``function`` (kvmem.llamacpp_offload by default) takes as keyword
    arguments (its parameters beyond PLACED: type_k, type_v, flash_attn, n_ubatch, n_seq, swa_full, build, ...).
    Any other of llama.cpp's engine or sizing options (settings.DEFAULTS, PLACEMENT_SIZING) that is not
    NOT_PLACED is refused by name (ValueError): a placement never drops one. Other names (kvmem.fit's own
    arguments, which the Fit page passes along) are not llama.cpp's options and are left out."""
    from .offload import llamacpp_offload
    from .settings import DEFAULTS
    code = (function or llamacpp_offload).__code__   # its parameters, without importing inspect (start-up)
    takes = set(code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]) - PLACED
    dropped = sorted(name for name, value in options.items() if value is not None and name in {
        *DEFAULTS, *PLACEMENT_SIZING} - takes - NOT_PLACED)
    if dropped:
        raise ValueError(f"option {dropped[0]}={options[dropped[0]]!r}: the llama.cpp offload placement does not "
                         "take it, and would size another server without it")
    return {name: value for name, value in options.items() if name in takes and value is not None}


def panel_offload(model, *, gpus, context: int, batch: int | None, weight_dtype, kv_dtype, host_memory, options: dict,
                  hold=None):
    """kvmem.llamacpp_offload of the workload kvmem.fit sizes: ``batch`` sequences of ``context``
    tokens are n_ctx = context x batch cells in n_seq = batch streams (llama-server -c, -np)."""
    from .offload import llamacpp_offload
    seqs, opts = _streams(batch, options)
    return llamacpp_offload(model, gpus=gpus, context=context * seqs, n_seq=seqs, weight_dtype=weight_dtype,
                            host_memory=host_memory, kv_dtype=kv_dtype, **opts, hold=hold)


def panel_decode_curve(model, *, gpus, context: int, batch: int | None, weight_dtype, kv_dtype, host_memory,
                       options: dict):
    """kvmem.llamacpp_decode_curve of the same workload as panel_offload."""
    from .offload import decode_curve
    seqs, opts = _streams(batch, options, decode_curve)     # not model_path / context_set: no -ngl step reads them
    return decode_curve(model, gpus=gpus, context=context * seqs, n_seq=seqs, weight_dtype=weight_dtype,
                        host_memory=host_memory, kv_dtype=kv_dtype, **opts)


def _streams(batch: int | None, options: dict, function=None) -> tuple[int, dict]:
    """The sequences (-np) of the workload, and the other options llamacpp_offload takes; an n_seq option
    other than the batch is refused by name (fit sizes n_seq = batch)."""
    seqs, opts = batch or 1, offload_options(options, function)
    given = opts.pop("n_seq", None)
    if given is not None and given != seqs:
        raise ValueError(f"n_seq={given!r}: the offload placement serves the batch, {seqs} sequences (n_seq = batch)")
    return seqs, opts


def host_shortfall(placed, options: dict) -> str | None:
    """Why kvmem's placement does not run in the host RAM given (sizing option host_memory_bytes), or None."""
    host = options.get("host_memory_bytes")
    if host is None or placed.best is None:
        return None
    from ..base import byte_option
    bound = byte_option("host_memory_bytes", host)
    need = placed.best.total_bytes["CPU"]
    if need <= bound:
        return None
    from ...units import format_bytes
    return (f"kvmem's placement needs {need:,} B of host RAM, more than host_memory_bytes {bound:,}: it does not run "
            f"(host RAM short by {format_bytes(need - bound)}, {need - bound:,} B; it runs with host_memory_bytes="
            f"{need} or more)")


@dataclass(frozen=True)
class MixedCards:
    """kvmem's llama.cpp placement over mixed cards (``gpus``, in CUDA order) and the verdict it gives
    (mixed_cards): ``kvmem fit --gpu A,B``, ``kvmem plan --gpu A,B`` and the app's Fit page read this one record.

    ``fits``: a placement exists and the host RAM given (host_memory_bytes) holds it; ``max_batch`` and
    ``max_context``: the largest workloads that placement's flags, or --fit on's, hold; ``host_bytes``: what it
    keeps in host RAM, ``host_checked``: whether host RAM was given to check it against."""

    engine: str
    gpus: tuple[str, ...]
    context: int
    batch: int | None
    plan: Any = field(repr=False)         # the workload's offload.OffloadPlan: kvmem's placement and --fit on's
    host_shortfall: str | None
    fits: bool
    max_batch: int
    max_context: int
    host_bytes: int
    host_checked: bool
    _place: Any = field(repr=False, compare=False)

    @property
    def command(self) -> str | None:
        """kvmem's placement's llama-server command (None where nothing is placed)."""
        return self.plan.command_best if self.plan.best is not None else None

    def placed(self, context: int, batch: int):
        """The placement of another workload on the same cards (kvmem plan --target's command)."""
        return self._place(context, batch)

    def to_dict(self) -> dict:
        """The placement as kvmem.llamacpp_offload's record, with the verdict's host shortfall."""
        return {**self.plan.to_dict(), "host_shortfall": self.host_shortfall}


def mixed_cards(model, gpus, *, context: int, batch: int | None, weight_dtype, kv_dtype, host_memory=None,
                options: dict) -> MixedCards:
    """llama.cpp on the cards ``gpus`` (names as kvmem.get_gpu reads them, in CUDA order, mixed kinds allowed):
    kvmem's placement of ``batch`` sequences of ``context`` tokens (panel_offload), its verdict and the largest
    workloads its flags (or --fit on's, where they hold more) hold, one layout a probe, as the verdict searches one
    kind of card ("the flags hold N
    tokens and no more"; a placement searched anew for each probe cost 25 s of CPU for glm-5 on 4 cards).
    llama.cpp pads each stream's cells to 256 (settings), so the context is searched in steps of 256, up to the
    model's positions. ``host_memory``: the host RAM bandwidth of the decode bound; ``options``: llama.cpp's
    engine and sizing options (host_memory_bytes bounds the host RAM). A layout it cannot place: ValueError."""
    from ...sizing.search import largest_fitting
    from .. import engine_spec
    from .ctx_train import n_ctx_train
    from .settings import LLAMA_MAX_SEQ
    gpus = tuple(gpus)

    def place(ctx: int, seqs: int | None, hold=None):
        return panel_offload(model, gpus=list(gpus), context=ctx, batch=seqs, weight_dtype=weight_dtype,
                             kv_dtype=kv_dtype, host_memory=host_memory, options=options, hold=hold)

    plan = place(context, batch)
    short = host_shortfall(plan, options)
    fits = plan.best is not None and not short

    def runs(ctx: int, seqs: int, hold) -> bool:
        """``hold``'s flags hold ``seqs`` sequences of ``ctx`` tokens."""
        try:
            p = place(ctx, seqs, hold=hold)
        except ValueError:
            return False
        return p.best is not None and host_shortfall(p, options) is None

    # kvmem's flags put the most on the GPUs for this workload; where they keep layers or experts in host RAM,
    # --fit on's keep its 1 GiB margin a card, which can hold more sequences or a longer context: the larger of the
    # two (a placement holds it: kvmem plan searches one for that workload), as the sizing verdict answers
    whole = fits and (plan.best.placement.offloaded_layers == plan.best.placement.layers_total
                      and not plan.best.n_cpu_moe and not plan.best.override_tensor)
    holds = [plan.best] + ([plan.fit] if fits and not whole and plan.fit is not None
                           and plan.fit.flags() != plan.best.flags() and runs(context, batch or 1, plan.fit) else [])
    cap = max(n_ctx_train(model) or context, context)
    max_batch = max(largest_fitting(lambda b, h=h: runs(context, b, h), LLAMA_MAX_SEQ, batch or 1)
                    for h in holds) if fits else 0
    units = max(largest_fitting(lambda u, h=h: runs(min(u * 256, cap), batch or 1, h), -(-cap // 256),
                                -(-context // 256)) for h in holds) if fits else 0
    return MixedCards(engine=engine_spec("llama.cpp").name, gpus=gpus, context=context, batch=batch, plan=plan,
                      host_shortfall=short, fits=fits, max_batch=max_batch, max_context=min(units * 256, cap),
                      host_bytes=plan.best.total_bytes.get("CPU", 0) if plan.best is not None else 0,
                      host_checked=options.get("host_memory_bytes") is not None, _place=place)

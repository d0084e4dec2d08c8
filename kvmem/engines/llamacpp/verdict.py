"""llama.cpp's one verdict for kvmem.sizing (SizingRules.placement_verdict): a workload fits when
kvmem's best placement of it fits (kvmem.engines.llamacpp.best.best_layout: layers and routed
experts over the GPUs, the rest in host RAM), not only when every layer fits on the GPUs.

kvmem.sizing asks this for every workload, also where every layer fits the GPUs: the verdict, max batch and
max context then come from one computation, the placement's (its scheduled graph's compute buffer, with
min(n_batch, n_seq) outputs, and the projector on the first GPU only), so that they do not depend on the
context asked (budget.py's estimate, 512 outputs' logits, is larger). For ``batch`` (1 when none)
sequences of ``context`` tokens (n_ctx = context x batch, n_seq = batch, as fit sets them):

    fits         the placement exists: every GPU holds what it puts there, and the host holds the
                 rest within ``host_memory_bytes`` (a sizing option; not given: host RAM is not
                 bounded, and fit says how much the placement takes there);
    max_batch    the most sequences of ``context`` tokens the same flags (-ngl, -ts, -ot,
                 --n-cpu-moe) hold, at most llama.cpp's 256 (src/llama-cparams.h LLAMA_MAX_SEQ);
    max_context  the most tokens per sequence at ``batch`` the same flags hold, at most the model's
                 positions (or the context asked, when longer).

The placement of ``batch`` sequences is kvmem's placement of one sequence with its flags laid out for
``batch`` where that holds them (on one GPU, the fewest --n-cpu-moe or the most -ngl of one
sequence, where it holds ``batch``, is also the fewest or the most for ``batch``), else kvmem's placement searched at
``batch``. With no batch asked, the answer is about max_batch sequences (Answer.work_batch, as for
every engine): the placement, its per-device parts and the engine's numbers are those of the
one-sequence flags at max_batch, what fit and kvmem.plan at that batch then take.

Where kvmem cannot lay the model out (a family it refuses from a config, weights or activations
given as byte counts, a weight format that is no GGUF type), the answer with every layer on the
GPUs (budget.py's) stands, and fit's notes say why where it does not fit. A placement with every layer
and expert on the GPUs is marked ``whole``: fit then states no host-RAM condition (llama.cpp keeps the
input embeddings and a CPU compute buffer in host RAM on every run) and gives its decode bound.
"""

from __future__ import annotations

from dataclasses import replace

from ...units import cdiv, format_bytes
from ..base import byte_option
from .ctx_train import n_ctx_train
from .settings import LLAMA_MAX_SEQ
from .verdict_search import PAD as _PAD
from .verdict_search import beyond, longest_context, most_creatable, or_fit_on, refusal, sequence_counts

__all__ = ["placement_verdict", "HOST_OPTION"]

HOST_OPTION = "host_memory_bytes"
_CACHE_SETTINGS = ("n_batch", "swa_full", "kv_unified", "build", "mla", "nextn", "n_rs_seq")   # launch.cache_settings
_KV_TYPES = {"auto": "f16", "fp16": "f16", "float16": "f16", "half": "f16", "bfloat16": "bf16"}


def _cache_type(value) -> str:
    text = str(getattr(value, "name", value)).strip().lower()
    return _KV_TYPES.get(text, text)


def placement_verdict(s, found, searches: bool = True):
    """The Answer from kvmem's best placement of ``s``'s workload (module doc), or None where the
    answer with every layer on the GPUs stands. ``searches`` False: the verdict alone (sizing.min_gpus asks
    only whether it fits), max batch and max context left the workload's own."""
    from .fitting import layout
    from .launch import cache_settings
    from .layouts import CUDA_CONTEXT_BYTES
    from .offload import mmproj_option, weight_format
    from .panel import offload_options

    if s.given.weights_bytes is not None or s.given.activation_bytes is not None:
        if found.fits:      # the answer with every layer on the GPUs stands, as the module doc says
            return None
        return replace(found, notes=("llama.cpp: weights or activations given as byte counts: no placement over "
                                     "GPUs and host is sized; every layer on the GPUs",))
    bound = s.sizing.get(HOST_OPTION)
    bound = None if bound is None else byte_option(HOST_OPTION, bound)
    batch = cdiv(s.batch or 1, s.replicas)
    opts = offload_options(s.engine_options)
    cache = _cache_type(s.kv_dtype)
    try:    # the projector (sizing options mmproj, mmproj_offload): weights and compute buffers, as offload counts them
        mm_weights, mm_compute, mm_note = mmproj_option(s.model, s.sizing, opts.get("flash_attn"))
    except ValueError as exc:
        return None if found.fits else replace(found, notes=(f"llama.cpp: no placement over GPUs and host: {exc}",))
    # every cache setting kvmem.estimate takes (swa_full, kv_unified, n_batch, build, mla, nextn, n_rs_seq) lays
    # the placement out too (offload_options refuses by name any option the placement does not take)
    kw = dict(n_ubatch=opts.get("n_ubatch") or 512, type_k=opts.get("type_k") or cache,
              type_v=opts.get("type_v") or cache, flash_attn=opts.get("flash_attn"), mmap=True, kv_offload=True,
              mmproj_bytes=mm_weights, mmproj_offload=s.sizing.get("mmproj_offload", True), mmproj_compute=mm_compute,
              **cache_settings(**{k: v for k, v in opts.items() if k in _CACHE_SETTINGS}))
    names = tuple(f"CUDA{i}" for i in range(s.pp))
    budgets = tuple((n, s.gpu.usable_memory_bytes) for n in names)
    try:
        fmt = weight_format(s.model, s.weight_dtype)
    except ValueError as exc:
        return None if found.fits else replace(found, notes=(f"llama.cpp: no placement over GPUs and host: {exc}",))

    placer = _Placer(s.model, fmt, budgets, kw, bound, s.context)
    holds, flags_of, placed_at = placer.holds, placer.flags_of, placer.placed_at

    if not searches:
        return _alone(s, found, placer, batch)
    try:
        best, tensors = placed_at(batch)
    except ValueError as exc:
        return None if found.fits else replace(found, notes=(f"llama.cpp: no placement over GPUs and host: {exc}",))
    if best is None or not holds(best):
        return _not_held(s, found, placer, best, batch)
    flags = flags_of(best)
    tried = {(s.context, batch): True}      # the placement itself holds the workload
    # and, as largest_fitting's 'fits' is monotone, one sequence of it and the first 256 cells of it: the
    # searches' first asks (fits(1)), answered without laying the flags out again
    tried[s.context, 1] = True
    if s.context >= _PAD:
        tried[_PAD, batch] = True

    left = {(s.context, batch): placer.room(best)}     # (context, seqs) -> the least room of a laid-out set

    def with_flags(context: int, seqs: int) -> bool:
        if (context, seqs) not in tried:
            try:
                left[context, seqs] = placer.room(layout(s.model, tensors, **flags, **kw, n_ctx=context * seqs,
                                                         n_seq=seqs))
                tried[context, seqs] = left[context, seqs] >= 0
            except ValueError:
                tried[context, seqs] = False
        return tried[context, seqs]

    # the searches start from a linear guess: on each GPU holding KV, its slack over what its KV grows by
    # with one more sequence (or 256 more cells a sequence), the tightest GPU's; llama.cpp pads the cells
    # per stream to 256 (src/llama-kv-cache.cpp), so the longest context is searched in steps of 256
    cells = max(cdiv(s.context, _PAD), 1)
    holding = [(dict(budgets)[n] - best.total_bytes[n], best.placement.device(n).kv_bytes) for n in names]
    holding = [(slack, kv) for slack, kv in holding if kv > 0] or [(0, 1)]
    seq_cap = min(LLAMA_MAX_SEQ, s.rules.max_sequences or LLAMA_MAX_SEQ)
    more_seqs = min(slack * batch // kv for slack, kv in holding)
    if more_seqs == 0 and bound is None and not s.engine_options.get("kv_unified"):
        # each sequence is a stream of the same cells (kv_unified off): one more adds kv / batch on every GPU
        # holding KV, more than one of them has left (its compute buffer does not shrink): it does not fit
        tried[s.context, batch + 1] = False
    context_cap = max(n_ctx_train(s.model) or s.context, s.context)
    units = cdiv(context_cap, _PAD)
    more_units = min(slack * cells // kv for slack, kv in holding)
    # --fit on's flags keep 1 GiB a card where kvmem's put the most on the GPUs: they can hold more sequences or a
    # longer context; kvmem answers the larger (as on mixed cards, panel.mixed_cards). Searched first: kvmem's own
    # searches then ask only whether these flags hold one more than --fit on's (_beyond)
    alt_most, alt_longest, alt = or_fit_on(s, placer, tensors, best, batch, (seq_cap, units, cells, context_cap))
    # (kvmem's flags hold ``batch``; where one more is known not to fit, nor do more than --fit on's)
    known = max(alt_most, batch)
    counts = sequence_counts(s.model, s.context, kw, seq_cap)      # those llama.cpp creates a context for
    after = next((b for b in counts if b > known), None)
    most = beyond(known, lambda: alt is None or after is not None and tried.get((s.context, batch + 1)) is not False
                   and with_flags(s.context, after),
                   lambda: most_creatable(counts, lambda b: with_flags(s.context, b),
                                          lambda b: left.get((s.context, b)),
                                          refusal(s.model, tensors, {**flags, **kw}, s.context),
                                          (seq_cap, batch + more_seqs), (batch, left[s.context, batch])))
    past = alt_longest // _PAD + 1          # the fewest units past --fit on's longest context
    longest = max(beyond(alt_longest, lambda: alt is None or past <= units and with_flags(
        min(past * _PAD, context_cap), batch), lambda: longest_context(
            s.context, lambda u: with_flags(min(u * _PAD, context_cap), batch),
            lambda u: left.get((min(u * _PAD, context_cap), batch)), (units, cells + more_units, context_cap),
            left[s.context, batch])), s.context)
    work = batch
    if s.batch is None and most > batch:
        # no batch asked: fit answers for its max batch (kvmem.sizing.search.Answer.work_batch), as kvmem.plan
        # then asks it: the placement, the per-device parts and the engine's numbers are those of ``most``
        # sequences (placed_at(most) holds them: the flags above do, else --fit on's flags laid out for them)
        best, tensors = placed_at(most, alt and flags_of(alt))
        work = most
    on_host = best.total_bytes["CPU"]
    fullest = max(names, key=lambda n: best.total_bytes[n] - dict(budgets)[n])
    gpu = best.placement.device(fullest)
    # the projector on its device: its weights with the model's, its compute buffer with the graph's
    mm_here = best.mmproj.get("device") == fullest
    mm_compute_here = dict(best.mmproj.get("compute_bytes") or {}).get(fullest, 0)
    breakdown = dict(total_bytes=dict(budgets)[fullest],
                     weights_bytes=gpu.model_bytes + (best.mmproj["weights_bytes"] if mm_here else 0),
                     kv_bytes=gpu.kv_bytes, kv_pool_bytes=gpu.kv_bytes,
                     activations_bytes=best.compute_bytes[fullest] + mm_compute_here,
                     overhead_bytes=CUDA_CONTEXT_BYTES, free_bytes=dict(budgets)[fullest] - best.total_bytes[fullest],
                     shortfall_bytes=0)
    # every layer and expert on the GPUs: llama.cpp's host part is then what any run keeps there (the input
    # embeddings, the CPU compute buffer), and fit's answer is that of the model on the GPUs, its decode bound too
    whole = (best.placement.offloaded_layers == best.placement.layers_total and not best.n_cpu_moe
             and not best.override_tensor)
    placed = {"flags": best.flags(), "gpus": list(names), "n_ctx": best.n_ctx, "n_seq": work, "whole": whole,
              "total_bytes": dict(best.total_bytes), "offloaded_layers": best.placement.offloaded_layers,
              "n_layer_plus_output": best.placement.layers_total, "host_bytes": on_host, "host_memory_bytes": bound,
              "device": fullest, "breakdown": breakdown,
              # what "fits" rests on that kvmem cannot check: the host's free RAM, unless given
              "condition": (f"if the host has {format_bytes(on_host)} of free RAM for it (not checked: kvmem does not "
                            f"know the host's memory; -o {HOST_OPTION}=... checks it)") if bound is None and on_host
              and not whole else ""}
    host_note = (f"host RAM not bounded (sizing option {HOST_OPTION}): this placement takes {on_host:,} B there"
                 if bound is None else f"host RAM {bound:,} B ({HOST_OPTION}): this placement takes {on_host:,} B")
    where = "every layer on the GPUs" if whole else "layers or experts in host RAM"
    note = (f"llama.cpp fits with {where}: {' '.join(best.flags())}; "
            f"{best.placement.offloaded_layers}/{best.placement.layers_total} layers on the GPUs; {host_note}; "
            f"max batch and max context are what these flags hold"
            + (f" (or --fit on's, {' '.join(alt.flags())}, where they hold more)" if alt else "")
            + f"; the per-device parts are {fullest}'s")
    return replace(found, per_replica_max=most, max_batch=most * s.replicas, max_context=longest, placed=placed,
                   work_batch=work, notes=(note,) + ((mm_note,) if mm_note else ()))


def _alone(s, found, placer, batch: int):
    """placement_verdict's verdict alone (``searches`` False): whether kvmem's placement of ``batch`` sequences holds
    them; of one sequence with the host unbounded, whether that placement exists (it then holds the GPUs), asked
    without searching it (best.placement_holds: the same bool)."""
    try:
        if placer.bound is None and batch == 1:
            ok = placer.exists()
        else:
            best = placer.placed_at(batch)[0]
            ok = best is not None and placer.holds(best)
    except ValueError as exc:
        return None if found.fits else replace(found, notes=(f"llama.cpp: no placement over GPUs and host: {exc}",))
    most = batch if ok else 0
    return replace(found, per_replica_max=most, max_batch=most * s.replicas, max_context=s.context)


def _not_held(s, found, placer, best, batch: int):
    """The Answer where kvmem's best placement of ``batch`` sequences does not hold them: where the budget's
    estimate said it fits, the most sequences a placement holds (the placement's word stands)."""
    from ...sizing.search import largest_fitting

    if found.fits:
        def held(seqs: int) -> bool:
            try:
                lay = placer.placed_at(seqs)[0]
            except ValueError:
                return False
            return lay is not None and placer.holds(lay)
        most = largest_fitting(held, batch - 1, 1) if batch > 1 and held(1) else 0
        found = replace(found, per_replica_max=most, max_batch=most * s.replicas)
    bound = placer.bound
    host = ("" if best is None or bound is None
            else f" and {best.total_bytes['CPU']:,} B on the host (host_memory_bytes {bound:,})")
    why = unrun = None
    if best is not None and bound is not None and best.fits(dict(placer.budgets)):
        # the GPUs hold kvmem's placement: the host RAM is what is short, by what the placement keeps there
        need = best.total_bytes["CPU"]
        on_gpus = (f"{best.placement.offloaded_layers}/{best.placement.layers_total} layers on the GPUs"
                   + (f", --n-cpu-moe {best.n_cpu_moe}" if best.n_cpu_moe else ""))
        why = (f"kvmem's placement ({on_gpus}) holds the GPUs but keeps {format_bytes(need)} "
               f"({need:,} B) in host RAM, more than the {format_bytes(bound)} given: host RAM short by "
               f"{format_bytes(need - bound)} ({need - bound:,} B)")
        unrun = {"host_bytes": need, "n_seq": batch}
    return replace(found, notes=(f"llama.cpp: no placement of {batch} x {s.context:,} tokens fits the GPUs{host}",),
                   why_not=why, unrun=unrun)


class _Placer:
    """kvmem's placements of one set-up's workload at a number of sequences (placement_verdict)."""

    def __init__(self, model, fmt, budgets: tuple, kw: dict, bound, context: int):
        self.model, self.fmt, self.budgets, self.kw, self.bound, self.context = model, fmt, budgets, kw, bound, context

    def holds(self, lay) -> bool:
        return lay.fits(dict(self.budgets)) and (self.bound is None or lay.total_bytes["CPU"] <= self.bound)

    def room(self, lay) -> int:
        """The least room a GPU (or the bounded host) has left under ``lay``: >= 0 exactly where it holds."""
        gaps = [budget - lay.total_bytes[name] for name, budget in self.budgets]
        return min(gaps + ([] if self.bound is None else [self.bound - lay.total_bytes["CPU"]]))

    def flags_of(self, lay) -> dict:
        return dict(gpus=lay.placement.gpus, n_gpu_layers=lay.n_gpu_layers, n_cpu_moe=lay.n_cpu_moe,
                    tensor_split=lay.tensor_split if len(self.budgets) > 1 else None,
                    override_tensor=lay.override_tensor)

    def by_fit(self, seqs: int):
        """--fit on's placement of ``seqs`` sequences (fitting.fit_on with its margin, as best_layout asks it)."""
        from .best import fit_searched
        from .layouts import CUDA_CONTEXT_BYTES
        tensors = self.searched(seqs)[1]
        free = {name: budget - CUDA_CONTEXT_BYTES for name, budget in self.budgets}
        return fit_searched(self.model, tensors, tuple(free), free, self.context * seqs,
                            {**self.kw, "n_seq": seqs})[0]

    def exists(self) -> bool:
        """holds(placed_at(1)[0]) where the host is not bounded (best.placement_holds)."""
        from .best import placement_holds
        return placement_holds(self.model, self.fmt, self.budgets, tuple(sorted(
            {**self.kw, "n_ctx": self.context, "n_seq": 1}.items())))

    def searched(self, seqs: int):
        from .best import best_layout
        return best_layout(self.model, self.fmt, self.budgets, tuple(sorted(
            {**self.kw, "n_ctx": self.context * seqs, "n_seq": seqs}.items())))

    def placed_at(self, seqs: int, fallback: dict | None = None):
        """(the placement of ``seqs`` sequences, its tensors): one sequence's placement with its flags laid out
        for ``seqs`` where that holds them (so fit with no batch, which answers its max batch with those flags,
        and fit or plan at that batch take the same placement), else kvmem's best for ``seqs`` (None or a
        layout that does not hold where there is none; ``fallback``: flags known to hold ``seqs``, --fit on's,
        laid out instead of one that does not hold)."""
        from .fitting import layout
        if seqs > 1:
            one, tensors_one, _ = self.searched(1)
            if one is not None and self.holds(one):
                try:
                    again = layout(self.model, tensors_one, **self.flags_of(one), **self.kw,
                                   n_ctx=self.context * seqs, n_seq=seqs)
                except ValueError:
                    again = None
                if again is not None and self.holds(again):
                    return again, tensors_one
        lay, tensors, _ = self.searched(seqs)
        if fallback is not None and (lay is None or not self.holds(lay)):   # flags known to hold ``seqs``
            lay = layout(self.model, tensors, **fallback, **self.kw, n_ctx=self.context * seqs, n_seq=seqs)
        return lay, tensors

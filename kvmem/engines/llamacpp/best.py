"""kvmem's own placement for llama.cpp (offload.py's search, its module docstring): on one GPU the fewest
--n-cpu-moe (MoE) or the most -ngl (dense) that fits; on several, --fit's own search
(kvmem.engines.llamacpp.fitting) with its margin (for MoE where it places nothing that holds, ``_spread``:
every layer on the GPUs in whole counts, the experts on the host), then ``top_up``: routed expert tensors moved from the
host to any GPU with room (``first_layers`` before it: the first layers --fit leaves on the host beside a file's
MTP blocks). Each search's result is kept (best_layout), as fit and its searches ask again."""

from __future__ import annotations

import re

from .fitting import FIT_MARGIN_BYTES, fit_on, laid, layout
from .layouts import CUDA_CONTEXT_BYTES, Layout
from .layouts import layout as _sketch
from .nextn import gguf_nextn_layers
from .placement import CPU, cuda_alloc_bytes
from .tensors import tensors_for

__all__ = ["best_layout", "first_layers", "fit_searched", "held_layout", "placement_holds", "room_left", "top_up"]


def _blocks(model, kw: dict) -> int:
    """The MTP blocks of the file the layout's build loads (arch_tensors.gguf_nextn_layers: none in a Qwen3.5 file
    before PR #22673), as layouts.layout counts them in the split: every search here counts the same."""
    return gguf_nextn_layers(model, kw.get("build"))


def _largest(lo: int, hi: int, ok) -> int | None:
    """The largest n in lo..hi with ok(n), ok monotone (True up to some n); None when ok(lo) fails."""
    if not ok(lo):
        return None
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid - 1)
    return lo


def _over(model, tensors, budgets: dict, **flags) -> bool:
    """Whether layout(model, tensors, **flags) is over a budget by what it takes besides its compute buffers, and of
    those the least its sketch knows (layouts.layout schedule=False: the same weights, KV, CUDA context and projector;
    Layout.compute_floor), so that it does not fit and no graph is scheduled to say so (-ngl 71 of Kimi-K3 on one
    3090; a host expert copied to the first GPU beside the one top_up would move there). False where refused."""
    if laid(model, tensors, **flags) is not None or not flags["n_gpu_layers"]:
        return False    # laid out already: its own word; -ngl 0: its sketch sizes the host's whole graph (no GPU
        #                 schedules it), 0.16-0.29 s for Kimi-K3, and puts next to nothing on the GPU: no floor
    try:
        sketch = _sketch(model, tensors, **flags, schedule=False)
    except ValueError:
        return False
    return any(sketch.total_bytes[d] - sketch.compute_bytes[d] + sketch.compute_floor.get(d, 0) > b
               for d, b in budgets.items())


def _best(model, tensors, gpus, split, budgets, kw) -> Layout | None:
    n = model.num_layers
    top = n + 1 + _blocks(model, kw)    # every layer: the file's MTP blocks count in -ngl (placement)
    cache = {}

    def at(ngl, ncm):
        if (ngl, ncm) not in cache:
            cache[(ngl, ncm)] = layout(model, tensors, gpus=gpus, n_gpu_layers=ngl, tensor_split=split,
                                       n_cpu_moe=ncm, **kw)
        return cache[(ngl, ncm)]

    def fits(ngl, ncm):     # at(ngl, ncm).fits(budgets), laid out only where what it takes but compute is not over
        flags = dict(gpus=gpus, n_gpu_layers=ngl, tensor_split=split, n_cpu_moe=ncm, **kw)
        return ((ngl, ncm) in cache or not _over(model, tensors, budgets, **flags)) and at(ngl, ncm).fits(budgets)

    if model.facts.moe is not None and gpus:
        def keeps(k):       # k = the last layers keeping their experts on the GPU (--n-cpu-moe n - k)
            return fits(top, n - k)

        if keeps(0):
            # a guess from the bytes alone (each layer's experts as the GPU allocates them, in the room every
            # expert on the host leaves), then checked layout by layout from there: 2 or 3 layouts, not a bisection
            base = at(top, n)
            room = min(budgets[g] - base.total_bytes[g] for g in gpus)
            per_layer = [0] * n
            for t in base.placement.tensors:
                if t.device == CPU and t.group == "experts" and t.layer is not None:
                    per_layer[t.layer] += cuda_alloc_bytes(t)
            k = 0
            while k < n and per_layer[n - k - 1] <= room:
                room -= per_layer[n - k - 1]
                k += 1
            while k > 0 and not keeps(k):
                k -= 1
            while k < n and keeps(k + 1):
                k += 1
            return at(top, n - k)
        ngl = _largest(0, top, lambda g: fits(g, n))
        return at(ngl, n) if ngl is not None else None
    if not gpus:
        return at(0, 0)
    # every layer first (kvmem fit asks the placement of every workload, most of which fit whole: one layout, not
    # the bisection's seven; the same answer, 'fits' being monotone in -ngl); then from one layer up: -ngl 0 lays
    # everything out on the host, whose compute graph costs the most to size
    if fits(top, 0):
        return at(top, 0)
    ngl = _largest(1, top, lambda g: fits(g, 0))
    if ngl is None:
        ngl = 0 if fits(0, 0) else None
    return at(ngl, 0) if ngl is not None else None


def _spread(model, tensors, gpus, budgets, kw) -> Layout | None:
    """kvmem's fallback over several GPUs for an MoE model --fit's search does not place (its back-to-front
    step can leave a whole layer's experts on a card too small for them, kimi-k2 on 16 + 12 GB): every layer
    on the GPUs and every routed expert on the host (-ngl n+1 --n-cpu-moe n), the layers split in whole
    counts (-ts c0,c1,...: with counts summing to n+1 device i takes exactly c_i layers, placement.layer_devices)
    from counts proportional to the budgets, then one layer at a time from the card most over its budget to
    the one with the most room, until every card holds its part (top_up then fills the room with experts).
    None where no split of whole layers holds (a card would be left with none, or a split comes back)."""
    n, k = model.num_layers, len(gpus)
    total = n + 1 + _blocks(model, kw)  # the file's MTP blocks take their -ts count (placement)
    if total < k:
        return None
    weights = [budgets[g] for g in gpus]
    raw = [total * w / sum(weights) for w in weights]
    counts = [max(int(x), 1) for x in raw]
    while sum(counts) > total:
        counts[max(range(k), key=lambda i: counts[i] - raw[i])] -= 1
    while sum(counts) < total:
        counts[max(range(k), key=lambda i: raw[i] - counts[i])] += 1
    seen = set()
    while tuple(counts) not in seen:
        seen.add(tuple(counts))
        lay = layout(model, tensors, gpus=gpus, n_gpu_layers=total, tensor_split=tuple(counts), n_cpu_moe=n, **kw)
        if lay.fits(budgets):
            return lay
        over = [lay.total_bytes[g] - budgets[g] for g in gpus]
        worst, roomiest = max(range(k), key=over.__getitem__), min(range(k), key=over.__getitem__)
        if over[roomiest] >= 0 or counts[worst] <= 1:
            return None
        counts[worst] -= 1
        counts[roomiest] += 1
    return None


def _host_experts(lay: Layout) -> list:
    """The routed expert tensors a layout keeps on the host, largest first."""
    out = [t for t in lay.placement.tensors if t.device == CPU and t.group == "experts" and "_exps" in t.name]
    return sorted(out, key=lambda t: (-t.nbytes, t.layer, t.name))


def _moved(model, tensors, lay: Layout, t, device, kw) -> Layout:
    """``lay`` with expert tensor ``t`` on ``device`` (an -ot ahead of the layout's own)."""
    return layout(model, tensors, **_moved_flags(lay, t, device, kw))


def _moved_flags(lay: Layout, t, device, kw) -> dict:
    """_moved's flags."""
    return dict(gpus=lay.placement.gpus, n_gpu_layers=lay.n_gpu_layers,
                tensor_split=lay.tensor_split if len(lay.placement.gpus) > 1 else None, n_cpu_moe=lay.n_cpu_moe,
                override_tensor=((re.escape(t.name), device),) + tuple(lay.override_tensor),
                **{**kw, "n_ctx": lay.n_ctx})


def first_layers(model, tensors, lay: Layout | None, budgets: dict, kw: dict) -> Layout | None:
    """--fit counts the trunk alone in -ngl (llama.cpp@0c1e57098 common/fit.cpp#L140-L142), while the split
    counts a file's MTP blocks too (placement), so its placement leaves the first layer(s) on the host: kvmem's
    takes them onto the first GPU (-ngl and its -ts count raised by the blocks, every other layer where it was)
    and, where that card then runs over, moves its routed expert tensors to the host, the smallest that makes
    room (else the largest, and again; a dense model has none to move); top_up then fills any room left.
    Layers before experts, as fit.cpp itself orders them. ``lay`` unchanged where no such layout holds."""
    blocks = _blocks(model, kw)
    if (lay is None or not blocks or len(lay.placement.gpus) < 2
            or lay.n_gpu_layers != model.num_layers + 1 or sum(lay.tensor_split) != lay.n_gpu_layers):
        return lay
    first = lay.placement.gpus[0]
    trial = layout(model, tensors, gpus=lay.placement.gpus, n_gpu_layers=lay.n_gpu_layers + blocks,
                   tensor_split=(lay.tensor_split[0] + blocks,) + tuple(lay.tensor_split[1:]),
                   n_cpu_moe=lay.n_cpu_moe, override_tensor=lay.override_tensor, **{**kw, "n_ctx": lay.n_ctx})
    for _ in range(8):
        if trial.fits(budgets):
            return trial
        over = trial.total_bytes[first] - budgets[first]
        if over <= 0 or any(trial.total_bytes[g] > budgets[g] for g in trial.placement.gpus if g != first):
            return lay
        on_first = sorted((t for t in trial.placement.tensors
                           if t.device == first and t.group == "experts" and "_exps" in t.name),
                          key=lambda t: (cuda_alloc_bytes(t), t.layer, t.name))
        if not on_first:
            return lay
        enough = [t for t in on_first if cuda_alloc_bytes(t) >= over]
        trial = _moved(model, tensors, trial, enough[0] if enough else on_first[-1], CPU, kw)
    return trial if trial.fits(budgets) else lay


def top_up(model, tensors, lay: Layout | None, budgets: dict, kw: dict) -> Layout | None:
    """Move host expert tensors to GPUs with room for them until no GPU has room for one (module doc)."""
    if lay is None or model.facts.moe is None:
        return lay
    moved = True
    while moved:        # until a pass over the GPUs moves nothing: a move can change another card's compute buffer
        moved = False
        for device in lay.placement.gpus:
            failed = set()      # one try per size (the same bytes fail alike, and fail again once the room shrinks)
            while True:
                # a tensor moved here can also shrink this card's compute buffer (the host experts it no longer
                # copies in): up to the room plus that buffer
                room = budgets[device] - lay.total_bytes[device] + lay.compute_bytes[device]
                host = _host_experts(lay)
                # _over settles a trial on the first GPU alone (a host expert's copy, <= the largest's): asked near it
                first = lay.placement.gpus[0]
                edge = budgets[first] - lay.total_bytes[first] + lay.compute_bytes[first] - cuda_alloc_bytes(host[0]) \
                    - 256 if host else 0
                for t in host:
                    size = cuda_alloc_bytes(t)
                    if size > room or size in failed:
                        continue
                    flags = _moved_flags(lay, t, device, kw)
                    if (size if device == first else 0) > edge and _over(model, tensors, budgets, **flags):
                        failed.add(size)        # over without its graph (_over): the trial would not fit
                        continue
                    trial = layout(model, tensors, **flags)
                    if trial.fits(budgets):
                        lay, moved = trial, True
                        break
                    failed.add(size)
                else:
                    break
        moved = moved and len(lay.placement.gpus) > 1     # one card: its own pass saw every change
    return lay


def room_left(model, tensors, lay: Layout, budgets: dict, kw: dict) -> list:
    """(GPU, tensor name) for each GPU that could still take a routed expert tensor kept on the host:
    the smallest one, moved there, fits every budget. Empty for kvmem's placements (the invariant
    tests/engines/test_llamacpp_placement.py asserts)."""
    host = _host_experts(lay)
    if not host:
        return []
    smallest = min(host, key=cuda_alloc_bytes)
    return [(d, smallest.name) for d in lay.placement.gpus
            if _moved(model, tensors, lay, smallest, d, kw).fits(budgets)]


_BEST: dict = {}      # (model, weight format, budgets, options) -> (Layout | None, tensors, source)
_BEST_KEPT = 64
# kvmem's placement over several GPUs: the margins tried. MoE: --fit's own, which _top_up then fills with
# expert tensors; dense (whole layers only, nothing to fill with): none first
_MARGINS = (FIT_MARGIN_BYTES, 2 * FIT_MARGIN_BYTES)
_MARGINS_DENSE = (0, 128 << 20, 512 << 20, FIT_MARGIN_BYTES)
_FITS: dict = {}      # fit_searched's answers: kvmem's placement and the --fit report ask the same search


def fit_searched(model, tensors, names, free: dict, n_ctx, kw: dict, margin: int = FIT_MARGIN_BYTES) -> tuple:
    """fit_on, remembered for the last few asked with these very tensors."""
    key = (model, id(tensors), names, tuple(free.items()), n_ctx, tuple(sorted(kw.items())), margin)
    if key in _FITS and _FITS[key][0] is tensors:
        return _FITS[key][1]
    found = fit_on(model, tensors, names, free, n_ctx=n_ctx, kw=kw, margin=margin)
    if len(_FITS) >= _BEST_KEPT:
        _FITS.pop(next(iter(_FITS)))
    _FITS[key] = (tensors, found)
    return found


_TENSORS: dict = {}   # (model, weight format, build) -> (tensors, source): one object each, so layouts are remembered


def _tensors(model, weight_format, build=None) -> tuple:
    """tensors_for at the build: the file it loads (a Qwen3.5 file before PR #22673 has no MTP block, and its
    quantiser counted one layer fewer: tensors._typed)."""
    key = (model, weight_format, build)
    if key not in _TENSORS:
        if len(_TENSORS) >= 8:
            _TENSORS.pop(next(iter(_TENSORS)))
        _TENSORS[key] = tensors_for(model, weight_format, build)
    return _TENSORS[key]


def held_layout(model, weight_format, held: Layout, options: tuple) -> tuple:
    """(``held``'s flags laid out at the workload of ``options`` (n_ctx, n_seq, ...), the tensors, their source):
    what the most sequences or the longest context a placement's flags hold is searched with (one layout a
    probe, as the verdict's with_flags), not a new placement search."""
    tensors, source = _tensors(model, weight_format, dict(options).get("build"))
    lay = layout(model, tensors, gpus=held.placement.gpus, n_gpu_layers=held.n_gpu_layers,
                 tensor_split=held.tensor_split if len(held.placement.gpus) > 1 else None, n_cpu_moe=held.n_cpu_moe,
                 override_tensor=held.override_tensor, **dict(options))
    return lay, tensors, source


def _several(model, tensors, names: tuple, usable: dict, kw: dict) -> Layout | None:
    """The placement best_layout starts from on several GPUs: --fit's own search (the one its report shows,
    searched once), whose margin top_up then fills; fit.cpp checks each device when it fills it, and a later
    device's split layer can change an earlier one's compute buffer (kvmem's estimate stands in for the scheduled
    graph once a non-expert tensor moves), so a search can end over a card: then a wider margin; none fits: MoE,
    _spread (None or a placement that fits), dense, None."""
    free = {n: usable[n] - CUDA_CONTEXT_BYTES for n in names}
    kw_fit = {k: v for k, v in kw.items() if k != "n_ctx"}
    for margin in _MARGINS if model.facts.moe is not None else _MARGINS_DENSE:
        found, _ = fit_searched(model, tensors, names, free, kw["n_ctx"], kw_fit, margin)
        if found.fits(usable):
            return found
    return _spread(model, tensors, names, usable, kw) if model.facts.moe is not None else None


def best_layout(model, weight_format, budgets: tuple, options: tuple) -> tuple:
    """(kvmem's placement or None, the tensors, their source) for ``model``'s tensors in
    ``weight_format`` (kvmem.engines.llamacpp.tensors.tensors_for), ``budgets`` ((device, bytes), ...)
    and layout ``options`` ((name, value), ...); None when the GPUs cannot hold even what the
    smallest placement leaves them. Remembered for the last few asked: kvmem fit's verdict, its
    report and the Fit page ask the same."""
    key = (model, weight_format, budgets, options)
    if key in _BEST:
        return _BEST[key]
    names, usable, kw = tuple(d for d, _ in budgets), dict(budgets), dict(options)
    tensors, source = _tensors(model, weight_format, kw.get("build"))
    kw_fit = {k: v for k, v in kw.items() if k != "n_ctx"}
    if len(names) > 1:   # several GPUs: --fit's own search with no margin kept (module doc)
        best = _several(model, tensors, names, usable, kw)
    else:
        best = _best(model, tensors, names, None, usable, kw)
    best = top_up(model, tensors, first_layers(model, tensors, best, usable, kw_fit), usable, kw_fit)
    if len(_BEST) >= _BEST_KEPT:
        _BEST.pop(next(iter(_BEST)))
    _BEST[key] = (best, tensors, source)
    return _BEST[key]


def placement_holds(model, weight_format, budgets: tuple, options: tuple) -> bool:
    """Whether best_layout(model, weight_format, budgets, options) finds a placement (it then fits ``budgets``),
    asked without searching the placement itself (sizing.min_gpus asks only this of other card counts): every
    search best_layout runs keeps a placement that fits (first_layers and top_up change one only into another that
    fits), so one exists exactly where the search it starts from finds one: on one GPU, _best's first fitting
    layout (MoE: every expert on the host, else -ngl 0 with them; dense: every layer, -ngl 1, -ngl 0: what its
    bisection first asks), on several, a --fit search that fits (or, MoE, _spread's). The same bool as the
    placement's own, with neither _best's guess nor the top-up laid out."""
    key = (model, weight_format, budgets, options)
    if key in _BEST:
        lay = _BEST[key][0]
        return lay is not None and lay.fits(dict(budgets))
    names, usable, kw = tuple(d for d, _ in budgets), dict(budgets), dict(options)
    tensors, _ = _tensors(model, weight_format, kw.get("build"))
    if len(names) > 1:
        return _several(model, tensors, names, usable, kw) is not None
    n = model.num_layers
    top = n + 1 + _blocks(model, kw)

    def fits(ngl: int, ncm: int) -> bool:
        flags = dict(gpus=names, n_gpu_layers=ngl, tensor_split=None, n_cpu_moe=ncm, **kw)
        return not _over(model, tensors, usable, **flags) and layout(model, tensors, **flags).fits(usable)
    if model.facts.moe is not None:     # _best: keeps(0), else largest(0, top, ...) is None only where -ngl 0 fails
        return fits(top, n) or fits(0, n)
    return fits(top, 0) or fits(1, 0) or fits(0, 0)     # _best: every layer, largest(1, top, ...)'s first ask, -ngl 0


# ---- the plan ---------------------------------------------------------------------------------

"""What llama.cpp's ``--fit on`` chooses, emulated on kvmem's memory model (kvmem.engines.llamacpp.layouts).

Transcribed from common/fit.cpp common_params_fit_impl at llama.cpp 0c1e57098 (the build
llama-cpp-python 0.3.36 vendors), with fit's 1 GiB margin per device (common/arg.cpp --fit-target).
Each device's memory is what kvmem's layout gives for the trial flags (fit.cpp measures the same by
loading the model with no_alloc: model + context + compute per device, the CUDA context apart):

step 1  nothing changes if every device keeps its margin at full offload;
step 2  a context the user did not set (-c 0) is lowered by linear interpolation between n_ctx_train
        and --fit-ctx (4096), rounded down to 256 x streams; one device: "entire model can be fit by
        reducing context" ends it;
step 3  devices are filled back to front with whole layers (MoE: "dense-only" layers, their experts
        on the host; the last device's first layer stays full: it is the output layer's), each by
        false position between what it holds and every unassigned layer;
step 4  (MoE, when the dense parts of every layer fit the devices together) front to back, device
        ``id`` takes the dense-only layers of the devices from ``id_dense_start`` on as FULL layers
        (false position again), so the first devices hold whole layers with their experts and the
        experts of the last layers stay on the host; then it tries one more layer split: UP (its
        ffn_gate/ffn_down, router included, overflow), then GATE (only ffn_down), else ATTN (all its
        FFN), the overflow going to the NEXT device (the host from the last one), each kept only if
        this device and the next stay strictly under their targets.
fit gives up when the user set -ngl, -ts, -ot or --n-cpu-moe (kvmem calls it without them).
"""

from __future__ import annotations

from ...model import Model
from . import layouts
from .ctx_train import n_ctx_train
from .fit_probes import Probe, sketched_floor
from .fit_probes import step as _step
from .layouts import CUDA_CONTEXT_BYTES, MAX_LAYERS, Layout
from .layouts import layout as _layout
from .placement import CPU, free_split

__all__ = ["fit_on", "FIT_MARGIN_BYTES", "FIT_CTX", "Trial", "fit_layout", "laid", "layout"]

FIT_MARGIN_BYTES = 1 << 30      # common/arg.cpp --fit-target: 1024 MiB per device
FIT_CTX = 4096                  # common/arg.cpp --fit-ctx

# common/fit.cpp get_overflow_pattern: the tensors of layer N each fraction moves
_FRACTION = {"ATTN": r"\.ffn_(gate|up|gate_up|down).*", "UP": r"\.ffn_(gate|gate_up|down).*",
             "GATE": r"\.ffn_down.*", "MOE": r"\.ffn_(up|down|gate_up|gate)_(ch|)exps"}


_LAID: dict = {}        # (model, tensors id, flags) -> (tensors, Layout): the searches ask the same flags again
_LAID_KEPT = 256


def layout(model: Model, tensors, **flags) -> Layout:
    """kvmem.engines.llamacpp.layouts.layout, remembered for the last few flags asked with these very
    tensors (a Layout is frozen): kvmem's placement, --fit's, the verdict's searches and the sweep's
    other GPUs ask many of the same (every expert on the host, full offload, a search's first trials)."""
    try:
        key = (model, id(tensors), tuple(sorted((k, _frozen(v)) for k, v in flags.items())))
        hit = _LAID.get(key)
    except TypeError:           # a value that does not hash: laid out, not remembered
        return _layout(model, tensors, **flags)
    if hit is not None and hit[0] is tensors:
        return hit[1]
    lay = _layout(model, tensors, **flags)
    if len(_LAID) >= _LAID_KEPT:
        _LAID.pop(next(iter(_LAID)))
    _LAID[key] = (tensors, lay)
    return lay


def laid(model: Model, tensors, **flags) -> Layout | None:
    """layout's, where it has these flags laid out already; None (nothing laid out) where not."""
    try:
        hit = _LAID.get((model, id(tensors), tuple(sorted((k, _frozen(v)) for k, v in flags.items()))))
    except TypeError:
        hit = None
    return hit[1] if hit is not None and hit[0] is tensors else None


def _frozen(value):
    return tuple(_frozen(v) for v in value) if isinstance(value, (list, tuple)) else value


# one device's share (fit.cpp struct ngl_t): layers, of which the last n_part are partial, the first
# partial one overflowing ``kind`` to ``target`` (the others: their experts to the host)
Trial = tuple   # ((n_layer, n_part, kind), ...) per device, then the overflow targets


def _mmproj_on_first(kw: dict, gpu: str) -> int:
    """The projector's bytes on the first GPU: its weights and compute buffer there, as layouts.layout counts
    them. llama-server's --fit adds the same to that device's target (llama.cpp@0c1e57098
    tools/server/server-context.cpp#L1044-L1070: mtmd_get_memory_usage per device, weights and compute, added to
    fit_params_target; the host's part lands past the GPUs' targets, which fit.cpp never reads). mtmd's weights
    there are the tensors' ggml_nbytes (clip.cpp#L2181), the layout's the padded buffer: at most 127 B a tensor
    more (1,728 B for Gemma 3's 439 tensors), so fit's choice can differ only within those bytes of a target."""
    if not kw.get("mmproj_offload", True):
        return 0
    return kw.get("mmproj_bytes", 0) + dict(kw.get("mmproj_compute") or ()).get(gpu, 0)


def fit_layout(model: Model, tensors, gpus, per_device, overflow, kw: dict, n_ctx: int,
               remember: bool = True) -> Layout:
    """The flags fit.cpp's set_ngl_tensor_split_tbo writes for ``per_device`` ((n_layer, n_part,
    kind) per device) and ``overflow`` (where each device's first partial layer overflows), laid out:
    -ngl the sum of layers, -ts the layers per device (several devices), and per partial layer a
    pattern to the host (MOE) or, for the first partial layer of a device, ``kind`` to its target. ``remember``
    False: laid out afresh and not kept (_weights_floor's layouts, which no search asks again)."""
    n = model.num_layers
    ngl = sum(p[0] for p in per_device)
    overrides, moe_layers, il0 = [], [], n + 1 - ngl
    for d, (layers, part, kind) in enumerate(per_device):
        il0 += layers - part
        for il in range(il0, min(il0 + part, n)):      # fit also writes a pattern for il = n, which matches nothing
            if il == il0 and kind != "MOE":
                overrides.append((rf"blk\.{il}{_FRACTION[kind]}", overflow[d]))
            elif il == il0 and overflow[d] != CPU:
                overrides.append((rf"blk\.{il}{_FRACTION['MOE']}", overflow[d]))
            else:
                moe_layers.append(il)
        il0 += part
    if moe_layers:      # one -ot for all of them: the same tensors as fit's one pattern per layer
        overrides.append((rf"blk\.({'|'.join(map(str, moe_layers))}){_FRACTION['MOE']}", CPU))
    split = tuple(p[0] for p in per_device) if len(gpus) > 1 else None
    if split is not None and not any(split):
        split = None
    return (layout if remember else layouts.layout)(model, tensors, gpus=gpus, n_gpu_layers=ngl, tensor_split=split,
                                                    override_tensor=tuple(overrides), **{**kw, "n_ctx": n_ctx})


def _layers_per_gpu(lay: Layout) -> str:
    """"CUDA0 41 layers, CUDA1 7": the repeating layers each GPU holds."""
    counts = [(g, sum(d == g for d in lay.placement.layer_device)) for g in lay.placement.gpus]
    return ", ".join(f"{g} {k}" + " layers" * (i == 0) for i, (g, k) in enumerate(counts))


def fit_on(model: Model, tensors, gpus, free: dict, *, n_ctx: int | None, kw: dict,
           margin: int = FIT_MARGIN_BYTES, fit_ctx: int = FIT_CTX) -> tuple[Layout | None, str]:
    """What llama.cpp's --fit on would choose (module doc); ``free``: device -> free bytes as
    llama.cpp sees them (memory - CUDA context); ``n_ctx`` None: -c unset. Its note says where the choice
    overruns a GPU and how llama.cpp's load then fails (_overrun)."""
    lay, note = _fit_on(model, tensors, gpus, free, n_ctx=n_ctx, kw=kw, margin=margin, fit_ctx=fit_ctx)
    return lay, note + _overrun(lay, gpus, free)


def _overrun(lay: Layout | None, gpus, free: dict) -> str:
    """fit.cpp checks a device only while it fills it (and, for the extra layer, the next one), so a later
    device's layers can still grow an earlier one's compute buffer (the host experts it copies in); after its
    last step it writes the flags with no check (llama.cpp@0c1e57098 common/fit.cpp#L876, then "successfully fit
    params", #L893) and llama.cpp loads them (common/common.cpp#L1233): the model buffers device by device
    ("unable to allocate CUDA1 buffer", src/llama-model.cpp#L1886, and "failed to load model", common/common.cpp
    #L1346), then the KV cache ("failed to allocate buffer for kv cache", src/llama-kv-cache.cpp#L288), then the
    compute buffers ("failed to allocate compute buffers", src/llama-context.cpp#L2574). "" where every GPU
    holds its part."""
    if lay is None:
        return ""
    over = [g for g in gpus if lay.total_bytes[g] - CUDA_CONTEXT_BYTES > free[g]]
    if not over:
        return ""
    parts = ", ".join(f"{g} {(lay.total_bytes[g] - CUDA_CONTEXT_BYTES) / MiB:,.0f} MiB of {free[g] / MiB:,.0f} "
                      "MiB free" for g in over)
    stages = ((lambda d: d.model_bytes, "unable to allocate {g} buffer / failed to load model"),
              (lambda d: d.model_bytes + d.kv_bytes, "failed to allocate buffer for kv cache"),
              (lambda d: lay.total_bytes[d.device] - CUDA_CONTEXT_BYTES, "failed to allocate compute buffers"))
    first, message = next((g, message) for took, message in stages for g in gpus
                          if took(lay.placement.device(g)) > free[g])
    return (f"; its choice does NOT fit: {parts} (fit.cpp checks a device only while it fills it, then writes "
            f"its choice unchecked): llama.cpp stops at load, '{message.format(g=first)}'")


MiB = 1 << 20


def _weights_floor(model: Model, tensors, gpus, flags: dict) -> list:
    """fit_probes.sketched_floor of a probe's flags (fit_layout's ``flags``), laid out afresh and not kept."""
    return sketched_floor(lambda: fit_layout(model, tensors, gpus, flags["per_device"], flags["overflow"], {
        **flags["kw"], "schedule": False}, flags["n_ctx"], remember=False), gpus)


def _fit_on(model: Model, tensors, gpus, free: dict, *, n_ctx: int | None, kw: dict,
            margin: int = FIT_MARGIN_BYTES, fit_ctx: int = FIT_CTX) -> tuple[Layout | None, str]:
    """fit_on's search."""
    n = model.num_layers
    nd = len(gpus)
    ctx_train = n_ctx_train(model) or fit_ctx      # -c 0: the GGUF's context_length (ctx_train.py)
    n_streams = 1 if kw.get("kv_unified") else max(1, kw.get("n_seq", 1))
    ctx = n_ctx if n_ctx is not None else ctx_train * n_streams
    targets = [free[g] - margin for g in gpus]
    # fit measures with the user's flags: no -ts, so llama.cpp's split by free memory (placement.free_split)
    split = free_split([free[g] for g in gpus]) if nd > 1 else None

    def used(lay, g):
        return lay.total_bytes[g] - CUDA_CONTEXT_BYTES

    def probe(**flags) -> Probe:
        """One set of flags, laid out as far as fit's comparisons read it (Probe); one laid out already is read."""
        kept = laid(model, tensors, **flags)
        return Probe(lambda: [used(layout(model, tensors, **flags), g) for g in gpus],
                     None if kept is None else [used(kept, g) for g in gpus],
                     lambda: sketched_floor(lambda: layouts.layout(model, tensors, **flags, schedule=False), gpus))

    at_full = dict(gpus=gpus, n_gpu_layers=MAX_LAYERS, tensor_split=split, **{**kw, "n_ctx": ctx})
    m_full = probe(**at_full)       # full offload: a model whose weights alone are over a target schedules no graph
    if nd == 0 or m_full.within(targets):
        full = layout(model, tensors, **at_full)
        return full, "no GPU: everything on the host" if nd == 0 else "it fits at full offload: --fit changes " \
            "nothing" + (f" (no -ts: llama.cpp splits the layers by free memory, {_layers_per_gpu(full)})" if nd > 1
                         else "")
    # step 2 (fit.cpp "try reducing memory use by reducing the context size")
    note_ctx = ""
    ctx_min = fit_ctx * n_streams
    if n_ctx is None and ctx > ctx_min and not m_full.spare(targets, 0):
        full = layout(model, tensors, **at_full)
        sum_used = sum(used(full, g) for g in gpus)
        target = sum(free[g] - margin for g in gpus)
        if nd > 1:   # fit.cpp: model_per_layer = sum_projected_model / min(n_gpu_layers, hp_ngl)
            per_layer = sum(full.placement.device(g).model_bytes for g in gpus) // n
            target -= (nd + 1) * per_layer // (2 if model.facts.moe is None else 6)
        lo = layout(model, tensors, gpus=gpus, n_gpu_layers=MAX_LAYERS, tensor_split=split, **{**kw, "n_ctx": ctx_min})
        sum_lo = sum(used(lo, g) for g in gpus)
        new_ctx = ctx_min
        if target > sum_lo and sum_used > sum_lo:
            new_ctx += (ctx - ctx_min) * (target - sum_lo) // (sum_used - sum_lo)
            align = 256 * n_streams
            new_ctx = max(new_ctx - new_ctx % align, ctx_min)
            if nd == 1:
                return layout(model, tensors, gpus=gpus, n_gpu_layers=MAX_LAYERS, **{**kw, "n_ctx": new_ctx}), \
                    f"context lowered from {ctx} to {new_ctx}: the entire model fits"
        note_ctx = f"context lowered from {ctx} to {new_ctx}; "
        ctx = new_ctx
    moe = model.facts.moe is not None
    memo = {}

    def mem(per, overflow):
        key = (tuple(per), tuple(overflow))
        if not any(p[0] for p in per):
            # no layer on a GPU: kvmem's layout puts nothing there but a projector on the first, its weights and
            # its compute buffer there (its host side, the costly CPU graph, is not what fit measures); the same
            # numbers without laying it out
            return Probe(None, [_mmproj_on_first(kw, gpus[0]) if d == 0 else 0 for d in range(nd)])
        if key not in memo:
            flags = dict(per_device=key[0], overflow=key[1], kw=kw, n_ctx=ctx)   # the probe's own (per is mutated)
            memo[key] = Probe(lambda: [used(fit_layout(model, tensors, gpus, **flags), g) for g in gpus], None,
                               lambda: _weights_floor(model, tensors, gpus, flags))
        return memo[key]

    # every expert on the host, every layer offloaded, the default split: room left over the targets, summed
    surplus_cpu_moe = moe and probe(**{**at_full, "n_ctx": ctx, "n_cpu_moe": n}).spare(targets, 1)
    host = [CPU] * nd
    per = [(0, 0, "MOE")] * nd
    m = mem(per, host)
    # step 3: back to front, dense-only layers (fit.cpp "filling dense(-only) layers back-to-front")
    for d in range(nd - 1, -1, -1):
        unassigned = n + 1 - sum(p[0] for p in per[d + 1:])
        high = list(per)
        high[d] = (unassigned, (unassigned if d < nd - 1 else unassigned - 1) if moe else 0, "MOE")
        if high[d][0] == 0:
            continue
        m_high = mem(high, host)
        if m_high.over(d, targets[d]):
            delta = high[d][0] - per[d][0]
            while delta > 1:
                step = _step(delta, targets[d], m[d], m_high[d])
                layers, part, kind = per[d]
                if moe:
                    part += step - 1 if d == nd - 1 and part == 0 else step
                test = list(per)
                test[d] = (layers + step, part, kind)
                m_test = mem(test, host)
                if not m_test.over(d, targets[d]):
                    per, m = test, m_test
                else:
                    high, m_high = test, m_test
                delta = high[d][0] - per[d][0]
        else:
            per, m = high, m_high
    if not surplus_cpu_moe:
        lay = fit_layout(model, tensors, gpus, per, host, kw, ctx)
        return lay, note_ctx + "layers filled back to front" + (
            ", every expert of them on the host (the dense parts alone do not fit)" if moe else "")
    # step 4: dense-only layers made full layers, front to back
    overflow = list(host)
    dense_start = nd
    for d in range(nd - 1, -1, -1):
        if per[d][0] > 0:
            dense_start = d
            continue
        break
    split_note = ""
    d = 0
    while d <= dense_start < nd:
        high = list(per)
        for j in range(dense_start, nd):
            move = high[j][0] if j < nd - 1 else high[j][0] - 1
            high[d] = (high[d][0] + move, high[d][1], high[d][2])
            high[j] = (high[j][0] - move, 0, high[j][2])
        dense_start_high = nd - 1
        m_high = mem(high, overflow)
        if m_high.over(d, targets[d]):
            delta = (high[d][0] - high[d][1]) - (per[d][0] - per[d][1])
            while delta > 1:
                step = _step(delta, targets[d], m[d], m_high[d])
                test, start, done = list(per), dense_start, 0
                while start < nd:
                    c = min(step - done, test[start][1])
                    test[start] = (test[start][0] - c, test[start][1] - c, test[start][2])
                    test[d] = (test[d][0] + c, test[d][1], test[d][2])
                    done += c
                    if test[start][1] > 0:
                        break
                    start += 1
                m_test = mem(test, overflow)
                if not m_test.over(d, targets[d]):
                    per, m, dense_start = test, m_test, start
                else:
                    high, m_high, dense_start_high = test, m_test, start
                delta = (high[d][0] - high[d][1]) - (per[d][0] - per[d][1])
        else:
            per, m, dense_start = high, m_high, dense_start_high
        # "try to fit at least part of one more layer"
        if dense_start < nd and per[dense_start][0] > (0 if d < nd - 1 else 1) and per[dense_start][1] > 0:
            test, start = list(per), dense_start
            test[start] = (test[start][0] - 1, test[start][1] - 1, test[start][2])
            test[d] = (test[d][0] + 1, test[d][1] + 1, test[d][2])
            if test[start][1] == 0:
                start += 1
            over = list(overflow)
            if d < nd - 1:
                over[d] = gpus[d + 1]

            def ok(m_test, d=d):
                return m_test.under(((d, targets[d]),) + (((d + 1, targets[d + 1]),) if d + 1 < nd else ()))

            test[d] = (test[d][0], test[d][1], "UP")
            m_test = mem(test, over)
            if ok(m_test):
                per, overflow, m, dense_start, split_note = list(test), over, m_test, start, "UP"
                test[d] = (test[d][0], test[d][1], "GATE")
                m_test = mem(test, over)
                if ok(m_test):
                    per, m, split_note = list(test), m_test, "GATE"
            else:
                test[d] = (test[d][0], test[d][1], "ATTN")
                m_test = mem(test, over)
                if ok(m_test):
                    per, overflow, m, dense_start, split_note = list(test), over, m_test, start, "ATTN"
        d += 1
    lay = fit_layout(model, tensors, gpus, per, overflow, kw, ctx)
    note = note_ctx + ("whole layers front to back, the experts of the last layers on the host"
                       if nd == 1 else "dense parts back to front, then whole layers front to back over every GPU, "
                       "the experts of the last layers on the host")
    if split_note:
        note += f", one layer's FFN split ({split_note})"
    return lay, note

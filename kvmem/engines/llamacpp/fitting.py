"""What llama.cpp's ``--fit on`` chooses, emulated on kvmem's memory model (kvmem.engines.llamacpp.layouts).

``--fit on`` (common/fit.cpp common_params_fit_impl, ggml-org/llama.cpp 08033df0), emulated on
    kvmem's memory model with fit's 1 GiB margin per device (common/arg.cpp --fit-target default):
    step 1 nothing changes if every device keeps the margin at full offload; step 2 a context the
    user did not set (-c 0) is lowered by linear interpolation between n_ctx_train and --fit-ctx
    (4096), rounded down to 256 x streams ("entire model can be fit by reducing context" ends it
    on one device); step 3 devices are filled back to front with whole layers (MoE: "dense-only"
    layers, experts on the host); step 4 (MoE, when the dense parts fit) dense-only layers are
    turned into full layers front to back, so the experts of the LAST layers stay on the host,
    then one more layer is tried with only ffn_gate/ffn_down (UP) or ffn_down (GATE) on the host,
    else only its FFN (ATTN). fit gives up when the user set -ngl, -ts, -ot or --n-cpu-moe.
    kvmem searches each step exhaustively where fit uses false position; both end on the largest
    count that fits because memory grows with each layer.
"""

from __future__ import annotations

from ...model import Model
from .layouts import CUDA_CONTEXT_BYTES, MAX_LAYERS, Layout, layout
from .placement import CPU

__all__ = ["fit_on", "largest", "FIT_MARGIN_BYTES", "FIT_CTX"]

FIT_MARGIN_BYTES = 1 << 30      # common/arg.cpp --fit-target: 1024 MiB per device
FIT_CTX = 4096                  # common/arg.cpp --fit-ctx


def largest(lo: int, hi: int, ok) -> int | None:
    """The largest n in lo..hi with ok(n), ok monotone (True up to some n); None when ok(lo) fails."""
    if not ok(lo):
        return None
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid - 1)
    return lo


_FRACTION = {"ATTN": r"\.ffn_(gate|up|gate_up|down).*", "UP": r"\.ffn_(gate|gate_up|down).*",
             "GATE": r"\.ffn_down.*", "MOE": r"\.ffn_(up|down|gate_up|gate)_(ch|)exps"}


def _fit_layout(model, tensors, gpus, per_device, kw, n_ctx, partial_first=None):
    """set_ngl_tensor_split_tbo: per_device = [(n_layer, n_part)]; the first partial layer of a
    device may overflow a fraction (partial_first) instead of its experts."""
    n = model.num_layers
    ngl = sum(a for a, _ in per_device)
    overrides, moe_layers, il0 = [], [], n + 1 - ngl
    for d, (layers, part) in enumerate(per_device):
        il0 += layers - part
        for il in range(il0, min(il0 + part, n)):      # fit also writes a pattern for il = n, which matches nothing
            kind = partial_first[d] if partial_first and il == il0 and partial_first[d] else "MOE"
            if kind == "MOE":
                moe_layers.append(il)
            else:
                overrides.append((rf"blk\.{il}{_FRACTION[kind]}", CPU))
        il0 += part
    if moe_layers:      # one -ot for all of them: the same tensors as fit's one pattern per layer
        overrides.append((rf"blk\.({'|'.join(map(str, moe_layers))}){_FRACTION['MOE']}", CPU))
    split = tuple(a for a, _ in per_device) if len(gpus) > 1 else None
    if split is not None and not any(split):
        split = None
    return layout(model, tensors, gpus=gpus, n_gpu_layers=ngl, tensor_split=split, override_tensor=tuple(overrides),
                  **{**kw, "n_ctx": n_ctx})


def fit_on(model: Model, tensors, gpus, free: dict, *, n_ctx: int | None, kw: dict,
           margin: int = FIT_MARGIN_BYTES, fit_ctx: int = FIT_CTX) -> tuple[Layout | None, str]:
    """What llama.cpp's --fit on would choose (module doc); ``free``: device -> free bytes as
    llama.cpp sees them (memory - CUDA context); ``n_ctx`` None: -c unset."""
    n = model.num_layers
    nd = len(gpus)
    ctx_train = model.max_position_embeddings or fit_ctx
    n_streams = max(1, kw.get("n_seq", 1))
    ctx = n_ctx if n_ctx is not None else ctx_train * n_streams
    targets = {g: free[g] - margin for g in gpus}

    def used(lay, g):
        return lay.total_bytes[g] - CUDA_CONTEXT_BYTES

    full = layout(model, tensors, gpus=gpus, n_gpu_layers=MAX_LAYERS, **{**kw, "n_ctx": ctx})
    if nd == 0:
        return full, "no GPU: everything on the host"
    if all(used(full, g) <= targets[g] for g in gpus):
        return full, "it fits at full offload: --fit changes nothing"
    if n_ctx is None and ctx > fit_ctx * n_streams:
        lo = layout(model, tensors, gpus=gpus, n_gpu_layers=MAX_LAYERS, **{**kw, "n_ctx": fit_ctx * n_streams})
        target = sum(targets.values())
        sum_full, sum_lo = sum(used(full, g) for g in gpus), sum(used(lo, g) for g in gpus)
        if nd > 1:
            per_layer = sum(full.placement.device(g).model_bytes for g in gpus) // (n + 1)
            target -= (nd + 1) * per_layer // (2 if model.facts.moe is None else 6)
        new_ctx = fit_ctx * n_streams
        if target > sum_lo and sum_full > sum_lo:
            new_ctx += (ctx - new_ctx) * (target - sum_lo) // (sum_full - sum_lo)
            align = 256 * n_streams
            new_ctx = max(new_ctx - new_ctx % align, fit_ctx * n_streams)
            if nd == 1:
                return layout(model, tensors, gpus=gpus, n_gpu_layers=MAX_LAYERS, **{**kw, "n_ctx": new_ctx}), \
                    f"context lowered from {ctx} to {new_ctx}: the entire model fits"
        ctx = new_ctx
    moe = model.facts.moe is not None
    per = [(0, 0)] * nd

    def fits(trial, d, partial_first=None):
        lay = _fit_layout(model, tensors, gpus, trial, kw, ctx, partial_first)
        return lay.total_bytes[gpus[d]] - CUDA_CONTEXT_BYTES <= targets[gpus[d]]

    for d in range(nd - 1, -1, -1):      # step 3: back to front, whole (MoE: dense-only) layers
        free_layers = n + 1 - sum(a for a, _ in per[d + 1:])
        k = largest(0, free_layers, lambda k, d=d, base=tuple(per): fits(_with_layers(base, d, k, moe), d)) or 0
        per = _with_layers(per, d, k, moe)
    if moe:                              # step 4: dense-only layers made full, front to back
        for d in range(nd):
            part = per[d][1]
            if not part:
                continue
            c = largest(0, part, lambda c, d=d, base=tuple(per): fits(_converted(base, d, c), d)) or 0
            per = _converted(per, d, c)
            if per[d][1]:
                kinds = ("UP", "GATE") if fits(per, d, _first(nd, d, "UP")) else ("ATTN",)
                chosen = [kind for kind in kinds if fits(per, d, _first(nd, d, kind))]
                if chosen:
                    lay = _fit_layout(model, tensors, gpus, per, kw, ctx, partial_first=_first(nd, d, chosen[-1]))
                    return lay, "layers filled back to front, the experts of the last layers on the host, " \
                        f"one layer's FFN split ({chosen[-1]})"
    lay = _fit_layout(model, tensors, gpus, per, kw, ctx)
    return lay, "layers filled back to front" + (", the experts of the last layers on the host" if moe else "")


def _with_layers(per, d, k, moe):
    trial = list(per)
    trial[d] = (k, (k if d < len(per) - 1 else max(k - 1, 0)) if moe else 0)
    return trial


def _converted(per, d, c):
    trial = list(per)
    trial[d] = (trial[d][0], trial[d][1] - c)
    return trial


def _first(nd, d, kind):
    out = [None] * nd
    out[d] = kind
    return out

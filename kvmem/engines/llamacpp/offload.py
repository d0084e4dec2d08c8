"""Layer and expert offload for llama.cpp: memory per device for one set of flags, the flags that
keep the most on the GPUs, what ``--fit on`` picks, the llama-server commands and a decode bound.

Memory of one set of flags (``layout``), per GPU and on the host:
    model     placement.place: the GGUF's tensors (or tensors.synthesised_tensors) on their devices
    KV        plan.rows per layer on the layer's device (host with kv_offload=False)
    compute   compute.llamacpp_compute_buffer. Host only (no GPU holds a layer): the CPU buffer,
              llama.cpp's own prompt and one-token graphs allocated as ggml-alloc allocates them,
              equal to the printed "CPU compute buffer size" for llama / mistral / mixtral /
              qwen2 / qwen3 / qwen3_moe / gemma3 (200 random GGUFs in
              tests/oracles/test_llamacpp_buffers_oracle.py);
              other families and older builds get the estimate, marked in ``compute_exact``.
              GPUs: an estimate on every GPU that holds a layer, the formula that reproduces the
              published CUDA logs (Llama-3-8B, Mistral-7B; tests/engines/test_llamacpp_logs.py),
              and n_ubatch x hidden x 4 B on the host (the input embeddings the host looks up:
              the "CUDA_Host compute buffer", 8.00 MiB against the 9.01 printed for Llama-3-8B at
              n_ubatch 512, docs/research/llamacpp_offload_logs.json); the CUDA graph is not
              transcribed.
    + CUDA_CONTEXT_BYTES per GPU that the CUDA runtime takes before llama.cpp allocates.

kvmem's placement (``offload``): the most on the GPUs at the given context. MoE: every layer
    offloaded (-ngl 999) and the fewest --n-cpu-moe that fits; if even all experts on the host do
    not fit, fewer layers. Dense: the largest -ngl that fits. Several GPUs: -ts in proportion to
    the memory each has free (llama.cpp's own default split, llama_model::load_tensors).

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

Decode bound: one token reads every weight it uses once (routed experts: top_k of n_experts of
    each expert tensor) and the KV of the context; time = bytes on GPU d / bandwidth of d summed
    over GPUs (layers run one after another) + host bytes / host bandwidth. An upper bound on
    tokens per second: kernels, PCIe and the CPU's compute are not counted.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from importlib import resources

from ...model import Model
from .compute import llamacpp_compute_buffer, llamacpp_compute_bytes
from .placement import CPU, Placement, place
from .plan import run_plan
from .settings import CURRENT, DEFAULTS
from .tensors import tensors_for

__all__ = ["Layout", "OffloadPlan", "layout", "offload", "fit_on", "llamacpp_offload", "decode_curve",
           "llamacpp_decode_curve", "host_memory_presets", "host_bandwidth", "FIT_MARGIN_BYTES", "FIT_CTX",
           "CUDA_CONTEXT_BYTES"]

FIT_MARGIN_BYTES = 1 << 30      # common/arg.cpp --fit-target: 1024 MiB per device
FIT_CTX = 4096                  # common/arg.cpp --fit-ctx
CUDA_CONTEXT_BYTES = 512 << 20  # the CUDA context, as kvmem.engines.llamacpp.budget counts it
MAX_LAYERS = 999                # -ngl 999: "all layers" as llama.cpp's docs write it


@dataclass(frozen=True)
class Layout:
    """One set of llama.cpp flags and the memory it takes on each device."""

    n_gpu_layers: int
    tensor_split: tuple
    n_cpu_moe: int
    override_tensor: tuple
    n_ctx: int
    placement: Placement
    compute_bytes: dict           # device -> compute buffer (llama.cpp's own where compute_exact)
    total_bytes: dict             # device -> model + KV + compute (+ CUDA context on GPUs; host: resident tensors)
    decode_bytes: dict            # device -> bytes read per decoded token
    compute_exact: dict = field(default_factory=dict)   # device -> compute_bytes is llama.cpp's own (not an estimate)

    def fits(self, budgets: dict) -> bool:
        return all(self.total_bytes[d] <= b for d, b in budgets.items())

    def flags(self) -> list[str]:
        out = ["-ngl", str(self.n_gpu_layers)]
        if len(self.placement.gpus) > 1:
            out += ["-ts", ",".join(_num(x) for x in self.tensor_split)]
        if self.n_cpu_moe:
            out += ["--n-cpu-moe", str(self.n_cpu_moe)]
        for pattern, target in self.override_tensor:
            out += ["-ot", f"{pattern}={target}"]
        if not self.placement.kv_offload:
            out.append("-nkvo")
        if not self.placement.mmap:
            out.append("--no-mmap")
        return out

    def decode_tokens_per_s(self, gpu_bandwidths: dict, host_bandwidth: int | None) -> float | None:
        seconds = 0.0
        for device, nbytes in self.decode_bytes.items():
            if not nbytes:
                continue
            bw = host_bandwidth if device == CPU else gpu_bandwidths.get(device)
            if not bw:
                return None
            seconds += nbytes / bw
        return 1.0 / seconds if seconds else None

    def to_dict(self) -> dict:
        return {"flags": self.flags(), "n_ctx": self.n_ctx, "n_gpu_layers": self.n_gpu_layers,
                "offloaded_layers": self.placement.offloaded_layers, "n_cpu_moe": self.n_cpu_moe,
                "devices": [{**d.to_dict(), "compute_bytes": self.compute_bytes[d.device],
                             "compute_exact": self.compute_exact.get(d.device, False),
                             "total_bytes": self.total_bytes[d.device],
                             "decode_bytes": self.decode_bytes[d.device]} for d in self.placement.devices]}


def _num(x) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


@dataclass(frozen=True)
class OffloadPlan:
    """kvmem's placement and --fit's for the same model, context and free memory."""

    model: str
    tensors_source: str
    gpus: tuple                   # names
    budgets: dict                 # device -> bytes a layout may use (GPU: memory - CUDA context)
    context: int
    best: Layout | None           # kvmem: the most on the GPUs at this context
    fit: Layout | None            # what --fit on would choose
    fit_note: str
    decode_best: float | None     # tokens/s bound
    decode_fit: float | None
    command_best: str
    command_fit: str
    notes: tuple = ()

    def to_dict(self) -> dict:
        return {"model": self.model, "tensors_source": self.tensors_source, "gpus": list(self.gpus),
                "budgets": self.budgets, "context": self.context,
                "best": self.best.to_dict() if self.best else None, "fit": self.fit.to_dict() if self.fit else None,
                "fit_note": self.fit_note, "decode_tokens_per_s_best": self.decode_best,
                "decode_tokens_per_s_fit": self.decode_fit, "command_best": self.command_best,
                "command_fit": self.command_fit, "notes": list(self.notes)}


# ---- host memory bandwidth presets ------------------------------------------------------------

def host_memory_presets() -> dict:
    """name -> {"bandwidth_bytes_per_s", "source"} (data/host_memory.json)."""
    text = resources.files("kvmem").joinpath("data/host_memory.json").read_text(encoding="utf-8")
    return {e["name"]: e for e in json.loads(text)["presets"]}


def host_bandwidth(value) -> int | None:
    """A host bandwidth: a preset name, bytes/s (int), or "89.6GB/s" text."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    presets = host_memory_presets()
    if isinstance(value, str) and value in presets:
        return presets[value]["bandwidth_bytes_per_s"]
    if isinstance(value, str) and value.strip().lower().endswith("/s"):
        from ...units import parse_bytes
        return parse_bytes(value.strip()[:-2])
    raise ValueError(f"host_bandwidth must be a preset ({', '.join(presets)}), bytes per second or 'NGB/s', "
                     f"got {value!r}")


# ---- one layout -----------------------------------------------------------------------------

def layout(model: Model, tensors, *, gpus=(), n_gpu_layers: int = MAX_LAYERS, tensor_split=None,
           n_cpu_moe: int = 0, override_tensor=(), n_ctx: int, n_ubatch: int = 512, type_k="f16", type_v="f16",
           flash_attn=None, mmap: bool = True, kv_offload: bool = True, n_seq: int = 1, mmproj_bytes: int = 0,
           mmproj_offload: bool = True) -> Layout:
    """Memory per device for one set of llama.cpp flags (see the module doc)."""
    options = {**DEFAULTS, "n_ctx": n_ctx, "n_seq": n_seq, "n_ubatch": n_ubatch, "type_k": type_k, "type_v": type_v,
               "flash_attn": flash_attn}
    s, plan, _ = run_plan(model, tokens=1, batch=1, kv_dtype="fp16", tp=1, pp=1, options=options)
    kv_rows = [k + v + state for k, v, state in plan.rows]
    n_layer = model.num_layers
    p = place(tensors, n_layer=n_layer, n_gpu_layers=n_gpu_layers, gpus=gpus, tensor_split=tensor_split,
              n_cpu_moe=n_cpu_moe, override_tensor=override_tensor, mmap=mmap, kv_offload=kv_offload,
              kv_per_layer=kv_rows)
    full = llamacpp_compute_bytes(model, n_ctx=plan.n_ctx, n_ubatch=s.n_ubatch, flash_attn=s.flash_attn,
                                  cells_per_stream=plan.n_ctx_seq)
    compute, total, decode, exact = {}, {}, {}, {}
    moe = model.facts.moe
    share = (moe.top_k, moe.experts) if moe else (1, 1)
    any_gpu = p.offloaded_layers > 0
    for d in p.devices:
        if d.device == CPU:
            if any_gpu:
                compute[d.device] = s.n_ubatch * model.hidden_size * 4
            else:
                host = llamacpp_compute_buffer(model, n_ctx=plan.n_ctx, n_ubatch=s.n_ubatch, flash_attn=s.flash_attn,
                                               cells_per_stream=plan.n_ctx_seq, type_k=s.type_k, type_v=s.type_v,
                                               n_outputs=s.n_batch, n_seq=s.n_seq, kv_unified=plan.unified,
                                               swa_cells=plan.swa_cells, backend="cpu")
                compute[d.device], exact[d.device] = host.bytes, host.exact and s.build == CURRENT
            # resident host memory: the host tensors themselves (an mmap span also covers GPU tensors
            # between them, read once at load: the printed CPU_Mapped figure is placement's model_bytes)
            total[d.device] = sum(d.group_bytes.values()) + d.kv_bytes + compute[d.device]
        else:
            holds = bool(d.layers) or p.output_device == d.device
            compute[d.device] = full if holds else 0
            total[d.device] = d.model_bytes + d.kv_bytes + compute[d.device] + CUDA_CONTEXT_BYTES
        weights = 0
        for t in p.tensors:
            if t.device != d.device or t.group == "embeddings":
                continue            # token_embd: one row per token (GET_ROWS)
            weights += t.nbytes * share[0] // share[1] if t.group == "experts" else t.nbytes
        decode[d.device] = weights + d.kv_bytes
    if mmproj_bytes:    # the projector's weights (its compute buffer is not counted)
        where = gpus[0] if gpus and mmproj_offload else CPU
        total[where] += mmproj_bytes
    return Layout(n_gpu_layers=n_gpu_layers, tensor_split=p.tensor_split, n_cpu_moe=n_cpu_moe,
                  override_tensor=tuple(override_tensor), n_ctx=n_ctx, placement=p, compute_bytes=compute,
                  total_bytes=total, decode_bytes=decode, compute_exact=exact)


# ---- kvmem's placement ------------------------------------------------------------------------

def _largest(lo: int, hi: int, ok) -> int | None:
    """The largest n in lo..hi with ok(n), ok monotone (True up to some n); None when ok(lo) fails."""
    if not ok(lo):
        return None
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid - 1)
    return lo


def _best(model, tensors, gpus, split, budgets, kw) -> Layout | None:
    n = model.num_layers
    cache = {}

    def at(ngl, ncm):
        if (ngl, ncm) not in cache:
            cache[(ngl, ncm)] = layout(model, tensors, gpus=gpus, n_gpu_layers=ngl, tensor_split=split,
                                       n_cpu_moe=ncm, **kw)
        return cache[(ngl, ncm)]

    if model.facts.moe is not None and gpus:
        fewest = _largest(0, n, lambda k: at(n + 1, n - k).fits(budgets))   # k = layers keeping their experts
        if fewest is not None:
            return at(n + 1, n - fewest)
        ngl = _largest(0, n + 1, lambda g: at(g, n).fits(budgets))
        return at(ngl, n) if ngl is not None else None
    ngl = _largest(0, n + 1, lambda g: at(g, 0).fits(budgets)) if gpus else 0
    return at(ngl, 0) if ngl is not None else None


# ---- --fit on ---------------------------------------------------------------------------------

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
        k = _largest(0, free_layers, lambda k, d=d, base=tuple(per): fits(_with_layers(base, d, k, moe), d)) or 0
        per = _with_layers(per, d, k, moe)
    if moe:                              # step 4: dense-only layers made full, front to back
        for d in range(nd):
            part = per[d][1]
            if not part:
                continue
            c = _largest(0, part, lambda c, d=d, base=tuple(per): fits(_converted(base, d, c), d)) or 0
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


# ---- the plan ---------------------------------------------------------------------------------

def _command(model_path: str, lay: Layout | None, n_ctx: int | None, kw: dict, fit: bool) -> str:
    parts = ["llama-server", "-m", model_path]
    if n_ctx is not None:
        parts += ["-c", str(n_ctx)]
    if kw.get("n_ubatch", 512) != 512:
        parts += ["-ub", str(kw["n_ubatch"])]
    if kw.get("type_k", "f16") != "f16":
        parts += ["-ctk", kw["type_k"]]
    if kw.get("type_v", "f16") != "f16":
        parts += ["-ctv", kw["type_v"]]
    if kw.get("flash_attn") is True:
        parts += ["-fa", "on"]
    if kw.get("mmproj"):
        parts += ["--mmproj", kw["mmproj"]] + ([] if kw.get("mmproj_offload", True) else ["--no-mmproj-offload"])
    if fit:
        return " ".join(parts + ["--fit", "on"] + ([] if n_ctx is not None else ["--fit-ctx", str(FIT_CTX)]))
    if lay is None:
        return ""
    flags = lay.flags()
    return " ".join(parts + ["--fit", "off"] + [f"'{x}'" if "\\" in x or "|" in x else x for x in flags])


def offload(model: Model, *, gpus, context: int, weight_format=None, host_bandwidth_bytes_per_s=None,
            n_ubatch: int = 512, type_k="f16", type_v="f16", flash_attn=None, mmap: bool = True,
            kv_offload: bool = True, n_seq: int = 1, context_set: bool = True,
            model_path: str = "model.gguf", mmproj_bytes: int = 0, mmproj_offload: bool = True,
            mmproj_path: str | None = None) -> OffloadPlan:
    """kvmem's placement and --fit's for ``model`` on ``gpus`` (kvmem.gpus.GPU values) at ``context``
    tokens (-c); ``context_set`` False lets --fit lower it as it does when -c is not given."""
    tensors, source = tensors_for(model, weight_format)
    names = tuple(f"CUDA{i}" for i in range(len(gpus)))
    usable = {n: g.usable_memory_bytes for n, g in zip(names, gpus, strict=True)}
    budgets = dict(usable)
    kw = dict(n_ctx=context, n_ubatch=n_ubatch, type_k=type_k, type_v=type_v, flash_attn=flash_attn, mmap=mmap,
              kv_offload=kv_offload, n_seq=n_seq, mmproj_bytes=mmproj_bytes, mmproj_offload=mmproj_offload)
    split = tuple(usable[n] - CUDA_CONTEXT_BYTES for n in names) if len(names) > 1 else None
    free = {n: usable[n] - CUDA_CONTEXT_BYTES for n in names}
    kw_fit = {k: v for k, v in kw.items() if k != "n_ctx"}
    if len(names) > 1:   # several GPUs: whole layers per device, filled back to front, nothing kept spare
        best, _ = fit_on(model, tensors, names, free, n_ctx=context, kw=kw_fit, margin=0)
        best = best if best.fits(budgets) else None
    else:
        best = _best(model, tensors, names, split, budgets, kw)
    fit, fit_note = fit_on(model, tensors, names, free, n_ctx=context if context_set else None, kw=kw_fit)
    bws = {n: g.bandwidth_bytes_per_s for n, g in zip(names, gpus, strict=True)}
    notes = (f"tensors: {source}",
             "compute buffers on GPUs are estimates (see kvmem/engines/llamacpp/offload.py); model and KV bytes "
             "are exact for the tensors given")
    return OffloadPlan(model=model.name, tensors_source=source, gpus=tuple(g.name for g in gpus), budgets=budgets,
                       context=context, best=best, fit=fit, fit_note=fit_note,
                       decode_best=best.decode_tokens_per_s(bws, host_bandwidth_bytes_per_s) if best else None,
                       decode_fit=fit.decode_tokens_per_s(bws, host_bandwidth_bytes_per_s) if fit else None,
                       command_best=_command(model_path, best, context, {**kw, "mmproj": mmproj_path}, fit=False),
                       command_fit=_command(model_path, fit, context if context_set else None,
                                            {**kw, "mmproj": mmproj_path}, fit=True),
                       notes=notes)


def llamacpp_offload(model, *, gpus, context, weight_dtype="auto", host_memory=None, kv_dtype="auto",
                     type_k=None, type_v=None, flash_attn=None, n_ubatch: int = 512, n_seq: int = 1,
                     mmap: bool = True, kv_offload: bool = True, context_set: bool = True,
                     model_path: str | None = None, mmproj=None, mmproj_offload: bool = True) -> OffloadPlan:
    """kvmem.llamacpp_offload: the llama.cpp placement that keeps the most on ``gpus`` (a GPU name,
    a list of them — mixed cards allowed — or kvmem.GPU values) at ``context`` tokens, what
    ``--fit on`` would choose, MiB per device and on the host, the decode bound with
    ``host_memory`` (a preset of data/host_memory.json, bytes/s or "NGB/s") and both commands.
    ``weight_dtype`` "auto": the GGUF's own tensors, else the config's dtype (f16/bf16).
    ``mmproj``: a multimodal projector GGUF (path) or its bytes, loaded on the first GPU
    (mtmd's default; --no-mmproj-offload keeps it on the host: ``mmproj_offload=False``)."""
    from ...catalog import as_model
    from ...gpus import get_gpu
    from ...units import parse_tokens
    model = as_model(model)
    if isinstance(gpus, str):
        gpus = [g.strip() for g in gpus.split(",") if g.strip()]
    elif not isinstance(gpus, (list, tuple)):
        gpus = [gpus]
    gpus = [get_gpu(g) for g in gpus]
    if not gpus:
        raise ValueError("gpus: give at least one GPU")
    context = parse_tokens(context)
    cache = "f16" if kv_dtype in (None, "auto") else kv_dtype
    checkpoint = model.checkpoint
    fmt = None if weight_dtype in (None, "auto") else weight_dtype
    if fmt is None and getattr(checkpoint, "format", None) != "gguf":
        fmt = {"fp16": "f16", "float16": "f16", "bfloat16": "bf16"}.get(model.dtype, model.dtype)  # the config's dtype
    path = model_path or (model.name if model.name.endswith(".gguf") else f"{model.name}-{fmt or 'gguf'}.gguf")
    return offload(model, gpus=gpus, context=context, weight_format=fmt,
                   host_bandwidth_bytes_per_s=host_bandwidth(host_memory), n_ubatch=n_ubatch,
                   type_k=type_k or cache, type_v=type_v or cache, flash_attn=flash_attn, mmap=mmap,
                   kv_offload=kv_offload, n_seq=n_seq, context_set=context_set, model_path=path,
                   mmproj_bytes=_mmproj_bytes(mmproj), mmproj_offload=mmproj_offload,
                   mmproj_path=mmproj if isinstance(mmproj, str) else ("mmproj.gguf" if mmproj else None))


def _mmproj_bytes(mmproj) -> int:
    """The projector's weight bytes: a GGUF file's tensor infos, or a byte count."""
    if mmproj is None:
        return 0
    if isinstance(mmproj, int) and not isinstance(mmproj, bool) and mmproj >= 0:
        return mmproj
    if isinstance(mmproj, str):
        from ...sources.gguf import read_header
        return sum(t.nbytes for t in read_header(mmproj).tensors)
    raise ValueError(f"mmproj must be a GGUF path or a byte count, got {mmproj!r}")


def decode_curve(model, *, gpus, context, weight_dtype="auto", host_memory=None, kv_dtype="auto", type_k=None,
                 type_v=None, flash_attn=None, n_ubatch: int = 512, n_seq: int = 1, mmap: bool = True,
                 kv_offload: bool = True) -> list[dict]:
    """kvmem.llamacpp_decode_curve: the decode bound and memory at each step of offload, one row per
    -ngl (dense: 0 .. n_layer + 1) or per --n-cpu-moe (MoE, every layer offloaded: n_layer .. 0),
    each saying whether it fits the GPUs: {"flag", "value", "fits", "tokens_per_s", "total_bytes"}."""
    from ...catalog import as_model
    from ...gpus import get_gpu
    from ...units import parse_tokens
    model = as_model(model)
    gpu_list = [get_gpu(g) for g in ([x.strip() for x in gpus.split(",")] if isinstance(gpus, str) else gpus)]
    names = tuple(f"CUDA{i}" for i in range(len(gpu_list)))
    fmt = None if weight_dtype in (None, "auto") else weight_dtype
    if fmt is None and getattr(model.checkpoint, "format", None) != "gguf":
        fmt = {"fp16": "f16", "float16": "f16", "bfloat16": "bf16"}.get(model.dtype, model.dtype)
    tensors, _ = tensors_for(model, fmt)
    cache = "f16" if kv_dtype in (None, "auto") else kv_dtype
    kw = dict(n_ctx=parse_tokens(context), n_ubatch=n_ubatch, type_k=type_k or cache, type_v=type_v or cache,
              flash_attn=flash_attn, mmap=mmap, kv_offload=kv_offload, n_seq=n_seq)
    split = tuple(g.usable_memory_bytes - CUDA_CONTEXT_BYTES for g in gpu_list) if len(names) > 1 else None
    budgets = {n: g.usable_memory_bytes for n, g in zip(names, gpu_list, strict=True)}
    bws = {n: g.bandwidth_bytes_per_s for n, g in zip(names, gpu_list, strict=True)}
    host = host_bandwidth(host_memory)
    n = model.num_layers
    steps = [("--n-cpu-moe", k, dict(n_gpu_layers=n + 1, n_cpu_moe=k)) for k in range(n, -1, -1)] \
        if model.facts.moe is not None else [("-ngl", g, dict(n_gpu_layers=g)) for g in range(n + 2)]
    rows = []
    for flag, value, flags in steps:
        lay = layout(model, tensors, gpus=names, tensor_split=split, **flags, **kw)
        rows.append({"flag": flag, "value": value, "fits": lay.fits(budgets),
                     "tokens_per_s": lay.decode_tokens_per_s(bws, host), "total_bytes": dict(lay.total_bytes)})
    return rows


llamacpp_decode_curve = decode_curve

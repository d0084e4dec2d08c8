"""One set of llama.cpp offload flags laid out: the memory it takes on each GPU and on the host,
and the decode bound it allows (kvmem.engines.llamacpp.offload searches over these sets).

Memory of one set of flags (``layout``), per GPU and on the host:
    model     placement.place: the GGUF's tensors (or tensors.synthesised_tensors) on their devices
    KV        plan.rows per layer on the layer's device (host with kv_offload=False)
    compute   compute.llamacpp_compute_buffer. Host only (no GPU holds a layer): the CPU buffer, llama.cpp's own prompt
              and one-token graphs allocated as ggml-alloc allocates them for every family compute.py transcribes (its
              module doc lists them; each equals llama.cpp's printed CPU buffer in tests/oracles), at the build's date
              (compute.compute_buffer's dated rules; MLA per-head / latent + V before PR #14959: the vendored graph, not
              exact); other families the estimate, marked in ``compute_exact``. GPUs, any offload of a transcribed
              family (partial, -ngl 0 beside a GPU, routed experts moved by -ot / --n-cpu-moe, -nkvo with the attention
              pinned to the host; ``_scheduled``): the same graphs split across the devices as ggml_backend_sched splits
              them (scheduled.gpu_graph_bytes, ggml_sched; host weights copied to the first GPU for the prompt; n_copies
              4 where pipeline.py pipelines; builds before PR #14959 without set_rows index inputs, before PR #16884 Q,
              K, V expanded in that order, before PR #21038 no Hadamard inputs, before PR #23764 an f32 KQ mask cast to
              f16; a GGML_BLAS build's BLAS backend with ``blas``; norms pinned to their layer's GPU at full offload),
              checked against the published GPU lines (docs/research/llamacpp_offload_logs.md, the held-out logs in
              docs/research/heldout/), so not marked exact. Other GPU layouts: the estimate (compute.estimate_bytes) on
              every GPU that holds a layer. On the host beside GPUs: the scheduled run's host buffer (the "CUDA_Host
              compute buffer": inputs and their copies, token_embd's GET_ROWS; builds from PR #18898 the unused inp_embd
              input too), else n_ubatch x hidden x 4 B (the input embeddings).
    + CUDA_CONTEXT_BYTES per GPU that the CUDA runtime takes before llama.cpp allocates.

Decode bound: one token reads every weight it uses once (routed experts: top_k of n_experts of each expert tensor) and
    the KV of the context; time = bytes on GPU d / bandwidth of d summed over GPUs (layers run one after another) + host
    bytes / host bandwidth. An upper bound on tokens per second: kernels, PCIe and the CPU's compute are not counted.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace

from ...model import Model
from .compute import (
    estimate_bytes,
    ggml_type_name,
    graph_bytes,
    graph_shape,
    llamacpp_compute_buffer,
    llamacpp_compute_bytes,
)
from .ggml_graph import TYPES
from .graphs import PR_16884, PR_21038, PR_23764
from .graphs_delta import with_rs_seq
from .graphs_dsa import cuda_runs_indexer
from .graphs_dsv4_fwd import dsv4_context
from .graphs_mla_oss import per_head_mla_shape, stores_transcribed
from .host_weights import copy_floor, graph_weights, run_graph_weights
from .nextn import gguf_nextn_layers, nextn_loaded
from .pipeline import pipeline_parallel
from .placed import per_run, run_decode, runs_of
from .placement import CPU, Placement, cuda_alloc_bytes, place
from .plan import settled_plan
from .scheduled import PR_23861, PR_23907, gpu_graph_bytes, graph_expert_names, graph_weight_names, kqv_pinned
from .settings import CURRENT, DEFAULTS, PR_13194, PR_14959, PR_18898, SCHED_USED_INPUT_COPIES_TO

# PR #14959 (a4569c41f, 2025-08-02): K/V stored by ggml_set_rows with index inputs by default; PR #18898 (557515be1,
# 2026-01-23): build_inp_embd's unused embeddings input (dates: kvmem/data/llamacpp_prs.json)
SCHED_MAX_COPIES = 4        # ggml-backend.cpp GGML_SCHED_MAX_COPIES: the pipeline-parallel copies

__all__ = ["Layout", "layout", "CUDA_CONTEXT_BYTES", "MAX_LAYERS"]

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
    # the multimodal projector (mtmd), counted in total_bytes: "device" (its weights'), "weights_bytes",
    # "compute_bytes" (buffer -> bytes; None: not computed, and not counted); empty without one
    mmproj: dict = field(default_factory=dict)
    # of compute_bytes[CPU], a GGML_BLAS build's BLAS backend buffer ("CPU compute buffer", beside the pinned host one)
    blas_compute_bytes: int = 0
    # device -> of its placement kv_bytes, the recurrent state (llama_memory_recurrent's "RS buffer", printed on its
    # own line beside the "KV buffer" one); empty for a model without one
    state_bytes: dict = field(default_factory=dict)
    # a sketch's (layout(schedule=False), compute_bytes the estimate): device -> the least the scheduled compute buffer
    # takes there (host_weights.copy_floor); empty where the graph is scheduled or not modelled
    compute_floor: dict = field(default_factory=dict)
    # device -> the compute buffer llama.cpp prints at context creation where it is less than compute_bytes, which
    # holds what a long prompt grows it to (compute.ComputeBuffer.printed: MiniMax-M3 on the host); the start-up lines
    # and check-log read this one
    printed_compute: dict = field(default_factory=dict)

    def printed_compute_bytes(self, device) -> int:
        """The compute buffer llama.cpp prints for ``device`` at context creation."""
        return self.printed_compute.get(device, self.compute_bytes.get(device, 0))

    def fits(self, budgets: dict) -> bool:
        return all(self.total_bytes[d] <= b for d, b in budgets.items())

    def flags(self) -> list[str]:
        out = ["-ngl", str(self.n_gpu_layers)]
        if len(self.placement.gpus) > 1:
            out += ["-ts", ",".join(_num(x) for x in self.tensor_split)]
        # -ot before --n-cpu-moe: llama.cpp appends both to one override list in the command's order and the first
        # match wins (common/arg.cpp#L2753-L2775), and kvmem's placement applies the -ot rules first
        for pattern, target in self.override_tensor:
            out += ["-ot", f"{pattern}={target}"]
        if self.n_cpu_moe:
            out += ["--n-cpu-moe", str(self.n_cpu_moe)]
        if not self.placement.kv_offload:
            out.append("-nkvo")
        if not self.placement.mmap:     # no --no-mmap at 0c1e57098: -lm none (common/arg.cpp#L2690-L2708,
            out += ["-lm", "none"]      # src/llama-model-loader.cpp#L559: use_mmap only for auto, mmap, mmap+mlock)
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
                             "decode_bytes": self.decode_bytes[d.device]} for d in self.placement.devices],
                **({"mmproj": self.mmproj} if self.mmproj else {})}


def _num(x) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def layout(model: Model, tensors, *, gpus=(), n_gpu_layers: int = MAX_LAYERS, tensor_split=None,
           n_cpu_moe: int = 0, override_tensor=(), n_ctx: int, n_ubatch: int = 512, type_k="f16", type_v="f16",
           flash_attn=None, mmap: bool = True, kv_offload: bool = True, n_seq: int = 1, mmproj_bytes: int = 0,
           mmproj_offload: bool = True, build=None, kv_unified: bool = False, mmproj_compute=None,
           swa_full: bool = False, n_batch: int = 2048, mla=None, nextn: bool = False, n_rs_seq=None,
           blas: bool = False, schedule: bool = True) -> Layout:
    """Memory per device for one set of llama.cpp flags (see the module doc); ``kv_unified``: -kvu (one stream for the
    n_seq sequences, as llama-server's -np auto sets it). ``mmproj_bytes``: the projector's weight buffer, on the
    first GPU (the clip backend) or the host (``mmproj_offload`` False); ``mmproj_compute``: its compute buffers,
    (device, bytes) pairs (graphs_mmproj.clip_compute_buffers), None: not computed (then recorded as such in
    Layout.mmproj, never counted as 0). ``swa_full``, ``n_batch``, ``mla``, ``nextn``, ``n_rs_seq``: the cache's
    settings (settings.DEFAULTS), as kvmem.estimate takes them. ``blas``: a GGML_BLAS build beside GPUs
    (ggml_sched.sched_sizes: host weights' matmuls on its BLAS backend, not offloaded), its buffer counted in the
    host's compute, told apart in Layout.blas_compute_bytes. ``schedule`` False: no graph scheduled (the estimate)."""
    options = {**DEFAULTS, "n_ctx": n_ctx, "n_seq": n_seq, "n_ubatch": n_ubatch, "type_k": type_k, "type_v": type_v,
               "flash_attn": flash_attn, "build": build, "kv_unified": kv_unified, "swa_full": swa_full,
               "n_batch": n_batch, "mla": mla, "nextn": nextn, "n_rs_seq": n_rs_seq}
    s, plan = settled_plan(model, tokens=1, batch=1, kv_dtype="fp16", tp=1, pp=1, options=options)
    kv_rows = [k + v + state for k, v, state in plan.rows]
    n_layer = model.num_layers
    p = place(tensors, n_layer=n_layer, n_gpu_layers=n_gpu_layers, gpus=gpus, tensor_split=tensor_split,
              n_cpu_moe=n_cpu_moe, override_tensor=override_tensor, mmap=mmap, kv_offload=kv_offload,
              kv_per_layer=kv_rows, build=s.build,   # the split of the build: output layer first from PR #18148
              n_nextn=gguf_nextn_layers(model, s.build),    # the file's MTP blocks take their share of the split
              nextn_loaded=nextn_loaded(model))
    full = llamacpp_compute_bytes(model, n_ctx=plan.n_ctx, n_ubatch=s.n_ubatch, flash_attn=s.flash_attn,
                                  cells_per_stream=plan.n_ctx_seq)
    # a sketch (schedule False) reads the arguments only for its floor, which needs routed experts on the host
    host_experts = p.gpus and p.device(CPU).group_bytes.get("experts", 0)
    args = _scheduled(model, p, s, plan, n_layer, not kv_offload, blas, bool(override_tensor) or n_cpu_moe > 0) \
        if schedule or host_experts else None
    gpu_exact: list | None = list(gpu_graph_bytes(**args)) if schedule and args else None
    floor = {} if schedule or not args else {p.gpus[0]: copy_floor(
        args["weights"], graph_expert_names(args["shape"]), n_layer, len(p.gpus), args["n_ubatch"])}
    blas_bytes = 0
    if gpu_exact and blas:          # the BLAS buffer last: host memory too, counted with the pinned host buffer
        *gpu_exact, blas_bytes = gpu_exact
        gpu_exact[-1] += blas_bytes
    compute, total, exact, printed = {}, {}, {}, {}
    moe = model.facts.moe
    share = (moe.top_k, moe.experts) if moe else (1, 1)
    any_gpu = p.offloaded_layers > 0
    decode = {d.device: 0 for d in p.devices}       # the weights one decoded token reads, per device
    for run in runs_of(p):        # summed per run of one layer's tensors (placed.run_decode)
        for device, nbytes in per_run(run, ("decode", share), run_decode).items():
            if device in decode:
                decode[device] += nbytes
    for d in p.devices:
        if d.device == CPU:
            compute[d.device], host_exact, host_printed = _host_compute(model, plan, s, gpu_exact, any_gpu)
            if host_exact is not None:
                exact[d.device] = host_exact
            if host_printed is not None:
                printed[d.device] = host_printed
            # resident host memory: the host tensors themselves (an mmap span also covers GPU tensors
            # between them, read once at load: the printed CPU_Mapped figure is placement's model_bytes)
            total[d.device] = sum(d.group_bytes.values()) + d.kv_bytes + compute[d.device]
        else:
            holds = bool(d.layers) or p.output_device == d.device
            # scheduled: a GPU that holds no layer still takes the host's prompt-sized ops (offload_op)
            compute[d.device] = gpu_exact[p.gpus.index(d.device)] if gpu_exact else full if holds else 0
            exact[d.device] = bool(gpu_exact) or not holds     # the scheduled graph, or nothing to compute
            total[d.device] = d.model_bytes + d.kv_bytes + compute[d.device] + CUDA_CONTEXT_BYTES
        decode[d.device] += d.kv_bytes
    mmproj = {}
    if mmproj_bytes or mmproj_compute:      # the projector: weights on the clip backend, its compute buffers
        where = gpus[0] if gpus and mmproj_offload else CPU     # llama.cpp@0c1e57098 tools/mtmd/clip.cpp#L181-L207
        total[where] += mmproj_bytes
        for device, nbytes in dict(mmproj_compute or ()).items():
            total[device] += nbytes
        mmproj = {"device": where, "weights_bytes": mmproj_bytes,
                  "compute_bytes": None if mmproj_compute is None else dict(mmproj_compute)}
    state: dict = {}    # the recurrent rows of kv_rows, on the device placement puts each layer's cache
    where = p.layer_device + p.nextn_device
    for il, (_, _, nbytes) in enumerate(plan.rows[:len(where)]):
        if nbytes:
            device = where[il] if kv_offload else CPU
            state[device] = state.get(device, 0) + nbytes
    return Layout(n_gpu_layers=n_gpu_layers, tensor_split=p.tensor_split, n_cpu_moe=n_cpu_moe,
                  override_tensor=tuple(override_tensor), n_ctx=n_ctx, placement=p, compute_bytes=compute,
                  total_bytes=total, decode_bytes=decode, compute_exact=exact, mmproj=mmproj,
                  blas_compute_bytes=blas_bytes, state_bytes=state, compute_floor=floor, printed_compute=printed)


def _host_compute(model, plan, s, gpu_exact, any_gpu) -> tuple:
    """(bytes, exact, printed) of the host's compute buffer in layout (exact None where not said; printed None where
    llama.cpp prints the bytes, compute.ComputeBuffer.printed): the scheduled run's host buffer (GPUs
    present, whatever they hold), else the input embeddings' n_ubatch x hidden x 4 B beside GPUs holding layers, else
    the host's own graph: the estimate where kvmem's graph is not the one llama.cpp builds over this cache, deepseek2's
    per-head or latent+V graph (graphs_mla_oss), else the build's graph (compute.compute_buffer)."""
    if gpu_exact:
        return gpu_exact[-1], True, None
    if any_gpu:
        return s.n_ubatch * model.hidden_size * 4, None, None
    if not _graph_matches_cache(model, plan):
        return estimate_bytes(model, n_kv=plan.n_ctx_seq, n_ubatch=min(s.n_ubatch, plan.n_ctx),
                              flash_attn=s.flash_attn), False, None
    if plan.mla in ("none", "latent+v") and _types_known(s):  # per-head or latent+V graph (graphs_mla_oss)
        nbytes = graph_bytes(   # the build's graph and stores (graphs_mla_oss.stores_transcribed)
            ms := _graph_shape(model, plan, s.build), n_kv=plan.n_ctx_seq, n_ubatch=min(s.n_ubatch, plan.n_ctx),
            flash_attn=s.flash_attn, type_k=ggml_type_name(s.type_k), type_v=ggml_type_name(s.type_v),
            n_outputs=s.n_batch, n_seq=s.n_seq, kv_unified=plan.unified, mask_f32=s.build < PR_23764,
            kv_rot=s.build >= PR_21038, qkv_order=s.build < PR_16884, set_rows=s.build >= PR_14959,
            inp_embd=s.build >= PR_18898)
        return nbytes, s.build == CURRENT or plan.mla == "none" and stores_transcribed(ms, s.build), None
    host = llamacpp_compute_buffer(model, n_ctx=plan.n_ctx, n_ubatch=s.n_ubatch, flash_attn=s.flash_attn, build=s.build,
                                   cells_per_stream=plan.n_ctx_seq, type_k=s.type_k, type_v=s.type_v,
                                   n_outputs=s.n_batch, n_seq=s.n_seq, kv_unified=plan.unified,
                                   swa_cells=plan.swa_cells, backend="cpu", n_rs_seq=s.n_rs_seq or 0)
    return host.bytes, host.exact, host.printed


@functools.lru_cache(maxsize=64)
def _shape_of(model, build):
    """compute.graph_shape, remembered (a model is frozen): a placement search asks it twice a layout."""
    return graph_shape(model, build)


def _graph_matches_cache(model, plan) -> bool:
    """Whether a transcribed graph is the one llama.cpp builds over this plan's cache: deepseek2's latent MLA
    graph (K-only cache) or, for an old GGUF's per-head cache (mla='none'), its per-head graph, or the latent+V cache
    of builds before PR #19067 (graphs_mla_attn.latent_v_attention, its V transposed without flash attention)."""
    shape = _shape_of(model, CURRENT)
    return shape is None or shape.arch != "deepseek2" or plan.mla in ("latent", "none", "latent+v")


def _graph_shape(model, plan, build=CURRENT, n_rs_seq=0, n_seq=1):
    """The graph llama.cpp builds for ``model`` over ``plan``'s cache: deepseek2 over a per-head cache
    (mla='none') takes the per-head graph (graphs_mla_oss.per_head_mla_shape); glm-dsa at a ``build`` that runs it
    without its indexer, deepseek2's (compute.graph_shape); a DeltaNet hybrid's with its ``n_rs_seq`` snapshots;
    deepseek4's with its ``n_seq`` streams and snapshots (graphs_dsv4_fwd.dsv4_context)."""
    shape = dsv4_context(with_rs_seq(_shape_of(model, build), n_rs_seq), n_seq, n_rs_seq)
    if shape is not None and shape.arch == "deepseek2" and plan.mla == "none":
        return per_head_mla_shape(model, build)
    if shape is not None and shape.arch == "deepseek2" and plan.mla == "latent+v":
        return replace(shape, mla_v=True)
    return shape


def _types_known(s) -> bool:
    return ggml_type_name(s.type_k) in TYPES and ggml_type_name(s.type_v) in TYPES


def _scheduled(model, p: Placement, s, plan, n_layer: int, kv_on_host, blas=False, overrides=False) -> dict | None:
    """What the GPUs' compute buffers are scheduled with (llama.cpp's graphs split as ggml_backend_sched splits them):
    scheduled.gpu_graph_bytes' arguments, or None where not modelled: untranscribed families, SWA caches without
    cells, deepseek2 over another cache than the latent one, overrides that move a tensor the graph does not name,
    -nkvo (``kv_on_host``) beside a recurrent state or an indexer's cache, no tensors (check-log without a file type)
    with the output on the host. Partial offload: the host's layers run on the host, their weights copied to the first
    GPU for prompt-sized ops (offload_op). Pipeline parallelism (pipeline.pipeline_parallel: not with -ot /
    --n-cpu-moe, ``overrides``, -nkvo, a backend without async and events) gives n_copies GGML_SCHED_MAX_COPIES; before
    PR #14959 no index inputs."""
    shape = _graph_shape(model, plan, s.build, s.n_rs_seq, s.n_seq)
    type_k, type_v = ggml_type_name(s.type_k), ggml_type_name(s.type_v)
    full = p.offloaded_layers == p.layers_total     # -ngl > n_layer_all (src/llama-context.cpp#L430-L435)
    # sliding layers (gemma2, gemma3, gpt-oss) read the SWA cache's cells (plan.swa_cells); before PR #13194 the one
    # cache's n_kv cells, which both masks span (llama.cpp@33eff4024 src/llama-graph.cpp#L1366-L1390)
    swa_cells = plan.swa_cells or (plan.n_ctx_seq if s.build < PR_13194 else 0)
    swa = shape is not None and any(shape.swa) and not swa_cells
    if shape is None or swa or not p.gpus or type_k not in TYPES or type_v not in TYPES:
        return None
    if shape.arch in ("deepseek2", "gpt-oss") and not stores_transcribed(shape, s.build) or not _graph_matches_cache(
            model, plan) or kv_on_host and not kqv_pinned(shape) or p.output_device == CPU and not p.tensors:
        return None     # before PR #14959's ggml_set_rows: graphs_mla_oss.stores_transcribed; -nkvo: kqv_pinned
    if shape.indexer_full and not cuda_runs_indexer(shape, type_k):
        return None     # the host runs the lightning indexer there: its copies are not modelled
    host_gpu = len(p.gpus)

    def index(device):
        return host_gpu if device == CPU else p.gpus.index(device)
    gpus = [index(d) for d in p.layer_device] + [index(p.output_device)]
    # ((layer, name), (device, CUDA bytes)) of every host weight but token_embd, and of a weight -ot moved; a run of
    # one repeating layer's tensors derived once for its layer's device (host_weights.run_graph_weights)
    weights, moved = [], False
    for run in runs_of(p):
        layer = run[0].layer
        uniform = None
        if layer is not None and 0 <= layer < n_layer and run[0].group != "output":
            uniform = per_run(run, ("weights", n_layer, p.layer_device[layer], p.gpus), run_graph_weights)
        if uniform is None:
            more, moved_here = graph_weights(run, n_layer, p.layer_device, p.output_device, index)
        else:
            more, moved_here = uniform
        weights += more
        moved = moved or moved_here
    if p.output_device == CPU and not any(key == (n_layer, "output") for key, _ in weights):
        embd = next(t for t in p.tensors if t.name == "token_embd.weight")     # tied: the output is token_embd
        weights.append(((n_layer, "output"), (host_gpu, cuda_alloc_bytes(embd))))
    per_layer, output = graph_weight_names(shape)
    if any(name not in (output if layer == n_layer else per_layer) for (layer, name), _ in weights):
        return None                 # a weight the transcribed graph does not have: not modelled
    pp = not kv_on_host and pipeline_parallel(p.gpus, full=full, overrides=overrides or moved, blas=blas, build=s.build)
    n_copies = SCHED_MAX_COPIES if pp else 1
    # llama-server's output rows (PR #23861), one per slot; the library's default before: n_batch
    n_outputs = min(s.n_batch, s.n_seq) if s.build >= PR_23861 else s.n_batch
    return dict(shape=shape, layer_gpu=tuple(gpus), n_gpus=len(p.gpus), n_kv=plan.n_ctx_seq, n_ubatch=s.n_ubatch,
                           flash_attn=s.flash_attn, type_k=type_k, type_v=type_v, n_outputs=n_outputs,
                           n_seq=s.n_seq, kv_unified=plan.unified, swa_cells=swa_cells, n_copies=n_copies,
                           set_rows=s.build >= PR_14959, weights=tuple(weights), inp_embd=s.build >= PR_18898,
                           full_offload=full, fa_f16=s.build >= PR_23907,
                           # builds to 2026-08-22 copy only the inputs a node reads (SCHED_USED_INPUT_COPIES_TO)
                           copy_unused_inputs=s.build > SCHED_USED_INPUT_COPIES_TO, mask_f32=s.build < PR_23764,
                           kv_rot=s.build >= PR_21038, blas=blas, qkv_order=s.build < PR_16884, kv_host=kv_on_host)


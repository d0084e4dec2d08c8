"""The GPU compute buffers of a llama.cpp layout: llama.cpp's graphs (kvmem.engines.llamacpp.graphs)
split across the devices by kvmem.engines.llamacpp.ggml_sched as ggml_backend_sched splits them, and
allocated per buffer type as ggml-alloc allocates them. kvmem.engines.llamacpp.layouts asks it for
every offload of a transcribed family; docs/research/llamacpp_offload_logs.md lists the published
lines it reproduces and the rules each needed.

Runs of equal layers are cut before a graph is built (``reduced_layers``): the buffers are those of
the whole graph (checked by tests/engines/test_llamacpp_compute.py), and a search over layer splits
schedules each reduced graph once (``_gpu_graph_bytes`` is cached).
"""

from __future__ import annotations

import gc
import math
import weakref
from dataclasses import replace
from functools import lru_cache

from ...units import cdiv, pad
from .ggml_graph import KQV_OUT
from .ggml_sched import OFFLOAD_MIN_BATCH, sched_bounds, sched_sizes
from .graph_build import build_graph
from .graphs import GraphShape, Pass
from .graphs_delta import with_seqs
from .graphs_dsv4_fwd import dsv4_few
from .settings import PR_23861, PR_23907

__all__ = ["PR_23861", "PR_23907", "gpu_graph_bytes", "graph_expert_names", "graph_weight_names", "kqv_pinned",
           "reduced_layers", "expert_weights"]

# ggml-org/llama.cpp PR #23861 "llama: limit max outputs of llama_context" (squash-merged as de6f727aa on 2026-06-01,
# build 9460; settings.PR_23861): llama-server
# reserves the prompt graph with n_outputs_max = min(n_batch, n_parallel x (1 + n_draft)) outputs
# (tools/server/server-context.cpp server_output_limits, common/speculative.cpp
# common_speculative_get_output_limits; src/llama-context.cpp n_outputs_pp = min(n_tokens, n_outputs_max))
# ggml-org/llama.cpp PR #23907 "cuda: reserve space for quantize kv-cache at startup" (squash-merged as f8f0a47a5
# on 2026-06-03, build 9489; settings.PR_23907): the flash-attention output's CUDA alloc size holds
# f16 copies of a quantised K and V (ggml-cuda.cu ggml_backend_cuda_buffer_type_get_alloc_size)
# a unit of q <= RUN_UNIT layers repeated c times, c over cap = ceil(RUN_CAP / q), is cut to
# cap + (c - cap) % (lcm(q, RUN_PERIOD) / q) times (reduced_layers)
RUN_UNIT, RUN_CAP, RUN_PERIOD = 3, 4, 6
# where the layers' kinds repeat: units up to RUN_UNIT_PATTERN layers (linear/full x Q4_K_M's every third ffn_down:
# 12), at least RUN_CAP_PATTERN units kept (reduced_layers)
RUN_UNIT_PATTERN, RUN_CAP_PATTERN = 12, 3
EXPERT_NAMES = {True: ("ffn_down_exps",), False: ("ffn_up_exps", "ffn_gate_exps")}


def expert_weights(experts, device: int) -> tuple:
    """((il, down), bytes) of routed-expert tensors placed on ``device`` -> gpu_graph_bytes' ``weights``
    entries ((il, name), (device, bytes))."""
    return tuple(sorted(((il, name), (device, nbytes)) for (il, down), nbytes in experts
                        for name in EXPERT_NAMES[down]))


@lru_cache(maxsize=64)
def graph_weight_names(shape: GraphShape) -> tuple:
    """(a layer's weight names, the output layer's) in ``shape``'s graph, as g.weight names them: the
    weights gpu_graph_bytes can place (rope_freqs is not in the graph: ROPE's frequencies are read where
    ROPE runs)."""
    graph, n = _few_layers(shape)
    weights = [t for t in graph.leafs if t.external and not t.kv]
    if getattr(shape, "msa_block", 0):      # graphs_minimax_m3: the MSA indexer's weights, read with flash attention
        weights += [t for t in _few_layers(shape, True)[0].leafs if t.external and not t.kv]
    return frozenset(t.name for t in weights if t.layer < n), frozenset(t.name for t in weights if t.layer == n)


@lru_cache(maxsize=64)
def graph_expert_names(shape: GraphShape) -> frozenset:
    """The weights of ``shape``'s graph a MUL_MAT_ID reads as its experts (src[0]), as g.weight names them."""
    graph, _ = _few_layers(shape)
    return frozenset(n.src[0].name for n in graph.nodes if n.op == "MUL_MAT_ID" and n.src[0].external)


@lru_cache(maxsize=64)
def kqv_pinned(shape: GraphShape) -> bool:
    """Whether -nkvo is scheduled for ``shape`` (layouts._scheduled): its graph without flash attention marks one
    attention output (ggml_graph.KQV_OUT) per layer that holds a cache, what gpu_graph_bytes' ``kv_host`` pins to the
    host as llama.cpp pins build_attn_mha's (ggml_sched.sched_sizes kqv_host), and no lightning indexer's cache
    (graphs_dsa). A recurrent layer's state (graphs_delta, on the host too: llama.cpp@0c1e57098
    src/llama-memory-recurrent.cpp#L85) is a cache without an attention output: not scheduled so."""
    graph, _ = _few_layers(shape)
    cached = {t.layer for t in graph.leafs if t.kv}
    return not shape.indexer_full and sum(t.name == KQV_OUT for t in graph.nodes) == len(cached)


@lru_cache(maxsize=64)
def _few_layers(shape: GraphShape, flash_attn: bool = False) -> tuple:
    """A one-token graph (no flash attention unless ``flash_attn``) of ``shape``'s first layers, enough to hold each
    kind of layer, and their count."""
    n = min(shape.n_layer, shape.n_dense_lead + 1)     # a dense layer and a MoE one (deepseek2's leading dense)
    recurrent = getattr(shape, "recurrent", ())
    if recurrent:       # graphs_delta: through the first full-attention layer (its weights are not the linear ones')
        n = max(n, recurrent.index(False) + 1 if False in recurrent else n)
    moe = getattr(shape, "moe_layers", ())             # graphs_llama4: through the first dense and MoE layers
    n = max(n, *(moe.index(x) + 1 for x in (True, False) if x in moe)) if moe else n
    kinds = list(zip(recurrent, moe, strict=True)) if recurrent and moe else []   # graphs_ssm: Mamba / attention / FFN
    n = max(n, *(kinds.index(x) + 1 for x in set(kinds))) if kinds else n
    n, dsv4 = dsv4_few(shape, n)        # graphs_dsv4_fwd: a layer of each compress ratio, past the hash-routed ones
    few = replace(shape, n_layer=n, swa=shape.swa[:n], indexer_full=shape.indexer_full[:n], **dsv4,
                  **({"recurrent": recurrent[:n]} if recurrent else {}), **({"moe_layers": moe[:n]} if moe else {}))
    return build_graph(few, Pass(1, 1, 256, 1, flash_attn, "f16", "f16")), n


def reduced_layers(shape: GraphShape, layer_gpu: tuple, weights: tuple = ()) -> tuple:
    """The same graph with repeated layers cut: ``(shape, layer_gpu, weights)`` renumbered. Equal
    layers: the same device, the same placed weights (names, devices and bytes), the same cache (sliding or
    not), FFN (deepseek2's leading dense layers) and attention (graphs_delta: linear or full); a unit of up to
    RUN_UNIT layers repeated (Q4_K_M's ffn_down types repeat every third layer, llama-quant.cpp use_more_bits)
    is cut to ceil(RUN_CAP / q) + (c - that) % (lcm(q, RUN_PERIOD) / q) units; where the layers' kinds form a
    pattern (sliding / full, linear / full) units of up to RUN_UNIT_PATTERN layers, at least RUN_CAP_PATTERN
    of them kept (fewer differed from the whole graph: 1 unit of 4 or 6 layers on 38 of 700 random hybrid / gemma2
    / gemma3 / gemma4 layouts, 2 units on 4 of 32 of those, gemma2's 2 units of 2 on 1 of 300); the last layer
    (its rows picked by out_ids)
    stays. Every layer allocates and frees the same tensors in the same order, so ggml-alloc's blocks
    repeat after a few equal layers with a period of 1 or 3 layers (what was seen), and the buffers do
    not change: test_reduced_layers_keep_every_buffer and tests/engines/test_llamacpp_reduced_patterns.py
    check it against the whole graph."""
    n = shape.n_layer
    if shape.indexer_full or getattr(shape, "res_bs", None) or getattr(shape, "msa_block", 0):
        # kimi-k3: its banked checkpoints grow (graphs_kimi_k3); minimax-m3: its MSA input copies (graphs_minimax_m3)
        # glm-dsa / deepseek32: each layer's zero rows for the top-k mask are a leaf of the compute buffer
        # (graphs_dsa._sparse_mask), and ggml-alloc allocates every leaf before the first node: the buffers
        # grow with the layers, so no run is cut (cut, 16 of 16 random GPU layouts of GLM-5 / DeepSeek-V3.2 differed).
        # Nor by one leaf a layer (test_llamacpp_dsa_leaves.py: GLM-5's 21st layer adds 352 MiB, not 16): a cut graph
        # plus the leaves it left out differed on 7 of 15 random layouts (up to 116 MiB); a cut graph that keeps every
        # leaf, freed with the run's last unit, on 17 of 678 (up to 392 MiB: layers on the host, no flash attention,
        # quantised caches with several sequences, runs kept to 4 layers), as the room the freed leaves leave is
        # taken by later layers' tensors, differently as it grows
        return shape, layer_gpu, weights
    per_layer: dict[int, list] = {}
    for (il, name), where in weights:
        per_layer.setdefault(il, []).append((name, where))
    recurrent = getattr(shape, "recurrent", ())         # graphs_delta: a linear-attention layer, else full
    sig = [(layer_gpu[il], tuple(sorted(per_layer.get(il, ()))), shape.swa[il] if shape.swa else None,
            il < shape.n_dense_lead, recurrent[il] if recurrent else None,
            getattr(shape, "moe_layers", (None,) * n)[il]) for il in range(n)]
    unit = RUN_UNIT_PATTERN if any(shape.swa) or any(recurrent) else RUN_UNIT
    keep: list[int] = []
    il, last = 0, n - 1                      # the last layer is kept on its own
    while il < last:
        best_q, best_c = 1, 1                 # the unit of q layers repeated c times from il that covers most
        for q in range(1, unit + 1):
            c = 1
            while il + (c + 1) * q <= last and sig[il + c * q:il + (c + 1) * q] == sig[il:il + q]:
                c += 1
            if c > 1 and c * q > best_c * best_q:
                best_q, best_c = q, c
        cap, period = cdiv(RUN_CAP, best_q), math.lcm(best_q, RUN_PERIOD) // best_q
        if unit > RUN_UNIT:
            cap = max(cap, RUN_CAP_PATTERN)
        kept = best_c if best_c <= cap else cap + (best_c - cap) % period
        keep += range(il, il + kept * best_q)
        il += best_c * best_q
    keep.append(last)
    if len(keep) == n:
        return shape, layer_gpu, weights
    new = {il: i for i, il in enumerate(keep)}
    new[n] = len(keep)                        # the output layer
    shape = replace(shape, n_layer=len(keep), swa=tuple(shape.swa[il] for il in keep) if shape.swa else (),
                    n_dense_lead=sum(1 for il in keep if il < shape.n_dense_lead))
    if recurrent:
        shape = replace(shape, recurrent=tuple(recurrent[il] for il in keep))  # type: ignore[call-arg]
    if getattr(shape, "moe_layers", ()):
        shape = replace(shape, moe_layers=tuple(shape.moe_layers[il] for il in keep))  # type: ignore[call-arg,attr-defined]
    return (shape, tuple(layer_gpu[il] for il in keep) + (layer_gpu[n],),
            tuple(((new[il], name), where) for (il, name), where in weights if il in new))


def gpu_graph_bytes(shape: GraphShape, *, layer_gpu: tuple, n_gpus: int, n_kv: int, n_ubatch: int, flash_attn: bool,
                    type_k: str = "f16", type_v: str = "f16", n_outputs: int | None = None, n_seq: int = 1,
                    kv_unified: bool = False, swa_cells: int = 0, n_copies: int = 1, set_rows: bool = True,
                    weights: tuple = (), inp_embd: bool = True, full_offload: bool = True,
                    fa_f16: bool = False, copy_unused_inputs: bool = True, mask_f32: bool = False,
                    kv_rot: bool = True, blas: bool = False, qkv_order: bool = False, kv_host: bool = False) -> tuple:
    """The compute buffers per GPU then the host ("CUDA_Host") of the same two graphs as graph_bytes,
    scheduled by kvmem.engines.llamacpp.ggml_sched (ggml_backend_sched: the graph inputs and
    token_embd's GET_ROWS on the host, every other node on the device of its weights, copies of what
    crosses a device, n_copies of them with pipeline parallelism), each GPU's buffer aligned to 128
    bytes. ``layer_gpu[il]``: the device of layer il (the output layer's: index n_layer; ``n_gpus``:
    the host). ``weights``: ((il, name), (device, bytes)) of every weight on the host outside token_embd
    (the layers the host holds, what -ot / --n-cpu-moe moved there) and of every weight -ot moved to
    another GPU than its layer's, with its size as a CUDA tensor: ggml_sched copies a host weight to
    the first GPU when that GPU takes its op (offload_op: a MUL_MAT, MUL_MAT_ID or row-wise op of 32
    rows or more). ``full_offload``: every layer and the output on GPUs
    (src/llama-context.cpp graph_get_cb pins each layer's norm to its device with full offload, or
    below 32 tokens). ``set_rows``: whether the build stores K/V by ggml_set_rows with index inputs
    (PR #14959). ``inp_embd``: the build makes the unused embeddings input (PR #18898; on the host).
    ``copy_unused_inputs``: with n_copies > 1, ggml_sched copies an input no node reads (ggml_sched.sched_sizes).
    ``mask_f32``: the build makes the KQ mask f32 and casts it to f16 for flash attention (before PR #23764).
    ``kv_rot``: the build rotates a quantised cache's K / V by Hadamard matrices (PR #21038 on: graphs.attn_inputs).
    ``qkv_order``: the build expands Q, K, V in build_attn's KV path (before PR #16884: graphs.Pass).
    ``blas``: a GGML_BLAS build (ggml_sched.sched_sizes): its BLAS buffer ("CPU compute buffer") after the host's.
    ``kv_host``: -nkvo, the KV cache on the host beside the GPUs (src/llama-kv-cache.cpp: ggml_backend_cpu_buffer_type
    without offload): its stores and views there, each attention output without flash attention pinned to the host
    (ggml_sched.sched_sizes kqv_host).
    Runs of equal layers are cut first (reduced_layers), so a search over splits schedules each
    reduced graph once (cached); below OFFLOAD_MIN_BATCH tokens the one-token graph copies no weight
    (no op is offloaded), so its weights' bytes are left out of its key."""
    return _graphs(shape, layer_gpu, n_gpus, n_kv, n_ubatch, flash_attn, type_k, type_v, n_outputs, n_seq,
                   kv_unified, swa_cells, n_copies, set_rows, tuple(sorted(weights)), inp_embd, full_offload, fa_f16,
                   copy_unused_inputs, mask_f32, kv_rot, blas, qkv_order, kv_host, reduce=True)


def _gpu_graph_bytes(shape, layer_gpu, n_gpus, n_kv, n_ubatch, flash_attn, type_k, type_v, n_outputs, n_seq,
                     kv_unified, swa_cells, n_copies, set_rows, weights, inp_embd, full_offload=True,
                     fa_f16=False, copy_unused_inputs=True, mask_f32=False, kv_rot=True, blas=False,
                     qkv_order=False, kv_host=False) -> tuple:
    """gpu_graph_bytes on the whole graph, every layer built (what reduced_layers is checked against)."""
    return _graphs(shape, layer_gpu, n_gpus, n_kv, n_ubatch, flash_attn, type_k, type_v, n_outputs, n_seq,
                   kv_unified, swa_cells, n_copies, set_rows, weights, inp_embd, full_offload, fa_f16,
                   copy_unused_inputs, mask_f32, kv_rot, blas, qkv_order, kv_host, reduce=False)


def _graphs(*args, reduce: bool) -> tuple:
    """_sized with Python's cyclic garbage collector paused: a graph's thousands of small tensors form no cycle, and
    collections their allocation triggered took a fifth of a search (qwen3-235b-a22b, 4 x 3090: 0.95 -> 0.73 s CPU)."""
    paused = gc.isenabled()
    gc.disable()
    try:
        return _sized(*args, reduce=reduce)  # type: ignore[misc]  # args: _sized's positional parameters before reduce
    finally:
        if paused:
            gc.enable()


def one_token_graph_dominated(n_ubatch: int, n_seq: int, flash_attn: bool) -> bool:
    """Whether the one-token reserve (n_seq tokens and outputs) needs no more of any device's compute buffer
    than the prompt reserve, so that sched_reserve's larger of the two is the prompt graph's and a placement
    search could schedule that graph alone (about 45 % of a llama.cpp fit's CPU: bench/README.md). Checked, not
    derived: n_ubatch >= 512, one sequence, flash attention: no device of 1,508 scheduled layouts (the 1,016 of
    bench/llamacpp_fit_speed.py's commands, 492 random -ngl / -ts / --n-cpu-moe / K type layouts of every preset
    with a graph; tests/engines/test_llamacpp_compute_rules.py keeps a seeded sample). Outside it the host's
    can be larger (n_ubatch 32-128 with layers or experts on the host, or 4 sequences: 5 of 900 random layouts),
    the host computing for itself what the prompt graph hands to the first GPU (ggml_sched offload_op)."""
    return n_ubatch >= 512 and n_seq == 1 and bool(flash_attn)


def _sized(shape, layer_gpu, n_gpus, n_kv, n_ubatch, flash_attn, type_k, type_v, n_outputs, n_seq, kv_unified,
           swa_cells, n_copies, set_rows, weights, inp_embd, full_offload, fa_f16, copy_unused_inputs, mask_f32,
           kv_rot, blas, qkv_order, kv_host, reduce) -> tuple:
    """The larger of the prompt graph's and the one-token graph's buffers, per device."""
    n_outputs = n_ubatch if n_outputs is None else min(n_outputs, n_ubatch)
    n_stream = 1 if kv_unified else n_seq
    shape = with_seqs(shape, n_seq)           # graphs_delta's recurrent part: n_seq sequences, whatever the streams
    sizes: list = []
    passes: tuple[tuple[int, int], ...] = ((pad(n_ubatch, n_seq), n_outputs), (n_seq, n_seq))
    if one_token_graph_dominated(n_ubatch, n_seq, flash_attn) and not kv_host:     # not checked with -nkvo
        passes = passes[:1]          # the prompt graph's buffers are the larger on every device (its docstring)
    for tokens, outputs in passes:
        placed = weights if tokens >= OFFLOAD_MIN_BATCH else tuple((key, (dev, 0)) for key, (dev, _) in weights)
        args = (shape, layer_gpu, placed)
        if reduce:
            args = reduced_layers(*args)
        rest = (n_gpus, tokens, outputs, n_kv, n_stream, flash_attn, type_k, type_v, swa_cells, n_copies, set_rows,
                inp_embd, full_offload or tokens < 32, fa_f16 and flash_attn, copy_unused_inputs, mask_f32, kv_rot,
                blas, qkv_order, kv_host)
        if sizes and reduce and _graph_within(sizes[0], *args, *rest):
            continue            # the one-token graph needs no more on any device: the larger are the prompt's
        sizes.append((_graph_sizes if reduce else _graph_sizes.__wrapped__)(*args, *rest))
    return tuple(max(col) for col in zip(*sizes, strict=True))


@lru_cache(maxsize=32)
def _built(shape, p: Pass):
    """The graph of ``shape`` for one reserve ``p``, built once: it does not depend on where its layers and
    weights are (ggml_sched.sched_sizes leaves it as it came), so the placements a search tries that reduce
    to the same layers schedule one graph."""
    return build_graph(shape, p)


def _fa_alloc(t) -> int:
    """ggml-cuda.cu ggml_backend_cuda_buffer_type_get_alloc_size -> fattn.cu
    ggml_cuda_flash_attn_ext_get_alloc_size: the tile and MMA kernels (more than 2 query rows
    per stream) convert a K or V that is not f16 into f16 behind the output
    (fattn-common.cuh ggml_cuda_flash_attn_ext_get_f16_extra_data: each padded to 128 bytes)."""
    size = t.size0
    if t.op != "FLASH_ATTN_EXT" or t.src[0].ne[1] <= 2:
        return size
    for kv in (t.src[1], t.src[2]):
        if kv.type != "f16":
            size = pad(size, 128) + kv.nelements() * 2
    return size


@lru_cache(maxsize=1024)
def _graph_sizes(shape, layer_gpu, weights, n_gpus, tokens, outputs, n_kv, n_stream, flash_attn, type_k, type_v,
                 swa_cells, n_copies, set_rows, inp_embd, pin_norms, fa_f16, copy_unused_inputs=True,
                 mask_f32=False, kv_rot=True, blas=False, qkv_order=False, kv_host=False) -> list:
    """One graph of ``tokens`` tokens built, scheduled and allocated: the bytes per device."""
    graph, where, options = _scheduling(shape, layer_gpu, weights, n_gpus, tokens, outputs, n_kv, n_stream, flash_attn,
                                        type_k, type_v, swa_cells, n_copies, set_rows, inp_embd, pin_norms, fa_f16,
                                        mask_f32, kv_rot, blas, qkv_order, kv_host)
    return sched_sizes(graph, where, n_gpus, copy_unused_inputs=copy_unused_inputs, **options)


def _graph_within(limit, shape, layer_gpu, weights, n_gpus, tokens, outputs, n_kv, n_stream, flash_attn, type_k, type_v,
                  swa_cells, n_copies, set_rows, inp_embd, pin_norms, fa_f16, _copy_unused_inputs=True, mask_f32=False,
                  kv_rot=True, blas=False, qkv_order=False, kv_host=False) -> bool:
    """Whether _graph_sizes of these arguments is at most ``limit`` on every device, known without allocating it
    (ggml_sched.sched_bounds: the bytes each device allocates, summed, bound its buffer, every input counted as
    copied); False where not known. A
    one-token graph allocates a few MiB where the prompt graph of the same layout needs hundreds: tried before it is
    scheduled (a fifth of a DSA model's fit on 4 GPUs: 34 of 106 graphs)."""
    graph, where, options = _scheduling(shape, layer_gpu, weights, n_gpus, tokens, outputs, n_kv, n_stream, flash_attn,
                                        type_k, type_v, swa_cells, n_copies, set_rows, inp_embd, pin_norms, fa_f16,
                                        mask_f32, kv_rot, blas, qkv_order, kv_host)
    tried = _BOUNDS_TRIED.setdefault(graph, [0, 0])
    if tried[0] >= BOUND_TRIES and not tried[1]:
        return False            # this graph's bounds never held: not computed again (only the time differs)
    bound = sched_bounds(graph, where, n_gpus, **options)
    within = bound is not None and all(b <= cap for b, cap in zip(bound, limit, strict=True))
    tried[0], tried[1] = tried[0] + 1, tried[1] + within
    return within


# _graph_within's tries and successes per built graph (kept while _built keeps it): a graph whose bounds failed its
# first BOUND_TRIES layouts is scheduled without them (kvmem fit on 4 x rtx-3090-24gb, 32k: a DeltaNet one-token
# graph's states, summed, pass its prompt graph's buffers, 0 of 24 held on qwen3.5-397b-a17b's; GLM-5.1's held on
# 34 of 37, DeepSeek-V2's on 36 of 38)
BOUND_TRIES = 3
_BOUNDS_TRIED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _scheduling(shape, layer_gpu, weights, n_gpus, tokens, outputs, n_kv, n_stream, flash_attn, type_k, type_v,
                swa_cells, n_copies, set_rows, inp_embd, pin_norms, fa_f16, mask_f32, kv_rot, blas, qkv_order,
                kv_host=False) -> tuple:
    """The graph _graph_sizes schedules (built once: _built), where its weights are, and sched_sizes' options."""
    placed = dict(weights)

    def where(t, _expert):
        if t.layer < 0 or kv_host and t.kv:
            return n_gpus                 # token_embd stays on the host (dev_input); -nkvo: the cache too
        at = placed.get((t.layer, t.name))
        return layer_gpu[t.layer] if at is None else at[0]

    def nbytes(t, _expert):
        return placed[(t.layer, t.name)][1]

    def pinned(il):
        return layer_gpu[il] if il < shape.n_layer else -1

    graph = _built(shape, Pass(tokens, outputs, n_kv, n_stream, flash_attn, type_k, type_v, swa_cells, set_rows,
                               inp_embd, mask_f32, kv_rot, qkv_order))
    # with an f16 K and V fa_alloc is ggml_nbytes (flash attention reads the cache's f16 views, an f32 one cast to
    # f16: graphs.attention, graphs_mla_oss.mla_mha): left out, the allocator asks ggml_nbytes itself
    converts = fa_f16 and not type_k == type_v == "f16"
    return graph, where, {"n_copies": n_copies, "weight_bytes": nbytes if placed else None,
                          "norm_backend": pinned if pin_norms else None,
                          "gpu_alloc_size": _fa_alloc if converts else None, "blas": blas, "kqv_host": kv_host}

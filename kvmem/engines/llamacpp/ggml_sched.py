"""ggml_backend_sched on a graph of kvmem.engines.llamacpp.ggml_graph: which backend runs each node,
the copies of inputs it makes across backends, and what ggml-alloc then reserves per buffer type
(the "CUDA0 compute buffer size", "CUDA_Host compute buffer size" lines of a GPU run).

Followed from the vendored ggml (llama-cpp-python 0.3.36), ggml/src/ggml-backend.cpp:

    backends  the GPUs in order, then the CPU (the last, lowest-priority backend); the CPU's buffer
              type is the pinned host type (ggml-cuda.cu ggml_backend_cuda_host_buffer_type: the CPU
              buffer type's 32-byte alignment), each GPU's its own (128-byte alignment,
              ggml_backend_cuda_buffer_type_get_alignment). A backend supports only its own buffer
              type here (ggml_backend_cuda_device_supports_buft: a CUDA buffer of the same device;
              the CPU: host buffers), so a tensor used on another backend is copied.
    pass 1    ggml_backend_sched_backend_id_from_cur: a tensor in a buffer (weights, the KV cache)
              or a view of one runs where that buffer is; a graph input (GGML_TENSOR_FLAG_INPUT) on
              the CPU; an op with a weight source (buffer usage WEIGHTS: not the KV cache) where
              the weight is, except ROPE and FLASH_ATTN_EXT, and a host weight's op moves to the
              first GPU when ggml_backend_offload_op says so (ggml-cuda.cu
              ggml_backend_cuda_device_offload_op: get_op_batch_size >= 32; GET_ROWS never).
    pass 2    expand GPU assignments down then up over the non-view nodes, then any assignment
              down then up (every op here is supported by every backend).
    pass 4    views take their view_src's backend, unassigned sources their node's.
    BLAS      (``blas``: a build with GGML_BLAS, whose "CPU compute buffer" a log prints beside the pinned host one) an
              ACCEL backend between the GPUs and the CPU (src/llama-context.cpp adds ACCEL devices before the CPU),
              its buffer type the plain CPU one (ggml-blas.cpp ggml_backend_blas_device_get_buffer_type), reading
              any host buffer (supports_buft: ggml_backend_buft_is_host) and running only MUL_MAT of contiguous
              sources, src1 f32, ne0, ne1 and ne10 >= 32 (supports_op, min_batch 32). Pass 1 gives a host weight's
              op the highest-priority backend that takes the weight's buffer and the op
              (ggml_backend_sched_backend_from_buffer): such a MUL_MAT goes to BLAS, and as BLAS is not the last
              backend no GPU offloads it (offload_op is asked only when that backend is the CPU); ops BLAS does not
              run (MUL_MAT_ID, the norms' MUL) go on as without it. Pass 2 expands no other op onto BLAS; a source in
              host memory is not copied between BLAS and the CPU (ggml_backend_sched_buffer_supported).
              (b5269: llama.cpp@1d36b3670 ggml/src/ggml-blas/ggml-blas.cpp#L374-L441,
              ggml/src/ggml-backend.cpp#L695-L715, #L758-L780, #L834-L853.)
    pass 5    splits: a new split when the backend changes (or a weight of another backend is
              used after the split has inputs); each source on another backend gets n_copies
              copies (ggml_dup_tensor_layout) in the split's backend, made once per backend, listed
              as inputs of the first split that needs them; with n_copies > 1 the copies are
              inputs and outputs (never freed).
    pass 6    with n_copies > 1 every graph input gets n_copies copies on its backend.
    graph_copy per split: for each input a view of it (keeps it until the copy) and its copy, then the
              split's nodes; with n_copies > 1 the input copies are leafs (allocated first).
ggml-alloc.c ggml_gallocr_alloc_graph_impl then allocates the copied graph as gallocr_size does,
with one ggml_dyn_tallocr per buffer type: a node in its backend's buffer, a source not yet
allocated in its consumer's; frees go back to the tensor's own buffer.
"""

from __future__ import annotations

from ...units import cdiv
from .ggml_alloc import FREE, NBYTES, NEVER, reserve_counted
from .ggml_graph import INPUT, OUTPUT, VIEW_OPS, Graph, Tensor
from .ggml_sched_plan import OFFLOAD_MIN_BATCH, SchedPlan, plan_of

__all__ = ["sched_sizes", "sched_bounds", "CUDA_ALIGNMENT", "HOST_ALIGNMENT", "OFFLOAD_MIN_BATCH"]

CUDA_ALIGNMENT = 128    # ggml-cuda.cu ggml_backend_cuda_buffer_type_get_alignment
HOST_ALIGNMENT = 32     # ggml-cuda.cu ggml_backend_cuda_host_buffer_type: the CPU buffer type's
_VIEWS = frozenset(VIEW_OPS)


def sched_sizes(graph: Graph, weight_backend, n_gpus: int, *, n_copies: int = 1, op_offload: bool = True,
                weight_bytes=None, norm_backend=None, gpu_alloc_size=None, copy_unused_inputs: bool = True,
                blas: bool = False, kqv_host: bool = False) -> list:
    """The bytes ggml_gallocr_reserve_n reserves per backend (GPUs 0..n_gpus-1, then the host) for
    ``graph`` when ``weight_backend(tensor, expert)`` gives the backend of each weight and KV tensor
    (``expert``: src[0] of a MUL_MAT_ID). A weight copied to another backend (a host weight whose op
    a GPU takes over) takes ``weight_bytes(tensor, expert)`` there: the file's quantised tensor, with
    ggml_backend_cuda_buffer_type_get_alloc_size's row padding (the graph's weights are f32 stand-ins).
    ``norm_backend(il)``: the backend llama.cpp pins a layer's "norm" node to (src/llama-context.cpp
    graph_get_cb: with full offload or under 32 tokens, ggml_backend_sched_set_tensor_backend of each
    build_norm's RMS_NORM to its layer's device; -1: not pinned), set before pass 1 as user assignments.
    ``gpu_alloc_size(tensor)``: a GPU buffer type's get_alloc_size where it is not ggml_nbytes.
    ``copy_unused_inputs`` False: pass 5 makes the n_copies copies of a graph input where a node reads it, so an input
    no node reads (the unused inp_embd) is allocated once (llama.cpp@76f46ad29 ggml/src/ggml-backend.cpp#L1330-L1350,
    settings.SCHED_USED_INPUT_COPIES_TO); True: pass 6 copies every input leaf (#L1407-L1444 at 0c1e57098).
    ``blas``: a BLAS backend (the module's docstring), index n_gpus + 1: its buffer's bytes come last.
    ``kqv_host``: the KV cache on the host (-nkvo, cparams.offload_kqv false; ``weight_backend`` puts the cache there):
    each attention output without flash attention (graphs.KQV_OUT) is pinned to the CPU backend before pass 1
    (llama.cpp@0c1e57098 src/llama-graph.cpp#L2746-L2749: "all nodes between the KV store and the attention output are
    run on the CPU"; the same in build_attn_mha at llama.cpp@1d36b3670 src/llama-graph.cpp#L1281-L1284). Nothing else
    is pinned: the stores and the views of the cache run where the cache is (pass 1, view_src), KQ, the softmax and KQV,
    between the host's stores and the pinned output, are left to pass 2's "rest" sweeps (the host); flash attention
    has no pin, so pass 2 takes it to the GPU of the output projection after it, copying the cache's views there."""
    # the graph is left as it came (a built graph is scheduled again for other placements: scheduled._built):
    # the sources pass 5 replaces by copies and the input leafs' OUTPUT flag are put back once it is allocated
    plan = plan_of(graph)
    saved: list = []        # (tensor, its sources, its flags) before pass 5 / 6 changed them
    try:
        wb = _place(plan, weight_backend, n_gpus, op_offload, norm_backend, blas, kqv_host)
        return _split_and_allocate(graph, plan, wb, n_gpus, n_copies, weight_bytes, gpu_alloc_size, saved,
                                   copy_unused_inputs, blas)
    finally:
        for t, src, flags, alloc_src in saved:
            t.src, t.flags, t.alloc_src = src, flags, alloc_src


def sched_bounds(graph: Graph, weight_backend, n_gpus: int, *, n_copies: int = 1, op_offload: bool = True,
                 weight_bytes=None, norm_backend=None, gpu_alloc_size=None, blas: bool = False,
                 kqv_host: bool = False) -> list | None:
    """Bytes per backend that sched_sizes' answer (the same arguments) cannot exceed, from passes 1 and 2 alone: a
    buffer's size is its high-water mark, which ggml_dyn_tallocr_alloc raises by at most the aligned size of each
    allocation (a free block other than the last lies below the mark; the last starts at or below it), so it is at
    most the sum of what is allocated in it. Summed per backend: each node allocated on its backend; n_copies copies
    of each source of another backend (or none yet: pass 4 may place it elsewhere) in the reading node's backend, the
    copies ggml_dup_tensor_layout makes (a weight at ``weight_bytes``); each leaf ggml-alloc allocates on its
    backend, or, with none yet, on the host and every backend a node runs on (pass 4 gives it its first reader's); with
    n_copies > 1 pass 6's copies of the inputs. None where a node is left with no backend (pass 4's default) or with
    BLAS (host memory shared by two buffers)."""
    if blas:
        return None
    plan = plan_of(graph)
    _place(plan, weight_backend, n_gpus, op_offload, norm_backend, kqv_host=kqv_host)
    aligns = [CUDA_ALIGNMENT] * n_gpus + [HOST_ALIGNMENT]
    sizes = [NBYTES if gpu_alloc_size is None else gpu_alloc_size] * n_gpus + [NBYTES]
    bound, busy = [0] * (n_gpus + 1), set()
    for n in graph.nodes:
        if n.op in _VIEWS:                      # never allocated, never copying a source
            continue
        b = n.sched
        if b == -1:
            return None
        busy.add(b)
        a = aligns[b]
        if n.allocated != NEVER:
            bound[b] += cdiv(sizes[b](n), a) * a
        for s in n.src:
            if s is not None and s.sched != b:
                nbytes = weight_bytes(s, id(s) in plan.experts) if s.external and weight_bytes is not None else -1
                size = s.size0 if nbytes < 0 else cdiv(nbytes, 4) * 4      # _copy's tensor
                bound[b] += n_copies * cdiv(size, a) * a
    for leaf in plan.free_leafs:
        extra = n_copies - 1 if n_copies > 1 and leaf.flags & INPUT else 0
        for b in (leaf.sched,) if leaf.sched != -1 else busy | {n_gpus}:
            a = aligns[b]
            bound[b] += (1 + extra) * cdiv(leaf.size0, a) * a
    return bound


def _place(plan: SchedPlan, weight_backend, n_gpus, op_offload, norm_backend, blas=False, kqv_host=False) -> dict:
    """Passes 1 and 2: each leaf's and node's backend (Tensor.sched; -1 none yet), ggml-alloc's state reset;
    the weights' backends by id."""
    cpu, wb = n_gpus, {}
    for t, children, views, allocated in plan.start:     # ggml-alloc's counts and states (SchedPlan), no backend yet
        t.sched, t.n_children, t.n_views, t.allocated = -1, children, views, allocated
    for t, expert in plan.weights:                  # pass 1: ggml_backend_sched_backend_id_from_cur
        t.sched = wb[id(t)] = weight_backend(t, expert)
    for t in plan.weight_views:
        t.sched = t.view_src.sched
    for t in plan.inputs:
        t.sched = cpu
    for t, w, big, blas_runs in plan.weight_ops:
        b = w.sched
        if blas and blas_runs and b == cpu:
            t.sched = cpu + 1               # BLAS takes it (before the CPU: no offload asked)
        else:
            t.sched = 0 if big and op_offload and b == cpu and n_gpus else b
    if norm_backend is not None:                    # the user's pins, before pass 1 (so over its rules)
        pins: dict = {}
        for t in plan.norms:
            pinned = pins[t.layer] if t.layer in pins else pins.setdefault(t.layer, norm_backend(t.layer))
            if pinned != -1:
                t.sched = pinned
    if kqv_host:                                    # -nkvo: the attention outputs on the CPU backend (sched_sizes)
        for t in plan.kqv_outs:
            t.sched = cpu
    pending: list = []           # pass 2 (expand GPUs down, up; then the rest down, up), run by run: a run
    before = -2                  # of unplaced nodes takes the backend of the placed node before it if a GPU,
    for t in plan.work:          # else of the one after it if a GPU, else the one before, else the one after
        if type(t) is list or t.sched == -1:
            pending.append(t)
            continue
        if pending:
            _expand(pending, before, t.sched, cpu, blas)
            pending = []
        before = t.sched
    if pending:
        _expand(pending, before, -2, cpu, blas)
    return wb


def _expand(run: list, before: int, after: int, cpu: int, blas: bool = False) -> None:
    """Pass 2 on a run of unplaced nodes (single nodes and lists of nodes) between placed ones of backends
    ``before`` and ``after`` (-2: none): the first of the four sweeps to reach it places all of it (BLAS, which runs
    none of them, as none)."""
    if blas:
        before, after = (-2 if x == cpu + 1 else x for x in (before, after))
    if before not in (-2, cpu):
        b = before
    elif after not in (-2, cpu):
        b = after
    elif before != -2:
        b = before
    elif after != -2:
        b = after
    else:
        return
    for t in run:
        if type(t) is list:
            for n in t:
                n.sched = b
        else:
            t.sched = b


def _split_and_allocate(graph, plan, wb, n_gpus, n_copies, weight_bytes, gpu_alloc_size, saved: list,
                        copy_unused_inputs: bool = True, blas: bool = False) -> list:
    """Pass 4 (each node's in turn: only the node and its sources' are read after it), passes 5 and 6 and the
    copied graph (the module's docstring), its children and views as ggml-alloc counts them (SchedPlan's counts, moved
    by the copies), then allocated by ggml_alloc.reserve_counted."""
    splits, copies, cur, inputs, members = [], {}, None, None, None
    # the inputs a node reads, before pass 5 points its readers at copies (pass 6 of builds that copy only those)
    read = None if copy_unused_inputs or n_copies == 1 else {id(s) for n in graph.nodes for s in n.src}
    # a weight's backend is its Tensor.sched unless weight_backend gave -1 (then pass 4 placed it)
    unplaced = -1 in wb.values()
    for n in graph.nodes:
        b, v = n.sched, n.view_src                  # pass 4: the node's backend, then its sources'
        if b == -1 and v is not None:
            b = v.sched
        first = b                                   # what a source without one takes (before the default 0)
        n.sched = b = 0 if b == -1 else b
        if n.op in _VIEWS:                          # pass 5: a view joins the split (one before the first split is
            if members is not None and (n.alloc_src or n.allocated != NEVER):  # in none; one ggml-alloc has nothing
                members.append(n)                   # to do for is left out); its source has a backend: its root's
            continue
        crossing = weight_crossing = False          # a source on another backend; a weight (not the KV cache)
        for s in n.src:
            if s is not None:
                sb = s.sched
                if sb == -1:
                    s.sched = sb = s.view_src.sched if s.view_src is not None else first
                if sb != b and not (blas and sb >= n_gpus and b >= n_gpus):     # BLAS and the CPU: host memory
                    crossing = True
                    if s.external and not s.kv:
                        weight_crossing = True
        if b != cur or inputs and (weight_crossing if not unplaced else any(
                s is not None and s.external and not s.kv and wb[id(s)] != cur for s in n.src)):
            cur, inputs, members = b, [], []        # a new split (a weight of another backend after inputs)
            splits.append((b, inputs, members))
        if not crossing:
            if n.alloc_src or n.allocated != NEVER:
                members.append(n)
            continue
        members.append(n)
        src = list(n.src)
        for j, s in enumerate(src):
            if s is None or s.sched == cur or blas and s.sched >= n_gpus and cur >= n_gpus:
                continue
            key = (id(s), cur)
            if key not in copies:
                copies[key] = _copies(s, cur, n_copies, n_copies, weight_bytes, plan)
                inputs.append(s)
            src[j] = c = copies[key][0]
            s.n_children -= 1
            c.n_children += 1
        saved.append((n, n.src, n.flags, n.alloc_src))
        n.src = tuple(src)
        n.alloc_src = tuple(s for s in src if s is not None and not (s.view_src or s).external)
    nodes, leafs = [], []                        # the copied graph
    deps = plan.copies
    for b, inputs, members in splits:
        for s in inputs:
            dep = deps.get(id(s))
            if dep is None:                      # a view of the input that keeps it until its copy (made once)
                dep = deps[id(s)] = Tensor(s.type, s.ne, "NONE", (s,), view_src=s, nb=s.nb)
                dep.alloc_src = () if (s.view_src or s).external else (s,)
            dep.sched, dep.n_children, dep.n_views, dep.allocated = s.sched, 0, 0, NEVER
            s.n_children += 1
            nodes += [dep, copies[(id(s), b)][0]]
        nodes += members
    if n_copies > 1:                             # pass 6
        for leaf in graph.leafs:
            if leaf.flags & INPUT and (read is None or id(leaf) in read):
                saved.append((leaf, leaf.src, leaf.flags, leaf.alloc_src))
                leaf.flags |= OUTPUT
                leafs += _copies(leaf, leaf.sched, n_copies - 1, n_copies, None, plan)
        for b, inputs, _ in splits:
            for s in inputs:
                leafs += copies[(id(s), b)]
    leafs += plan.free_leafs                     # the graph's leafs ggml-alloc allocates (not weights, not views)
    plain = NBYTES
    gpu = plain if gpu_alloc_size is None else gpu_alloc_size
    if blas:        # the BLAS buffer: ggml_backend_cpu_buffer_type, TENSOR_ALIGNMENT (32) as the pinned one
        return reserve_counted(nodes, leafs, [CUDA_ALIGNMENT] * n_gpus + [HOST_ALIGNMENT] * 2,
                               [gpu] * n_gpus + [plain, plain, gpu])
    return reserve_counted(nodes, leafs, [CUDA_ALIGNMENT] * n_gpus + [HOST_ALIGNMENT], [gpu] * n_gpus + [plain, gpu])


def _copies(s: Tensor, backend: int, count: int, n_copies: int, weight_bytes, plan: SchedPlan) -> list:
    """``count`` copies (ggml_dup_tensor_layout) of source ``s`` in ``backend`` (inputs and outputs with n_copies >
    1), their allocator state fresh: tensors kept in ``plan`` by source, backend and bytes and reused (a copy's
    every field but that state is the same each time)."""
    nbytes = weight_bytes(s, id(s) in plan.experts) if s.external and weight_bytes is not None else -1
    key = (id(s), backend, nbytes, count)
    made = plan.copies.get(key)
    if made is None:
        made = plan.copies[key] = [_copy(s, nbytes) for _ in range(count)]
    flags = INPUT | OUTPUT if n_copies > 1 else 0
    for c in made:
        c.sched, c.n_children, c.n_views, c.allocated, c.flags = backend, 0, 0, FREE, flags
    return made


def _copy(s: Tensor, nbytes: int) -> Tensor:
    """ggml_dup_tensor_layout of ``s`` (``nbytes`` >= 0: a weight's bytes in the copy's buffer, as an f32 row)."""
    c = Tensor("f32", (cdiv(nbytes, 4),)) if nbytes >= 0 else Tensor(s.type, s.ne, nb=s.nb)
    c.alloc_src = ()
    return c

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
from .ggml_alloc import gallocr_sizes
from .ggml_graph import INPUT, OUTPUT, VIEW_OPS, Graph, Tensor

__all__ = ["sched_sizes", "CUDA_ALIGNMENT", "HOST_ALIGNMENT", "OFFLOAD_MIN_BATCH"]

CUDA_ALIGNMENT = 128    # ggml-cuda.cu ggml_backend_cuda_buffer_type_get_alignment
HOST_ALIGNMENT = 32     # ggml-cuda.cu ggml_backend_cuda_host_buffer_type: the CPU buffer type's
OFFLOAD_MIN_BATCH = 32  # ggml-cuda.cu: op_offload_min_batch_size (GGML_OP_OFFLOAD_MIN_BATCH) default


def _batch(t: Tensor) -> int:
    """ggml-cuda.cu get_op_batch_size."""
    if t.op == "GET_ROWS":
        return 0
    if t.op == "MUL_MAT":
        return t.ne[1]
    if t.op in ("MUL_MAT_ID", "ROPE"):
        return t.ne[2]
    return t.ne[1] * t.ne[2] * t.ne[3]


def sched_sizes(graph: Graph, weight_backend, n_gpus: int, *, n_copies: int = 1, op_offload: bool = True,
                weight_bytes=None, norm_backend=None, gpu_alloc_size=None) -> list:
    """The bytes ggml_gallocr_reserve_n reserves per backend (GPUs 0..n_gpus-1, then the host) for
    ``graph`` when ``weight_backend(tensor, expert)`` gives the backend of each weight and KV tensor
    (``expert``: src[0] of a MUL_MAT_ID). A weight copied to another backend (a host weight whose op
    a GPU takes over) takes ``weight_bytes(tensor, expert)`` there: the file's quantised tensor, with
    ggml_backend_cuda_buffer_type_get_alloc_size's row padding (the graph's weights are f32 stand-ins).
    ``norm_backend(il)``: the backend llama.cpp pins a layer's "norm" node to (src/llama-context.cpp
    graph_get_cb: with full offload or under 32 tokens, ggml_backend_sched_set_tensor_backend of each
    build_norm's RMS_NORM to its layer's device; -1: not pinned), set before pass 1 as user assignments."""
    # the graph is left as it came (a built graph is scheduled again for other placements: scheduled._built):
    # the sources pass 5 replaces by copies and the input leafs' OUTPUT flag are put back once it is allocated
    saved: list = []        # (tensor, its sources, its flags) before pass 5 / 6 changed them
    try:
        return _sched_sizes(graph, weight_backend, n_gpus, n_copies, op_offload, weight_bytes, norm_backend,
                            gpu_alloc_size, saved)
    finally:
        for t, src, flags in saved:
            t.src, t.flags = src, flags


def _sched_sizes(graph, weight_backend, n_gpus, n_copies, op_offload, weight_bytes, norm_backend,
                 gpu_alloc_size, saved: list) -> list:
    cpu = n_gpus
    experts = {id(n.src[0]) for n in graph.nodes if n.op == "MUL_MAT_ID"}

    def wb(t):
        return weight_backend(t, id(t) in experts)

    def from_cur(t):
        if t.external:
            return wb(t)
        if t.view_src is not None and t.view_src.external:
            return wb(t.view_src)
        if t.flags & INPUT:
            return cpu
        if t.op not in ("ROPE", "FLASH_ATTN_EXT"):
            for s in t.src:
                if s is not None and s.external and not s.kv:
                    b = wb(s)
                    if op_offload and b == cpu and n_gpus and _batch(t) >= OFFLOAD_MIN_BATCH:
                        return 0
                    return b
        return -1

    for t in graph.leafs + graph.nodes:
        pinned = norm_backend(t.layer) if norm_backend and t.op == "RMS_NORM" and t.layer >= 0 else -1
        t.sched = pinned if pinned != -1 else from_cur(t)
    work = [n for n in graph.nodes if n.op not in VIEW_OPS]
    for gpu_only in (True, False):               # pass 2: expand gpu down, up; then the rest down, up
        for order in (work, work[::-1]):
            cur = -1
            for n in order:
                b = n.sched
                if b != -1:
                    cur = -1 if gpu_only and b == cpu else b
                elif cur != -1:
                    n.sched = cur
    for n in graph.nodes:                        # pass 4
        if n.view_src is not None and n.sched == -1:
            n.sched = n.view_src.sched
        for s in n.src:
            if s is not None and s.sched == -1:
                s.sched = s.view_src.sched if s.view_src is not None else n.sched
        if n.sched == -1:
            n.sched = 0
    # pass 5: splits and copies
    splits, copies, cur = [], {}, None
    for n in graph.nodes:
        if n.op in VIEW_OPS:
            if splits:
                splits[-1][2].append(n)
            continue
        b = n.sched
        new = cur is None or b != cur
        if not new and splits[-1][1]:
            new = any(s is not None and s.external and not s.kv and wb(s) != cur for s in n.src)
        if new:
            splits.append((b, [], []))
            cur = b
        split = splits[-1]
        src = list(n.src)
        for j, s in enumerate(src):
            if s is None or s.sched == cur:
                continue
            key = (id(s), cur)
            if key not in copies:
                made = []
                for _ in range(n_copies):
                    c = Tensor(s.type, s.ne, nb=s.nb)
                    if s.external and weight_bytes is not None:     # the same bytes as an f32 row
                        c = Tensor("f32", (cdiv(weight_bytes(s, id(s) in experts), 4),))
                    c.sched = cur
                    if n_copies > 1:
                        c.flags |= INPUT | OUTPUT
                    made.append(c)
                copies[key] = made
                split[1].append(s)
            src[j] = copies[key][0]
        src = tuple(src)
        if src != n.src:
            saved.append((n, n.src, n.flags))
            n.src = src
        split[2].append(n)
    # the copied graph
    nodes, leafs = [], []
    for b, inputs, members in splits:
        for s in inputs:
            dep = Tensor(s.type, s.ne, "NONE", (s,), view_src=s, nb=s.nb)
            dep.sched = s.sched
            nodes += [dep, copies[(id(s), b)][0]]
        nodes += members
    if n_copies > 1:
        for leaf in graph.leafs:
            if leaf.flags & INPUT:
                saved.append((leaf, leaf.src, leaf.flags))
                leaf.flags |= OUTPUT
                for _ in range(n_copies - 1):
                    c = Tensor(leaf.type, leaf.ne, nb=leaf.nb)
                    c.flags |= INPUT | OUTPUT
                    c.sched = leaf.sched
                    leafs.append(c)
        for b, inputs, _ in splits:
            for s in inputs:
                leafs += copies[(id(s), b)]
    leafs += graph.leafs
    size = None if gpu_alloc_size is None else (lambda t, b: gpu_alloc_size(t) if b < n_gpus else t.nbytes())
    return gallocr_sizes(nodes, leafs, lambda t: t.sched, [CUDA_ALIGNMENT] * n_gpus + [HOST_ALIGNMENT], size)



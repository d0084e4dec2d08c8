"""The ggml allocator and scheduler as kvmem first wrote them (kvmem/engines/llamacpp/ggml_alloc.py and
ggml_sched.py at 135d31c, before they were made faster): straightforward, tensor by tensor, with
closures and an _Alloc object per buffer. tests/engines/test_llamacpp_ggml_fast.py checks that the fast
modules give the same bytes as this reference on seeded random graphs and placements. Not collected
(no test_ prefix); its docstrings are the old modules'.
"""

from __future__ import annotations

from kvmem.engines.llamacpp.ggml_graph import CAN_INPLACE, INPUT, OUTPUT, VIEW_OPS, Graph, Tensor
from kvmem.units import cdiv, pad


class _Alloc:
    """ggml_dyn_tallocr with one chunk (the CPU and CUDA buffer types have no size limit here)."""

    def __init__(self, alignment):
        self.alignment, self.blocks, self.max_size = alignment, [[0, 1 << 62]], 0

    def align(self, size):
        return pad(size, self.alignment)

    def alloc(self, size):
        size = self.align(size)
        best, best_size = -1, None
        for i, (_, bsize) in enumerate(self.blocks[:-1]):
            if bsize >= size and (best_size is None or bsize <= best_size):
                best, best_size = i, bsize
        if best == -1:
            best = len(self.blocks) - 1
        block = self.blocks[best]
        offset = block[0]
        block[0] += size
        block[1] -= size
        if block[1] == 0:
            del self.blocks[best]
        self.max_size = max(self.max_size, offset + size)
        return offset

    def free(self, offset, size):
        size = self.align(size)
        blocks = self.blocks
        for i, block in enumerate(blocks):
            if block[0] + block[1] == offset:
                block[1] += size
                if i + 1 < len(blocks) and block[0] + block[1] == blocks[i + 1][0]:
                    block[1] += blocks[i + 1][1]
                    del blocks[i + 1]
                return
            if offset + size == block[0]:
                block[0] = offset
                block[1] += size
                if i > 0 and blocks[i - 1][0] + blocks[i - 1][1] == block[0]:
                    blocks[i - 1][1] += block[1]
                    del blocks[i]
                return
        pos = 0
        while pos < len(blocks) and blocks[pos][0] < offset:
            pos += 1
        blocks.insert(pos, [offset, size])


def _touched(nodes, leafs):
    """Every tensor the allocator reads: the leafs, the nodes, their sources and the sources' roots."""
    seen = {}
    for t in (*leafs, *nodes):
        seen[id(t)] = t
        for s in t.src:
            if s is not None:
                seen[id(s)] = s
                if s.view_src is not None:
                    seen[id(s.view_src)] = s.view_src
        if t.view_src is not None:
            seen[id(t.view_src)] = t.view_src
    return seen.values()


def gallocr_size(graph: Graph, alignment: int = 32) -> int:
    """The bytes ggml_gallocr_reserve_n reserves for ``graph`` on one buffer type."""
    return gallocr_sizes(graph.nodes, graph.leafs, lambda _t: 0, (alignment,))[0]


def gallocr_sizes(nodes, leafs, backend, alignments, alloc_size=None) -> list[int]:  # noqa: C901 (kept as written)
    """ggml_gallocr_alloc_graph_impl over ``nodes`` and ``leafs`` with one allocator per buffer
    type: ``backend(tensor)`` is the index of the buffer a tensor is allocated in (the node's own
    for its inputs), ``alignments`` each buffer's alignment; the bytes each buffer reserves.
    ``alloc_size(tensor, buffer)``: the buffer type's get_alloc_size where it is not ggml_nbytes
    (ggml_gallocr_allocate_node and ggml_gallocr_free_node ask ggml_backend_buft_get_alloc_size)."""
    allocs = [_Alloc(a) for a in alignments]
    size_of = alloc_size or (lambda t, _b: t.nbytes())
    for t in _touched(nodes, leafs):    # each tensor's allocator state (ggml_gallocr's hash set), reset
        t.n_children = t.n_views = t.offset = 0
        t.allocated, t.buffer = False, -1

    def allocate(t, b):
        if t.external or t.allocated or t.view_src is not None:
            return
        t.allocated = True
        if t.op in CAN_INPLACE:
            for p in t.src:
                if p is None or p is t:
                    continue
                if not p.allocated or p.flags & OUTPUT or p.view_src is not None:
                    continue
                if (p.type, p.ne, p.nb) != (t.type, t.ne, t.nb):
                    continue
                if p.n_children == 1 and p.n_views == 0:
                    a = allocs[p.buffer]
                    t.offset, t.buffer = p.offset, p.buffer
                    p.allocated = False
                    extra = a.align(p.nbytes()) - a.align(t.nbytes())
                    if extra > 0:
                        a.free(p.offset + a.align(t.nbytes()), extra)
                    return
        t.buffer = b
        t.offset = allocs[b].alloc(size_of(t, b))

    def free(t):
        if t.flags & OUTPUT:
            return
        allocs[t.buffer].free(t.offset, size_of(t, t.buffer))
        t.allocated = False

    for leaf in leafs:
        allocate(leaf, backend(leaf))
    for node in nodes:
        if node.view_src is not None and node.op != "NONE":
            node.view_src.n_views += 1
        if node.flags & INPUT:
            allocate(node, backend(node))
        for s in node.src:
            if s is not None:
                s.n_children += 1
                if s.flags & INPUT:
                    allocate(s, backend(node))
    for node in nodes:
        b = backend(node)
        for s in node.src:     # allocate's own early return, tested here: most sources are allocated already
            if s is not None and not (s.external or s.allocated or s.view_src is not None):
                allocate(s, b)
        if not (node.external or node.allocated or node.view_src is not None):
            allocate(node, b)
        for p in node.src:
            if p is None:
                continue
            p.n_children -= 1
            if p.n_children == 0 and p.n_views == 0:
                if p.view_src is not None:
                    v = p.view_src
                    v.n_views -= 1
                    if v.n_views == 0 and v.n_children == 0 and v.allocated:
                        free(v)
                elif p.allocated:
                    free(p)
    return [a.max_size for a in allocs]


# ---- ggml_sched

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


def _sched_sizes(graph, weight_backend, n_gpus, n_copies, op_offload, weight_bytes, norm_backend,  # noqa: C901
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



"""ggml-alloc's graph allocator, as llama.cpp sizes its compute buffers with it: the bytes each
buffer type reserves for a graph of kvmem.engines.llamacpp.ggml_graph tensors.

Everything below follows the vendored ggml of llama-cpp-python 0.3.36 (vendor/llama.cpp):

Allocation (ggml/src/ggml-alloc.c)
    ggml_gallocr_alloc_graph_impl: the leafs first, in order (those without data: the graph's
        inputs); children and views counted per tensor; then per node: its sources, then the
        node (ggml_gallocr_allocate_node), then each source's children count drops and a source
        with no children and no views left is freed (a view's root when its last view goes);
        outputs (GGML_TENSOR_FLAG_OUTPUT) are never freed.
    ggml_gallocr_allocate_node: views and tensors with data (weights, the KV cache) take no
        space; an op of ggml_op_can_inplace takes over the memory of a source it owns that is
        not an output, not a view, has the same type/ne/nb and this node as its only child
        (ggml_gallocr_free_extra_space frees the source's surplus); else ggml_dyn_tallocr_alloc.
    ggml_dyn_tallocr_alloc: the size rounded up to the alignment; the best-fitting free block
        other than the last (smallest size >= request, the later one on ties), else the last
        block, which grows the chunk; the buffer is the chunk's high-water mark (max_size).
    ggml_dyn_tallocr_free_bytes: merged with an adjacent free block (the first found, then its
        neighbour), else inserted in address order.
"""

from __future__ import annotations

from ...units import pad
from .ggml_graph import CAN_INPLACE, INPUT, OUTPUT, Graph

__all__ = ["gallocr_size", "gallocr_sizes"]


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


def gallocr_sizes(nodes, leafs, backend, alignments, alloc_size=None) -> list[int]:
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

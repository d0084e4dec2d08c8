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

from dataclasses import dataclass

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


@dataclass
class _Info:
    n_children: int = 0
    n_views: int = 0
    allocated: bool = False
    offset: int = 0


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
    info: dict[int, _Info] = {}
    buf: dict[int, int] = {}

    def get(t):
        h = info.get(id(t))
        if h is None:
            h = info[id(t)] = _Info()
        return h

    def allocate(t, b):
        h = get(t)
        if t.external or h.allocated or t.view_src is not None:
            return
        h.allocated = True
        if t.op in CAN_INPLACE:
            for p in t.src:
                if p is None or p is t:
                    continue
                ph = get(p)
                if not ph.allocated or p.flags & OUTPUT or p.view_src is not None:
                    continue
                if (p.type, p.ne, p.nb) != (t.type, t.ne, t.nb):
                    continue
                if ph.n_children == 1 and ph.n_views == 0:
                    pb = buf[id(p)]
                    a = allocs[pb]
                    h.offset, buf[id(t)] = ph.offset, pb
                    ph.allocated = False
                    extra = a.align(p.nbytes()) - a.align(t.nbytes())
                    if extra > 0:
                        a.free(ph.offset + a.align(t.nbytes()), extra)
                    return
        buf[id(t)] = b
        h.offset = allocs[b].alloc(size_of(t, b))

    def free(t):
        if t.flags & OUTPUT:
            return
        h = get(t)
        allocs[buf[id(t)]].free(h.offset, size_of(t, buf[id(t)]))
        h.allocated = False

    for leaf in leafs:
        allocate(leaf, backend(leaf))
    for node in nodes:
        if node.view_src is not None and node.op != "NONE":
            get(node.view_src).n_views += 1
        if node.flags & INPUT:
            allocate(node, backend(node))
        for s in node.src:
            if s is not None:
                get(s).n_children += 1
                if s.flags & INPUT:
                    allocate(s, backend(node))
    for node in nodes:
        b = backend(node)
        for s in node.src:
            if s is not None:
                allocate(s, b)
        allocate(node, b)
        for p in node.src:
            if p is None:
                continue
            ph = get(p)
            ph.n_children -= 1
            if ph.n_children == 0 and ph.n_views == 0:
                if p.view_src is not None:
                    vh = get(p.view_src)
                    vh.n_views -= 1
                    if vh.n_views == 0 and vh.n_children == 0 and vh.allocated:
                        free(p.view_src)
                elif ph.allocated:
                    free(p)
    return [a.max_size for a in allocs]

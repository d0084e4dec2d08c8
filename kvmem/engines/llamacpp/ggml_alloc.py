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

from bisect import bisect_left
from operator import attrgetter

from .ggml_graph import CAN_INPLACE, INPUT, OUTPUT, Graph

__all__ = ["FREE", "TAKEN", "NEVER", "NBYTES", "reserve", "reserve_counted", "gallocr_size", "gallocr_sizes"]

# a tensor's allocator state (Tensor.allocated): not allocated, allocated, never allocated (a view, or a
# tensor with data: a weight, the KV cache)
FREE, TAKEN, NEVER = 0, 1, 2
NBYTES = attrgetter("size0")        # a tensor's ggml_nbytes (Tensor.nbytes() without a Python call)


def reserve(nodes, leafs, alignments, size_of, touched=None) -> list[int]:
    """ggml_gallocr_alloc_graph_impl over ``nodes`` and ``leafs`` with one ggml_dyn_tallocr per buffer type
    (one chunk: the CPU and CUDA buffer types have no size limit here). Each tensor is allocated in buffer
    ``tensor.sched`` (a source not yet allocated: in its node's); ``alignments``: each buffer's;
    ``size_of[buffer](tensor)``: the bytes it asks (ggml_backend_buft_get_alloc_size; size_of[-1] for a
    tensor given no buffer, -1, which takes the last buffer's memory); ``touched``: every tensor the nodes
    and leafs reach (by sources and roots), whose allocator state is reset and whose children and views are
    counted here (None: the caller did both, every graph input being a leaf; ggml_sched, which does, allocates
    with reserve_counted). The bytes each buffer reserves (its high-water mark)."""
    if touched is not None:
        for t in touched:
            t.n_children = t.n_views = 0
            t.allocated = NEVER if t.external or t.view_src is not None else FREE
    aligns = list(alignments)
    block_off = [[0] for _ in aligns]           # each buffer's free blocks in address order, the last unbounded
    block_size = [[1 << 62] for _ in aligns]
    high = [0] * len(aligns)

    def alloc(b, size):         # ggml_dyn_tallocr_alloc
        a = aligns[b]
        size = -(-size // a) * a
        offs, sizes = block_off[b], block_size[b]
        last = best = len(sizes) - 1
        best_size = 0
        for i in range(last):
            s = sizes[i]
            if s >= size and (best == last or s <= best_size):
                best, best_size = i, s
        at = offs[best]
        offs[best] = at + size
        rest = sizes[best] - size
        if rest:
            sizes[best] = rest
        else:
            del offs[best], sizes[best]
        if at + size > high[b]:
            high[b] = at + size
        return at

    def free_bytes(b, at, size):    # ggml_dyn_tallocr_free_bytes
        a = aligns[b]
        size = -(-size // a) * a
        offs, sizes = block_off[b], block_size[b]
        count = len(offs)
        for i in range(count):
            o = offs[i]
            if o + sizes[i] == at:
                sizes[i] += size
                if i + 1 < count and o + sizes[i] == offs[i + 1]:
                    sizes[i] += sizes[i + 1]
                    del offs[i + 1], sizes[i + 1]
                return
            if at + size == o:
                offs[i] = at
                sizes[i] += size
                if i > 0 and offs[i - 1] + sizes[i - 1] == at:
                    sizes[i - 1] += sizes[i]
                    del offs[i], sizes[i]
                return
        pos = 0
        while pos < count and offs[pos] < at:
            pos += 1
        offs.insert(pos, at)
        sizes.insert(pos, size)

    def allocate(t, b):         # ggml_gallocr_allocate_node of a FREE tensor
        t.allocated = TAKEN
        if t.op in CAN_INPLACE:
            for p in t.src:
                if p is None or p is t or p.allocated != TAKEN or p.flags & OUTPUT:
                    continue
                if p.n_children == 1 and p.n_views == 0 and p.type == t.type and p.ne == t.ne and p.nb == t.nb:
                    b = p.buffer
                    t.offset, t.buffer, t.size = p.offset, b, size_of[b](t)
                    p.allocated = FREE
                    a = aligns[b]
                    kept = -(-t.size0 // a) * a
                    extra = -(-p.size0 // a) * a - kept
                    if extra > 0:
                        free_bytes(b, p.offset + kept, extra)
                    return
        t.buffer = b
        t.size = size = size_of[b](t)
        t.offset = alloc(b, size)

    for leaf in leafs:
        if leaf.allocated == FREE:
            allocate(leaf, leaf.sched)
    for node in nodes if touched is not None else ():
        if node.view_src is not None and node.op != "NONE":
            node.view_src.n_views += 1
        if node.flags & INPUT and node.allocated == FREE:
            allocate(node, node.sched)
        for s in node.src:
            if s is not None:
                s.n_children += 1
                if s.flags & INPUT and s.allocated == FREE:
                    allocate(s, node.sched)
    # a source is allocated before its node (a leaf, or an earlier node) unless the graph is out of order: the
    # caller that counted (touched None) hands an ordered graph whose sources are never allocated here
    early = touched is not None
    for node in nodes:
        b = node.sched
        srcs = node.src
        if early:
            for s in srcs:
                if s is not None and s.allocated == FREE:
                    allocate(s, b)
        if node.allocated == FREE:
            if node.op in CAN_INPLACE:
                allocate(node, b)
            else:               # ggml_dyn_tallocr_alloc (alloc, written out: most nodes take this path)
                node.allocated, node.buffer = TAKEN, b
                node.size = size = size_of[b](node)
                a = aligns[b]
                size = -(-size // a) * a
                offs, sizes = block_off[b], block_size[b]
                last = best = len(sizes) - 1
                best_size = 0
                for i in range(last):
                    s = sizes[i]
                    if s >= size and (best == last or s <= best_size):
                        best, best_size = i, s
                node.offset = at = offs[best]
                offs[best] = at + size
                rest = sizes[best] - size
                if rest:
                    sizes[best] = rest
                else:
                    del offs[best], sizes[best]
                if at + size > high[b]:
                    high[b] = at + size
        for p in srcs:
            if p is None:
                continue
            left = p.n_children - 1
            p.n_children = left
            if left or p.n_views:
                continue
            v = p.view_src
            if v is not None:
                v.n_views -= 1
                if v.n_views or v.n_children:
                    continue
                p = v
            if p.allocated == TAKEN and not p.flags & OUTPUT:     # ggml_gallocr_free_node
                free_bytes(p.buffer, p.offset, p.size)
                p.allocated = FREE
    return high


def reserve_counted(nodes, leafs, alignments, size_of) -> list[int]:
    """reserve of ggml_sched's copied graph (``touched`` None: the counts and states set), in one loop over the
    leafs then the nodes, each node's sources read from Tensor.alloc_src (its sources but None and those of a weight
    or the KV cache: never allocated, never freed); ggml_sched leaves out the nodes with nothing to do (not
    allocated, no such source)."""
    aligns = list(alignments)
    block_off = [[0] for _ in aligns]
    block_size = [[1 << 62] for _ in aligns]
    high = [0] * len(aligns)
    inplace = CAN_INPLACE
    plain = all(f is NBYTES for f in size_of)       # every buffer asks ggml_nbytes: size0 read, no call
    # the free blocks in address order stay apart (none ends where the next starts) and not empty while every buffer
    # asks ggml_nbytes (a node in place of a source has the source's bytes, so no freed bytes are free already) and
    # nothing freed is empty: ggml's scan for the block that ends where the freed bytes start (merged with the next if
    # it then touches it), else the one that starts where they end, finds only the blocks either side of them, the one
    # before first, which a bisection finds (the scan took 40 % of reserve_counted, glm-5 x4: 4,000 frees a call over
    # 3.4 blocks; 5.6 -> 5.0 ms); an empty block (freeing no bytes where no block ends or starts) turns it off
    apart = plain
    for node in (*leafs, *nodes):
        srcs = node.alloc_src
        if node.allocated == FREE:
            b = node.sched
            node.allocated = TAKEN
            took = False
            if node.op in inplace:      # ggml_gallocr_allocate_node: the memory of a source it alone reads
                for p in srcs:
                    if p.n_children != 1 or p.allocated != TAKEN or p.n_views or p.flags & OUTPUT or p is node or \
                            p.ne != node.ne or p.type != node.type or p.nb != node.nb:
                        continue
                    b = p.buffer
                    node.offset, node.buffer = p.offset, b
                    node.size = node.size0 if plain else size_of[b](node)
                    p.allocated = FREE
                    a = aligns[b]
                    kept = -(-node.size0 // a) * a
                    extra = -(-p.size0 // a) * a - kept
                    if extra > 0:
                        _free_bytes(block_off[b], block_size[b], p.offset + kept, extra)
                    took = True
                    break
            if not took:                # ggml_dyn_tallocr_alloc
                node.buffer = b
                node.size = size = node.size0 if plain else size_of[b](node)
                a = aligns[b]
                size = -(-size // a) * a
                offs, sizes = block_off[b], block_size[b]
                best = len(sizes) - 1
                if best:                # the best-fitting block before the last (the later one on ties)
                    last, best_size = best, 0
                    for i in range(last):
                        s = sizes[i]
                        if s >= size and (best == last or s <= best_size):
                            best, best_size = i, s
                node.offset = at = offs[best]
                offs[best] = at + size
                rest = sizes[best] - size
                if rest:
                    sizes[best] = rest
                else:
                    del offs[best], sizes[best]
                if at + size > high[b]:
                    high[b] = at + size
        for p in srcs:
            left = p.n_children - 1
            p.n_children = left
            if left or p.n_views:
                continue
            v = p.view_src
            if v is not None:
                v.n_views -= 1
                if v.n_views or v.n_children:
                    continue
                p = v
            if p.allocated == TAKEN and not p.flags & OUTPUT:     # ggml_gallocr_free_node
                p.allocated = FREE
                b = p.buffer
                a = aligns[b]
                size = -(-p.size // a) * a
                offs, sizes, at = block_off[b], block_size[b], p.offset
                if not apart:
                    _free_bytes(offs, sizes, at, size)
                    continue
                i = bisect_left(offs, at)       # ggml_dyn_tallocr_free_bytes, the blocks apart (above)
                if not size:                    # nothing freed: merged with a block that ends or starts at it (no
                    if not (i and offs[i - 1] + sizes[i - 1] == at or i < len(offs) and offs[i] == at):
                        apart = False           # change), else an empty block inserted: ggml's scan from here on
                        offs.insert(i, at)
                        sizes.insert(i, size)
                    continue
                if i and offs[i - 1] + sizes[i - 1] == at:
                    i -= 1
                    sizes[i] += size
                    if offs[i] + sizes[i] == offs[i + 1]:       # (the last block is after any bytes allocated)
                        sizes[i] += sizes[i + 1]
                        del offs[i + 1], sizes[i + 1]
                elif at + size == offs[i]:
                    offs[i] = at
                    sizes[i] += size
                else:
                    offs.insert(i, at)
                    sizes.insert(i, size)
    return high


def _free_bytes(offs: list, sizes: list, at: int, size: int) -> None:
    """ggml_dyn_tallocr_free_bytes of ``size`` bytes (aligned) at ``at`` into a buffer's free blocks."""
    count = len(offs)
    for i in range(count):
        o = offs[i]
        if o + sizes[i] == at:
            sizes[i] += size
            if i + 1 < count and o + sizes[i] == offs[i + 1]:
                sizes[i] += sizes[i + 1]
                del offs[i + 1], sizes[i + 1]
            return
        if at + size == o:
            offs[i] = at
            sizes[i] += size
            if i > 0 and offs[i - 1] + sizes[i - 1] == at:
                sizes[i - 1] += sizes[i]
                del offs[i], sizes[i]
            return
    pos = 0
    while pos < count and offs[pos] < at:
        pos += 1
    offs.insert(pos, at)
    sizes.insert(pos, size)


def gallocr_size(graph: Graph, alignment: int = 32) -> int:
    """The bytes ggml_gallocr_reserve_n reserves for ``graph`` on one buffer type."""
    return gallocr_sizes(graph.nodes, graph.leafs, lambda _t: 0, (alignment,))[0]


def gallocr_sizes(nodes, leafs, backend, alignments, alloc_size=None) -> list[int]:
    """ggml_gallocr_alloc_graph_impl over ``nodes`` and ``leafs`` with one allocator per buffer
    type: ``backend(tensor)`` is the index of the buffer a tensor is allocated in (the node's own
    for its inputs), ``alignments`` each buffer's alignment; the bytes each buffer reserves.
    ``alloc_size(tensor, buffer)``: the buffer type's get_alloc_size where it is not ggml_nbytes
    (ggml_gallocr_allocate_node and ggml_gallocr_free_node ask ggml_backend_buft_get_alloc_size)."""
    seen = {}
    for t in (*leafs, *nodes):      # every tensor the allocator reads: the sources' roots too
        seen[id(t)] = t
        for s in (*t.src, t.view_src):
            if s is not None:
                seen[id(s)] = s
                if s.view_src is not None:
                    seen[id(s.view_src)] = s.view_src
    for t in seen.values():
        t.sched = backend(t)
    sizes = [NBYTES if alloc_size is None else (lambda t, b=b: alloc_size(t, b))
             for b in (*range(len(alignments)), -1)]
    return reserve(nodes, leafs, alignments, sizes, seen.values())

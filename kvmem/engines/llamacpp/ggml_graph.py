"""A small ggml: tensor shapes, strides and views, graph order and ggml-alloc's graph allocator,
enough to size llama.cpp's compute buffer the way llama.cpp itself sizes it (kvmem.engines.llamacpp.compute).

Everything below follows the vendored ggml of llama-cpp-python 0.3.36 (vendor/llama.cpp):

Tensors (ggml/src/ggml.c)
    ggml_new_tensor_impl: contiguous strides nb[0] = type size, nb[1] = nb[0] x ne[0] / block,
        nb[i] = nb[i-1] x ne[i-1]; a view's view_src is always the root (a view of a view adds
        its offset and points at the root).
    ggml_nbytes: 0 if any ne is 0; else type size + sum (ne[i] - 1) x nb[i] (block 1), or
        ne[0] x nb[0] / block + sum over i >= 1 (quantised).
    ggml_view_4d / reshape / permute / transpose: views (op VIEW, RESHAPE, PERMUTE, TRANSPOSE);
        ggml_set_rows and the *_inplace ops are views of their destination as well.
    ggml_cast: a CPY node whose src[1] is the node itself.

Graph order (ggml.c ggml_visit_parents_graph, ggml_build_forward_expand)
    depth first, src[0] .. src[9] left to right, a tensor once; an op-less tensor is a leaf, any
    other a node, appended after its sources.

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

__all__ = ["TYPES", "Tensor", "Graph", "gallocr_size", "Allocator", "AllocInfo"]

# ggml type: (block size, bytes per block) -- ggml.c type_traits
TYPES = {"f32": (1, 4), "f16": (1, 2), "bf16": (1, 2), "i32": (1, 4), "i64": (1, 8),
         "q8_0": (32, 34), "q4_0": (32, 18), "q4_1": (32, 20), "q5_0": (32, 22), "q5_1": (32, 24),
         "iq4_nl": (32, 18)}

INPUT, OUTPUT = 1, 2
VIEW_OPS = ("VIEW", "RESHAPE", "PERMUTE", "TRANSPOSE")
# ggml-alloc.c ggml_op_can_inplace (the ops this module builds)
CAN_INPLACE = frozenset(("ADD", "MUL", "DIV", "SCALE", "UNARY", "ROPE", "RMS_NORM", "CLAMP", "SOFT_MAX", "FILL"))


class Tensor:
    """One ggml tensor of a graph being built (mutable while the graph is built, like ggml's)."""

    __slots__ = ("type", "ne", "nb", "op", "src", "view_src", "flags", "external", "layer", "kv")

    def __init__(self, type_, ne, op="NONE", src=(), view_src=None, nb=None, external=False):
        self.type, self.op, self.src, self.flags, self.external = type_, op, tuple(src), 0, external
        self.layer, self.kv = None, False     # an external tensor's layer (-1 token_embd, n_layer output), KV
        self.ne = tuple(ne) + (1,) * (4 - len(ne))
        self.view_src = view_src.view_src or view_src if view_src is not None else None
        self.nb = tuple(nb) if nb is not None else contiguous_nb(type_, self.ne)

    def nbytes(self) -> int:
        if any(n <= 0 for n in self.ne):
            return 0
        block, size = TYPES[self.type]
        if block == 1:
            return size + sum((n - 1) * b for n, b in zip(self.ne, self.nb, strict=True))
        rest = sum((n - 1) * b for n, b in zip(self.ne[1:], self.nb[1:], strict=True))
        return self.ne[0] * self.nb[0] // block + rest

    def is_contiguous(self) -> bool:
        return self.nb == contiguous_nb(self.type, self.ne)

    def nelements(self) -> int:
        return self.ne[0] * self.ne[1] * self.ne[2] * self.ne[3]


def contiguous_nb(type_, ne) -> tuple:
    block, size = TYPES[type_]
    nb = [size, size * (ne[0] // block)]
    for i in (2, 3):
        nb.append(nb[i - 1] * ne[i - 1])
    return tuple(nb)


class Graph:
    """ggml's graph of one forward pass: ops append nothing; expand() orders nodes and leafs."""

    def __init__(self):
        self.nodes, self.leafs, self._seen = [], [], set()
        self.layer = -1     # the layer whose weights are being created (the builders set it; ggml_sched places them)

    # ---- tensors -----------------------------------------------------------------------------

    def weight(self, *ne, type_="f32", kv=False) -> Tensor:
        """A tensor that lives in a buffer of its own (a weight, the KV cache): never allocated here."""
        t = Tensor(type_, ne, external=True)
        t.layer, t.kv = self.layer, kv
        return t

    @staticmethod
    def input(type_, *ne) -> Tensor:
        t = Tensor(type_, ne)
        t.flags |= INPUT
        return t

    # ---- ops (ggml.c), in the order llama.cpp's graphs use them --------------------------------

    @staticmethod
    def op(op, type_, ne, *src) -> Tensor:
        return Tensor(type_, ne, op, src)

    def dup(self, op, a, *src) -> Tensor:       # ggml_dup_tensor(a): same type and ne, contiguous; the layer built
        t = Tensor(a.type, a.ne, op, (a,) + src)
        t.layer = self.layer
        return t

    @staticmethod
    def view(a, ne, nb) -> Tensor:
        """ggml_view_2d/3d/4d: nb[0] the type size, nb[1..] as given, the rest contiguous after them."""
        ne = tuple(ne) + (1,) * (4 - len(ne))
        nb = list(nb)
        while len(nb) < 4:
            nb.append(nb[-1] * ne[len(nb) - 1])
        return Tensor(a.type, ne, "VIEW", (a,), view_src=a, nb=nb)

    @classmethod
    def reshape(cls, a, *ne) -> Tensor:
        return Tensor(a.type, ne, "RESHAPE", (a,), view_src=a)

    @classmethod
    def permute(cls, a, *axes) -> Tensor:
        ne, nb = [0] * 4, [0] * 4
        for i, ax in enumerate(axes):
            ne[ax], nb[ax] = a.ne[i], a.nb[i]
        return Tensor(a.type, ne, "PERMUTE", (a,), view_src=a, nb=nb)

    @classmethod
    def transpose(cls, a) -> Tensor:
        ne, nb = a.ne, a.nb
        return Tensor(a.type, (ne[1], ne[0], ne[2], ne[3]), "TRANSPOSE", (a,), view_src=a,
                      nb=(nb[1], nb[0], nb[2], nb[3]))

    @classmethod
    def mul_mat(cls, w, x) -> Tensor:
        return Tensor("f32", (w.ne[1], x.ne[1], x.ne[2], x.ne[3]), "MUL_MAT", (w, x))

    @classmethod
    def mul_mat_id(cls, w, x, ids) -> Tensor:
        return Tensor("f32", (w.ne[1], ids.ne[0], x.ne[2], 1), "MUL_MAT_ID", (w, x, ids))

    @classmethod
    def get_rows(cls, a, rows) -> Tensor:
        return Tensor("i32" if a.type == "i32" else "f32", (a.ne[0], rows.ne[0], rows.ne[1], rows.ne[2]),
                      "GET_ROWS", (a, rows))

    @classmethod
    def set_rows(cls, dst, rows, idxs) -> Tensor:
        return Tensor(dst.type, dst.ne, "SET_ROWS", (rows, idxs, dst), view_src=dst, nb=dst.nb)

    @classmethod
    def cast(cls, a, type_) -> Tensor:
        t = Tensor(type_, a.ne, "CPY", (a,))
        t.src = (a, t)
        return t

    @classmethod
    def cont(cls, a, *ne) -> Tensor:
        return Tensor(a.type, ne or a.ne, "CONT", (a,))

    @classmethod
    def argsort_top_k(cls, a, k) -> Tensor:
        s = Tensor("i32", a.ne, "ARGSORT", (a,))
        return Graph.view(s, (k,) + s.ne[1:], s.nb)

    @classmethod
    def sum_rows(cls, a) -> Tensor:
        return Tensor(a.type, (1,) + a.ne[1:], "SUM_ROWS", (a,))

    @classmethod
    def flash_attn_ext(cls, q, k, v, mask) -> Tensor:
        return Tensor("f32", (v.ne[0], q.ne[2], q.ne[1], q.ne[3]), "FLASH_ATTN_EXT", (q, k, v, mask))

    # ---- order -------------------------------------------------------------------------------

    def expand(self, t: Tensor) -> None:
        """ggml_build_forward_expand: depth first over src[0..], each tensor once."""
        if id(t) in self._seen:
            return
        self._seen.add(id(t))
        stack = [(t, 0)]
        while stack:
            node, i = stack.pop()
            while i < len(node.src):
                s = node.src[i]
                i += 1
                if s is not None and id(s) not in self._seen:
                    self._seen.add(id(s))
                    stack.append((node, i))
                    stack.append((s, 0))
                    break
            else:
                (self.leafs if node.op == "NONE" else self.nodes).append(node)


# ---- ggml-alloc ------------------------------------------------------------------------------

class _Alloc:
    """ggml_dyn_tallocr with one chunk (the CPU and CUDA buffer types have no size limit here)."""

    def __init__(self, alignment):
        self.alignment, self.blocks, self.max_size = alignment, [[0, 1 << 62]], 0

    def align(self, size):
        return -(-size // self.alignment) * self.alignment

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


Allocator = _Alloc      # the public name kvmem.engines.llamacpp.ggml_sched uses


@dataclass
class _Info:
    n_children: int = 0
    n_views: int = 0
    allocated: bool = False
    offset: int = 0


AllocInfo = _Info


def gallocr_size(graph: Graph, alignment: int = 32) -> int:
    """The bytes ggml_gallocr_reserve_n reserves for ``graph`` on one buffer type."""
    alloc = _Alloc(alignment)
    info: dict[int, _Info] = {}

    def get(t):
        h = info.get(id(t))
        if h is None:
            h = info[id(t)] = _Info()
        return h

    def allocate(t):
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
                    h.offset = ph.offset
                    ph.allocated = False
                    extra = alloc.align(p.nbytes()) - alloc.align(t.nbytes())
                    if extra > 0:
                        alloc.free(ph.offset + alloc.align(t.nbytes()), extra)
                    return
        h.offset = alloc.alloc(t.nbytes())

    def free(t):
        if t.flags & OUTPUT:
            return
        h = get(t)
        alloc.free(h.offset, t.nbytes())
        h.allocated = False

    for leaf in graph.leafs:
        allocate(leaf)
    for node in graph.nodes:
        if node.view_src is not None and node.op != "NONE":
            get(node.view_src).n_views += 1
        if node.flags & INPUT:
            allocate(node)
        for s in node.src:
            if s is not None:
                get(s).n_children += 1
                if s.flags & INPUT:
                    allocate(s)
    for node in graph.nodes:
        for s in node.src:
            if s is not None:
                allocate(s)
        allocate(node)
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
    return alloc.max_size

"""A small ggml: tensor shapes, strides and views, and graph order; with
kvmem.engines.llamacpp.ggml_alloc, enough to size llama.cpp's compute buffer the way llama.cpp
itself sizes it (kvmem.engines.llamacpp.compute).

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

The allocator, ggml-alloc.c, is kvmem.engines.llamacpp.ggml_alloc.
"""

from __future__ import annotations

from ...dtypes import GGML_TYPES as _GGML

__all__ = ["TYPES", "Tensor", "Graph"]

# ggml type -> (block size, bytes per block) of the types these graphs hold (activations, indices and
# llama.cpp's cache types), from the one table of ggml's types (kvmem.dtypes.GGML_TYPES)
TYPES = {name: (_GGML[name].block, _GGML[name].size)
         for name in ("f32", "f16", "bf16", "i32", "i64", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl")}

INPUT, OUTPUT = 1, 2
VIEW_OPS = ("VIEW", "RESHAPE", "PERMUTE", "TRANSPOSE")
# the name of build_attn_mha's attention output without flash attention (a node's name; llama.cpp's cb names it
# "kqv_out-<il>"), which llama.cpp pins to the CPU backend when the cache is on the host (ggml_sched.sched_sizes)
KQV_OUT = "kqv_out"
# ggml-alloc.c ggml_op_can_inplace (ggml/src/ggml-alloc.c#L22-L50; the ops these graphs build)
CAN_INPLACE = frozenset(("ADD", "ADD_ID", "MUL", "DIV", "SCALE", "UNARY", "ROPE", "RMS_NORM", "CLAMP", "SOFT_MAX",
                         "FILL", "SQR"))     # SQR: ggml-alloc.c ggml_op_can_inplace (graphs_ssm's relu^2)
CAN_INPLACE |= frozenset(("SUB", "SQRT"))     # graphs_gemma3n (the same ggml-alloc.c lines)
CAN_INPLACE |= frozenset(("ROPE_BACK",))      # graphs_dsv4_fwd (llama.cpp@0c1e57098 ggml/src/ggml-alloc.c#L39)


class Tensor:
    """One ggml tensor of a graph being built (mutable while the graph is built, like ggml's)."""

    __slots__ = ("type", "ne", "nb", "op", "src", "view_src", "flags", "external", "layer", "kv", "name", "size0",
                 "n_children", "n_views", "allocated", "offset", "buffer", "size",   # ggml_alloc's state
                 "sched",       # the backend ggml_sched assigns (every leaf and node, before it is read)
                 "alloc_src")   # the sources ggml-alloc may allocate or free (not None, not of a weight or the cache)
    # the allocator's and the scheduler's state, set by them before they read it (ggml_alloc.py, ggml_sched.py)
    n_children: int
    n_views: int
    allocated: int
    offset: int
    buffer: int
    size: int
    sched: int
    alloc_src: tuple

    def __init__(self, type_, ne, op="NONE", src=(), view_src=None, nb=None, external=False):
        self.type, self.op, self.src, self.flags, self.external = type_, op, src, 0, external
        self.layer, self.kv = None, False     # an external tensor's layer (-1 token_embd, n_layer output), KV
        self.name = ""                        # a weight's GGUF name without blk.N. and .weight ("attn_q", "output")
        self.view_src = None if view_src is None else view_src.view_src or view_src
        try:                    # ne (4 dims), nb and ggml_nbytes: ne, nb and type do not change once a tensor is made
            self.ne, self.nb, self.size0 = _SHAPES[type_, ne, nb]
        except KeyError:
            if len(_SHAPES) >= _SHAPES_KEPT:
                _SHAPES.clear()
            self.ne, self.nb, self.size0 = _SHAPES[type_, ne, nb] = _shape(type_, ne, nb)
        except TypeError:       # ne or nb given as a list
            self.ne, self.nb, self.size0 = _shape(type_, ne, nb)

    def nbytes(self) -> int:
        """ggml_nbytes (ggml.c): 0 if any ne is 0; else the type size + sum (ne[i] - 1) x nb[i] (block 1), or
        ne[0] x nb[0] / block + sum over i >= 1 (quantised)."""
        return self.size0

    def is_contiguous(self) -> bool:
        """ggml_is_contiguous (ggml.c#L1474-L1500, ggml_is_contiguous_m_n(t, 0, GGML_MAX_DIMS)): a dimension of one
        element may have any stride (a one-token view of a fused QKV product is contiguous)."""
        if self.nb == _shape(self.type, self.ne, None)[1]:
            return True
        block, size = TYPES[self.type]
        if self.ne[0] != block and self.nb[0] != size:
            return False
        nxt = size * (self.ne[0] // block)
        for n, b in zip(self.ne[1:], self.nb[1:], strict=True):
            if n != 1 and b != nxt:
                return False
            nxt *= n
        return True

    def nelements(self) -> int:
        return self.ne[0] * self.ne[1] * self.ne[2] * self.ne[3]


# (type, ne, nb) as a Tensor is given them -> (ne, nb, ggml_nbytes): a graph makes thousands of tensors of a few
# hundred shapes, each worked out once and its tuples shared (building the 106 graphs of six fits on 4 GPUs, glm-4.7 to
# kimi-k3: 0.58 -> 0.48 s; Tensor.__init__ 1.14 -> 0.65 us)
_SHAPES: dict = {}
_SHAPES_KEPT = 1 << 15


def _shape(type_, ne, nb) -> tuple:
    """ne padded to 4 dims, nb (contiguous where None: ggml_new_tensor_impl) and ggml_nbytes (ggml.c): 0 if any ne is
    0; else the type size + sum (ne[i] - 1) x nb[i] (block 1), or ne[0] x nb[0] / block + sum over i >= 1."""
    ne = tuple(ne)
    if len(ne) < 4:
        ne += (1,) * (4 - len(ne))
    n0, n1, n2, n3 = ne
    block, size = TYPES[type_]
    if nb is None:
        nb = (size, size * (n0 // block), size * (n0 // block) * n1, size * (n0 // block) * n1 * n2)
    else:       # ggml_view_2d/3d: the strides after those given contiguous after them
        nb = tuple(nb)
        while len(nb) < 4:
            nb += (nb[-1] * ne[len(nb) - 1],)
    b0, b1, b2, b3 = nb
    if n0 <= 0 or n1 <= 0 or n2 <= 0 or n3 <= 0:
        return ne, nb, 0
    if block == 1:
        return ne, nb, size + (n0 - 1) * b0 + (n1 - 1) * b1 + (n2 - 1) * b2 + (n3 - 1) * b3
    return ne, nb, n0 * b0 // block + (n1 - 1) * b1 + (n2 - 1) * b2 + (n3 - 1) * b3


class Graph:
    """ggml's graph of one forward pass: ops append nothing; expand() orders nodes and leafs."""

    def __init__(self):
        self.nodes, self.leafs, self._seen = [], [], set()
        self.layer = -1     # the layer whose weights are being created (the builders set it; ggml_sched places them)

    # ---- tensors -----------------------------------------------------------------------------

    def weight(self, *ne, type_="f32", kv=False, name="") -> Tensor:
        """A tensor that lives in a buffer of its own (a weight, the KV cache): never allocated here.
        ``name``: the weight's GGUF name less blk.N. and .weight (ggml_sched finds its bytes by it)."""
        t = Tensor(type_, ne, external=True)
        t.layer, t.kv, t.name = self.layer, kv, name
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
        return Tensor(a.type, ne, "VIEW", (a,), view_src=a, nb=nb)

    @classmethod
    def reshape(cls, a, *ne) -> Tensor:
        return Tensor(a.type, ne, "RESHAPE", (a,), view_src=a)

    @classmethod
    def permute(cls, a, *axes) -> Tensor:
        ne, nb = [0] * 4, [0] * 4
        for i, ax in enumerate(axes):
            ne[ax], nb[ax] = a.ne[i], a.nb[i]
        return Tensor(a.type, tuple(ne), "PERMUTE", (a,), view_src=a, nb=tuple(nb))

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
    def flash_attn_ext(cls, q, k, v, mask, sinks=None) -> Tensor:
        """ggml_flash_attn_ext; ``sinks``: ggml_flash_attn_ext_add_sinks (src[4])."""
        src = (q, k, v, mask) if sinks is None else (q, k, v, mask, sinks)
        return Tensor("f32", (v.ne[0], q.ne[2], q.ne[1], q.ne[3]), "FLASH_ATTN_EXT", src)

    @classmethod
    def concat(cls, a, b, dim=0) -> Tensor:
        """ggml_concat (ggml.c#L2631-L2657): a's type, the dims added along ``dim``."""
        ne = list(a.ne)
        ne[dim] += b.ne[dim]
        return Tensor(a.type, tuple(ne), "CONCAT", (a, b))

    # ---- order -------------------------------------------------------------------------------

    def expand(self, t: Tensor) -> None:
        """ggml_build_forward_expand: depth first over src[0..], each tensor once."""
        seen = self._seen
        if t in seen:           # a Tensor hashes by identity
            return
        seen.add(t)
        nodes, leafs = self.nodes, self.leafs
        above: list = []        # (tensor, its sources' iterator) of the tensors whose sources are being ordered
        node, rest = t, iter(t.src)
        while True:
            for s in rest:      # the next source not seen yet (the iterator resumes after it)
                if s is not None and s not in seen:
                    seen.add(s)
                    if s.src:
                        above.append((node, rest))
                        node, rest = s, iter(s.src)
                        break
                    (leafs if s.op == "NONE" else nodes).append(s)      # no source: ordered at once
            else:
                (leafs if node.op == "NONE" else nodes).append(node)
                if not above:
                    return
                node, rest = above.pop()

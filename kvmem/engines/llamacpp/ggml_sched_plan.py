"""What kvmem.engines.llamacpp.ggml_sched reads of a graph whatever the placement (SchedPlan: pass 1's rule per
tensor, pass 2's runs, ggml-alloc's counts before pass 5's copies, the copies themselves), taken once per graph and
kept while the graph lives (plan_of): a built graph is scheduled again for other placements (scheduled._built).
"""

from __future__ import annotations

import weakref
from collections import Counter
from itertools import chain, repeat
from operator import attrgetter

from .ggml_alloc import FREE, NEVER
from .ggml_graph import INPUT, KQV_OUT, VIEW_OPS, Graph, Tensor

__all__ = ["OFFLOAD_MIN_BATCH", "SchedPlan", "blas_runs", "op_batch_size", "plan_of"]

OFFLOAD_MIN_BATCH = 32  # ggml-cuda.cu: op_offload_min_batch_size (GGML_OP_OFFLOAD_MIN_BATCH) default
_VIEWS = frozenset(VIEW_OPS)
_SRC, _VIEW_SRC = attrgetter("src"), attrgetter("view_src")
_NOT_WITH_WEIGHT = frozenset(("ROPE", "FLASH_ATTN_EXT"))    # ops that do not run where their weight is
_NORMS = ("RMS_NORM", "NORM")   # build_norm's "norm" node: LLM_NORM_RMS's and LLM_NORM's (graphs_classic)


def op_batch_size(t: Tensor) -> int:
    """ggml-cuda.cu get_op_batch_size."""
    if t.op == "GET_ROWS":
        return 0
    if t.op == "MUL_MAT":
        return t.ne[1]
    # ROPE_BACK (graphs_dsv4_fwd's de-rope): llama.cpp@0c1e57098 ggml/src/ggml-cuda/ggml-cuda.cu#L5636-L5648
    if t.op in ("MUL_MAT_ID", "ROPE", "ROPE_BACK"):
        return t.ne[2]
    return t.ne[1] * t.ne[2] * t.ne[3]


class SchedPlan:
    """What sched_sizes reads of a graph whatever the placement, taken once per graph (a built graph is scheduled
    again for other placements: scheduled._built): pass 1's rule per leaf and node (ggml_backend_sched_backend_id_
    from_cur: every weight and KV tensor is a leaf, placed before the ops that read it), the RMS_NORM nodes a
    caller may pin, the non-view nodes (pass 2: those pass 1 may place, and the runs between them it never places),
    each tensor's children and views before pass 5's copies move them, the tensors ggml-alloc never allocates (views
    and weights), each node's sources it may allocate or free (Tensor.alloc_src), and the copies pass 5 and 6 made
    (their fields but the allocator's state do not depend on the placement: made once, reused)."""

    __slots__ = ("count", "everything", "experts", "weights", "weight_views", "inputs", "weight_ops", "norms",
                 "kqv_outs", "work", "start", "free_leafs", "copies", "__weakref__")

    def __init__(self, graph: Graph):
        self.count = (len(graph.leafs), len(graph.nodes))
        self.everything = graph.leafs + graph.nodes
        experts = self.experts = {id(n.src[0]) for n in graph.nodes if n.op == "MUL_MAT_ID"}
        self.weights, self.weight_views, self.inputs, self.weight_ops = [], [], [], []
        for t in self.everything:
            if t.external:
                self.weights.append((t, id(t) in experts))
            elif t.view_src is not None and t.view_src.external:
                self.weight_views.append(t)
            elif t.flags & INPUT:
                self.inputs.append(t)
            elif t.op not in _NOT_WITH_WEIGHT:
                for w in t.src:                             # the first weight it reads (not the KV cache)
                    if w is not None and w.external and not w.kv:
                        self.weight_ops.append((t, w, op_batch_size(t) >= OFFLOAD_MIN_BATCH, blas_runs(t)))
                        break
        self.norms = [t for t in self.everything if t.op in _NORMS and t.layer is not None and t.layer >= 0]
        # build_attn_mha's attention output without flash attention, which llama.cpp pins to the CPU backend with the
        # cache on the host (graphs.KQV_OUT; ggml_sched.sched_sizes kqv_host)
        self.kqv_outs = [t for t in graph.nodes if t.name == KQV_OUT]
        # pass 2's nodes in order (not views): each one pass 1 may place, and between them the runs it never places
        placeable = {id(t) for t in (*self.weight_views, *self.inputs, *self.norms, *self.kqv_outs)}
        placeable.update(id(t) for t, _, _, _ in self.weight_ops)
        work: list = []
        run: list = []
        for n in graph.nodes:
            if n.op in _VIEWS:
                continue
            if id(n) in placeable:
                if run:
                    work.append(run)
                    run = []
                work.append(n)
            else:
                run.append(n)
        if run:
            work.append(run)
        self.work = work
        # ggml-alloc's counts before pass 5's copies, the same for every placement: each source's children and each
        # root's views over the nodes a split holds (every node from the first that is not a view), counted once here
        counted = graph.nodes[next((i for i, n in enumerate(graph.nodes) if n.op not in _VIEWS), len(graph.nodes)):]
        children = Counter(map(id, chain.from_iterable(map(_SRC, counted))))
        views = Counter(map(id, filter(None, map(_VIEW_SRC, counted))))
        ids = list(map(id, self.everything))
        never = {id(t) for t in self.everything if t.external or t.view_src is not None}
        self.start = list(zip(self.everything, map(children.get, ids, repeat(0)), map(views.get, ids, repeat(0)),
                              [NEVER if i in never else FREE for i in ids], strict=True))
        # each one's sources ggml-alloc may allocate or free (reserve_counted): not None, not a weight or the cache
        # or a view of one
        idle = {id(t) for t in self.everything if t.external or t.view_src is not None and t.view_src.external}
        idle.add(id(None))
        for t in graph.leafs:
            t.alloc_src = ()
        for t in graph.nodes:
            src = t.src
            t.alloc_src = src if idle.isdisjoint(map(id, src)) else tuple([x for x in src if id(x) not in idle])
        self.free_leafs = [t for t in graph.leafs if not t.external and t.view_src is None]
        self.copies: dict = {}      # (id(source), backend, bytes) -> its copies, reused across placements (ggml_sched)


_PLANS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def blas_runs(t: Tensor) -> bool:
    """ggml-blas.cpp ggml_backend_blas_device_supports_op for a node (llama.cpp@1d36b3670
    ggml/src/ggml-blas/ggml-blas.cpp#L399-L418)."""
    if t.op != "MUL_MAT":
        return False
    a, b = t.src[0], t.src[1]
    return (a.is_contiguous() and b.is_contiguous() and b.type == "f32" and t.ne[0] >= 32 and t.ne[1] >= 32
            and b.ne[0] >= 32)


def plan_of(graph: Graph) -> SchedPlan:
    """``graph``'s SchedPlan, made again where its leafs or nodes were added to since."""
    plan = _PLANS.get(graph)
    if plan is None or plan.count != (len(graph.leafs), len(graph.nodes)):
        plan = _PLANS[graph] = SchedPlan(graph)
    return plan

"""llama.cpp's deepseek4 (DeepSeek-V4) attention, node by node: the inputs llm_graph_input_dsv4 makes for a reserve,
the compressors that fill the CSA, HCA and lightning-indexer caches from their states, and the raw, HCA and CSA +
lightning-indexer attentions (kvmem.engines.llamacpp.graphs_dsv4_fwd builds the layers around them).

Transcribed from the vendored llama.cpp (llama-cpp-python 0.3.36, llama.cpp 0c1e57098):

    inputs      build_inp_dsv4 (src/llama-graph.cpp#L3485-L3510): the raw cache's K indices (i64, one per token), its
                mask (f16 with flash attention, else f32; {SWA cells, tokens per stream, 1, streams}), its Hadamard
                matrix; per compressor (csa, hca, lid) the plan's inputs, each made only where the plan has rows
                (dsv4_build_comp_inputs #L942-L987): state_pos (a token each), persist src / dst (min(tokens, state
                rows)), restore and snapshot src / dst (with rollback snapshots only), read indices, write indices
                (i64) and write positions (one a block), the mask over the compressed cells (the indexer's f16: the
                fused lightning indexer, cparams.fused_lid, is on; the others as the raw one); the caches' Hadamard
                matrices. The reserve plan (src/llama-kv-cache-dsv4.cpp#L842-L881 dsv4_build_reserve_comp_plan):
                blocks = tokens / ratio + sequences, read rows (2 with overlap) x ratio x blocks; every cache and
                state keeps a stream per sequence (#L1243-L1244, #L1287), the graph as many (#L196-L204).
    Hadamard    a cache's attn_rot_k (src/llama-kv-cache.cpp#L321-L332): a quantised K with a head % 64 == 0, or
                the head as wide as the indexer's (deepseek4); the indexer cache's always.
    compressor  build_overlap_compressed_kv_from_state (src/models/deepseek4.cpp#L517-L588) for CSA and the
                indexer, build_hca_compressed_kv_from_state (#L470-L515) for HCA, from the state rows and this
                ubatch's projected rows (concatenated), their softmax-weighted sum, RMS norm, RoPE; then set into the
                compressed cache, the state's rows persisted (build_attention_impl #L943-L1177).
    attention   build_raw_attention, build_hca_attention, build_csa_lid_attention (#L590-L858): the raw cache's K
                concatenated with the compressed one's, the masks likewise (CSA's through the lightning indexer's
                top-k: build_top_k_mask, #L678-L705), build_attn_mha with the attention sinks
                (src/llama-graph.cpp#L2616-L2755).
"""

from __future__ import annotations

from dataclasses import dataclass

from .ggml_graph import KQV_OUT, TYPES, Graph, Tensor
from .graphs import QUANTISED, Pass, rot_size

__all__ = ["CSA", "HCA", "DSV4Inputs", "dsv4_inputs", "hadamard", "compress", "attend"]

CSA, HCA = 4, 128       # llama.cpp@0c1e57098 src/models/deepseek4.cpp#L266-L267
F32 = TYPES["f32"][1]


@dataclass
class DSV4Inputs:
    """The graph inputs of one reserve (build_inp_dsv4) and the cells each cache's graph reads."""

    k_idxs: Tensor
    raw_mask: Tensor
    raw_rot: Tensor | None
    comp: dict          # "csa" / "hca" / "lid" -> {input name: tensor or None}
    swa_cells: int
    cells: dict         # "csa" / "hca" / "lid" -> cells per stream
    n_stream: int


def comp_cells(n_kv: int, ratio: int) -> int:
    """GGML_PAD(dsv4_comp_size(kv_size, ratio), 256) (llama.cpp@0c1e57098 src/llama-kv-cache-dsv4.cpp#L28-L30,
    #L1294-L1310)."""
    return -(-max(1, -(-n_kv // ratio)) // 256) * 256


def _rot(g: Graph, on: bool, head: int):
    """build_input_k_rot (llama.cpp@0c1e57098 src/llama-kv-cache.cpp#L1447-L1466)."""
    n = rot_size(head)
    return g.input("f32", n, n) if on else None


def dsv4_inputs(g: Graph, s, p: Pass) -> DSV4Inputs:
    """build_inp_dsv4 (llama.cpp@0c1e57098 src/llama-graph.cpp#L3485-L3510; module docstring): ``s`` a
    graphs_dsv4_fwd.DSV4Shape."""
    ns, nt = s.n_seqs, p.n_tokens        # a stream a sequence (module docstring)
    hd, ihd = s.head_dim, s.indexer_head
    k_idxs = g.input("i64", nt)
    raw_mask = g.input("f16" if p.fa else "f32", p.n_kv_swa, nt // ns, 1, ns)
    # llama.cpp@0c1e57098 src/llama-kv-cache.cpp#L321-L332: a quantised K, or deepseek4's head as wide as the indexer's
    rot_k = (p.type_k in QUANTISED and hd % 64 == 0) or hd == ihd
    comp = {}
    cells = {"csa": comp_cells(p.n_kv, CSA), "hca": comp_cells(p.n_kv, HCA), "lid": comp_cells(p.n_kv, CSA)}
    for name, ratio, overlap, state in (("csa", CSA, True, 2 * CSA), ("hca", HCA, False, HCA),
                                        ("lid", CSA, True, 2 * CSA)):
        # llama.cpp@0c1e57098 src/llama-kv-cache-dsv4.cpp#L842-L881 dsv4_build_reserve_comp_plan
        blocks = nt // ratio + ns
        rows = state * ns
        n_persist, n_restore = min(nt, rows), rows if s.n_rs_seq else 0
        n_snap = s.n_rs_seq * rows

        def one(type_, n):
            return g.input(type_, n) if n else None
        mask_type = "f16" if p.fa or name == "lid" else "f32"
        comp[name] = dict(state_pos=one("i32", nt), persist_src=one("i32", n_persist),
                          persist_dst=one("i32", n_persist), restore_src=one("i32", n_restore),
                          restore_dst=one("i32", n_restore), snap_src=one("i32", n_snap), snap_dst=one("i32", n_snap),
                          read=one("i32", (2 if overlap else 1) * ratio * blocks), write=one("i64", blocks),
                          write_pos=one("i32", blocks), mask=g.input(mask_type, cells[name], nt // ns, 1, ns))
    for name in ("csa", "hca", "lid"):
        comp[name]["rot"] = _rot(g, rot_k or name == "lid", ihd if name == "lid" else hd)
    return DSV4Inputs(k_idxs, raw_mask, _rot(g, rot_k, hd), comp, p.n_kv_swa, cells, ns)


def hadamard(g: Graph, cur, rot):
    """llama_mul_mat_hadamard (llama.cpp@0c1e57098 src/llama-impl.h#L57-L75)."""
    n = rot.ne[0]
    res = g.reshape(cur, n, cur.nelements() // n) if cur.is_contiguous() else g.cont(cur, n, cur.nelements() // n)
    return g.reshape(g.mul_mat(rot, res), *cur.ne)


def cache(g: Graph, width: int, cells: int, p: Pass, ns: int, name: str):
    """A K-only cache layer: (the store's destination, llama_kv_cache::cpy_k merging the streams; the get_k view
    {width, 1, cells, streams}) (llama.cpp@0c1e57098 src/llama-kv-cache.cpp#L1276-L1294, #L1328-L1361)."""
    block, size = TYPES[p.type_k]
    row = size * width // block
    k = g.weight(width, cells, ns, type_=p.type_k, kv=True, name=name)
    dst = g.reshape(k, width, cells * ns) if ns > 1 else k
    return dst, g.view(k, (width, 1, cells, ns), (size, row, row, row * cells))


def store(g: Graph, dst, k, idxs):
    """llama_kv_cache::cpy_k: ``k`` {width, heads, rows} as {width x heads, rows} set at ``idxs``."""
    return g.set_rows(dst, g.view(k, (k.ne[0] * k.ne[1], k.ne[2]), (k.nb[0], k.nb[2])), idxs)


def _state_all(g: Graph, state):
    """llama_dsv4_comp_state::get_kv_all / get_score_all: the layer's rows of every plane (llama.cpp@0c1e57098
    src/llama-kv-cache-dsv4.cpp#L1160-L1172; the tensor {n_embd_state, state_size, planes}: #L964-L966)."""
    return g.view(state, (state.ne[0], state.ne[1] * state.ne[2]), state.nb[:2])


def _restore(g: Graph, inp: dict, kv_state, score_state):
    """dsv4_build_state_restore (llama.cpp@0c1e57098 src/models/deepseek4.cpp#L222-L243)."""
    kv, score = _state_all(g, kv_state), _state_all(g, score_state)
    if inp["restore_src"] is None:
        return kv, score
    kv = g.set_rows(_state_all(g, kv_state), g.get_rows(kv, inp["restore_src"]), inp["restore_dst"])
    score = g.set_rows(_state_all(g, score_state), g.get_rows(score, inp["restore_src"]), inp["restore_dst"])
    return kv, score


def _zero_row(g: Graph, t):
    """dsv4_append_zero_row (llama.cpp@0c1e57098 src/models/deepseek4.cpp#L209-L215): a row scaled to 0 (or -inf)
    concatenated below ``t``."""
    row = g.dup("SCALE", g.view(t, (t.ne[0],), (t.nb[0],)))
    return g.concat(t, g.reshape(row, t.ne[0], 1), 1)


def _pool(g: Graph, values, scores, norm: str, pos):
    """The softmax over each block's rows, the weighted sum, RMS norm, RoPE (llama.cpp@0c1e57098
    src/models/deepseek4.cpp#L496-L514, #L563-L587)."""
    values, scores = g.cont(g.permute(values, 1, 0, 2, 3)), g.cont(g.permute(scores, 1, 0, 2, 3))
    comp = g.sum_rows(g.dup("MUL", values, g.dup("SOFT_MAX", scores)))
    comp = g.cont(g.permute(comp, 1, 0, 2, 3))
    comp = g.dup("MUL", g.dup("RMS_NORM", comp), g.weight(comp.ne[0], name=norm))
    return g.dup("ROPE", comp, pos)


def _overlap(g: Graph, kv, score, inp: dict, width: int, norm: str):
    """build_overlap_compressed_kv_from_state (llama.cpp@0c1e57098 src/models/deepseek4.cpp#L517-L588), ratio 4."""
    kv, score = _zero_row(g, kv), _zero_row(g, score)
    blocks = inp["write_pos"].ne[0]
    n_read = CSA * blocks
    kv_rows, score_rows = g.get_rows(kv, inp["read"]), g.get_rows(score, inp["read"])
    # the previous rows (from 0) and the current ones (from n_read rows + width values), each made contiguous
    kv_prev, score_prev, kv_cur, score_cur = (
        g.reshape(g.cont(g.view(rows, (width, n_read), rows.nb[:2])), width, CSA, blocks)
        for _ in range(2) for rows in (kv_rows, score_rows))
    return _pool(g, g.concat(kv_prev, kv_cur, 1), g.concat(score_prev, score_cur, 1), norm, inp["write_pos"])


def _hca(g: Graph, kv, score, inp: dict, width: int, norm: str):
    """build_hca_compressed_kv_from_state (llama.cpp@0c1e57098 src/models/deepseek4.cpp#L470-L515)."""
    blocks = inp["write_pos"].ne[0]
    kv = g.reshape(g.get_rows(kv, inp["read"]), width, HCA, blocks)
    score = g.reshape(g.get_rows(score, inp["read"]), width, HCA, blocks)
    return _pool(g, kv, score, norm, inp["write_pos"])


def compress(g: Graph, s, p: Pass, ins: DSV4Inputs, cur, kind: str, ratio: int, prefix: str, width: int):
    """One compressor of a layer (llama.cpp@0c1e57098 src/models/deepseek4.cpp#L943-L1177): the state's rows
    projected from ``cur`` (``prefix`` attn_compressor / indexer_compressor) and their positional bias, the compressed
    rows built and set into the ``kind`` cache, the rollback snapshot, the state's rows persisted; all expanded as
    llama.cpp does."""
    inp = ins.comp[kind]
    wide = (2 if ratio == CSA else 1) * width
    state_kv = g.mul_mat(g.weight(s.n_embd, wide, name=prefix + "_kv"), cur)
    state_score = g.mul_mat(g.weight(s.n_embd, wide, name=prefix + "_gate"), cur)
    ape = g.get_rows(g.weight(wide, ratio, name=prefix + "_ape"), inp["state_pos"])
    state_score = g.dup("ADD", state_score, ape)
    rows = (2 * CSA if ratio == CSA else HCA) * ins.n_stream
    planes = ins.n_stream * (1 + s.n_rs_seq)
    kv_state = g.weight(wide, rows // ins.n_stream, planes, kv=True, name=f"dsv4_{kind}_state_kv")
    score_state = g.weight(wide, rows // ins.n_stream, planes, kv=True, name=f"dsv4_{kind}_state_score")
    kv_all, score_all = _restore(g, inp, kv_state, score_state)
    base_kv = g.view(kv_all, (wide, rows), kv_all.nb[:2])
    base_score = g.view(score_all, (wide, rows), score_all.nb[:2])
    source_kv, source_score = g.concat(base_kv, state_kv, 1), g.concat(base_score, state_score, 1)
    build = _overlap if ratio == CSA else _hca
    comp = build(g, source_kv, source_score, inp, width, prefix + "_norm")
    if inp["rot"] is not None:
        comp = hadamard(g, comp, inp["rot"])
    dst, _ = cache(g, width, ins.cells[kind], p, ins.n_stream, f"cache_k_{kind}")
    g.expand(store(g, dst, comp, inp["write"]))
    if inp["snap_src"] is not None:       # dsv4_build_state_snapshot (src/models/deepseek4.cpp#L245-L264)
        snap_kv, snap_score = g.concat(kv_all, state_kv, 1), g.concat(score_all, state_score, 1)
        kv_set = g.set_rows(_state_all(g, kv_state), g.get_rows(snap_kv, inp["snap_src"]), inp["snap_dst"])
        score_set = g.set_rows(_state_all(g, score_state), g.get_rows(snap_score, inp["snap_src"]), inp["snap_dst"])
        g.expand(kv_set)
        g.expand(score_set)
    persist_kv, persist_score = g.get_rows(state_kv, inp["persist_src"]), g.get_rows(state_score, inp["persist_src"])
    g.expand(g.set_rows(_state_all(g, kv_state), persist_kv, inp["persist_dst"]))
    g.expand(g.set_rows(_state_all(g, score_state), persist_score, inp["persist_dst"]))


def _lid_top_k(g: Graph, s, p: Pass, ins: DSV4Inputs, qr, cur, pos):
    """build_lid_top_k (llama.cpp@0c1e57098 src/models/deepseek4.cpp#L590-L676), the fused lightning indexer
    (ggml_lightning_indexer: ggml/src/ggml.c#L6432-L6464): its top-k cells (ggml_top_k, #L5468-L5480)."""
    inp, ns, ih, ihd, nt = ins.comp["lid"], ins.n_stream, s.n_indexer_head, s.indexer_head, cur.ne[1]
    q = g.mul_mat(g.weight(s.q_lora, ih * ihd, name="indexer.attn_q_b"), qr)
    q = hadamard(g, g.dup("ROPE", g.reshape(q, ihd, ih, nt), pos), inp["rot"])
    w = g.dup("SCALE", g.mul_mat(g.weight(s.n_embd, ih, name="indexer.proj"), cur))
    _, k = cache(g, ihd, ins.cells["lid"], p, ns, "cache_k_lid")
    k = g.view(k, (k.ne[0], k.ne[1], inp["mask"].ne[0], k.ne[3]), k.nb)
    q = g.view(q, (q.ne[0], q.ne[1], q.ne[2] // ns, ns), (q.nb[0], q.nb[1], q.nb[2], q.nb[3] // ns))
    w = g.view(w, (w.ne[0], w.ne[1] // ns, w.ne[2], ns), (w.nb[0], w.nb[1], w.nb[2] // ns, w.nb[3] // ns))
    score = g.op("LIGHTNING_INDEXER", "f32", (k.ne[2], q.ne[2], 1, q.ne[3]), q, k, w, inp["mask"])
    top = min(score.ne[0], s.indexer_top_k)
    return g.cont(g.op("TOP_K", "i32", (top,) + score.ne[1:], score))


def _top_k_mask(g: Graph, p: Pass, mask, top_k):
    """build_top_k_mask (llama.cpp@0c1e57098 src/models/deepseek4.cpp#L678-L705): -inf but at the top-k cells
    (zeros: a leaf of the compute buffer, f16 with flash attention), plus the mask."""
    filled = g.dup("FILL", mask)
    rows = g.view(filled, (1, filled.ne[0], filled.ne[1], filled.ne[3]),
                  (filled.nb[0], filled.nb[0], filled.nb[1], filled.nb[2]))
    idx = g.view(top_k, (top_k.ne[0], top_k.ne[1], top_k.ne[3], 1),
                 (top_k.nb[0], top_k.nb[1], top_k.nb[2], top_k.ne[3] * top_k.nb[3]))
    zeros = g.dup("FILL", Tensor("f16" if p.fa else "f32", (1, idx.ne[0], idx.ne[1], idx.ne[2])))
    picked = g.set_rows(rows, zeros, idx)
    picked = g.view(picked, (picked.ne[1], picked.ne[2], 1, picked.ne[3]),
                    (picked.nb[0], picked.nb[2], picked.nb[3], picked.nb[3]))
    return g.dup("ADD", picked, mask)


def _mha(g: Graph, p: Pass, q, k, mask, sinks, ns: int):
    """build_attn_mha (llama.cpp@0c1e57098 src/llama-graph.cpp#L2616-L2755) with K = V = ``k`` (not transposed) and
    the sinks."""
    per = q.ne[2] // ns
    qv = g.view(q, (q.ne[0], q.ne[1], per, ns), (q.nb[0], q.nb[1], q.nb[2], q.nb[2] * per))
    qp, kp, vp = g.permute(qv, 0, 2, 1, 3), g.permute(k, 0, 2, 1, 3), g.permute(k, 0, 2, 1, 3)
    if p.fa:
        kp = g.cast(kp, "f16") if kp.type == "f32" else kp
        vp = g.cast(vp, "f16") if vp.type == "f32" else vp
        cur = g.flash_attn_ext(qp, kp, vp, mask, sinks)
        cur = g.reshape(cur, cur.ne[0] * cur.ne[1], cur.ne[2] * cur.ne[3])
    else:
        kq = g.dup("SOFT_MAX", g.mul_mat(kp, qp), mask, sinks)
        cur = g.permute(g.mul_mat(g.cont(g.transpose(vp)), kq), 0, 2, 1, 3)
        cur = g.cont(cur, cur.ne[0] * cur.ne[1], cur.ne[2] * cur.ne[3])
        cur.name = KQV_OUT      # -nkvo: pinned to the host (llama.cpp@0c1e57098 src/llama-graph.cpp#L2746-L2749)
    g.expand(cur)
    return cur


def attend(g: Graph, s, p: Pass, ins: DSV4Inputs, ratio: int, q, kv, qr, cur, pos):
    """build_raw_attention / build_hca_attention / build_csa_lid_attention (llama.cpp@0c1e57098
    src/models/deepseek4.cpp#L707-L858, chosen at #L1180-L1200):
    the layer's K stored in the raw cache, read with the compressed cache of its ratio (if any)."""
    ns = ins.n_stream
    top_k = _lid_top_k(g, s, p, ins, qr, cur, pos) if ratio == CSA else None
    if ins.raw_rot is not None:
        q, kv = hadamard(g, q, ins.raw_rot), hadamard(g, kv, ins.raw_rot)
    g.expand(q)
    g.expand(kv)
    dst, k = cache(g, s.head_dim, ins.swa_cells, p, ns, "cache_k")
    g.expand(store(g, dst, kv, ins.k_idxs))
    mask = ins.raw_mask
    if ratio:
        kind = "csa" if ratio == CSA else "hca"
        inp = ins.comp[kind]
        _, comp_k = cache(g, s.head_dim, ins.cells[kind], p, ns, f"cache_k_{kind}")
        comp_k = g.view(comp_k, (comp_k.ne[0], comp_k.ne[1], inp["mask"].ne[0], comp_k.ne[3]), comp_k.nb)
        k = g.concat(k, comp_k, 2)
        comp_mask = _top_k_mask(g, p, inp["mask"], top_k) if ratio == CSA else inp["mask"]
        mask = g.concat(mask, comp_mask, 0)
    out = _mha(g, p, q, k, mask, g.weight(s.n_head, name="attn_sinks"), ns)
    return hadamard(g, out, ins.raw_rot) if ins.raw_rot is not None else out

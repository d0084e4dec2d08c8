"""llama.cpp's minimax-m3 forward graph (MiniMax-M3's text model), node by node, as llama.cpp reserves it.

Transcribed from the vendored llama.cpp (llama-cpp-python 0.3.36, llama.cpp 0c1e57098),
src/models/minimax-m3.cpp llama_model_minimax_m3::graph::graph (L210-L608) and build_attn_msa_fa (L176-L208):

    build_inp_embd, build_inp_pos, build_attn_inp_kv_msa (src/llama-graph.cpp#L3394-L3420: the main cache's K/V
    indices, KQ mask and Hadamard inputs, and with MSA the indexer cache's K indices), the MSA inputs (L262-L299),
    build_inp_out_ids; per layer attn_norm (RMS), build_qkv (Q, K, V reshaped to their heads), Q and K RMS-normed per
    head (one head_dim weight), both roped; then
      - a leading dense layer, or every layer without MSA: build_attn (graphs.attention) with attn_output;
      - a sparse layer with MSA (L338-L536): the indexer's Q (Hd heads) and K (one head) projected, RMS-normed,
        roped, K stored in the indexer cache (its own llama_kv_cache: one head of indexer.key_length per sparse
        layer, src/llama-kv-cache-msa.cpp#L38-L49); Q/K/V rotated (a quantised cache), K and V stored; block scores
        of the indexer keys gathered by position, max-pooled over blocks of indexer.block_size, the local blocks
        forced, the top indexer.top_k blocks; at one token per stream (L388-L447) the chosen blocks' K/V rows and
        mask gathered, else (L448-L528) per stream a block mask expanded to the cells and added to the KQ mask;
        one grouped flash attention (build_attn_msa_fa), streams concatenated, V's rotation undone, attn_output;
    the last layer's rows picked by out_ids, the residual, ffn_norm (RMS), the leading layers' dense FFN or the routed
    experts (sigmoid or softmax gating, exp_probs_b, normalised weights, expert_weights_scale) beside the shared
    expert, all swigluoai (the GLU op: graphs_mla_oss.deepseek_ffn); output_norm and the lm_head.

MSA runs with flash attention and one sequence or one stream per sequence (L233-L235: ``msa_on``); else every layer
is dense. A reserve sees the whole cache (n_kv cells per stream) but no position: the block-selection tensors span
llama_kv_cache_msa_context::get_n_pos() = 256 positions (src/llama-kv-cache-msa.cpp#L262-L273: the empty cache's
-1 + 1 padded to 256), GGML_PAD-ed to the block (L273: a bit mask, ``ggml_pad``); so the printed buffer holds
nblk = GGML_PAD(256, block) / block blocks (2 of MiniMax-M3's 128), top-k min(top_k, nblk). A running context
rebuilds these tensors as positions fill the cache (n_ps up to the longest sequence's positions), and ggml-alloc grows
the buffer then (ggml_gallocr_alloc_graph reserves again): what context creation prints is not what a long prompt
takes. graph_bytes gives the printed reserve (MinimaxM3Shape.msa_pos 0); the host-only layout's buffer
(compute.compute_buffer) is the larger of it and the graphs over a full cache (``filled``: msa_pos = n_kv): MiniMax-M3
at -ub 512 with flash attention, 688.6 -> 752.8 MiB at 32k, 2513.0 -> 2771.0 MiB at 128k (at 4k the full cache's graph
packs into 3.7 MiB less: the printed reserve stands). Positions between are not sized: ggml-alloc's packing is not
monotone in them (a few MiB, as at 4k). GPU layouts (scheduled.gpu_graph_bytes) keep the printed reserve: over a full
cache the per-layer copies below would hold each layer's MSA inputs (64 MiB a layer at 32k: 711 -> 4,290 MiB on one
GPU), a mechanism not checked against a CUDA build, so that figure is not given.

On GPUs (kvmem.engines.llamacpp.ggml_sched) each sparse layer's views of the MSA inputs (bias, pos_mask, pos_slot_i,
cell_blk or pos_slot_f: host inputs) are copied to the GPU anew, at the start of the split that reads them, so a GPU's
buffer grows with its layers (537,600 B a layer at -ub 512, 3,200 at -ub 1, one GPU): scheduled.reduced_layers cuts
no layer of this graph (cut, 14 of 40 random layouts differed). Not checked against a CUDA llama.cpp.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .arch_fields import field, uniform_full
from .ggml_graph import TYPES, Graph, Tensor
from .graphs import Pass, attention, attn_inputs, embeddings, output_head, qkv_heads, token_inputs
from .graphs_delta import DeltaShape
from .graphs_minimax01 import MINIMAX_M3  # kvmem model_type -> "minimax-m3", the layout's (minimax_m3_tensors)
from .graphs_mla_oss import deepseek_ffn, rms_norm

__all__ = ["MINIMAX_M3", "MinimaxM3Shape", "build_minimax_m3", "minimax_m3_shape", "filled"]

# conversion/base.py#L1530-L1539: scoring_func -> expert_gating_func, of those graphs_mla_oss.moe_ffn builds
_GATING = {"sigmoid": "sigmoid", "softmax": "softmax"}
N_POS_PAD = 256     # llama_kv_cache_msa_context::get_n_pos: max(n_pad (1), 256) (src/llama-kv-cache-msa.cpp#L264)


def ggml_pad(x: int, n: int) -> int:
    """ggml.h#L267 GGML_PAD: a bit mask, a multiple of ``n`` only for a power of two: GGML_PAD(256, 96) == 256 (4
    random MSA cases with blocks of 96 differed from llama.cpp with kvmem.units.pad's 288, all equal with this)."""
    return (x + n - 1) & ~(n - 1)


@dataclass(frozen=True)
class MinimaxM3Shape(DeltaShape):
    """GraphShape's widths with the MSA block size (n_indexer_head, indexer_head, indexer_top_k: GraphShape's); a
    DeltaShape for ``n_seqs`` only (compute and scheduled set it with graphs_delta.with_seqs: several sequences in
    one unified stream turn MSA off), its recurrent widths unused."""

    msa_block: int = 0      # attention.indexer.block_size
    msa_pos: int = 0        # positions in the cache (0: the empty cache of context creation's reserve)


def filled(shape, n_kv: int):
    """``shape`` over a cache whose ``n_kv`` cells per stream all hold positions (MSA's block selection over every
    position: what a long prompt grows the buffer to, the module doc), or None: not a MiniMax-M3 shape, or one given
    its positions already."""
    if not isinstance(shape, MinimaxM3Shape) or shape.msa_pos:
        return None
    return replace(shape, msa_pos=n_kv)


def _inplace(op: str, a: Tensor, *src) -> Tensor:
    """ggml's *_inplace ops: a view of ``a`` (ggml_view_tensor) computed by ``op``."""
    return Tensor(a.type, a.ne, op, (a,) + src, view_src=a, nb=a.nb)


def _hadamard(g: Graph, cur: Tensor, rot: Tensor) -> Tensor:
    """src/llama-impl.h#L57-L74 llama_mul_mat_hadamard."""
    n = rot.ne[0]
    res = g.cont(cur, n, cur.nelements() // n) if not cur.is_contiguous() else g.reshape(cur, n, cur.nelements() // n)
    return g.reshape(g.mul_mat(rot, res), *cur.ne)


def msa_on(s: MinimaxM3Shape, p: Pass) -> bool:
    """minimax-m3.cpp#L233-L235: flash attention, and one sequence or no unified cache (n_seqs 0: not set, the
    streams then say it)."""
    return p.fa and (s.n_seqs <= 1 or p.n_stream > 1)


@dataclass(frozen=True)
class _Msa:
    """The hoisted MSA state of one reserve (minimax-m3.cpp#L253-L299)."""

    n_kv: int
    n_tps: int
    ns: int
    n_ps: int
    nblk: int
    top: int
    bias: Tensor
    pos_mask: Tensor
    pos_slot_i: Tensor
    pos_slot_f: Tensor | None
    cell_blk: Tensor | None
    mask_f32: Tensor | None
    idx_idxs: Tensor


def _msa_inputs(g: Graph, s: MinimaxM3Shape, p: Pass, mask: Tensor) -> _Msa:
    n_tokens, ns, n_kv = p.n_tokens, p.n_stream, p.n_kv
    n_tps = n_tokens // ns
    n_ps = ggml_pad(max(N_POS_PAD, ggml_pad(s.msa_pos, N_POS_PAD)), s.msa_block)   # get_n_pos, then the block
    nblk = n_ps // s.msa_block
    decode = n_tps == 1
    idx_idxs = g.input("i64", n_tokens)      # build_attn_inp_kv_msa: the indexer cache's K indices
    return _Msa(n_kv, n_tps, ns, n_ps, nblk, min(s.indexer_top_k, nblk), g.input("f32", nblk, n_tokens),
                g.input("f32", n_ps, n_tokens), g.input("i32", n_ps, ns),
                g.input("f32", n_ps, ns) if decode else None, None if decode else g.input("i32", n_kv, ns),
                None if decode else g.cast(mask, "f32"), idx_idxs)


def _msa_fa(g: Graph, q_cur: Tensor, k: Tensor, v: Tensor, mask: Tensor, gp: int) -> Tensor:
    """build_attn_msa_fa (minimax-m3.cpp#L176-L208): every GQA group (and at decode every stream) on FA's ne[3]."""
    d, hq, t = q_cur.ne[0], q_cur.ne[1], q_cur.ne[2]
    c = k.ne[3]
    r = hq * t // (gp * c)
    q = g.permute(g.reshape(q_cur, d, gp, c, r), 0, 2, 3, 1)
    o = g.permute(g.flash_attn_ext(q, k, v, mask), 0, 1, 3, 2)
    if not o.is_contiguous():
        o = g.cont(o)
    return g.reshape(o, d * hq, t)


def _row(type_: str, n: int) -> int:
    block, size = TYPES[type_]
    return size * n // block


def _cache_view(cache: Tensor, type_: str, width: int, heads: int, n_kv: int, ns: int) -> Tensor:
    """llama_kv_cache::get_k / get_v (not transposed): {head, heads, n_kv, streams}."""
    row = _row(type_, width * heads)
    return Graph.view(cache, (width, heads, n_kv, ns), (TYPES[type_][1], _row(type_, width), row, row * n_kv))


def _sparse_attention(g: Graph, s: MinimaxM3Shape, p: Pass, m: _Msa, cur, q, k, v, pos, inputs) -> Tensor:
    """One sparse layer's attention with MSA (minimax-m3.cpp#L338-L536), before attn_output."""
    k_idxs, v_idxs, _mask, k_rot, v_rot = inputs
    ih, ihd, n_tokens, ns, n_kv = s.n_indexer_head, s.indexer_head, p.n_tokens, m.ns, m.n_kv
    hd, hkv, n_head = s.head_dim, s.n_head_kv, s.n_head
    iq = g.mul_mat(g.weight(s.n_embd, ih * ihd, name="indexer.q_proj"), cur)
    ik = g.mul_mat(g.weight(s.n_embd, ihd, name="indexer.k_proj"), cur)
    iq = rms_norm(g, g.reshape(iq, ihd, ih, n_tokens), ihd, "indexer.q_norm")
    ik = rms_norm(g, g.reshape(ik, ihd, 1, n_tokens), ihd, "indexer.k_norm")
    iq, ik = g.dup("ROPE", iq, pos), g.dup("ROPE", ik, pos)
    idx_cache = g.weight(ihd, n_kv, ns, type_=p.type_k, kv=True, name="cache_k_idx")
    idx_dst = g.reshape(idx_cache, ihd, n_kv * ns) if ns > 1 else idx_cache
    g.expand(g.set_rows(idx_dst, g.view(ik, (ihd, n_tokens), (ik.nb[0], ik.nb[2])), m.idx_idxs))
    ik_kv = _cache_view(idx_cache, p.type_k, ihd, 1, n_kv, ns)
    if k_rot is not None:
        q, k = _hadamard(g, q, k_rot), _hadamard(g, k, k_rot)
    if v_rot is not None:
        v = _hadamard(g, v, v_rot)
    for t in (q, k, v):
        g.expand(t)
    n_gqa = hd * hkv
    k_cache = g.weight(n_gqa, n_kv, ns, type_=p.type_k, kv=True, name="cache_k")
    v_cache = g.weight(n_gqa, n_kv, ns, type_=p.type_v, kv=True, name="cache_v")
    for cache, x, idxs in ((k_cache, k, k_idxs), (v_cache, v, v_idxs)):
        dst = g.reshape(cache, n_gqa, n_kv * ns) if ns > 1 else cache
        g.expand(g.set_rows(dst, g.view(x, (n_gqa, n_tokens), (x.nb[0], x.nb[2])), idxs))
    kc = _cache_view(k_cache, p.type_k, hd, hkv, n_kv, ns)
    vc = _cache_view(v_cache, p.type_v, hd, hkv, n_kv, ns)
    gp = n_head // hkv
    if m.pos_slot_f is not None:
        out = _decode(g, s, p, m, q, iq, ik_kv, kc, vc, gp)
    else:
        outs = [_batch_stream(g, s, m, q, iq, ik_kv, kc, vc, gp) for _ in range(ns)]
        out = outs[0]
        for o in outs[1:]:
            out = g.concat(out, o, 1)
    return _hadamard(g, out, v_rot) if v_rot is not None else out


def _decode(g: Graph, s: MinimaxM3Shape, p: Pass, m: _Msa, q, iq, ik_kv, kc, vc, gp: int) -> Tensor:
    """One token per stream (minimax-m3.cpp#L388-L447): top-k blocks per stream, their rows gathered."""
    ihd, ih, ns, n_ps, blk, top, hd = s.indexer_head, s.n_indexer_head, m.ns, m.n_ps, s.msa_block, m.top, s.head_dim
    ik3 = g.view(ik_kv, (ihd, m.n_kv, ns), (ik_kv.nb[0], ik_kv.nb[2], ik_kv.nb[3]))
    ikp = g.get_rows(ik3, m.pos_slot_i)
    sc = g.mul_mat(g.reshape(ikp, ihd, n_ps, 1, ns), g.reshape(iq, ihd, ih, 1, ns))
    sc = _inplace("ADD", sc, g.reshape(m.pos_mask, n_ps, 1, 1, ns))
    bs = g.op("POOL_2D", "f32", (m.nblk,) + sc.ne[1:], sc)
    bsf = g.dup("ADD", bs, g.reshape(m.bias, m.nblk, 1, 1, ns))
    idx = g.op("TOP_K", "i32", (top,) + bsf.ne[1:], bsf)
    a = g.reshape(g.dup("SCALE", g.cast(idx, "f32")), 1, top, ih, ns)
    tj = g.dup("ADD", g.op("REPEAT", "f32", (blk, top, ih, ns), a),
               g.reshape(g.op("ARANGE", "f32", (blk,)), blk, 1, 1))
    tokj = g.cast(g.reshape(tj, blk * top * ih, ns), "i32")
    cs = g.reshape(g.get_rows(g.reshape(m.pos_slot_f, 1, n_ps, ns), tokj), blk, top, ih, ns)
    tr = g.dup("ADD", g.dup("SCALE", cs), g.reshape(g.op("ARANGE", "f32", (s.n_head_kv,)), 1, 1, ih))
    tokr = g.cast(g.reshape(tr, blk * top * ih, ns), "i32")
    rows = s.n_head_kv * m.n_kv
    k3 = g.view(kc, (hd, rows, ns), (kc.nb[0], kc.nb[1], kc.nb[3]))
    v3 = g.view(vc, (hd, rows, ns), (vc.nb[0], vc.nb[1], vc.nb[3]))
    mp = g.reshape(m.pos_mask, 1, n_ps, ns)
    kg, vg, mg = g.get_rows(k3, tokr), g.get_rows(v3, tokr), g.get_rows(mp, tokj)
    kfa = g.reshape(kg, hd, blk * top, 1, ih * ns)
    vfa = g.reshape(vg, hd, blk * top, 1, ih * ns)
    kt = "f16" if TYPES[p.type_k][0] > 1 else p.type_k
    vt = "f16" if TYPES[p.type_v][0] > 1 else p.type_v
    if kfa.type != kt:
        kfa = g.cast(kfa, kt)
    if vfa.type != vt:
        vfa = g.cast(vfa, vt)
    mfa = g.cast(g.reshape(mg, blk * top, 1, 1, ih * ns), "f16")
    return _msa_fa(g, q, kfa, vfa, mfa, gp)


def _batch_stream(g: Graph, s: MinimaxM3Shape, m: _Msa, q, iq, ik_kv, kc, vc, gp: int) -> Tensor:
    """One stream of a prompt (minimax-m3.cpp#L449-L523): a block mask over the cells added to the KQ mask."""
    ihd, ih, n_tps, n_ps, nblk, n_kv, top = s.indexer_head, s.n_indexer_head, m.n_tps, m.n_ps, m.nblk, m.n_kv, m.top
    hd, hkv = s.head_dim, s.n_head_kv
    iq_s = g.view(iq, (ihd, ih, n_tps), (iq.nb[0], iq.nb[1], iq.nb[2]))
    ik_s = g.view(ik_kv, (ihd, n_kv), (ik_kv.nb[0], ik_kv.nb[2]))
    psl_s = g.view(m.pos_slot_i, (n_ps,), (m.pos_slot_i.nb[0],))
    pm, bias, mf, cells = m.pos_mask, m.bias, m.mask_f32, m.cell_blk
    assert mf is not None and cells is not None        # a prompt's reserve (_msa_inputs: not one token per stream)
    pm_s = g.view(pm, (n_ps, 1, n_tps), (pm.nb[0], pm.nb[1], pm.nb[1]))
    cb_s = g.view(cells, (n_kv,), (cells.nb[0],))
    mf_s = g.view(mf, (n_kv, n_tps, 1), (mf.nb[0], mf.nb[1], mf.nb[3]))
    bias_s = g.view(bias, (nblk, 1, n_tps), (bias.nb[0], bias.nb[1], bias.nb[1]))
    q_s = g.view(q, (hd, s.n_head, n_tps), (q.nb[0], q.nb[1], q.nb[2]))
    k_s = g.view(kc, (hd, hkv, n_kv, 1), kc.nb)
    v_s = g.view(vc, (hd, hkv, n_kv, 1), vc.nb)
    ikp = g.get_rows(ik_s, psl_s)
    sc = g.reshape(g.mul_mat(ikp, g.reshape(iq_s, ihd, ih * n_tps)), n_ps, ih, n_tps)
    sc = _inplace("ADD", sc, pm_s)
    bs = g.op("POOL_2D", "f32", (nblk,) + sc.ne[1:], sc)
    bsf = g.dup("ADD", bs, bias_s)
    idx = g.op("TOP_K", "i32", (top,) + bsf.ne[1:], bsf)
    ninf = g.cast(g.dup("SCALE", bias_s), "f16")
    ninf = g.op("REPEAT", "f16", (nblk, ih, n_tps, 1), ninf)
    zero = g.dup("SCALE", g.cast(idx, "f32"))
    bm = g.set_rows(g.reshape(ninf, 1, nblk, ih * n_tps), g.reshape(zero, 1, top, ih * n_tps),
                    g.reshape(idx, top, ih * n_tps))
    bm = g.cont(g.permute(g.reshape(bm, nblk, ih, n_tps), 0, 2, 1, 3))
    bm2 = g.cont(g.transpose(g.reshape(bm, nblk, n_tps * ih)))
    bmc = g.get_rows(bm2, cb_s)
    bmx = g.reshape(g.cont(g.transpose(bmc)), n_kv, n_tps, ih)
    mask4 = _inplace("ADD", bmx, mf_s)
    mask4 = g.cast(g.reshape(mask4, n_kv, n_tps, 1, ih), "f16")
    return _msa_fa(g, q_s, g.permute(k_s, 0, 3, 1, 2), g.permute(v_s, 0, 3, 1, 2), mask4, gp)


def build_minimax_m3(s: MinimaxM3Shape, p: Pass) -> Graph:
    """llama_model_minimax_m3::graph::graph for one reserve ``p`` (module docstring)."""
    g = Graph()
    e, hd = s.n_embd, s.head_dim
    tokens, embd, pos = token_inputs(g, s, p)
    inputs = attn_inputs(g, p, s, p.n_kv)
    sparse = msa_on(s, p)
    msa = _msa_inputs(g, s, p, inputs[2]) if sparse else None
    out_ids = g.input("i32", p.n_outputs)
    inp_l = embeddings(g, s, tokens, embd)
    for il in range(s.n_layer):
        g.layer = il
        inp_sa = inp_l
        cur = rms_norm(g, inp_l, e, "attn_norm")
        q, k, v = qkv_heads(g, s, p, cur, False)
        q = rms_norm(g, q, hd, "attn_q_norm")
        k = rms_norm(g, k, hd, "attn_k_norm")
        q, k = g.dup("ROPE", q, pos), g.dup("ROPE", k, pos)
        if msa is not None and il >= s.n_dense_lead:
            att = _sparse_attention(g, s, p, msa, cur, q, k, v, pos, inputs)
        else:
            att = attention(g, q, k, v, inputs, p, s, p.n_kv)
        att = g.mul_mat(g.weight(s.n_head * hd, e, name="attn_output"), att)
        inp_l = deepseek_ffn(g, s, il, att, inp_sa, out_ids)
    return output_head(g, s, inp_l)


def minimax_m3_shape(model) -> MinimaxM3Shape | None:
    """The graph widths of a minimax-m3 ``model`` as conversion/minimax.py MiniMaxM3Model writes its GGUF
    (graphs_minimax01.minimax_m3_tensors for the tensors), or None where the graph above is not the one llama.cpp
    builds: no experts, per-layer widths or windows, no sparse_attention_config, a scoring function moe_ffn does not
    build, or Q/K norms of another kind; or where llama.cpp aborts reserving the MSA graph: indexer heads other than
    the KV heads (GGML_ASSERT(HKV == Hd), minimax-m3.cpp#L382)."""
    if MINIMAX_M3.get(model.model_type) is None:
        return None
    moe, layers = model.facts.moe, model.layers
    sparse = field(model, "sparse_attention_config")
    if moe is None or not layers or not model.facts.vocab_size or not moe.experts or not isinstance(sparse, dict):
        return None
    first = layers[0]
    if not uniform_full(layers):
        return None
    gating = _GATING.get(str(field(model, "scoring_func") or "").lower())
    freq = field(model, "moe_layer_freq")
    keys = ("sparse_num_index_heads", "sparse_index_dim", "sparse_topk_blocks", "sparse_block_size")
    if (gating is None or field(model, "qk_norm_type", "per_head") != "per_head" or not isinstance(freq, list)
            or not all(isinstance(sparse.get(key), int) and sparse[key] > 0 for key in keys)
            or sparse["sparse_num_index_heads"] != first.kv_heads):
        return None
    lead = next((i for i, v in enumerate(freq) if v != 0), len(freq))
    scale = float(field(model, "routed_scaling_factor") or 0.0)
    f = moe.intermediate_size
    return MinimaxM3Shape(arch="minimax-m3", n_layer=len(layers), n_embd=model.hidden_size,
                          n_head=model.num_attention_heads, n_head_kv=first.kv_heads, head_dim=first.head_dim_k,
                          n_ff=int(field(model, "dense_intermediate_size") or 0) if lead else 0,
                          n_vocab=model.facts.vocab_size, n_expert=moe.experts, n_expert_used=moe.top_k, n_ff_exp=f,
                          n_dense_lead=lead, n_ff_shexp=f * int(field(model, "n_shared_experts") or 0), gating=gating,
                          probs_bias=True, norm_w=True, scale_w=scale not in (0.0, 1.0), qk_norm=True,
                          n_indexer_head=sparse["sparse_num_index_heads"], indexer_head=sparse["sparse_index_dim"],
                          indexer_top_k=sparse["sparse_topk_blocks"], msa_block=sparse["sparse_block_size"])

"""deepseek2's attention in llama.cpp's graph at each of its KV cache layouts, node by node
(kvmem.engines.llamacpp.graphs_mla_oss builds the rest of the graph around it; graphs_dsa ends in mla_mha too):

    absorbed_attention   the MLA path of the vendored build 0c1e57098 (is_mla): Q's nope part absorbed by attn_k_b,
                         the latent and k_pe in a K-only cache, V a view of it;
    latent_v_attention   builds PR #12801 to PR #19067 (b5331): the latent in a V cache of its own beside K
                         (transposed without flash attention);
    per_head_attention   a GGUF without the MLA split (mla="none"): attn_kv_b's per-head K and V, a plain KV cache;
    mla_mha              build_attn_mha with v_mla = attn_v_b, which the first two end in.

Each function's docstring cites its lines.
"""

from __future__ import annotations

from .ggml_graph import KQV_OUT, TYPES, Graph
from .graphs import GraphShape, Pass, attention

__all__ = ["absorbed_attention", "latent_v_attention", "mla_mha", "per_head_attention"]


def absorbed_attention(g: Graph, s: GraphShape, p: Pass, q, kv_cmpr, k_pe, pos, k_idxs, mask, q_pe=None):
    """The MLA path (is_mla, deepseek2.cpp L538-L582): Q's nope part absorbed by attn_k_b, K = the latent and
    k_pe in a K-only cache, V its view, build_attn_mha with v_mla."""
    n_head, n_tokens, ns, kv_lora, rope = s.n_head, p.n_tokens, p.n_stream, s.kv_lora, s.rope_dim
    nope, n_k = s.head_dim - rope, kv_lora + rope
    block, size = TYPES[p.type_k]

    def row(n):
        return size * n // block
    q_nope = g.view(q, (nope, n_head, n_tokens), q.nb[:3])
    q_pe = q_pe if q_pe is not None else g.dup("ROPE", g.view(q, (rope, n_head, n_tokens), q.nb[:3]), pos)
    q_nope = g.permute(q_nope, 0, 2, 1, 3)
    absorbed = g.mul_mat(g.weight(nope, kv_lora, n_head, name="attn_k_b"), q_nope)
    absorbed = g.permute(absorbed, 0, 2, 1, 3)
    q_cur = g.concat(absorbed, q_pe)
    kv_cmpr = g.reshape(kv_cmpr, kv_lora, 1, n_tokens)
    k_cur = g.concat(kv_cmpr, k_pe)
    for t in (q_cur, kv_cmpr, k_cur):
        g.expand(t)
    # llama_kv_cache::cpy_k: K rows set into the cache (the streams merged), get_k: its view
    cache = g.weight(n_k, p.n_kv, ns, type_=p.type_k, kv=True, name="cache_k")
    dst = g.reshape(cache, n_k, p.n_kv * ns) if ns > 1 else cache
    g.expand(g.set_rows(dst, g.view(k_cur, (n_k, n_tokens), (k_cur.nb[0], k_cur.nb[2])), k_idxs))
    k = g.view(cache, (n_k, 1, p.n_kv, ns), (size, row(n_k), row(n_k), row(n_k * p.n_kv)))
    v = g.view(k, (kv_lora, 1, p.n_kv, ns), k.nb[:4])
    return mla_mha(g, s, p, q_cur, k, v, mask)


def latent_v_attention(g: Graph, s: GraphShape, p: Pass, q, kv_cmpr, k_pe, pos, inputs, q_pe=None):
    """The MLA path of builds PR #12801 to PR #19067 (b5331: llama.cpp@33eff4024
    src/llama-model.cpp#L10131-L10392 llm_build_deepseek2, src/llama-graph.cpp build_attn L1392-L1515, build_attn_mha
    L1182): Q = the roped
    q_pe then the absorbed nope part, K = k_pe then the latent ("rope must go first"), V = the latent, stored in a V
    cache of its own (K then V, views of each cache, ggml_cpy before PR #14959); Q, K, V expanded in that order before
    PR #16884 (Pass.qkv_order); build_attn_mha with v_mla = attn_v_b. Without flash attention the V cache is
    transposed (v_trans = !flash_attn): cpy_v stores the latent one element a row (one V index per element, a view
    of the cache; before PR #14959 ggml_cpy of the transposed latent into a 2-D view), get_v views it transposed
    (llama.cpp@70d860824 src/llama-kv-cache.cpp#L1028-L1058, #L1095-L1149; at b5331 llama.cpp@33eff4024
    src/llama-graph.cpp#L1420-L1485) and build_attn_mha multiplies KQ by it as it is, with no ggml_cont of V
    (llama.cpp@70d860824 src/llama-graph.cpp#L1579-L1579 v_trans = v->nb[1] > v->nb[2], #L1677-L1683)."""
    n_head, n_tokens, ns, kv_lora, rope = s.n_head, p.n_tokens, p.n_stream, s.kv_lora, s.rope_dim
    nope, n_k = s.head_dim - rope, kv_lora + rope
    k_idxs, v_idxs, mask, _, _ = inputs
    q_nope = g.view(q, (nope, n_head, n_tokens), q.nb[:3])
    q_pe = q_pe if q_pe is not None else g.dup("ROPE", g.view(q, (rope, n_head, n_tokens), q.nb[:3]), pos)
    absorbed = g.mul_mat(g.weight(nope, kv_lora, n_head, name="attn_k_b"), g.permute(q_nope, 0, 2, 1, 3))
    q_cur = g.concat(q_pe, g.permute(absorbed, 0, 2, 1, 3))
    v_cur = g.reshape(kv_cmpr, kv_lora, 1, n_tokens)
    k_cur = g.concat(k_pe, v_cur)
    for t in (q_cur, k_cur, v_cur) if p.qkv_order else (q_cur, v_cur, k_cur):
        g.expand(t)
    caches = []
    for width, cur, idxs, type_, name in ((n_k, k_cur, k_idxs, p.type_k, "cache_k"),
                                           (kv_lora, v_cur, v_idxs, p.type_v, "cache_v")):
        block, size = TYPES[type_]
        cache = g.weight(width, p.n_kv, ns, type_=type_, kv=True, name=name)
        if name == "cache_v" and not p.fa:      # the transposed V cache: one row per element, viewed transposed
            flat = g.reshape(g.reshape(cur, width, n_tokens), 1, width * n_tokens)
            g.expand(g.set_rows(g.reshape(cache, 1, cache.nelements()), flat, idxs))
            row = size * p.n_kv // block
            caches.append(g.view(cache, (p.n_kv, 1, width, ns), (size, row * width, row, row * width)))
            continue
        dst = g.reshape(cache, width, p.n_kv * ns) if ns > 1 else cache
        g.expand(g.set_rows(dst, g.view(cur, (width, n_tokens), (cur.nb[0], cur.nb[2])), idxs))
        caches.append(g.view(cache, (width, 1, p.n_kv, ns), (size, size * width // block, size * width // block,
                                                              size * width * p.n_kv // block)))
    return mla_mha(g, s, p, q_cur, caches[0], caches[1], mask, v_trans=not p.fa)


def per_head_attention(g: Graph, s: GraphShape, p: Pass, q, kv_cmpr, k_pe, pos, inputs, q_pe=None):
    """Without the MLA split (deepseek2.cpp L583-L627): attn_kv_b decompresses the latent into per-head K_nope and
    V (V's view made contiguous), Q roped whole, K = K_nope and k_pe repeated over the heads (ggml_repeat_4d), a
    plain per-head KV cache (build_attn with build_attn_inp_kv: graphs.attention, Q, V, K expanded)."""
    n_head, n_tokens, kv_lora, rope, vd = s.n_head, p.n_tokens, s.kv_lora, s.rope_dim, s.head_dim_v
    nope = s.head_dim - rope
    f32 = TYPES["f32"][1]
    kv = g.mul_mat(g.weight(kv_lora, n_head * (nope + vd), name="attn_kv_b"), kv_cmpr)
    width = f32 * (nope + vd)
    k_nope = g.view(kv, (nope, n_head, n_tokens), (f32, width, width * n_head))
    v = g.cont(g.view(kv, (vd, n_head, n_tokens), (f32, width, width * n_head)))
    if q_pe is None:
        q = g.dup("ROPE", q, pos)      # ggml_rope_set_offset: an op parameter of the same node
    else:       # before PR #27382: Q = concat(q_nope, the roped q_pe), K's rope part repeated to q_pe's shape
        q = g.concat(g.view(q, (nope, n_head, n_tokens), q.nb[:3]), q_pe)
    k = g.concat(k_nope, g.op("REPEAT", k_pe.type, (rope, n_head, n_tokens, 1), k_pe))
    return attention(g, q, k, v, inputs, p, s, p.n_kv)


def mla_mha(g: Graph, s: GraphShape, p: Pass, q_cur, k, v, mask, v_trans: bool = False):
    """build_attn_mha with v_mla = attn_v_b (src/llama-graph.cpp#L2616-L2755): Q split into the streams,
    Q, K, V permuted; flash attention (K, V cast to f16 where f32), the output permuted, multiplied by
    attn_v_b, permuted back and made contiguous; or KQ, its masked softmax, V copied transposed (``v_trans``: a
    transposed V cache's view, used as it is), KQV, attn_v_b, the streams recombined. The result expanded."""
    n_head, n_tokens, ns, kv_lora, vd = s.n_head, p.n_tokens, p.n_stream, s.kv_lora, s.v_head_dim
    per = n_tokens // ns
    qv = g.view(q_cur, (q_cur.ne[0], n_head, per, ns), (q_cur.nb[0], q_cur.nb[1], q_cur.nb[2], q_cur.nb[2] * per))
    qp, kp, vp = g.permute(qv, 0, 2, 1, 3), g.permute(k, 0, 2, 1, 3), g.permute(v, 0, 2, 1, 3)
    wv_b = g.weight(kv_lora, vd, n_head, name="attn_v_b")
    if p.fa:
        if kp.type == "f32":
            kp = g.cast(kp, "f16")
        if vp.type == "f32":
            vp = g.cast(vp, "f16")
        cur = g.flash_attn_ext(qp, kp, vp, mask)
        cur = g.mul_mat(wv_b, g.permute(cur, 0, 2, 1, 3))
        cur = g.cont(g.permute(cur, 0, 2, 1, 3))
        cur = g.reshape(cur, cur.ne[0] * cur.ne[1], cur.ne[2] * cur.ne[3])
    else:
        kq = g.dup("SOFT_MAX", g.mul_mat(kp, qp), mask)
        vt = vp if v_trans else g.cont(g.transpose(vp))
        kqv = g.mul_mat(wv_b, g.mul_mat(vt, kq))
        cur = g.permute(kqv, 0, 2, 1, 3)
        cur = g.cont(cur, cur.ne[0] * cur.ne[1], cur.ne[2] * cur.ne[3])
        cur.name = KQV_OUT      # -nkvo: pinned to the host (llama.cpp@0c1e57098 src/llama-graph.cpp#L2746-L2749)
    g.expand(cur)
    return cur

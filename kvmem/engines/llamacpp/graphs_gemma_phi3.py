"""llama.cpp's gemma2, gemma3 and phi3 forward graphs, node by node (kvmem.engines.llamacpp.graphs
has the llama / qwen graphs and the attention they share).

Transcribed from the vendored llama.cpp (llama-cpp-python 0.3.36, llama.cpp 0c1e57098):

    gemma2  src/models/gemma2.cpp llama_model_gemma2::graph: embeddings scaled by sqrt(n_embd),
            separate Q/K/V, Q scaled after RoPE, the iSWA cache (build_attn_inp_kv_iswa; every
            other layer sliding, load_swa_pattern(ml, 2)), norms after attention and after the
            FFN, GELU with a parallel gate (ggml_geglu_split), and two softcaps: of the
            attention scores (hparams.attn_soft_cap, llama-graph.cpp build_attn_mha: without
            flash attention scale, tanh, scale before the softmax; with it a parameter of
            ggml_flash_attn_ext, no node) and of the logits (always: scale, tanh, scale after
            the lm_head, f_final_logit_softcapping 30 unless the GGUF says otherwise);
    gemma3  src/models/gemma3.cpp llama_model_gemma3::graph<iswa>: gemma2's graph with RMS-normed
            Q and K (attn_q_norm / attn_k_norm) before RoPE, no attention softcap, the logit
            softcap only when the GGUF sets final_logit_softcapping (0 by default);
    phi3    src/models/phi3.cpp llama_model_phi3::graph<false> (phi3's sliding window is disabled
            in load_arch_hparams: one full-size cache, build_attn_inp_kv): a fused attn_qkv
            (llama-graph.cpp build_qkv, the fused path: Q, K and V are ggml_view_3d of one
            product, so RoPE copies Q and K out of it and, without flash attention,
            llama-kv-cache.cpp cpy_v copies V with ggml_cont_2d), Q scaled after RoPE, a fused
            ffn_up of 2 x n_ff (build_ffn LLM_FFN_SWIGLU, LLM_FFN_SEQ: ggml_swiglu of the one
            product, half as wide), residual adds, no biases.
            Older builds (``phi3_dated``): before PR #14568 (12f55c302, 2025-07-07) Q, K and V each a ggml_cont of
            a view_2d of the product, reshaped; from it to PR #15662 (cf0e3ba15, 2025-09-08) V alone (ggml_cont,
            then ggml_cont_3d from PR #15380: the same one copy); before PR #14158 (a0535ffa0, 2025-06-29) build_ffn's
            SWIGLU two ggml_cont halves of the product, ggml_silu of the first, ggml_mul (master's history:
            src/llama-model.cpp llm_build_phi3 and src/llama-graph.cpp build_ffn at those commits' parents).
"""

from __future__ import annotations

from .ggml_graph import OUTPUT, Graph, Tensor
from .graphs import GraphShape, Pass, attention, attn_inputs, embeddings, ffn, swiglu_fused, token_inputs
from .settings import CURRENT, PR_14568, PR_15662

__all__ = ["build_gemma_phi3", "phi3_dated"]


def phi3_dated(arch: str, build) -> dict:
    """GraphShape's qkv_cont for ``arch`` at llama.cpp ``build`` (a date; None: the newest); glu_split (before PR
    #14158) is every family's: graphs.glu_dated."""
    build = build or CURRENT
    if arch != "phi3":
        return {}
    return {"qkv_cont": "qkv" if build < PR_14568 else "v" if build < PR_15662 else ""}


def build_gemma_phi3(s: GraphShape, p: Pass) -> Graph:
    """The graph llama.cpp builds for one reserve of ``p`` (``s.arch`` gemma2, gemma3 or phi3)."""
    return _phi3(s, p) if s.arch == "phi3" else _gemma(s, p)


def _logits(g: Graph, s: GraphShape, out: Tensor) -> Graph:
    """The lm_head, the optional logit softcap (scale, tanh, scale); result_norm and result_output are outputs."""
    logits = g.mul_mat(g.weight(s.n_embd, s.n_vocab, name="output"), out)
    if s.final_softcap:
        logits = g.dup("SCALE", g.dup("UNARY", g.dup("SCALE", logits)))
    out.flags |= OUTPUT
    logits.flags |= OUTPUT
    g.expand(logits)
    return g


def _gemma(s: GraphShape, p: Pass) -> Graph:
    """llama_model_gemma2::graph and llama_model_gemma3::graph<iswa> (module docstring)."""
    g = Graph()
    hd, n_head, n_head_kv, n_tokens, e = s.head_dim, s.n_head, s.n_head_kv, p.n_tokens, s.n_embd
    n_gqa = hd * n_head_kv
    tokens, embd, pos = token_inputs(g, s, p)
    base, swa = attn_inputs(g, p, s, p.n_kv), attn_inputs(g, p, s, p.n_kv_swa)
    out_ids = g.input("i32", p.n_outputs)

    def norm(x, name, width=e):
        return g.dup("MUL", g.dup("RMS_NORM", x), g.weight(width, name=name))

    inp = embeddings(g, s, tokens, embd)
    inp_l = g.dup("SCALE", inp)
    for il in range(s.n_layer):
        g.layer = il
        cur = norm(inp_l, "attn_norm")
        q = g.reshape(g.mul_mat(g.weight(e, n_head * hd, name="attn_q"), cur), hd, n_head, n_tokens)
        k = g.reshape(g.mul_mat(g.weight(e, n_gqa, name="attn_k"), cur), hd, n_head_kv, n_tokens)
        v = g.reshape(g.mul_mat(g.weight(e, n_gqa, name="attn_v"), cur), hd, n_head_kv, n_tokens)
        if s.arch == "gemma3":
            q, k = norm(q, "attn_q_norm", hd), norm(k, "attn_k_norm", hd)
        q = g.dup("SCALE", g.dup("ROPE", q, pos))
        k = g.dup("ROPE", k, pos)
        sliding = s.swa[il]
        cur = attention(g, q, k, v, swa if sliding else base, p, s, p.n_kv_swa if sliding else p.n_kv,
                         iswa=any(s.swa))
        cur = g.mul_mat(g.weight(n_head * hd, e, name="attn_output"), cur)
        if il == s.n_layer - 1:
            cur = g.get_rows(cur, out_ids)
            inp_l = g.get_rows(inp_l, out_ids)
        sa_out = g.dup("ADD", norm(cur, "post_attention_norm"), inp_l)
        cur = norm(ffn(g, norm(sa_out, "ffn_norm"), s), "post_ffw_norm")
        inp_l = g.dup("ADD", cur, sa_out)
    g.layer = s.n_layer
    return _logits(g, s, norm(inp_l, "output_norm"))


def _phi3(s: GraphShape, p: Pass) -> Graph:
    """llama_model_phi3::graph<false> (module docstring); separate Q/K/V when the GGUF has them."""
    g = Graph()
    hd, n_head, n_head_kv, n_tokens, e = s.head_dim, s.n_head, s.n_head_kv, p.n_tokens, s.n_embd
    n_q, n_gqa = hd * n_head, hd * n_head_kv
    tokens, embd, pos = token_inputs(g, s, p)
    inputs = attn_inputs(g, p, s, p.n_kv)
    out_ids = g.input("i32", p.n_outputs)

    def norm(x, name):
        return g.dup("MUL", g.dup("RMS_NORM", x), g.weight(e, name=name))

    inp = embeddings(g, s, tokens, embd)
    inp_l = inp
    for il in range(s.n_layer):
        g.layer = il
        residual = inp_l
        cur = norm(inp_l, "attn_norm")
        if s.fused_qkv:         # build_qkv, fused: ggml_view_3d of the one product
            qkv = g.mul_mat(g.weight(e, n_q + 2 * n_gqa, name="attn_qkv"), cur)
            q, k, v = (g.view(qkv, (hd, heads, n_tokens), (qkv.nb[0], qkv.nb[0] * hd, qkv.nb[1]))
                       for heads in (n_head, n_head_kv, n_head_kv))
            # older builds: ggml_cont(ggml_view_2d(...)) then a reshape (phi3_dated)
            q, k, v = (g.reshape(g.cont(t, hd * t.ne[1], n_tokens), *t.ne[:3]) if name in s.qkv_cont else t
                       for name, t in zip("qkv", (q, k, v), strict=True))
        else:
            q = g.reshape(g.mul_mat(g.weight(e, n_q, name="attn_q"), cur), hd, n_head, n_tokens)
            k = g.reshape(g.mul_mat(g.weight(e, n_gqa, name="attn_k"), cur), hd, n_head_kv, n_tokens)
            v = g.reshape(g.mul_mat(g.weight(e, n_gqa, name="attn_v"), cur), hd, n_head_kv, n_tokens)
        q = g.dup("SCALE", g.dup("ROPE", q, pos))
        k = g.dup("ROPE", k, pos)
        cur = attention(g, q, k, v, inputs, p, s, p.n_kv)
        cur = g.mul_mat(g.weight(n_q, e, name="attn_output"), cur)
        if il == s.n_layer - 1:
            cur = g.get_rows(cur, out_ids)
            residual = g.get_rows(residual, out_ids)
        residual = g.dup("ADD", cur, residual)
        up = g.mul_mat(g.weight(e, 2 * s.n_ff, name="ffn_up"), norm(residual, "ffn_norm"))
        cur = g.mul_mat(g.weight(s.n_ff, e, name="ffn_down"), swiglu_fused(g, s, up, s.n_ff))
        inp_l = g.dup("ADD", residual, cur)
    g.layer = s.n_layer
    return _logits(g, s, norm(inp_l, "output_norm"))

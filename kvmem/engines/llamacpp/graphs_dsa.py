"""llama.cpp's glm-dsa (GLM-5.x) and deepseek32 (DeepSeek-V3.2) forward graphs: DeepSeek's absorbed MLA with
the sparse attention's lightning indexer, node by node (kvmem.engines.llamacpp.graphs_mla_oss has deepseek2's
MLA graph, whose attention and MoE these share).

Transcribed from the vendored llama.cpp (llama-cpp-python 0.3.36, llama.cpp 0c1e57098):

    glm-dsa     src/models/glm-dsa.cpp llama_model_glm_dsa::graph::graph (L196-L530);
    deepseek32  src/models/deepseek32.cpp llama_model_deepseek32::graph::graph (L162-L517): the same graph
                with NEOX RoPE on the indexer (no size changes) and an indexer in every layer; glm-dsa's
                "shared" layers (hparams.is_indexer_full false: GLM-5.2's attention.indexer.types) build no
                indexer and reuse the previous full layer's top-k (L243-L246, L386-L391).

    inputs      build_attn_inp_k_dsa (src/llama-graph.cpp#L3336-L3374): the MLA cache's K indices and KQ mask
                (f16 with flash attention, else f32), the indexer cache's K indices, its mask (f16: the
                fused lightning indexer, cparams.fused_lid, is on and never auto-resolved at this build,
                src/llama-context.cpp#L237-L238) and the Hadamard matrix attn_inp_k_rot (llama_kv_cache
                always makes one for these archs, src/llama-kv-cache.cpp#L326-L331; nrot x nrot with nrot the
                largest power of two from 64 dividing the indexer head, #L1447-L1466).
    per layer   attn_norm; qr = attn_q_a, its RMS norm; on a full indexer layer (L263-L384): indexer_q =
                indexer.attn_q_b x qr reshaped to {head, heads, tokens} and roped; indexer_k =
                indexer.attn_k x cur, LLM_NORM with weight and bias, reshaped, roped; both multiplied by the
                Hadamard matrix; indexer_k set into the indexer cache (llama_kv_cache::cpy_k, expanded);
                indexer weights = indexer.proj x cur; the cached keys viewed; q and the weights viewed by
                stream, the weights scaled; ggml_lightning_indexer (q, k, weights, mask: ggml.c#L6432-L6464,
                f32 {n_kv, tokens per stream, 1, streams}); top-k = ggml_cont(ggml_top_k(score, min(n_kv,
                top_k))). Then deepseek2's absorbed MLA (Q from attn_q_b as views of one product, the latent
                and k_pe views of attn_kv_a_mqa, RoPE, attn_k_b absorption, concats) and build_attn with
                the DSA input (src/llama-graph.cpp#L3039-L3108): Q, V, K expanded, K set into the MLA cache,
                the MLA mask filled with -inf (ggml_fill), viewed as rows of one, the top-k indices viewed
                {k, tokens, streams, 1}, a new f32 tensor {1, k, tokens, streams} filled with zeros (a leaf
                of the compute buffer), ggml_set_rows of the zeros into the filled mask at the top-k rows,
                viewed back and added to the mask; build_attn_mha with v_mla over the cached K and its V view
                (graphs_mla_oss.mla_mha); attn_output; the last layer's rows by out_ids; the dense or MoE FFN
                with the shared experts (graphs_mla_oss.moe_ffn).
    output      output_norm (t_h_nextn and result_norm), the lm_head.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, replace

from .arch_fields import field
from .ggml_graph import TYPES, Graph, Tensor
from .graphs import GraphShape, Pass, embeddings, output_head, rot_size, token_inputs
from .graphs_mla_oss import deepseek_ffn, mla_fields, mla_mha, rms_norm
from .indexers import indexer_widths
from .settings import CURRENT, PR_24231, PR_25545, PR_27176, PR_27382, glm_dsa_indexer_ignored

__all__ = ["DSA", "DSAShape", "build_dsa", "dsa_shape", "dsa_build_shape", "cuda_runs_indexer"]

# kvmem model_type -> the llama.cpp architecture (arch_tensors.ARCHS)
DSA = {"glm_moe_dsa": "glm-dsa", "deepseek_v32": "deepseek32"}


@dataclass(frozen=True)
class DSAShape(GraphShape):
    """The graph of builds before PR #27176 (settings.PR_27176, 2026-08-16): the indexer's q and k roped as views of
    their first n_rot values and joined back to the rest by ggml_concat (llama.cpp@563dec81c
    src/models/deepseek32.cpp#L233-L287, src/models/glm-dsa.cpp likewise), not reshaped and roped whole."""

    indexer_concat: bool = True


def dsa_build_shape(model, build: datetime.date = CURRENT) -> GraphShape | None:
    """The graph llama.cpp ``build`` builds for a glm-dsa / deepseek32 ``model`` (dsa_shape at the vendored build),
    None where dsa_shape has none. glm-dsa before PR #25407 builds deepseek2's graph (models.h `using graph =
    llama_model_deepseek2::graph`, which PR #25407 replaced): the same MLA and routing widths, no indexer. Raises
    where kvmem does not compute the build's graph: deepseek32 before PR #24231 (2026-07-11) builds its indexer from
    generic ggml ops, and CUDA builds before PR #25545 (2026-07-15) disable the fused op (cparams.auto_flid's probe
    finds it on the host, llama.cpp@00f5442cc src/llama-context.cpp#L500-L546) and take the same generic ops."""
    shape = dsa_shape(model)
    if shape is None:
        return None
    if glm_dsa_indexer_ignored(model.model_type, build):
        # deepseek2's graph as that build has it: Q's rope part roped first before PR #27382 (graphs_mla_oss)
        return replace(shape, arch="deepseek2", n_indexer_head=0, indexer_head=0, indexer_top_k=0, indexer_full=(),
                       rope_q_early=build < PR_27382)
    if build < PR_25545:
        how = ("builds its lightning indexer from generic ggml ops (PR #23346; GGML_OP_LIGHTNING_INDEXER came with "
               "PR #24231 on 2026-07-11)" if build < PR_24231 else
               "runs GGML_OP_LIGHTNING_INDEXER on the CPU only: a CUDA build disables it and builds the indexer from "
               "generic ggml ops until PR #25545 (2026-07-15), and kvmem does not tell the two builds apart")
        raise ValueError(f"{model.name}: llama.cpp build {build} {how}; the compute buffer of that graph is not "
                         "computed here (PR #24231's DeepSeek-V3.2 run at -ub 2048: 168368.12 MiB of CPU compute "
                         "before the op, 5808.12 with it); the KV cache is (kvmem.estimate), the layout from a build "
                         "of 2026-07-15 on")
    if build < PR_27176:
        return DSAShape(**{f: getattr(shape, f) for f in shape.__dataclass_fields__})
    return shape


def _layer_norm(g: Graph, x, width: int, name: str):
    """build_norm, LLM_NORM with weight and bias: ggml_norm, ggml_mul, ggml_add."""
    cur = g.dup("MUL", g.dup("NORM", x), g.weight(width, name=name))
    return g.dup("ADD", cur, g.weight(width, name=name + ".bias"))


def _cache_k(g: Graph, width: int, p: Pass, name: str):
    """A K-only cache's layer tensor (one KV head of ``width``), a store into it (llama_kv_cache::cpy_k: the
    streams merged), and its get_k view {width, 1, n_kv, streams}."""
    block, size = TYPES[p.type_k]
    row = size * width // block
    ns = p.n_stream
    cache = g.weight(width, p.n_kv, ns, type_=p.type_k, kv=True, name=name)
    dst = g.reshape(cache, width, p.n_kv * ns) if ns > 1 else cache
    return dst, g.view(cache, (width, 1, p.n_kv, ns), (size, row, row, row * p.n_kv))


def _indexer(g: Graph, s: GraphShape, p: Pass, cur, qr, pos, k_idxs, mask, k_rot):
    """The lightning indexer of one full layer (module docstring): its top-k cell indices."""
    n_tokens, ns, ih, ihd = p.n_tokens, p.n_stream, s.n_indexer_head, s.indexer_head
    q = g.mul_mat(g.weight(s.q_lora, ih * ihd, name="indexer.attn_q_b"), qr)
    k = _layer_norm(g, g.mul_mat(g.weight(s.n_embd, ihd, name="indexer.attn_k"), cur), ihd, "indexer.k_norm")
    if getattr(s, "indexer_concat", False):
        q, k = _rope_concat(g, q, ih, n_tokens, s.rope_dim, pos), _rope_concat(g, k, 1, n_tokens, s.rope_dim, pos)
    else:
        q = g.dup("ROPE", g.reshape(q, ihd, ih, n_tokens), pos)
        k = g.dup("ROPE", g.reshape(k, ihd, 1, n_tokens), pos)
    q, k = g.mul_mat(k_rot, q), g.mul_mat(k_rot, k)
    dst, cached = _cache_k(g, ihd, p, "cache_k_lid")
    g.expand(g.set_rows(dst, g.view(k, (k.ne[0] * k.ne[1], n_tokens), (k.nb[0], k.nb[2])), k_idxs))
    weights = g.mul_mat(g.weight(s.n_embd, ih, name="indexer.proj"), cur)
    per = n_tokens // ns
    q = g.view(q, (q.ne[0], q.ne[1], per, ns), (q.nb[0], q.nb[1], q.nb[2], q.nb[3] // ns))
    weights = g.view(weights, (ih, per, 1, ns), (weights.nb[0], weights.nb[1], weights.nb[2] // ns,
                                                 weights.nb[3] // ns))
    weights = g.dup("SCALE", weights)
    score = g.op("LIGHTNING_INDEXER", "f32", (cached.ne[2], q.ne[2], 1, q.ne[3]), q, cached, weights, mask)
    top = min(score.ne[0], s.indexer_top_k)
    return g.cont(g.op("TOP_K", "i32", (top,) + score.ne[1:], score))


def _rope_concat(g: Graph, x, heads: int, n_tokens: int, rope: int, pos):
    """Builds before PR #27176 (DSAShape): views {rope, heads, tokens} and {head - rope, heads, tokens} of ``x``,
    the first roped (a new tensor) and concatenated with the second along dim 0."""
    f32, head = TYPES["f32"][1], x.ne[0] // heads
    nb = (f32, f32 * head, f32 * head * heads)
    pe = g.dup("ROPE", g.view(x, (rope, heads, n_tokens), nb), pos)
    return g.concat(pe, g.view(x, (head - rope, heads, n_tokens), nb))


def _sparse_mask(g: Graph, mask, top_k):
    """build_attn (DSA input)'s mask: -inf everywhere but the top-k cells, plus the causal mask."""
    filled = g.dup("FILL", mask)
    rows = g.view(filled, (1, filled.ne[0], filled.ne[1], filled.ne[3]),
                  (filled.nb[0], filled.nb[0], filled.nb[1], filled.nb[2]))
    idx = g.view(top_k, (top_k.ne[0], top_k.ne[1], top_k.ne[3], 1),
                 (top_k.nb[0], top_k.nb[1], top_k.nb[2], top_k.ne[3] * top_k.nb[3]))
    zeros = g.dup("FILL", Tensor("f32", (1, idx.ne[0], idx.ne[1], idx.ne[2])))
    picked = g.set_rows(rows, zeros, idx)
    picked = g.view(picked, (picked.ne[1], picked.ne[2], 1, picked.ne[3]),
                    (picked.nb[0], picked.nb[2], picked.nb[3], picked.nb[3]))
    return g.dup("ADD", picked, mask)


def build_dsa(s: GraphShape, p: Pass) -> Graph:
    """The graph llama.cpp builds for one reserve of ``p`` (``s.arch`` glm-dsa or deepseek32)."""
    g = Graph()
    e, n_head, n_tokens, ns = s.n_embd, s.n_head, p.n_tokens, p.n_stream
    hk, rope, kv_lora = s.head_dim, s.rope_dim, s.kv_lora
    nope, n_k = hk - rope, kv_lora + rope
    f32 = TYPES["f32"][1]
    tokens, embd, pos = token_inputs(g, s, p)
    k_idxs = g.input("i64", n_tokens)
    mask = g.input("f16" if p.fa else "f32", p.n_kv, n_tokens // ns, 1, ns)
    lid_idxs = g.input("i64", n_tokens)
    lid_mask = g.input("f16", p.n_kv, n_tokens // ns, 1, ns)
    nrot = rot_size(s.indexer_head)
    k_rot = g.input("f32", nrot, nrot)
    out_ids = g.input("i32", p.n_outputs)
    inp_l = embeddings(g, s, tokens, embd)
    top_k = None
    for il in range(s.n_layer):
        g.layer = il
        inp_sa = inp_l
        cur = rms_norm(g, inp_l, e, "attn_norm")
        qr = rms_norm(g, g.mul_mat(g.weight(e, s.q_lora, name="attn_q_a"), cur), s.q_lora, "attn_q_a_norm")
        if s.indexer_full[il]:
            top_k = _indexer(g, s, p, cur, qr, pos, lid_idxs, lid_mask, k_rot)
        q = g.mul_mat(g.weight(s.q_lora, n_head * hk, name="attn_q_b"), qr)
        q_nope = g.view(q, (nope, n_head, n_tokens), (f32, f32 * hk, f32 * hk * n_head))
        q_pe = g.view(q, (rope, n_head, n_tokens), (f32, f32 * hk, f32 * hk * n_head))
        kv_pe = g.mul_mat(g.weight(e, n_k, name="attn_kv_a_mqa"), cur)
        kv_cmpr = g.view(kv_pe, (kv_lora, n_tokens), (f32, f32 * n_k))
        k_pe = g.view(kv_pe, (rope, 1, n_tokens), (f32, f32 * n_k, f32 * n_k))
        q_pe, k_pe = g.dup("ROPE", q_pe, pos), g.dup("ROPE", k_pe, pos)
        kv_cmpr = rms_norm(g, kv_cmpr, kv_lora, "attn_kv_a_norm")
        absorbed = g.mul_mat(g.weight(nope, kv_lora, n_head, name="attn_k_b"), g.permute(q_nope, 0, 2, 1, 3))
        q_cur = g.concat(g.permute(absorbed, 0, 2, 1, 3), q_pe)
        kv_cmpr = g.reshape(kv_cmpr, kv_lora, 1, n_tokens)
        k_cur = g.concat(kv_cmpr, k_pe)
        for t in (q_cur, kv_cmpr, k_cur):
            g.expand(t)
        dst, k = _cache_k(g, n_k, p, "cache_k")
        g.expand(g.set_rows(dst, g.view(k_cur, (n_k, n_tokens), (k_cur.nb[0], k_cur.nb[2])), k_idxs))
        sparse = _sparse_mask(g, mask, top_k)
        v = g.view(k, (kv_lora, 1, p.n_kv, ns), k.nb[:4])
        cur = mla_mha(g, s, p, q_cur, k, v, sparse)
        cur = g.mul_mat(g.weight(n_head * s.v_head_dim, e, name="attn_output"), cur)
        inp_l = deepseek_ffn(g, s, il, cur, inp_sa, out_ids)
    return output_head(g, s, inp_l)        # result_norm is also t_h_nextn


def dsa_shape(model) -> GraphShape | None:
    """The graph widths of a glm-dsa or deepseek32 ``model`` as convert_hf_to_gguf writes its GGUF
    (conversion/glm.py, conversion/deepseek.py; the indexer's keys L376-L382), or None where the graph above
    is not the one llama.cpp would build: no routed experts, no q_lora_rank (glm-dsa.cpp and deepseek32.cpp
    always build attn_q_a), an indexer head that is not a power of two from 64 (the Hadamard matrix is nrot
    wide: ggml_mul_mat needs nrot == the head), no full layer before a shared one."""
    arch = DSA.get(model.model_type)
    moe, layers = model.facts.moe, model.layers
    if arch is None or moe is None or not layers or not model.facts.vocab_size or not field(model, "q_lora_rank"):
        return None
    ih, ihd, top = field(model, "index_n_heads"), field(model, "index_head_dim"), field(model, "index_topk")
    if not (ih and ihd and top) or rot_size(ihd) != ihd:
        return None
    fields = mla_fields(model)
    if fields is None or fields["rope_dim"] > ihd:     # glm-dsa.cpp L214: GGML_ASSERT(n_rot <= indexer head)
        return None
    full = indexer_widths(model)
    indexer_full = tuple(il in full for il in range(len(layers)))
    if not indexer_full[0]:
        return None     # glm-dsa.cpp L388: a shared layer needs a previous full one (GGML_ASSERT)
    if arch == "glm-dsa" and field(model, "scoring_func") in (None, "sigmoid"):
        # glm-dsa.cpp load_arch_hparams: no expert_gating_func -> SIGMOID; the selection bias where the config
        # has it (e_score_correction_bias: arch_tensors writes exp_probs_b for sigmoid routing)
        fields.update(gating="sigmoid", probs_bias=field(model, "scoring_func") == "sigmoid")
    return GraphShape(arch=arch, n_layer=len(layers), n_embd=model.hidden_size, n_head=model.num_attention_heads,
                      n_vocab=model.facts.vocab_size, n_expert=moe.experts, n_expert_used=moe.top_k,
                      n_ff_exp=moe.intermediate_size, n_indexer_head=ih, indexer_head=ihd, indexer_top_k=top,
                      indexer_full=indexer_full, **fields)


def cuda_runs_indexer(shape, type_k: str) -> bool:
    """Whether CUDA takes glm-dsa / deepseek32's fused lightning indexer (graphs_dsa), so that ggml_sched keeps it
    on its layer's GPU: a 128-wide head, 32 or 64 heads, K cached as f32, bf16, f16, q8_0, q5_1, q5_0, q4_1 or
    q4_0 (llama.cpp@0c1e57098 ggml/src/ggml-cuda/lightning-indexer.cu#L536-L587; the top-k is CUDA's with CUB,
    CUDART >= 11.7: ggml-cuda/common.cuh#L114-L115, ggml-cuda.cu#L5562-L5567)."""
    return shape.indexer_head == 128 and shape.n_indexer_head in (32, 64) and type_k in (
        "f32", "bf16", "f16", "q8_0", "q5_1", "q5_0", "q4_1", "q4_0")

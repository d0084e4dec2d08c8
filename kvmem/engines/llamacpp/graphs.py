"""llama.cpp's forward graphs, node by node, as kvmem.engines.llamacpp.compute reserves them.

Each function below transcribes one graph of the vendored llama.cpp (llama-cpp-python 0.3.36,
llama.cpp 0c1e57098) into kvmem.engines.llamacpp.ggml_graph's small ggml, in the order llama.cpp
builds and expands it; compute.py's docstring lists the source functions followed and what was
measured against llama.cpp.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .ggml_graph import KQV_OUT, OUTPUT, TYPES, Graph
from .settings import CURRENT, PR_14158, PR_16884, PR_21038, PR_23764

__all__ = ["GraphShape", "Pass", "PR_16884", "PR_21038", "PR_23764", "build", "attention", "attn_inputs", "ffn", "glu",
           "glu_dated", "swiglu_fused", "experts_sum", "kq_mask", "token_inputs", "embeddings", "linear", "rot_size"]

# ggml-org/llama.cpp PR #23764 "llama: use f16 mask for FA to save VRAM", squash-merged as 031ddb2e0 on 2026-05-29
# (master's history, ngxson/llama.cpp mirror): before it build_attn_inp_kq_mask made the KQ mask an f32 input and every
# attention input cast it to f16 under flash attention (self_kq_mask_cnv = ggml_cast(..., GGML_TYPE_F16):
# src/llama-graph.cpp build_attn_inp_kv_impl, build_attn_inp_k_impl, build_attn_inp_kv_iswa, build_inp_mem_hybrid_iswa
# at 031ddb2e0~1); from it the input itself is f16 (031ddb2e0 src/llama-graph.cpp#L29-L35) and there is no cast. A
# build of the merge day is taken to have it. The DSA inputs (build_attn_inp_k_dsa) came the same day after it
# (PR #23346, 1f0aa2a69) and cast an f16 mask to f16 until PR #23864 (764f1e64a, hours later: PR #23877 proposed the
# same and was closed); kvmem's DSA graph starts at PR #25545 (graphs_dsa), glm-dsa before PR #25407 runs deepseek2's.
# ggml-org/llama.cpp PR #21038 "llama : rotate activations for better quantization", squash-merged as 744c0c731 on
# 2026-04-01: from it a quantised K (V) cache with a head size % 64 == 0 rotates Q and K (V, and the attention's output)
# by a Walsh-Hadamard matrix, an f32 graph input (llama_kv_cache::build_input_k_rot / build_input_v_rot,
# 744c0c731 src/llama-kv-cache.cpp#L1301-L1340); before it no build has these inputs or their matmuls.
# ggml-org/llama.cpp PR #16884 "CUDA: fuse rope + set_rows", squash-merged as a90eb94ca on 2025-11-13: from it
# build_attn's KV-cache path expands Q, V, K ("expand k later to enable rope fusion", src/llama-graph.cpp#L1793-L1798
# at b7800); before it Q, K, V (#L1366-L1370 at a4569c41f, b6071; #L1392-L1408 at 33eff4024, b5331); b7044

QUANTISED = frozenset(t for t, (block, _) in TYPES.items() if block > 1)
QK_NORM = ("qwen3", "qwen3moe")       # RMS-normed Q and K before RoPE


@dataclass(frozen=True)
class GraphShape:
    """The widths llama.cpp's llama / qwen2 / qwen3 / qwen3moe / gemma2 / gemma3 / phi3 graphs are built
    from (GGUF hparams)."""

    arch: str               # "llama", "qwen2", "qwen3", "qwen3moe", "gemma2", "gemma3" or "phi3"
    n_layer: int
    n_embd: int
    n_head: int
    n_head_kv: int
    head_dim: int
    n_ff: int               # dense FFN width (0: every layer routes)
    n_vocab: int
    n_expert: int = 0
    n_expert_used: int = 0
    n_ff_exp: int = 0
    qkv_bias: bool = False  # Q, K, V biases (qwen2; create_tensor_qkv's optional wq_b/wk_b/wv_b)
    swa: tuple = ()         # per layer: a sliding-window layer of the iSWA cache (gemma2, gemma3)
    final_softcap: bool = False     # tanh softcap of the logits (gemma2 always, gemma3 when set)
    fused_qkv: bool = False         # one attn_qkv weight (phi3): Q, K, V are views of its product
    qkv_cont: str = ""      # which of "q", "k", "v" an older phi3 graph copies out of that product (graphs_gemma_phi3)
    glu_split: bool = False  # builds before PR #14158: the activation, then ggml_mul, not one GLU op (graphs.glu)
    # deepseek2 (MLA) and gpt-oss (kvmem.engines.llamacpp.graphs_mla_oss)
    q_lora: int = 0         # attention.q_lora_rank (0: one attn_q, the "lite" layers)
    kv_lora: int = 0        # attention.kv_lora_rank: the cached latent's width (K = kv_lora + rope_dim)
    rope_dim: int = 0       # rope.dimension_count (qk_rope_head_dim)
    v_head_dim: int = 0     # attention.value_length_mla; head_dim holds key_length_mla (nope + rope)
    n_dense_lead: int = 0   # leading_dense_block_count: layers with the dense FFN (n_ff wide)
    n_ff_shexp: int = 0     # shared experts' width (n_ff_exp x expert_shared_count)
    gating: str = "softmax"     # expert_gating_func: "softmax", "sigmoid" or "softmax_weight" (gpt-oss)
    probs_bias: bool = False    # exp_probs_b: the selection bias
    norm_w: bool = False        # expert_weights_norm
    scale_w: bool = False       # expert_weights_scale other than 0 and 1: a SCALE node
    n_group: int = 0            # expert_group_count (> 1: group-limited routing)
    n_group_used: int = 0       # expert_group_used_count
    # glm-dsa / deepseek32 (DeepSeek sparse attention: kvmem.engines.llamacpp.graphs_dsa)
    n_indexer_head: int = 0     # attention.indexer.head_count
    indexer_head: int = 0       # attention.indexer.key_length (the indexer cache's row)
    indexer_top_k: int = 0      # attention.indexer.top_k
    indexer_full: tuple = ()    # per layer: a "full" indexer layer (else it reuses the previous full layer's top-k)
    # deepseek2 from a GGUF without the MLA split (attn_kv_b, per-head K and V: mla="none")
    per_head_mla: bool = False
    head_dim_v: int = 0         # V's head width where it is not head_dim (the per-head MLA cache: v_head_dim)
    qk_norm: bool = False       # glm4moe: attn_q_norm / attn_k_norm present (kvmem.engines.llamacpp.graphs_glm4moe)
    mla_v: bool = False         # deepseek2 over the latent + V cache of builds PR #12801 to PR #19067 (graphs_mla_oss)
    rope_q_early: bool = False  # deepseek2 at builds before PR #27382: Q's rope part roped first (graphs_mla_oss)


@dataclass(frozen=True)
class Pass:
    """One reserved graph: its tokens and outputs, the cells per stream and the streams."""

    n_tokens: int
    n_outputs: int
    n_kv: int
    n_stream: int
    fa: bool
    type_k: str
    type_v: str
    n_kv_swa: int = 0       # cells per stream of the sliding-window cache (llama_kv_cache_iswa)
    set_rows: bool = True   # K/V stored by ggml_set_rows with i64 index inputs (PR #14285, default since
                            # PR #14959); False: the older view + ggml_cpy of contiguous slots (no inputs)
    inp_embd: bool = True   # build_inp_embd also makes the (unused) embeddings input (PR #18898)
    mask_f32: bool = False  # builds before PR #23764: an f32 KQ mask, cast to f16 for flash attention (kq_mask)
    kv_rot: bool = True     # builds from PR #21038: a quantised cache's Hadamard rotations (attn_inputs)
    qkv_order: bool = False  # builds before PR #16884: build_attn's KV path expands Q, K, V (then Q, V, K)


def build(s: GraphShape, p: Pass) -> Graph:
    """The graph llama.cpp builds for one reserve of ``p``: llama, qwen2, qwen3, qwen3moe (every family:
    kvmem.engines.llamacpp.graph_build.build_graph)."""
    return _graph(s, p)


def token_inputs(g: Graph, s: GraphShape, p: Pass):
    """build_inp_embd (the token ids and the unused inp_embd input) and build_inp_pos."""
    tokens = g.input("i32", p.n_tokens)
    embd = g.input("f32", s.n_embd, p.n_tokens) if p.inp_embd else None
    return tokens, embd, g.input("i32", p.n_tokens)


def embeddings(g: Graph, s: GraphShape, tokens, embd):
    """build_inp_embd's lookup of the token embeddings, expanded into the graph first, then the
    unused inp_embd input (ggml_build_forward_select keeps both)."""
    inp = g.get_rows(g.weight(s.n_embd, s.n_vocab, name="token_embd"), tokens)
    g.expand(inp)
    if embd is not None:
        g.expand(embd)
    return inp


def _hadamard(g: Graph, cur, rot):
    """src/llama-impl.h llama_mul_mat_hadamard."""
    n = rot.ne[0]
    res = g.cont(cur, n, cur.nelements() // n) if not cur.is_contiguous() else g.reshape(cur, n, cur.nelements() // n)
    return g.reshape(g.mul_mat(rot, res), *cur.ne)


def rot_size(head_dim: int) -> int:
    """llama_kv_cache::build_input_k_rot: the largest power of two (>= 64) dividing the head size."""
    nrot = 64
    while True:
        nrot *= 2
        if head_dim % nrot:
            return nrot // 2


def _graph(s: GraphShape, p: Pass) -> Graph:
    """src/models/llama.cpp, qwen2.cpp, qwen3.cpp and qwen3moe.cpp: one graph with four variants."""
    g = Graph()
    hd, n_head = s.head_dim, s.n_head
    # inputs (build_inp_embd, build_inp_pos, build_attn_inp_kv, build_inp_out_ids)
    tokens, embd, pos = token_inputs(g, s, p)
    inputs = attn_inputs(g, p, s, p.n_kv)
    out_ids = g.input("i32", p.n_outputs)
    inp_l = embeddings(g, s, tokens, embd)
    for il in range(s.n_layer):
        g.layer = il
        inp_sa = inp_l
        cur = g.dup("MUL", g.dup("RMS_NORM", inp_l), g.weight(s.n_embd, name="attn_norm"))
        q, k, v = qkv_heads(g, s, p, cur, s.qkv_bias)
        if s.arch in QK_NORM:
            q = g.dup("MUL", g.dup("RMS_NORM", q), g.weight(hd, name="attn_q_norm"))
        q = g.dup("ROPE", q, pos)
        if s.arch in QK_NORM:
            k = g.dup("MUL", g.dup("RMS_NORM", k), g.weight(hd, name="attn_k_norm"))
        k = g.dup("ROPE", k, pos)
        cur = attention(g, q, k, v, inputs, p, s, p.n_kv)
        cur = g.mul_mat(g.weight(n_head * hd, s.n_embd, name="attn_output"), cur)
        if il == s.n_layer - 1:
            cur = g.get_rows(cur, out_ids)
            inp_sa = g.get_rows(inp_sa, out_ids)
        ffn_inp = g.dup("ADD", cur, inp_sa)
        cur = g.dup("MUL", g.dup("RMS_NORM", ffn_inp), g.weight(s.n_embd, name="ffn_norm"))
        cur = _moe(g, cur, s) if s.n_expert else ffn(g, cur, s)
        inp_l = g.dup("ADD", cur, ffn_inp)
    return output_head(g, s, inp_l)


def output_head(g: Graph, s: GraphShape, x) -> Graph:
    """The graph's end: output_norm (RMS, result_norm) and the lm_head on ``x``, both outputs."""
    g.layer = s.n_layer
    norm = g.dup("MUL", g.dup("RMS_NORM", x), g.weight(s.n_embd, name="output_norm"))
    logits = g.mul_mat(g.weight(s.n_embd, s.n_vocab, name="output"), norm)
    norm.flags |= OUTPUT
    logits.flags |= OUTPUT
    g.expand(logits)
    return g


def attn_inputs(g, p: Pass, s: GraphShape, n_kv: int):
    """One cache's inputs: build_input_k_idxs/v_idxs, build_attn_inp_kq_mask, build_input_k_rot/v_rot."""
    hd, hd_v, n_tokens = s.head_dim, s.head_dim_v or s.head_dim, p.n_tokens
    k_idxs = g.input("i64", n_tokens) if p.set_rows else None
    v_idxs = (g.input("i64", n_tokens if p.fa else n_tokens * hd_v * s.n_head_kv)) if p.set_rows else None
    mask = kq_mask(g, p, n_kv)
    k_rot = g.input("f32", rot_size(hd), rot_size(hd)) if p.kv_rot and p.type_k in QUANTISED and hd % 64 == 0 else None
    v_rot = g.input("f32", 64, 64) if p.kv_rot and p.type_v in QUANTISED and hd_v % 64 == 0 else None
    return k_idxs, v_idxs, mask, k_rot, v_rot


def kq_mask(g, p: Pass, n_kv: int):
    """build_attn_inp_kq_mask {n_kv, tokens per stream, 1, streams} as flash attention reads it: an f16 input with
    flash attention (PR #23764 on), an f32 one without; builds before PR #23764 (``p.mask_f32``) make it f32 and cast it
    to f16 for flash attention (ggml_cast: a CPY node, both in the compute buffer)."""
    mask = g.input("f16" if p.fa and not p.mask_f32 else "f32", n_kv, p.n_tokens // p.n_stream, 1, p.n_stream)
    return g.cast(mask, "f16") if p.fa and p.mask_f32 else mask


def attention(g, q, k, v, inputs, p: Pass, s: GraphShape, n_kv: int, iswa: bool = False, sinks=None):
    """build_attn (KV cache; the iSWA one expands Q, K, V in that order, the plain one Q, V, K from PR #16884) and
    build_attn_mha; the cache holds p.n_stream streams of n_kv cells (llama_kv_cache::cpy_k, cpy_v,
    get_k, get_v). ``sinks``: the attention sinks weight (gpt-oss), a source of the softmax
    (ggml_soft_max_add_sinks) or of the flash attention (ggml_flash_attn_ext_add_sinks)."""
    k_idxs, v_idxs, mask, k_rot, v_rot = inputs
    hd, hd_v, n_head_kv, ns, n_tokens = s.head_dim, s.head_dim_v or s.head_dim, s.n_head_kv, p.n_stream, p.n_tokens
    n_gqa, n_gqa_v = hd * n_head_kv, hd_v * n_head_kv
    if k_rot is not None:
        q, k = _hadamard(g, q, k_rot), _hadamard(g, k, k_rot)
    if v_rot is not None:
        v = _hadamard(g, v, v_rot)
    for t in (q, k, v) if iswa or p.qkv_order else (q, v, k):     # Q, K, V before PR #16884 (Pass.qkv_order)
        g.expand(t)
    k_cache = g.weight(n_gqa, n_kv, ns, type_=p.type_k, kv=True, name="cache_k")
    v_cache = g.weight(n_gqa_v, n_kv, ns, type_=p.type_v, kv=True, name="cache_v")
    k_dst = g.reshape(k_cache, n_gqa, n_kv * ns) if ns > 1 else k_cache
    g.expand(g.set_rows(k_dst, g.view(k, (n_gqa, n_tokens), (k.nb[0], k.nb[2])), k_idxs))
    if p.fa:
        v_dst = g.reshape(v_cache, n_gqa_v, n_kv * ns) if ns > 1 else v_cache
        g.expand(g.set_rows(v_dst, g.view(v, (n_gqa_v, n_tokens), (v.nb[0], v.nb[2])), v_idxs))
    else:       # cpy_v: a V that is a view of a fused QKV product (phi3) is copied to be contiguous
        v_2d = g.reshape(v, n_gqa_v, n_tokens) if v.nb[2] == v.nb[0] * n_gqa_v else g.cont(v, n_gqa_v, n_tokens)
        v_cur = g.reshape(v_2d, 1, n_gqa_v * n_tokens)
        g.expand(g.set_rows(g.reshape(v_cache, 1, v_cache.nelements()), v_cur, v_idxs))
    rk, rv = _row(p.type_k), _row(p.type_v)
    kv = g.view(k_cache, (hd, n_head_kv, n_kv, ns), (TYPES[p.type_k][1], rk(hd), rk(n_gqa), rk(n_gqa * n_kv)))
    if p.fa:
        vv = g.view(v_cache, (hd_v, n_head_kv, n_kv, ns),
                    (TYPES[p.type_v][1], rv(hd_v), rv(n_gqa_v), rv(n_gqa_v * n_kv)))
    else:
        vv = g.view(v_cache, (n_kv, n_head_kv, hd_v, ns),
                    (TYPES[p.type_v][1], rv(n_kv * hd_v), rv(n_kv), rv(n_kv * n_gqa_v)))
    per = q.ne[2] // ns
    qv = g.view(q, (q.ne[0], q.ne[1], per, ns), (q.nb[0], q.nb[1], q.nb[2], q.nb[2] * per))
    qp, kp, vp = g.permute(qv, 0, 2, 1, 3), g.permute(kv, 0, 2, 1, 3), g.permute(vv, 0, 2, 1, 3)
    if p.fa:
        if kp.type == "f32":
            kp = g.cast(kp, "f16")
        if vp.type == "f32":
            vp = g.cast(vp, "f16")
        cur = g.flash_attn_ext(qp, kp, vp, mask, sinks)
        cur = g.reshape(cur, cur.ne[0] * cur.ne[1], cur.ne[2] * cur.ne[3])
    else:
        kq = g.mul_mat(kp, qp)
        if s.arch == "gemma2":      # hparams.attn_soft_cap: scale, tanh, scale (flash attention: a parameter)
            kq = g.dup("SCALE", g.dup("UNARY", g.dup("SCALE", kq)))
        kq = g.dup("SOFT_MAX", kq, mask) if sinks is None else g.dup("SOFT_MAX", kq, mask, sinks)
        kqv = g.mul_mat(vp, kq)
        cur = g.permute(kqv, 0, 2, 1, 3)
        cur = g.cont(cur, cur.ne[0] * cur.ne[1], cur.ne[2] * cur.ne[3])
        cur.name = KQV_OUT      # -nkvo: pinned to the host (llama.cpp@0c1e57098 src/llama-graph.cpp#L2746-L2749)
    g.expand(cur)
    if v_rot is not None:
        cur = _hadamard(g, cur, v_rot)
    return cur


def linear(g, cur, width, bias, name=""):
    """build_qkv, separate Q/K/V: mul_mat, then ggml_add of the bias when there is one."""
    out = g.mul_mat(g.weight(cur.ne[0], width, name=name), cur)
    return g.dup("ADD", out, g.weight(width, name=f"{name}.bias")) if bias else out


def qkv_heads(g, s: GraphShape, p: Pass, cur, bias: bool) -> tuple:
    """build_qkv with separate Q/K/V: the three projections (``linear``), each reshaped to its heads."""
    hd, n_tokens = s.head_dim, p.n_tokens
    widths = ((s.n_head * hd, "attn_q"), (s.n_head_kv * hd, "attn_k"), (s.n_head_kv * hd, "attn_v"))
    q, k, v = (linear(g, cur, width, bias, name) for width, name in widths)
    return (g.reshape(q, hd, s.n_head, n_tokens), g.reshape(k, hd, s.n_head_kv, n_tokens),
            g.reshape(v, hd, s.n_head_kv, n_tokens))


def _row(type_):
    block, size = TYPES[type_]
    return lambda n: size * n // block


# ggml-org/llama.cpp PR #14158 "ggml : implement REGLU/GEGLU/SWIGLU ops", squash-merged as a0535ffa0 on 2025-06-29
# (build 5776): from it build_ffn's parallel gate (LLM_FFN_SILU / LLM_FFN_GELU, LLM_FFN_PAR) is one
# ggml_swiglu_split / ggml_geglu_split of gate and up, build_moe_ffn's the same over the experts (a0535ffa0
# src/llama-graph.cpp#L562-L584, #L744-L758), a GLU op with its own output; before it ggml_silu / ggml_gelu of the gate
# then ggml_mul by up (a0535ffa0~1 src/llama-graph.cpp#L562-L576 + #L619-L622, #L745-L762 "ffn_moe_gate_par"): a
# UNARY and a MUL, each run in place over its one-consumer source (a0535ffa0~1 ggml/src/ggml-alloc.c#L41-L67
# ggml_op_can_inplace), so no new tensor.
def glu(g, s, gate, up):
    """The gated activation of gate and up: ggml_swiglu_split / ggml_geglu_split (one GLU op: same shape as gate);
    at builds before PR #14158 (``s.glu_split``) ggml_silu / ggml_gelu of gate, then ggml_mul by up."""
    return g.dup("MUL", g.dup("UNARY", gate), up) if s.glu_split else g.dup("GLU", gate, up)


def glu_dated(shape, build):
    """``shape`` (any family's) at llama.cpp ``build`` (a date; None: the newest): glu_split before PR #14158."""
    return replace(shape, glu_split=True) if shape is not None and (build or CURRENT) < PR_14158 else shape


def swiglu_fused(g, s, up, n_ff: int):
    """build_ffn's LLM_FFN_SWIGLU of one fused product ``up`` (2 x n_ff wide: phi3, glm4): ggml_swiglu, half as
    wide; at builds before PR #14158 (``s.glu_split``) ggml_cont of each half (a view_2d), ggml_silu of the first,
    ggml_mul (a0535ffa0~1 src/llama-graph.cpp#L589-L602)."""
    if not s.glu_split:
        return g.op("GLU", up.type, (n_ff,) + up.ne[1:], up)
    x0, x1 = (g.cont(g.view(up, (n_ff, up.ne[1]), (up.nb[0], up.nb[1]))) for _ in range(2))
    return g.dup("MUL", g.dup("UNARY", x0), x1)


def ffn(g, cur, s):
    """build_ffn: SiLU with a parallel gate."""
    up = g.mul_mat(g.weight(s.n_embd, s.n_ff, name="ffn_up"), cur)
    gate = g.mul_mat(g.weight(s.n_embd, s.n_ff, name="ffn_gate"), cur)
    return g.mul_mat(g.weight(s.n_ff, s.n_embd, name="ffn_down"), glu(g, s, gate, up))


def _moe(g, cur, s):
    """build_moe_ffn: softmax gating, normalised top-k weights, no shared experts."""
    n_embd, n_tokens, n_exp, n_used = s.n_embd, cur.ne[1], s.n_expert, s.n_expert_used
    logits = g.mul_mat(g.weight(n_embd, n_exp, name="ffn_gate_inp"), cur)
    probs = g.dup("SOFT_MAX", logits)
    selected = g.argsort_top_k(probs, n_used)
    weights = g.get_rows(g.reshape(probs, 1, n_exp, n_tokens), selected)
    weights = g.reshape(weights, n_used, n_tokens)
    wsum = g.dup("CLAMP", g.sum_rows(weights))
    weights = g.reshape(g.dup("DIV", weights, wsum), 1, n_used, n_tokens)
    g.expand(weights)
    cur = g.reshape(cur, n_embd, 1, n_tokens)
    up = g.mul_mat_id(g.weight(n_embd, s.n_ff_exp, n_exp, name="ffn_up_exps"), cur, selected)
    gate = g.mul_mat_id(g.weight(n_embd, s.n_ff_exp, n_exp, name="ffn_gate_exps"), cur, selected)
    experts = g.mul_mat_id(g.weight(s.n_ff_exp, n_embd, n_exp, name="ffn_down_exps"), glu(g, s, gate, up), selected)
    experts = g.dup("MUL", experts, weights)
    g.expand(experts)
    return experts_sum(g, experts, n_embd, n_tokens, n_used)


def experts_sum(g, experts, width: int, n_tokens: int, n_used: int):
    """build_moe_ffn's sum of the used experts' views (llama.cpp@0c1e57098 src/llama-graph.cpp#L2349-L2368)."""
    views = [g.view(experts, (width, n_tokens), (experts.nb[0], experts.nb[2])) for _ in range(n_used)]
    for view in views:
        g.expand(view)
    out = views[0]
    for view in views[1:]:
        out = g.dup("ADD", out, view)
        g.expand(out)
    return g.cont(out) if n_used == 1 else out

"""llama.cpp's kimi-linear forward graph (Kimi-Linear-48B-A3B: KDA linear attention with short convolutions, MLA, MoE
with shared experts), node by node (kvmem.engines.llamacpp.tensors_kimi has kimi-linear's and kimi-k3's tensors).

Transcribed from the vendored llama.cpp (llama-cpp-python 0.3.36, llama.cpp 0c1e57098):

    shape       the widths tensors_kimi reads from the config, as the converter writes them (its module doc).
    graph       kimi-linear.cpp llama_model_kimi_linear::graph::graph (L234-L562): build_inp_embd, no positions,
                build_inp_mem_hybrid_k (src/llama-graph.cpp#L3644-L3653: the recurrent s_copy [n_rs] and its views,
                then build_attn_inp_k's K indices and mask), build_inp_out_ids; per layer attn_norm (expanded);
                a KDA layer: build_rs of the conv states, then Q, K, V each by causal_conv1d (L175-L232: the
                projection, the state view concatenated with the transposed input, its last d_conv - 1 columns
                copied back, ggml_ssm_conv, silu), f_b(f_a(x)) + dt_bias, softplus, x ssm_a, beta's sigmoid,
                build_rs of the ssm state, Q and K L2-normed (build_gdn_l2_norm: RMS norm, scale), the fused
                ggml_gated_delta_net (models/delta-net-base.cpp#L373-L447; the gate per channel), its output made
                contiguous, the new state copied back, g_b(g_a(x)), the output's RMS norm x ssm_norm x sigmoid(gate),
                made contiguous, attn_output; an MLA layer: attn_q, attn_kv_a_mqa split into the latent and k_pe
                (no RoPE), the latent's norm, graphs_mla_attn.absorbed_attention (K-only cache, attn_v_b); then as
                deepseek2 (graphs_mla_oss.deepseek_ffn: the last layer's rows, ffn_norm, the dense FFN or sigmoid
                routing with exp_probs_b, weights normalised and scaled, plus the shared experts), output_norm, the
                lm_head. The prompt graph is reserved a second time with one sequence (src/llama-context.cpp#L711-
                L726, TAG_RESERVE_DIAG_DECAY): kimi_graph_bytes takes the largest of the three.
kimi-k3's graph (cross-layer residual attention, latent MoE, situ activation): graphs_kimi_k3, on these KDA pieces.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from .arch_fields import field
from .ggml_graph import TYPES, Graph, Tensor
from .graphs import Pass, embeddings, kq_mask, output_head, token_inputs
from .graphs_delta import DeltaShape
from .graphs_mla_attn import absorbed_attention
from .graphs_mla_oss import deepseek_ffn, rms_norm
from .tensors_kimi import KIMI, dense_ff, kda_layers, kimi_arch, linear_config, need

__all__ = ["KimiShape", "build_kimi", "build_rs", "causal_conv", "cpy", "kimi_shape", "one_seq_prompt"]

F32 = TYPES["f32"][1]


@dataclass(frozen=True)
class KimiShape(DeltaShape):
    """DeltaShape's widths for kimi-linear: recurrent the KDA layers, d_state the KDA head width, n_v_heads = n_head,
    d_inner = n_head x d_state; GraphShape's MLA and MoE widths; ``ubatch_seqs``: the reserve's ubatch sequences
    where it is not the memory's (the second prompt reserve: 1)."""

    ubatch_seqs: int = 0


def kimi_shape(model) -> KimiShape | None:
    """The graph widths of a kimi-linear ``model`` as the converter writes its GGUF, or None where the graph above is
    not the one llama.cpp builds (kimi-k3; no shared experts; a gating other than sigmoid / softmax) or a field is
    missing (kimi_tensors refuses those by name)."""
    if KIMI.get(model.model_type) is None or kimi_arch(model) != "kimi-linear" or not model.facts.vocab_size:
        return None
    moe = model.facts.moe
    try:
        recurrent, cfg = kda_layers(model), linear_config(model)
        kv_lora, rope = need(model, "kv_lora_rank"), need(model, "qk_rope_head_dim")
        nope, vd = need(model, "qk_nope_head_dim"), need(model, "v_head_dim")
        n_dense, n_shared = need(model, "first_k_dense_replace", zero=True), need(model, "num_shared_experts")
        f, dense_f = need(model, "moe_intermediate_size"), dense_ff(model)
    except ValueError:
        return None
    gating = field(model, "moe_router_activation_func")
    if moe is None or not moe.experts or field(model, "q_lora_rank") or gating not in ("sigmoid", "softmax"):
        return None
    scale = float(field(model, "routed_scaling_factor", 0.0) or 0.0)
    n_head, kda = model.num_attention_heads, cfg["head_dim"]
    return KimiShape(arch="kimi-linear", n_layer=model.num_layers, n_embd=model.hidden_size, n_head=n_head,
                     n_head_kv=1, head_dim=nope + rope, n_ff=dense_f, n_vocab=model.facts.vocab_size,
                     n_expert=moe.experts, n_expert_used=moe.top_k, n_ff_exp=f, kv_lora=kv_lora, rope_dim=rope,
                     v_head_dim=vd, n_dense_lead=n_dense, n_ff_shexp=f * n_shared, gating=gating, probs_bias=True,
                     norm_w=True, scale_w=scale not in (0.0, 1.0), recurrent=recurrent,
                     d_conv=cfg["short_conv_kernel_size"], d_state=kda, n_k_heads=n_head, n_v_heads=n_head,
                     d_inner=n_head * kda)


def cpy(a: Tensor, dst: Tensor) -> Tensor:
    """ggml_cpy: a view of ``dst`` (op CPY)."""
    return Tensor(dst.type, dst.ne, "CPY", (a, dst), view_src=dst, nb=dst.nb)


def build_rs(g: Graph, s: Tensor, size: int, s_copy: tuple, n_seqs: int, n_rs: int) -> Tensor:
    """llm_graph_context::build_rs (src/llama-graph.cpp#L3512-L3546) over the whole memory (init_full: head 0, rs_z
    0): one state zeroed in place, the rows of s_copy_main, the other n_rs - n_seqs rows copied back."""
    main, extra = s_copy
    states = g.reshape(s, size, s.ne[1])
    zero = g.view(states, (size,), (F32,))
    g.expand(Tensor(zero.type, zero.ne, "SCALE", (zero,), view_src=zero, nb=zero.nb))   # ggml_scale_inplace
    out = g.get_rows(states, main)
    g.expand(out)
    rest = g.get_rows(states, extra)
    g.expand(cpy(rest, g.view(s, (size, n_rs - n_seqs), (F32, s.nb[1]))))
    return out


def causal_conv(g: Graph, s: KimiShape, x, name: str, conv_all, conv_state, qkv: int, n_seqs: int, keep: int = 1):
    """causal_conv1d (kimi-linear.cpp#L175-L232) for Q (0), K (1) or V (2); ``keep``: kimi-k3's rollback groups, the
    last d_conv - 1 columns copied back once per group (kimi-k3.cpp#L358-L397)."""
    d_inner, dc, n_tokens = s.d_inner, s.d_conv - 1, x.ne[1]
    nst = n_tokens // n_seqs
    n_r = 3 * dc * d_inner
    state = g.view(conv_state, (dc, d_inner, n_seqs), (F32, F32 * dc, F32 * n_r))
    x = g.reshape(g.mul_mat(g.weight(s.n_embd, d_inner, name=name), x), d_inner, nst, n_seqs)
    conv_x = g.concat(state, g.transpose(x), 0)
    for _ in range(keep):
        last = g.view(conv_x, (dc, d_inner, n_seqs), conv_x.nb[:3])
        g.expand(cpy(last, g.view(conv_all, (dc, d_inner, n_seqs), (F32, F32 * dc, F32 * n_r))))
    w = g.reshape(g.weight(s.d_conv, 1, d_inner, 1, name=f"ssm_conv1d_{'qkv'[qkv]}"), s.d_conv, d_inner)
    out = g.op("SSM_CONV", "f32", (d_inner, nst, n_seqs), conv_x, w)
    out = g.dup("UNARY", g.reshape(out, d_inner, n_tokens))       # ggml_silu
    return g.reshape(out, s.d_state, s.n_head, nst, n_seqs)


def _kda(g: Graph, s: KimiShape, cur, s_copy: tuple, n_seqs: int, n_rs: int):
    """A KDA layer (kimi-linear.cpp#L288-L385)."""
    e, hd, n_head, d_inner, n_tokens = s.n_embd, s.d_state, s.n_head, s.d_inner, cur.ne[1]
    nst = n_tokens // n_seqs
    n_r, n_s = 3 * (s.d_conv - 1) * d_inner, hd * hd * n_head
    conv_all = g.weight(n_r, n_rs, kv=True, name="cache_r")
    ssm_all = g.weight(n_s, n_rs, kv=True, name="cache_s")
    conv_state = build_rs(g, conv_all, n_r, s_copy, n_seqs, n_rs)
    q, k, v = (causal_conv(g, s, cur, "attn_" + x, conv_all, conv_state, i, n_seqs) for i, x in enumerate("qkv"))
    g1 = g.mul_mat(g.weight(hd, d_inner, name="ssm_f_b"), g.mul_mat(g.weight(e, hd, name="ssm_f_a"), cur))
    g1 = g.dup("UNARY", g.dup("ADD", g1, g.weight(d_inner, name="ssm_dt.bias")))      # softplus
    g1 = g.dup("MUL", g.reshape(g1, hd, n_head, n_tokens), g.reshape(g.weight(1, n_head, 1, 1, name="ssm_a"), 1,
                                                                     n_head, 1))
    g1 = g.reshape(g1, hd, n_head, nst, n_seqs)
    beta = g.mul_mat(g.weight(e, n_head, name="ssm_beta"), cur)
    beta = g.dup("UNARY", g.reshape(beta, 1, n_head, nst, n_seqs))                   # sigmoid
    cur = g.reshape(cur, e, nst, n_seqs)
    state = g.reshape(build_rs(g, ssm_all, n_s, s_copy, n_seqs, n_rs), hd, hd, n_head, n_seqs)
    q = g.dup("SCALE", g.dup("RMS_NORM", q))
    k = g.dup("SCALE", g.dup("RMS_NORM", k))
    # build_delta_net_fused (delta-net-base.cpp#L373-L423, K = 1): the output rows, then the state
    out = g.op("GATED_DELTA_NET", "f32", (hd * n_head, n_tokens + hd * n_seqs), q, k, v, g1, beta, state)
    o = g.cont(g.view(out, (hd, n_head, nst, n_seqs), (F32, F32 * hd, F32 * hd * n_head, F32 * hd * n_head * nst)))
    new_state = g.view(out, (hd, hd, n_head, n_seqs), (F32, F32 * hd, F32 * hd * hd, F32 * n_s))
    g.expand(cpy(new_state, g.view(ssm_all, (n_s * n_seqs,), (F32,))))
    cur2 = g.reshape(cur, e, n_tokens)
    g2 = g.mul_mat(g.weight(hd, d_inner, name="ssm_g_b"), g.mul_mat(g.weight(e, hd, name="ssm_g_a"), cur2))
    g2 = g.reshape(g2, hd, n_head, n_tokens)
    normed = rms_norm(g, g.reshape(o, hd, n_head, n_tokens), hd, "ssm_norm")
    gated = g.cont(g.dup("MUL", normed, g.dup("UNARY", g2)), d_inner, n_tokens)
    return g.mul_mat(g.weight(d_inner, e, name="attn_output"), gated)


def _mla(g: Graph, s: KimiShape, p: Pass, cur, k_idxs, mask):
    """An MLA layer (kimi-linear.cpp#L386-L452): no RoPE, the K-only cache (graphs_mla_attn.absorbed_attention)."""
    e, n_head, hk, rope, kv_lora, n_tokens = s.n_embd, s.n_head, s.head_dim, s.rope_dim, s.kv_lora, p.n_tokens
    n_k = kv_lora + rope
    q = g.reshape(g.mul_mat(g.weight(e, n_head * hk, name="attn_q"), cur), hk, n_head, n_tokens)
    kv_pe = g.mul_mat(g.weight(e, n_k, name="attn_kv_a_mqa"), cur)
    kv_cmpr = g.view(kv_pe, (kv_lora, n_tokens), (F32, F32 * n_k))
    k_pe = g.view(kv_pe, (rope, 1, n_tokens), (F32, F32 * n_k, F32 * n_k))
    kv_cmpr = rms_norm(g, kv_cmpr, kv_lora, "attn_kv_a_norm")
    q_pe = g.view(q, (rope, n_head, n_tokens), q.nb[:3])
    cur = absorbed_attention(g, s, p, q, kv_cmpr, k_pe, None, k_idxs, mask, q_pe)
    return g.mul_mat(g.weight(n_head * s.v_head_dim, e, name="attn_output"), cur)


def build_kimi(s: KimiShape, p: Pass) -> Graph:
    """llama_model_kimi_linear::graph::graph for one reserve ``p`` (module docstring); the recurrent memory holds
    s.n_seqs rows (else p.n_stream), the ubatch s.ubatch_seqs sequences (else as many)."""
    n_rs = s.n_seqs or p.n_stream
    n_seqs = s.ubatch_seqs or n_rs
    g = Graph()
    tokens, embd, _ = token_inputs(g, s, p)         # no positions: build_inp_pos is not called
    s_copy = g.input("i32", n_rs)
    s_copy_views = (g.view(s_copy, (n_seqs,), (4,)), g.view(s_copy, (n_rs - n_seqs,), (4,)))
    k_idxs = g.input("i64", p.n_tokens)
    mask = kq_mask(g, p, p.n_kv)
    out_ids = g.input("i32", p.n_outputs)
    inp_l = embeddings(g, s, tokens, embd)
    for il in range(s.n_layer):
        g.layer = il
        inp_sa = inp_l
        cur = rms_norm(g, inp_l, s.n_embd, "attn_norm")
        g.expand(cur)
        if s.recurrent[il]:
            cur = _kda(g, s, cur, s_copy_views, n_seqs, n_rs)
        else:
            cur = _mla(g, s, p, cur, k_idxs, mask)
        inp_l = deepseek_ffn(g, s, il, cur, inp_sa, out_ids)
    return output_head(g, s, inp_l)


def one_seq_prompt(shape, p: Pass) -> Graph | None:
    """kimi-linear's third reserve (src/llama-context.cpp#L711-L726: graph_reserve(n_tokens, 1, n_outputs_pp) for
    LLM_ARCH_KIMI_LINEAR): the prompt's ``p.n_tokens`` unrounded, one sequence, one KV stream, the recurrent memory
    still shape.n_seqs rows; None for any other shape or one sequence (the first prompt reserve's graph)."""
    if not isinstance(shape, KimiShape) or shape.arch != "kimi-linear" or shape.n_seqs <= 1:
        return None
    return build_kimi(replace(shape, ubatch_seqs=1), p)

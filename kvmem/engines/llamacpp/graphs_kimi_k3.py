"""llama.cpp's kimi-k3 forward graph (Kimi-K3's text model: kimi-linear's KDA + MLA layers with cross-layer residual
attention, a latent MoE, the situ activation, an MLA output gate and a full-rank KDA gate), node by node
(kvmem.engines.llamacpp.tensors_kimi has its tensors; graphs_kimi the kimi-linear parts it shares).

Transcribed from the vendored llama.cpp (llama-cpp-python 0.3.36, llama.cpp 0c1e57098), src/models/kimi-k3.cpp:

    graph       llama_model_kimi_k3::graph::graph (L236-L351): kimi-linear's inputs (no positions); per layer the
                residual stream mixed with the banked checkpoints (res_mix, L198-L234: the stack RMS-normed x the
                score weight, summed per row, the current stream likewise, concatenated, softmax, the two parts made
                contiguous, ggml_dsv4_hc_pre of the stack, + the stream x its part), every attn_res_block_size-th layer
                the raw input banked (res_push, L192-L196: concatenated on dim 1); attn_norm (expanded); the KDA or
                MLA layer; the stream restarted from the attention output on a banking layer, else added; res_mix
                with ffn_res_score, ffn_norm; the dense situ FFN or the latent MoE; added; after the last layer
                res_mix with output_res_score, then the output rows, output_norm, the lm_head.
    KDA         build_kda_layer (L399-L479): graphs_kimi's conv (the conv state copied back once per rollback group,
                n_rs_seq + 1), f_b(f_a(x)) + dt_bias reshaped, x ssm_a, with kda.gate_lower_bound: scale -1, sigmoid,
                scale by the bound (else softplus first), beta, the state, L2 norms, build_recurrent_attn
                (models/delta-net-base.cpp#L527-L605: the fused gated delta net with n_rs_seq + 1 state slots, the
                written ones copied back), made contiguous, ssm_g's product, the output's norm x its sigmoid,
                contiguous, attn_output.
    MLA         build_mla_layer (L485-L563): Q from attn_q or attn_q_a, its norm, attn_q_b; kimi-linear's absorbed
                MLA over the K-only cache without attn_output, then x sigmoid(attn_gate . x), attn_output.
    MoE         build_latent_moe (L570-L618): ffn_routed_down, the router's logits from the full-width input, then
                build_moe_ffn on the latent input with those logits (src/llama-graph.cpp#L2007-L2374, situ at
                #L2266-L2279), ffn_routed_norm, ffn_routed_up, plus the shared experts' situ FFN.
"""

from __future__ import annotations

from dataclasses import dataclass

from .arch_fields import field
from .ggml_graph import TYPES, Graph
from .graphs import Pass, embeddings, experts_sum, kq_mask, output_head, token_inputs
from .graphs_kimi import KimiShape, build_rs, causal_conv, cpy, kimi_shape
from .graphs_mla_attn import absorbed_attention
from .graphs_mla_oss import rms_norm, routed_weights
from .tensors_kimi import kda_layers, kimi_arch, linear_config, need

__all__ = ["KimiK3Shape", "build_kimi_k3", "kimi_k3_shape", "kimi_shapes"]

F32 = TYPES["f32"][1]


@dataclass(frozen=True)
class KimiK3Shape(KimiShape):
    """KimiShape's widths and kimi-k3's own: the latent width (0: none), the banking period, whether the KDA gate has
    a lower bound, the MLA output gate and the routed norm."""

    latent: int = 0
    res_bs: int = 0
    gate_lb: bool = False
    mla_gate: bool = False
    routed_norm: bool = False


def kimi_k3_shape(model) -> KimiK3Shape | None:
    """The graph widths of a Kimi-K3 ``model``, or None where a field is missing (tensors_kimi refuses it by name)."""
    if kimi_arch(model) != "kimi-k3" or not model.facts.vocab_size or model.facts.moe is None:
        return None
    try:
        recurrent, cfg = kda_layers(model), linear_config(model)
        kv_lora, rope = need(model, "kv_lora_rank"), need(model, "qk_rope_head_dim")
        nope, vd, f = need(model, "qk_nope_head_dim"), need(model, "v_head_dim"), need(model, "moe_intermediate_size")
        n_dense = need(model, "first_k_dense_replace", zero=True)
        n_shared = need(model, "num_shared_experts", zero=True)
        res_bs = need(model, "attn_res_block_size", zero=True)
    except ValueError:
        return None
    moe, n_head, kda = model.facts.moe, model.num_attention_heads, cfg["head_dim"]
    scale = float(field(model, "routed_scaling_factor", 0.0) or 0.0)
    return KimiK3Shape(arch="kimi-k3", n_layer=model.num_layers, n_embd=model.hidden_size, n_head=n_head, n_head_kv=1,
                       head_dim=nope + rope, n_ff=need(model, "intermediate_size"), n_vocab=model.facts.vocab_size,
                       n_expert=moe.experts, n_expert_used=moe.top_k, n_ff_exp=f,
                       q_lora=field(model, "q_lora_rank") or 0,
                       kv_lora=kv_lora, rope_dim=rope, v_head_dim=vd, n_dense_lead=n_dense, n_ff_shexp=f * n_shared,
                       gating="sigmoid", probs_bias=True, norm_w=bool(field(model, "moe_renormalize", False)),
                       scale_w=scale not in (0.0, 1.0), recurrent=recurrent, d_conv=cfg["short_conv_kernel_size"],
                       d_state=kda, n_k_heads=n_head, n_v_heads=n_head, d_inner=n_head * kda,
                       latent=field(model, "routed_expert_hidden_size") or 0, res_bs=res_bs,
                       gate_lb=cfg.get("gate_lower_bound") is not None,
                       mla_gate=bool(field(model, "mla_use_output_gate", False)),
                       routed_norm=bool(field(model, "latent_moe_use_norm", False)))


def kimi_shapes(model) -> KimiShape | None:
    """graphs_kimi.kimi_shape for a kimi-linear config, kimi_k3_shape for a KimiK3 one (both kvmem's kimi_linear)."""
    return kimi_k3_shape(model) if kimi_arch(model) == "kimi-k3" else kimi_shape(model)


def _situ(g: Graph, gate, up):
    """kimi_k3_situ (L175-L184), situ_linear_beta > 0 (K3's 25.0): beta x tanh(gate / beta) x sigmoid(gate) x
    lb x tanh(up / lb)."""
    a = g.dup("SCALE", g.dup("UNARY", g.dup("SCALE", gate)))
    a = g.dup("MUL", a, g.dup("UNARY", gate))
    up = g.dup("SCALE", g.dup("UNARY", g.dup("SCALE", up)))
    return g.dup("MUL", a, up)


def _res_mix(g: Graph, stack, cur, name: str):
    if stack is None:
        return cur
    e, n_ckpt, n_tokens = stack.ne[0], stack.ne[1], stack.ne[2]
    w = g.weight(e, name=name)
    src = g.reshape(g.sum_rows(g.dup("MUL", g.dup("RMS_NORM", stack), w)), n_ckpt, n_tokens)
    own = g.sum_rows(g.dup("MUL", g.dup("RMS_NORM", cur), w))
    probs = g.dup("SOFT_MAX", g.concat(src, own, 0))
    p_src = g.cont(g.view(probs, (n_ckpt, n_tokens), (F32, probs.nb[1])))
    p_cur = g.cont(g.view(probs, (1, n_tokens), (F32, probs.nb[1])))
    out = g.op("DSV4_HC_PRE", "f32", (e, n_tokens), stack, p_src)
    return g.dup("ADD", out, g.dup("MUL", cur, p_cur))


def _kda(g: Graph, s: KimiK3Shape, cur, s_copy: tuple, n_seqs: int, n_rs: int):
    e, hd, n_head, d_inner, n_tokens = s.n_embd, s.d_state, s.n_head, s.d_inner, cur.ne[1]
    nst, keep = n_tokens // n_seqs, s.n_rs_seq + 1
    n_r, n_s = 3 * (s.d_conv - 1) * d_inner, hd * hd * n_head
    conv_all = g.weight(n_r, n_rs * keep, kv=True, name="cache_r")
    ssm_all = g.weight(n_s, n_rs * keep, kv=True, name="cache_s")
    conv_state = build_rs(g, conv_all, n_r, s_copy, n_seqs, n_rs)
    q, k, v = (causal_conv(g, s, cur, "attn_" + x, conv_all, conv_state, i, n_seqs, keep) for i, x in enumerate("qkv"))
    g1 = g.mul_mat(g.weight(hd, d_inner, name="ssm_f_b"), g.mul_mat(g.weight(e, hd, name="ssm_f_a"), cur))
    g1 = g.dup("ADD", g1, g.weight(d_inner, name="ssm_dt.bias"))
    a = g.reshape(g.weight(n_head, name="ssm_a"), 1, n_head, 1)
    if s.gate_lb:
        g1 = g.dup("MUL", g.reshape(g1, hd, n_head, n_tokens), a)
        g1 = g.dup("SCALE", g.dup("UNARY", g.dup("SCALE", g1)))
    else:
        g1 = g.dup("MUL", g.reshape(g.dup("UNARY", g1), hd, n_head, n_tokens), a)
    g1 = g.reshape(g1, hd, n_head, nst, n_seqs)
    beta = g.mul_mat(g.weight(e, n_head, name="ssm_beta"), cur)
    beta = g.dup("UNARY", g.reshape(beta, 1, n_head, nst, n_seqs))
    cur3 = g.reshape(cur, e, nst, n_seqs)
    state = g.reshape(build_rs(g, ssm_all, n_s, s_copy, n_seqs, n_rs), hd, hd, n_head, n_seqs)
    q = g.dup("SCALE", g.dup("RMS_NORM", q))
    k = g.dup("SCALE", g.dup("RMS_NORM", k))
    out = g.op("GATED_DELTA_NET", "f32", (hd * n_head, n_tokens + keep * hd * n_seqs), q, k, v, g1, beta, state)
    o = g.view(out, (hd, n_head, nst, n_seqs), (F32, F32 * hd, F32 * hd * n_head, F32 * hd * n_head * nst))
    written = min(nst, keep) if s.n_rs_seq else 1
    new_state = g.view(out, (n_s, n_seqs, written), (F32, F32 * n_s, F32 * hd * n_head * n_tokens))
    g.expand(cpy(new_state, g.view(ssm_all, (n_s, n_seqs, written), (F32, ssm_all.nb[1], ssm_all.nb[1] * n_rs))))
    o = g.cont(o)
    g2 = g.reshape(g.mul_mat(g.weight(e, d_inner, name="ssm_g"), g.reshape(cur3, e, n_tokens)), hd, n_head, n_tokens)
    normed = rms_norm(g, g.reshape(o, hd, n_head, n_tokens), hd, "ssm_norm")
    gated = g.cont(g.dup("MUL", normed, g.dup("UNARY", g2)), d_inner, n_tokens)
    return g.mul_mat(g.weight(d_inner, e, name="attn_output"), gated)


def _mla(g: Graph, s: KimiK3Shape, p: Pass, cur, k_idxs, mask):
    e, n_head, hk, rope, kv_lora, n_tokens = s.n_embd, s.n_head, s.head_dim, s.rope_dim, s.kv_lora, p.n_tokens
    n_k = kv_lora + rope
    if s.q_lora:
        q = rms_norm(g, g.mul_mat(g.weight(e, s.q_lora, name="attn_q_a"), cur), s.q_lora, "attn_q_a_norm")
        q = g.mul_mat(g.weight(s.q_lora, n_head * hk, name="attn_q_b"), q)
    else:
        q = g.mul_mat(g.weight(e, n_head * hk, name="attn_q"), cur)
    q = g.reshape(q, hk, n_head, n_tokens)
    kv_pe = g.mul_mat(g.weight(e, n_k, name="attn_kv_a_mqa"), cur)
    kv_cmpr = g.view(kv_pe, (kv_lora, n_tokens), (F32, F32 * n_k))
    k_pe = g.view(kv_pe, (rope, 1, n_tokens), (F32, F32 * n_k, F32 * n_k))
    kv_cmpr = rms_norm(g, kv_cmpr, kv_lora, "attn_kv_a_norm")
    out = absorbed_attention(g, s, p, q, kv_cmpr, k_pe, None, k_idxs, mask, g.view(q, (rope, n_head, n_tokens),
                                                                                        q.nb[:3]))
    if s.mla_gate:
        out = g.dup("MUL", out, g.dup("UNARY", g.mul_mat(g.weight(e, n_head * s.v_head_dim, name="attn_gate"), cur)))
    return g.mul_mat(g.weight(n_head * s.v_head_dim, e, name="attn_output"), out)


def _moe(g: Graph, s: KimiK3Shape, cur):
    e, n_tokens, n_exp, n_used, f = s.n_embd, cur.ne[1], s.n_expert, s.n_expert_used, s.n_ff_exp
    lh = s.latent or e
    routed = g.mul_mat(g.weight(e, lh, name="ffn_routed_down"), cur) if s.latent else cur
    logits = g.mul_mat(g.weight(e, n_exp, name="ffn_gate_inp"), cur)
    probs = g.dup("UNARY", logits)
    selected = g.argsort_top_k(g.dup("ADD", probs, g.weight(n_exp, name="exp_probs_b.bias")), n_used)
    weights = g.get_rows(g.reshape(probs, 1, n_exp, n_tokens), selected)
    weights = routed_weights(g, s, weights, n_used, n_tokens)
    x = g.reshape(routed, lh, 1, n_tokens)
    up = g.mul_mat_id(g.weight(lh, f, n_exp, name="ffn_up_exps"), x, selected)
    gate = g.mul_mat_id(g.weight(lh, f, n_exp, name="ffn_gate_exps"), x, selected)
    down = g.mul_mat_id(g.weight(f, lh, n_exp, name="ffn_down_exps"), _situ(g, gate, up), selected)
    down = g.dup("MUL", down, weights)
    g.expand(down)
    out = experts_sum(g, down, lh, n_tokens, n_used)
    if s.routed_norm:
        out = rms_norm(g, out, lh, "ffn_routed_norm")
    if s.latent:
        out = g.mul_mat(g.weight(lh, e, name="ffn_routed_up"), out)
    if s.n_ff_shexp:
        sh = _situ(g, g.mul_mat(g.weight(e, s.n_ff_shexp, name="ffn_gate_shexp"), cur),
                   g.mul_mat(g.weight(e, s.n_ff_shexp, name="ffn_up_shexp"), cur))
        out = g.dup("ADD", out, g.mul_mat(g.weight(s.n_ff_shexp, e, name="ffn_down_shexp"), sh))
    return out


def build_kimi_k3(s: KimiK3Shape, p: Pass) -> Graph:
    """llama_model_kimi_k3::graph::graph for one reserve ``p`` (module docstring)."""
    n_rs = s.n_seqs or p.n_stream
    n_seqs = s.ubatch_seqs or n_rs
    g = Graph()
    e, n_tokens = s.n_embd, p.n_tokens
    tokens, embd, _ = token_inputs(g, s, p)
    s_copy = g.input("i32", n_rs)
    s_copy_views = (g.view(s_copy, (n_seqs,), (4,)), g.view(s_copy, (n_rs - n_seqs,), (4,)))
    k_idxs = g.input("i64", n_tokens)
    mask = kq_mask(g, p, p.n_kv)
    out_ids = g.input("i32", p.n_outputs)
    inp_l = embeddings(g, s, tokens, embd)
    stack = None
    for il in range(s.n_layer):
        g.layer = il
        prefix = inp_l
        cur = _res_mix(g, stack, prefix, "attn_res_score") if s.res_bs else prefix
        banked = bool(s.res_bs) and il % s.res_bs == 0
        if banked:
            ckpt = g.reshape(prefix, e, 1, n_tokens)
            stack = g.concat(stack, ckpt, 1) if stack is not None else ckpt
        cur = rms_norm(g, cur, e, "attn_norm")
        g.expand(cur)
        cur = _kda(g, s, cur, s_copy_views, n_seqs, n_rs) if s.recurrent[il] else _mla(g, s, p, cur, k_idxs, mask)
        prefix = cur if banked else g.dup("ADD", prefix, cur)
        cur = rms_norm(g, _res_mix(g, stack, prefix, "ffn_res_score") if s.res_bs else prefix, e, "ffn_norm")
        if il < s.n_dense_lead:
            cur = _situ(g, g.mul_mat(g.weight(e, s.n_ff, name="ffn_gate"), cur),
                        g.mul_mat(g.weight(e, s.n_ff, name="ffn_up"), cur))
            cur = g.mul_mat(g.weight(s.n_ff, e, name="ffn_down"), cur)
        else:
            cur = _moe(g, s, cur)
        inp_l = g.dup("ADD", prefix, cur)
    g.layer = s.n_layer
    cur = _res_mix(g, stack, inp_l, "output_res_score") if s.res_bs else inp_l
    return output_head(g, s, g.get_rows(cur, out_ids))

"""llama.cpp's minimax-m2 forward graph (MiniMax-M2, M2.1, M2.5), node by node.

Transcribed from the vendored llama.cpp (llama-cpp-python 0.3.36, llama.cpp 0c1e57098),
src/models/minimax-m2.cpp llama_model_minimax_m2::graph::graph (L46-L168):

    build_inp_embd, build_inp_pos, build_attn_inp_kv (one plain KV cache), build_inp_out_ids; per layer
    attn_norm (RMS), build_qkv's separate Q/K/V without reshaping them (src/llama-graph.cpp#L1647-L1760, reshape
    false: three 2-D products, no bias), Q then K RMS-normed across all their heads (attn_q_norm n_head x head wide,
    attn_k_norm n_head_kv x head: load_arch_tensors L33-L34), then Q, K, V reshaped to their heads (views) and Q, K
    roped (rope.dimension_count 64 of a 128 head: ggml_rope_ext keeps the shape, one ROPE node each), build_attn
    (graphs.attention), attn_output without bias; the last layer's rows picked by out_ids; the residual, ffn_norm
    (RMS), build_moe_ffn (graphs_mla_oss.moe_ffn: expert_gating_func as conversion/base.py writes it from
    scoring_func, always exp_probs_b, expert_weights_norm true, no expert_weights_scale: load_arch_hparams reads
    none, so 0 and no SCALE), no shared expert; the residual. Then output_norm (result_norm) and the lm_head.
    conversion/minimax.py writes no MTP block (use_mtp's modules are not converted).
"""

from __future__ import annotations

from .arch_fields import field, uniform_full
from .ggml_graph import Graph
from .graphs import GraphShape, Pass, attention, attn_inputs, embeddings, linear, output_head, token_inputs
from .graphs_mla_oss import moe_ffn, rms_norm

__all__ = ["MINIMAX_M2", "build_minimax_m2", "minimax_m2_shape"]

# kvmem model_type -> the llama.cpp architecture whose graph this module transcribes (arch_tensors.ARCHS)
MINIMAX_M2 = {"minimax_m2": "minimax-m2"}
# conversion/base.py#L1530-L1536: the scoring function's name -> expert_gating_func (graphs.GraphShape.gating)
_GATING = {"sigmoid": "sigmoid", "softmax": "softmax"}


def build_minimax_m2(s: GraphShape, p: Pass) -> Graph:
    """llama_model_minimax_m2::graph::graph for one reserve ``p`` (module docstring)."""
    g = Graph()
    e, hd, n_head, n_kv_head, n_tokens = s.n_embd, s.head_dim, s.n_head, s.n_head_kv, p.n_tokens
    tokens, embd, pos = token_inputs(g, s, p)
    inputs = attn_inputs(g, p, s, p.n_kv)
    out_ids = g.input("i32", p.n_outputs)
    inp_l = embeddings(g, s, tokens, embd)
    for il in range(s.n_layer):
        g.layer = il
        inp_sa = inp_l
        cur = rms_norm(g, inp_l, e, "attn_norm")
        q = linear(g, cur, n_head * hd, False, "attn_q")
        k = linear(g, cur, n_kv_head * hd, False, "attn_k")
        v = linear(g, cur, n_kv_head * hd, False, "attn_v")
        q = rms_norm(g, q, n_head * hd, "attn_q_norm")         # minimax-m2.cpp L92-L98: over every head at once
        k = rms_norm(g, k, n_kv_head * hd, "attn_k_norm")
        q, k, v = (g.reshape(x, hd, heads, n_tokens) for x, heads in ((q, n_head), (k, n_kv_head), (v, n_kv_head)))
        q = g.dup("ROPE", q, pos)
        k = g.dup("ROPE", k, pos)
        cur = attention(g, q, k, v, inputs, p, s, p.n_kv)
        cur = g.mul_mat(g.weight(n_head * hd, e, name="attn_output"), cur)
        if il == s.n_layer - 1:
            cur, inp_sa = g.get_rows(cur, out_ids), g.get_rows(inp_sa, out_ids)
        ffn_inp = g.dup("ADD", cur, inp_sa)
        cur = rms_norm(g, ffn_inp, e, "ffn_norm")
        inp_l = g.dup("ADD", moe_ffn(g, cur, s), ffn_inp)
    return output_head(g, s, inp_l)


def minimax_m2_shape(model) -> GraphShape | None:
    """The graph widths of a minimax_m2 ``model`` as conversion/minimax.py MiniMaxM2Model writes its GGUF
    (kvmem.engines.llamacpp.arch_tensors._minimax_m2 for the tensors), or None where the graph above is not the one
    llama.cpp builds: no routed experts, per-layer widths or windows (the graph has neither), no Q/K norms
    (load_arch_tensors creates them unconditionally), or a scoring function conversion writes no gating for
    (expert_gating_func then NONE, and build_moe_ffn aborts: src/llama-graph.cpp#L2054-L2072)."""
    if MINIMAX_M2.get(model.model_type) is None:
        return None
    moe, layers = model.facts.moe, model.layers
    if moe is None or not layers or not model.facts.vocab_size or not moe.experts:
        return None
    first = layers[0]
    if not uniform_full(layers):
        return None
    gating = _GATING.get(str(field(model, "scoring_func") or "").lower())
    if gating is None or field(model, "use_qk_norm", True) is False:
        return None
    return GraphShape(arch="minimax-m2", n_layer=len(layers), n_embd=model.hidden_size,
                      n_head=model.num_attention_heads, n_head_kv=first.kv_heads, head_dim=first.head_dim_k,
                      n_ff=0, n_vocab=model.facts.vocab_size, n_expert=moe.experts, n_expert_used=moe.top_k,
                      n_ff_exp=moe.intermediate_size, gating=gating, probs_bias=True, norm_w=True, qk_norm=True)

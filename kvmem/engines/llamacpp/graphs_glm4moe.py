"""llama.cpp's glm4moe forward graph (GLM-4.5, GLM-4.5-Air, GLM-4.6, GLM-4.7), node by node.

Transcribed from the vendored llama.cpp (llama-cpp-python 0.3.36, llama.cpp 0c1e57098),
src/models/glm4-moe.cpp llama_model_glm4_moe::graph::graph (L291-L444):

    build_inp_embd, build_inp_pos, build_attn_inp_kv (one plain KV cache), build_inp_out_ids; per layer
    attn_norm (RMS), build_qkv's separate Q/K/V with their biases where the GGUF has them
    (src/llama-graph.cpp#L1647-L1720, graphs.linear), Q then K RMS-normed where attn_q_norm / attn_k_norm exist
    (use_qk_norm: GLM-4.6/4.7, not GLM-4.5-Air), then Q and K roped (partial RoPE, rope.dimension_count = half
    the head: ggml_rope_ext keeps the shape, one ROPE node each), build_attn (graphs.attention: Q, V, K
    expanded), attn_output without bias; the last layer's rows picked by out_ids (embeddings_nextn off by
    default, src/llama-context.cpp#L119-L120); the residual, post_attention_norm (RMS, the FFN's norm); the first
    leading_dense_block_count layers build_ffn (SiLU, parallel gate), the others build_moe_ffn
    (graphs_mla_oss.moe_ffn: sigmoid gating, always with exp_probs_b, expert_weights_norm from norm_topk_prob,
    a SCALE where routed_scaling_factor is not 0 or 1: conversion/glm.py Glm4MoeModel.set_gguf_parameters
    L151-L182) and then the shared experts' build_ffn, added; the residual. Then output_norm (result_norm, also
    t_h_nextn) and the lm_head. The MTP block (blk.<n_layer>, nextn.*) is built only by graph_mtp
    (LLM_GRAPH_TYPE_DECODER_MTP, a draft context: L132-L289), never in the main context's reserve.
"""

from __future__ import annotations

from .arch_fields import field, uniform_full
from .ggml_graph import Graph
from .graphs import GraphShape, Pass, attention, attn_inputs, embeddings, output_head, qkv_heads, token_inputs
from .graphs_mla_oss import dense_ffn, moe_ffn, rms_norm

__all__ = ["GLM4MOE", "build_glm4moe", "glm4moe_shape"]

# kvmem model_type -> the llama.cpp architecture whose graph this module transcribes (arch_tensors.ARCHS)
GLM4MOE = {"glm4_moe": "glm4moe"}


def build_glm4moe(s: GraphShape, p: Pass) -> Graph:
    """llama_model_glm4_moe::graph::graph for one reserve ``p`` (module docstring)."""
    g = Graph()
    e, hd, n_head = s.n_embd, s.head_dim, s.n_head
    tokens, embd, pos = token_inputs(g, s, p)
    inputs = attn_inputs(g, p, s, p.n_kv)
    out_ids = g.input("i32", p.n_outputs)
    inp_l = embeddings(g, s, tokens, embd)
    for il in range(s.n_layer):
        g.layer = il
        inp_sa = inp_l
        cur = rms_norm(g, inp_l, e, "attn_norm")
        q, k, v = qkv_heads(g, s, p, cur, s.qkv_bias)
        if s.qk_norm:       # glm4-moe.cpp L331-L338: both norms before either RoPE
            q = rms_norm(g, q, hd, "attn_q_norm")
            k = rms_norm(g, k, hd, "attn_k_norm")
        q = g.dup("ROPE", q, pos)
        k = g.dup("ROPE", k, pos)
        cur = attention(g, q, k, v, inputs, p, s, p.n_kv)
        cur = g.mul_mat(g.weight(n_head * hd, e, name="attn_output"), cur)
        if il == s.n_layer - 1:
            cur, inp_sa = g.get_rows(cur, out_ids), g.get_rows(inp_sa, out_ids)
        ffn_inp = g.dup("ADD", cur, inp_sa)
        cur = rms_norm(g, ffn_inp, e, "post_attention_norm")
        if il < s.n_dense_lead:
            cur = dense_ffn(g, cur, e, s.n_ff)
        else:
            cur = g.dup("ADD", moe_ffn(g, cur, s), dense_ffn(g, cur, e, s.n_ff_shexp, "_shexp"))
        inp_l = g.dup("ADD", cur, ffn_inp)
    return output_head(g, s, inp_l)


def glm4moe_shape(model) -> GraphShape | None:
    """The graph widths of a glm4_moe ``model`` as convert_hf_to_gguf writes its GGUF (conversion/glm.py
    Glm4MoeModel, kvmem.engines.llamacpp.arch_tensors._glm4_moe for the tensors), or None where the graph above
    is not the one llama.cpp builds or not known: no routed or no shared experts, per-layer widths, expert groups
    llama.cpp refuses, no norm_topk_prob (a model read from a GGUF). Group-limited routing (n_group > 1, written by
    conversion/base.py L1523-L1527, read for every arch by llama-model.cpp#L1334) is moe_ffn's."""
    if GLM4MOE.get(model.model_type) is None:
        return None
    moe, layers = model.facts.moe, model.layers
    if moe is None or not layers or not model.facts.vocab_size or not moe.experts:
        return None
    first = layers[0]
    if not uniform_full(layers):
        return None
    if field(model, "norm_topk_prob") is None:
        # the config that conversion/glm.py reads expert_weights_norm from (L178-L180) does not say; a model read
        # from a GGUF has no such field here (kvmem.sources.gguf does not map expert_weights_norm / _scale): the
        # normalisation's nodes would be guessed
        return None
    groups, used = field(model, "n_group") or 0, field(model, "topk_group") or 0
    if groups > 1 and (moe.experts % groups or used >= groups):
        return None     # llama-model.cpp#L1365-L1370 asserts these: llama.cpp builds no graph for them
    scale = field(model, "routed_scaling_factor")
    shared = field(model, "n_shared_experts", 0) or 0
    if not shared:
        return None     # glm4-moe.cpp L403-L409 calls build_ffn on the shared expert's tensors unconditionally
    return GraphShape(arch="glm4moe", n_layer=len(layers), n_embd=model.hidden_size,
                      n_head=model.num_attention_heads, n_head_kv=first.kv_heads, head_dim=first.head_dim_k,
                      n_ff=field(model, "intermediate_size", 0) or 0, n_vocab=model.facts.vocab_size,
                      n_expert=moe.experts, n_expert_used=moe.top_k, n_ff_exp=moe.intermediate_size,
                      qkv_bias=bool(field(model, "attention_bias", False)),
                      n_dense_lead=field(model, "first_k_dense_replace", 0) or 0,
                      n_ff_shexp=moe.intermediate_size * shared, gating="sigmoid", probs_bias=True,
                      norm_w=bool(field(model, "norm_topk_prob")), scale_w=scale not in (None, 0, 1),
                      n_group=groups, n_group_used=used, qk_norm=bool(field(model, "use_qk_norm", False)))

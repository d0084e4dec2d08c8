"""llama.cpp's glm4 forward graph (dense GLM-4-0414, GLM-Z1-0414: Glm4ForCausalLM), node by node.

Transcribed from the vendored llama.cpp (llama-cpp-python 0.3.36, llama.cpp 0c1e57098),
src/models/glm4.cpp llama_model_glm4::graph::graph (L68-L186):

    build_inp_embd, build_inp_pos, build_attn_inp_kv (one plain KV cache), build_inp_out_ids; per layer
    attn_norm (RMS), build_qkv's separate Q/K/V with their biases where the GGUF has them (attention_bias:
    GLM-4-9B-0414; none in the 32B files; src/llama-graph.cpp#L1647-L1720, graphs.linear), Q then K roped
    (ggml_rope_ext over rope.dimension_count = half the head: one ROPE node each, the shape kept; M-RoPE only for
    a GGUF with rope sections, which Glm4ForCausalLM's converter does not write: conversion/glm.py#L24-L29),
    build_attn (graphs.attention: Q, V, K expanded) and attn_output without bias; the last layer's rows picked by
    out_ids; then, unlike llama's graph, post_attention_norm (RMS) on the attention's output before the residual
    add (L139-L145), ffn_norm (RMS), build_ffn with ffn_up alone (LLM_FFN_SWIGLU, LLM_FFN_SEQ: the fused
    gate_up_proj, 2 x n_ff wide, and ggml_swiglu of it, half as wide: L150-L158), ffn_down, post_ffw_norm (RMS)
    on the FFN's output (L161-L165), the residual add. Then output_norm (result_norm) and the lm_head.
"""

from __future__ import annotations

from .arch_fields import field, uniform_full
from .ggml_graph import Graph
from .graphs import (
    GraphShape,
    Pass,
    attention,
    attn_inputs,
    embeddings,
    output_head,
    qkv_heads,
    swiglu_fused,
    token_inputs,
)
from .graphs_mla_oss import rms_norm

__all__ = ["GLM4", "build_glm4", "glm4_shape"]

# kvmem model_type -> the llama.cpp architecture whose graph this module transcribes (arch_tensors.ARCHS)
GLM4 = {"glm4": "glm4"}


def build_glm4(s: GraphShape, p: Pass) -> Graph:
    """llama_model_glm4::graph::graph for one reserve ``p`` (module docstring)."""
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
        q, k = g.dup("ROPE", q, pos), g.dup("ROPE", k, pos)
        cur = attention(g, q, k, v, inputs, p, s, p.n_kv)
        cur = g.mul_mat(g.weight(n_head * hd, e, name="attn_output"), cur)
        if il == s.n_layer - 1:
            cur, inp_sa = g.get_rows(cur, out_ids), g.get_rows(inp_sa, out_ids)
        cur = rms_norm(g, cur, e, "post_attention_norm")
        ffn_inp = g.dup("ADD", cur, inp_sa)
        up = g.mul_mat(g.weight(e, 2 * s.n_ff, name="ffn_up"), rms_norm(g, ffn_inp, e, "ffn_norm"))
        cur = g.mul_mat(g.weight(s.n_ff, e, name="ffn_down"), swiglu_fused(g, s, up, s.n_ff))    # ggml_swiglu
        cur = rms_norm(g, cur, e, "post_ffw_norm")
        inp_l = g.dup("ADD", cur, ffn_inp)
    return output_head(g, s, inp_l)


def glm4_shape(model) -> GraphShape | None:
    """The graph widths of a glm4 ``model`` as convert_hf_to_gguf writes its GGUF (conversion/glm.py Glm4Model,
    kvmem.engines.llamacpp.arch_tensors._glm4 for the tensors), or None where the graph above is not the one
    llama.cpp builds or not known: experts, per-layer widths or windows, M-RoPE sections (rope_scaling /
    rope_parameters mrope_section: GLM-4.1V's text model, ggml_rope_multi), a GGUF with a fused attn_qkv."""
    if GLM4.get(model.model_type) is None:
        return None
    layers = model.layers
    if model.facts.moe is not None or not layers or not model.facts.vocab_size:
        return None
    first = layers[0]
    if not uniform_full(layers):
        return None
    for key in ("rope_scaling", "rope_parameters"):
        rope = field(model, key)
        if isinstance(rope, dict) and "mrope_section" in rope:
            return None
    names = [t.name for t in getattr(model.checkpoint, "tensors", None) or ()]
    if any("attn_qkv" in n for n in names):
        return None         # build_qkv's fused path (views of one product) is not transcribed for glm4
    n_ff = field(model, "intermediate_size", 0) or 0
    if not n_ff:
        return None
    qkv_bias = any(n.endswith(".attn_q.bias") for n in names) if names else \
        bool(field(model, "attention_bias", False))
    return GraphShape(arch="glm4", n_layer=len(layers), n_embd=model.hidden_size, n_head=model.num_attention_heads,
                      n_head_kv=first.kv_heads, head_dim=first.head_dim_k, n_ff=n_ff, n_vocab=model.facts.vocab_size,
                      qkv_bias=qkv_bias)

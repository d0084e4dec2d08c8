"""llama.cpp's gemma4 forward graph (Gemma 4 26B-A4B and 31B: no per-layer inputs, no shared-KV layers), node by node.

Transcribed from the vendored llama.cpp (llama-cpp-python 0.3.36, llama.cpp 0c1e57098), src/models/gemma4.cpp
llama_model_gemma4::graph::graph (L155-L469):

    build_inp_embd, the embeddings scaled by sqrt(n_embd) (ggml_scale), build_inp_pos, build_attn_inp_kv_iswa
    (src/llama-graph.cpp#L3425-L3455: the full layers' cache and the sliding one, each with its K/V indices, mask
    and Hadamard inputs: V's indices without flash attention n_tokens x n_embd_v_gqa_max, the largest V row of any
    layer, llama-kv-cache.cpp#L1430-L1445; K's rotation sized by that cache's own head width, #L1447-L1466,
    #L194-L198), build_inp_out_ids; per layer its own head width and KV heads (sliding: head_dim,
    num_key_value_heads; full: global_head_dim, num_global_key_value_heads): attn_norm, Q (attn_q, reshaped, RMS
    norm x attn_q_norm, RoPE; no query scale, f_attention_scale 1), K (attn_k) and V (attn_v, or K's own product
    on full layers with attention_k_eq_v), K normed x attn_k_norm, V RMS-normed without weight, K roped,
    build_attn (iSWA: Q, K, V expanded in that order; graphs.attention) with attn_output; post_attention_norm,
    the residual; a MoE layer (enable_moe_block): the dense FFN (ffn_norm, GELU with parallel gate, post_ffw_norm_1)
    beside the experts (pre_ffw_norm_2; the router on the RMS-normed residual, scaled by 1/sqrt(n_embd), x
    ffn_gate_inp.scale; build_moe_ffn with those logits, softmax, weights normalised, ffn_gate_up_exps in one
    ggml_mul_mat_id split into two views, GEGLU, ffn_down_exps then x its per-expert scale, the rows of
    ffn_down_exps.scale repeated over the tokens: src/llama-graph.cpp build_lora_mm_id; post_ffw_norm_2), added;
    else the dense FFN alone; post_ffw_norm, the residual, x layer_output_scale. Then output_norm (h_nextn, an
    output), its rows by out_ids (embeddings_nextn_masked false), the lm_head and the final logit softcap (scale,
    tanh, scale). No rows picked in the last layer.

The RoPE frequency factors of the full layers (rope_freqs) are not a source here, as for the other graphs (read
where ROPE runs: kvmem.engines.llamacpp.scheduled.graph_weight_names).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .arch_fields import field
from .ggml_graph import OUTPUT, Graph
from .graphs import QUANTISED, GraphShape, Pass, attention, embeddings, experts_sum, ffn, rot_size, token_inputs
from .graphs_mla_oss import rms_norm

__all__ = ["GEMMA4", "Gemma4Shape", "build_gemma4", "gemma4_shape"]

# kvmem model_type -> the llama.cpp architecture whose graph this module transcribes (arch_tensors.ARCHS)
GEMMA4 = {"gemma4": "gemma4", "gemma4_text": "gemma4"}


@dataclass(frozen=True)
class Gemma4Shape(GraphShape):
    """GraphShape's widths (head_dim, n_head_kv: the full layers') and the sliding layers' own."""

    swa_head_dim: int = 0
    swa_n_head_kv: int = 0
    k_eq_v: bool = False        # attention_k_eq_v: no attn_v on full layers, V is K's product


def _inputs(g: Graph, s: Gemma4Shape, p: Pass, hd: int, n_kv: int, v_max: int):
    """One cache's inputs (llama_kv_cache build_input_k_idxs / v_idxs, build_attn_inp_kq_mask, k_rot / v_rot: a
    quantised type and the model's key_length, the full layers' head, a multiple of 64, llama-kv-cache.cpp#L321-L341;
    K's rotation the width of this cache's heads)."""
    rotate = s.head_dim % 64 == 0
    k_idxs = g.input("i64", p.n_tokens)
    v_idxs = g.input("i64", p.n_tokens if p.fa else p.n_tokens * v_max)
    mask = g.input("f16" if p.fa and not p.mask_f32 else "f32", n_kv, p.n_tokens // p.n_stream, 1, p.n_stream)
    if p.fa and p.mask_f32:     # builds before PR #23764: the f32 mask cast to f16 (graphs.attn_inputs)
        mask = g.cast(mask, "f16")
    k_rot = g.input("f32", rot_size(hd), rot_size(hd)) if p.type_k in QUANTISED and rotate else None
    v_rot = g.input("f32", 64, 64) if p.type_v in QUANTISED and rotate else None
    return k_idxs, v_idxs, mask, k_rot, v_rot


def _moe(g: Graph, s: Gemma4Shape, attn_out):
    """The experts of a MoE layer (module docstring), from pre_ffw_norm_2 to post_ffw_norm_2."""
    e, n_exp, n_used, f = s.n_embd, s.n_expert, s.n_expert_used, s.n_ff_exp
    x = rms_norm(g, attn_out, e, "pre_ffw_norm_2")
    tmp = g.dup("MUL", g.dup("SCALE", g.dup("RMS_NORM", attn_out)), g.weight(e, name="ffn_gate_inp.scale"))
    logits = g.mul_mat(g.weight(e, n_exp, name="ffn_gate_inp"), tmp)
    n_tokens = logits.ne[1]
    probs = g.dup("SOFT_MAX", logits)
    selected = g.argsort_top_k(probs, n_used)
    weights = g.get_rows(g.reshape(probs, 1, n_exp, n_tokens), selected)
    weights = g.reshape(weights, n_used, n_tokens)
    weights = g.reshape(g.dup("DIV", weights, g.dup("CLAMP", g.sum_rows(weights))), 1, n_used, n_tokens)
    g.expand(weights)
    x = g.reshape(x, e, 1, n_tokens)
    gate_up = g.mul_mat_id(g.weight(e, 2 * f, n_exp, name="ffn_gate_up_exps"), x, selected)
    gate = g.view(gate_up, (f, n_used, n_tokens), gate_up.nb[:3])
    up = g.view(gate_up, (f, n_used, n_tokens), gate_up.nb[:3])
    act = g.op("GLU", gate.type, gate.ne, gate, up)
    experts = g.mul_mat_id(g.weight(f, e, n_exp, name="ffn_down_exps"), act, selected)
    scale = g.reshape(g.weight(n_exp, name="ffn_down_exps.scale"), 1, n_exp, 1)
    scale = g.get_rows(g.op("REPEAT", "f32", (1, n_exp, n_tokens, 1), scale), selected)
    experts = g.dup("MUL", g.dup("MUL", experts, scale), weights)
    g.expand(experts)
    out = experts_sum(g, experts, e, n_tokens, n_used)
    return rms_norm(g, out, e, "post_ffw_norm_2")


def build_gemma4(s: Gemma4Shape, p: Pass) -> Graph:
    """llama_model_gemma4::graph::graph for one reserve ``p`` (module docstring)."""
    g = Graph()
    e, n_head, n_tokens = s.n_embd, s.n_head, p.n_tokens
    v_max = max(s.head_dim * s.n_head_kv if any(not w for w in s.swa) else 0,
                s.swa_head_dim * s.swa_n_head_kv if any(s.swa) else 0)
    tokens, embd, pos = token_inputs(g, s, p)
    base = _inputs(g, s, p, s.head_dim, p.n_kv, v_max)
    swa = _inputs(g, s, p, s.swa_head_dim, p.n_kv_swa, v_max)
    out_ids = g.input("i32", p.n_outputs)
    inp_l = g.dup("SCALE", embeddings(g, s, tokens, embd))
    full = s
    sliding = replace(s, head_dim=s.swa_head_dim, n_head_kv=s.swa_n_head_kv)
    for il in range(s.n_layer):
        g.layer = il
        is_swa = s.swa[il]
        ls = sliding if is_swa else full
        hd, n_kv_h = ls.head_dim, ls.n_head_kv
        cur = rms_norm(g, inp_l, e, "attn_norm")
        q = g.reshape(g.mul_mat(g.weight(e, hd * n_head, name="attn_q"), cur), hd, n_head, n_tokens)
        q = g.dup("ROPE", rms_norm(g, q, hd, "attn_q_norm"), pos)
        k = g.mul_mat(g.weight(e, hd * n_kv_h, name="attn_k"), cur)
        v = k if s.k_eq_v and not is_swa else g.mul_mat(g.weight(e, hd * n_kv_h, name="attn_v"), cur)
        k = g.reshape(k, hd, n_kv_h, n_tokens)
        v = g.reshape(v, hd, n_kv_h, n_tokens)
        k = rms_norm(g, k, hd, "attn_k_norm")
        v = g.dup("RMS_NORM", v)
        k = g.dup("ROPE", k, pos)
        cur = attention(g, q, k, v, swa if is_swa else base, p, ls, p.n_kv_swa if is_swa else p.n_kv, iswa=True)
        cur = g.mul_mat(g.weight(hd * n_head, e, name="attn_output"), cur)
        attn_out = g.dup("ADD", rms_norm(g, cur, e, "post_attention_norm"), inp_l)
        mlp = ffn(g, rms_norm(g, attn_out, e, "ffn_norm"), s)
        if s.n_expert:
            mlp = g.dup("ADD", rms_norm(g, mlp, e, "post_ffw_norm_1"), _moe(g, s, attn_out))
        cur = g.dup("ADD", rms_norm(g, mlp, e, "post_ffw_norm"), attn_out)
        inp_l = g.dup("MUL", cur, g.weight(1, name="layer_output_scale"))
    g.layer = s.n_layer
    norm = rms_norm(g, inp_l, e, "output_norm")
    norm.flags |= OUTPUT
    rows = g.get_rows(norm, out_ids)
    rows.flags |= OUTPUT
    logits = g.mul_mat(g.weight(e, s.n_vocab, name="output"), rows)
    if s.final_softcap:
        logits = g.dup("SCALE", g.dup("UNARY", g.dup("SCALE", logits)))
    logits.flags |= OUTPUT
    g.expand(logits)
    return g


def gemma4_shape(model) -> Gemma4Shape | None:
    """The graph widths of a gemma4 ``model`` as convert_hf_to_gguf writes its GGUF (conversion/gemma.py
    Gemma4Model; kvmem.engines.llamacpp.arch_tensors._gemma4 for the tensors), or None where the graph above is not
    the one llama.cpp builds: per-layer inputs (E2B/E4B), shared-KV layers, the double-wide MLP or per-layer FFN
    widths, layers whose widths are not one per kind, a GGUF with a fused attn_qkv or separate gate/up experts
    (gemma4.cpp L79-L85, L123-L128: also loaded, another graph)."""
    if GEMMA4.get(model.model_type) is None:
        return None
    layers, moe = model.layers, model.facts.moe
    if not layers or not model.facts.vocab_size or field(model, "hidden_size_per_layer_input", 0) \
            or field(model, "num_kv_shared_layers", 0) or field(model, "use_double_wide_mlp", False):
        return None
    swa = tuple(str(layer.kind) == "sliding" for layer in layers)
    kinds: dict[bool, set[tuple[int, int, int]]] = {}
    for is_swa, layer in zip(swa, layers, strict=True):
        kinds.setdefault(is_swa, set()).add((layer.kv_heads, layer.head_dim_k, layer.head_dim_v))
    if any(str(layer.kind) not in ("full", "sliding") for layer in layers) or any(
            len(v) != 1 or next(iter(v))[1] != next(iter(v))[2] for v in kinds.values()):
        return None
    moe = moe if field(model, "enable_moe_block", False) else None
    names = [t.name for t in getattr(model.checkpoint, "tensors", None) or ()]
    if any(".attn_qkv." in n for n in names) or (moe is not None and names and not any(
            ".ffn_gate_up_exps." in n for n in names)):
        return None     # a fused attn_qkv (views made contiguous) or separate gate/up experts: other graphs
    if not isinstance(field(model, "intermediate_size", 0), int):
        return None     # per-layer FFN widths
    full_kv, full_hd, _ = next(iter(kinds[False] if False in kinds else kinds[True]))
    swa_kv, swa_hd, _ = next(iter(kinds[True] if True in kinds else kinds[False]))
    return Gemma4Shape(arch="gemma4", n_layer=len(layers), n_embd=model.hidden_size,
                       n_head=model.num_attention_heads, n_head_kv=full_kv, head_dim=full_hd,
                       n_ff=field(model, "intermediate_size", 0), n_vocab=model.facts.vocab_size,
                       n_expert=moe.experts if moe else 0, n_expert_used=moe.top_k if moe else 0,
                       n_ff_exp=moe.intermediate_size if moe else 0, swa=swa,
                       final_softcap=bool(field(model, "final_logit_softcapping")), swa_head_dim=swa_hd,
                       swa_n_head_kv=swa_kv, k_eq_v=bool(field(model, "attention_k_eq_v", False)))


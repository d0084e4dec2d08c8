"""llama.cpp's deepseek2 (MLA) and gpt-oss forward graphs, node by node (kvmem.engines.llamacpp.graphs has
the llama / qwen graphs and the attention gpt-oss shares with them).

Transcribed from the vendored llama.cpp (llama-cpp-python 0.3.36, llama.cpp 0c1e57098):

    deepseek2  src/models/deepseek2.cpp llama_model_deepseek2::graph::graph (L432-L713), the MLA path
               (is_mla: the GGUF has key_length_mla / value_length_mla, attn_k_b and attn_v_b, as
               convert_hf_to_gguf writes it): Q from attn_q (the "lite" layers) or attn_q_a, its norm and
               attn_q_b (L514-L527); the compressed KV and its rope part, views of one attn_kv_a_mqa
               product (L531-L552); Q split into nope and rope views, the rope part roped, the nope
               part absorbed by attn_k_b (a batched mul_mat over the heads, permuted back) and
               concatenated with it (L555-L582); K = concat(normed latent, roped k_pe), V = the latent
               (L584-L593); build_attn with the K-only cache (src/llama-graph.cpp#L2952-L3037:
               build_attn_inp_k makes the K indices and the mask, no V indices, no Hadamard inputs; Q, V,
               K expanded in that order; V a view of the cached K, kv_lora wide); build_attn_mha
               (#L2616-L2755) with v_mla = attn_v_b: with flash attention the output permuted,
               multiplied by attn_v_b, permuted back and made contiguous; without it V (not
               transposed) copied transposed (ggml_cont), KQV then attn_v_b; the last layer's rows
               picked by out_ids after attention (L635-L638: embeddings_nextn is off by default,
               src/llama-context.cpp#L119-L120); leading_dense_block_count dense layers (build_ffn),
               the rest build_moe_ffn plus the shared experts' build_ffn, added (L645-L689);
    gpt-oss    src/models/openai-moe.cpp llama_model_openai_moe::graph::graph (L62-L170): the iSWA
               cache (load_swa_pattern(ml, 2): even layers sliding), separate Q/K/V with biases
               (build_qkv), RoPE on Q and K, build_attn (iSWA: Q, K, V expanded in that order) with the
               attention sinks (ggml_soft_max_add_sinks: src[2] of the softmax; with flash attention
               ggml_flash_attn_ext_add_sinks: src[4]), attn_output and its bias, the residual, the
               post-attention norm, build_moe_ffn with router bias, expert biases (ggml_add_id),
               SOFTMAX_WEIGHT gating (a softmax over the chosen experts' logits) and SWIGLU_OAI;
               the last layer's output (t_h_nextn, an output: llm_graph_result::set_outputs,
               src/llama-graph.cpp#L1367-L1379) then the rows of out_ids (L146-L152), the norm, the lm_head.

build_moe_ffn (src/llama-graph.cpp#L2007-L2374): router logits (+ bias), softmax / sigmoid / the logits
themselves, the selection bias exp_probs_b, group-limited routing when expert_group_count > 1 (top-2 per
group summed, argsort top n_group_used, the other groups filled with -inf through ggml_fill and
ggml_set_rows), argsort top-k, the weights' rows, their softmax (SOFTMAX_WEIGHT), normalisation
(expert_weights_norm: sum_rows, clamp, div) and scale (expert_weights_scale other than 0 or 1), then
up / gate / down by ggml_mul_mat_id (+ ggml_add_id biases), the GLU, the weighting and the views added.
"""

from __future__ import annotations

from dataclasses import replace

from .arch_fields import field
from .ggml_graph import OUTPUT, TYPES, Graph
from .graphs import (
    GraphShape,
    Pass,
    attention,
    attn_inputs,
    embeddings,
    experts_sum,
    glu,
    glu_dated,
    kq_mask,
    linear,
    output_head,
    token_inputs,
)
from .graphs_mla_attn import absorbed_attention, latent_v_attention, mla_mha, per_head_attention
from .settings import CURRENT, PR_12181, PR_14959, PR_27382

__all__ = ["MLA_OSS", "build_mla_oss", "stores_transcribed", "moe_ffn", "mla_mha", "mla_oss_shape",
           "per_head_mla_shape", "mla_fields", "rms_norm", "dense_ffn", "routed_weights"]

# ggml-org/llama.cpp PR #27382 "model: use ggml_rope_set_offset()" (873e5d8e3, 2026-08-21): from it deepseek2 ropes
# Q whole from the nope offset (per-head path) and q_pe inside the MLA branch; before it q_pe is roped first, before
# k_pe, and the per-head Q is concat(q_nope, q_pe) (llama.cpp@873e5d8e3 src/models/deepseek2.cpp#L524-L640 and its
# parent's, the diff's two sides)
# kvmem model_type -> the llama.cpp architecture whose graph this module transcribes (arch_tensors.ARCHS)
MLA_OSS = {"deepseek_v2": "deepseek2", "deepseek_v3": "deepseek2", "kimi_k2": "deepseek2", "gpt_oss": "gpt-oss"}


def build_mla_oss(s: GraphShape, p: Pass) -> Graph:
    """The graph llama.cpp builds for one reserve of ``p`` (``s.arch`` deepseek2 or gpt-oss)."""
    return _deepseek2(s, p) if s.arch == "deepseek2" else _gpt_oss(s, p)


def rms_norm(g: Graph, x, width: int, name: str):
    """build_norm, LLM_NORM_RMS: ggml_rms_norm, then ggml_mul by the weight."""
    return g.dup("MUL", g.dup("RMS_NORM", x), g.weight(width, name=name))


def dense_ffn(g: Graph, cur, n_embd: int, n_ff: int, suffix: str = "", s: GraphShape | None = None):
    """build_ffn, LLM_FFN_SILU / LLM_FFN_PAR: up, gate, ggml_swiglu_split, down; ``s``: a shape whose glu_split
    (builds before PR #14158) makes it silu, mul (graphs.glu)."""
    up = g.mul_mat(g.weight(n_embd, n_ff, name="ffn_up" + suffix), cur)
    gate = g.mul_mat(g.weight(n_embd, n_ff, name="ffn_gate" + suffix), cur)
    act = glu(g, s, gate, up) if s is not None else g.dup("GLU", gate, up)
    return g.mul_mat(g.weight(n_ff, n_embd, name="ffn_down" + suffix), act)



def routed_weights(g: Graph, s, weights, n_used: int, n_tokens: int):
    """build_moe_ffn's selected experts' weights normalised to sum 1 (expert_weights_norm: sum_rows, clamp, div)
    and scaled (expert_weights_scale), then expanded (llama.cpp@0c1e57098 src/llama-graph.cpp#L2148-L2170)."""
    if s.norm_w:
        weights = g.reshape(weights, n_used, n_tokens)
        total = g.dup("CLAMP", g.sum_rows(weights))
        weights = g.reshape(g.dup("DIV", weights, total), 1, n_used, n_tokens)
    if s.scale_w:
        weights = g.dup("SCALE", weights)
    g.expand(weights)
    return weights


def moe_ffn(g: Graph, cur, s: GraphShape, *, biases: bool = False):
    """build_moe_ffn (module docstring) with ``s``'s gating; ``biases``: the router's and the experts'
    biases (gpt-oss)."""
    n_embd, n_tokens, n_exp, n_used = cur.ne[0], cur.ne[1], s.n_expert, s.n_expert_used
    logits = g.mul_mat(g.weight(n_embd, n_exp, name="ffn_gate_inp"), cur)
    if biases:
        logits = g.dup("ADD", logits, g.weight(n_exp, name="ffn_gate_inp.bias"))
    probs = logits if s.gating == "softmax_weight" else g.dup("SOFT_MAX" if s.gating == "softmax" else "UNARY",
                                                                logits)
    selection = g.dup("ADD", probs, g.weight(n_exp, name="exp_probs_b.bias")) if s.probs_bias else probs
    if s.n_group > 1 and n_tokens > 0:
        per = n_exp // s.n_group
        groups = g.reshape(selection, per, s.n_group, n_tokens)
        scores = g.argsort_top_k(groups, 2)
        scores = g.get_rows(g.reshape(groups, 1, per, s.n_group, n_tokens), scores)
        scores = g.sum_rows(g.reshape(scores, scores.ne[1], scores.ne[2], scores.ne[3]))
        scores = g.reshape(scores, scores.ne[1], scores.ne[2])
        chosen = g.argsort_top_k(scores, s.n_group_used)
        kept = g.get_rows(groups, chosen)
        selection = g.set_rows(g.dup("FILL", groups), kept, chosen)
        selection = g.reshape(selection, n_exp, n_tokens)
    selected = g.argsort_top_k(selection, n_used)
    weights = g.get_rows(g.reshape(probs, 1, n_exp, n_tokens), selected)
    if s.gating == "softmax_weight":
        weights = g.reshape(g.dup("SOFT_MAX", g.reshape(weights, n_used, n_tokens)), 1, n_used, n_tokens)
    weights = routed_weights(g, s, weights, n_used, n_tokens)
    cur = g.reshape(cur, n_embd, 1, n_tokens)
    f = s.n_ff_exp

    def experts(name, n_in, n_out, x):
        out = g.mul_mat_id(g.weight(n_in, n_out, n_exp, name=name), x, selected)
        if biases:      # ggml_add_id: the selected experts' bias rows
            out = g.op("ADD_ID", out.type, out.ne, out, g.weight(n_out, n_exp, name=name + ".bias"), selected)
        return out
    up = experts("ffn_up_exps", n_embd, f, cur)
    gate = experts("ffn_gate_exps", n_embd, f, cur)
    act = glu(g, s, gate, up) if s.glu_split else g.op("GLU", gate.type, gate.ne, gate, up)     # graphs.glu
    down = experts("ffn_down_exps", f, n_embd, act)
    down = g.dup("MUL", down, weights)
    g.expand(down)
    return experts_sum(g, down, n_embd, n_tokens, n_used)


def _deepseek2(s: GraphShape, p: Pass) -> Graph:
    """llama_model_deepseek2::graph::graph: the MLA path (module docstring), or the per-head one of a GGUF without
    the MLA split (``s.per_head_mla``)."""
    g = Graph()
    e, n_head, n_tokens = s.n_embd, s.n_head, p.n_tokens
    hk, rope, kv_lora, vd = s.head_dim, s.rope_dim, s.kv_lora, s.v_head_dim
    n_k = s.kv_lora + s.rope_dim        # attn_kv_a_mqa's product: the latent and k_pe
    f32 = TYPES["f32"][1]
    tokens, embd, pos = token_inputs(g, s, p)
    if s.per_head_mla:      # build_attn_inp_kv: K and V indices, the mask, the Hadamard inputs (graphs.attn_inputs)
        inputs = attn_inputs(g, p, s, p.n_kv)
    elif s.mla_v:           # build_attn_inp_kv_unified over the latent + V cache: one KV head, K 576 wide, V 512
        inputs = attn_inputs(g, p, replace(s, head_dim=s.kv_lora + s.rope_dim, head_dim_v=s.kv_lora, n_head_kv=1),
                             p.n_kv)
    else:                   # build_attn_inp_k: K indices and the mask
        k_idxs = g.input("i64", n_tokens)
        mask = kq_mask(g, p, p.n_kv)       # an f32 one cast to f16 by builds before PR #23764 (glm-dsa's too)
    out_ids = g.input("i32", p.n_outputs)
    inp_l = embeddings(g, s, tokens, embd)
    for il in range(s.n_layer):
        g.layer = il
        inp_sa = inp_l
        cur = rms_norm(g, inp_l, e, "attn_norm")
        if s.q_lora:
            q = g.mul_mat(g.weight(e, s.q_lora, name="attn_q_a"), cur)
            q = rms_norm(g, q, s.q_lora, "attn_q_a_norm")
            q = g.mul_mat(g.weight(s.q_lora, n_head * hk, name="attn_q_b"), q)
        else:
            q = g.mul_mat(g.weight(e, n_head * hk, name="attn_q"), cur)
        q = g.reshape(q, hk, n_head, n_tokens)
        kv_pe = g.mul_mat(g.weight(e, n_k, name="attn_kv_a_mqa"), cur)
        kv_cmpr = g.view(kv_pe, (kv_lora, n_tokens), (f32, f32 * n_k))
        k_pe = g.view(kv_pe, (rope, 1, n_tokens), (f32, f32 * n_k, f32 * n_k))
        q_pe = None     # builds before PR #27382 rope Q's rope part here, before k_pe (GraphShape.rope_q_early)
        if s.rope_q_early:
            q_pe = g.dup("ROPE", g.view(q, (rope, n_head, n_tokens), q.nb[:3]), pos)
        k_pe = g.dup("ROPE", k_pe, pos)
        kv_cmpr = rms_norm(g, kv_cmpr, kv_lora, "attn_kv_a_norm")
        if s.per_head_mla:
            cur = per_head_attention(g, s, p, q, kv_cmpr, k_pe, pos, inputs, q_pe)
        elif s.mla_v:
            cur = latent_v_attention(g, s, p, q, kv_cmpr, k_pe, pos, inputs, q_pe)
        else:
            cur = absorbed_attention(g, s, p, q, kv_cmpr, k_pe, pos, k_idxs, mask, q_pe)
        cur = g.mul_mat(g.weight(n_head * vd, e, name="attn_output"), cur)
        inp_l = deepseek_ffn(g, s, il, cur, inp_sa, out_ids)
    return output_head(g, s, inp_l)        # result_norm is also t_h_nextn


def deepseek_ffn(g: Graph, s: GraphShape, il: int, cur, inp_sa, out_ids):
    """After attn_output (deepseek2, glm-dsa, deepseek32.cpp alike): the last layer's rows by out_ids, ffn_norm,
    a leading layer's dense FFN or the MoE beside the shared experts, the residual."""
    if il == s.n_layer - 1:
        cur, inp_sa = g.get_rows(cur, out_ids), g.get_rows(inp_sa, out_ids)
    ffn_inp, e = g.dup("ADD", cur, inp_sa), s.n_embd
    cur = rms_norm(g, ffn_inp, e, "ffn_norm")
    if il < s.n_dense_lead:
        return g.dup("ADD", dense_ffn(g, cur, e, s.n_ff, s=s), ffn_inp)
    return g.dup("ADD", g.dup("ADD", moe_ffn(g, cur, s), dense_ffn(g, cur, e, s.n_ff_shexp, "_shexp", s)), ffn_inp)


def _gpt_oss(s: GraphShape, p: Pass) -> Graph:
    """llama_model_openai_moe::graph::graph (module docstring)."""
    g = Graph()
    e, hd, n_head, n_head_kv, n_tokens = s.n_embd, s.head_dim, s.n_head, s.n_head_kv, p.n_tokens
    tokens, embd, pos = token_inputs(g, s, p)
    base, swa = attn_inputs(g, p, s, p.n_kv), attn_inputs(g, p, s, p.n_kv_swa)
    out_ids = g.input("i32", p.n_outputs)
    inp_l = embeddings(g, s, tokens, embd)
    for il in range(s.n_layer):
        g.layer = il
        inp_sa = inp_l
        cur = rms_norm(g, inp_l, e, "attn_norm")
        widths = ((n_head * hd, "attn_q"), (n_head_kv * hd, "attn_k"), (n_head_kv * hd, "attn_v"))
        q, k, v = (linear(g, cur, width, True, name) for width, name in widths)
        q = g.dup("ROPE", g.reshape(q, hd, n_head, n_tokens), pos)
        k = g.dup("ROPE", g.reshape(k, hd, n_head_kv, n_tokens), pos)
        v = g.reshape(v, hd, n_head_kv, n_tokens)
        sliding = s.swa[il]
        cur = attention(g, q, k, v, swa if sliding else base, p, s, p.n_kv_swa if sliding else p.n_kv, iswa=True,
                        sinks=g.weight(n_head, name="attn_sinks"))
        cur = g.mul_mat(g.weight(n_head * hd, e, name="attn_output"), cur)
        cur = g.dup("ADD", cur, g.weight(e, name="attn_output.bias"))
        ffn_inp = g.dup("ADD", cur, inp_sa)
        cur = moe_ffn(g, rms_norm(g, ffn_inp, e, "post_attention_norm"), s, biases=True)
        inp_l = g.dup("ADD", cur, ffn_inp)
    g.layer = s.n_layer
    inp_l.flags |= OUTPUT       # t_h_nextn: the last layer's output, every row
    return output_head(g, s, g.get_rows(inp_l, out_ids))


def mla_oss_shape(model, build=CURRENT) -> GraphShape | None:
    """The graph widths of a deepseek2 or gpt-oss ``model`` as the GGUF convert_hf_to_gguf writes for it
    (conversion/deepseek.py DeepseekV2Model, conversion/gpt_oss.py), or None where the graph above is not
    the one llama.cpp would build: no routed experts, DeepSeek's attention temperature (mistral-large),
    gpt-oss layers whose sliding pattern is not llama.cpp's (even layers sliding, load_swa_pattern(ml, 2))."""
    arch = MLA_OSS.get(model.model_type)
    moe, layers = model.facts.moe, model.layers
    if arch is None or moe is None or not layers or not model.facts.vocab_size:
        return None
    common = dict(arch=arch, n_layer=len(layers), n_embd=model.hidden_size, n_head=model.num_attention_heads,
                  n_vocab=model.facts.vocab_size, n_expert=moe.experts, n_expert_used=moe.top_k,
                  n_ff_exp=moe.intermediate_size)
    if arch == "gpt-oss":
        first = layers[0]
        swa = tuple(il % 2 == 0 for il in range(len(layers)))     # openai-moe.cpp L6-L9
        if tuple(layer.window > 0 for layer in layers) != swa or any(
                (layer.kv_heads, layer.head_dim_k, layer.head_dim_v) != (first.kv_heads, first.head_dim_k,
                                                                         first.head_dim_k) for layer in layers):
            return None
        return GraphShape(**common, n_head_kv=first.kv_heads, head_dim=first.head_dim_k, n_ff=0, qkv_bias=True,
                          swa=swa, gating="softmax_weight")
    fields = mla_fields(model)
    return None if fields is None else GraphShape(**common, **fields, rope_q_early=(build or CURRENT) < PR_27382)


def stores_transcribed(shape: GraphShape, build) -> bool:
    """Whether the deepseek2 / gpt-oss graph of ``shape`` is transcribed at ``build``: from PR #14959 (ggml_set_rows
    stores), and before it (ggml_cpy into views, no index inputs) the latent + V graph and, from PR #12181
    (llm_graph_context), the per-head one (b5331's: llama.cpp@33eff4024 src/llama-model.cpp#L10275-L10308)."""
    return build >= PR_14959 or shape.mla_v or (shape.per_head_mla and build >= PR_12181)


def per_head_mla_shape(model, build=CURRENT) -> GraphShape | None:
    """deepseek2's graph over a GGUF without the MLA split (mla="none": converted before PR #12801, attn_kv_b and
    per-head K = nope + rope, V = v_head_dim, one KV head per head: deepseek2.cpp L114-L120 and L583-L627), or None
    where ``model`` has no deepseek2 graph here."""
    shape = mla_oss_shape(model, build)
    if shape is None or shape.arch != "deepseek2":
        return None
    return glu_dated(replace(shape, per_head_mla=True, n_head_kv=shape.n_head, head_dim_v=shape.v_head_dim), build)


def mla_fields(model) -> dict | None:
    """The MLA and routing widths of a deepseek2-like ``model`` (deepseek2, glm-dsa, deepseek32), or None
    where llama.cpp builds another graph or none."""
    moe = model.facts.moe
    if field(model, "llama_4_scaling") or field(model, "attn_temperature_len"):
        return None     # deepseek2.cpp L477-L480: the temperature scale's input and MUL, not transcribed
    rope, nope = field(model, "qk_rope_head_dim"), field(model, "qk_nope_head_dim")
    kv_lora, v_dim = field(model, "kv_lora_rank"), field(model, "v_head_dim")
    if not (rope and nope and kv_lora and v_dim):
        return None
    groups, used = field(model, "n_group") or 0, field(model, "topk_group") or 0
    if groups > 1 and (moe.experts % groups or used >= groups):
        return None     # llama-model.cpp#L1365-L1370 asserts these: llama.cpp builds no graph for them
    scale = field(model, "routed_scaling_factor")
    sigmoid = field(model, "scoring_func") == "sigmoid"     # e_score_correction_bias -> exp_probs_b (arch_tensors)
    return dict(n_head_kv=1, head_dim=nope + rope, n_ff=field(model, "intermediate_size", 0),
                q_lora=field(model, "q_lora_rank") or 0, kv_lora=kv_lora, rope_dim=rope, v_head_dim=v_dim,
                n_dense_lead=field(model, "first_k_dense_replace", 0),
                n_ff_shexp=moe.intermediate_size * field(model, "n_shared_experts", 1),
                gating="sigmoid" if sigmoid else "softmax", probs_bias=sigmoid,
                norm_w=bool(field(model, "norm_topk_prob")), scale_w=scale not in (None, 0, 1),
                n_group=groups, n_group_used=used)

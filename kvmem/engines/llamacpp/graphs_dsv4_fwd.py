"""llama.cpp's deepseek4 (DeepSeek-V4 Flash / Pro) forward graph, node by node (its attention and compressors:
kvmem.engines.llamacpp.graphs_dsv4_comp; its tensors: graphs_dsv4; its caches: dsv4).

Transcribed from the vendored llama.cpp (llama-cpp-python 0.3.36, llama.cpp 0c1e57098):

    graph       src/models/deepseek4.cpp llama_model_deepseek4::graph::graph (L1222-L1359): build_inp_embd,
                build_inp_pos, build_inp_out_ids, build_inp_dsv4 (its raw mask expanded at once); the embeddings
                repeated over the hc_mult hyper-connection streams (ggml_repeat_4d); per layer the attention's
                hyper-connection mix (build_hc_pre), attn_norm, the attention, build_hc_post, the FFN's mix (the
                residual, post and comb expanded), ffn_norm, build_moe_ffn (sqrt(softplus) gating; on the first
                hash_layer_count layers the experts picked by ffn_gate_tid2eid's rows of the tokens, else by the
                top-k of the probabilities plus exp_probs_b; expert_weights_norm, expert_weights_scale; the clamped
                SwiGLU, one GLU op) beside the shared experts' build_ffn, added, build_hc_post; after the last
                layer the streams' rows of out_ids, build_hc_head (il -1: the unfused mix, a MUL and ADD per
                stream), output_norm (result_norm) and the lm_head.
    hc mixes    build_hc_pre (L353-L409): RMS norm of the flattened streams, hc_fn x it; pre and post views of
                the mix scaled, biased, sigmoid, scaled; comb ggml_dsv4_hc_comb and the mix ggml_dsv4_hc_pre
                (cparams.fused_dsv4_hc_pre / _comb / _post are on, src/llama-context.cpp#L240-L243, and the CPU
                runs them: resolve_fused_ops keeps them); build_hc_post (L411-L446) ggml_dsv4_hc_post; op shapes
                ggml/src/ggml.c#L6468-L6618.
    attention   build_attention_impl (L878-L1219): qr = attn_q_a, its norm; q = attn_q_b x qr, per-head RMS norm,
                RoPE; kv = attn_kv, its norm, RoPE; the layer's compressors (graphs_dsv4_comp.compress: CSA and
                the indexer on ratio 4, HCA on 128); the attention (graphs_dsv4_comp.attend); ggml_rope_ext_back;
                the grouped output (attn_output_a per group, permuted, contiguous; attn_output_b).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .arch_fields import field
from .ggml_graph import TYPES, Graph
from .graphs import GraphShape, Pass, embeddings, experts_sum, output_head, token_inputs
from .graphs_dsv4 import DSV4
from .graphs_dsv4_comp import CSA, HCA, attend, compress, dsv4_inputs
from .graphs_mla_oss import dense_ffn, rms_norm, routed_weights

__all__ = ["DSV4Shape", "build_dsv4", "dsv4_shape", "dsv4_context", "dsv4_few"]

F32 = TYPES["f32"][1]


@dataclass(frozen=True)
class DSV4Shape(GraphShape):
    """deepseek4's widths beyond GraphShape's (indexer_full: the ratio-4 layers, which run the indexer)."""

    ratios: tuple = ()      # attention.compress_ratios per layer: 0, 4 (CSA + indexer) or 128 (HCA)
    hc: int = 4             # hyper_connection.count
    o_groups: int = 0       # attention.output_group_count
    o_lora: int = 0         # attention.output_lora_rank
    n_hash: int = 0         # hash_layer_count: layers routed by ffn_gate_tid2eid
    n_seqs: int = 1         # the context's sequences: every cache and the graph a stream each, whatever -kvu says
    n_rs_seq: int = 0       # rollback snapshots per sequence (deepseek4 keeps them: llm_arch_supports_rs_rollback)


def dsv4_context(shape, n_seq: int, n_rs_seq) -> GraphShape | None:
    """``shape`` with the context's sequences and rollback snapshots (a DSV4Shape; any other as it is): the reserve's
    ubatch has n_seq_max sequences whatever -kvu says (llama.cpp@0c1e57098 src/llama-context.cpp#L628), each cache a
    stream a sequence (src/llama-kv-cache-dsv4.cpp#L1243-L1244, #L1287), deepseek4 keeps its snapshots
    (src/llama-arch.cpp#L1123-L1140)."""
    if not isinstance(shape, DSV4Shape):
        return shape
    return replace(shape, n_seqs=max(1, int(n_seq)), n_rs_seq=int(n_rs_seq or 0))


def dsv4_few(shape, n: int) -> tuple[int, dict]:
    """The first layers scheduled.py's weight-name graph builds for ``shape`` (``n`` for another shape) and the fields
    that cut them: a DSV4Shape through a layer of each compress ratio and past the hash-routed layers, one stream."""
    if not isinstance(shape, DSV4Shape):
        return n, {}
    n = min(shape.n_layer, max(n, shape.n_hash + 1, *(shape.ratios.index(r) + 1 for r in set(shape.ratios))))
    return n, {"ratios": shape.ratios[:n], "n_seqs": 1}


def _hc_pre(g: Graph, s: DSV4Shape, x, part: str):
    """build_hc_pre (llama.cpp@0c1e57098 src/models/deepseek4.cpp#L353-L409, the fused ops: ggml/src/ggml.c
    #L6468-L6572): (the mixed input, post, comb)."""
    e, hc, nt = s.n_embd, s.hc, x.ne[2]
    mix = (2 + hc) * hc
    flat = g.dup("RMS_NORM", g.reshape(x, hc * e, nt))
    mixes = g.mul_mat(g.weight(hc * e, mix, name=part + "_fn"), flat)
    scale, base = g.weight(3, name=part + "_scale"), g.weight(mix, name=part + "_base")
    out = []
    for _ in range(2):      # pre (scale 0, base 0..hc), post (scale 1, base hc..2hc): views of the mix
        t = g.view(mixes, (hc, nt), (F32, mixes.nb[1]))
        t = g.dup("ADD", g.dup("MUL", t, g.view(scale, (1,), (F32,))), g.view(base, (hc,), (F32,)))
        out.append(g.dup("SCALE", g.dup("UNARY", t)))
    comb = g.op("DSV4_HC_COMB", "f32", (hc, hc, nt), mixes, scale, base)
    return g.op("DSV4_HC_PRE", "f32", (e, nt), x, out[0]), out[1], comb


def _hc_head(g: Graph, s: DSV4Shape, x):
    """build_hc_head (llama.cpp@0c1e57098 src/models/deepseek4.cpp#L448-L468) and its unfused build_hc_pre (il -1:
    #L289-L314)."""
    e, hc, n = s.n_embd, s.hc, x.ne[2]
    flat = g.dup("RMS_NORM", g.reshape(x, hc * e, n))
    mixes = g.mul_mat(g.weight(hc * e, hc, name="output_hc_fn"), flat)
    pre = g.dup("ADD", g.dup("MUL", mixes, g.weight(1, name="output_hc_scale")), g.weight(hc, name="output_hc_base"))
    pre = g.dup("SCALE", g.dup("UNARY", pre))
    result = None
    for _ in range(hc):
        cur = g.dup("MUL", g.view(x, (e, n), (F32, x.nb[2])), g.view(pre, (1, n), (F32, pre.nb[1])))
        result = cur if result is None else g.dup("ADD", result, cur)
    return result


def _attention(g: Graph, s: DSV4Shape, p: Pass, ins, il: int, cur, pos):
    """build_attention_impl (llama.cpp@0c1e57098 src/models/deepseek4.cpp#L878-L1219; module docstring)."""
    e, hd, n_head, nt = s.n_embd, s.head_dim, s.n_head, cur.ne[1]
    qr = rms_norm(g, g.mul_mat(g.weight(e, s.q_lora, name="attn_q_a"), cur), s.q_lora, "attn_q_a_norm")
    q = g.mul_mat(g.weight(s.q_lora, n_head * hd, name="attn_q_b"), qr)
    q = g.dup("ROPE", g.dup("RMS_NORM", g.reshape(q, hd, n_head, nt)), pos)
    kv = rms_norm(g, g.mul_mat(g.weight(e, hd, name="attn_kv"), cur), hd, "attn_kv_a_norm")
    kv = g.dup("ROPE", g.reshape(kv, hd, 1, nt), pos)
    ratio = s.ratios[il]
    if ratio == CSA:
        compress(g, s, p, ins, cur, "csa", CSA, "attn_compressor", hd)
        compress(g, s, p, ins, cur, "lid", CSA, "indexer_compressor", s.indexer_head)
    elif ratio == HCA:
        compress(g, s, p, ins, cur, "hca", HCA, "attn_compressor", hd)
    out = attend(g, s, p, ins, ratio, q, kv, qr, cur, pos)
    out = g.dup("ROPE_BACK", g.reshape(out, hd, n_head, nt), pos)
    group = n_head // s.o_groups * hd
    out = g.permute(g.reshape(out, group, s.o_groups, nt), 0, 2, 1, 3)
    oa = g.mul_mat(g.weight(group, s.o_lora, s.o_groups, name="attn_output_a"), out)
    oa = g.cont(g.permute(oa, 0, 2, 1, 3), s.o_lora * s.o_groups, nt)
    return g.mul_mat(g.weight(s.o_groups * s.o_lora, e, name="attn_output_b"), oa)


def _moe(g: Graph, s: DSV4Shape, il: int, cur, tokens):
    """build_moe_ffn (llama.cpp@0c1e57098 src/llama-graph.cpp#L2007-L2372) as deepseek4 calls it
    (src/models/deepseek4.cpp#L1278-L1320)."""
    e, nt, n_exp, n_used = s.n_embd, cur.ne[1], s.n_expert, s.n_expert_used
    logits = g.mul_mat(g.weight(e, n_exp, name="ffn_gate_inp"), cur)
    probs = g.dup("SQRT", g.dup("UNARY", logits))       # sqrt(softplus(logits))
    if il < s.n_hash:
        selected = g.get_rows(g.weight(n_used, s.n_vocab, type_="i32", name="ffn_gate_tid2eid"), tokens)
    else:
        selected = g.argsort_top_k(g.dup("ADD", probs, g.weight(n_exp, name="exp_probs_b.bias")), n_used)
    weights = routed_weights(g, s, g.get_rows(g.reshape(probs, 1, n_exp, nt), selected), n_used, nt)
    x, f = g.reshape(cur, e, 1, nt), s.n_ff_exp
    up = g.mul_mat_id(g.weight(e, f, n_exp, name="ffn_up_exps"), x, selected)
    gate = g.mul_mat_id(g.weight(e, f, n_exp, name="ffn_gate_exps"), x, selected)
    down = g.mul_mat_id(g.weight(f, e, n_exp, name="ffn_down_exps"), g.dup("GLU", gate, up), selected)
    down = g.dup("MUL", down, weights)
    g.expand(down)
    return experts_sum(g, down, e, nt, n_used)


def build_dsv4(s: DSV4Shape, p: Pass) -> Graph:
    """The graph llama.cpp builds for one reserve of ``p`` (llama.cpp@0c1e57098 src/models/deepseek4.cpp#L1222-L1359;
    module docstring)."""
    g = Graph()
    e, hc, nt = s.n_embd, s.hc, p.n_tokens
    tokens, embd, pos = token_inputs(g, s, p)
    out_ids = g.input("i32", p.n_outputs)
    ins = dsv4_inputs(g, s, p)
    x = embeddings(g, s, tokens, embd)
    g.expand(ins.raw_mask)
    x = g.op("REPEAT", "f32", (e, hc, nt, 1), g.reshape(x, e, 1, nt))
    for il in range(s.n_layer):
        g.layer = il
        residual = x
        cur, post, comb = _hc_pre(g, s, x, "hc_attn")
        cur = _attention(g, s, p, ins, il, rms_norm(g, cur, e, "attn_norm"), pos)
        x = residual = g.op("DSV4_HC_POST", "f32", (e, hc, nt), cur, residual, post, comb)
        cur, post, comb = _hc_pre(g, s, x, "hc_ffn")
        for t in (residual, post, comb):
            g.expand(t)
        cur = rms_norm(g, cur, e, "ffn_norm")
        cur = g.dup("ADD", _moe(g, s, il, cur, tokens), dense_ffn(g, cur, e, s.n_ff_shexp, "_shexp"))
        x = g.op("DSV4_HC_POST", "f32", (e, hc, nt), cur, residual, post, comb)
    g.layer = s.n_layer
    x = g.reshape(g.get_rows(g.reshape(x, e * hc, nt), out_ids), e, hc, p.n_outputs)
    return output_head(g, s, _hc_head(g, s, x))


def dsv4_shape(model) -> DSV4Shape | None:
    """The graph widths of a deepseek_v4 ``model`` as conversion/deepseek.py writes its GGUF, or None where llama.cpp
    would load none (kvmem.engines.llamacpp.dsv4 and graphs_dsv4 say why) or build another graph (hc_mult other than
    4: build_hc_pre asserts it, llama.cpp@0c1e57098 src/models/deepseek4.cpp#L366)."""
    moe, layers = model.facts.moe, model.layers
    if model.model_type not in DSV4 or moe is None or not moe.experts or not layers or not model.facts.vocab_size:
        return None
    keys = ("q_lora_rank", "o_groups", "o_lora_rank", "hc_mult", "index_n_heads", "index_head_dim", "index_topk",
            "moe_intermediate_size")
    if any(not field(model, key) for key in keys) or field(model, "hc_mult") != 4:
        return None
    ratios = tuple(layer.compressor.rate if layer.compressor else 0 for layer in layers)
    if any(r not in (0, CSA, HCA) for r in ratios):
        return None
    scale = field(model, "routed_scaling_factor")
    f = field(model, "moe_intermediate_size")
    return DSV4Shape(arch="deepseek4", n_layer=len(layers), n_embd=model.hidden_size, n_head=model.num_attention_heads,
                     n_head_kv=1, head_dim=layers[0].head_dim_k, n_ff=0, n_vocab=model.facts.vocab_size,
                     n_expert=moe.experts, n_expert_used=moe.top_k, n_ff_exp=f,
                     n_ff_shexp=f * field(model, "n_shared_experts", 0), q_lora=field(model, "q_lora_rank"),
                     rope_dim=field(model, "qk_rope_head_dim", 64), gating="sqrtsoftplus", probs_bias=True,
                     norm_w=bool(field(model, "norm_topk_prob")), scale_w=scale not in (None, 0, 1),
                     n_indexer_head=field(model, "index_n_heads"), indexer_head=field(model, "index_head_dim"),
                     indexer_top_k=field(model, "index_topk"), indexer_full=tuple(r == CSA for r in ratios),
                     ratios=ratios, hc=4, o_groups=field(model, "o_groups"), o_lora=field(model, "o_lora_rank"),
                     n_hash=field(model, "num_hash_layers", 0))

"""llama.cpp's minimax-01 architecture (MiniMax-Text-01, MiniMax-M1: lightning-attention layers with one softmax layer
in eight, MoE in every layer), its tensors as the GGUF holds them (the cache: families.py, minimax).

Transcribed from the vendored llama.cpp (llama-cpp-python 0.3.36, llama.cpp 0c1e57098), src/models/minimax-01.cpp:

    load_arch_hparams (L4-L23): the recurrent (lightning) layers from attention.recurrent_layers, else every layer
        but each full_attention_interval-th (8 when the key is absent): conversion/minimax.py MiniMaxText01Model
        writes neither, so llama.cpp's layers are (il + 1) % 8 != 0 whatever the config's attn_type_list says.
    load_arch_tensors (L25-L59): token_embd, output_norm, output; per layer attn_norm; a softmax layer separate
        Q/K/V (create_tensor_qkv, llama-model.cpp#L3396-L3431: no fused attn_qkv in a converted file, no biases); a
        lightning layer attn_norm_2 [n_head x head_dim] (self_attn.norm), attn_qkv [n_embd, 3 x n_head x head_dim]
        (self_attn.qkv_proj) and attn_gate [n_embd, n_head x head_dim] (self_attn.output_gate: gguf-py
        tensor_mapping.py#L228, #L395); attn_output; ffn_norm, the router and the routed experts of
        feed_forward_length (intermediate_size: conversion/minimax.py#L86-L121 stacks w1/w2/w3); no shared expert.
    graph (L186-L484), over llama.cpp's hybrid memory (a KV cache for the softmax layers, a recurrent one holding
        each lightning layer's head_dim x head_dim x n_head f32 state and an empty conv state, n_embd_r() 0):
        build_inp_embd, build_inp_mem_hybrid (src/llama-graph.cpp#L3633-L3642: s_copy [n_rs] and its views, then the
        KV indices and mask), build_inp_pos, build_inp_out_ids, the lightning inputs (slopes [n_head], q_decay and
        k_decay [1, n_head, tokens, seqs], diag_decay [tokens, tokens, n_head, seqs]); per layer attn_norm (RMS) kept
        as the residual; a softmax layer build_qkv, Q and K roped, build_attn with attn_output; a lightning layer
        build_rs of the empty conv state (expanded), slopes scaled, attn_qkv and its silu, Q/K/V views, build_rs of
        the state (src/llama-graph.cpp#L3512-L3546), the decays (scale, exp), q_s, the non-diagonal and diagonal
        products and their sum (expanded), the block decay, the new state (kv_old x decay + K'^T V) copied into the
        memory, the output permuted and made contiguous, RMS-normed by attn_norm_2, x sigmoid(attn_gate . x),
        attn_output; in the last layer the output and the residual's rows by out_ids; the residual scaled
        (residual_scale), added; ffn_norm kept as the residual, build_moe_ffn (softmax, weights normalised, no
        scale), the scaled residual added. Then output_norm and the lm_head.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ...layer import FULL
from .arch_fields import field, need
from .ggml_graph import TYPES, Graph, Tensor
from .graphs import Pass, attention, attn_inputs, embeddings, output_head, qkv_heads, token_inputs
from .graphs_delta import DeltaShape
from .graphs_mla_oss import moe_ffn, rms_norm

__all__ = ["MINIMAX01", "MINIMAX_M3", "Minimax01Shape", "build_minimax01", "check_minimax01_streams", "minimax01_once",
           "minimax01_shape", "minimax01_tensors", "minimax_m3_tensors"]

# kvmem model_type (MiniMaxText01ForCausalLM / MiniMaxM1ForCausalLM) -> llama.cpp architecture "minimax-01"
MINIMAX01 = {"minimax": "minimax-01"}
INTERVAL = 8        # llama.cpp@0c1e57098 src/models/minimax-01.cpp#L12-L17: full_attention_interval's default


def recurrent(model) -> list:
    """Which layers llama.cpp makes lightning attention (the module docstring); refused where kvmem's layers from
    the config differ, since the GGUF carries no layer list for llama.cpp to follow."""
    out = [(il + 1) % INTERVAL != 0 for il in range(model.num_layers)]
    for il, layer in enumerate(model.layers):
        if (layer.kind != FULL) != out[il]:
            raise ValueError(f"{model.name}: layer {il} is {layer.kind.value!r}; llama.cpp's minimax-01 makes every "
                             f"{INTERVAL}th layer softmax attention and the others lightning attention (the converter "
                             "writes no layer list: llama.cpp@0c1e57098 src/models/minimax-01.cpp#L12-L17)")
    return out


def check_minimax01_streams(model, n_seq: int, unified: bool, n_tokens: int) -> None:
    """minimax-01's third reserve (one sequence of ``n_tokens`` = min(n_ctx, n_ubatch), not rounded: minimax01_once)
    over n_seq KV streams aborts llama.cpp 0c1e57098 where n_tokens is not a multiple of the streams and a softmax
    layer comes before the last: GGML_ASSERT(ggml_can_repeat(b, a)) (ggml/src/ggml.c#L2072) while the context is
    created. Seen here, llama.cpp run on sparse GGUFs (kvmem.oracles.llamacpp_minimax01's configs): 16 layers, 3
    sequences and -ub 32, 2 and 33, 3 and n_ctx 100, 4 and 34 abort; 3 and 30 or 33, 5 and 35 build; 9 layers (a softmax
    layer at 7) with 3 and 32 aborts, with --kv-unified builds; 8 layers (softmax in the last alone) build."""
    if MINIMAX01.get(model.model_type) is None or unified or n_seq <= 1 or n_tokens % n_seq == 0:
        return
    if all(recurrent(model)[:-1]):
        return
    raise ValueError(f"{model.name}: n_ubatch {n_tokens} over {n_seq} sequences with a KV stream each: llama.cpp "
                     "aborts creating this minimax-01 context (GGML_ASSERT(ggml_can_repeat(b, a)) in its third "
                     f"reserve, one sequence of {n_tokens} tokens); give -ub a multiple of {n_seq}, or --kv-unified")


def minimax01_tensors(model, h: int) -> list:
    """(name, ne) of a minimax-01 GGUF's trunk after output / output_norm / token_embd (the module docstring)."""
    # llama.cpp@0c1e57098 src/models/minimax-01.cpp#L25-L59 load_arch_tensors
    moe = model.facts.moe
    if moe is None or not moe.experts:
        raise ValueError(f"{model.name}: llama.cpp's minimax-01 layers are MoE, and the config gives no experts")
    n_head, f, e = model.num_attention_heads, need(model, "intermediate_size"), moe.experts
    linears = recurrent(model)
    full = model.layers[linears.index(False)] if False in linears else model.layers[0]
    hd, kv = full.head_dim_k, full.kv_heads * full.head_dim_k      # key_length: one head_dim for every layer
    q = n_head * hd
    out: list[tuple[str, tuple[int, ...]]] = []
    for il, linear in enumerate(linears):
        b = f"blk.{il}."
        out.append((b + "attn_norm.weight", (h,)))
        if linear:
            out += [(b + "attn_norm_2.weight", (q,)), (b + "attn_qkv.weight", (h, 3 * q)),
                    (b + "attn_gate.weight", (h, q))]
        else:
            out += [(b + "attn_q.weight", (h, q)), (b + "attn_k.weight", (h, kv)), (b + "attn_v.weight", (h, kv))]
        out += [(b + "attn_output.weight", (q, h)), (b + "ffn_norm.weight", (h,)), (b + "ffn_gate_inp.weight", (h, e)),
                (b + "ffn_gate_exps.weight", (h, f, e)), (b + "ffn_down_exps.weight", (f, h, e)),
                (b + "ffn_up_exps.weight", (h, f, e))]
    return out



@dataclass(frozen=True)
class Minimax01Shape(DeltaShape):
    """GraphShape's widths with, per layer, whether it is a lightning layer (``recurrent``: graphs_delta's field, so
    compute and scheduled treat it as they treat the DeltaNet hybrids: n_seqs, reduced_layers); d_state and the
    other DeltaNet widths unused; ``ubatch_seqs``: the reserve's ubatch sequences where they are not the memory's
    n_seqs rows (minimax01_once: 1)."""

    ubatch_seqs: int = 0


F32 = TYPES["f32"][1]


def _cpy(a: Tensor, dst: Tensor) -> Tensor:
    """ggml_cpy: a view of ``dst`` (op CPY)."""
    return Tensor(dst.type, dst.ne, "CPY", (a, dst), view_src=dst, nb=dst.nb)


def _rs(g: Graph, s: Tensor, size: int, s_copy: tuple) -> Tensor:
    """build_rs over the whole memory (init_full: head 0, rs_z 0, n_rs its rows: minimax-01 keeps no rollback
    snapshots): one state zeroed in place, the rows of s_copy_main, the other n_rs - n_seqs rows copied back."""
    main, extra = s_copy
    states = g.reshape(s, size, s.ne[1])
    g.expand(Tensor(states.type, (size,), "SCALE", (g.view(states, (size,), (F32,)),), view_src=states))
    out = g.get_rows(states, main)
    g.expand(out)
    g.expand(_cpy(g.get_rows(states, extra), g.view(s, (size, extra.ne[0]), (F32, s.nb[1]))))
    return out


def _lightning(g: Graph, s: Minimax01Shape, cur, n_seqs: int, n_rs: int, s_copy: tuple, la: tuple):
    slopes, q_decay_exp, k_decay_exp, diag_decay_exp = la
    hd, n_head, e = s.head_dim, s.n_head, s.n_embd
    nst, q = cur.ne[1] // n_seqs, hd * s.n_head
    state_size = hd * hd * n_head
    g.expand(_rs(g, g.weight(0, n_rs, kv=True, name="cache_r"), 0, s_copy))
    slope_rate = g.dup("SCALE", slopes)
    cur = g.reshape(cur, e, nst, 1, n_seqs)
    qkv = g.dup("UNARY", g.mul_mat(g.weight(e, 3 * q, name="attn_qkv"), cur))
    qkv = g.reshape(qkv, 3 * hd, n_head, nst, n_seqs)
    q_cur, k_cur, v_cur = (g.view(qkv, (hd, n_head, nst, n_seqs), (F32,) + qkv.nb[1:]) for _ in range(3))
    la_states = g.weight(state_size, n_rs, kv=True, name="cache_s")
    kv_old = g.reshape(_rs(g, la_states, state_size, s_copy), hd, hd, n_head, n_seqs)
    q_decay, k_decay, diag_decay = (g.dup("UNARY", g.dup("SCALE", x)) for x in (q_decay_exp, k_decay_exp,
                                                                                  diag_decay_exp))
    q_s = g.dup("MUL", q_cur, q_decay)
    none_diag = g.mul_mat(kv_old, g.permute(q_s, 0, 2, 1, 3))
    qk = g.mul_mat(g.permute(k_cur, 0, 2, 1, 3), g.permute(q_cur, 0, 2, 1, 3))
    qk = g.dup("MUL", qk, diag_decay)
    v_trans = g.cont(g.permute(v_cur, 1, 2, 0, 3))
    out = g.dup("ADD", none_diag, g.mul_mat(v_trans, qk))
    g.expand(out)
    block_decay = g.reshape(g.dup("UNARY", g.dup("SCALE", slope_rate)), 1, 1, n_head)
    kv_old_s = g.dup("MUL", kv_old, block_decay)
    k_after = g.cont(g.permute(g.dup("MUL", k_cur, k_decay), 1, 2, 0, 3))
    kv_new = g.dup("ADD", kv_old_s, g.mul_mat(k_after, v_trans))
    g.expand(_cpy(kv_new, g.view(la_states, (state_size * n_seqs,), (F32,))))
    out = g.reshape(g.cont(g.permute(out, 0, 2, 1, 3)), q, nst, 1, n_seqs)
    normed = rms_norm(g, out, q, "attn_norm_2")
    gate = g.dup("UNARY", g.mul_mat(g.weight(e, q, name="attn_gate"), cur))
    cur = g.mul_mat(g.weight(q, e, name="attn_output"), g.dup("MUL", gate, normed))
    return g.reshape(cur, e, nst * n_seqs)


def build_minimax01(s: Minimax01Shape, p: Pass) -> Graph:
    """llama_model_minimax_01::graph for one reserve ``p`` (module docstring): the memory's rows s.n_seqs (else
    p.n_stream), the ubatch's sequences s.ubatch_seqs (else as many)."""
    n_rs = s.n_seqs or p.n_stream
    n_seqs = s.ubatch_seqs or n_rs
    g = Graph()
    e, nst = s.n_embd, p.n_tokens // n_seqs
    tokens, embd, pos = token_inputs(g, s, p)
    s_copy = g.input("i32", n_rs)
    s_copy_views = (g.view(s_copy, (n_seqs,), (4,)), g.view(s_copy, (n_rs - n_seqs,), (4,)))
    inputs = attn_inputs(g, p, s, p.n_kv)
    out_ids = g.input("i32", p.n_outputs)
    la = (g.input("f32", s.n_head), g.input("f32", 1, s.n_head, nst, n_seqs),
          g.input("f32", 1, s.n_head, nst, n_seqs), g.input("f32", nst, nst, s.n_head, n_seqs))
    inp_l = embeddings(g, s, tokens, embd)
    for il in range(s.n_layer):
        g.layer = il
        cur = rms_norm(g, inp_l, e, "attn_norm")
        residual = cur
        if s.recurrent[il]:
            cur = _lightning(g, s, cur, n_seqs, n_rs, s_copy_views, la)
        else:
            q, k, v = qkv_heads(g, s, p, cur, False)
            q, k = g.dup("ROPE", q, pos), g.dup("ROPE", k, pos)
            cur = attention(g, q, k, v, inputs, p, s, p.n_kv)
            cur = g.mul_mat(g.weight(s.n_head * s.head_dim, e, name="attn_output"), cur)
        if il == s.n_layer - 1:
            cur, residual = g.get_rows(cur, out_ids), g.get_rows(residual, out_ids)
        ffn_inp = g.dup("ADD", cur, g.dup("SCALE", residual))
        cur = rms_norm(g, ffn_inp, e, "ffn_norm")
        inp_l = g.dup("ADD", moe_ffn(g, cur, s), g.dup("SCALE", cur))
    return output_head(g, s, inp_l)


def minimax01_once(shape, p: Pass) -> Graph | None:
    """minimax-01's third reserve (src/llama-context.cpp#L711-L726: graph_reserve(n_tokens, 1, n_outputs_pp) for
    LLM_ARCH_MINIMAX_01, its diag_decay input growing with the square of a sequence's tokens): ``p`` the prompt's
    tokens unrounded, one KV stream, one sequence over the memory's shape.n_seqs rows; None for any other shape or
    one sequence (then the first prompt reserve's graph)."""
    if not isinstance(shape, Minimax01Shape) or shape.n_seqs <= 1:
        return None
    return build_minimax01(replace(shape, ubatch_seqs=1), p)


def minimax01_shape(model) -> Minimax01Shape | None:
    """The graph widths of a minimax-01 ``model`` as convert_hf_to_gguf writes its GGUF, or None where its layers
    are not llama.cpp's (minimax01_tensors refuses those)."""
    moe = model.facts.moe
    if MINIMAX01.get(model.model_type) is None or moe is None or not moe.experts or not model.facts.vocab_size:
        return None
    try:
        linears = recurrent(model)
    except ValueError:
        return None
    if False not in linears:
        return None
    full = model.layers[linears.index(False)]
    return Minimax01Shape(arch="minimax-01", n_layer=model.num_layers, n_embd=model.hidden_size,
                          n_head=model.num_attention_heads, n_head_kv=full.kv_heads, head_dim=full.head_dim_k, n_ff=0,
                          n_vocab=model.facts.vocab_size, n_expert=moe.experts, n_expert_used=moe.top_k,
                          n_ff_exp=field(model, "intermediate_size", 0) or moe.intermediate_size, gating="softmax",
                          norm_w=True, recurrent=tuple(linears))

# MiniMax-M3's text model (MiniMaxM3SparseForCausalLM, and the text half of MiniMaxM3SparseForConditionalGeneration:
# conversion/minimax.py MiniMaxM3Model) -> llama.cpp architecture "minimax-m3"
MINIMAX_M3 = {"minimax_m3": "minimax-m3", "minimax_m3_text": "minimax-m3", "minimax_m3_vl_text": "minimax-m3"}


def _m3_dense_lead(model) -> int:
    """leading_dense_block_count: the leading zeros of moe_layer_freq (conversion/minimax.py#L191-L198)."""
    freq = field(model, "moe_layer_freq")
    if not isinstance(freq, list) or not freq:
        raise ValueError(f"{model.name}: config field 'moe_layer_freq' is {freq!r}; llama.cpp's converter "
                         "(conversion/minimax.py MiniMaxM3Model.set_gguf_parameters) reads it as a list")
    n = 0
    while n < len(freq) and freq[n] == 0:
        n += 1
    return n


def minimax_m3_tensors(model, h: int) -> list:
    """(name, ne) of a minimax-m3 GGUF's trunk after output / output_norm / token_embd: llama.cpp@0c1e57098
    src/models/minimax-m3.cpp#L40-L90 load_arch_tensors -- per layer separate Q/K/V (create_tensor_qkv), attn_output,
    attn_norm, one attn_q_norm / attn_k_norm of head_dim for every head, ffn_norm; the leading dense layers an FFN of
    feed_forward_length (dense_intermediate_size: conversion/base.py#L1445-L1446); the others the router,
    exp_probs_b, routed experts of expert_feed_forward_length (intermediate_size: conversion/minimax.py#L131),
    n_shared_experts shared ones as wide, and the MSA indexer (indexer.q_proj [n_embd, index heads x index dim],
    indexer.k_proj [n_embd, index dim], their norms)."""
    moe = model.facts.moe
    if moe is None or not moe.experts:
        raise ValueError(f"{model.name}: llama.cpp's minimax-m3 layers are MoE, and the config gives no experts")
    if field(model, "qk_norm_type", "per_head") != "per_head" or field(model, "attention_output_gate", False):
        raise ValueError(f"{model.name}: qk_norm_type {field(model, 'qk_norm_type')!r} / attention_output_gate "
                         f"{field(model, 'attention_output_gate')!r}: llama.cpp's minimax-m3 loads one head_dim "
                         "q/k norm for every head and no output gate (src/models/minimax-m3.cpp#L57-L61)")
    sparse = field(model, "sparse_attention_config")
    if not isinstance(sparse, dict) or not all(isinstance(sparse.get(k), int) for k in
                                               ("sparse_num_index_heads", "sparse_index_dim")):
        raise ValueError(f"{model.name}: config field 'sparse_attention_config' lacks sparse_num_index_heads / "
                         "sparse_index_dim, which llama.cpp's converter writes as the indexer's head count and key "
                         "length (conversion/minimax.py#L184-L189)")
    lead = _m3_dense_lead(model)
    ih, ihd = sparse["sparse_num_index_heads"], sparse["sparse_index_dim"]
    if [bool(layer.index_head_dim) for layer in model.layers] != [il >= lead for il in range(model.num_layers)]:
        raise ValueError(f"{model.name}: the config's sparse layers are not the layers after the {lead} leading dense "
                         "ones, which llama.cpp's minimax-m3 gives the MSA indexer (src/models/minimax-m3.cpp#L65-L88)")
    n_head, e, f = model.num_attention_heads, moe.experts, need(model, "intermediate_size")
    dense_f = need(model, "dense_intermediate_size") if lead else 0
    shared = f * (field(model, "n_shared_experts", 0) or 0)
    out: list[tuple[str, tuple[int, ...]]] = []
    for il, layer in enumerate(model.layers):
        b, hd = f"blk.{il}.", layer.head_dim_k
        kv = layer.kv_heads * hd
        out += [(b + "attn_q.weight", (h, n_head * hd)), (b + "attn_k.weight", (h, kv)), (b + "attn_v.weight", (h, kv)),
                (b + "attn_output.weight", (n_head * hd, h)), (b + "attn_norm.weight", (h,)),
                (b + "attn_q_norm.weight", (hd,)), (b + "attn_k_norm.weight", (hd,)), (b + "ffn_norm.weight", (h,))]
        if il < lead:
            out += [(b + "ffn_gate.weight", (h, dense_f)), (b + "ffn_down.weight", (dense_f, h)),
                    (b + "ffn_up.weight", (h, dense_f))]
            continue
        out += [(b + "ffn_gate_inp.weight", (h, e)), (b + "exp_probs_b.bias", (e,)),
                (b + "ffn_gate_exps.weight", (h, f, e)), (b + "ffn_down_exps.weight", (f, h, e)),
                (b + "ffn_up_exps.weight", (h, f, e)), (b + "ffn_gate_shexp.weight", (h, shared)),
                (b + "ffn_down_shexp.weight", (shared, h)), (b + "ffn_up_shexp.weight", (h, shared)),
                (b + "indexer.q_proj.weight", (h, ih * ihd)), (b + "indexer.k_proj.weight", (h, ihd)),
                (b + "indexer.q_norm.weight", (ihd,)), (b + "indexer.k_norm.weight", (ihd,))]
    return out

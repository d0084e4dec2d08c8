"""llama.cpp's hybrid Gated DeltaNet forward graphs (qwen3next: Qwen3-Next; qwen35 / qwen35moe: Qwen3.5, Qwen3.6),
node by node: gated DeltaNet linear-attention layers and a gated full-attention layer every
full_attention_interval-th, over llama.cpp's hybrid memory (a KV cache for the full layers, a recurrent one for
the others).

Transcribed from the vendored llama.cpp (llama-cpp-python 0.3.36, llama.cpp 0c1e57098):

    graph       src/models/qwen3next.cpp llama_model_qwen3next::graph::graph (L138-L223), qwen35moe.cpp and
                qwen35.cpp the same trunk: build_inp_embd, build_inp_mem_hybrid (src/llama-graph.cpp#L3633-L3642:
                the recurrent input rs_s_copy [n_rs] i32 with its views s_copy_main [n_seqs] and s_copy_extra
                [n_rs - n_seqs], then build_attn_inp_kv_impl's K/V indices and mask), build_inp_pos,
                build_inp_out_ids; per layer attn_norm (expanded at once), the linear or the full attention, the
                residual, post_attention_norm, the FFN, the residual; no rows picked in the last layer
                (embeddings_nextn_masked is false, src/llama-context.cpp#L120): output_norm (h_nextn, an output),
                its rows by out_ids (result_norm), the lm_head.
    full attn   qwen3next.cpp build_layer_attn (L236-L312): build_qkv without reshape, attn_q twice as wide
                (query and gate), Q and the gate views of its 4-D reshape, K, V reshaped, Q then K RMS-normed,
                roped, build_attn with no output weight (graphs.attention), the gate made contiguous, its sigmoid,
                the product, attn_output. qwen35moe.cpp / qwen35.cpp build_layer_attn: Q a 3-D view, Q normed, K
                reshaped and normed, the gate's view made contiguous before the RoPE (ggml_rope_multi, one ROPE
                node), V reshaped, then attention, the gate's sigmoid, the product, attn_output.
    linear attn qwen3next.cpp build_layer_attn_linear (L395-L563), build_qkvz's fused path (attn_qkv and attn_gate:
                conversion/qwen.py writes them, not ssm_in): qkv_mixed reshaped per sequence, z; qwen3next's
                ssm_ba product split into beta (made contiguous, sigmoid) and alpha (cont_3d), qwen35's separate
                ssm_beta (sigmoid) and ssm_alpha; alpha + ssm_dt, softplus, x ssm_a; build_conv_state
                (models/delta-net-base.cpp#L449-L525: build_rs of the conv states, the transposed
                qkv_mixed concatenated after them, the last d_conv - 1 columns copied back), build_rs of the ssm
                state (src/llama-graph.cpp#L3512-L3546: one state zeroed in place, the rows of s_copy_main, the
                extra rows copied back), ggml_ssm_conv, silu, the Q/K/V views, Q and K L2-normed
                (models.h build_gdn_l2_norm: RMS norm, scale), repeated to the value heads (ggml_repeat_4d) when
                there are fewer key heads, build_recurrent_attn (delta-net-base.cpp#L527-L566: the fused
                ggml_gated_delta_net, cparams.fused_gdn_ar / fused_gdn_ch default true, its output and new state
                views, the state copied back), the gated norm (RMS norm x ssm_norm, x silu(z)), ssm_out.
    ffn         qwen3next.cpp build_layer_ffn (L565-L626): build_moe_ffn (softmax gating, weights normalised,
                no selection bias, expert_weights_scale unset: no SCALE) then the shared expert's build_ffn,
                x sigmoid(ffn_gate_inp_shexp . x), added; qwen35 (dense): build_ffn.

Covered: one sequence or several (a KV stream each, or unified), n_rs_seq 0 (llama-context.cpp#L105-L110: the
default) or more (with_rs_seq: qwen35 / qwen35moe keep n_rs_seq + 1 state slots per sequence in the memory and in the
gated delta net's output, the conv state copied per slot; qwen3next has no rollback, llama.cpp clamps it to 0).
Wired into kvmem.engines.llamacpp.compute.graph_shape and the scheduled GPU path: the recurrent part is
built over the reserve's sequences (ubatch.n_seqs = n_seq_max in sched_reserve, whatever the KV streams), which
compute.graph_bytes and scheduled put in the shape (``with_seqs``: Pass holds the KV streams); scheduled.reduced_layers
cuts runs of equal layers with linear vs full attention in a layer's signature.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .arch_fields import field
from .ggml_graph import OUTPUT, TYPES, Graph, Tensor
from .graphs import GraphShape, Pass, attention, attn_inputs, embeddings, token_inputs
from .graphs_mla_oss import dense_ffn, moe_ffn, rms_norm

__all__ = ["DELTA", "RS_ROLLBACK", "DeltaShape", "build_delta", "delta_shape", "hybrid_graph_bytes", "with_rs_seq",
           "with_seqs"]

# kvmem model_type -> the llama.cpp architecture whose graph this module transcribes (arch_tensors.ARCHS)
DELTA = {"qwen3_next": "qwen3next", "qwen3_5": "qwen35", "qwen3_5_text": "qwen35", "qwen3_5_moe": "qwen35moe",
         "qwen3_5_moe_text": "qwen35moe"}
F32 = TYPES["f32"][1]


@dataclass(frozen=True)
class DeltaShape(GraphShape):
    """GraphShape's widths and the linear-attention ones (GGUF ssm.*)."""

    recurrent: tuple = ()       # per layer: a gated DeltaNet layer (else full attention)
    d_conv: int = 0             # ssm.conv_kernel
    d_state: int = 0            # ssm.state_size: the key (and value) head width
    n_k_heads: int = 0          # ssm.group_count
    n_v_heads: int = 0          # ssm.time_step_rank
    d_inner: int = 0            # ssm.inner_size: n_v_heads x the value head width
    n_seqs: int = 0             # the reserve's sequences (n_seq_max) where set by with_seqs; 0: Pass.n_stream
    n_rs_seq: int = 0           # cparams.n_rs_seq: rollback snapshots per sequence (with_rs_seq)


def with_seqs(shape: GraphShape, n_seq: int) -> GraphShape:
    """``shape`` with the reserve's sequences for the recurrent part (a DeltaShape; any other shape as it is)."""
    if isinstance(shape, DeltaShape) and shape.n_seqs != n_seq:
        return replace(shape, n_seqs=n_seq)
    return shape


# llama.cpp@0c1e57098 src/llama-arch.cpp#L1123-L1140 llm_arch_supports_rs_rollback: of these graphs only qwen35 and
# qwen35moe; llama_context's constructor clamps n_rs_seq to 0 for any other (src/llama-context.cpp#L105-L110)
# nemotron_h: graphs_ssm (Mamba-2's K)
RS_ROLLBACK: tuple[str, ...] = ("qwen35", "qwen35moe", "nemotron_h", "nemotron_h_moe")
RS_ROLLBACK += ("kimi-k3",)     # graphs_kimi_k3


def with_rs_seq(shape: GraphShape, n_rs_seq) -> GraphShape:
    """``shape`` with the context's rollback snapshots per sequence (``n_rs_seq``: llama_context_params.n_rs_seq,
    which common_params_speculative::need_n_rs_seq sets to --spec-draft-n-max with a draft-mtp / eagle3 / dflash /
    dspark --spec-type: llama.cpp@0c1e57098 common/common.h#L396-L402, common/common.cpp#L1635), as llama_context
    keeps it (clamped to 0 where the architecture has no rollback); any other shape as it is."""
    if isinstance(shape, DeltaShape):
        n = int(n_rs_seq or 0) if shape.arch in RS_ROLLBACK else 0
        return replace(shape, n_rs_seq=n) if n != shape.n_rs_seq else shape
    return shape


def _cpy(a: Tensor, dst: Tensor) -> Tensor:
    """ggml_cpy: a view of ``dst`` (op CPY)."""
    return Tensor(dst.type, dst.ne, "CPY", (a, dst), view_src=dst, nb=dst.nb)


def _scale_inplace(a: Tensor) -> Tensor:
    return Tensor(a.type, a.ne, "SCALE", (a,), view_src=a, nb=a.nb)


def _rs(g: Graph, s: Tensor, state_size: int, s_copy: tuple) -> Tensor:
    """llm_graph_context::build_rs over the whole memory (init_full: n_rs = its size n_seqs, head 0, rs_z 0; the
    states reshaped over all s.ne[1] rows, the snapshots' too)."""
    main, extra = s_copy
    states = g.reshape(s, state_size, s.ne[1])
    g.expand(_scale_inplace(g.view(states, (state_size,), (F32,))))
    out = g.get_rows(states, main)
    g.expand(out)
    rest = g.get_rows(states, extra)
    g.expand(_cpy(rest, g.view(s, (state_size, 0), (F32, s.nb[1]))))      # n_rs - n_seqs = 0 rows
    return out


def _linear_attention(g: Graph, s: DeltaShape, cur, n_seqs: int, s_copy: tuple):
    n_tokens = cur.ne[1]
    nst = n_tokens // n_seqs
    hk, nk, nv = s.d_state, s.n_k_heads, s.n_v_heads
    hv = s.d_inner // nv
    channels = s.d_inner + 2 * nk * hk
    qkv = g.mul_mat(g.weight(s.n_embd, channels, name="attn_qkv"), cur)
    qkv = g.reshape(qkv, qkv.ne[0], nst, n_seqs)
    z = g.mul_mat(g.weight(s.n_embd, s.d_inner, name="attn_gate"), cur)
    if s.arch == "qwen3next":
        ba = g.mul_mat(g.weight(s.n_embd, 2 * nv, name="ssm_ba"), cur)
        ba = g.reshape(ba, 2 * nv // nk, nk, nst, n_seqs)
        b = g.view(ba, (nv // nk, nk, nst, n_seqs), ba.nb)
        a = g.view(ba, (nv // nk, nk, nst, n_seqs), ba.nb)
        beta = g.dup("UNARY", g.cont(b))
        alpha = g.cont(a, nv, nst, n_seqs)
    else:
        beta = g.mul_mat(g.weight(s.n_embd, nv, name="ssm_beta"), cur)
        beta = g.dup("UNARY", g.reshape(beta, 1, nv, nst, n_seqs))
        alpha = g.reshape(g.mul_mat(g.weight(s.n_embd, nv, name="ssm_alpha"), cur), nv, nst, n_seqs)
    gate = g.dup("UNARY", g.dup("ADD", alpha, g.weight(nv, name="ssm_dt.bias")))
    gate = g.dup("MUL", gate, g.weight(nv, name="ssm_a"))
    if s.arch == "qwen3next":
        beta = g.reshape(beta, 1, nv, nst, n_seqs)
    gate = g.reshape(gate, 1, nv, nst, n_seqs)
    # the recurrent memory's rows: max(1, n_seq_max) x (1 + n_rs_seq) (src/llama-memory-recurrent.cpp#L101-L103)
    n_rows, keep = n_seqs * (1 + s.n_rs_seq), s.n_rs_seq + 1
    conv_all = g.weight((s.d_conv - 1) * channels, n_rows, kv=True, name="cache_r")
    ssm_all = g.weight(s.d_state * s.d_inner, n_rows, kv=True, name="cache_s")
    # build_conv_state; n_rs_seq > 0: a copy of the last d_conv - 1 columns per snapshot slot, views all
    # (llama.cpp@0c1e57098 src/models/delta-net-base.cpp#L479-L521)
    conv_states = _rs(g, conv_all, (s.d_conv - 1) * channels, s_copy)
    conv_states = g.reshape(conv_states, s.d_conv - 1, channels, n_seqs)
    conv_input = g.concat(conv_states, g.transpose(qkv), 0)
    for _ in range(keep if s.n_rs_seq else 1):
        last = g.view(conv_input, (s.d_conv - 1, channels, n_seqs), conv_input.nb[:3])
        g.expand(_cpy(last, g.view(conv_all, ((s.d_conv - 1) * channels, n_seqs), (F32, conv_all.nb[1]))))
    state = _rs(g, ssm_all, s.d_state * s.d_inner, s_copy)
    state = g.reshape(state, hv, hv, nv, n_seqs)
    conv = g.op("SSM_CONV", "f32", (channels, nst, n_seqs), conv_input, g.weight(s.d_conv, channels,
                                                                                 name="ssm_conv1d"))
    conv = g.dup("UNARY", conv)
    row = F32 * channels
    q = g.view(conv, (hk, nk, nst, n_seqs), (F32 * hk, row, row * nst))
    k = g.view(conv, (hk, nk, nst, n_seqs), (F32 * hk, row, row * nst))
    v = g.view(conv, (hv, nv, nst, n_seqs), (F32 * hv, row, row * nst))
    q = g.dup("SCALE", g.dup("RMS_NORM", q))
    k = g.dup("SCALE", g.dup("RMS_NORM", k))
    if nk != nv:
        rep = nv // nk
        q = g.op("REPEAT", "f32", (hk, rep, nk, nst * n_seqs), g.reshape(q, hk, 1, nk, nst * n_seqs))
        k = g.op("REPEAT", "f32", (hk, rep, nk, nst * n_seqs), g.reshape(k, hk, 1, nk, nst * n_seqs))
        q = g.reshape(q, hk, nk * rep, nst, n_seqs)
        k = g.reshape(k, hk, nk * rep, nst, n_seqs)
    # build_recurrent_attn (delta-net-base.cpp#L527-L605): ggml_gated_delta_net's output rows, then K state slots of
    # S_v rows per sequence (ggml/src/ggml.c#L6413-L6415), K = 1, or n_rs_seq + 1 snapshots; the slots written
    # (min(tokens, K)) copied into the memory
    out = g.op("GATED_DELTA_NET", "f32", (hv * nv, nst * n_seqs + keep * hv * n_seqs), q, k, v, gate, beta, state)
    o = g.view(out, (hv, nv, nst, n_seqs), (F32 * hv, F32 * hv * nv, F32 * hv * nv * nst))
    written = min(nst, keep) if s.n_rs_seq else 1
    new_state = g.view(out, (hv * hv * nv, n_seqs, written), (F32, F32 * hv * hv * nv, F32 * hv * nv * nst * n_seqs))
    g.expand(_cpy(new_state, g.view(ssm_all, (s.d_state * s.d_inner, n_seqs, written), (F32, ssm_all.nb[1],
                                                                                         ssm_all.nb[1] * n_seqs))))
    z = g.reshape(z, hv, nv, nst, n_seqs)
    normed = rms_norm(g, o, s.d_state, "ssm_norm")
    cur = g.dup("MUL", normed, g.dup("UNARY", z))
    cur = g.reshape(cur, hv * nv, nst, n_seqs)
    cur = g.mul_mat(g.weight(s.d_inner, s.n_embd, name="ssm_out"), cur)
    return g.reshape(cur, s.n_embd, nst * n_seqs)


def _full_attention(g: Graph, s: DeltaShape, p: Pass, cur, pos, inputs):
    hd, n_head, n_head_kv, n_tokens = s.head_dim, s.n_head, s.n_head_kv, cur.ne[1]
    q_full = g.mul_mat(g.weight(s.n_embd, 2 * hd * n_head, name="attn_q"), cur)
    k = g.mul_mat(g.weight(s.n_embd, hd * n_head_kv, name="attn_k"), cur)
    v = g.mul_mat(g.weight(s.n_embd, hd * n_head_kv, name="attn_v"), cur)
    if s.arch == "qwen3next":
        q_full = g.reshape(q_full, 2 * hd, n_head, n_tokens, 1)
        q = g.view(q_full, (hd, n_head, n_tokens, 1), q_full.nb)
        gate = g.view(q_full, (hd, n_head, n_tokens, 1), q_full.nb)
        k = g.reshape(k, hd, n_head_kv, n_tokens)
        v = g.reshape(v, hd, n_head_kv, n_tokens)
        q = rms_norm(g, q, hd, "attn_q_norm")
        k = rms_norm(g, k, hd, "attn_k_norm")
        q, k = g.dup("ROPE", q, pos), g.dup("ROPE", k, pos)
        cur = attention(g, q, k, v, inputs, p, s, p.n_kv)
        gate = g.dup("UNARY", g.cont(gate, hd * n_head, n_tokens))
    else:
        row = F32 * hd * 2
        q = g.view(q_full, (hd, n_head, n_tokens), (F32, row, row * n_head))
        q = rms_norm(g, q, hd, "attn_q_norm")
        k = rms_norm(g, g.reshape(k, hd, n_head_kv, n_tokens), hd, "attn_k_norm")
        gate = g.cont(g.view(q_full, (hd, n_head, n_tokens), (F32, row, row * n_head)), hd * n_head, n_tokens)
        v = g.reshape(v, hd, n_head_kv, n_tokens)
        q, k = g.dup("ROPE", q, pos), g.dup("ROPE", k, pos)
        cur = attention(g, q, k, v, inputs, p, s, p.n_kv)
        gate = g.dup("UNARY", gate)
    cur = g.dup("MUL", cur, gate)
    return g.mul_mat(g.weight(hd * n_head, s.n_embd, name="attn_output"), cur)


def _ffn(g: Graph, s: DeltaShape, cur):
    if not s.n_expert:
        return dense_ffn(g, cur, s.n_embd, s.n_ff)
    moe = moe_ffn(g, cur, s)
    shared = dense_ffn(g, cur, s.n_embd, s.n_ff_shexp, "_shexp")
    gate = g.dup("UNARY", g.mul_mat(g.weight(s.n_embd, name="ffn_gate_inp_shexp"), cur))
    return g.dup("ADD", moe, g.dup("MUL", shared, gate))


def build_delta(s: DeltaShape, p: Pass, n_seqs: int | None = None) -> Graph:
    """The graph of one reserve ``p`` (module docstring); ``n_seqs``: the ubatch's sequences (llama.cpp's n_seq_max;
    by default s.n_seqs, else p.n_stream, which is it without kv_unified)."""
    n_seqs = n_seqs or s.n_seqs or p.n_stream
    g = Graph()
    e = s.n_embd
    tokens, embd, pos = token_inputs(g, s, p)
    if s.arch != "qwen3next":   # IMROPE (llama-arch.cpp): build_inp_pos takes n_pos_per_embd() = 4 positions a token
        pos = g.input("i32", 4 * p.n_tokens)
    s_copy = g.input("i32", n_seqs)
    s_copy_views = (g.view(s_copy, (n_seqs,), (4,)), g.view(s_copy, (0,), (4,)))
    inputs = attn_inputs(g, p, s, p.n_kv)
    out_ids = g.input("i32", p.n_outputs)
    inp_l = embeddings(g, s, tokens, embd)
    for il in range(s.n_layer):
        g.layer = il
        inp_sa = inp_l
        cur = rms_norm(g, inp_l, e, "attn_norm")
        g.expand(cur)
        if s.recurrent[il]:
            cur = _linear_attention(g, s, cur, n_seqs, s_copy_views)
        else:
            cur = _full_attention(g, s, p, cur, pos, inputs)
        cur = g.dup("ADD", cur, inp_sa)
        ffn_res = cur
        cur = _ffn(g, s, rms_norm(g, cur, e, "post_attention_norm"))
        inp_l = g.dup("ADD", cur, ffn_res)
    g.layer = s.n_layer
    norm = rms_norm(g, inp_l, e, "output_norm")
    norm.flags |= OUTPUT       # t_h_nextn: every row
    rows = g.get_rows(norm, out_ids)
    rows.flags |= OUTPUT
    logits = g.mul_mat(g.weight(e, s.n_vocab, name="output"), rows)
    logits.flags |= OUTPUT
    g.expand(logits)
    return g


def delta_shape(model) -> DeltaShape | None:
    """The graph widths of a qwen3_next / qwen3_5 / qwen3_5_moe ``model`` as convert_hf_to_gguf writes its GGUF
    (conversion/qwen.py; kvmem.engines.llamacpp.arch_tensors._qwen35 for the tensors), or None where the graph above
    is not the one llama.cpp builds."""
    arch = DELTA.get(model.model_type)
    layers, moe = model.layers, model.facts.moe
    if arch is None or not layers or not model.facts.vocab_size:
        return None
    d_state, n_k = field(model, "linear_key_head_dim"), field(model, "linear_num_key_heads")
    n_v, d_conv = field(model, "linear_num_value_heads"), field(model, "linear_conv_kernel_dim")
    v_dim = field(model, "linear_value_head_dim")
    if not (d_state and n_k and n_v and d_conv and v_dim) or v_dim != d_state or n_v % n_k:
        return None     # the state is reshaped [head_v, head_v, n_v_heads] (ssm_d_state x d_inner): head_v = d_state
    interval = field(model, "full_attention_interval", 4) or 4
    recurrent = tuple((il + 1) % interval != 0 for il in range(len(layers)))   # qwen3next.cpp L17-L22
    full = [layer for il, layer in enumerate(layers) if not recurrent[il]]
    if not full or any((layer.kv_heads, layer.head_dim_k, layer.head_dim_v) != (
            full[0].kv_heads, full[0].head_dim_k, full[0].head_dim_k) for layer in full):
        return None
    if (arch == "qwen35") != (moe is None):
        return None
    return DeltaShape(arch=arch, n_layer=len(layers), n_embd=model.hidden_size, n_head=model.num_attention_heads,
                      n_head_kv=full[0].kv_heads, head_dim=full[0].head_dim_k,
                      n_ff=0 if moe else field(model, "intermediate_size", 0), n_vocab=model.facts.vocab_size,
                      n_expert=moe.experts if moe else 0, n_expert_used=moe.top_k if moe else 0,
                      n_ff_exp=moe.intermediate_size if moe else 0,
                      n_ff_shexp=(moe.shared_intermediate_size or moe.intermediate_size) if moe else 0,
                      gating="softmax", norm_w=True, recurrent=recurrent, d_conv=d_conv, d_state=d_state,
                      n_k_heads=n_k, n_v_heads=n_v, d_inner=v_dim * n_v)


def hybrid_graph_bytes(shape: DeltaShape, *, n_kv: int, n_ubatch: int, flash_attn: bool, type_k: str = "f16",
                       type_v: str = "f16", n_outputs: int | None = None, n_seq: int = 1, kv_unified: bool = False,
                       alignment: int = 32) -> int:
    """compute.graph_bytes for these graphs: the larger of the prompt reserve (n_ubatch tokens rounded up to a
    multiple of ``n_seq``) and the one-token-per-sequence reserve, the recurrent part over ``n_seq`` sequences
    (ubatch.n_seqs = n_seq_max, llama-context.cpp sched_reserve) whatever the KV streams."""
    from ...units import pad
    from .ggml_alloc import gallocr_size
    n_outputs = n_ubatch if n_outputs is None else min(n_outputs, n_ubatch)
    n_stream = 1 if kv_unified else n_seq
    sizes = []
    for tokens, outputs in ((pad(n_ubatch, n_seq), n_outputs), (n_seq, n_seq)):
        p = Pass(tokens, outputs, n_kv, n_stream, flash_attn, type_k, type_v)
        sizes.append(gallocr_size(build_delta(shape, p, n_seq), alignment))
    return max(sizes)

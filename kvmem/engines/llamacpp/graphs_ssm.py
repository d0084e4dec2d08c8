"""llama.cpp's Mamba hybrid forward graphs (jamba; nemotron_h / nemotron_h_moe), node by node, over llama.cpp's hybrid
memory (a KV cache for the attention layers, a recurrent one for the Mamba layers); the widths are
tensors_ssm.SsmShape's.

Transcribed from the vendored llama.cpp (llama-cpp-python 0.3.36, llama.cpp 0c1e57098):

    jamba       src/models/jamba.cpp#L108-L198: build_inp_embd, build_inp_mem_hybrid (the recurrent input rs_s_copy
                and its views, then the attention inputs: src/llama-graph.cpp#L3633-L3642), build_inp_out_ids, no
                positions (no RoPE); per layer attn_norm, a Mamba-1 layer or Q/K/V and build_attn with attn_output,
                the last layer's rows by out_ids (cur, then inpL), ffn_inp = inpL + cur, ffn_norm, build_ffn (SiLU,
                parallel gate) or build_moe_ffn (softmax, no weight norm, no scale), the residual; output_norm, the
                lm_head.
    Mamba-1     src/models/mamba-base.cpp#L9-L151 build_mamba_layer: build_rs of the conv states (#L40), ssm_in split
                in x and z (views), the conv states concatenated before x transposed, their last d_conv - 1 columns
                copied back, ggml_ssm_conv, + bias, silu; ssm_x split in dt / B / C (views) each RMS-normed with its
                weight, ssm_dt + bias; build_rs of the ssm states with ggml_ssm_scan as its row getter (K = 1: an
                output of x's elements and the new states), the states copied back, y + x * D, swiglu(cont(z), y),
                ssm_out.
    nemotron_h  src/models/nemotron-h.cpp#L188-L264: build_inp_embd (expanded), build_inp_mem_hybrid,
                build_inp_out_ids; per layer attn_norm, then a Mamba-2 layer, attention (build_qkv, build_attn with
                attn_output and its optional bias, no RoPE) or the FFN layer (#L282-L340: build_ffn, relu^2 without
                a gate; or the router's logits first, build_moe_ffn over them (sigmoid, exp_probs_b, the weights
                normalised and scaled as the file says, up / relu^2 / down experts), the shared expert's relu^2
                build_ffn, added), the residual; no rows picked in the trunk (embeddings_nextn_masked false,
                src/llama-context.cpp#L120): output_norm (h_nextn, an output), its rows by out_ids, the lm_head.
    Mamba-2     mamba-base.cpp#L153-L304 build_mamba2_layer: the conv states (build_rs), ssm_in as one 2-D product
                reshaped per sequence, z / xBC / dt views, concat, the last d_conv - 1 columns copied back once per
                rollback slot written (K = n_rs_seq + 1 with cparams.n_rs_seq, else 1), ssm_conv, + bias, silu, x /
                B / C views, dt + bias, ggml_ssm_scan with K (ggml.c#L5696-L5760: x's elements and K x the states of
                each sequence), the states written copied back, y + x * D, swiglu(cont(z), y), the grouped RMS norm
                by ssm_norm, ssm_out.

Judge: tests/oracles/test_llamacpp_ssm_oracle.py (llama.cpp's own CPU compute buffer, to the four decimals it prints).
"""

from __future__ import annotations

from .ggml_graph import OUTPUT, TYPES, Graph, Tensor
from .graphs import Pass, attention, attn_inputs, embeddings, experts_sum, output_head, qkv_heads
from .graphs_mla_oss import dense_ffn, moe_ffn, rms_norm, routed_weights
from .tensors_ssm import SSM, SsmShape, ssm_shape

__all__ = ["SSM", "SsmShape", "build_ssm", "ssm_shape"]

F32 = TYPES["f32"][1]


def _cpy(a: Tensor, dst: Tensor) -> Tensor:
    """ggml_cpy: a view of ``dst`` (op CPY)."""
    return Tensor(dst.type, dst.ne, "CPY", (a, dst), view_src=dst, nb=dst.nb)


def _rs(g: Graph, s: Tensor, state_size: int, s_copy: tuple, rows=None) -> Tensor:
    """llm_graph_context::build_rs (src/llama-graph.cpp#L3512-L3546) over the whole memory: one state zeroed in place,
    ``rows`` (get_state_rows; ggml_get_rows by default) of s_copy_main, the extra rows (none) copied back."""
    main, extra = s_copy
    states = g.reshape(s, state_size, s.ne[1])
    zero = g.view(states, (state_size,), (F32,))
    g.expand(Tensor(zero.type, zero.ne, "SCALE", (zero,), view_src=zero, nb=zero.nb))    # ggml_scale_inplace
    out = rows(states, main) if rows is not None else g.get_rows(states, main)
    g.expand(out)
    g.expand(_cpy(g.get_rows(states, extra), g.view(s, (state_size, 0), (F32, s.nb[1]))))
    return out


def _scan(g: Graph, states, x, dt, a, b, c, ids, k: int, d_state: int, head_dim: int, n_head: int, slots: int):
    """ggml_ssm_scan over the states reshaped [d_state, head_dim, n_head, slots]: x's elements, then K x the states of
    each sequence (one f32 row)."""
    ssm = g.reshape(states, d_state, head_dim, n_head, slots)
    n = x.nelements() + k * d_state * head_dim * n_head * ids.ne[0]
    return g.op("SSM_SCAN", "f32", (n,), ssm, x, dt, a, b, c, ids)


def _mamba1(g: Graph, s: SsmShape, cur, n_seqs: int, s_copy: tuple):
    """build_mamba_layer (module docstring)."""
    # llama.cpp@0c1e57098 src/models/mamba-base.cpp#L9-L151
    nst = cur.ne[1] // n_seqs
    d_inner, d_state, d_conv, r = s.d_inner, s.d_state, s.d_conv, s.dt_rank
    conv_all = g.weight((d_conv - 1) * d_inner, n_seqs, kv=True, name="cache_r")
    ssm_all = g.weight(d_state * d_inner, n_seqs, kv=True, name="cache_s")
    conv = g.reshape(_rs(g, conv_all, (d_conv - 1) * d_inner, s_copy), d_conv - 1, d_inner, n_seqs)
    cur = g.reshape(cur, s.n_embd, nst, n_seqs)
    xz = g.mul_mat(g.weight(s.n_embd, 2 * d_inner, name="ssm_in"), cur)
    x = g.view(xz, (d_inner, nst, n_seqs), (F32, xz.nb[1], xz.nb[2]))
    z = g.view(xz, (d_inner, nst, n_seqs), (F32, xz.nb[1], xz.nb[2]))
    conv_x = g.concat(conv, g.transpose(x), 0)
    last = g.view(conv_x, (d_conv - 1, d_inner, n_seqs), (F32, conv_x.nb[1], conv_x.nb[2]))
    g.expand(_cpy(last, g.view(conv_all, ((d_conv - 1) * d_inner * n_seqs,), (F32,))))
    x = g.op("SSM_CONV", "f32", (d_inner, nst, n_seqs), conv_x, g.weight(d_conv, d_inner, name="ssm_conv1d"))
    x = g.dup("UNARY", g.dup("ADD", x, g.weight(d_inner, name="ssm_conv1d.bias")))
    x_db = g.mul_mat(g.weight(d_inner, r + 2 * d_state, name="ssm_x"), x)
    dt = g.view(x_db, (r, nst, n_seqs), (F32, x_db.nb[1], x_db.nb[2]))
    b = g.view(x_db, (d_state, 1, nst, n_seqs), (F32, F32 * d_state, x_db.nb[1], x_db.nb[2]))
    c = g.view(x_db, (d_state, 1, nst, n_seqs), (F32, F32 * d_state, x_db.nb[1], x_db.nb[2]))
    dt = rms_norm(g, dt, r, "ssm_dt_norm")
    b = rms_norm(g, b, d_state, "ssm_b_norm")
    c = rms_norm(g, c, d_state, "ssm_c_norm")
    dt = g.dup("ADD", g.mul_mat(g.weight(r, d_inner, name="ssm_dt"), dt), g.weight(d_inner, name="ssm_dt.bias"))
    cur = x
    x = g.reshape(x, 1, d_inner, nst, n_seqs)
    a = g.weight(d_state, d_inner, name="ssm_a")
    y_ssm = _rs(g, ssm_all, d_state * d_inner, s_copy,
                lambda states, ids: _scan(g, states, x, dt, a, b, c, ids, 1, d_state, 1, d_inner, n_seqs))
    g.expand(_cpy(g.view(y_ssm, (d_state * d_inner * n_seqs,), (F32,)),
                  g.view(ssm_all, (d_state * d_inner * n_seqs,), (F32,))))
    y = g.view(y_ssm, (d_inner, nst, n_seqs), (F32, x.nb[2], x.nb[3]))
    y = g.dup("ADD", y, g.dup("MUL", cur, g.weight(d_inner, name="ssm_d")))
    y = g.dup("GLU", g.cont(z), y)
    cur = g.mul_mat(g.weight(d_inner, s.n_embd, name="ssm_out"), y)
    return g.reshape(cur, s.n_embd, nst * n_seqs)


def _mamba2(g: Graph, s: SsmShape, cur, n_seqs: int, s_copy: tuple):
    """build_mamba2_layer (module docstring)."""
    # llama.cpp@0c1e57098 src/models/mamba-base.cpp#L153-L304
    nst = cur.ne[1] // n_seqs
    d_inner, d_state, d_conv, n_head, n_group = s.d_inner, s.d_state, s.d_conv, s.n_v_heads, s.n_k_heads
    head_dim, ch = d_inner // n_head, d_inner + 2 * n_group * d_state
    k = s.n_rs_seq + 1 if s.n_rs_seq > 0 else 1
    slots = n_seqs * (1 + s.n_rs_seq)       # src/llama-memory-recurrent.cpp#L101-L103
    conv_all = g.weight((d_conv - 1) * ch, slots, kv=True, name="cache_r")
    ssm_all = g.weight(d_state * d_inner, slots, kv=True, name="cache_s")
    conv = g.reshape(_rs(g, conv_all, (d_conv - 1) * ch, s_copy), d_conv - 1, ch, n_seqs)
    zxbcdt = g.mul_mat(g.weight(s.n_embd, 2 * d_inner + 2 * n_group * d_state + n_head, name="ssm_in"), cur)
    zxbcdt = g.reshape(zxbcdt, zxbcdt.ne[0], nst, n_seqs)
    nb1, nb2 = zxbcdt.nb[1], zxbcdt.nb[2]
    z = g.view(zxbcdt, (head_dim, n_head, nst, n_seqs), (F32, F32 * head_dim, nb1, nb2))
    xbc = g.view(zxbcdt, (ch, nst, n_seqs), (F32, nb1, nb2))
    dt = g.view(zxbcdt, (n_head, nst, n_seqs), (F32, nb1, nb2))
    conv_x = g.concat(conv, g.transpose(xbc), 0)
    for _ in range(min(nst, k)):
        last = g.view(conv_x, (d_conv - 1, ch, n_seqs), (F32, conv_x.nb[1], conv_x.nb[2]))
        g.expand(_cpy(last, g.view(conv_all, ((d_conv - 1) * ch, n_seqs), (F32, conv_all.nb[1]))))
    xbc = g.op("SSM_CONV", "f32", (ch, nst, n_seqs), conv_x, g.weight(d_conv, ch, name="ssm_conv1d"))
    xbc = g.dup("UNARY", g.dup("ADD", xbc, g.weight(ch, name="ssm_conv1d.bias")))
    x = g.view(xbc, (head_dim, n_head, nst, n_seqs), (F32, F32 * head_dim, xbc.nb[1], xbc.nb[2]))
    b = g.view(xbc, (d_state, n_group, nst, n_seqs), (F32, F32 * d_state, xbc.nb[1], xbc.nb[2]))
    c = g.view(xbc, (d_state, n_group, nst, n_seqs), (F32, F32 * d_state, xbc.nb[1], xbc.nb[2]))
    dt = g.dup("ADD", g.cont(dt), g.weight(n_head, name="ssm_dt.bias"))
    a = g.weight(1, n_head, name="ssm_a")
    y_ssm = _rs(g, ssm_all, d_state * d_inner, s_copy,
                lambda states, ids: _scan(g, states, x, dt, a, b, c, ids, k, d_state, head_dim, n_head, slots))
    big = d_state * d_inner
    written = min(nst, k)
    g.expand(_cpy(g.view(y_ssm, (big, n_seqs, written), (F32, F32 * big, F32 * big * n_seqs)),
                  g.view(ssm_all, (big, n_seqs, written), (F32, ssm_all.nb[1], ssm_all.nb[1] * n_seqs))))
    y = g.view(y_ssm, (head_dim, n_head, nst, n_seqs), (F32, x.nb[1], n_head * x.nb[1]))
    y = g.dup("ADD", y, g.dup("MUL", x, g.weight(1, n_head, name="ssm_d")))
    y = g.dup("GLU", g.cont(z), y)
    y = rms_norm(g, g.reshape(y, d_inner // n_group, n_group, nst, n_seqs), d_inner // n_group, "ssm_norm")
    y = g.reshape(y, d_inner, nst * n_seqs)
    return g.mul_mat(g.weight(d_inner, s.n_embd, name="ssm_out"), y)


def _relu_sqr_ffn(g: Graph, cur, n_embd: int, n_ff: int, suffix: str = "", bias: bool = False):
    """build_ffn, LLM_FFN_RELU_SQR without a gate: up (+ bias), relu, sqr, down (+ bias)."""
    up = g.mul_mat(g.weight(n_embd, n_ff, name="ffn_up" + suffix), cur)
    if bias:
        up = g.dup("ADD", up, g.weight(n_ff, name="ffn_up.bias"))
    down = g.mul_mat(g.weight(n_ff, n_embd, name="ffn_down" + suffix), g.dup("SQR", g.dup("UNARY", up)))
    return g.dup("ADD", down, g.weight(n_embd, name="ffn_down.bias")) if bias else down


def _nemotron_moe(g: Graph, s: SsmShape, cur):
    """build_ffn_layer's MoE branch (nemotron-h.cpp#L291-L333) and build_moe_ffn over the router's logits."""
    # llama.cpp@0c1e57098 src/llama-graph.cpp#L2007-L2380 build_moe_ffn: probs_in, no gate, LLM_FFN_RELU_SQR
    n_embd, n_tokens, n_exp, n_used = s.n_embd, cur.ne[1], s.n_expert, s.n_expert_used
    inp = g.mul_mat(g.weight(n_embd, s.latent, name="ffn_latent_down"), cur) if s.latent else cur
    width = s.latent or n_embd
    logits = g.mul_mat(g.weight(n_embd, n_exp, name="ffn_gate_inp"), cur)
    probs = g.dup("UNARY", logits)                                  # sigmoid
    selected = g.argsort_top_k(g.dup("ADD", probs, g.weight(n_exp, name="exp_probs_b.bias")), n_used)
    weights = g.get_rows(g.reshape(probs, 1, n_exp, n_tokens), selected)
    weights = routed_weights(g, s, weights, n_used, n_tokens)
    x = g.reshape(inp, width, 1, n_tokens)
    up = g.mul_mat_id(g.weight(width, s.n_ff_exp, n_exp, name="ffn_up_exps"), x, selected)
    act = g.dup("SQR", g.dup("UNARY", up))
    down = g.dup("MUL", g.mul_mat_id(g.weight(s.n_ff_exp, width, n_exp, name="ffn_down_exps"), act, selected),
                 weights)
    g.expand(down)
    out = experts_sum(g, down, width, n_tokens, n_used)
    if s.latent:
        out = g.mul_mat(g.weight(s.latent, n_embd, name="ffn_latent_up"), out)
    return g.dup("ADD", out, _relu_sqr_ffn(g, cur, n_embd, s.n_ff_shexp, "_shexp"))


def _attention(g: Graph, s: SsmShape, p: Pass, cur, inputs):
    q, k, v = qkv_heads(g, s, p, cur, s.qkv_bias)
    cur = attention(g, q, k, v, inputs, p, s, p.n_kv)
    cur = g.mul_mat(g.weight(s.n_head * s.head_dim, s.n_embd, name="attn_output"), cur)
    return g.dup("ADD", cur, g.weight(s.n_embd, name="attn_output.bias")) if s.qkv_bias else cur


def build_ssm(s: SsmShape, p: Pass, n_seqs: int | None = None) -> Graph:
    """The graph of one reserve ``p`` (module docstring); ``n_seqs``: the ubatch's sequences (n_seq_max; by default
    s.n_seqs, else p.n_stream). Layer kinds: recurrent (Mamba); nemotron_h's moe_layers mark its FFN layers (MoE for
    nemotron_h_moe, dense relu^2 otherwise), the rest attention; jamba's mark its routed FFNs."""
    n_seqs = n_seqs or s.n_seqs or p.n_stream
    g = Graph()
    e, jamba = s.n_embd, s.arch == "jamba"
    # llama.cpp@0c1e57098 src/models/jamba.cpp#L108-L198, src/models/nemotron-h.cpp#L188-L264
    tokens = g.input("i32", p.n_tokens)
    embd = g.input("f32", e, p.n_tokens) if p.inp_embd else None
    s_copy = g.input("i32", n_seqs)
    s_copy_views = (g.view(s_copy, (n_seqs,), (4,)), g.view(s_copy, (0,), (4,)))
    inputs = attn_inputs(g, p, s, p.n_kv)
    out_ids = g.input("i32", p.n_outputs)
    inp_l = embeddings(g, s, tokens, embd)
    for il in range(s.n_layer):
        g.layer = il
        inp_sa = inp_l
        cur = rms_norm(g, inp_l, e, "attn_norm")
        if s.recurrent[il]:
            cur = _mamba1(g, s, cur, n_seqs, s_copy_views) if jamba else _mamba2(g, s, cur, n_seqs, s_copy_views)
        elif jamba or not s.moe_layers[il]:
            cur = _attention(g, s, p, cur, inputs)
        elif s.n_expert:
            cur = _nemotron_moe(g, s, cur)
        else:
            cur = _relu_sqr_ffn(g, cur, e, s.n_ff, bias=s.mlp_bias)
        if not jamba:
            inp_l = g.dup("ADD", cur, inp_sa)
            continue
        if il == s.n_layer - 1:
            cur, inp_l = g.get_rows(cur, out_ids), g.get_rows(inp_l, out_ids)
        ffn_inp = g.dup("ADD", inp_l, cur)
        cur = rms_norm(g, ffn_inp, e, "ffn_norm")
        cur = moe_ffn(g, cur, s) if s.moe_layers[il] else dense_ffn(g, cur, e, s.n_ff)
        inp_l = g.dup("ADD", ffn_inp, cur)
    if jamba:
        return output_head(g, s, inp_l)
    g.layer = s.n_layer
    norm = rms_norm(g, inp_l, e, "output_norm")
    norm.flags |= OUTPUT       # t_h_nextn: every row
    rows = g.get_rows(norm, out_ids)
    rows.flags |= OUTPUT
    logits = g.mul_mat(g.weight(e, s.n_vocab, name="output"), rows)
    logits.flags |= OUTPUT
    g.expand(logits)
    return g

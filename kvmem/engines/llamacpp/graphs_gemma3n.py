"""llama.cpp's gemma3n architecture (Gemma 3n E2B / E4B: Gemma3nForConditionalGeneration's text model), its tensors
as convert_hf_to_gguf writes them and load_arch_tensors asks for them.

Transcribed from the vendored llama.cpp (llama-cpp-python 0.3.36, llama.cpp 0c1e57098):

    conversion/gemma.py Gemma3NModel (L486-L628): altup_num_inputs must be 4 (L497: the converter asserts it);
        vocab_size (262,400 with the vision/audio token slots) is the vocabulary, and both embedding tables are
        padded with zero rows to it (L569-L590): per_layer_token_embd is n_vocab rows, not vocab_size_per_layer_input;
        the three altup_projections / altup_unembed_projections matrices are stacked into one 3-D tensor each
        (L592-L626); set_gguf_parameters (L533-L550) writes altup_active_idx, altup_num_inputs,
        embedding_length_per_layer_input, shared_kv_layers, the activation sparsity scales and the sliding window
        pattern (Gemma3Model's keys before them, L141-L158). The vision and audio towers go to the mmproj file
        (Gemma3nVisionAudioModel, L365-L484), not here.
    src/models/gemma3n.cpp load_arch_hparams (L3-L19): n_layer_kv_from_start fixed at 20 (the KV-shared layers are
        n_layer - 20, whatever shared_kv_layers says: kvmem.engines.llamacpp.families), load_swa_pattern(ml, 5).
    src/llama-hparams.h (L264-L267): n_altup 4, laurel_rank 64, n_embd_altup 256 are fixed, never read from the
        file: a config with another laurel_rank or hidden_size_per_layer_input makes a GGUF whose tensors have
        other shapes than the ones load_arch_tensors creates, and llama.cpp refuses to load it (refused here).
    load_arch_tensors (L21-L76): output (else token_embd duplicated), token_embd, altup_proj / altup_unembd_proj
        [n_embd, n_embd, n_altup - 1], per_layer_token_embd [n_embd_altup x n_layer, n_vocab], per_layer_model_proj
        [n_embd, n_embd_altup x n_layer], per_layer_proj_norm, output_norm; per layer (every layer, the KV-shared
        ones too: their k/v projections are in the checkpoint and create_tensor_qkv requires them) attn_norm, Q/K/V,
        attn_output, q/k norms [head_dim], post_attention_norm, ffn_norm, ffn_gate/up/down of n_ff (hparams.n_ff():
        layer 0's width for every layer), post_ffw_norm, inp_gate [n_embd, n_embd_altup], proj [n_embd_altup,
        n_embd], post_norm, altup_correct_coef [n_altup, n_altup], altup_correct_scale, altup_predict_coef
        [n_altup, n_altup^2], altup_router [n_embd, n_altup], altup_router_norm, laurel_l [n_embd, laurel_rank],
        laurel_r, laurel_post_norm.
    Where the tensors go (src/llama-arch.cpp L921-L936): per_layer_token_embd is an input-layer tensor (the host,
        as token_embd), altup_proj / altup_unembd_proj output-layer ones; per_layer_model_proj and
        per_layer_proj_norm are "repeating" tensors created with layer number 0 (load_arch_tensors L39-L40), so they
        follow layer 0's device (src/llama-model.cpp#L1964): kvmem.engines.llamacpp.placed.tensor_group.
    graph (L89-L316, the helpers L318-L464): the embeddings scaled, build_inp_pos, build_attn_inp_kv_iswa (both
        caches' inputs: graphs.attn_inputs), build_inp_per_layer (its own token ids, the per-layer table's rows,
        reshaped, scaled; expanded first) and project_per_layer_inputs (per_layer_model_proj, scaled, RMS norm x
        per_layer_proj_norm, added, scaled, permuted and made contiguous: [256, n_tokens, n_layer]); AltUp's three
        more streams (the input repeated, altup_proj, rescaled by magnitudes: sqrt(sum_rows(sqr)), concatenated);
        per layer altup_predict (router: RMS norm x altup_router_norm, scale, altup_router, tanh; altup_predict_coef;
        the streams permuted, mixed by a batched mul_mat, permuted back, added), attn_norm on the active stream,
        LAuReL (laurel_l, laurel_r, RMS norm, added), on a layer with a cache (il < 20) Q/K/V, q/k norms, V RMS-normed,
        RoPE, build_attn (graphs.attention, iSWA), on a KV-shared layer Q alone and build_attn without K/V: the cache
        of layer 18 (sliding) or 19 (full) read, nothing stored (_reused); attn_output, post_attention_norm, the
        residual, LAuReL added and scaled, ffn_norm, up and gate (gaussian_topk on the first 10 layers: mean, the
        std of the row, relu of the excess), GELU, the product, ffn_down, post_ffw_norm, the residual; altup_correct
        (the innovation repeated over the streams, x the coefficients + 1, + the predictions), the per-layer input
        (altup_correct_scale, inp_gate, GELU, x the layer's slice, proj, post_norm) added to the three other
        streams, concatenated. Then the streams merged (altup_unembd_proj, rescaled, averaged), out_ids' rows,
        output_norm, the lm_head and the logit softcap (always: the config's final_logit_softcapping is not read).
        Views (slices) are offsets: no bytes of their own.
"""

from __future__ import annotations

from dataclasses import dataclass

from .arch_fields import field, need
from .ggml_graph import OUTPUT, TYPES, Graph
from .graphs import GraphShape, Pass, attention, attn_inputs, embeddings, qkv_heads, token_inputs
from .graphs_mla_oss import rms_norm

__all__ = ["GEMMA3N", "Gemma3nShape", "build_gemma3n", "gemma3n_shape", "gemma3n_tensors"]

# kvmem model_type -> llama.cpp architecture (llama-arch.cpp LLM_ARCH_NAMES "gemma3n")
GEMMA3N = {"gemma3n": "gemma3n", "gemma3n_text": "gemma3n"}
# llama.cpp@0c1e57098 src/llama-hparams.h#L264-L267: fixed, never read from the GGUF
N_ALTUP, LAUREL_RANK, N_EMBD_ALTUP = 4, 64, 256
N_LAYER_KV = 20             # src/models/gemma3n.cpp#L7: n_layer_kv_from_start
N_SPARSE = 10               # src/models/models.h#L843: n_layer_sparsity, whatever the file's sparsity scales


def _fixed(model, name: str, value: int, why: str) -> None:
    got = field(model, name)
    if got is None:     # an abridged config: the class default is E4B's, not this model's (never guessed)
        raise ValueError(f"{model.name}: config field {name!r} is absent; llama.cpp's gemma3n tensors are laid out "
                         "only from a config that gives it")
    if got != value:
        raise ValueError(f"{model.name}: config field {name!r} is {got!r}; {why}, so a GGUF of this config does not "
                         "load there (kvmem does not lay it out)")


def _kv_heads(model) -> int:
    """num_key_value_heads as the config gives it. Absent, convert_hf_to_gguf writes head_count_kv 4
    (conversion/gemma.py#L158, Gemma3Model.set_gguf_parameters) while transformers built the checkpoint with
    Gemma3nTextConfig's 2: the file's attn_k / attn_v are not the shape llama.cpp's loader asks for (never guessed)."""
    if field(model, "num_key_value_heads") is None:
        raise ValueError(f"{model.name}: config field 'num_key_value_heads' is absent; convert_hf_to_gguf writes "
                         "head_count_kv 4 for it (conversion/gemma.py#L158) while transformers' Gemma3nTextConfig "
                         "gives the checkpoint 2, so llama.cpp's gemma3n tensors are laid out only from a config "
                         "that gives it")
    return need(model, "num_key_value_heads")


def _n_ff(model) -> int:
    """intermediate_size as the converter writes it (feed_forward_length; a list where the config has one) and
    load_arch_tensors reads it: hparams.n_ff() is layer 0's width, for every layer's FFN."""
    inter = field(model, "intermediate_size")
    if isinstance(inter, list):
        if not inter or len(set(inter)) != 1 or not isinstance(inter[0], int) or isinstance(inter[0], bool) \
                or inter[0] <= 0:
            raise ValueError(f"{model.name}: config field 'intermediate_size' is {str(inter)[:80]}; llama.cpp's "
                             "gemma3n creates every layer's FFN n_ff() wide (layer 0's: src/models/gemma3n.cpp#L58-L60)"
                             ", so only one width for every layer loads")
        return inter[0]
    return need(model, "intermediate_size")


def gemma3n_tensors(model, h: int) -> list:
    """(name, ne) of a gemma3n GGUF's tensors after output / output_norm / token_embd, in load_arch_tensors' order
    (the module docstring); arch_tensors.arch_specs adds the head."""
    _fixed(model, "altup_num_inputs", N_ALTUP, "convert_hf_to_gguf asserts 4 (conversion/gemma.py#L497) and "
           "llama.cpp's gemma3n fixes n_altup at 4 (src/llama-hparams.h#L264)")
    _fixed(model, "laurel_rank", LAUREL_RANK, "llama.cpp's gemma3n fixes laurel_rank at 64 (src/llama-hparams.h#L266)")
    _fixed(model, "hidden_size_per_layer_input", N_EMBD_ALTUP, "llama.cpp's gemma3n fixes n_embd_altup at 256 "
           "(src/llama-hparams.h#L267)")
    vocab, per_layer_vocab = model.facts.vocab_size, need(model, "vocab_size_per_layer_input")
    if per_layer_vocab > vocab:
        raise ValueError(f"{model.name}: config field 'vocab_size_per_layer_input' is {per_layer_vocab}, past "
                         f"vocab_size {vocab}; convert_hf_to_gguf pads the per-layer table to vocab_size only "
                         "(conversion/gemma.py#L576-L590) and llama.cpp wants it n_vocab rows")
    n_layer, n_head, f = model.num_layers, model.num_attention_heads, _n_ff(model)
    n, r, e = N_ALTUP, LAUREL_RANK, N_EMBD_ALTUP
    out: list[tuple[str, tuple[int, ...]]] = [
        ("altup_proj.weight", (h, h, n - 1)), ("altup_unembd_proj.weight", (h, h, n - 1)),
        ("per_layer_token_embd.weight", (e * n_layer, vocab)), ("per_layer_model_proj.weight", (h, e * n_layer)),
        ("per_layer_proj_norm.weight", (e,))]
    # one head_dim for every layer (key_length: Gemma3Model.set_gguf_parameters); kvmem's KV-shared layers hold none
    hd = need(model, "head_dim")
    q, kv = n_head * hd, _kv_heads(model) * hd
    for il in range(n_layer):
        b = f"blk.{il}."
        out += [(b + "attn_norm.weight", (h,)), (b + "attn_q.weight", (h, q)), (b + "attn_k.weight", (h, kv)),
                (b + "attn_v.weight", (h, kv)), (b + "attn_output.weight", (q, h)), (b + "attn_q_norm.weight", (hd,)),
                (b + "attn_k_norm.weight", (hd,)), (b + "post_attention_norm.weight", (h,)),
                (b + "ffn_norm.weight", (h,)), (b + "ffn_gate.weight", (h, f)), (b + "ffn_up.weight", (h, f)),
                (b + "ffn_down.weight", (f, h)), (b + "post_ffw_norm.weight", (h,)),
                (b + "inp_gate.weight", (h, e)), (b + "proj.weight", (e, h)), (b + "post_norm.weight", (h,)),
                (b + "altup_correct_coef.weight", (n, n)), (b + "altup_correct_scale.weight", (h,)),
                (b + "altup_predict_coef.weight", (n, n * n)), (b + "altup_router.weight", (h, n)),
                (b + "altup_router_norm.weight", (h,)), (b + "laurel_l.weight", (h, r)),
                (b + "laurel_r.weight", (r, h)), (b + "laurel_post_norm.weight", (h,))]
    return out


@dataclass(frozen=True)
class Gemma3nShape(GraphShape):
    """GraphShape's widths, the sliding layers (swa) and the layers that hold a cache (the first n_layer_kv)."""

    n_layer_kv: int = N_LAYER_KV


def gemma3n_shape(model) -> Gemma3nShape | None:
    """The graph widths of a gemma3n ``model`` as convert_hf_to_gguf writes its GGUF, or None where llama.cpp does not
    load it (gemma3n_tensors refuses it) or the file differs from the converter's (a fused attn_qkv)."""
    if GEMMA3N.get(model.model_type) is None or not model.layers or not model.facts.vocab_size:
        return None
    try:
        gemma3n_tensors(model, model.hidden_size)
    except ValueError:
        return None
    if any(".attn_qkv." in t.name for t in getattr(model.checkpoint, "tensors", None) or ()):
        return None
    swa = tuple(t == "sliding_attention" for t in field(model, "layer_types", []) or ())
    if len(swa) != model.num_layers:        # load_swa_pattern(ml, 5) without the converter's pattern: every 5th full
        swa = tuple((il + 1) % 5 != 0 for il in range(model.num_layers))
    return Gemma3nShape(arch="gemma3n", n_layer=model.num_layers, n_embd=model.hidden_size,
                        n_head=model.num_attention_heads, n_head_kv=_kv_heads(model),
                        head_dim=need(model, "head_dim"), n_ff=_n_ff(model), n_vocab=model.facts.vocab_size, swa=swa,
                        final_softcap=True)     # llama.cpp@0c1e57098 src/models/gemma3n.cpp#L306-L311: unconditional


def _view2d(g: Graph, x):
    """gemma3n_view_2d_slice: a slice of x's third dimension (which one: an offset, no bytes of its own)."""
    return g.view(x, (x.ne[0], x.ne[1]), (x.nb[0], x.nb[1]))


def _magnitude(g: Graph, x):
    """calc_magnitude: sqrt(sum_rows(sqr(x)))."""
    return g.dup("SQRT", g.sum_rows(g.dup("SQR", x)))


def _router(g: Graph, x, e: int):
    """altup_compute_router_modalities: RMS norm x altup_router_norm, scaled, altup_router, tanh."""
    return g.dup("UNARY", g.mul_mat(g.weight(e, N_ALTUP, name="altup_router"),
                                    g.dup("SCALE", rms_norm(g, x, e, "altup_router_norm"))))


def _predict(g: Graph, cur, e: int, n_tokens: int):
    """altup_predict: the router's modalities, altup_predict_coef, the streams mixed by them, plus the streams."""
    coefs = g.reshape(g.mul_mat(g.weight(N_ALTUP, N_ALTUP * N_ALTUP, name="altup_predict_coef"),
                                _router(g, _view2d(g, cur), e)), N_ALTUP, N_ALTUP, n_tokens)
    pred = g.mul_mat(g.cont(g.permute(cur, 1, 2, 0, 3)), coefs)
    return g.dup("ADD", g.cont(g.permute(pred, 0, 2, 1, 3)), cur)


def _correct(g: Graph, pred, activated, e: int, n_tokens: int):
    """altup_correct: the innovation (activated - the active prediction) scaled per stream, plus the predictions."""
    modalities = _router(g, activated, e)
    innovation = g.dup("SUB", activated, _view2d(g, pred))
    coefs = g.dup("SCALE", g.mul_mat(g.weight(N_ALTUP, N_ALTUP, name="altup_correct_coef"), modalities))
    coefs = g.cont(g.transpose(coefs), 1, n_tokens, N_ALTUP)
    innovation = g.op("REPEAT", innovation.type, (e, n_tokens, N_ALTUP, 1), innovation)
    return g.dup("ADD", g.dup("MUL", innovation, coefs), pred)


def _topk(g: Graph, x):
    """gaussian_topk: relu(x - (mean + std x 1.6449)), std over the row (n - 1)."""
    mean = g.op("MEAN", "f32", (1,) + tuple(x.ne[1:]), x)
    std = g.dup("SQRT", g.dup("SCALE", g.sum_rows(g.dup("SQR", g.dup("SUB", x, mean)))))
    return g.dup("UNARY", g.dup("SUB", x, g.dup("ADD", mean, g.dup("SCALE", std))))


def _reused(g: Graph, q, inputs, p: Pass, s: GraphShape, n_kv: int, src: int):
    """build_attn without K and V (a KV-shared layer): Q (rotated for a quantised K), and layer ``src``'s cache read
    as graphs.attention reads it, nothing stored."""
    _k_idxs, _v_idxs, mask, k_rot, v_rot = inputs
    if k_rot is not None:
        n = k_rot.ne[0]
        q = g.reshape(g.mul_mat(k_rot, g.reshape(q, n, q.nelements() // n)), *q.ne)
    g.expand(q)
    hd, kv, ns = s.head_dim, s.n_head_kv, p.n_stream
    layer, g.layer = g.layer, src
    k_cache = g.weight(hd * kv, n_kv, ns, type_=p.type_k, kv=True, name="cache_k")
    v_cache = g.weight(hd * kv, n_kv, ns, type_=p.type_v, kv=True, name="cache_v")
    g.layer = layer
    rk, rv = _row(p.type_k), _row(p.type_v)
    kc = g.view(k_cache, (hd, kv, n_kv, ns), (TYPES[p.type_k][1], rk(hd), rk(hd * kv), rk(hd * kv * n_kv)))
    if p.fa:
        vc = g.view(v_cache, (hd, kv, n_kv, ns), (TYPES[p.type_v][1], rv(hd), rv(hd * kv), rv(hd * kv * n_kv)))
    else:
        vc = g.view(v_cache, (n_kv, kv, hd, ns), (TYPES[p.type_v][1], rv(n_kv * hd), rv(n_kv), rv(n_kv * hd * kv)))
    per = q.ne[2] // ns
    qv = g.view(q, (q.ne[0], q.ne[1], per, ns), (q.nb[0], q.nb[1], q.nb[2], q.nb[2] * per))
    qp, kp, vp = g.permute(qv, 0, 2, 1, 3), g.permute(kc, 0, 2, 1, 3), g.permute(vc, 0, 2, 1, 3)
    if p.fa:
        cur = g.flash_attn_ext(qp, g.cast(kp, "f16") if kp.type == "f32" else kp,
                               g.cast(vp, "f16") if vp.type == "f32" else vp, mask)
        cur = g.reshape(cur, cur.ne[0] * cur.ne[1], cur.ne[2] * cur.ne[3])
    else:
        kqv = g.mul_mat(vp, g.dup("SOFT_MAX", g.mul_mat(kp, qp), mask))
        cur = g.permute(kqv, 0, 2, 1, 3)
        cur = g.cont(cur, cur.ne[0] * cur.ne[1], cur.ne[2] * cur.ne[3])
    g.expand(cur)
    if v_rot is not None:
        n = v_rot.ne[0]
        cur = g.reshape(g.mul_mat(v_rot, g.reshape(cur, n, cur.nelements() // n)), *cur.ne)
    return cur


def _row(type_):
    block, size = TYPES[type_]
    return lambda n: size * n // block


def _per_layer_inputs(g: Graph, s: Gemma3nShape, p: Pass, inp):
    """build_inp_per_layer (its own token ids, the per-layer table's rows, scaled) and project_per_layer_inputs:
    [n_embd_altup, n_tokens, n_layer]."""
    e, n, nt = N_EMBD_ALTUP, s.n_layer, p.n_tokens
    tokens = g.input("i32", nt)
    rows = g.dup("SCALE", g.reshape(g.get_rows(g.weight(e * n, s.n_vocab, name="per_layer_token_embd"), tokens),
                                    e, n, nt))
    g.expand(rows)
    layer, g.layer = g.layer, 0         # layer 0's tensors (the module docstring)
    proj = g.reshape(g.dup("SCALE", g.mul_mat(g.weight(s.n_embd, e * n, name="per_layer_model_proj"), inp)), e, n, nt)
    proj = rms_norm(g, proj, e, "per_layer_proj_norm")
    g.layer = layer
    return g.cont(g.permute(g.dup("SCALE", g.dup("ADD", proj, rows)), 0, 2, 1, 3))


def _stack(g: Graph, s: Gemma3nShape, inp, n_tokens: int):
    """The three more AltUp streams: the input repeated, altup_proj, rescaled to the input's magnitude, concatenated."""
    e = s.n_embd
    target = _magnitude(g, inp)
    g.layer = s.n_layer
    added = g.mul_mat(g.weight(e, e, N_ALTUP - 1, name="altup_proj"),
                      g.op("REPEAT", inp.type, (e, n_tokens, N_ALTUP - 1, 1), inp))
    g.layer = -1
    added = g.dup("DIV", g.dup("MUL", added, target), _magnitude(g, added))
    return g.concat(inp, added, 2)


def _unstack(g: Graph, s: Gemma3nShape, cur, n_tokens: int):
    """The streams merged back: altup_unembd_proj on the three, rescaled, averaged with the first."""
    e = s.n_embd
    target = _magnitude(g, _view2d(g, cur))
    rest = g.view(cur, (e, n_tokens, N_ALTUP - 1), (cur.nb[0], cur.nb[1], cur.nb[2]))
    un = g.mul_mat(g.weight(e, e, N_ALTUP - 1, name="altup_unembd_proj"), rest)
    un = g.dup("DIV", g.dup("MUL", un, target), _magnitude(g, un))
    out = _view2d(g, cur)
    for _ in range(N_ALTUP - 1):
        out = g.dup("ADD", out, _view2d(g, un))
    return g.dup("SCALE", out)


def build_gemma3n(s: Gemma3nShape, p: Pass) -> Graph:
    """llama_model_gemma3n::graph::graph for one reserve ``p`` (module docstring)."""
    g = Graph()
    e, hd, n_head, nt = s.n_embd, s.head_dim, s.n_head, p.n_tokens
    tokens, embd, pos = token_inputs(g, s, p)
    inp = g.dup("SCALE", embeddings(g, s, tokens, embd))
    base, swa = attn_inputs(g, p, s, p.n_kv), attn_inputs(g, p, s, p.n_kv_swa)
    per_layer = _per_layer_inputs(g, s, p, inp)
    cur = _stack(g, s, inp, nt)
    for il in range(s.n_layer):
        g.layer = il
        pred = _predict(g, cur, e, nt)
        active = _view2d(g, pred)
        x = rms_norm(g, active, e, "attn_norm")
        laurel = g.mul_mat(g.weight(LAUREL_RANK, e, name="laurel_r"),
                           g.mul_mat(g.weight(e, LAUREL_RANK, name="laurel_l"), x))
        laurel = g.dup("ADD", rms_norm(g, laurel, e, "laurel_post_norm"), x)
        sliding = s.swa[il]
        inputs, n_kv = (swa, p.n_kv_swa) if sliding else (base, p.n_kv)
        if il < s.n_layer_kv:
            q, k, v = qkv_heads(g, s, p, x, False)
            q = g.dup("ROPE", rms_norm(g, q, hd, "attn_q_norm"), pos)
            k = g.dup("ROPE", rms_norm(g, k, hd, "attn_k_norm"), pos)
            attn = attention(g, q, k, g.dup("RMS_NORM", v), inputs, p, s, n_kv, iswa=True)
        else:       # the cache of layer n_layer_kv - 2 (sliding) or - 1 (full): llama-model.cpp's reuse callback
            q = g.reshape(g.mul_mat(g.weight(e, n_head * hd, name="attn_q"), x), hd, n_head, nt)
            q = g.dup("ROPE", rms_norm(g, q, hd, "attn_q_norm"), pos)
            attn = _reused(g, q, inputs, p, s, n_kv, s.n_layer_kv - (2 if sliding else 1))
        attn = g.mul_mat(g.weight(n_head * hd, e, name="attn_output"), attn)
        attn = g.dup("ADD", rms_norm(g, attn, e, "post_attention_norm"), active)
        attn_laurel = g.dup("SCALE", g.dup("ADD", attn, laurel))
        x = rms_norm(g, attn_laurel, e, "ffn_norm")
        up = g.mul_mat(g.weight(e, s.n_ff, name="ffn_up"), x)
        gate = g.mul_mat(g.weight(e, s.n_ff, name="ffn_gate"), x)
        gate = g.dup("UNARY", _topk(g, gate) if il < N_SPARSE else gate)
        x = g.mul_mat(g.weight(s.n_ff, e, name="ffn_down"), g.dup("MUL", up, gate))
        x = g.dup("ADD", rms_norm(g, x, e, "post_ffw_norm"), attn_laurel)
        corrected = _correct(g, pred, x, e, nt)
        first = g.dup("MUL", _view2d(g, corrected), g.weight(e, name="altup_correct_scale"))
        first = g.dup("UNARY", g.mul_mat(g.weight(e, N_EMBD_ALTUP, name="inp_gate"), first))
        first = g.dup("MUL", first, _view2d(g, per_layer))
        first = rms_norm(g, g.mul_mat(g.weight(N_EMBD_ALTUP, e, name="proj"), first), e, "post_norm")
        rest = g.view(corrected, (e, nt, N_ALTUP - 1), (corrected.nb[0], corrected.nb[1], corrected.nb[2]))
        cur = g.concat(_view2d(g, corrected), g.dup("ADD", rest, first), 2)
    g.layer = s.n_layer
    cur = g.get_rows(_unstack(g, s, cur, nt), g.input("i32", p.n_outputs))
    norm = rms_norm(g, cur, e, "output_norm")
    norm.flags |= OUTPUT
    logits = g.mul_mat(g.weight(e, s.n_vocab, name="output"), norm)
    # the final logit softcap, whatever the config says: llama.cpp@0c1e57098 src/models/gemma3n.cpp#L306-L311 builds
    # it always (its load_arch_hparams, L3-L19, reads no softcap key: f_final_logit_softcapping keeps 30, hparams.h)
    logits = g.dup("SCALE", g.dup("UNARY", g.dup("SCALE", logits)))
    logits.flags |= OUTPUT
    g.expand(logits)
    return g

"""llama.cpp's llama4 architecture (Llama 4 Scout / Maverick: Llama4ForConditionalGeneration's text model), its
tensors and forward graph, node by node.

Transcribed from the vendored llama.cpp (llama-cpp-python 0.3.36, llama.cpp 0c1e57098), src/models/llama4.cpp:

    load_arch_hparams (L3-L42): a GGUF without sliding_window (convert_hf_to_gguf writes it only as 0, for a
        config whose layer_types are all full_attention: conversion/llama.py#L396-L399) gets LLAMA_SWA_TYPE_CHUNKED,
        n_swa fixed at 8192 (not read from the file: attention_chunk_size is not written), load_swa_pattern(ml, 4):
        three chunked layers then one full; temperature tuning (floor 8192, scale 0.1); use_kq_norm unless the
        file has 128 experts (LLM_TYPE_17B_128E: Maverick), whatever the config's use_qk_norm says.
    load_arch_tensors (L44-L94): n_expert 0 refused; token_embd, output_norm, output; per layer attn_norm, separate
        Q/K/V (create_tensor_qkv), attn_output, ffn_norm, rope_freqs (layer 0's, duplicated: one tensor in the
        file, written by conversion/llama.py#L298-L326 for a llama3 rope_scaling); a MoE layer where
        (il + 1) % interleave_moe_layer_step == 0: router, routed experts of expert_feed_forward_length
        (intermediate_size) and one shared expert as wide; else a dense FFN of feed_forward_length
        (intermediate_size_mlp: Llama4Model.__init__ swaps them, conversion/llama.py#L383-L387).
    graph<iswa> (L104-L268): build_inp_embd, build_inp_pos, build_inp_attn_scale (an f32 [1, 1, n_tokens] input,
        src/llama-graph.cpp#L2479-L2492), build_attn_inp_kv_iswa (both caches' K/V indices and masks, then both
        caches' Hadamard inputs: #L3425-L3455), build_inp_out_ids; per layer attn_norm, Q/K/V, then on a RoPE layer
        ((il + 1) % 4 != 0) both roped and, with use_kq_norm, RMS-normed without weight; on a NoPE layer Q scaled
        by inp_attn_scale (ggml_mul); build_attn over the layer's cache (chunked layers: the SWA one); the
        residual; ffn_norm; build_moe_ffn (#L2033-L2380: sigmoid of the router's logits for the weights, the
        top-k chosen on the logits themselves, weight_before_ffn: the input repeated n_expert_used times
        (ggml_repeat_4d) and multiplied by the weights before the experts) plus the shared expert's build_ffn,
        added; or the dense build_ffn; the residual. Then output_norm and the lm_head.

Before PR #13194 (2025-05-20, "kv-cache : add SWA support") llama.cpp had one unified cache of n_ctx cells for every
layer and built llama4 in llm_build_llama with two masks over it (the chunked one in the SWA mask's slot:
src/llama-graph.cpp#L1347-L1371 and src/llama-model.cpp#L555-L573 at master's 8b91d5355 of 2025-04-11, PR #12882):
layouts gives that graph the full cache's cells for the chunked layers (plan: no SWA cache before that PR). Llama 4
came to llama.cpp with PR #12791 (1466621e7, 2025-04-07).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ...layer import FULL
from .arch_fields import field
from .ggml_graph import Graph
from .graphs import (
    QUANTISED,
    GraphShape,
    Pass,
    attention,
    attn_inputs,
    embeddings,
    experts_sum,
    glu,
    output_head,
    qkv_heads,
    rot_size,
    token_inputs,
)

__all__ = ["LLAMA4", "CHUNK", "Llama4Shape", "build_llama4", "llama4_shape", "llama4_tensors"]

# kvmem model_type -> llama.cpp architecture (llama-arch.cpp LLM_ARCH_NAMES "llama4")
LLAMA4 = {"llama4": "llama4", "llama4_text": "llama4"}
CHUNK = 8192        # src/models/llama4.cpp#L14: hparams.n_swa = 8192 for every chunked file
_STEP = 4           # load_swa_pattern(ml, 4), n_no_rope_layer_step 4 (src/llama-hparams.h#L258)


@dataclass(frozen=True)
class Llama4Shape(GraphShape):
    """GraphShape's widths (n_ff: the dense layers', n_ff_exp: the experts' and the shared expert's) and, per layer,
    whether it routes (scheduled.reduced_layers keeps it with the layers it keeps)."""

    moe_layers: tuple = ()
    kq_norm: bool = True


def _chunked(model) -> bool:
    """Whether the GGUF convert_hf_to_gguf writes gets chunked attention (no sliding_window 0 written)."""
    types = field(model, "layer_types")
    return not (isinstance(types, list) and types and all(t == "full_attention" for t in types))


def _moe_layers(model) -> tuple:
    step = field(model, "interleave_moe_layer_step", 1)
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        raise ValueError(f"{model.name}: config field 'interleave_moe_layer_step' is {step!r}; llama.cpp reads it "
                         "as a whole number (src/models/llama4.cpp#L6)")
    return tuple(step > 0 and (il + 1) % step == 0 for il in range(model.num_layers))


def _check_layers(model) -> None:
    """kvmem's layers (kvmem.configs.layouts._llama4: no_rope_layers) against llama.cpp's fixed ones: a config whose
    pattern differs is refused by name (families.check_family refuses it for the cache too; its config_window gives
    the cache llama.cpp's 8192 whatever attention_chunk_size says: the graph does not depend on it)."""
    chunked = _chunked(model)
    for il, layer in enumerate(model.layers):
        if (layer.kind != FULL) != (chunked and (il + 1) % _STEP != 0):
            raise ValueError(
                f"{model.name}: layer {il} is {layer.kind.value!r}; llama.cpp's llama4 makes every {_STEP}th layer "
                f"full and the others chunked (by {CHUNK} tokens) whatever the config's no_rope_layers say "
                "(src/models/llama4.cpp#L8-L19): give the GGUF file itself")


def llama4_tensors(model, h: int) -> list:
    """(name, ne) of a llama4 GGUF's trunk, in file order after output / output_norm / token_embd (the module
    docstring's load_arch_tensors); arch_tensors.arch_specs adds the head."""
    moe = model.facts.moe
    if moe is None or not moe.experts:
        raise ValueError(f"{model.name}: llama.cpp refuses a llama4 model without experts (\"model cannot have "
                         "zero experts\", src/models/llama4.cpp#L47-L49)")
    _check_layers(model)
    n_head, e, f = model.num_attention_heads, moe.experts, moe.intermediate_size
    dense_f = field(model, "intermediate_size_mlp")
    routed = _moe_layers(model)
    if not all(routed) and (not isinstance(dense_f, int) or dense_f <= 0):
        raise ValueError(f"{model.name}: config field 'intermediate_size_mlp' is {dense_f!r}; llama.cpp's dense "
                         "llama4 layers need it as feed_forward_length (conversion/llama.py#L383-L387)")
    out: list[tuple[str, tuple[int, ...]]] = []
    rope = field(model, "rope_scaling") or {}
    if isinstance(rope, dict) and rope.get("rope_type") == "llama3":      # conversion/llama.py#L298-L326
        out.append(("rope_freqs.weight", (model.layers[0].head_dim_k // 2,)))
    for il, layer in enumerate(model.layers):
        b, hd = f"blk.{il}.", layer.head_dim_k
        q, kv = n_head * hd, layer.kv_heads * hd
        out += [(b + "attn_norm.weight", (h,)), (b + "attn_q.weight", (h, q)), (b + "attn_k.weight", (h, kv)),
                (b + "attn_v.weight", (h, kv)), (b + "attn_output.weight", (q, h)), (b + "ffn_norm.weight", (h,))]
        if routed[il]:
            out += [(b + "ffn_gate_inp.weight", (h, e)), (b + "ffn_gate_exps.weight", (h, f, e)),
                    (b + "ffn_down_exps.weight", (f, h, e)), (b + "ffn_up_exps.weight", (h, f, e)),
                    (b + "ffn_gate_shexp.weight", (h, f)), (b + "ffn_down_shexp.weight", (f, h)),
                    (b + "ffn_up_shexp.weight", (h, f))]
        else:
            out += [(b + "ffn_gate.weight", (h, dense_f)), (b + "ffn_down.weight", (dense_f, h)),
                    (b + "ffn_up.weight", (h, dense_f))]
    return out


def llama4_shape(model) -> Llama4Shape | None:
    """The graph widths of a llama4 ``model`` as convert_hf_to_gguf writes its GGUF, or None where the graph above
    is not the one llama.cpp builds or not known: no experts, per-layer widths, layers other than llama.cpp's fixed
    pattern, a rope dimension other than the head (llama4.cpp#L109 asserts it)."""
    if LLAMA4.get(model.model_type) is None:
        return None
    moe, layers = model.facts.moe, model.layers
    if moe is None or not moe.experts or not layers or not model.facts.vocab_size:
        return None
    first = layers[0]
    if any((layer.kv_heads, layer.head_dim_k, layer.head_dim_v) != (first.kv_heads, first.head_dim_k,
                                                                        first.head_dim_k) for layer in layers):
        return None
    try:
        _check_layers(model)
        routed = _moe_layers(model)
    except ValueError:
        return None
    dense_f = field(model, "intermediate_size_mlp", 0) or 0
    if not all(routed) and dense_f <= 0:
        return None
    chunked = _chunked(model)
    return Llama4Shape(arch="llama4", n_layer=len(layers), n_embd=model.hidden_size,
                       n_head=model.num_attention_heads, n_head_kv=first.kv_heads, head_dim=first.head_dim_k,
                       n_ff=dense_f, n_vocab=model.facts.vocab_size, n_expert=moe.experts, n_expert_used=moe.top_k,
                       n_ff_exp=moe.intermediate_size, n_ff_shexp=moe.intermediate_size, gating="sigmoid",
                       swa=tuple((il + 1) % _STEP != 0 for il in range(len(layers))) if chunked else (),
                       moe_layers=routed, kq_norm=moe.experts != 128)


def _iswa_inputs(g: Graph, s: GraphShape, p: Pass) -> tuple:
    """build_attn_inp_kv_iswa: the base cache's K/V indices and mask, the SWA cache's, then the Hadamard inputs of
    each (a quantised type, the head a multiple of 64: graphs.attn_inputs)."""
    plain = replace(p, kv_rot=False)
    base, swa = attn_inputs(g, plain, s, p.n_kv), attn_inputs(g, plain, s, p.n_kv_swa)
    hd = s.head_dim

    def rot():
        k_rot = g.input("f32", rot_size(hd), rot_size(hd)) if p.kv_rot and p.type_k in QUANTISED and hd % 64 == 0 \
            else None
        v_rot = g.input("f32", 64, 64) if p.kv_rot and p.type_v in QUANTISED and hd % 64 == 0 else None
        return k_rot, v_rot
    return base[:3] + rot(), swa[:3] + rot()


def _moe(g: Graph, cur, s: GraphShape):
    """build_moe_ffn for llama4 (module docstring): no bias, no normalisation, no scale (no expert_weights_scale
    in the file: 0)."""
    n_embd, n_tokens, n_exp, n_used = cur.ne[0], cur.ne[1], s.n_expert, s.n_expert_used
    logits = g.mul_mat(g.weight(n_embd, n_exp, name="ffn_gate_inp"), cur)
    probs = g.dup("UNARY", logits)                      # ggml_sigmoid
    selected = g.argsort_top_k(logits, n_used)          # selection_probs = logits (llama-graph.cpp#L2084-L2088)
    weights = g.get_rows(g.reshape(probs, 1, n_exp, n_tokens), selected)
    g.expand(weights)
    cur = g.reshape(cur, n_embd, 1, n_tokens)
    repeated = g.op("REPEAT", cur.type, (n_embd, n_used, n_tokens, 1), cur)      # ggml_repeat_4d
    cur = g.dup("MUL", repeated, weights)
    f = s.n_ff_exp
    up = g.mul_mat_id(g.weight(n_embd, f, n_exp, name="ffn_up_exps"), cur, selected)
    gate = g.mul_mat_id(g.weight(n_embd, f, n_exp, name="ffn_gate_exps"), cur, selected)
    act = glu(g, s, gate, up) if s.glu_split else g.op("GLU", gate.type, gate.ne, gate, up)     # graphs.glu
    down = g.mul_mat_id(g.weight(f, n_embd, n_exp, name="ffn_down_exps"), act, selected)
    g.expand(down)
    return experts_sum(g, down, n_embd, n_tokens, n_used)


def _ffn(g: Graph, s: GraphShape, cur, n_embd: int, n_ff: int, suffix: str = ""):
    """build_ffn, LLM_FFN_SILU / LLM_FFN_PAR: up, gate, ggml_swiglu_split (before PR #14158 silu, mul: graphs.glu),
    down."""
    up = g.mul_mat(g.weight(n_embd, n_ff, name="ffn_up" + suffix), cur)
    gate = g.mul_mat(g.weight(n_embd, n_ff, name="ffn_gate" + suffix), cur)
    return g.mul_mat(g.weight(n_ff, n_embd, name="ffn_down" + suffix), glu(g, s, gate, up))


def build_llama4(s: Llama4Shape, p: Pass) -> Graph:
    """llama_model_llama4::graph<iswa> for one reserve ``p`` (module docstring)."""
    g = Graph()
    e, hd, n_head, n_tokens = s.n_embd, s.head_dim, s.n_head, p.n_tokens
    iswa = any(s.swa)
    tokens, embd, pos = token_inputs(g, s, p)
    attn_scale = g.input("f32", 1, 1, n_tokens)
    base, swa = _iswa_inputs(g, s, p) if iswa else (attn_inputs(g, p, s, p.n_kv), None)
    out_ids = g.input("i32", p.n_outputs)
    inp_l = embeddings(g, s, tokens, embd)

    def norm(x, name):
        return g.dup("MUL", g.dup("RMS_NORM", x), g.weight(e, name=name))

    for il in range(s.n_layer):
        g.layer = il
        inp_sa = inp_l
        cur = norm(inp_l, "attn_norm")
        q, k, v = qkv_heads(g, s, p, cur, False)
        # use_rope: (il + 1) % n_no_rope_layer_step != 0; a file with sliding_window 0 sets the step to n_layer
        rope = (il + 1) % (_STEP if iswa else s.n_layer) != 0
        if rope:
            q, k = g.dup("ROPE", q, pos), g.dup("ROPE", k, pos)
            if s.kq_norm:
                q, k = g.dup("RMS_NORM", q), g.dup("RMS_NORM", k)
        else:
            q = g.dup("MUL", q, attn_scale)
        sliding = iswa and s.swa[il]
        cur = attention(g, q, k, v, swa if sliding else base, p, s, p.n_kv_swa if sliding else p.n_kv, iswa=iswa)
        cur = g.mul_mat(g.weight(n_head * hd, e, name="attn_output"), cur)
        if il == s.n_layer - 1:
            cur, inp_sa = g.get_rows(cur, out_ids), g.get_rows(inp_sa, out_ids)
        ffn_inp = g.dup("ADD", cur, inp_sa)
        cur = norm(ffn_inp, "ffn_norm")
        if s.moe_layers[il]:
            cur = g.dup("ADD", _moe(g, cur, s), _ffn(g, s, cur, e, s.n_ff_exp, "_shexp"))
        else:
            cur = _ffn(g, s, cur, e, s.n_ff)
        inp_l = g.dup("ADD", cur, ffn_inp)
    return output_head(g, s, inp_l)

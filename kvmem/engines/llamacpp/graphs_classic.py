"""llama.cpp's falcon, gpt2 and gptneox architectures (Falcon-7B/40B, GPT-2, GPT-NeoX-20B / Pythia): their tensors
from a config and their forward graphs, node by node.

Transcribed from the vendored llama.cpp (llama-cpp-python 0.3.36, llama.cpp 0c1e57098):

    falcon   src/models/falcon.cpp load_arch_tensors (L13-L44): token_embd, output_norm and its bias, output (absent:
             token_embd again, TENSOR_DUPLICATED); per layer attn_norm and bias, attn_norm_2 and bias (optional:
             Falcon-40B's new_decoder_architecture, whose ln_attn gguf-py maps to attn_norm_2 and ln_mlp to
             attn_norm), attn_qkv [n_embd, n_embd + 2 n_embd_gqa], attn_output, ffn_down, ffn_up: no biases, no
             ffn_norm. The converter (conversion/falcon.py#L18-L35) writes feed_forward_length 4 x hidden_size,
             head_count_kv num_kv_heads / n_head_kv (1 when absent: falcon-7b's config.json has neither) and
             reorders the fused query_key_value into Q heads, K heads, V heads (#L48-L57): its width is the
             checkpoint's (n_head + 2 n_kv) x head_dim, n_kv as transformers' FalconAttention reads the config
             (kvmem.configs.layers: 1 under multi_query without new_decoder_architecture).
             graph (L50-L161): LayerNorm (ggml_norm, x weight + bias), the fused QKV's three views, RoPE on Q and K,
             build_attn (wo, no bias), then in parallel the FFN on attn_norm's output (ffn_up, GELU, ffn_down:
             build_ffn LLM_FFN_GELU / LLM_FFN_SEQ), both residuals added.
    gpt2     src/models/gpt2.cpp load_arch_tensors (L15-L52): token_embd, position_embd [n_embd, n_ctx_train],
             output_norm + bias, output (absent: token_embd again); per layer attn_norm + bias, attn_qkv + bias,
             attn_output + bias, ffn_norm + bias, ffn_down + bias, ffn_up + bias. The converter
             (conversion/gpt2.py#L18-L25) writes context_length n_ctx and feed_forward_length 4 x n_embd, no
             head_count_kv (n_head). graph (L58-L148): the position rows added to the token rows, no RoPE, the
             fused QKV with its bias, wo + bias, residual, ffn_norm, the biased GELU FFN, residual.
    gptneox  src/models/gptneox.cpp load_arch_tensors (L50-L81): gpt2's per-layer tensors without position_embd,
             output required; conversion/gptneox.py#L20-L30 writes intermediate_size, rotary_pct x head_dim rope
             dims and use_parallel_residual (default true). graph (L87-L219): RoPE (partial: same shapes) on the
             QKV views; with parallel residual the FFN on ffn_norm(inpL), added to inpL and the attention output;
             without, gpt2's sequential order.

The file's tensor order here: output, output_norm, token_embd, position_embd, output_norm.bias, then blk.0, blk.1, ...
(the host tensors of a full offload adjacent, as in the converter's files: wpe / wte sort together).
"""

from __future__ import annotations

from dataclasses import dataclass

from .arch_fields import field, uniform_full
from .ggml_graph import OUTPUT, Graph
from .graphs import GraphShape, Pass, attention, attn_inputs, embeddings, token_inputs

__all__ = ["CLASSIC", "ClassicShape", "build_classic", "classic_shape", "classic_tensors"]

# kvmem model_type -> llama.cpp architecture (llama-arch.cpp#L13-L17 LLM_ARCH_NAMES)
CLASSIC = {"falcon": "falcon", "gpt2": "gpt2", "gpt_neox": "gptneox"}


@dataclass(frozen=True)
class ClassicShape(GraphShape):
    """GraphShape's widths (qkv_bias: the fused QKV's, wo's and the FFN's biases: gpt2, gptneox) and the family's
    own: falcon's second attention norm, gptneox's parallel residual, gpt2's position rows."""

    norm_2: bool = False
    par_res: bool = False
    n_pos: int = 0


def _int(model, name: str):
    value = field(model, name)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _falcon_checks(model, h: int) -> int:
    """Falcon's refusals; its n_ff."""
    if field(model, "bias", False):
        raise ValueError(f"{model.name}: config field 'bias' is true; llama.cpp's falcon loads no biases "
                         "(llama.cpp@0c1e57098 src/models/falcon.cpp#L29-L43) and refuses a GGUF that holds them "
                         "(\"wrong number of tensors\", src/llama-model-loader.cpp#L1396-L1398)")
    if not field(model, "parallel_attn", True):
        raise ValueError(f"{model.name}: config field 'parallel_attn' is false; its post_attention_layernorm "
                         "(ffn_norm in the GGUF) is no tensor llama.cpp's falcon loads (src/models/falcon.cpp#L29-L43, "
                         "its graph always parallel: #L121-L135)")
    ffn = _int(model, "ffn_hidden_size")
    if ffn is not None and ffn != 4 * h:
        raise ValueError(f"{model.name}: config field 'ffn_hidden_size' is {ffn}; convert_hf_to_gguf writes "
                         f"feed_forward_length 4 x hidden_size = {4 * h} (conversion/falcon.py#L30), which llama.cpp "
                         "checks the FFN tensors against")
    return 4 * h


def _norm_2(model) -> bool:
    """Falcon's ln_attn (attn_norm_2): new_decoder_architecture with two layer norms (transformers
    FalconDecoderLayer: num_ln_in_parallel_attn None -> 2 there)."""
    return bool(field(model, "new_decoder_architecture", False)) and field(model, "num_ln_in_parallel_attn", 2) == 2


def _gpt2_checks(model, h: int) -> tuple:
    """GPT-2's refusals; (n_ff, position rows)."""
    n_ctx = _int(model, "n_ctx")
    if n_ctx is None or n_ctx <= 0:
        raise ValueError(f"{model.name}: config field 'n_ctx' is {field(model, 'n_ctx')!r}; convert_hf_to_gguf writes "
                         "it as context_length (conversion/gpt2.py#L20), the rows llama.cpp gives position_embd "
                         "(src/models/gpt2.cpp#L19)")
    n_pos = _int(model, "n_positions")
    if n_pos is not None and n_pos != n_ctx:
        raise ValueError(f"{model.name}: config field 'n_positions' is {n_pos}, n_ctx {n_ctx}: the checkpoint's wpe "
                         f"has {n_pos} rows and llama.cpp asks position_embd for n_ctx_train = {n_ctx} "
                         "(src/models/gpt2.cpp#L19; conversion/gpt2.py#L20)")
    inner = _int(model, "n_inner")
    if inner is not None and inner != 4 * h:
        raise ValueError(f"{model.name}: config field 'n_inner' is {inner}; convert_hf_to_gguf writes "
                         f"feed_forward_length 4 x n_embd = {4 * h} (conversion/gpt2.py#L21)")
    return 4 * h, n_ctx


def _neox_checks(model) -> int:
    """GPT-NeoX's refusals; its n_ff."""
    if model.facts.tie_word_embeddings:
        raise ValueError(f"{model.name}: config field 'tie_word_embeddings' is true; llama.cpp's gptneox requires "
                         "its own output.weight (src/models/gptneox.cpp#L58)")
    if not field(model, "attention_bias", True):
        raise ValueError(f"{model.name}: config field 'attention_bias' is false; llama.cpp's gptneox requires "
                         "attn_qkv.bias and attn_output.bias (src/models/gptneox.cpp#L67-L70)")
    n_ff = _int(model, "intermediate_size")
    if n_ff is None or n_ff <= 0:
        raise ValueError(f"{model.name}: config field 'intermediate_size' is {field(model, 'intermediate_size')!r}; "
                         "convert_hf_to_gguf writes it as feed_forward_length (conversion/gptneox.py#L23)")
    return n_ff


def _widths(model) -> tuple:
    """(n_ff, n_pos, norm_2) of the family, its refusals raised."""
    arch, h = CLASSIC[model.model_type], model.hidden_size
    if arch == "falcon":
        return _falcon_checks(model, h), 0, _norm_2(model)
    if arch == "gpt2":
        return (*_gpt2_checks(model, h), False)
    return _neox_checks(model), 0, False


def classic_tensors(model, h: int) -> list:
    """(name, ne) of a falcon / gpt2 / gptneox GGUF after output / output_norm / token_embd (the module docstring's
    load_arch_tensors; arch_tensors.arch_specs adds the head)."""
    # llama.cpp@0c1e57098 src/models/falcon.cpp#L16-L43, gpt2.cpp#L18-L51, gptneox.cpp#L53-L80
    arch = CLASSIC[model.model_type]
    n_ff, n_pos, norm_2 = _widths(model)
    biased = arch != "falcon"
    out: list[tuple[str, tuple[int, ...]]] = [("position_embd.weight", (h, n_pos))] if n_pos else []
    out.append(("output_norm.bias", (h,)))
    for il, layer in enumerate(model.layers):
        b, hd = f"blk.{il}.", layer.head_dim_k
        qkv = (model.num_attention_heads + 2 * layer.kv_heads) * hd
        out += [(b + "attn_norm.weight", (h,)), (b + "attn_norm.bias", (h,))]
        if norm_2:
            out += [(b + "attn_norm_2.weight", (h,)), (b + "attn_norm_2.bias", (h,))]
        out.append((b + "attn_qkv.weight", (h, qkv)))
        if biased:
            out.append((b + "attn_qkv.bias", (qkv,)))
        out.append((b + "attn_output.weight", (model.num_attention_heads * hd, h)))
        if biased:
            out += [(b + "attn_output.bias", (h,)), (b + "ffn_norm.weight", (h,)), (b + "ffn_norm.bias", (h,))]
        out.append((b + "ffn_down.weight", (n_ff, h)))
        if biased:
            out.append((b + "ffn_down.bias", (h,)))
        out.append((b + "ffn_up.weight", (h, n_ff)))
        if biased:
            out.append((b + "ffn_up.bias", (n_ff,)))
    return out


def classic_shape(model) -> ClassicShape | None:
    """The graph widths of a falcon / gpt2 / gptneox ``model`` as its GGUF holds them, or None where the graph above
    is not the one llama.cpp builds or not known: per-layer widths, a layer other than full attention, a config
    classic_tensors refuses."""
    arch = CLASSIC.get(model.model_type)
    layers = model.layers
    if arch is None or not layers or not model.facts.vocab_size:
        return None
    first = layers[0]
    if not uniform_full(layers):
        return None
    names = {t.name: tuple(t.shape) for t in getattr(model.checkpoint, "tensors", None) or ()}
    if names:       # a GGUF read back: its own tensors say what the config would
        n_ff = model.facts.intermediate_size
        pos = names.get("position_embd.weight")
        n_pos, norm_2 = (pos[1] if pos else 0), "blk.0.attn_norm_2.weight" in names
        if not n_ff or (arch == "gpt2") != bool(pos):
            return None
    else:
        try:
            n_ff, n_pos, norm_2 = _widths(model)
        except ValueError:
            return None
    return ClassicShape(arch=arch, n_layer=len(layers), n_embd=model.hidden_size, n_head=model.num_attention_heads,
                        n_head_kv=first.kv_heads, head_dim=first.head_dim_k, n_ff=n_ff, n_vocab=model.facts.vocab_size,
                        qkv_bias=arch != "falcon", fused_qkv=True, norm_2=norm_2,
                        par_res=arch == "gptneox" and bool(field(model, "use_parallel_residual", True)), n_pos=n_pos)


def build_classic(s: ClassicShape, p: Pass) -> Graph:
    """llama_model_falcon / gpt2 / gptneox ::graph::graph for one reserve ``p`` (module docstring)."""
    g = Graph()
    e, hd, n_tokens, bias = s.n_embd, s.head_dim, p.n_tokens, s.qkv_bias
    n_q, n_gqa = s.n_head * hd, s.n_head_kv * hd
    tokens, embd, pos = token_inputs(g, s, p)
    inputs = attn_inputs(g, p, s, p.n_kv)
    out_ids = g.input("i32", p.n_outputs)
    inp_l = embeddings(g, s, tokens, embd)
    if s.n_pos:     # gpt2.cpp#L74-L77: the position rows added
        inp_l = g.dup("ADD", inp_l, g.get_rows(g.weight(e, s.n_pos, name="position_embd"), pos))

    def norm(x, name):      # build_norm LLM_NORM: ggml_norm, x weight, + bias
        return g.dup("ADD", g.dup("MUL", g.dup("NORM", x), g.weight(e, name=name)), g.weight(e, name=name + ".bias"))

    def linear(x, n_in, n_out, name, biased):
        out = g.mul_mat(g.weight(n_in, n_out, name=name), x)
        return g.dup("ADD", out, g.weight(n_out, name=name + ".bias")) if biased else out

    def ffn(x):             # build_ffn LLM_FFN_GELU, LLM_FFN_SEQ: up (+ bias), GELU, down (+ bias)
        up = linear(x, e, s.n_ff, "ffn_up", bias)
        return linear(g.dup("UNARY", up), s.n_ff, e, "ffn_down", bias)

    for il in range(s.n_layer):
        g.layer = il
        attn_norm = norm(inp_l, "attn_norm")
        cur = norm(inp_l, "attn_norm_2") if s.norm_2 else attn_norm
        qkv = linear(cur, e, n_q + 2 * n_gqa, "attn_qkv", bias)      # build_qkv, fused: three views
        q, k, v = (g.view(qkv, (hd, heads, n_tokens), (qkv.nb[0], qkv.nb[0] * hd, qkv.nb[1]))
                   for heads in (s.n_head, s.n_head_kv, s.n_head_kv))
        if s.arch != "gpt2":
            q, k = g.dup("ROPE", q, pos), g.dup("ROPE", k, pos)
        cur = linear(attention(g, q, k, v, inputs, p, s, p.n_kv), n_q, e, "attn_output", bias)
        if il == s.n_layer - 1:
            cur, inp_l = g.get_rows(cur, out_ids), g.get_rows(inp_l, out_ids)
            if s.arch == "falcon":
                attn_norm = g.get_rows(attn_norm, out_ids)
        if s.arch == "falcon":      # falcon.cpp#L121-L135: the FFN on attn_norm, both residuals
            inp_l = g.dup("ADD", g.dup("ADD", ffn(attn_norm), cur), inp_l)
        elif s.par_res:             # gptneox.cpp#L143-L172
            inp_l = g.dup("ADD", g.dup("ADD", ffn(norm(inp_l, "ffn_norm")), inp_l), cur)
        else:                       # gpt2.cpp#L104-L125, gptneox.cpp#L173-L201
            ffn_inp = g.dup("ADD", cur, inp_l)
            inp_l = g.dup("ADD", ffn(norm(ffn_inp, "ffn_norm")), ffn_inp)
    g.layer = s.n_layer
    out = norm(inp_l, "output_norm")
    logits = g.mul_mat(g.weight(e, s.n_vocab, name="output"), out)
    out.flags |= OUTPUT
    logits.flags |= OUTPUT
    g.expand(logits)
    return g

"""Weight bytes from the config's parameter count (kvmem.configs.params), for a format, or exact from the
checkpoint's headers when weight_dtype is "auto" and the model carries one.

The parameter count comes from the config (kvmem.configs.params: ``params_total``, ``params_active``,
``params_embedding``), split into four groups that formats treat differently:

    embedding  the input table, vocab x hidden
    lm_head    the output projection, vocab x hidden; 0 when tied to the input table
               (tied embeddings are stored and counted once)
    experts    routed MoE experts (every expert is resident); from the config,
               (total - active - untied lm_head) x experts / (experts - top_k), or from the experts' shape
               (MoE layers x experts x 3 (2 for a plain MLP) x hidden x expert width) when every expert is active
    dense      everything else: attention, dense and shared-expert MLPs, routers, norms
"""

from __future__ import annotations

from fractions import Fraction

from ..catalog import as_model
from ..units import cdiv
from .checkpoint import exact_weights, parallel_facts
from .formats import EMBED_16, FORMATS, GGUF_FORMATS, resolve_weight_dtype
from .record import WeightLayout, Weights


def weights(model, weight_dtype="auto") -> Weights:
    """The weight bytes of ``model`` stored as ``weight_dtype`` (see the module docstring)."""
    model = as_model(model)
    fallback = ""
    if isinstance(weight_dtype, str) and weight_dtype.strip().lower() == "auto" and model.checkpoint is not None:
        from ..sources import load_checkpoint
        checkpoint, fallback = load_checkpoint(model)
        if checkpoint is not None:
            return exact_weights(model, checkpoint)
    if not model.params_total:
        raise ValueError(f"model {model.name!r} has no parameter count (params_total is unknown for its "
                         "family); give the weight bytes per device: weights_bytes=... (kvmem fit --weights 62GB; "
                         "the app's Weights per device box)")
    name, why = resolve_weight_dtype(model, weight_dtype)
    fmt = FORMATS[name]
    total, active, embedding = model.params_total, model.params_active or model.params_total, model.params_embedding
    tied = model.facts.tie_word_embeddings
    lm_head = 0 if tied else embedding
    moe = model.facts.moe
    experts, top_k = (moe.experts, moe.top_k) if moe else (0, 0)
    expert_params = expert_bias = 0
    if experts and top_k >= experts:
        # every routed expert is read by every token: total - active holds no inactive expert to scale up,
        # so the routed experts are counted from their shape (each a gated or plain MLP of its own width)
        # (Nemotron-H's experts are relu2 up/down, two matrices: transformers@5.24.0 models/nemotron_h/
        # modeling_nemotron_h.py NemotronHMoE, as kvmem.configs.params counts them; the others gate, up, down)
        per_expert = 2 if model.model_type == "nemotron_h" else 3
        moe_layers = sum(1 for i in range(model.num_layers) if moe.is_moe(i))
        expert_params = moe_layers * experts * per_expert * model.hidden_size * moe.intermediate_size
    elif experts:
        expert_params = (total - active - lm_head) * experts // (experts - top_k)
        if model.model_type == "gpt_oss":   # per-expert biases of gate_up (2 x inter) and down (hidden)
            inter = model.facts.intermediate_size
            expert_bias = model.num_layers * experts * (2 * inter + model.hidden_size)
    dense_params = total - embedding - lm_head - expert_params
    if dense_params < 0:
        raise ValueError(f"model {model.name!r}: parameter groups do not add up (dense {dense_params})")

    notes = [why] if why else []
    if fallback:
        notes.append(f"weights: formula estimate from the config's parameter count ({fallback})")
    linear = fmt.linear
    if fmt.per_hidden:
        linear += Fraction(fmt.per_hidden, model.hidden_size)
    emb_rate = fmt.embedding
    dense_rate = linear
    expert_rate = fmt.experts if fmt.experts is not None else linear
    if fmt.experts_only and experts:
        dense_rate = EMBED_16
    elif fmt.experts_only:
        notes.append(f"{name} on a dense model: every linear layer in {name}")

    def cost(params: int, rate: Fraction, quantised: bool = True) -> int:
        nbytes = params * rate
        scales = 4 * cdiv(params, fmt.block_scale) if fmt.block_scale and quantised else 0
        return cdiv(nbytes.numerator, nbytes.denominator) + scales

    expert_bytes = cost(expert_params - expert_bias, expert_rate) + 2 * expert_bias
    if name in GGUF_FORMATS and experts:
        notes.append("GGUF presets are measured on a dense model; MoE files land lower "
                     "(Mixtral Q4_K_M 4.53 BPW vs 4.89): expect up to ~8% less")
    kv_proj, mla = parallel_facts(model)
    return Weights(model=model.name, weight_dtype=name, params_total=total,
                   embedding_bytes=cost(embedding, emb_rate, False), lm_head_bytes=cost(lm_head, emb_rate, False),
                   dense_bytes=cost(dense_params, dense_rate, dense_rate == linear), expert_bytes=expert_bytes,
                   notes=tuple(notes),
                   layout=WeightLayout(n_layers=model.num_layers, experts=experts, top_k=top_k,
                                       expert_params=expert_params, dense_params=dense_params, tied=tied,
                                       dense_rate=dense_rate, kv_proj=tuple(kv_proj), mla_replicated=mla))


def weight_bytes(model, weight_dtype="auto") -> int:
    """Total weight bytes of one copy of ``model`` in ``weight_dtype`` (exact int)."""
    return weights(model, weight_dtype).total_bytes

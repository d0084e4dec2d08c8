"""Why an engine's number differs from the seed's formula: plain-language reasons, from the model
and the Estimate (no new arithmetic: every number here comes from estimate() or seed_terms())."""

from __future__ import annotations

from .engines import engine_estimate
from .layer import CHUNKED, COMPRESSED, LINEAR, MLA, NONE, SHARED, SLIDING
from .textbook import seed_terms
from .units import format_bytes

__all__ = ["reasons"]


def reasons(model, result) -> list[str]:
    """Sentences explaining the gap between the naive formula, the ideal count and ``result``."""
    if not any(layer.caches_tokens for layer in model.layers):
        return [f"{model.name} is attention-free: no layer caches tokens; each sequence keeps a fixed state "
                f"({format_bytes(result.state_bytes)} here) whatever the context, so the seed's formula does "
                "not apply.", *(model.reading.lines() if model.reading else ()), *result.notes]
    try:
        seed = seed_terms(model, tokens=result.tokens, batch=result.batch, kv_dtype=result.kv_dtype)
        naive = f"The seed formula with these numbers gives {format_bytes(seed.formula_bytes)}"
    except ValueError as exc:  # an MLA model whose config lacks the per-head widths
        naive = f"The seed formula has no naive reading here ({exc})"
    ideal = engine_estimate(model, engine="ideal", tokens=result.tokens, batch=result.batch, kv_dtype=result.kv_dtype,
                      tp=result.tp, pp=result.pp)
    out = [f"{naive}; every cached element counted once (ideal) is {format_bytes(ideal.total_bytes)}; "
           f"{result.engine} holds {format_bytes(result.total_bytes)} on one device."]
    kinds = model.kinds
    first = next(layer for layer in model.layers if layer.caches_tokens)
    windows = {kind: next(layer.window for layer in model.layers if layer.kind == kind)
               for kind in (SLIDING, CHUNKED) if kinds.get(kind)}
    if SLIDING in windows:
        out.append(f"{kinds[SLIDING]} of {model.num_layers} layers use a sliding window of {windows[SLIDING]:,} "
                   "tokens and hold at most that many, whatever the context.")
    if CHUNKED in windows:
        out.append(f"{kinds[CHUNKED]} layers attend within chunks of {windows[CHUNKED]:,} tokens.")
    if kinds.get(MLA):
        out.append(f"MLA: each layer caches one {first.k_width}-wide latent per token for all "
                   f"{model.num_attention_heads} heads, not per-head K and V.")
    if kinds.get(LINEAR):
        out.append(f"{kinds[LINEAR]} linear-attention/SSM layers keep a fixed state per sequence "
                   f"({format_bytes(result.state_bytes)} here) instead of a per-token cache.")
    if kinds.get(COMPRESSED):
        comp = [layer.compressor for layer in model.layers if layer.compressor]
        rates = sorted({c.rate for c in comp})
        out.append(f"{kinds[COMPRESSED]} layers keep one {first.k_width}-wide row per token (shared by K, V and "
                   f"all {model.num_attention_heads} heads) for the last {first.window:,} tokens"
                   + (f"; {len(comp)} of them also one compressed row per "
                      f"{' or '.join(f'{r:,}' for r in rates)} tokens, and a small buffer of the tokens not yet "
                      "compressed (DeepSeek-V4's compressed sparse attention)" if comp else "") + ".")
    if kinds.get(SHARED):
        out.append(f"{kinds[SHARED]} layers reuse another layer's KV and store none.")
    if kinds.get(NONE):
        out.append(f"{kinds[NONE]} layers (MLP/MoE blocks of a hybrid) cache nothing.")
    if first.kind not in (MLA, COMPRESSED) and first.kv_heads < model.num_attention_heads:
        out.append(f"GQA: {first.kv_heads} KV heads serve {model.num_attention_heads} query heads "
                   f"({model.num_attention_heads // first.kv_heads}x smaller than MHA).")
    if result.tp > 1:
        out.append(f"Tensor parallel {result.tp}: KV heads are split across devices; the number is one device's.")
    if model.reading:
        out.extend(model.reading.lines())
    out.extend(result.notes)
    return out

"""Architecture variants: the same model's cache as MHA, GQA, MQA, MLA, or cross-layer sharing (all retrain)."""

from __future__ import annotations

from dataclasses import replace

from ..catalog import as_model
from ..engines import engine_estimate
from ..layer import FULL, MLA, SHARED, Layer
from ..model import Model
from .inputs import count
from .rows import VariantRow


def _as_heads(model: Model, layer: Layer, kv_heads: int) -> Layer:
    if layer.kind.per_head:
        return replace(layer, kv_heads=kv_heads)
    if layer.kind == MLA:
        nope, rope, v = model.facts.qk_nope_head_dim, layer.qk_rope_head_dim, model.facts.v_head_dim
        if nope and rope and v:
            return Layer(FULL, kv_heads=kv_heads, head_dim_k=nope + rope, head_dim_v=v)
    return layer


def _head_variant(model: Model, kv_heads: int) -> Model:
    heads = model.num_attention_heads
    if kv_heads < 1 or heads % kv_heads:
        raise ValueError(f"GQA groups must divide the {heads} query heads, got {kv_heads}")
    return model.with_layers([_as_heads(model, layer, kv_heads) for layer in model.layers])


def _mla_variant(model: Model, rank: int, rope: int) -> Model:
    rank = count("mla_rank", rank, minimum=1)
    rope = count("mla_rope_dim", rope)
    return model.with_layers([Layer(MLA, kv_lora_rank=rank, qk_rope_head_dim=rope, state=layer.state)
                              if layer.kind == FULL else layer for layer in model.layers])


def _cross_layer_variant(model: Model, every: int) -> Model:
    every = count("share_every", every, minimum=1)
    layers: list = []
    seen: dict = {}
    anchor: dict = {}
    for i, layer in enumerate(model.layers):
        if not layer.caches_tokens:
            layers.append(layer)
            continue
        key = replace(layer, state=None)
        n = seen.get(key, 0)
        seen[key] = n + 1
        if n % every == 0:
            anchor[key] = i
            layers.append(layer)
        else:
            layers.append(Layer(SHARED, shared_with=anchor[key], state=layer.state))
    return model.with_layers(layers)


def _no_window_variant(model: Model) -> Model:
    """Every sliding or chunked layer attending to the whole context: what the windows save."""
    return model.with_layers([replace(layer, kind=FULL, window=0) if layer.kind.windowed else layer
                              for layer in model.layers])


def _no_hybrid_variant(model: Model) -> Model:
    """Every linear-attention/SSM layer as the model's first attention layer, and no recurrent
    state anywhere: what the hybrid's fixed-state layers save."""
    attention = next(layer for layer in model.layers if layer.caches_tokens)
    shape = replace(attention, kind=FULL, window=0, state=None) if attention.kind.windowed else \
        replace(attention, state=None)
    return model.with_layers([shape if layer.kind.has_state else replace(layer, state=None)
                              for layer in model.layers])


# What each variant costs, with the source that measured or introduced it (quality numbers are
# the papers' own, on their models: none is quoted here, as none transfers to another model).
_COSTS = {
    "MHA": "needs retraining with more KV heads; the baseline GQA and MQA are measured against "
           "(Ainslie et al., GQA, EMNLP 2023, arXiv:2305.13245)",
    "GQA": "needs up-training: Ainslie et al. convert MHA checkpoints with 5% of the pre-training compute "
           "and report quality close to MHA (GQA, EMNLP 2023, arXiv:2305.13245)",
    "MQA": "needs up-training; one KV head can cost quality and training stability "
           "(Shazeer, arXiv:1911.02150; Ainslie et al., arXiv:2305.13245)",
    "MLA": "needs retraining: the latent projections are learned; DeepSeek-V2 trains them from the start "
           "(DeepSeek-AI, arXiv:2405.04434)",
    "cross-layer": "needs retraining: adjacent layers learn to share one KV (Brandon et al., Cross-Layer "
                   "Attention, arXiv:2405.12981)",
    "no sliding window": "what the windows save: the model was trained with them, so full attention on "
                         "those layers is a what-if, not a drop-in setting",
    "no hybrid": "what the fixed-state layers save: every linear-attention/SSM layer as full attention, "
                 "a what-if (the model was trained as a hybrid)",
}


def architecture_variants(model, *, tokens, batch: int = 1, engine: str = "ideal", kv_dtype="auto",
                          gqa_groups=(8,), mla_rank: int = 512, mla_rope_dim: int = 64, share_every: int = 2,
                          tp: int = 1, pp: int = 1, **options) -> list[VariantRow]:
    """The model's cache as it is, as MHA, GQA with each of ``gqa_groups`` KV heads, MQA, MLA
    (full layers to a ``mla_rank`` latent + ``mla_rope_dim`` rope key, DeepSeek-V2's 512 + 64
    by default) and with cross-layer KV sharing (each run of ``share_every`` layers of the
    same shape shares the first one's cache). Every variant but "as is" needs retraining.
    A model with sliding or chunked layers also gets "no sliding window" (those layers full:
    what the windows save), and a hybrid with linear-attention/SSM state "no hybrid" (those
    layers as its first attention layer, no state: what the fixed state saves). Each row's
    ``cost`` names its own source.

    Sliding and chunked layers keep their windows; MLA layers become per-head layers only
    when the config gives qk_nope_head_dim, qk_rope_head_dim and v_head_dim.
    """
    model = as_model(model)
    heads = model.num_attention_heads
    if not any(layer.caches_tokens for layer in model.layers):
        raise ValueError(f"{model.name} is attention-free (every layer a fixed-state mixer): it has no KV heads "
                         "to regroup, so no architecture variant applies")
    variants = [("as is", model, {}, "none (the model as trained)"),
                ("MHA", _head_variant(model, heads), {"kv_heads": heads}, _COSTS["MHA"])]
    for g in gqa_groups or ():
        if 1 < g < heads:
            variants.append((f"GQA-{g}", _head_variant(model, g), {"kv_heads": g}, _COSTS["GQA"]))
    variants.append(("MQA", _head_variant(model, 1), {"kv_heads": 1}, _COSTS["MQA"]))
    variants.append((f"MLA (latent {mla_rank} + rope {mla_rope_dim})", _mla_variant(model, mla_rank, mla_rope_dim),
                     {"kv_lora_rank": mla_rank, "qk_rope_head_dim": mla_rope_dim}, _COSTS["MLA"]))
    variants.append((f"cross-layer KV sharing every {share_every}", _cross_layer_variant(model, share_every),
                     {"share_every": share_every}, _COSTS["cross-layer"]))
    if any(layer.kind.windowed for layer in model.layers):
        variants.append(("no sliding window", _no_window_variant(model), {"window": None},
                         _COSTS["no sliding window"]))
    if any(layer.state is not None for layer in model.layers):
        variants.append(("no hybrid", _no_hybrid_variant(model), {"state": None}, _COSTS["no hybrid"]))
    base = None
    rows = []
    for name, variant, settings, cost in variants:
        try:
            est = engine_estimate(variant, engine=engine, tokens=tokens, batch=batch, kv_dtype=kv_dtype, tp=tp, pp=pp,
                           **options)
        except ValueError as exc:
            if base is None:
                raise
            rows.append(VariantRow(variant=name, strategy=name, family="architecture", total_bytes=None,
                                   saving_bytes=None, saving_fraction=None, needs_retraining=True, lossless=False,
                                   settings=settings, cost=f"not available in engine {engine!r}: {exc}",
                                   model=variant))
            continue
        base = est.total_bytes if base is None else base
        saving = base - est.total_bytes
        rows.append(VariantRow(variant=name, strategy=name, family="architecture", total_bytes=est.total_bytes,
                               saving_bytes=saving, saving_fraction=saving / base if base else 0.0,
                               needs_retraining=name != "as is", lossless=name == "as is", settings=settings,
                               cost=cost, model=variant))
    return rows

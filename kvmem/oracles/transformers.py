"""transformers' own modeling code as the judge: every decoder type, built and run for real.

``validate(types=None, cases=0, seed=0)`` takes every model_type of the installed transformers
that has a text decoder -- ``MODEL_FOR_CAUSAL_LM_MAPPING_NAMES`` and the image-text-to-text
types of ``MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES`` -- and for each:

1. its config class's DEFAULT config (``CONFIG_MAPPING[model_type]()``), shrunk only where the
   cache is not shaped (``shrink``): vocabulary, FFN and expert sizes, the layer count cut to one
   period of its layer pattern, attention width scaled down with the GQA ratio kept, windows
   and attention chunks set to 16 so that they bind at the 48-token prompt, vision towers one
   layer deep;
2. the real model class on CPU in fp32 with seeded random weights: a prefill of 48 tokens
   (batch 2, ``use_cache=True``), then 3 decode steps of one token each fed with the returned
   cache, as ``generate`` does (transformers/generation/utils.py); the model makes its own cache
   (``DynamicCache(config=...)``, transformers/cache_utils.py, unless the model class builds
   another one);
3. the bytes that cache really holds: the unique storages of every tensor reachable from
   ``past_key_values`` (a view pins its whole storage: DynamicSlidingWindowLayer keeps
   ``full[:, :, -window + 1:]``), after the prefill and at the end;
4. kvmem's prediction for the same config dict (``config.to_dict()``, what a user would pass as
   config.json): ``kvmem.estimate(engine="hf-dynamic", kv_dtype="fp32", prompt_tokens=48)``,
   its ``total_bytes`` (K + V + state), the quantity ``kvmem.measure`` compares too.

A config's ``to_dict()`` writes every field out, derived ones included; a real file leaves many out.
``judge(..., absent=fields)`` builds the model from the file without them (transformers' config class
fills them in, ``leave_out``) and gives kvmem that file; ``absent_fields()`` leaves each declared field
of every family out in turn and compares kvmem's reading with the class's, without building models.

Each type ends in one class: "match", "wrong" (kvmem's number differs, or kvmem crashed),
"refused" (kvmem raised ConfigError / ValueError) or "cannot-build" (transformers itself failed
to build or run the model, or took longer than the time limit). Each type runs in a forked
child (Linux), time-bound, so a crash or a hang is contained. ``cases=N`` adds N seeded
variations (``random.Random(f"{seed}/{i}/{type}")``) of the types that matched or were wrong:
heads and KV heads (GQA ratio), head dims, windows, layer counts and patterns.

torch and transformers are imported inside the functions; ``import kvmem`` never loads this.

Over 300 lines by design: one judge (shrink, build, run, measure, compare, vary) whose steps share
each type's record; it is a tool, never imported by ``import kvmem``.
"""

from __future__ import annotations

import copy
import math
import os
import random
import time
from dataclasses import dataclass, field, replace

__all__ = ["TypeResult", "TransformersReport", "decoder_types", "shrink", "vary", "judge", "validate",
           "OUTCOMES", "PROMPT", "STEPS", "BATCH", "WINDOW", "leave_out", "absent_fields", "overridden_fields",
           "AbsentResult", "ABSENT_OUTCOMES"]

OUTCOMES = ("match", "wrong", "refused", "cannot-build")
PROMPT, STEPS, BATCH = 48, 3, 2
# Models whose forward slices off the cached prefix itself, so that generate feeds them the whole
# sequence at every step: CPM-Ant (modeling_cpmant.py CpmAntForCausalLM.prepare_inputs_for_generation)
WHOLE_INPUT_TYPES = frozenset({"cpmant"})
WINDOW = 16          # sliding windows and attention chunks: smaller than the prompt, so they bind
VOCAB, FFN, EXPERTS, TOP_K = 128, 64, 4, 2
MAX_WIDTH = 1024     # hidden size the attention width is scaled down to, keeping the GQA ratio
TIME_LIMIT = 60.0

# The first found is the count; another one equal to it is cut with it (T5's num_decoder_layers,
# an encoder's as deep as its decoder). "layers": Kosmos-2's text decoder.
_LAYER_COUNTS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers", "decoder_layers",
                 "num_decoder_layers", "encoder_layers", "layers")
# Other names of hidden_size and num_attention_heads (GPT-2/GPT-J's n_embd / n_head, BART's and
# T5's d_model, Kosmos-2's embed_dim / attention_heads, GPT-Neo's num_heads, ...): the first
# found is the one; the other head counts present (an encoder's beside the decoder's, SWA layers'
# own, swa_num_attention_heads) are divided by the same factor.
_HIDDENS = ("hidden_size", "n_embd", "d_model", "embed_dim")
_HIDDEN_TWINS = _HIDDENS + ("embedding_dim",)
_HEADS = ("num_attention_heads", "n_head", "num_heads", "attention_heads", "decoder_attention_heads",
          "encoder_attention_heads")
# Ranks of the query / output low-rank projections (DeepSeek MLA's q_lora_rank, DeepSeek-V4's
# o_lora_rank): they shape no cache (kv_lora_rank, the cached latent, is kept).
_LORA_RANKS = ("q_lora_rank", "o_lora_rank")
LORA_RANK = 64
_WINDOWS = ("sliding_window", "attention_chunk_size", "sliding_window_size", "attention_window_size",
            "local_attention_window_len", "window_size", "local_window_size")
_EXPERT_COUNTS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts")
_TOP_KS = ("num_experts_per_tok", "num_experts_per_token", "moe_topk", "top_k", "n_shared_experts", "moe_k")
_GROUPS = ("n_group", "topk_group", "num_expert_group")
_KV_HEADS = ("num_key_value_heads", "num_kv_heads", "n_head_kv", "multi_query_group_num", "num_query_groups")
_FFN_WORDS = ("intermediate_size", "ffn_dim", "ffn_hidden_size", "d_ff", "n_inner", "dim_ff",
              "feed_forward_size", "moe_hidden_size", "expert_ffn_hidden_size", "share_expert_dim")
# Types whose "intermediate_size" is the SSM's inner width (it shapes the conv / recurrent state).
_SSM_INNER = ("mamba", "falcon_mamba", "mamba2")


@dataclass(frozen=True)
class TypeResult:
    """One model type (or one variation of it): its class, kvmem's bytes and the measured ones."""

    model_type: str
    outcome: str
    predicted: int | None = None
    measured: int | None = None
    message: str = ""
    seconds: float = 0.0
    case: str = ""
    prefill_predicted: int | None = None
    prefill_measured: int | None = None
    layers: tuple = ()          # (layer, kvmem bytes, measured bytes) where they differ
    cache: str = ""             # the cache class and its layer classes
    bookkeeping: int = 0        # bytes of 0-dim tensors the cache also holds (not K, V or state)

    def to_dict(self) -> dict:
        return {"model_type": self.model_type, "case": self.case or self.model_type, "outcome": self.outcome,
                "predicted": self.predicted, "measured": self.measured, "message": self.message,
                "seconds": self.seconds, "prefill_predicted": self.prefill_predicted,
                "prefill_measured": self.prefill_measured, "layers": [list(x) for x in self.layers],
                "cache": self.cache, "bookkeeping": self.bookkeeping}


@dataclass(frozen=True)
class TransformersReport:
    """Every type's class of one run against the installed transformers."""

    version: str
    seed: int
    random_cases: int
    results: tuple[TypeResult, ...]
    notes: tuple[str, ...] = field(default=())
    # each field a file may leave out, set to null or have overridden (absent_fields, overridden_fields):
    # kvmem's reading of the file against its reading of the config transformers' class makes of it
    fields: tuple["AbsentResult", ...] = field(default=())

    def counts(self) -> dict:
        return {outcome: sum(r.outcome == outcome for r in self.results) for outcome in OUTCOMES}

    def field_counts(self) -> dict:
        return {outcome: sum(r.outcome == outcome for r in self.fields) for outcome in ("same", "refused", "wrong")}

    @property
    def wrong(self) -> tuple[TypeResult, ...]:
        return tuple(r for r in self.results if r.outcome == "wrong")

    @property
    def passed(self) -> bool:
        return not self.wrong and not any(r.outcome == "wrong" for r in self.fields)

    def to_dict(self) -> dict:
        return {"engine": "transformers", "version": self.version, "seed": self.seed,
                "random_cases": self.random_cases, "counts": self.counts(), "passed": self.passed,
                "results": [r.to_dict() for r in self.results], "notes": list(self.notes),
                "field_counts": self.field_counts(),
                "fields": [{"model_type": r.model_type, "field": r.field, "outcome": r.outcome}
                           for r in self.fields if r.outcome != "same"]}

    def lines(self) -> list[str]:
        counts = self.counts()
        out = [f"kvmem against transformers {self.version} (its modeling code, on this machine): "
               f"{len(self.results)} cases ({self.random_cases} random, seed {self.seed}): "
               + ", ".join(f"{counts[o]} {o}" for o in OUTCOMES)]
        for r in self.results:
            if r.outcome == "match":
                continue
            label = r.outcome.upper()
            numbers = f": kvmem {r.predicted!r}, measured {r.measured!r}" if r.outcome == "wrong" else ""
            out.append(f"{label} {r.case or r.model_type}{numbers}" + (f" ({r.message})" if r.message else ""))
        if self.fields:
            counts = self.field_counts()
            out.append(f"fields left out (name), set to null (name=null) or overridden by the config class "
                       f"(name=value): {len(self.fields)} cases: " + ", ".join(f"{n} {o}" for o, n in counts.items()))
            out.extend(f"{r.outcome.upper()} {r.model_type} {r.field}: kvmem {r.absent!r}, "
                       f"the class's config {r.filled!r}" for r in self.fields if r.outcome != "same")
        out.extend(f"note: {note}" for note in self.notes)
        return out


# ----------------------------------------------------------------------------- the types

def version() -> str:
    import transformers
    return transformers.__version__


def decoder_types() -> list[str]:
    """Every causal-LM model_type and every image-text-to-text one (transformers/models/auto/
    modeling_auto.py), sorted."""
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES,
    )
    return sorted(set(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES) | set(MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES))


# Families whose class defaults build a model transformers itself cannot run: every layer Mamba2
# (GraniteMoeHybrid's layer_types, Bamba's attn_layer_indices default to no attention layer, and
# get_seq_length then fails). One attention layer is set, as every published checkpoint has.
# MinistralConfig and HunYuan's default head_dim is None and their attention reads
# ``config.head_dim`` as is (``self.head_dim ** -0.5`` fails): hidden_size / heads (4096 / 32) is
# set, the usual meaning of an absent head_dim. NemotronConfig's default num_key_value_heads is
# None and its attention divides by it: the heads (48), the usual meaning of an absent one (MHA).
# Glm4MoeConfig's defaults (hidden 4096, 96 heads, no head_dim) leave hidden / heads fractional,
# which kvmem refuses; GLM-4.5 and GLM-4.5-Air's config.json set head_dim 128.
# MiniMax-M3's class default has no sparse layer (layer_types all full); the published configs make
# most layers sparse (sparse_attention_config): every other layer is, so the shrunk model has both.
_M3_LAYERS = {"layer_types": ["full_attention", "minimax_m3_sparse"] * 30}
# DeepSeek-V4's class default has no sliding_attention layer (2 HCA, then HCA and CSA alternating) and
# compresses HCA layers every 128 tokens, which no window closes in at 48: every layer type is set, as the
# published compress_ratios mix them (0, 4, 128), and HCA compresses every 20 tokens, so that at 48 and 51
# tokens two windows have closed and 8 and 11 tokens wait in the buffer (CSA keeps its 4).
_V4_LAYERS = {"layer_types": ["sliding_attention", "compressed_sparse_attention",
                              "heavily_compressed_attention"] * 14 + ["sliding_attention"],
              "compress_rates": {"compressed_sparse_attention": 4, "heavily_compressed_attention": 20}}
DEFAULT_OVERRIDES: dict[str, dict] = {"glm4_moe": {"head_dim": 128}, "deepseek_v4": _V4_LAYERS,
                     "minimax_m3_vl_text": _M3_LAYERS, "minimax_m3_vl": {"text_config": _M3_LAYERS},
                     "granitemoehybrid": {"layer_types": ["attention"] + ["mamba"] * 31},
                     "bamba": {"attn_layer_indices": [1]},
                     "ministral": {"head_dim": 128},
                     "hunyuan_v1_dense": {"head_dim": 128},
                     "hunyuan_v1_moe": {"head_dim": 128},
                     "nemotron": {"num_key_value_heads": 48}}


def default_config(model_type: str):
    """The config class's defaults: ``CONFIG_MAPPING[model_type]()`` (configuration_auto.py), with
    DEFAULT_OVERRIDES where those defaults do not run."""
    from transformers import CONFIG_MAPPING
    return CONFIG_MAPPING[model_type](**DEFAULT_OVERRIDES.get(model_type, {}))


# ----------------------------------------------------------------------------- shrinking

def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _layer_count(d: dict) -> tuple[str, int] | None:
    for key in _LAYER_COUNTS:
        if _is_int(d.get(key)):
            return key, d[key]
    return None


def _per_layer_lists(d: dict, layers: int) -> list[str]:
    """Keys of lists with one entry per layer (layer_types, mlp_layer_types, layers_block_type, ...)."""
    return [k for k, v in d.items() if isinstance(v, list) and len(v) == layers and layers > 1]


def _index_lists(d: dict, layers: int) -> list[str]:
    """Keys of lists of layer indices (hybrid_layer_ids, full_attn_idxs, moe_layers, ...)."""
    return [k for k, v in d.items() if isinstance(v, list) and v and ("layer" in k or "idx" in k)
            and all(_is_int(x) and 0 <= x < layers for x in v) and len(v) != layers]


def _layer_keyed(d: dict) -> list[str]:
    """Keys of dicts keyed by layer index: the per-layer overrides of transformers/integrations/
    heterogeneity (``per_layer_config``, e.g. {"02": {"num_attention_heads": 64, ...}})."""
    return [k for k, v in d.items() if isinstance(v, dict) and v and "layer" in k
            and all(str(i).isdigit() for i in v)]


def kept_layers(d: dict) -> int:
    """Layers kept: the first n that hold every kind of each per-layer list (one period of the
    pattern), every ``*_offset`` layer (Jamba's attn_layer_offset), every layer up to an
    ``*_index_end`` (a looped block), the first listed index and the first per-layer override; at
    least 2."""
    found = _layer_count(d)
    if not found:
        return 0
    layers = found[1]
    need = 2
    for key in _per_layer_lists(d, layers):
        if d[key] == list(range(layers)):   # layer i -> i (kv_source_layers, rope_scaling_layers): no kinds
            continue
        values = [repr(v) for v in d[key]]
        kinds, seen = set(values), set()
        for i, v in enumerate(values):
            seen.add(v)
            if seen == kinds:
                need = max(need, i + 1)
                break
    for key, value in d.items():
        if key.endswith("_offset") and _is_int(value) and 0 < value < layers:
            need = max(need, value + 1)
        if key.endswith("_index_end") and _is_int(value) and 0 < value <= layers:
            need = max(need, value)     # a looped block (Inkling-2-Loop's loop_layer_index_end) kept whole
    for key in _index_lists(d, layers):
        need = max(need, min(d[key]) + 1)
    for key in _layer_keyed(d):
        need = max(need, min(int(i) for i in d[key]) + 1)
    return min(layers, need)


def cut_layers(d: dict, keep: int | None = None) -> None:
    """The first ``keep`` (default ``kept_layers``) layers: the count, each per-layer list, each
    index list and each per-layer override cut consistently."""
    found = _layer_count(d)
    if not found:
        return
    key, layers = found
    keep = kept_layers(d) if keep is None else min(keep, layers)
    for name in _per_layer_lists(d, layers):
        d[name] = d[name][:keep]
    for name in _index_lists(d, layers):
        d[name] = [x for x in d[name] if x < keep]
    for name in _layer_keyed(d):
        d[name] = {i: v for i, v in d[name].items() if int(i) < keep}
    for name in _LAYER_COUNTS:
        if d.get(name) == layers:
            d[name] = keep


def shrink_sizes(d: dict, model_type: str) -> None:
    """FFN widths and expert counts (top-k kept <= experts; a missing top-k of an MoE default set
    to TOP_K): no cache is shaped by them."""
    for key, value in list(d.items()):
        ffn = any(w in key for w in _FFN_WORDS) and model_type not in _SSM_INNER
        if ffn and _is_int(value) and value > FFN:
            d[key] = FFN
        elif ffn and isinstance(value, list) and value and all(_is_int(x) for x in value):
            d[key] = [min(x, FFN) for x in value]
    experts = [key for key in _EXPERT_COUNTS if _is_int(d.get(key))]
    for key in experts:
        d[key] = min(d[key], EXPERTS)
    for key in _TOP_KS:
        if _is_int(d.get(key)) and d[key] > TOP_K:
            d[key] = TOP_K
    if experts and "num_experts_per_tok" in d and d["num_experts_per_tok"] is None:
        d["num_experts_per_tok"] = TOP_K
    for key in _GROUPS:
        if _is_int(d.get(key)) and d[key] > 1:
            d[key] = 1
    for key in _LORA_RANKS:
        if _is_int(d.get(key)) and d[key] > LORA_RANK:
            d[key] = LORA_RANK


def shrink_vocab(d: dict) -> None:
    for key, value in list(d.items()):
        if "vocab" in key and _is_int(value) and value > VOCAB:   # vocab_size, BLT's *_group_vocab
            d[key] = VOCAB
    if _is_int(d.get("pad_token_id")) and d["pad_token_id"] >= VOCAB:
        d["pad_token_id"] = 0


def shrink_windows(d: dict) -> None:
    """Sliding windows and attention chunks to WINDOW, so that they bind at the PROMPT tokens."""
    for key in _WINDOWS:
        value = d.get(key)
        if _is_int(value) and value > WINDOW:  # type: ignore[operator]  # _is_int: an int
            d[key] = WINDOW
        elif isinstance(value, list) and value and all(_is_int(x) or x is None for x in value):
            d[key] = [WINDOW if _is_int(x) and x > WINDOW else x for x in value]


def _kv_heads(d: dict, heads: int) -> int | None:
    if d.get("multi_query") is True:
        return 1
    for key in _KV_HEADS:
        if key in d:
            return d[key] if _is_int(d[key]) else None
    return heads


def _first(d: dict, keys) -> str | None:
    return next((k for k in keys if _is_int(d.get(k))), None)


def _head_keys(d: dict) -> list[str]:
    """Every head count of one (text) dict: the query heads under any of their names, the KV heads,
    and per-kind ones (``swa_num_attention_heads``, ``swa_num_key_value_heads``)."""
    return [k for k, v in d.items() if _is_int(v) and (k in _HEADS or k in _KV_HEADS or
            k.endswith(("_num_attention_heads", "_num_key_value_heads")))]


def width_factor(d: dict) -> int:
    """The factor heads, KV heads and hidden_size are divided by: the smallest divisor of the gcd
    of every head count (query, KV, per-kind, per-layer overrides) that brings hidden_size to
    MAX_WIDTH or less. head_dim is unchanged: explicit, or hidden / heads before and after; every
    GQA ratio is unchanged (a single KV head, MQA, is never divided: no shrinking then)."""
    hidden_key, heads_key = _first(d, _HIDDENS), _first(d, _HEADS)
    if hidden_key is None or heads_key is None:
        return 1
    hidden, heads = d[hidden_key], d[heads_key]
    if hidden <= MAX_WIDTH or heads <= 0:
        return 1
    kv = _kv_heads(d, heads)
    if not _is_int(kv) or kv <= 0:  # type: ignore[operator]  # _is_int: an int
        return 1
    counts = [heads, kv] + [d[k] for k in _head_keys(d)]
    for key in _layer_keyed(d):
        counts += [v for layer in d[key].values() if isinstance(layer, dict)
                   for v in (layer.get(k) for k in layer if k in _HEADS or k in _KV_HEADS) if _is_int(v)]
    if any(c <= 0 for c in counts):
        return 1
    g, best = math.gcd(*counts), 1
    for f in range(2, g + 1):
        if g % f or hidden % f:
            continue
        best = f
        if hidden // f <= MAX_WIDTH:
            break
    return best


def shrink_width(d: dict) -> tuple[int, int] | None:
    """Hidden size and every head count divided by ``width_factor``; returns (old, new) hidden or None."""
    f = width_factor(d)
    if f == 1:
        return None
    hidden_key = _first(d, _HIDDENS)
    old = d[hidden_key]
    for key in _HIDDEN_TWINS:            # xLSTM's embedding_dim, equal to hidden_size
        if d.get(key) == old:
            d[key] = old // f
    for key in _head_keys(d):
        d[key] //= f
    for key in _layer_keyed(d):
        for layer in d[key].values():
            if isinstance(layer, dict):
                for k in layer:
                    if (k in _HEADS or k in _KV_HEADS) and _is_int(layer[k]):
                        layer[k] //= f
    return old, old // f


def shrink_tower(d: dict, steps=()) -> None:
    """A vision or audio tower: one layer (its per-layer lists cut too, a Conformer's num_blocks),
    small FFN; with "tower_width" in ``steps`` its width too (heads kept whole, as for the text).
    A text model nested in it (an encoder's or a VLM's ``text_config``) is shrunk as a text, the
    same as the decoder's (T5Gemma2 needs them balanced); other nested configs as towers. Its
    cache, if any, is not the one judged."""
    for key in ("depth", "encoder_layers", "num_blocks"):
        if _is_int(d.get(key)) and d[key] > 1:
            d[key] = 1
    cut_layers(d, 1)
    for key, value in list(d.items()):
        if any(w in key for w in _FFN_WORDS) and _is_int(value) and value > FFN:
            d[key] = FFN
    if "tower_width" in steps:
        shrink_width(d)
    for key, value in d.items():
        if isinstance(value, dict) and "model_type" in value:
            if key in _SUB:
                shrink_text(value, value.get("model_type") or "", steps, decoder=False)
            else:
                shrink_tower(value, steps)


def _feature_layers(d: dict) -> None:
    """Which tower layers a projector reads (``vision_feature_layer`` [24, 18], ``feature_layer``):
    a layer index past the one layer kept becomes 0, a negative one (from the end) stays."""
    for key, value in list(d.items()):
        if "feature_layer" not in key:
            continue
        if _is_int(value) and value > 0:
            d[key] = 0
        elif isinstance(value, list) and all(_is_int(x) for x in value):
            d[key] = [0 if x > 0 else x for x in value]


def _follow_width(d: dict, old: int, new: int, *, top: dict | None = None) -> None:
    """Fields of the towers and the top level that must equal the text's hidden size (a projector's
    ``out_hidden_size``, ``text_hidden_size``, ``adapter_out_dim``) follow its shrinking; a tower's
    own width (hidden_size, d_model, embed_dim) does not. ``top``: the dict written to (``d`` is a
    view of it without the text)."""
    target = d if top is None else top
    for key, value in d.items():
        if isinstance(value, dict) and "model_type" in value:
            _follow_width(value, old, new)
        elif (value == old and _is_int(value) and key not in _HIDDEN_TWINS
              and ("hidden" in key or "dim" in key)):
            target[key] = new


# Each rung of the ladder: the shrinking steps applied. A config class that rejects one rung
# (a tower whose width must equal the text's, an audio-token range beyond the vocabulary, a layer
# count that must equal a sum of others), or a model that fails to build or run with it, gets
# the next, less shrunk, one.
LADDER = (("vocab", "sizes", "windows", "width", "layers", "towers", "tower_width"),
          ("vocab", "sizes", "windows", "width", "layers", "towers"),
          ("vocab", "sizes", "windows", "layers", "towers"),
          ("vocab", "sizes", "windows", "layers"),
          ("vocab", "sizes", "windows"),
          ("sizes", "windows", "layers"))
MAX_PARAMETERS = 300_000_000   # a rung whose model is larger (counted on the meta device) is not built


def shrink_text(d: dict, model_type: str, steps=LADDER[0], *, decoder: bool = True):
    """A text (decoder) config dict, shrunk where no cache is shaped (in place); returns the
    (old, new) hidden size when its width was shrunk, else None."""
    if "vocab" in steps:
        shrink_vocab(d)
    if "sizes" in steps:
        shrink_sizes(d, model_type)
    if "windows" in steps:
        shrink_windows(d)
    widths = shrink_width(d) if "width" in steps else None
    if "layers" in steps:
        cut_layers(d)
    if decoder:
        d["use_cache"] = True
        d["is_decoder"] = True   # BERT-like encoders in the causal-LM mapping cache only as decoders
    return widths


_SUB = ("text_config", "decoder_config", "language_config", "llm_config", "text_model_config")


def _shrunk_dict(config, steps) -> dict:
    """The config's dict shrunk: its text decoder's dict by ``shrink_text`` -- a sub-config's, or
    the whole dict's when the text config is the config itself or a flat encoder-decoder's view of
    it (BART, Blenderbot, T5-like: ``get_text_config(decoder=True)`` is then a modified copy, not
    a sub-config) -- and every other sub-config by ``shrink_tower``."""
    d = config.to_dict()
    text = config.get_text_config(decoder=True)
    subs = [key for key, value in d.items() if isinstance(value, dict) and "model_type" in value]
    texts = [key for key in subs if text is not config and
             (d[key].get("model_type") == text.model_type or key in _SUB)]
    widths = None
    if texts:
        for key in texts:
            widths = shrink_text(d[key], text.model_type, steps) or widths
    else:
        widths = shrink_text(d, config.model_type, steps)
    if "towers" in steps:
        for key in subs:
            if key not in texts:
                shrink_tower(d[key], steps)
                _feature_layers(d[key])
        _feature_layers(d)
    if widths and texts:
        _follow_width({k: v for k, v in d.items() if k not in texts}, *widths, top=d)
    d["dtype"] = "float32"
    return d


def shrink(config, steps=None):
    """The config (a transformers config object) shrunk: a new object of the same class.

    The text decoder's dict (``get_text_config(decoder=True)``, transformers/configuration_utils.py)
    is shrunk by ``shrink_text``, every other sub-config by ``shrink_tower``; the object is rebuilt
    with ``from_dict``, so that the class's own ``__init__`` derives and checks the rest. The first
    rung of LADDER the class accepts is taken; the last error is raised when it accepts none.
    """
    if steps is not None:
        return type(config).from_dict(_shrunk_dict(config, steps))
    error = None
    for rung in LADDER:
        try:
            return type(config).from_dict(_shrunk_dict(config, rung))
        except Exception as problem:  # noqa: BLE001 -- the class rejected this rung; try the next
            error = problem
    raise error


# ----------------------------------------------------------------------------- building and running

def _class_name(mapping, model_type):
    name = mapping[model_type]
    return name[0] if isinstance(name, (tuple, list)) else name


def _text_config(config):
    """``get_text_config(decoder=True)`` where it is a sub-config; the config itself for a flat
    encoder-decoder (BART, Blenderbot, ...), whose "text config" is a copy with the decoder_* fields
    renamed -- and, as the dataclass cannot delete them, decoder_layers / decoder_ffn_dim back at
    the class defaults (configuration_utils.py), so that a decoder built from it is not the
    shrunk one; its *ForCausalLM reads the decoder_* fields of the config itself."""
    text = config.get_text_config(decoder=True)
    if text is config or any(getattr(config, name, None) is text for name in ("decoder", "generator", "text_config")):
        return text
    return config


def model_class(config):
    """(class, config it is built from): the text decoder's causal-LM class for a composite config
    whose text config has one, else the type's own causal-LM (or image-text-to-text) class."""
    import transformers
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES,
    )
    text = _text_config(config)
    if text is not config and text.model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        return getattr(transformers, _class_name(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, text.model_type)), text
    mapping = (MODEL_FOR_CAUSAL_LM_MAPPING_NAMES if config.model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
               else MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES)
    return getattr(transformers, _class_name(mapping, config.model_type)), config


def _token_ids(config) -> set[int]:
    """Special token ids named in the config (inputs avoid them: an image token would ask for pixels)."""
    ids = set()
    for sub in (config, config.get_text_config(decoder=True)):
        for key, value in sub.to_dict().items():
            if ("token_id" in key or "token_index" in key) and _is_int(value):
                ids.add(value)
    return ids


def _inputs(generator, count: int, avoid: set[int], batch: int):
    import torch
    allowed = torch.tensor([i for i in range(3, min(VOCAB, 100)) if i not in avoid])
    return allowed[torch.randint(len(allowed), (batch, count), generator=generator)]


def run_model(model, config, *, batch: int = BATCH, prompt: int = PROMPT, steps: int = STEPS):
    """A prefill of ``prompt`` tokens, then ``steps`` decode steps fed with the returned cache, as
    generate does (transformers/generation/utils.py): (cache after the prefill's bytes, cache)."""
    import torch
    generator = torch.Generator().manual_seed(0)
    avoid = _token_ids(config)
    ids = _inputs(generator, prompt, avoid, batch)
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=True)
        cache = out.past_key_values
        prefill = held_bytes(cache)[0]
        seen = prompt
        whole = getattr(config, "model_type", None) in WHOLE_INPUT_TYPES
        for _ in range(steps):
            step = _inputs(generator, 1, avoid, batch)
            seen += 1
            ids = torch.cat((ids, step), dim=1)
            out = model(input_ids=ids if whole else step, attention_mask=torch.ones(batch, seen, dtype=torch.long),
                        past_key_values=cache, use_cache=True)
            cache = out.past_key_values
    return prefill, cache


def _tensors(obj, seen_objects: set):
    """Every tensor reachable from ``obj`` through attributes, lists, tuples and dicts."""
    import torch
    if id(obj) in seen_objects or obj is None or isinstance(obj, (str, bytes, int, float, bool, type)):
        return
    seen_objects.add(id(obj))
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (list, tuple, set)):
        for item in obj:
            yield from _tensors(item, seen_objects)
    elif isinstance(obj, dict):
        for item in obj.values():
            yield from _tensors(item, seen_objects)
    elif isinstance(obj, torch.nn.Module) or type(obj).__name__.endswith("Config"):
        return
    elif hasattr(obj, "__dict__"):
        yield from _tensors(vars(obj), seen_objects)


def _storage_bytes(tensors, storages: set, scalars: list | None = None) -> int:
    """Bytes of the storages not counted yet; 0-dim tensors go to ``scalars`` instead (bookkeeping
    such as DynamicSlidingWindowLayer._sliding_window_tensor, an int64 window, 8 B per layer:
    not K, V or state, and not what kvmem.measure counts either)."""
    total = 0
    for t in tensors:
        if t.dim() == 0:
            if scalars is not None and t.untyped_storage().data_ptr() not in storages:
                storages.add(t.untyped_storage().data_ptr())
                scalars.append(t.untyped_storage().nbytes())
            continue
        storage = t.untyped_storage()
        key = storage.data_ptr()
        if storage.nbytes() == 0 or key in storages:
            continue
        storages.add(key)
        total += storage.nbytes()
    return total


def cache_layers(cache) -> list:
    """The cache's layer objects (DynamicCache.layers; an EncoderDecoderCache's self-attention ones)."""
    inner = getattr(cache, "self_attention_cache", cache)
    layers = getattr(inner, "layers", None)
    return list(layers) if isinstance(layers, (list, tuple)) else []


def held_bytes(cache) -> tuple[int, tuple[int, ...], int]:
    """(unique storage bytes reachable from the cache, bytes per layer object, bytes of 0-dim
    bookkeeping tensors left out): a view pins its whole storage, a storage shared by two layers
    counts once (at the first)."""
    storages: set = set()
    objects: set = set()
    scalars: list = []
    per_layer = tuple(_storage_bytes(_tensors(layer, objects), storages, scalars) for layer in cache_layers(cache))
    rest = _storage_bytes(_tensors(cache, objects), storages, scalars)
    return sum(per_layer) + rest, per_layer, sum(scalars)


def describe_cache(cache) -> str:
    layers = cache_layers(cache)
    kinds: list[list] = []
    for layer in layers:
        name = type(layer).__name__
        if not kinds or kinds[-1][0] != name:
            kinds.append([name, 0])
        kinds[-1][1] += 1
    return type(cache).__name__ + (" [" + ", ".join(f"{n} x{c}" for n, c in kinds) + "]" if kinds else "")


def build(config, dtype: str = "float32"):
    """The real model in ``dtype`` (fp32 unless asked), seeded random weights, eval mode; first
    counted on the meta device, and refused (a MemoryError) above MAX_PARAMETERS."""
    import torch
    cls, own = model_class(config)
    with torch.device("meta"):
        count = sum(p.numel() for p in cls._from_config(own, dtype=torch.float32).parameters())
    if count > MAX_PARAMETERS:
        raise MemoryError(f"{count:,} parameters even shrunk (more than {MAX_PARAMETERS:,})")
    torch.manual_seed(0)
    return cls._from_config(own, dtype=getattr(torch, dtype)).eval(), own


def measured(model_type: str, config=None, *, batch: int = BATCH, dtype: str = "float32"):
    """(config, bytes after the prefill, bytes at the end, per layer, bookkeeping, cache description).

    ``config`` None: the type's default config down the LADDER, the first rung that transformers
    builds and runs. When none does, the first error of building or running is raised (else the
    first rejection by the config class)."""
    rungs = [None] if config is not None else LADDER
    rejected = failed = None
    for rung in rungs:
        try:
            chosen = config if rung is None else shrink(default_config(model_type), rung)
        except Exception as error:  # noqa: BLE001 -- the config class rejects this rung
            rejected = rejected or error
            continue
        try:
            model, own = build(chosen, dtype)
            prefill, cache = run_model(model, own, batch=batch)
            total, per_layer, bookkeeping = held_bytes(cache)
            return chosen, prefill, total, per_layer, bookkeeping, describe_cache(cache)
        except Exception as error:  # noqa: BLE001 -- this rung failed to build or run; the next is less shrunk
            failed = failed or error
    raise failed or rejected  # type: ignore[misc]  # every rung raised: one of them is set


# ----------------------------------------------------------------------------- kvmem's side

_KV_DTYPES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}


def predict(config_dict: dict, *, batch: int = BATCH, prompt: int = PROMPT, steps: int = STEPS,
            dtype: str = "float32"):
    """(bytes after the prefill, bytes at the end, per layer at the end) from kvmem's hf-dynamic mode,
    for the model run in ``dtype`` (the config's torch_dtype, and its K/V elements)."""
    import kvmem
    model = kvmem.Model.from_hf_config({**config_dict, "torch_dtype": dtype, "dtype": dtype})
    kv = _KV_DTYPES[dtype]
    first = kvmem.estimate(model, engine="hf-dynamic", tokens=prompt, batch=batch, kv_dtype=kv,
                           prompt_tokens=prompt)
    last = kvmem.estimate(model, engine="hf-dynamic", tokens=prompt + steps, batch=batch, kv_dtype=kv,
                          prompt_tokens=prompt)
    return first.total_bytes, last.total_bytes, tuple(last.per_layer)


def first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0][:300] if text else ''}"


def _layer_differences(predicted: tuple, measured: tuple) -> tuple:
    if len(predicted) != len(measured):
        return (("layers", len(predicted), len(measured)),)
    return tuple((i, p, m) for i, (p, m) in enumerate(zip(predicted, measured, strict=True)) if p != m)


def judge(model_type: str, config=None, *, case: str = "", batch: int = BATCH,
          dtype: str = "float32", absent: tuple[str, ...] = ()) -> TypeResult:
    """One type (or one variation ``config`` of it) through transformers and kvmem: its class.
    ``dtype`` bfloat16 checks the states a model keeps in its own dtype or in fp32. ``absent``: the
    config file leaves these text fields out (``leave_out``): transformers' config class fills them in,
    kvmem reads the file without them (its defaults, hf_defaults.json, and its family rules)."""
    from ..errors import ConfigError
    started = time.perf_counter()
    file = None
    if absent:
        if config is None:
            config = shrink(default_config(model_type))
        try:
            config, file = leave_out(config, absent)
        except Exception as error:  # noqa: BLE001 -- the config class itself rejects the file
            return TypeResult(model_type, "cannot-build", case=case, message=first_line(error))

    def done(outcome, **kw):
        return TypeResult(model_type, outcome, case=case, seconds=round(time.perf_counter() - started, 2), **kw)

    try:
        config, prefill, total, measured_layers, bookkeeping, described = measured(model_type, config, batch=batch,
                                                                                   dtype=dtype)
    except Exception as error:  # transformers itself could not build or run it
        return done("cannot-build", message=first_line(error))
    try:
        first, last, layers = predict(file or config.to_dict(), batch=batch, dtype=dtype)
    except (ConfigError, ValueError) as error:
        return done("refused", measured=total, prefill_measured=prefill, message=first_line(error),
                    cache=described)
    except Exception as error:  # a crash in kvmem is a wrong answer
        return done("wrong", measured=total, prefill_measured=prefill, cache=described,
                    message=f"kvmem crashed: {first_line(error)}")
    outcome = "match" if (first, last) == (prefill, total) else "wrong"
    message = "" if outcome == "match" or first == prefill else f"after the prefill: kvmem {first}, measured {prefill}"
    return done(outcome, predicted=last, measured=total, prefill_predicted=first, prefill_measured=prefill,
                layers=_layer_differences(layers, measured_layers), message=message, cache=described,
                bookkeeping=bookkeeping)


# ----------------------------------------------------------------------------- variations

def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def vary(config, rng: random.Random):
    """A seeded variation of a (shrunk) config: heads / KV heads (GQA ratio), head_dim, windows,
    layer count and pattern, where the text config has such fields; a new config object."""
    d = config.to_dict()
    _vary_text(text_part(d, config), rng)
    return type(config).from_dict(d)


def text_part(d: dict, config) -> dict:
    """The text decoder's part of ``config.to_dict()`` (``d``): its sub-config's dict, else ``d`` itself."""
    text = config.get_text_config(decoder=True)
    if text is config:
        return d
    return next((v for k, v in d.items() if isinstance(v, dict) and
                 (v.get("model_type") == text.model_type or k in _SUB)), d)


def _vary_text(d: dict, rng: random.Random) -> None:
    heads = d.get("num_attention_heads")
    if _is_int(heads) and _is_int(d.get("num_key_value_heads")):
        kv = rng.choice([1, 2, 4])
        new_heads = kv * rng.choice([1, 2, 4])
        if _is_int(d.get("head_dim")) and d.get("hidden_size") and not d.get("kv_lora_rank"):
            d["head_dim"] = rng.choice([16, 32, 64])
            d["hidden_size"] = new_heads * d["head_dim"]
        elif _is_int(d.get("hidden_size")):
            d["hidden_size"] = new_heads * max(8, d["hidden_size"] // heads)
        d["num_attention_heads"], d["num_key_value_heads"] = new_heads, kv
    for key in _WINDOWS:
        if _is_int(d.get(key)):
            d[key] = rng.choice([4, 8, 16, 33, 64])
    found = _layer_count(d)
    if found:
        key, layers = found
        lists = _per_layer_lists(d, layers)
        extra = rng.randint(0, 3)
        for name in lists:
            d[name] = [d[name][i % layers] for i in range(layers + extra)]
        if lists or not _index_lists(d, layers):
            d[key] = layers + extra


# ----------------------------------------------------------------------------- fields a file leaves out

def leave_out(config, fields, *, as_null: bool = False) -> tuple:
    """(the config transformers builds from a file whose text part leaves ``fields`` out, that file as a
    dict): the config class fills them in -- with its declared default, or with a value its
    __post_init__ derives (HYV4Config: indexer_types by its own rule, num_key_value_heads =
    num_attention_heads), which a config's ``to_dict()`` always writes out, so that a reader judged
    on full dicts alone never meets the field absent. ``as_null``: the file sets them to null instead."""
    d = config.to_dict()
    text = text_part(d, config)
    for name in fields:
        if as_null:
            text[name] = None
        else:
            text.pop(name, None)
    file = copy.deepcopy(d)
    return type(config).from_dict(d), file


def config_classes() -> dict:
    """model_type -> config class: every type of CONFIG_MAPPING and every text config nested in one
    (``get_text_config(decoder=True)``), as tools/hf_defaults.py finds kvmem/data/hf_defaults.json's."""
    from transformers import CONFIG_MAPPING
    classes: dict[str, type] = {}
    for model_type, cls in CONFIG_MAPPING.items():
        classes.setdefault(model_type, cls)
        try:
            text = cls().get_text_config(decoder=True)
        except Exception:  # noqa: BLE001 -- a class its own defaults cannot build: its text part unknown
            continue
        classes.setdefault(text.model_type, type(text))
    return classes


ABSENT_OUTCOMES = ("same", "wrong", "refused")


@dataclass(frozen=True)
class AbsentResult:
    """One field left out of one family's (shrunk default) config: kvmem's (prefill, end, per layer)
    bytes for the file without it (``absent``, or kvmem's refusal) against kvmem's for the config
    transformers fills it in to (``filled``)."""

    model_type: str
    field: str
    outcome: str
    absent: object = None
    filled: object = None


def _predicted(d: dict):
    from ..errors import ConfigError
    try:
        return predict(d)
    except (ConfigError, ValueError) as error:
        return first_line(error)


def _shrunk_defaults(types):
    """(model_type, its shrunk default config) for every family with a kvmem/data/hf_defaults.json entry
    (or ``types``) that kvmem reads whole."""
    from transformers import CONFIG_MAPPING

    from ..configs.fields import hf_defaults
    classes = config_classes()
    for model_type in sorted(hf_defaults()) if types is None else types:
        cls = classes.get(model_type)
        if cls is None:
            continue
        try:
            config = shrink(default_config(model_type) if model_type in CONFIG_MAPPING else cls())
        except Exception:  # noqa: BLE001 -- no shrunk default config to vary
            continue
        if not isinstance(_predicted(config.to_dict()), str):
            yield model_type, config


def _outcome(file, whole) -> str:
    return ("same" if file == whole or (isinstance(file, str) and isinstance(whole, str))
            else "refused" if isinstance(file, str) else "wrong")


def absent_fields(types=None, *, as_null: bool = False) -> list[AbsentResult]:
    """Every family with a kvmem/data/hf_defaults.json entry (or ``types``): its default config shrunk,
    and each field of its text part that the config class declares (or hf_defaults lists) left out in
    turn (``leave_out``). kvmem's bytes for the file without the field against kvmem's for the config
    transformers fills it in to -- a config kvmem reads right when given whole, as ``judge`` checks on
    transformers' own caches: "wrong" where they differ, "refused" where kvmem refuses the file but
    reads the filled-in config, else "same". No model is built (about 20 s for every family on one
    core); ``judge(type, config, absent=(field,))`` then measures the real cache of a finding. A
    field whose absence the config class rejects, and a type kvmem refuses even given whole, are
    skipped. ``as_null``: each field set to null instead (a class derives from None as from absence)."""
    import dataclasses

    from ..configs.fields import hf_defaults
    defaults, results = hf_defaults(), []
    for model_type, config in _shrunk_defaults(types):
        text = text_part(config.to_dict(), config)
        declared = {f.name for f in dataclasses.fields(type(config.get_text_config(decoder=True)))}
        for name in sorted(k for k in text if (k in declared or k in defaults.get(model_type, {}))
                           and not (as_null and text[k] is None)):
            try:
                filled, file = leave_out(config, (name,), as_null=as_null)
            except Exception:  # noqa: BLE001 -- the config class rejects the file without it
                continue
            absent, whole = _predicted(file), _predicted(filled.to_dict())
            results.append(AbsentResult(model_type, name, _outcome(absent, whole), absent, whole))
    return results


def overridden_fields(types=None) -> list[AbsentResult]:
    """The other side of ``absent_fields``: each integer field kvmem reads from a family's shrunk default
    config set to twice and to half its value in turn; where the config class keeps another value (its
    __post_init__ overrides the file: HYV4Config's num_key_value_heads, DeepseekOcr2TextConfig's
    head_dim), kvmem's bytes for the file against kvmem's for the class's config, as in absent_fields
    (``field`` reads "name=value"). About 5 s for every family."""
    import kvmem
    results = []
    for model_type, config in _shrunk_defaults(types):
        whole_dict = config.to_dict()
        text = text_part(whole_dict, config)
        for name in kvmem.Model.from_hf_config(whole_dict).reading.from_config:
            value = text.get(name)
            if not isinstance(value, int) or isinstance(value, bool):
                continue
            for new in sorted({value * 2, max(1, value // 2)} - {value}):
                file = copy.deepcopy(whole_dict)
                text_part(file, config)[name] = new
                try:
                    built = type(config).from_dict(copy.deepcopy(file)).to_dict()
                except Exception:  # noqa: BLE001 -- the config class rejects the value
                    continue
                if text_part(built, config).get(name) == new:
                    continue
                read, whole = _predicted(file), _predicted(built)
                results.append(AbsentResult(model_type, f"{name}={new}", _outcome(read, whole), read, whole))
    return results


# ----------------------------------------------------------------------------- running them all

def die_with_parent() -> None:
    """Linux: the child is killed when the run that forked it ends (prctl PR_SET_PDEATHSIG)."""
    try:
        import ctypes
        import signal
        ctypes.CDLL(None).prctl(1, int(signal.SIGKILL))
    except (OSError, AttributeError):
        pass


def _child(conn, model_type, config, case) -> None:
    """In a forked child: one thread, quiet transformers, the verdict sent back through the pipe."""
    import warnings
    die_with_parent()
    try:
        import torch
        torch.set_num_threads(1)
        from transformers.utils import logging
        logging.set_verbosity_error()
        warnings.simplefilter("ignore")
        result = judge(model_type, config, case=case)
    except BaseException as error:  # noqa: BLE001 -- anything at all is this type's cannot-build
        result = TypeResult(model_type, "cannot-build", case=case, message=first_line(error))
    conn.send(result)
    conn.close()


def preload() -> None:
    """Import torch and transformers' model machinery once, before forking: each child then imports
    only its own modeling file (about 7 s of CPU saved per type). No tensor op runs here, so the
    children start without an OpenMP pool to inherit."""
    import torch  # noqa: F401
    import transformers.cache_utils  # noqa: F401
    import transformers.generation.utils  # noqa: F401
    import transformers.modeling_utils  # noqa: F401


def _forked(jobs: list, *, workers: int, limit: float, progress=None) -> list[TypeResult]:
    """Run ``judge`` for each (model_type, config, case) in forked children, ``workers`` at a time,
    each killed after ``limit`` seconds (a cannot-build, as is a child that dies)."""
    import multiprocessing
    preload()
    ctx = multiprocessing.get_context("fork")
    results: dict[int, TypeResult] = {}
    pending = list(enumerate(jobs))
    running: dict = {}
    while pending or running:
        while pending and len(running) < workers:
            index, (model_type, config, case) = pending.pop(0)
            receive, send = ctx.Pipe(duplex=False)
            process = ctx.Process(target=_child, args=(send, model_type, config, case), daemon=True)
            process.start()
            send.close()
            running[index] = (process, receive, time.perf_counter(), model_type, case)
        for index, (process, receive, started, model_type, case) in list(running.items()):
            elapsed = time.perf_counter() - started
            result = None
            if receive.poll():
                try:
                    result = receive.recv()
                except EOFError:
                    result = TypeResult(model_type, "cannot-build", case=case, seconds=round(elapsed, 2),
                                        message=f"the process died (exit code {process.exitcode})")
            elif not process.is_alive():
                process.join()
                result = TypeResult(model_type, "cannot-build", case=case, seconds=round(elapsed, 2),
                                    message=f"the process died (exit code {process.exitcode})")
            elif elapsed > limit:
                process.kill()
                result = TypeResult(model_type, "cannot-build", case=case, seconds=round(elapsed, 2),
                                    message=f"TimeoutError: did not finish in {limit:.0f} s")
            if result is not None:
                process.join(timeout=5)
                receive.close()
                del running[index]
                results[index] = result
                if progress:
                    progress(len(results), len(jobs), result)
        time.sleep(0.05)
    return [results[i] for i in range(len(jobs))]


def _run_all(jobs, *, workers, limit, progress) -> list[TypeResult]:
    if hasattr(os, "fork"):
        return _forked(jobs, workers=workers, limit=limit, progress=progress)
    out = []
    for model_type, config, case in jobs:   # no fork: in this process, not time-bound
        out.append(judge(model_type, config, case=case))
        if progress:
            progress(len(out), len(jobs), out[-1])
    return out


def random_jobs(results, cases: int, seed: int) -> list:
    """``cases`` variations over the types that matched or were wrong, derandomised by
    ``random.Random(f"{seed}/{i}/{type}")``."""
    pool = sorted(r.model_type for r in results if r.outcome in ("match", "wrong") and not r.case)
    jobs = []
    for i in range(cases if pool else 0):
        model_type = pool[i % len(pool)]
        rng = random.Random(f"{seed}/{i}/{model_type}")
        try:
            config = vary(shrink(default_config(model_type)), rng)
        except Exception:  # noqa: BLE001 -- a variation the config class rejects is skipped
            continue
        jobs.append((model_type, config, f"{model_type}#{i}"))
    return jobs


def validate(*, types=None, cases: int = 0, seed: int = 0, workers: int | None = None,
             limit: float = TIME_LIMIT, progress=None, fields: bool = True) -> TransformersReport:
    """Every decoder type (or ``types``) and ``cases`` seeded variations: a TransformersReport; with
    ``fields``, also every field of those families left out, set to null and overridden in turn
    (absent_fields, overridden_fields: no model built, about 45 s for every family)."""
    known = decoder_types()
    chosen = known if types is None else [t.strip() for t in types if t.strip()]
    unknown = [t for t in chosen if t not in known]
    if unknown:
        raise ValueError(f"not a decoder model_type of transformers {version()}: {', '.join(unknown)}")
    workers = workers or max(1, min(4, os.cpu_count() or 1))
    results = _run_all([(t, None, "") for t in chosen], workers=workers, limit=limit, progress=progress)
    if cases:
        results += _run_all(random_jobs(results, cases, seed), workers=workers, limit=limit, progress=progress)
    swept: tuple[AbsentResult, ...] = ()
    if fields:
        families = None if types is None else chosen
        nulls = [replace(r, field=f"{r.field}=null") for r in absent_fields(families, as_null=True)]
        swept = (*absent_fields(families), *nulls, *overridden_fields(families))
    return TransformersReport(version=version(), seed=seed, random_cases=cases, results=tuple(results),
                              notes=NOTES, fields=tuple(swept))


NOTES = (f"each type: its default config shrunk (vocab {VOCAB}, FFN {FFN}, experts {EXPERTS}, windows and "
         f"chunks {WINDOW}, one period of its layer pattern), fp32, batch {BATCH}, a {PROMPT}-token prefill "
         f"and {STEPS} decode steps; measured = unique storages reachable from past_key_values",)

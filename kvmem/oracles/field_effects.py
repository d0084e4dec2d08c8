"""Does a config field shape the cache? transformers decides: change it, build, run, measure.

For a family and a field kvmem's reader refuses for it (kvmem.configs.reads.CACHE_FIELDS less the
family's reads), ``field_effect`` takes the family's default config shrunk as the transformers oracle
shrinks it (kvmem.oracles.transformers.measured: the first rung of its LADDER that builds and runs),
sets the field in the text config to each of a few values (``candidates``), rebuilds the config with
the class's own ``from_dict``, builds the model with seeded weights and runs the same 48-token prefill
and 3 decode steps, and compares the bytes the cache holds (after the prefill, at the end, per layer)
with the unchanged config's:

    no-effect     every value built, and no value changed a byte: the field may be accepted
                  (Family.ignores, with why), and Model.reading lists it
    changes       some value changed the bytes: the field stays a refusal naming it
    cannot-build  no value could be built (the class or the model rejects it): stays refused
    no-candidate  kvmem has no value to try for the field (a nested dict): stays refused

``sweep_pairs`` lists the (model_type, field) pairs worth a run: the fields the reader refuses for a
family that the family's transformers modules name as a config attribute, a quoted key or a class
field, or that a published file of the family sets (PUBLISHED), and the fields the family already
ignores (Family.ignores: the judge confirms them). tools/field_effects.py runs them all;
tests/configs/test_field_effects.py a fixed sample. torch and transformers are imported inside.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

__all__ = ["FieldEffect", "PUBLISHED", "candidates", "field_effect", "sweep_pairs", "run_pairs"]

# Fields real published files set that the reader refused before it learned them (issue 31):
# model_type -> fields (google/gemma-2-9b-it, MiniMax-M2.5/M2.7, Nemotron-H-56B-Base-8K,
# RedHatAI/DeepSeek-V4-Flash-NVFP4-FP8 saved by transformers 5.7.0.dev0)
PUBLISHED = {"gemma2": ("sliding_window_size",), "minimax_m2": ("attn_type_list",),
             "nemotron_h": ("time_step_rank",), "deepseek_v4": ("qk_nope_head_dim",)}

LIMIT = 120.0    # seconds for one pair (the base and every value), in a forked child

_INDEX_LISTS = frozenset({"full_attn_idxs", "kda_layers", "full_attn_layers", "attn_layer_indices", "hybrid_layer_ids",
                          "local_layer_ids", "cross_attention_layers", "kv_source_layers"})
_TYPE_LISTS = frozenset({"attn_type_list"})


@dataclass(frozen=True)
class FieldEffect:
    model_type: str
    field: str
    outcome: str                     # no-effect, changes, cannot-build, no-candidate
    base: tuple = ()                 # (prefill bytes, end bytes) unchanged
    tried: tuple = ()                # ((value, (prefill, end) or the error's first line), ...)
    seconds: float = 0.0

    def line(self) -> str:
        tried = "; ".join(f"{value!r} -> {result}" for value, result in self.tried)
        return f"{self.model_type:24} {self.field:28} {self.outcome:13} base {self.base} | {tried}"


def candidates(field: str, text: dict, layers: int) -> list:
    """The values tried for ``field`` in a text config of ``layers`` layers: a change of the value the
    config already holds (doubled, halved, negated, a list reversed or its integers doubled), else values
    of the field's kind (a window of 16 binds at the 48-token prompt)."""
    current = text.get(field)
    if isinstance(current, bool):
        return [not current]
    if isinstance(current, int) and current > 0:
        return [current * 2, max(1, current // 2)]
    if field in _TYPE_LISTS:
        return [[i % 2 for i in range(layers)], [1] * layers]
    if field in _INDEX_LISTS:
        return [[0], list(range(layers))]
    if field in ("use_bidirectional_attention", "is_decoder", "use_sliding_window", "new_decoder_architecture",
                 "multi_query"):
        return [True]
    if isinstance(current, list) and current:
        changed = [current[::-1]] if current != current[::-1] else []
        if all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in current):
            changed.append([v * 2 for v in current])
        if changed:
            return changed
    if isinstance(current, (dict, list, str)):
        return []
    return [16, 2]


def _text_key(config, d: dict) -> str | None:
    """The key of the text config's dict in ``d`` (None: the config is its own text config)."""
    text = config.get_text_config(decoder=True)
    if text is config:
        return None
    own = [key for key, value in d.items() if isinstance(value, dict) and value.get("model_type") == text.model_type]
    return own[0] if own else "text_config" if isinstance(d.get("text_config"), dict) else None


def _with(config, field: str, value):
    d = config.to_dict()
    key = _text_key(config, d)
    (d[key] if key else d)[field] = value
    return type(config).from_dict(d)


def field_effect(model_type: str, field: str) -> FieldEffect:
    """``field`` set to each candidate value in ``model_type``'s shrunk default config: its effect on the
    bytes transformers' cache holds (see the module's docstring)."""
    from .transformers import first_line, measured
    started = time.perf_counter()

    def done(outcome, **kw):
        return FieldEffect(model_type, field, outcome, seconds=round(time.perf_counter() - started, 2), **kw)

    try:
        config, prefill, total, per_layer, _, _ = measured(model_type)
    except Exception as error:  # noqa: BLE001 -- transformers cannot build the family at all
        return done("cannot-build", tried=(("base", first_line(error)),))
    base = (prefill, total)
    text = config.get_text_config(decoder=True).to_dict()
    layers = int(text.get("num_hidden_layers") or 1)
    values = candidates(field, text, layers)
    if not values:
        return done("no-candidate", base=base)
    tried, built, changed = [], 0, False
    for value in values:
        try:
            _, p, t, layered, _, _ = measured(model_type, _with(config, field, value))
        except Exception as error:  # noqa: BLE001 -- this value is rejected by the class or the model
            tried.append((value, first_line(error)[:120]))
            continue
        built += 1
        changed = changed or (p, t, layered) != (prefill, total, per_layer)
        tried.append((value, (p, t)))
    outcome = "changes" if changed else "no-effect" if built == len(values) else "cannot-build"
    return done(outcome, base=base, tried=tuple(tried))


_NAMED = re.compile(r"(?:config\.|self\.)(\w+)|[\"'](\w+)[\"']|^\s+(\w+)\s*:", re.M)


def sweep_pairs(model_types=None) -> list[tuple[str, str]]:
    """(transformers model_type, field): every decoder type transformers ships whose family kvmem
    reads (a wrapper by its text family), with each field the reader refuses for that family and the
    type's own transformers modules name, or PUBLISHED gives, and each field the family ignores (the
    judge confirms those)."""
    from pathlib import Path

    import transformers

    from ..configs.families import ALIASES, FAMILIES
    from ..configs.reads import CACHE_FIELDS, reads
    from ..configs.wrappers import TEXT_MODEL_TYPES
    from .transformers import decoder_types
    root = Path(transformers.__file__).parent / "models"
    pairs = []
    for model_type in model_types or decoder_types():
        text_type = TEXT_MODEL_TYPES.get(model_type, model_type)
        family = FAMILIES.get(ALIASES.get(text_type, text_type))
        if family is None:
            continue
        folder = root / model_type.replace("-", "_")
        source = "".join(path.read_text() for path in sorted(folder.glob("*.py"))) if folder.is_dir() else ""
        named = {name for match in _NAMED.finditer(source) for name in match.groups() if name}
        refused = CACHE_FIELDS - reads(family)
        fields = (refused & named) | (refused & set(PUBLISHED.get(text_type, ()))) | family.ignored_fields
        pairs.extend((model_type, field) for field in sorted(fields))
    return pairs


def _child(conn, model_type: str, field: str) -> None:
    from .transformers import die_with_parent
    die_with_parent()
    try:
        import torch
        torch.set_num_threads(1)
        import transformers
        transformers.logging.set_verbosity_error()
        result = field_effect(model_type, field)
    except BaseException as error:  # noqa: BLE001 -- reported, never raised in the child
        result = FieldEffect(model_type, field, "cannot-build", tried=(("run", f"{type(error).__name__}: {error}"),))
    conn.send(result)
    conn.close()


def run_pairs(pairs, *, limit: float = LIMIT, progress=None) -> list[FieldEffect]:
    """``field_effect`` for each pair, one at a time, each in a forked child killed after ``limit`` s."""
    import multiprocessing

    from .transformers import preload
    preload()
    ctx = multiprocessing.get_context("fork")
    out = []
    for model_type, field in pairs:
        receive, send = ctx.Pipe(duplex=False)
        process = ctx.Process(target=_child, args=(send, model_type, field), daemon=True)
        process.start()
        send.close()
        if receive.poll(limit):
            try:
                result = receive.recv()
            except EOFError:
                result = FieldEffect(model_type, field, "cannot-build", tried=(("run", "the process died"),))
        else:
            process.kill()
            result = FieldEffect(model_type, field, "cannot-build", tried=(("run", f"over {limit:.0f} s"),))
        process.join(timeout=5)
        receive.close()
        out.append(result)
        if progress:
            progress(len(out), len(pairs), result)
    return out

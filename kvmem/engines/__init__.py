"""engine_estimate() and capacity(): one entry point, dispatched to each engine's own rules.

Each engine mode lives in its own module with its rules and their sources in its
docstring. This module finds those modules (their SPECS), checks the common inputs and the
options each mode takes. Eviction, a shared prefix and offload are what-ifs above the engines:
kvmem.estimate (kvmem.strategies) applies them to this module's count.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import MutableMapping

from ..catalog import as_model
from ..configs.families import FAMILIES
from ..errors import EngineRefusal
from ..parallel import check_parallel
from ..units import MAX_COUNT, parse_tokens, require_positive_int, show_value
from .base import EngineSpec, check_query_heads
from .positions import past_positions
from .results import Capacity, Estimate, with_note

__all__ = ["engine_estimate", "capacity", "list_engines", "engine_spec", "with_defaults", "check_family",
           "FamilyNotChecked", "Estimate", "Capacity", "ENGINES"]

# Engine modules register themselves: every module in this package with a SPECS tuple. These
# are listed here, in this order, with the module each lives in, so that a command imports only
# the engine it uses; a new module needs no edit here (it is found, and imported, on first listing).
_ORDER = {"ideal": "ideal", "hf-dynamic": "hf", "hf-static": "hf", "hf-quantized": "hf", "vllm": "vllm",
          "sglang": "sglang", "llama.cpp": "llamacpp", "trtllm": "trtllm"}
_NOT_ENGINES = {"base"}


def _modules_here() -> list[str]:
    """The modules and sub-packages of this package, by name (what pkgutil.iter_modules lists,
    without importing pkgutil: the engine choices are listed in every command's help)."""
    folder = os.path.dirname(__file__)
    names = []
    for entry in sorted(os.listdir(folder)):
        stem, suffix = os.path.splitext(entry)
        if (suffix == ".py" and stem != "__init__") or (
                not suffix and os.path.isfile(os.path.join(folder, entry, "__init__.py"))):
            names.append(stem)
    return names


class _Engines(MutableMapping):
    """Engine name -> EngineSpec, in _ORDER and then by name; an engine's module is imported the
    first time its spec is asked for."""

    def __init__(self):
        self._specs: dict[str, EngineSpec] = {}
        self._extra: list[str] | None = None     # names from modules _ORDER does not list

    def _load(self, module: str) -> None:
        for spec in getattr(importlib.import_module(f"{__name__}.{module}"), "SPECS", ()):
            self._specs.setdefault(spec.name, spec)

    def _names(self) -> list[str]:
        if self._extra is None:
            known = set(_ORDER.values()) | _NOT_ENGINES
            before = set(self._specs)
            for name in _modules_here():
                if name not in known:
                    self._load(name)
            self._extra = sorted(set(self._specs) - before - set(_ORDER))
        added = sorted(set(self._specs) - set(_ORDER) - set(self._extra))  # registered by hand (tests)
        return [*_ORDER, *self._extra, *added]

    def __getitem__(self, name: str) -> EngineSpec:
        if name not in self._specs and name in _ORDER:
            self._load(_ORDER[name])
        return self._specs[name]

    def __setitem__(self, name: str, spec: EngineSpec) -> None:
        self._specs[name] = spec

    def __delitem__(self, name: str) -> None:
        del self._specs[name]

    def __contains__(self, name) -> bool:
        return name in self._specs or name in _ORDER or name in self._names()

    def __iter__(self):
        return iter([name for name in self._names() if name in self._specs or name in _ORDER])

    def __len__(self) -> int:
        return len(list(iter(self)))


ENGINES: MutableMapping[str, EngineSpec] = _Engines()
_ALIASES = {"llamacpp": "llama.cpp", "llama-cpp": "llama.cpp", "tensorrt-llm": "trtllm",
            "trt-llm": "trtllm", "hf": "hf-dynamic", "transformers": "hf-dynamic"}


def list_engines() -> list[str]:
    """The engine modes estimate() accepts."""
    return list(ENGINES)


def engine_spec(engine: str) -> EngineSpec:
    """The registered engine mode for a name or alias ("llamacpp" -> llama.cpp); a clear error otherwise."""
    key = str(engine).strip().lower()
    key = _ALIASES.get(key, key)
    if key not in ENGINES:
        from ..sources.bounded import quote
        raise ValueError(f"unknown engine {quote(engine)}; engines: {', '.join(ENGINES)}")
    return ENGINES[key]


# The engine modes that size compressed layers (DeepSeek-V4's CSA / HCA, kvmem.layer.Compressor),
# whatever model carries them: the others have no rule for their compressed rows and buffers.
COMPRESSED_ENGINES = ("ideal", "hf-dynamic", "vllm", "hf-quantized", "llama.cpp", "sglang", "trtllm")


class FamilyNotChecked(ValueError):
    """check_family's refusal of a family whose rules kvmem has not checked against this engine
    mode's pinned code: a gap in kvmem, not the engine's own refusal (kvmem.errors.EngineRefusal,
    stating the engine's reason). ``engine`` and ``model_type`` name the pair; ``sizing`` lists the
    engine modes that do size it. kvmem.reach and tests/engines/test_family_reach.py tell the two
    apart by this class."""

    def __init__(self, message: str, *, engine: str, model_type: str, sizing: tuple[str, ...]):
        super().__init__(message)
        self.engine, self.model_type, self.sizing = engine, model_type, sizing


def _sizing(model_type: str) -> tuple[str, ...]:
    family = FAMILIES.get(model_type)
    if family is not None and not family.opt_in:   # a base family: every mode but those that refuse it
        return tuple(name for name, other in ENGINES.items() if model_type not in other.refusals)
    return tuple(name for name, other in ENGINES.items() if other.families.sizes(model_type))


def check_family(spec: EngineSpec, model) -> None:
    """Refuse a family the engine's module refuses (EngineSpec.refusals: opt-in or not, e.g. a base
    family the pinned release has no model for), and an opt-in family (kvmem.configs.families,
    Family.opt_in) this engine mode does not declare (EngineSpec.families): with the engine's own
    reason where its module states one, else as FamilyNotChecked (kvmem has not checked it against the engine's
    code); and compressed layers in an engine mode without a rule for them (FamilyNotChecked)."""
    family = FAMILIES.get(model.model_type)
    release = spec.pinned or f"the {spec.name} engine"
    why = spec.refusals.get(model.model_type)
    opt_in = family is not None and family.opt_in
    # an engine's own refusal of a base family, or an opt-in family the mode does not declare
    if (why and not opt_in) or (opt_in and not spec.families.sizes(model.model_type)):
        engine = f"{spec.name!r} ({spec.pinned})" if spec.pinned else repr(spec.name)
        sizing = _sizing(model.model_type)
        if why:
            way_out = f"engines that size it: {', '.join(sizing)}"
            raise EngineRefusal(f"engine {engine} does not size model_type {model.model_type!r}: {why}; {way_out}",
                                engine=spec.name, release=release, reason=why, way_out=way_out)
        raise FamilyNotChecked(
            f"engine {engine}: kvmem does not size model_type {model.model_type!r} the way this engine does yet: "
            f"kvmem has not checked this family's cache against {release}'s code (a gap in kvmem, not a refusal "
            f"of the engine's); engines that size it: {', '.join(sizing)}",
            engine=spec.name, model_type=model.model_type, sizing=sizing)
    if spec.name not in COMPRESSED_ENGINES and any(layer.kind == "compressed" for layer in model.layers):
        raise FamilyNotChecked(
            f"engine {spec.name!r} does not size compressed layers (DeepSeek-V4's compressed sparse attention) yet: "
            f"kvmem has no rule for {release}'s compressed rows and buffers (a gap in kvmem, not a refusal of the "
            f"engine's); engines that size them: {', '.join(COMPRESSED_ENGINES)}",
            engine=spec.name, model_type=model.model_type, sizing=COMPRESSED_ENGINES)


# Bounds every option value meets before its engine reads it (issue 20): counts (block sizes, token
# budgets, sequences) at most MAX_COUNT, byte amounts ("*_bytes") at most MAX_OPTION_BYTES, numbers
# no larger (NaN is left to the engine's own check, which names its rule), text at most
# MAX_OPTION_CHARS; each engine then checks its own allowed values.
MAX_OPTION_BYTES = 2**60            # 1 EiB
MAX_OPTION_CHARS = 100


def bounded_option(engine: str, name: str, value) -> None:
    if isinstance(value, bool) or value is None:
        return
    most = MAX_OPTION_BYTES if name.endswith("_bytes") else MAX_COUNT
    if isinstance(value, int) and abs(value) > most:
        raise ValueError(f"engine {engine!r} option {name}: {show_value(value)} is past the most kvmem takes "
                         f"({most:,})")
    if isinstance(value, float) and abs(value) > most:        # NaN: the engine's own check names its rule
        raise ValueError(f"engine {engine!r} option {name} must be a number at most {most:,}, got {show_value(value)}")
    if isinstance(value, str) and len(value) > MAX_OPTION_CHARS:
        raise ValueError(f"engine {engine!r} option {name}: a {len(value):,}-character value is too long "
                         f"(at most {MAX_OPTION_CHARS})")


def with_defaults(spec: EngineSpec, options: dict) -> dict:
    """``options`` checked against the engine's (and the bounds above), its defaults filled in."""
    unknown = sorted(set(options) - set(spec.options))
    if unknown:
        valid = ", ".join(sorted(spec.options)) or "none"
        raise ValueError(f"engine {spec.name!r} has no option {show_value(unknown[0])}; its options: {valid}")
    for name, value in options.items():
        bounded_option(spec.name, name, value)
    return {**spec.options, **options}


def engine_estimate(model, *, engine: str = "ideal", tokens, batch: int = 1, kv_dtype="auto", tp: int = 1,
                    pp: int = 1, **options) -> Estimate:
    """Cache bytes for ``batch`` sequences of ``tokens`` tokens under ``engine``'s rules.

    The engine's count alone: kvmem.estimate (kvmem.strategies) applies eviction, a shared
    prefix and offload on top of it.
    """
    spec = engine_spec(engine)
    model = as_model(model)
    check_family(spec, model)
    tokens = parse_tokens(tokens)
    batch = require_positive_int("batch", batch, MAX_COUNT)
    tp, pp = check_parallel(tp, pp)
    options = with_defaults(spec, options)
    result = spec.estimate(model, tokens=tokens, batch=batch, kv_dtype=kv_dtype, tp=tp, pp=pp, **options)
    check_query_heads(spec, model, tp)  # after the engine's own KV-head check, which names its rule
    past = past_positions(model, spec, tokens)
    return with_note(result, *past) if past else result


# kvmem.capacity is defined in capacity.py, imported last: it reads the names above
from .capacity import capacity  # noqa: E402

"""Config files that leave fields out, judged by vLLM 0.33.0's own config classes.

vLLM reads a config.json with its own class where its registry names one
(vllm/transformers_utils/config.py#L122-L176 _CONFIG_REGISTRY: BeamConfig, HYV4Config, MiniMaxM3Config, ...),
else with transformers'. Where the class is vLLM's, a field the file leaves out is filled in by vLLM's
defaults, which may not be transformers' (kvmem's reader follows transformers': kvmem.oracles.transformers
absent_fields). ``absent_fields`` leaves each field kvmem reads out of a family's config in turn, builds
vLLM's class from the file (``cls.from_dict``, as get_config's from_pretrained does) and compares kvmem's
vLLM mode on the file with kvmem's vLLM mode on the config vLLM filled in (a config kvmem reads right when
given whole, as kvmem.oracles.vllm checks):
    same            the two agree (or both are refused)
    wrong           kvmem sizes the file otherwise than the config vLLM makes of it
    refused         kvmem refuses the file; vLLM's class fills it in
    engine-refuses  vLLM's class raises on the file; kvmem sizes it (it must refuse, with vLLM's reason)
No model is built: seconds for every family.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
from typing import Any

__all__ = ["AbsentResult", "OUTCOMES", "absent_fields", "leave_out", "sweep", "text_of", "vllm_reading",
           "vllm_classes", "base_configs"]

OUTCOMES = ("same", "wrong", "refused", "engine-refuses")
TOKENS = 4096


@dataclasses.dataclass(frozen=True)
class AbsentResult:
    """One field left out of one family's config: kvmem's engine-mode reading of the file (``absent``, or
    its refusal) against its reading of the config the engine makes of the file (``filled``, or the
    engine's own error)."""

    model_type: str
    field: str
    outcome: str
    absent: object = None
    filled: object = None


def text_of(d: dict) -> dict:
    """The part of a config dict kvmem reads the model from: its text_config where it has one."""
    text = d.get("text_config")
    return text if isinstance(text, dict) else d


def leave_out(d: dict, name: str) -> dict:
    """A copy of the config dict ``d`` whose text part lacks ``name``."""
    file = copy.deepcopy(d)
    text_of(file).pop(name, None)
    return file


def _first_line(error: BaseException) -> str:
    return f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"


def vllm_reading(d: dict):
    """kvmem's vLLM mode on the config dict ``d``: (the layers vLLM's model file builds, as
    kvmem.engines.vllm.models.vllm_layers gives them, the KV bytes of one 4,096-token sequence at bf16),
    or the refusal's first line."""
    import kvmem
    from kvmem.engines.vllm.models import check_heads, vllm_layers
    from kvmem.engines.vllm.options import LATEST
    try:
        model = kvmem.Model.from_hf_config(d)
        check_heads(model, 1)
        layers = vllm_layers(model, 1, LATEST)
        kv = kvmem.estimate(model, engine="vllm", tokens=TOKENS, kv_dtype="bf16").kv_bytes
    except (ValueError, TypeError, KeyError) as error:   # ConfigError is a ValueError
        return _first_line(error)
    return layers, kv


def _outcome(absent, filled, engine_raised: bool) -> str:
    if engine_raised:
        return "same" if isinstance(absent, str) else "engine-refuses"
    if absent == filled or (isinstance(absent, str) and isinstance(filled, str)):
        return "same"
    return "refused" if isinstance(absent, str) else "wrong"


def sweep(model_type: str, base: dict, build, reading) -> list[AbsentResult]:
    """Each field kvmem reads from ``base`` (its reading.from_config, in the text part) left out in turn:
    ``build(file)`` is the config dict the engine makes of the file (raising where the engine does),
    ``reading(d)`` kvmem's engine-mode reading of a dict."""
    import kvmem
    try:
        names = [n for n in kvmem.Model.from_hf_config(base).reading.from_config if n in text_of(base)]
    except ValueError:
        return []
    try:   # the engine's round trip of the whole file must read as the file: else nothing here to compare
        if reading(build(copy.deepcopy(base))) != reading(base):
            return []
    except Exception:  # noqa: BLE001 -- the engine's class refuses the whole file: not a left-out field's doing
        return []
    results = []
    for name in sorted(set(names)):
        file = leave_out(base, name)
        absent = reading(file)
        try:
            filled = reading(build(file))
            raised = False
        except Exception as error:  # noqa: BLE001 -- whatever the engine's class raises is its refusal
            filled, raised = _first_line(error), True
        results.append(AbsentResult(model_type, name, _outcome(absent, filled, raised), absent, filled))
    return results


def vllm_classes() -> dict:
    """model_type -> vLLM 0.33.0's own config class (its _CONFIG_REGISTRY), for the types whose class loads."""
    from vllm.transformers_utils.config import _CONFIG_REGISTRY
    out = {}
    for model_type in _CONFIG_REGISTRY:
        try:
            out[model_type] = _CONFIG_REGISTRY[model_type]
        except Exception:  # noqa: BLE001 -- a class that does not import on this CPU machine
            continue
    return out


def transformers_default(model_type: str):
    """transformers' own config class for ``model_type`` (configuration_auto.py CONFIG_MAPPING_NAMES), with
    kvmem.oracles.transformers' DEFAULT_OVERRIDES: imported by name, since SGLang registers its own classes over
    CONFIG_MAPPING's (python/sglang/srt/configs/muse_spark.py#L254-L259) once it is loaded."""
    import importlib

    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES, model_type_to_module_name

    from .transformers import DEFAULT_OVERRIDES
    module = importlib.import_module(f"transformers.models.{model_type_to_module_name(model_type)}")
    overrides: Any = DEFAULT_OVERRIDES.get(model_type, {})
    return getattr(module, CONFIG_MAPPING_NAMES[model_type])(**overrides)


def base_configs(classes: dict) -> list[tuple[str, dict]]:
    """(model_type, a config dict kvmem reads) per class: transformers' default config of the type where
    transformers ships it (the defaults kvmem's reader is judged on), else the engine class's own defaults."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    import kvmem
    out = []
    for model_type, cls in sorted(classes.items()):
        makers = [functools.partial(transformers_default, model_type)] if model_type in CONFIG_MAPPING_NAMES else []
        makers.append(cls)
        for make in makers:
            try:
                d = make().to_dict()
                kvmem.Model.from_hf_config(d)
            except Exception:  # noqa: BLE001 -- no default config kvmem reads
                continue
            d["model_type"] = model_type
            out.append((model_type, d))
            break
    return out


def _vllm_build(cls):
    def build(file: dict) -> dict:
        filled = cls.from_dict(copy.deepcopy(file)).to_dict()
        # the file's own type names stay (the class may write its own model_type)
        filled["model_type"] = file.get("model_type", filled.get("model_type"))
        return filled
    return build


def absent_fields(types=None, extra=()) -> list[AbsentResult]:
    """The sweep over every vLLM-registered family kvmem reads (or ``types``), and ``extra`` (model_type,
    config dict) bases."""
    classes = vllm_classes()
    if types is not None:
        classes = {t: c for t, c in classes.items() if t in types}
    results = []
    for model_type, base in [*base_configs(classes), *extra]:
        results += sweep(model_type, base, _vllm_build(classes[model_type]), vllm_reading)
    return results

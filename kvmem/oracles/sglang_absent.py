"""Config files that leave fields out, judged by SGLang 0.5.23's own reading of them.

SGLang reads a config.json with its own config class where its registry names one
(python/sglang/srt/utils/hf_transformers/common.py#L117 _CONFIG_REGISTRY: Qwen3NextConfig, BeamConfig, ...), else
with transformers'; its classes fill a left-out field with their own defaults, or raise. ``absent_fields``
leaves each field kvmem reads out of each of kvmem.oracles.sglang_families' cases (the presets that are real
checkpoints' configs and the declared families' defaults) in turn, and compares what SGLang's ModelConfig makes
of the file (sglang_families.sglang_view: the pools' layers, rows, indexer layers, state) with kvmem's SGLang
layout of the same file (kvmem_view), with the outcomes of kvmem.oracles.vllm_absent. A case whose whole config
does not already agree is skipped (sglang_families' own tests judge those). SGLang's ModelConfig is built from a
temporary directory once per field: about 20 s for every case on one core.
"""

from __future__ import annotations

from .vllm_absent import AbsentResult, leave_out, text_of

__all__ = ["absent_fields", "judge_file", "SGLANG_OUTCOMES"]

SGLANG_OUTCOMES = ("same", "wrong", "refused", "engine-refuses")


def _first_line(error: BaseException) -> str:
    return f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"


def _view(function, d: dict):
    try:
        return function(d)
    except Exception as error:  # noqa: BLE001 -- SGLang's own error, or kvmem's refusal, is the reading
        return _first_line(error)


def judge_file(d: dict) -> tuple[str, object, object]:
    """(outcome, kvmem's SGLang layout of ``d`` or its refusal, SGLang's ModelConfig view or its error)."""
    from .sglang_families import kvmem_view, sglang_view
    ours, theirs = _view(kvmem_view, d), _view(sglang_view, d)
    if isinstance(theirs, str):
        return ("same" if isinstance(ours, str) else "engine-refuses"), ours, theirs
    if isinstance(ours, str):
        return "refused", ours, theirs
    return ("same" if ours == theirs else "wrong"), ours, theirs


def extra_cases() -> list[tuple[str, dict]]:
    """Cases beside sglang_families': Muse Spark under the architecture SGLang runs it as (its own
    MuseSparkTextConfig, registered over transformers', python/sglang/srt/configs/muse_spark.py#L254-L259), Beam
    and EXAONE (SGLang's own BeamConfig and ExaoneConfig, python/sglang/srt/configs/beam.py, exaone.py)."""
    # transformers' own class, imported by name: once SGLang is loaded, CONFIG_MAPPING["muse_spark"] is SGLang's
    from transformers.models.muse_spark.configuration_muse_spark import MuseSparkConfig

    from .transformers import default_config
    muse = {**MuseSparkConfig().to_dict(), "architectures": ["MuseSparkForConditionalGeneration"]}
    beam = {**default_config("beam").to_dict(), "architectures": ["BeamForCausalLM"]}   # SGLang's BeamConfig
    exaone = {**default_config("exaone").to_dict(), "architectures": ["ExaoneForCausalLM"]}   # its ExaoneConfig
    return [("muse_spark", muse), ("beam", beam), ("exaone", exaone)]


def absent_fields(cases=None) -> list[AbsentResult]:
    """Every sglang_families case (or ``cases``: (name, config dict)), each field kvmem reads left out in turn."""
    import kvmem

    from .sglang_families import base_configs
    results = []
    for name, base in [*base_configs(), *extra_cases()] if cases is None else cases:
        if judge_file(base)[0] != "same":
            continue
        try:
            names = kvmem.Model.from_hf_config(base).reading.from_config
        except ValueError:
            continue
        for field in sorted(n for n in set(names) if n in text_of(base)):
            outcome, ours, theirs = judge_file(leave_out(base, field))
            results.append(AbsentResult(name, field, outcome, ours, theirs))
    return results

"""The engines' own code as the judge: kvmem checked against llama.cpp, vLLM, SGLang and transformers.

``validate_engine(engine, cases=N, seed=S)`` runs kvmem beside the installed engine's own
code (no GPU, no model weights): a directed set of cases built from kvmem's presets and N
random architectures drawn from seed S, and reports every quantity compared. The engine
modules import their engine only when called; ``import kvmem`` never loads this package.
Install the engines with ``make oracles`` (.venv-oracles).

``validate_engine("transformers", cases=N, seed=S, types=[...])`` is the other kind of judge:
transformers' own modeling code, every decoder model_type of the installed release built small
and run (kvmem/oracles/transformers.py); it returns a TransformersReport, one class per type.
It runs in the main environment (.venv), where transformers is installed.
"""

from __future__ import annotations

import importlib

from .report import Check, OracleReport

__all__ = ["validate_engine", "ENGINES", "Check", "OracleReport"]

ENGINES = {"llama.cpp": "llamacpp", "vllm": "vllm", "sglang": "sglang", "transformers": "transformers"}
_ALIASES = {"llamacpp": "llama.cpp", "llama-cpp": "llama.cpp", "llama_cpp": "llama.cpp"}


def validate_engine(engine: str, *, cases: int = 100, seed: int = 0, directed: bool = True, types=None,
                    progress=None):
    """kvmem against ``engine``'s own code: the directed cases and ``cases`` random architectures.

    For "transformers": every decoder model_type (or only ``types``) and ``cases`` seeded
    variations; ``progress(done, total, result)`` is called after each.
    """
    key = _ALIASES.get(str(engine).strip().lower(), str(engine).strip().lower())
    if key not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    if isinstance(cases, bool) or not isinstance(cases, int) or cases < 0:
        raise ValueError(f"cases must be a non-negative integer, got {cases!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed must be an integer, got {seed!r}")
    if key == "transformers":
        return _transformers(cases=cases, seed=seed, types=types, progress=progress)
    try:
        oracle = importlib.import_module(f"{__name__}.{ENGINES[key]}")
        engine_version = oracle.version()
    except ImportError as error:
        raise RuntimeError(f"{key} is not importable here ({error}); run `make oracles` and use "
                           f".venv-oracles/bin/kvmem") from error
    chosen = (oracle.directed_cases() if directed else []) + oracle.random_cases(cases, seed)
    checks = []
    for name, model, setting in chosen:
        checks.extend(oracle.run_case(name, model, setting))
    notes = tuple(getattr(oracle, "NOTES", ()))
    return OracleReport(engine=key, version=engine_version, seed=seed,
                        directed_cases=len(chosen) - cases, random_cases=cases, checks=tuple(checks),
                        notes=notes)


def _transformers(*, cases: int, seed: int, types, progress):
    """transformers' modeling code as the judge (kvmem/oracles/transformers.py)."""
    try:
        oracle = importlib.import_module(f"{__name__}.transformers")
        oracle.version()
    except ImportError as error:
        raise RuntimeError(f"transformers is not importable here ({error}); run `make` to build .venv "
                           f"and use .venv/bin/kvmem") from error
    return oracle.validate(types=types, cases=cases, seed=seed, progress=progress)

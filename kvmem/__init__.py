"""kvmem: exact KV-cache memory for real models and real inference engines.

The public names of the contract (docs/api.md), re-exported; no logic here. Each is imported
on first use (PEP 562), so that ``import kvmem`` and a ``kvmem`` command load only the modules
they use: ``kvmem estimate`` never imports the sizing, measurement or oracle modules.
"""

from importlib import import_module

# public name -> the module that defines it
_HOME = {
    "get_model": ".catalog", "list_models": ".catalog",
    "ConfigError": ".errors", "EngineRefusal": ".errors",
    "DType": ".dtypes", "dtype": ".dtypes",
    "Capacity": ".engines", "Estimate": ".engines", "capacity": ".engines", "list_engines": ".engines",
    "Refusal": ".engines.results",
    "formula": ".textbook",
    "GPU": ".gpus", "get_gpu": ".gpus", "list_gpus": ".gpus",
    "Measurement": ".measurement", "measure": ".measurement",
    "Layer": ".layer", "Model": ".model", "RecurrentState": ".layer",
    "OracleReport": ".oracles", "validate_engine": ".oracles",
    "Fit": ".sizing", "FitError": ".sizing", "fit": ".sizing", "sweep": ".sizing", "SweepCell": ".sizing",
    "Plan": ".launch", "PlanRefused": ".launch", "plan": ".launch",
    "Report": ".export", "report": ".export", "rerun_report": ".export",
    "check_log": ".logcheck", "LogCheck": ".logcheck",
    "Eviction": ".strategies", "compare_strategies": ".strategies", "estimate": ".strategies",
    "preallocation_waste": ".strategies",
    "format_bytes": ".units", "parse_bytes": ".units", "parse_tokens": ".units",
    "weight_bytes": ".weights",
    "llamacpp_offload": ".engines.llamacpp.offload", "OffloadPlan": ".engines.llamacpp.offload",
    "llamacpp_decode_curve": ".engines.llamacpp.offload",
}

__all__ = [
    "formula", "dtype", "DType", "parse_tokens", "parse_bytes", "format_bytes",
    "Model", "Layer", "RecurrentState", "ConfigError", "EngineRefusal", "get_model", "list_models",
    "estimate", "capacity", "Estimate", "Capacity", "Refusal", "list_engines",
    "Eviction", "compare_strategies", "preallocation_waste",
    "list_gpus", "get_gpu", "GPU", "fit", "Fit", "FitError", "sweep", "SweepCell", "weight_bytes",
    "measure", "Measurement", "validate_engine", "OracleReport", "plan", "Plan", "PlanRefused",
    "report", "Report", "rerun_report",
    "check_log", "LogCheck", "llamacpp_offload", "OffloadPlan", "llamacpp_decode_curve",
]
__version__ = "0.1.0"


def __getattr__(name: str):
    """A public name (imported from its module on first use, then kept here), or a submodule."""
    home = _HOME.get(name)
    if home is None:
        try:
            return import_module(f".{name}", __name__)   # kvmem.tables, kvmem.weights, ...
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
            raise AttributeError(f"module 'kvmem' has no attribute {name!r}") from None
    value = getattr(import_module(home, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})

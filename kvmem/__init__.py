"""kvmem: exact KV-cache memory for real models and real inference engines.

The public names of the contract (docs/api.md), re-exported; no logic here.
"""

from .catalog import get_model, list_models
from .configs import ConfigError
from .dtypes import DType, dtype
from .engines import Capacity, Estimate, capacity, list_engines
from .textbook import formula
from .gpus import GPU, get_gpu, list_gpus
from .measurement import Measurement, measure
from .model import Layer, Model, RecurrentState
from .oracles import OracleReport, validate_engine
from .launch import Plan, PlanRefused, plan
from .sizing import Fit, FitError, fit
from .strategies import Eviction, compare_strategies, estimate, preallocation_waste
from .units import format_bytes, parse_bytes, parse_tokens
from .weights import weight_bytes

__all__ = [
    "formula", "dtype", "DType", "parse_tokens", "parse_bytes", "format_bytes",
    "Model", "Layer", "RecurrentState", "ConfigError", "get_model", "list_models",
    "estimate", "capacity", "Estimate", "Capacity", "list_engines",
    "Eviction", "compare_strategies", "preallocation_waste",
    "list_gpus", "get_gpu", "GPU", "fit", "Fit", "FitError", "weight_bytes",
    "measure", "Measurement", "validate_engine", "OracleReport", "plan", "Plan", "PlanRefused",
]
__version__ = "0.1.0"

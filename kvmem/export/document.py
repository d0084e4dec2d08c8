"""A Report: kvmem.fit of one workload, kvmem.plan's command where it fits, and where the entries come from.

The JSON's ``inputs`` are kvmem.fit's arguments as plain data, enough to run it again:
    model    {"preset": name} for a preset; else {"name", "config"} (the config.json as read). A model
             read from a checkpoint's headers (exact weight bytes) adds its "hf_id", re-read from the
             HF cache or the Hub, or, from local files, "checkpoint": rerun_report then refuses it by
             name (its config alone would give the formula's weights): pass ``model=``. A model with
             no config either cannot be re-run without ``model=``
    gpu      a catalog name, or the custom GPU's fields (memory_bytes, bandwidth_bytes_per_s, ...)
    the rest as fit takes them (context in tokens), engine options under ``options``
The other sections are what those inputs gave: ``fit`` (Fit.to_dict()), ``engine_lines`` (what the
engine prints at start-up, Fit.engine_numbers: for the launch command where there is one, else for
the fit's breakdown; ``engine_lines_for`` says which), ``plan`` (Plan.to_dict(): the launch command) or
``plan_refused`` (why there is none), ``sources`` (the preset's and the GPU's own sources).

A report read back is an input from outside (it may come from anyone): rerun_report parses it with
size, depth and item bounds (kvmem.sources.bounded.parse_json), takes a ``str`` for JSON text, never
for a path (a file is an ``os.PathLike``, read by bounded.read_text), and re-reads only what names no
local file: a preset, a Hub id (org/name), a config given inline as an object. A path, a folder or a
file name inside the document is refused; only ``model=`` (the caller's own) may name local files.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

from ..catalog import as_model, get_model, list_models, preset
from ..datafiles import read_json
from ..defaults import ENGINE
from ..gpus import GPU, get_gpu
from ..model import Model
from ..sources import SourceError
from ..sources.bounded import (
    MAX_JSON_DEPTH,
    MAX_JSON_ITEMS,
    MAX_REPORT_BYTES,
    check_shape,
    parse_json,
    quote,
    read_text,
)
from ..units import parse_tokens

FORMAT = "kvmem-report/1"
_GPU_FIELDS = ("name", "memory_bytes", "bandwidth_bytes_per_s", "cuda_total_memory_bytes", "gpu_share")
_FIT_INPUTS = frozenset({"num_gpus", "tp", "pp", "context", "batch", "weight_dtype", "kv_dtype", "engine",
                         "gpu_memory_utilization"})
_MODEL_KEYS = frozenset({"name", "preset", "hf_id", "checkpoint", "config"})
MAX_OPTIONS = 64                  # engine options one report may carry (every engine's together: ~60)
# A Hub id as huggingface_hub validates it (huggingface_hub@v2.4.0 src/huggingface_hub/utils/_validators.py
# #L28-L38 REPO_ID_REGEX, #L94-L149 validate_repo_id: namespace/name of ASCII [A-Za-z0-9_.-], no leading or
# trailing '-' or '.', no '--' or '..', at most 96 characters each, no '.git' end); kvmem asks for the
# namespace too: a name that cannot be an absolute or parent path.
_HUB_PART = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,94}[A-Za-z0-9_])?")


@dataclass(frozen=True)
class Report:
    """One workload's plan; ``to_dict()`` is the JSON document (module docstring)."""

    inputs: dict
    fit: object                  # kvmem.Fit
    plan: object | None          # kvmem.Plan, where the workload fits and the engine has a command
    plan_refused: str | None     # why there is no command
    sources: dict
    kvmem_version: str

    def to_dict(self) -> dict:
        numbers = (self.plan.fit if self.plan else self.fit).engine_numbers   # the command's, where there is one
        lines_for = ("the launch command" if self.plan else
                     f"{self.fit.breakdown_batch:,} x {self.fit.breakdown_context:,} tokens per replica")
        data = {"format": FORMAT, "kvmem_version": self.kvmem_version, "inputs": self.inputs,
                "fit": self.fit.to_dict(), "engine_lines": list(numbers.lines) if numbers else [],
                "engine_lines_for": lines_for,
                "plan": self.plan.to_dict() if self.plan else None, "plan_refused": self.plan_refused,
                "sources": self.sources}
        return json.loads(json.dumps(data, default=_plain))     # plain JSON data: lists, no tuples

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2) + "\n"

    def to_markdown(self) -> str:
        from .markdown import markdown
        return markdown(self.to_dict())


def _plain(value):
    if isinstance(value, Fraction):
        return float(value)
    raise TypeError(f"{type(value).__name__} is not JSON data")


def report(model, *, gpu, num_gpus: int = 1, tp: int | None = None, pp: int = 1, context, batch: int | None = None,
           weight_dtype="auto", kv_dtype="auto", engine: str = ENGINE, gpu_memory_utilization=0.9,
           **options) -> Report:
    """kvmem.fit of this workload, kvmem.plan's command for it (target "workload") where it fits,
    and the sources of its model and GPU entries; the same arguments as kvmem.fit."""
    from .. import __version__
    from ..launch import PlanRefused, plan
    from ..sizing import fit

    model, gpu = as_model(model), get_gpu(gpu)
    context = parse_tokens(context)
    options = {name: _option_value(name, value) for name, value in options.items()}
    kwargs = dict(gpu=gpu, num_gpus=num_gpus, tp=tp, pp=pp, context=context, batch=batch, weight_dtype=weight_dtype,
                  kv_dtype=kv_dtype, engine=engine, gpu_memory_utilization=gpu_memory_utilization, **options)
    inputs = {"model": _model_input(model), "gpu": _gpu_input(gpu),
              **{k: v for k, v in kwargs.items() if k in _FIT_INPUTS}, "options": dict(options)}
    result = fit(model, **kwargs)                       # a workload that does not fit: .fits False, .why_not
    the_plan, refused = None, None
    try:
        the_plan = plan(model, target="workload", **kwargs)
    except PlanRefused as exc:
        refused = str(exc)
    return Report(inputs=inputs, fit=result, plan=the_plan, plan_refused=refused, sources=_sources(model, gpu),
                  kvmem_version=__version__)


def _option_value(name: str, value):
    """An engine option as JSON data: a Model (vLLM's draft) by its preset name, which the engines take too."""
    if not isinstance(value, Model):
        return value
    spec = _model_input(value)
    if "preset" not in spec:
        raise ValueError(f"options: {name} is a model that is not a preset ({value.name!r}); a report can name "
                         "only a preset there")
    return spec["preset"]


def rerun_report(data, *, model=None) -> Report:
    """The report of a JSON document's inputs, run again. ``data``: its JSON text (a ``str`` or bytes:
    always text, never a path), the parsed dict, or a path (an ``os.PathLike`` such as pathlib.Path).
    ``model`` replaces the document's model (one it cannot re-read: a hand-built Model, a local file):
    the only way a re-run reads local model files (module docstring)."""
    if isinstance(data, os.PathLike):
        data = read_text(data, MAX_REPORT_BYTES, f"report file {quote(os.fspath(data))}")
    if isinstance(data, (str, bytes, bytearray)):
        try:
            data = parse_json(data, "report", limit=MAX_REPORT_BYTES)
        except SourceError as exc:
            looks_like_path = isinstance(data, str) and not data.lstrip("\ufeff \t\r\n").startswith(("{", "["))
            raise SourceError(f"{exc}{' (a str is the JSON text; give a file as a pathlib.Path)' * looks_like_path}") \
                from None
    elif isinstance(data, dict):
        check_shape(data, "report", MAX_JSON_DEPTH, MAX_JSON_ITEMS)
    else:
        raise ValueError(f"report must be its JSON text, a dict or a path (os.PathLike), got {type(data).__name__}")
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        got = data.get("format") if isinstance(data, dict) else type(data).__name__
        raise ValueError(f"report: format must be {FORMAT!r}, got {quote(got)}")
    inputs = data.get("inputs")
    if not isinstance(inputs, dict):
        raise ValueError("report: inputs missing (a JSON object of kvmem.fit's arguments)")
    unknown = [key for key in inputs if key not in _FIT_INPUTS | {"model", "gpu", "options"}]
    if unknown:
        raise ValueError(f"report: inputs has {len(unknown):,} key(s) kvmem.fit does not take, the first "
                         f"{quote(unknown[0])}; it takes model, gpu, options and {', '.join(sorted(_FIT_INPUTS))}")
    args = {k: v for k, v in inputs.items() if k in _FIT_INPUTS}
    options = _options_back(inputs.get("options") or {})
    return report(model if model is not None else _model_back(inputs.get("model")), gpu=_gpu_back(inputs.get("gpu")),
                  **args, **options)


def _options_back(options) -> dict:
    """A document's engine options: at most MAX_OPTIONS, and an option that names a model names a
    preset (as report writes it) or vLLM's 'mtp', never a path or an id kvmem would go and read."""
    if not isinstance(options, dict):
        raise ValueError(f"report: inputs.options must be an object, got {quote(options)}")
    if len(options) > MAX_OPTIONS:
        raise ValueError(f"report: inputs.options has {len(options):,} entries; kvmem reads at most {MAX_OPTIONS}")
    for name, value in options.items():
        if name in _model_options() and not (isinstance(value, str) and (value in list_models() or value == "mtp")):
            raise ValueError(f"report: inputs.options.{name} must name a preset (a report names a model option "
                             f"by its preset name), got {quote(value)}; pass the model to kvmem.report yourself")
    return options


@lru_cache(maxsize=1)
def _model_options() -> frozenset:
    """The engine options whose value names a model (Option.model), of every engine."""
    from ..engines import ENGINES
    return frozenset(o.name for spec in ENGINES.values() for o in spec.option_specs() if o.model)


def _model_input(model: Model) -> dict:
    if model.name in list_models() and model == as_model(model.name):
        return {"preset": model.name}
    out: dict = {"name": model.name}
    if model.checkpoint is not None:        # its weights came from the headers: only they give the same bytes
        if model.hf_id:
            out["hf_id"] = model.hf_id
        else:
            out["checkpoint"] = "local files (a model folder or a GGUF): rerun_report needs model="
    if model.config:
        out["config"] = model.config
    return out


def _model_back(spec) -> Model:
    """The document's model, from what names no local file: a preset, a Hub id, an inline config."""
    if not isinstance(spec, dict):
        raise ValueError(f"report: inputs.model must be an object, got {quote(spec)}")
    unknown = sorted(str(key) for key in spec if key not in _MODEL_KEYS)
    if unknown:
        raise ValueError(f"report: inputs.model has {quote(unknown[0])}, which a report does not write; it has "
                         f"{', '.join(sorted(_MODEL_KEYS))}")
    name = spec.get("name")
    if name is not None and not (isinstance(name, str) and 0 < len(name) <= 200):
        raise ValueError(f"report: inputs.model.name must be a name of at most 200 characters, got {quote(name)}")
    if "preset" in spec:
        if not isinstance(spec["preset"], str) or spec["preset"] not in list_models():
            raise ValueError(f"report: inputs.model.preset {quote(spec['preset'])} is not a kvmem preset "
                             "(kvmem.list_models())")
        return as_model(spec["preset"])
    if "hf_id" in spec:
        if not _is_hub_id(spec["hf_id"]):
            raise ValueError(f"report: inputs.model.hf_id {quote(spec['hf_id'])} is not a Hugging Face id "
                             "(namespace/name); a report never names a local path: pass model= to rerun_report")
        return get_model(spec["hf_id"])     # a preset or the Hub (its cache): never a local folder or file
    if "checkpoint" in spec:                # its config alone would give the formula's weights, not the headers'
        raise ValueError(f"report: inputs.model {quote(name)} was read from a checkpoint's headers in "
                         "local files; pass model= (the same folder or GGUF) to rerun_report")
    if "config" in spec:
        if not isinstance(spec["config"], dict):
            raise ValueError(f"report: inputs.model.config must be the config.json as an object, got "
                             f"{quote(spec['config'])}; a report never names a file: pass model= to rerun_report")
        return Model.from_hf_config(spec["config"], name=name)
    raise ValueError(f"report: inputs.model {quote(name)} has no preset, hf_id or config to re-read; "
                     "pass model= to rerun_report")


def _is_hub_id(value) -> bool:
    if not isinstance(value, str) or value.count("/") != 1 or "--" in value or ".." in value:
        return False
    namespace, repo = value.split("/")
    return all(_HUB_PART.fullmatch(part) for part in (namespace, repo)) and not repo.endswith(".git")


def _gpu_input(gpu: GPU):
    try:
        if get_gpu(gpu.name) == gpu:
            return gpu.name
    except ValueError:
        pass
    return {field: getattr(gpu, field) for field in _GPU_FIELDS if getattr(gpu, field) is not None}


def _gpu_back(spec) -> GPU:
    if isinstance(spec, (str, dict)):
        return get_gpu(spec)
    raise ValueError(f"report: inputs.gpu must be a catalog name or an object, got {quote(spec)}")


def _sources(model: Model, gpu: GPU) -> dict:
    """Where the model's config and published facts, and the GPU's figures, were read."""
    out: dict[str, dict] = {"model": {"name": model.name, "hf_id": model.hf_id, "config": model.source}}
    if {"preset": model.name} == _model_input(model):
        published = preset(model.name).get("published") or {}
        out["model"]["published"] = published
    else:
        out["model"]["config"] = model.source or "given by the user (not a preset)"
    entry = _gpu_entries().get(gpu.name) if _gpu_input(gpu) == gpu.name else None
    out["gpu"] = {"name": gpu.name, "label": gpu.label, "memory_bytes": gpu.memory_bytes,
                  "usable_memory_bytes": gpu.usable_memory_bytes, "usable_memory_source": gpu.usable_memory_source,
                  "bandwidth_bytes_per_s": gpu.bandwidth_bytes_per_s}
    if entry is None:
        out["gpu"]["source"] = "given by the user (not a catalog entry)"
    else:
        out["gpu"].update({key: entry[key] for key in ("memory_source", "cuda_total_memory_source", "spec_source")
                           if entry.get(key)})
    return out


@lru_cache(maxsize=1)
def _gpu_entries() -> dict:
    """kvmem/data/gpus.json as written: each figure's own source (kvmem.gpus keeps the memory's only)."""
    return read_json("gpus.json")

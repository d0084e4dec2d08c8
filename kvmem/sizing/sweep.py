"""The overview: models x GPUs x contexts x engines, one cell per workload (kvmem.sweep).

    sweep(models, gpus, contexts=("8k",), engines=("vllm",)) -> list[SweepCell]

A cell holds what kvmem.fit answers for that model, GPU, context and engine and nothing it
does not need for a matrix: whether ``batch`` (default 1) sequences fit, the most sequences of
``context`` (max_batch), the longest context for the batch (max_context), and the engine's own
concurrency figure (vLLM's "Maximum concurrency", SGLang's and TRT-LLM's pool over one request,
llama.cpp's sequences; kvmem.sizing.numbers). The fewest GPUs, what would fit and the decode
bound are not computed: ask kvmem.fit for the one cell you care about.

The numbers are fit's own: the same set-up, budget and searches (kvmem.sizing.setup, search),
checked cell for cell against kvmem.fit by the tests. What is cached: the engine's estimate of
each (tokens, batch) workload is shared by every GPU and context of the same model, engine, KV
format, parallelism and options (it depends on neither); weights per model and format
(kvmem.sizing.setup.model_weights) and each engine's own layout caches are kvmem's usual ones.
A workload that kvmem or the engine refuses (an engine that does not size the family, tp not
dividing the heads, no parameter count for the weights) is a cell with ``refused`` set to the
refusal's short reason and no number.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..catalog import as_model
from ..defaults import ENGINE
from ..engines import ENGINES, capacity
from ..engines.positions import past_positions
from ..gpus import get_gpu, list_gpus
from ..records import Record
from ..units import parse_tokens
from .numbers import engine_numbers
from .search import answer
from .setup import Setup, make_setup

__all__ = ["SweepCell", "sweep", "short_reason"]


@dataclass(frozen=True)
class SweepCell(Record):
    """One model on one GPU (x num_gpus) at one context under one engine; numbers or a refusal."""

    model: str
    gpu: str
    engine: str
    context: int
    num_gpus: int
    fits: bool | None                 # batch (default 1) sequences of context; None: refused
    max_batch: int | None             # sequences of context that fit (all replicas)
    max_context: int | None           # the longest context for batch (default 1) sequences
    max_concurrency: float | None     # the engine's own figure for context-token requests (None: none)
    kv_memory_bytes: int | None       # the engine's KV budget per device
    refused: str | None = None        # why there is no number (short); None when there are numbers
    refusal: str | None = None        # the refusal's whole message

    @property
    def text(self) -> str:
        """The cell as a matrix shows it: the refusal's reason, or fits / max batch / max context."""
        if self.refused:
            return f"refused: {self.refused}"
        return f"{'fits' if self.fits else 'no'} · batch {self.max_batch:,} · ctx {self.max_context:,}"


def short_reason(message: str, model: str = "") -> str:
    """The gist of a refusal for a matrix cell: its first clause, without the model's name in front,
    at most 60 characters ("tp=8 must divide the model's 28 attention heads" stays whole)."""
    text = re.sub(r"^model '[^']*' ", "", str(message).strip())
    # an engine's refusal of a family (kvmem.engines.check_family): its reason, not the engine's name
    text = re.sub(r"^engine '[^']*'(?: \([^)]*\))?:? (?:does not size model_type '[^']*': )?", "", text)
    if model and text.startswith(f"{model}: "):
        text = text[len(model) + 2:]
    text = re.split(r"; | \(|: (?=[a-z])| — ", text, maxsplit=1)[0].rstrip(".")
    return text if len(text) <= 60 else text[:57].rstrip() + "..."


def sweep(models=None, gpus=None, *, contexts=("8k",), engines=(ENGINE,), num_gpus: int = 1, batch: int | None = None,
          weight_dtype="auto", kv_dtype="auto", gpu_memory_utilization=0.9, **options) -> list[SweepCell]:
    """Every model x GPU x context x engine (module docstring); ``models`` / ``gpus`` None = every
    preset / every catalog GPU. Options are kvmem.fit's, given to every engine that takes them."""
    from ..catalog import list_models

    model_list = [as_model(m) for m in (list_models() if models is None else _listed("models", models))]
    gpu_list = [get_gpu(g) for g in (list_gpus() if gpus is None else _listed("gpus", gpus))]   # bad names raise
    context_list = [parse_tokens(c) for c in _listed("contexts", contexts)]
    engine_list = _listed("engines", engines)
    for name in engine_list:
        if name not in ENGINES:
            from ..sources.bounded import quote
            raise ValueError(f"engines: unknown engine {quote(name)}; kvmem knows: {', '.join(ENGINES)}")
    for option in options:      # one no engine of the sweep takes is refused, never dropped
        if not any(option in _options_for(name, {option: None}) for name in engine_list):
            raise ValueError(f"option {option!r}: none of the engines {', '.join(engine_list)} takes it")
    cells = []
    for model in model_list:
        for engine in engine_list:
            shared: dict = {}          # the engine's estimates: the same on every GPU and at every context
            for context in context_list:
                for gpu in gpu_list:
                    cells.append(_cell(model, gpu, engine, context, shared, num_gpus=num_gpus, batch=batch,
                                       weight_dtype=weight_dtype, kv_dtype=kv_dtype,
                                       gpu_memory_utilization=gpu_memory_utilization, options=options))
    return cells


def _listed(field_name: str, value) -> list:
    """A comma-separated string or a list, as a non-empty list."""
    items = [v.strip() for v in value.split(",")] if isinstance(value, str) else list(value)
    items = [v for v in items if v != ""]
    if not items:
        raise ValueError(f"{field_name}: give at least one, got {value!r}")
    return items


def _cell(model, gpu, engine: str, context: int, shared: dict, *, options: dict, **fit_kwargs) -> SweepCell:
    head = dict(model=model.name, gpu=gpu.name, engine=engine, context=context, num_gpus=fit_kwargs["num_gpus"])
    try:
        opts = _options_for(engine, options)
        rules = ENGINES[engine].sizing
        gmu = fit_kwargs["gpu_memory_utilization"] if rules and rules.takes_utilization else 0.9
        s, _ = make_setup(model, gpu=gpu, tp=None, pp=1, context=context, engine=engine, options=opts,
                          **{**fit_kwargs, "gpu_memory_utilization": gmu})
        key = (s.tp, s.pp, repr(sorted(s.engine_options.items())))
        object.__setattr__(s, "estimates", shared.setdefault(key, {}))  # per-set-up cache, shared across GPUs
        past = past_positions(s.model, ENGINES[engine], context)
        if past and past[1]:                             # the engine would not start (fit's refusal)
            limit = s.model.max_position_embeddings
            return _refused(head, f"past the model's {limit:,} positions", past[1].reason)
        return _numbers(s, head)
    except (ValueError, OverflowError) as exc:
        return _refused(head, short_reason(str(exc), model.name), str(exc))


def _refused(head: dict, reason: str, message: str) -> SweepCell:
    return SweepCell(**head, fits=None, max_batch=None, max_context=None, max_concurrency=None, kv_memory_bytes=None,
                     refused=reason, refusal=message)


def _options_for(engine: str, options: dict) -> dict:
    """The options this engine (or its sizing) takes; the others belong to another engine of the sweep."""
    spec = ENGINES[engine]
    known = set(spec.options) | set(spec.sizing.options if spec.sizing else ())
    return {k: v for k, v in options.items() if k in known}


def _numbers(s: Setup, head: dict) -> SweepCell:
    """kvmem.fit's fits, max_batch, max_context and engine concurrency for one set-up (search.answer, as fit)."""
    found = answer(s)
    budget = found.budget
    cap = None
    exact = s.rules.startup is not None and s.rules.startup.exact   # read off the estimate, not a pool
    if not exact and ENGINES[s.engine].capacity is not None and budget.kv_memory > 0:
        cap = capacity(s.model, engine=s.engine, kv_memory=budget.kv_memory, kv_dtype=s.kv_dtype, tp=s.tp,
                       pp=s.pp, max_model_len=s.context, **s.engine_options)
    numbers = engine_numbers(s, cap, found.work_batch)
    concurrency = numbers.max_concurrency if numbers else None
    return SweepCell(**head, fits=found.fits, max_batch=found.max_batch, max_context=found.max_context,
                     max_concurrency=concurrency, kv_memory_bytes=max(budget.kv_memory, 0))

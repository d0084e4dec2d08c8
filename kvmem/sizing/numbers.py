"""The numbers the engine itself prints for a fit, in its own words (Fit.engine_numbers).

What each engine reports at start-up, as its module declares it (SizingRules.startup,
kvmem.engines.base.StartupNumbers) and computes it: kvmem.capacity for the engines that size a
pool from memory, their estimate for those whose pool is what the settings ask (llama.cpp's -c):

    vllm     "GPU KV cache size: N tokens" and "Maximum concurrency for L tokens per request: X"
             (vllm@v0.33.0 vllm/v1/core/kv_cache_utils.py _report_kv_cache_config: N from
             num_blocks // num_groups x block_size, X = num_blocks / the blocks one request of
             max_model_len needs; kvmem.engines.vllm.pool)
    sglang   max_total_num_tokens (sglang 0.5.23 srt/mem_cache/kv_cache_configurator.py; printed in
             "KV Cache is allocated. ... #tokens: N" and the scheduler's "max_total_num_tokens=N")
    llama.cpp  KV cells: n_ctx padded to 256 ("llama_kv_cache: size = ... (C cells, ...)",
             src/llama-kv-cache.cpp), for -c = context x sequences
    trtllm   max_tokens of the KV cache manager (tensorrt_llm/_torch/pyexecutor/resource_manager.py,
             "[MemUsageChange] Allocated ... for max tokens in paged KV cache (N)")
Concurrency is the requests of ``context`` tokens the pool holds (vLLM's own figure; SGLang and
TRT-LLM: pool tokens / whole pages of one request; llama.cpp: its sequences). Engines with no such
report (transformers) give None.

Exact or estimated: numbers read off the estimate (StartupNumbers.from_estimate: llama.cpp's lines
follow from -c, -np, the cache types and the model alone) are exact. vLLM's, SGLang's and TRT-LLM's
pool is what the device's memory leaves after the weights and a profiling run (activations, CUDA
graphs, non-torch memory) that kvmem estimates: their numbers are estimated (``depends_on`` says on
what); given the memory the engine reports, the tokens follow exactly (kvmem.capacity, kvmem
check-log). vLLM's lines start with the "Available KV cache memory: X GiB" it will print
(vllm@v0.33.0 vllm/v1/worker/gpu_worker.py, format_gib: round(bytes / 2**30, 2)).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..records import Record
from .setup import Setup, setup_estimate


@dataclass(frozen=True)
class EngineNumbers(Record):
    """What the engine prints at start-up for this fit: its token count, its concurrency, its lines."""

    engine: str
    tokens: int                      # the count the engine prints (SizingRules.startup.tokens_label)
    tokens_label: str
    context: int                     # tokens per request the concurrency is for
    max_concurrency: float | None    # requests of ``context`` tokens the pool holds
    lines: tuple[str, ...] = ()      # the lines the engine logs, where kvmem renders them
    exact: bool = False              # follows from the settings alone (else from an estimated memory budget)
    depends_on: str = ""             # what an estimated number depends on

    def to_dict(self) -> dict:
        return {**super().to_dict(), "lines": list(self.lines)}


GIB = 1 << 30


def engine_numbers(s: Setup, capacity, batch: int) -> EngineNumbers | None:
    """What the engine prints for this set-up (its SizingRules.startup; None without one): read off
    its estimate of ``batch`` sequences of the context where the settings alone make its pool
    (exact; None where the engine refuses the workload), else off ``capacity``, its kvmem.capacity
    for the memory budget (estimated; None without one)."""
    startup = s.rules.startup
    if startup is None:
        return None
    if startup.from_estimate is not None:     # exact: the settings alone make its pool
        try:
            estimate = setup_estimate(s, s.context, batch)
        except ValueError:
            return None
        tokens, sequences = startup.from_estimate(estimate)
        return EngineNumbers(engine=s.engine, tokens=tokens, tokens_label=startup.tokens_label, context=s.context,
                             max_concurrency=float(sequences), lines=tuple(estimate.log_lines), exact=True,
                             depends_on=startup.depends_on)
    if capacity is None:
        return None
    lines = tuple(capacity.log_lines)
    if startup.budget_line:
        lines = (startup.budget_line.format(gib=round(capacity.kv_memory / GIB, 2)),) + lines
    return EngineNumbers(engine=s.engine, tokens=capacity.tokens, tokens_label=startup.tokens_label,
                         context=s.context, max_concurrency=capacity.max_concurrency, lines=lines, exact=False,
                         depends_on=startup.depends_on)

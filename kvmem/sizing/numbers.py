"""The numbers the engine itself prints for a fit, in its own words (Fit.engine_numbers).

What each engine reports at start-up, as its module already computes it (kvmem.capacity for the
engines that size a pool from memory, kvmem.estimate for llama.cpp, whose pool is what -c asks):

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
TRT-LLM: pool tokens / whole pages of one request). Engines with no such report (transformers) give None.

Exact or estimated: llama.cpp's lines follow from -c, -np, the cache types and the model alone
(exact). vLLM's, SGLang's and TRT-LLM's pool is what the device's memory leaves after the weights
and a profiling run (activations, CUDA graphs, non-torch memory) that kvmem estimates: their
numbers are estimated (``depends_on`` says on what); given the memory the engine reports, the
tokens follow exactly (kvmem.capacity, kvmem check-log). vLLM's lines start with the
"Available KV cache memory: X GiB" it will print (vllm@v0.33.0 vllm/v1/worker/gpu_worker.py,
format_gib: round(bytes / 2**30, 2)).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..engines import ENGINES
from ..records import Record



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
        data = dict(self.items())
        data["lines"] = list(self.lines)
        return data


GIB = 1 << 30


def from_capacity(engine: str, capacity, context: int) -> EngineNumbers | None:
    """The numbers of an engine that sizes its pool from memory (its SizingRules.startup): estimated."""
    rules = ENGINES[engine].sizing
    startup = rules.startup if rules else None
    if capacity is None or startup is None:
        return None
    lines = tuple(capacity.log_lines)
    if startup.budget_line:
        lines = (startup.budget_line.format(gib=round(capacity.kv_memory / GIB, 2)),) + lines
    return EngineNumbers(engine=engine, tokens=capacity.tokens, tokens_label=startup.tokens_label, context=context,
                         max_concurrency=capacity.max_concurrency, lines=lines, exact=False,
                         depends_on=startup.depends_on)


def from_estimate(estimate, context: int) -> EngineNumbers:
    """llama.cpp: the cells -c makes (all streams), and the lines it prints for them."""
    cells = estimate.details["cells_total"]
    n_seq = estimate.details["n_seq"]
    return EngineNumbers(engine="llama.cpp", tokens=cells, tokens_label="KV cells (n_ctx)", context=context,
                         max_concurrency=float(n_seq), lines=tuple(estimate.log_lines), exact=True,
                         depends_on="-c, -np, the cache types and the model alone")

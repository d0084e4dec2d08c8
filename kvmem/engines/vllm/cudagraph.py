"""vLLM's CUDA-graph capture sizes: the batch sizes (in tokens) it captures a graph for at start-up.

The rule (vLLM 0.33.0, vllm/config/vllm.py#L2398-L2631 VllmConfig._set_cudagraph_sizes), for the default
(no --cudagraph-capture-sizes, no dynamic speculative schedule):
    q = 1 + num_speculative_tokens (uniform_decode_query_len, vllm/config/vllm.py#L695-L712)
    ceiling = min(max_num_seqs x q x 2, 1024 on data-centre Blackwell (SM 10.x) else 512)
    decode sizes: q > 1: n x q for n in 1, 2, 4, 8..248 by 8, 256.. by 16, and min(max_num_seqs, default), within
                  the ceiling; q = 1: [max_num_seqs] when it is within the ceiling
    ceiling = min(max_num_batched_tokens, ceiling)
    sizes = 1, 2, 4 (1..32 with performance_mode "interactivity"), 8..248 by 8, 256..ceiling by 16, within
            the ceiling; + max_num_batched_tokens when within it; + the decode sizes up to max_num_batched_tokens
The memory those graphs take is measured on the GPU at start-up (profile_cudagraph_memory,
vllm/v1/worker/gpu_model_runner.py#L6268; subtracted from the KV budget since v0.21): kvmem keeps the
sizing option cudagraph_bytes (512 MiB, a flat figure, not vLLM's rule) for it. Published lines with their
settings number fewer than five for the v1 engine (docs/research/offload_and_host.md lists them: 0.21 GiB for
Llama-3.2-1B's 35 v0 shapes, vllm#11349; 0.26 and 0.36 GiB estimated, vllm#30515, gpustack/runner#251; 6-28 MiB a
size, vllm#22897), too few and too mixed (v0 and v1, PIECEWISE and FULL, other backends) to check a rule over
the capture sizes against; kvmem.check_log's vLLM reader is where a measured figure can replace it.
"""

from __future__ import annotations

DEFAULT_CEILING = 512            # vllm/config/vllm.py#L2463-L2465
BLACKWELL_CEILING = 1024         # is_device_capability_family(100)


def _request_counts(max_reqs: int, default: int) -> list[int]:
    max_reqs = min(max_reqs, default)
    counts = [n for n in (1, 2, 4) if n <= max_reqs]
    counts += list(range(8, min(max_reqs + 1, 256), 8))
    counts += list(range(256, max_reqs + 1, 16))
    return sorted(set(counts + [max_reqs]))


def capture_sizes(*, max_num_seqs: int, max_num_batched_tokens: int, num_speculative_tokens: int = 0,
                  blackwell: bool = False, performance_mode: str = "balanced") -> list[int]:
    """The token counts vLLM 0.33.0 captures CUDA graphs for (the module docstring), ascending."""
    for name, value in (("max_num_seqs", max_num_seqs), ("max_num_batched_tokens", max_num_batched_tokens)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if performance_mode not in ("balanced", "interactivity", "throughput"):
        raise ValueError(f"performance_mode must be 'balanced', 'interactivity' or 'throughput', "
                         f"got {performance_mode!r}")
    default = BLACKWELL_CEILING if blackwell else DEFAULT_CEILING
    q = 1 + num_speculative_tokens
    ceiling = min(max_num_seqs * q * 2, default)
    if q > 1:
        decode = sorted({n * q for n in _request_counts(max_num_seqs, default) if n * q <= ceiling})
    else:
        decode = [max_num_seqs] if max_num_seqs <= ceiling else []
    ceiling = min(max_num_batched_tokens, ceiling)
    if performance_mode == "interactivity":
        sizes = list(range(1, min(ceiling, 32) + 1))
    else:
        sizes = [n for n in (1, 2, 4) if n <= ceiling]
    if ceiling >= 8:
        sizes += list(range(8, min(ceiling + 1, 256), 8))
    if ceiling >= 256:
        sizes += list(range(256, ceiling + 1, 16))
    if max_num_batched_tokens <= ceiling and max_num_batched_tokens not in sizes:
        sizes.append(max_num_batched_tokens)
    sizes += [n for n in decode if n <= max_num_batched_tokens]
    return sorted(set(sizes))


def capture_log_line(sizes: list[int]) -> str:
    """What vLLM logs before it profiles them: the largest size (gpu_model_runner.py#L6291-L6304; the mode
    names FULL / PIECEWISE and their counts depend on the attention backend, left to the log)."""
    return f"{len(sizes)} capture sizes, largest={sizes[-1]}"

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
The graphs each mode captures (vllm/v1/cudagraph_dispatcher.py#L164-L228 initialize_cudagraph_keys, no LoRA):
    PIECEWISE (the mixed mode): every capture size; FULL (the decode mode, FULL_AND_PIECEWISE or FULL_DECODE_ONLY):
    the sizes x with q <= x <= q x max_num_seqs; the attention backend may lower the mode (its log says so).
The memory those graphs take is MEASURED on the GPU at start-up, not computed (vllm@v0.33.0
vllm/v1/worker/gpu_model_runner.py#L6268-L6414 profile_cudagraph_memory): per mode, the two largest graphs are
captured against a minimal KV cache; estimate = max over modes (first capture) + sum over modes (N - 1) x
max(second capture, 1 MiB), printed "Estimated CUDA graph memory: X GiB total", and subtracted from the KV
budget while VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS is 1, the default since v0.21 (gpu_worker.py#L706-L757;
#L777-L812 prints the equivalent --gpu-memory-utilization). The real capture after the KV pool is allocated
prints "Graph capturing finished in N secs, took X GiB" (gpu_model_runner.py#L6514-L6521) and
"CUDA graph pool memory: A GiB (actual), E GiB (estimated)" (gpu_worker.py#L993-L1012).
Published lines (docs/research/vllm_cudagraph_logs.md, 22 sources) put that estimate anywhere from 0.17 GiB
(a 27B model, tp 4, 7 graphs) to 118.65 GiB (a 2.4T MoE on GB300, vllm#53013), with the same count of graphs
costing 0.44 or 0.52 GiB on two models and the estimate over (vllm#45178: 3.1x fewer KV tokens) or under (vllm#57475:
an OOM at capture) the graphs' real pool: no rule over the capture sizes and the model fits them. So kvmem's
fit charges CUDAGRAPH_BYTES from 0.21 (GRAPHS_IN_BUDGET), a flat figure (sizing option cudagraph_bytes), labelled
CUDAGRAPH_LABEL, and
kvmem.check_log reads the lines above (check_graph_lines): a user's own "Estimated CUDA graph memory" is
checked against the figure the fit used and names the -o cudagraph_bytes that reproduces it.
"""

from __future__ import annotations

import re

from ...logcheck.base import GIB, LineCheck, logged_number, strip_prefix
from ...units import format_bytes
from ..base import byte_option

DEFAULT_CEILING = 512            # vllm/config/vllm.py#L2463-L2465
BLACKWELL_CEILING = 1024         # is_device_capability_family(100)
CUDAGRAPH_BYTES = 512 << 20      # kvmem's flat figure for vLLM's graph estimate (module docstring)
# The release from which the estimate is subtracted by default: vLLM 0.33.0 logs "CUDA graph memory profiling is
# enabled (default since v0.21.0)" (vllm/v1/worker/gpu_worker.py#L786-L795); before it the variable was opt-in
# (PR #30515) and the graphs were captured in the memory gpu_memory_utilization leaves, outside the KV budget
GRAPHS_IN_BUDGET = (0, 21)
CUDAGRAPH_LABEL = ("CUDA graphs: a flat 512 MiB by default (sizing option cudagraph_bytes), not vLLM's figure: vLLM "
                   "measures its graphs at start-up (published estimates 0.17-118.65 GiB, "
                   "docs/research/vllm_cudagraph_logs.md); its log's 'Estimated CUDA graph memory' is the number to "
                   "give, and kvmem check-log reads it")
MODES = ("FULL_AND_PIECEWISE", "PIECEWISE", "FULL_DECODE_ONLY")
HALF_CENT = GIB // 200           # a GiB printed to two decimals: +-0.005 GiB


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


def graph_note(cudagraph_bytes: int) -> str:
    """How the fit's CUDA-graph term was come by, for its notes (kvmem.engines.vllm.budget)."""
    if cudagraph_bytes == CUDAGRAPH_BYTES:
        return CUDAGRAPH_LABEL
    return (f"CUDA graphs: {format_bytes(cudagraph_bytes)} as given (cudagraph_bytes; vLLM's own figure is its log's "
            "'Estimated CUDA graph memory')")


def graph_counts(sizes: list[int], *, max_num_seqs: int, num_speculative_tokens: int = 0,
                 mode: str = "FULL_AND_PIECEWISE") -> dict:
    """The graphs vLLM 0.33.0 captures per runtime mode, as its log prints them: mode -> (count, largest)
    (vllm/v1/cudagraph_dispatcher.py#L164-L228; a mode with no graph is left out, as the log leaves it)."""
    if mode not in MODES:
        raise ValueError(f"cudagraph mode must be one of {', '.join(MODES)}, got {mode!r}")
    q = 1 + num_speculative_tokens
    out = {}
    if mode != "FULL_DECODE_ONLY" and sizes:
        out["PIECEWISE"] = (len(sizes), max(sizes))
    decode = [x for x in sizes if q <= x <= q * max_num_seqs]
    if mode != "PIECEWISE" and decode:
        out["FULL"] = (len(decode), max(decode))
    return out


def vllm_graph_estimate(samples: dict) -> int:
    """vLLM 0.33.0's estimate from its own GPU samples: ``samples`` mode -> (graphs, first capture bytes,
    second capture bytes); max of the first captures + sum of (graphs - 1) x max(second, 1 MiB)
    (gpu_model_runner.py#L6328-L6408). kvmem has no samples of its own: this states what the log's number is."""
    if not samples:
        return 0
    shared = max(first for _, first, _ in samples.values())
    return shared + sum((n - 1) * max(second, 1 << 20) for n, _, second in samples.values())


# The lines vLLM prints about its graphs (module docstring); each pattern starts with a literal and repeats only
# a character class a separator ends (one pass over a line, however long)
PROFILE = "Profiling CUDA graph memory: "
PROFILE_MODE = re.compile(r"([A-Z_]+)=([0-9]+) \(largest=([0-9]+)\)")
ESTIMATE = re.compile(r"Estimated CUDA graph memory: *([0-9.]+) *GiB total")
TOOK = re.compile(r"Graph capturing finished in +[0-9]+ +secs, took +(-?)([0-9.]+) *GiB")
POOL = re.compile(r"CUDA graph pool memory: *(-?)([0-9.]+) GiB \(actual\), *(-?)([0-9.]+) GiB \(estimated\)")
EQUIVALENT = re.compile(r"current --gpu-memory-utilization=([0-9.]+) is equivalent to "
                        r"--gpu-memory-utilization=([0-9.]+)")
DISABLED = "CUDA graph memory profiling is disabled"
OPT_IN = "To try it now, set VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1"      # releases before 0.21, estimate not used


def _signed(sign: str, digits: str, n: int, line: str) -> float:
    value = logged_number(digits, n, line, float)
    return -value if sign else value


def read_graph_lines(lines: list[str]) -> dict:
    """The first of each graph line (module docstring) with its numbers, keyed "graph_*"."""
    found: dict[str, tuple] = {}
    for n, line in enumerate(lines, 1):
        if "graph_profile" not in found and (at := line.find(PROFILE)) >= 0:
            modes = {m.group(1): (logged_number(m.group(2), n, line), logged_number(m.group(3), n, line))
                     for m in PROFILE_MODE.finditer(line, at + len(PROFILE))}
            if modes:
                found["graph_profile"] = (n, strip_prefix(line, "Profiling CUDA"), modes)
        if "graph_estimate" not in found and (m := ESTIMATE.search(line)):
            found["graph_estimate"] = (n, strip_prefix(line, "Estimated CUDA"),
                                       logged_number(m.group(1), n, line, float), m.group(1))
        if "graph_disabled" not in found and (DISABLED in line or OPT_IN in line):
            found["graph_disabled"] = (n, strip_prefix(line, DISABLED if DISABLED in line else "In v0."))
        if "graph_equivalent" not in found and (m := EQUIVALENT.search(line)):
            found["graph_equivalent"] = (n, logged_number(m.group(1), n, line, float),
                                         logged_number(m.group(2), n, line, float))
        if "graph_took" not in found and (m := TOOK.search(line)):
            found["graph_took"] = (n, strip_prefix(line, "Graph capturing"), _signed(m.group(1), m.group(2), n, line))
        if "graph_pool" not in found and (m := POOL.search(line)):
            found["graph_pool"] = (n, strip_prefix(line, "CUDA graph pool"), _signed(m.group(1), m.group(2), n, line),
                                   _signed(m.group(3), m.group(4), n, line), m.group(4))
    return found


def check_graph_lines(found: dict, *, cudagraph_bytes, settings: dict, checks: list, notes: list,
                      max_num_seqs=None, max_num_batched_tokens=None, num_speculative_tokens: int = 0) -> None:
    """The graph lines of a vLLM log against kvmem: the estimate vLLM subtracted against the figure kvmem's fit
    charges (``cudagraph_bytes`` given, else CUDAGRAPH_BYTES), the graphs per mode against graph_counts where
    max_num_seqs and max_num_batched_tokens are known; the real capture is reported beside the estimate."""
    given = cudagraph_bytes is not None
    ours = byte_option("cudagraph_bytes", cudagraph_bytes) if given else CUDAGRAPH_BYTES
    where = "cudagraph_bytes given" if given else "kvmem's flat default, not a measurement"
    if "graph_profile" in found:
        _check_profile(found["graph_profile"], settings, checks, max_num_seqs, max_num_batched_tokens,
                       num_speculative_tokens)
    estimate = found.get("graph_estimate")
    if estimate is None and "graph_pool" in found:            # the model runner V2 prints it here only
        n, text, _, gib, digits = found["graph_pool"]
        estimate = (n, text, gib, digits)
    if "graph_disabled" in found:
        n, text = found["graph_disabled"]
        settings["cudagraph_subtracted_bytes"] = 0
        cause = "" if ours == 0 else (
            "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS is off (0, or a release before 0.21 where it was opt-in): vLLM "
            "subtracts no graph memory from the KV budget (gpu_worker.py#L720-L757): give -o cudagraph_bytes=0 to "
            "plan as it ran")
        checks.append(LineCheck(n, text, "CUDA graph memory subtracted", "0 (profiling disabled)",
                                f"{format_bytes(ours)} ({where})", ours == 0, cause))
    elif estimate is not None:
        n, text, gib, digits = estimate
        logged = round(gib * GIB)
        settings["cudagraph_estimate_gib"] = gib
        ok = abs(logged - ours) <= HALF_CENT
        cause = "" if ok else (
            f"vLLM measured its graphs at {digits} GiB and subtracted that from the KV budget; kvmem's fit charged "
            f"{format_bytes(ours)} ({where}): give -o cudagraph_bytes={logged} ({digits} GiB) to plan with this log's "
            "figure")
        checks.append(LineCheck(n, text, "CUDA graph memory (vLLM's estimate, subtracted)", f"{digits} GiB",
                                f"{ours / GIB:.2f} GiB ({where})", ok, cause))
    if "graph_equivalent" in found:
        n, current, equivalent = found["graph_equivalent"]
        settings["cudagraph_utilization_delta"] = round(current - equivalent, 4)
    took = found.get("graph_took") or (found["graph_pool"][:3] if "graph_pool" in found else None)
    if took is not None:
        n, _, actual = took
        settings["cudagraph_captured_gib"] = actual
        if estimate is not None and "graph_disabled" not in found:
            diff = actual - estimate[2]
            if diff > 0.005:
                notes.append(f"line {n}: the graphs took {actual:.2f} GiB, {diff:.2f} GiB above the {estimate[3]} GiB "
                             "vLLM subtracted: the KV pool was sized that much too large (an OOM at capture is this "
                             "case: vllm#57475)")
            elif diff < -0.005:
                notes.append(f"line {n}: the graphs took {actual:.2f} GiB, {-diff:.2f} GiB below the {estimate[3]} GiB "
                             "vLLM subtracted: its two-sample extrapolation reserved KV memory no graph used "
                             "(vllm#45178)")


def _check_profile(logged, settings: dict, checks: list, max_num_seqs, max_num_batched_tokens, spec: int) -> None:
    n, text, modes = logged
    settings["cudagraph_graphs"] = {mode: count for mode, (count, _) in modes.items()}
    if max_num_seqs is None or max_num_batched_tokens is None:
        return
    mode = {frozenset({"PIECEWISE", "FULL"}): "FULL_AND_PIECEWISE", frozenset({"PIECEWISE"}): "PIECEWISE",
            frozenset({"FULL"}): "FULL_DECODE_ONLY"}.get(frozenset(modes))
    if mode is None:
        return
    shown = ", ".join(f"{m}={c} (largest={big})" for m, (c, big) in modes.items())
    expected = {}
    for blackwell in (False, True):
        sizes = capture_sizes(max_num_seqs=int(max_num_seqs), max_num_batched_tokens=int(max_num_batched_tokens),
                              num_speculative_tokens=spec, blackwell=blackwell)
        expected[blackwell] = graph_counts(sizes, max_num_seqs=int(max_num_seqs), num_speculative_tokens=spec,
                                           mode=mode)
    ok = modes in expected.values()
    ours = ", ".join(f"{m}={c} (largest={big})" for m, (c, big) in expected[False].items())
    if expected[True] != expected[False]:
        ours += " (Blackwell: " + ", ".join(f"{m}={c} (largest={big})" for m, (c, big) in expected[True].items()) + ")"
    cause = "" if ok else (
        f"other graphs than max_num_seqs={max_num_seqs}, max_num_batched_tokens={max_num_batched_tokens} give: "
        "--cudagraph-capture-sizes / max_cudagraph_capture_size set, speculative decoding (num_speculative_tokens), "
        "LoRA, or a Mamba hybrid's sizes capped to its cache blocks")
    checks.append(LineCheck(n, text, "CUDA graphs captured", shown, ours, ok, cause))

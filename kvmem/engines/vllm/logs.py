"""vLLM's startup lines, checked (V1: vllm/v1/worker/gpu_worker.py, vllm/v1/core/kv_cache_utils.py).

Settings, read from the log (``printed``): the engine's config line
(vllm@v0.33.0 vllm/v1/engine/core.py#L139-L143 "Initializing a V1 LLM engine (v0.33.0) with config: model=...,
max_seq_len=..., tensor_parallel_size=..., pipeline_parallel_size=..., quantization=...,
kv_cache_dtype=..., enable_prefix_caching=...", VllmConfig.__str__ in vllm/config/vllm.py#L2809-L2844;
"Initializing an LLM engine (v...)" is the v0 engine) and the API server's "non-default args: {...}"
(vllm/entrypoints/common/startup.py#L96: block_size, max_num_batched_tokens and the rest as given).

    "Model loading took X GiB [memory] and S seconds"   the weights per GPU (V0: "Loading model weights
                                           took X GB", GB meaning GiB); checked against the weights kvmem.fit
                                           budgets (kvmem.weights per device + the engine's weights_extra)
    "Available KV cache memory: X GiB"    the budget (printed to 0.01 GiB: a range of +-0.005 GiB)
    "GPU KV cache size: N tokens"          (from v0.8; one line with the next from PR #50462, 2026-07-30)
    "Maximum concurrency for L tokens per request: C x"   L is max_model_len; C checked over the budget's
                                           range with the tokens (kvmem.capacity's max_concurrency)
Tokens logged without the memory: kvmem.capacity is searched over the memory for a pool of exactly
those tokens (none: a block size or setting differs), and C is checked over the memories that give it.
V0 (vllm/worker/worker.py): "Memory profiling results: ... kv_cache_size=X GiB ..." and
    "# GPU blocks: B, # CPU blocks: M" (the blocks checked over the budget's range, version "v0")
The CUDA-graph lines ("Profiling CUDA graph memory", "Estimated CUDA graph memory: X GiB total", "Graph capturing
finished in N secs, took X GiB", ...): kvmem.engines.vllm.cudagraph.check_graph_lines.
With the budget and N, kvmem's capacity over the budget's range must hold N tokens. A budget below
the plan's (``expected_kv_memory``) is the activation peak, non-torch memory or CUDA graphs above
kvmem's estimate: that part is estimated, not exact. Fewer tokens than kvmem finds for the memory
mean a setting differs (KV dtype, block size, tp, a draft model, the hybrid manager); more mean a
smaller KV format or fewer layers per rank than given.
"""

from __future__ import annotations

import re

from ...logcheck.base import GIB, LineCheck, logged_number, strip_prefix
from ...logcheck.printed import after, read_fields
from ...units import format_bytes
from .. import ENGINES, capacity
from ..serving import LogReader
from .cudagraph import check_graph_lines, read_graph_lines

# Each pattern starts with a literal and repeats only a character class a separator ends: one pass
# over a line, however long (no ".*" between two parts, no nested repetition).
AVAILABLE = re.compile(r"Available KV cache memory: *([0-9.]+) *GiB")
TOKENS = re.compile(r"(?:GPU )?KV cache size: *([0-9,]+) +tokens")
CONCURRENCY = re.compile(r"Maximum concurrency for +([0-9,]+) +tokens per request: *([0-9.]+) *x")
V0_MARKER = "Memory profiling results: "
V0_MEMORY = re.compile(r"kv_cache_size= *([0-9.]+) *GiB")      # searched after the first V0_MARKER only
V0_BLOCKS = re.compile(r"(?:# )?GPU blocks: (\d+)")
# V1 "Model loading took X GiB", V0 "Loading model weights took X GB" (GiB), V0's profile "model weights take XGiB;"
WEIGHTS = re.compile(r"(?:Model loading took|Loading model weights took|model weights take) +([0-9.]+) *(GiB|GB)")
HALF_CENT = GIB // 200            # the printed GiB's rounding: 0.005 GiB
# the native CPU offload tier's region (vllm@v0.33.0 vllm/v1/kv_offload/cpu/shared_offload_region.py#L177-L181,
# GB = 1e9 B): kvmem.engines.vllm.offload.native_tier's host_bytes_per_node
OFFLOAD = re.compile(r"Created mmap file +[^\s]+ +\(([0-9.]+) GB\)")

# The settings the log prints (log field -> kvmem name): the config line, then "non-default args"
CONFIG_MARKER = "with config: "
CONFIG_FIELDS = {"model": "model", "max_seq_len": "max_model_len", "tensor_parallel_size": "tp",
                 "pipeline_parallel_size": "pp", "kv_cache_dtype": "kv_dtype",
                 "enable_prefix_caching": "enable_prefix_caching", "quantization": "quantization"}
ARGS_MARKER = "non-default args: "
ARGS_FIELDS = {"model": "model", "max_model_len": "max_model_len", "tensor_parallel_size": "tp",
               "pipeline_parallel_size": "pp", "kv_cache_dtype": "kv_dtype", "block_size": "block_size",
               "enable_prefix_caching": "enable_prefix_caching", "max_num_batched_tokens": "max_num_batched_tokens",
               "max_num_seqs": "max_num_seqs", "gpu_memory_utilization": "gpu_memory_utilization",
               "quantization": "quantization", "kv_offloading_size": "kv_offloading_size"}
# vLLM's --quantization names that are kvmem weight formats under another name
QUANTIZATION = {"awq_marlin": "awq", "gptq_marlin": "gptq", "modelopt_fp4": "nvfp4"}


def printed(lines: list[str]) -> dict:
    """The settings the log states: kvmem name -> (value, line number); the first of each wins."""
    found: dict = {}
    for n, line in enumerate(lines, 1):
        if (at := line.find(CONFIG_MARKER)) >= 0:
            read_fields(line, n, at, CONFIG_FIELDS, found)
            release = after(line, "LLM engine (v", ")")
            if "version" not in found and release:
                # "an LLM engine": the v0 engine (vllm/engine/llm_engine.py); "a V1 LLM engine": that release
                found["version"] = ("v0" if "an LLM engine (v" in line else release, n)
        if (at := line.find(ARGS_MARKER)) >= 0:
            read_fields(line, n, at, ARGS_FIELDS, found)
    return found


def read(lines: list[str]) -> dict:
    """The first of each line kvmem reads, with its numbers (a number no server prints: refused naming the line)."""
    found: dict = {}
    for n, line in enumerate(lines, 1):
        if "available" not in found and (m := AVAILABLE.search(line)):
            found["available"] = (n, strip_prefix(line, "Available"), logged_number(m.group(1), n, line, float))
        if "tokens" not in found and (m := TOKENS.search(line)):
            found["tokens"] = (n, strip_prefix(line, "GPU KV" if "GPU KV" in line else "KV cache"),
                               logged_number(m.group(1), n, line))
        if "v0_memory" not in found and (at := line.find(V0_MARKER)) >= 0 and \
                (m := V0_MEMORY.search(line, at + len(V0_MARKER))):
            found["v0_memory"] = (n, strip_prefix(line, "Memory profiling"), logged_number(m.group(1), n, line, float))
        if "v0_blocks" not in found and (m := V0_BLOCKS.search(line)):
            found["v0_blocks"] = (n, strip_prefix(line, m.group(0)[:3]), logged_number(m.group(1), n, line))
        if "concurrency" not in found and (m := CONCURRENCY.search(line)):
            found["concurrency"] = (n, strip_prefix(line, "Maximum"), logged_number(m.group(1), n, line),
                                    logged_number(m.group(2), n, line, float), m.group(2))
        if "offload" not in found and (m := OFFLOAD.search(line)):
            found["offload"] = (n, strip_prefix(line, "Created mmap"), logged_number(m.group(1), n, line, float),
                                m.group(1))
        if "weights" not in found and (m := WEIGHTS.search(line)):
            found["weights"] = (n, strip_prefix(line, m.group(0)[:5]), logged_number(m.group(1), n, line, float),
                                m.group(1), m.group(2))
    found.update(read_graph_lines(lines))
    return found


def check(model, found: dict, *, kv_dtype, tp: int, pp: int, expected_kv_memory: int | None = None,
          info: dict | None = None, **options) -> tuple[dict, list[LineCheck], list[str]]:
    settings: dict
    checks: list[LineCheck]
    notes: list[str]
    settings, checks, notes = {}, [], []
    info = info or {}
    offloading = options.pop("kv_offloading_size", None)
    graphs = options.pop("cudagraph_bytes", None)
    length = found["concurrency"][2] if "concurrency" in found else options.pop("max_model_len", None)
    options.pop("max_model_len", None)
    if length:
        settings["max_model_len"] = length
    if "weights" in found:
        _check_weights(model, found["weights"], tp, pp, info, checks, notes)
    if "available" in found:
        n, text, gib = found["available"]
        settings["available_kv_cache_memory_gib"] = gib
        if expected_kv_memory is not None:
            logged = round(gib * GIB)
            ok = abs(logged - expected_kv_memory) <= HALF_CENT
            diff = logged - expected_kv_memory
            cause = "" if ok else (
                f"Available KV cache memory is {format_bytes(abs(diff))} {'below' if diff < 0 else 'above'} the "
                "plan: the profile run's peak (activations, CUDA graphs, non-torch memory) was "
                f"{'higher' if diff < 0 else 'lower'} than kvmem estimated, or the weights differ")
            checks.append(LineCheck(n, text, "Available KV cache memory", f"{gib:.2f} GiB",
                                    f"{expected_kv_memory / GIB:.2f} GiB (the plan)", ok, cause))
    if "tokens" in found and "available" in found and length:
        n, text, tokens = found["tokens"]
        gib = found["available"][2]
        settings["gpu_kv_cache_tokens"] = tokens
        low, high = _bracket(gib, model, kv_dtype, tp, pp, length, options)
        lo, hi = low.tokens, high.tokens
        shown = f"{lo:,}" if lo == hi else f"{lo:,} to {hi:,}"
        ok = lo <= tokens <= hi
        cause = "" if ok else (
            "fewer tokens than kvmem finds for this memory: a setting differs from the ones given (KV dtype, "
            "block size, tp/pp, a draft model, the hybrid KV cache manager, prefix caching for a Mamba hybrid), "
            "or the memory printed is another rank's" if tokens < lo else
            "more tokens than kvmem finds for this memory: a smaller KV format or fewer layers per rank than given "
            "(KV dtype, tp/pp), or a window kvmem counts at full length")
        checks.append(LineCheck(n, text, "GPU KV cache size", f"{tokens:,} tokens", f"{shown} tokens", ok, cause))
        if "concurrency" in found:
            _check_concurrency(found["concurrency"], low, high, checks)
    elif "v0_blocks" in found and "v0_memory" in found and length:
        n, text, blocks = found["v0_blocks"]
        gib = found["v0_memory"][2]
        settings.update(kv_cache_size_gib=gib, num_gpu_blocks=blocks)
        low, high = _bracket(gib, model, kv_dtype, tp, pp, length, {**options, "version": "v0"})
        lo, hi = low.blocks, high.blocks
        shown = f"{lo:,}" if lo == hi else f"{lo:,} to {hi:,}"
        ok = lo <= blocks <= hi
        cause = "" if ok else (
            "fewer blocks than kvmem finds for this memory: a setting differs (KV dtype, block size, tp/pp)"
            if blocks < lo else "more blocks than kvmem finds: a smaller KV format or fewer layers per rank than given")
        checks.append(LineCheck(n, text, "# GPU blocks (v0)", f"{blocks:,}", shown, ok, cause))
        if "concurrency" in found:
            _check_concurrency(found["concurrency"], low, high, checks)
    elif "tokens" in found and length:
        _check_without_memory(found, model, kv_dtype, tp, pp, length, options, settings, checks)
    elif "tokens" in found:
        notes.append("GPU KV cache size is logged without max_model_len: nothing to compare it with")
    if any(key.startswith("graph_") for key in found):
        check_graph_lines(found, cudagraph_bytes=graphs, settings=settings, checks=checks, notes=notes,
                          max_num_seqs=info.get("max_num_seqs"),
                          max_num_batched_tokens=options.get("max_num_batched_tokens",
                                                             info.get("max_num_batched_tokens")))
    if "offload" in found:
        _check_offload(found["offload"], model, offloading, kv_dtype, tp, pp, length, options, checks, notes)
    return settings, checks, notes


def _check_offload(logged, model, size, kv_dtype, tp: int, pp: int, length, options: dict, checks: list,
                   notes: list) -> None:
    """The CPU offload region's GB against kvmem.engines.vllm.offload.native_tier for --kv-offloading-size."""
    n, text, gb, shown = logged
    if size is None:
        notes.append(f"the CPU offload region ({shown} GB) is logged without --kv-offloading-size: give "
                     "-o kv_offloading_size=GiB to check it")
        return
    from .offload import native_tier
    tier = native_tier(model, kv_offloading_size=float(size), max_model_len=length or 1, tp=tp, pp=pp,
                       kv_dtype=kv_dtype, **options)
    ours = f"{tier.host_bytes_per_node / 1e9:.2f}"
    ok = ours == f"{gb:.2f}"
    cause = "" if ok else ("a region of another size: the KV layout per rank differs from the one given (KV dtype, "
                           "tp/pp, block size), or blocks_per_chunk was set")
    checks.append(LineCheck(n, text, "CPU offload region", f"{shown} GB",
                            f"{ours} GB ({tier.chunks:,} chunks of {tier.chunk_bytes:,} B)", ok, cause))


def _check_without_memory(found: dict, model, kv_dtype, tp: int, pp: int, length: int, options: dict,
                          settings: dict, checks: list) -> None:
    """Tokens logged without the memory: the pools kvmem.capacity builds for every memory are searched for
    one of exactly those tokens (a pool holds whole blocks of every group), and the concurrency is checked
    over the memories that give it."""
    n, text, tokens = found["tokens"]
    settings["gpu_kv_cache_tokens"] = tokens

    def at(memory: int):
        try:
            return capacity(model, engine="vllm", kv_memory=memory, kv_dtype=kv_dtype, tp=tp, pp=pp,
                            max_model_len=length, **options)
        except ValueError:             # too little memory for one block
            return None

    def held(memory: int) -> int:
        cap = at(memory)
        return cap.tokens if cap is not None else 0

    low = _search(lambda m: held(m) >= tokens)                  # the least memory that holds the tokens
    high = _search(lambda m: held(m) > tokens) - 1              # the most memory that holds no more
    nearest = held(low)
    ok = nearest == tokens
    cause = "" if ok else (
        f"no pool kvmem builds for these settings holds exactly {tokens:,} tokens (the nearest: {nearest:,}): the "
        "block size (another attention backend's, e.g. on ROCm), the KV dtype, tp/pp or the layers differ")
    checks.append(LineCheck(n, text, "GPU KV cache size (memory not logged)", f"{tokens:,} tokens",
                            f"{nearest:,} tokens", ok, cause))
    if ok and "concurrency" in found:
        _check_concurrency(found["concurrency"], at(low), at(high), checks)


def _search(holds, limit: int = 1 << 50) -> int:
    """The least memory (bytes) for which ``holds`` is true (monotone in memory), or ``limit``."""
    lo, hi = 1, limit
    while lo < hi:
        mid = (lo + hi) // 2
        if holds(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def _check_concurrency(concurrency, low, high, checks: list) -> None:
    """vLLM's "Maximum concurrency ... C x" (printed %.2f) against kvmem.capacity's over the budget's range."""
    n, text, _, logged, shown = concurrency
    lo, hi = (f"{c.max_concurrency:.2f}" for c in (low, high))
    ok = float(lo) <= logged <= float(hi)
    cause = "" if ok else (
        f"{'fewer' if logged < float(lo) else 'more'} requests than kvmem's pool holds for this memory: the "
        "blocks one request needs differ (max_model_len, block size, a sliding window, max_num_batched_tokens) "
        "or the pool does")
    checks.append(LineCheck(n, text, "Maximum concurrency", f"{shown}x", f"{lo}x" if lo == hi else f"{lo}x to {hi}x",
                            ok, cause))


def _weight_dtype(model, info: dict) -> tuple[str | None, str]:
    """The weight format vLLM loaded, and where it comes from: given (weight_dtype), else the checkpoint's
    own (kvmem.weights' "auto") or the log's quantization=; None where kvmem has no format for it."""
    if info.get("weight_dtype") is not None:
        return info["weight_dtype"], "given"
    if "quantization" not in info:
        return "auto", "the checkpoint's own format: the log prints no quantization="
    quantization = info["quantization"]
    if quantization is None:
        return "auto", "the checkpoint's own format, as the log's quantization=None says"
    from ...weights import resolve_weight_dtype, weight_formats  # at a check: an estimate needs none
    own, _ = resolve_weight_dtype(model, "auto")
    if own not in ("fp32", "bf16", "fp16"):
        return "auto", f"the checkpoint's own {own}, as the log's quantization={quantization} says"
    name = QUANTIZATION.get(quantization, quantization)
    if name in weight_formats():
        return name, f"the log's quantization={quantization}"
    return None, f"the log's quantization={quantization}, which kvmem has no weight format for"


def _check_weights(model, logged, tp: int, pp: int, info: dict, checks: list, notes: list) -> None:
    """The weights line against the weights kvmem.fit budgets per GPU (kvmem.sizing.setup.budget_for:
    kvmem.weights per device, whole K/V heads on every rank, plus the engine's weights_extra)."""
    n, text, gib, digits, unit = logged
    dtype, source = _weight_dtype(model, info)
    if dtype is None:
        notes.append(f"line {n}: the weights are not checked: {source}")
        return
    rules = ENGINES["vllm"].sizing
    from ...weights import weights
    held = weights(model, dtype)
    extra, _ = rules.weights_extra(model)  # type: ignore[union-attr,misc]  # vLLM's SizingRules set weights_extra
    ours = held.per_device(tp=tp, pp=pp, replicated=rules.replicates_kv_weights) + extra  # type: ignore[union-attr]  # vLLM has rules
    places = len(digits.partition(".")[2])
    shown = f"{ours / GIB:.{places}f}"
    ok = float(shown) == gib
    cause = "" if ok else " ".join((
        f"the weights per GPU differ from kvmem's {held.weight_dtype} ({source}) under tp={tp}, pp={pp}:",
        "another quantization, dtype or checkpoint than the model given, or memory the kernels keep beside it",
        *rules.weight_notes(held.weight_dtype)))  # type: ignore[union-attr,misc]  # vLLM's rules set weight_notes
    checks.append(LineCheck(n, text, "Model loading (weights)", f"{digits} {unit}", f"{shown} GiB", ok, cause))


def _bracket(gib: float, model, kv_dtype, tp: int, pp: int, length: int, options: dict):
    """kvmem.capacity at the low and high ends of the memory a log prints to two decimals of a GiB:
    every value that rounds to it lies within half a hundredth either side."""
    centre = round(gib * GIB)
    return tuple(capacity(model, engine="vllm", kv_memory=m, kv_dtype=kv_dtype, tp=tp, pp=pp, max_model_len=length,
                          **options) for m in (centre - HALF_CENT, centre + HALF_CENT))


def claims(found: dict) -> bool:
    return bool(found)


# The launch command above a log (kvmem.logcheck.command): vLLM's arguments (vllm/engine/arg_utils.py EngineArgs)
RUNS = ("vllm serve ", "vllm.entrypoints.openai.api_server")
COMMAND_FLAGS = {"--model": "model", "--tensor-parallel-size": "tp", "-tp": "tp", "--pipeline-parallel-size": "pp",
                 "-pp": "pp", "--kv-cache-dtype": "kv_dtype", "--max-model-len": "max_model_len",
                 "--block-size": "block_size", "--max-num-batched-tokens": "max_num_batched_tokens",
                 "--max-num-seqs": "max_num_seqs", "--quantization": "quantization", "-q": "quantization",
                 "--gpu-memory-utilization": "gpu_memory_utilization", "--kv-offloading-size": "kv_offloading_size"}
COMMAND_SWITCHES = {"--enable-prefix-caching": ("enable_prefix_caching", True),
                    "--no-enable-prefix-caching": ("enable_prefix_caching", False)}
# its lines ("KV cache size: N tokens", "Model loading took") are the most generic: it claims a log no other reader does
READER = LogReader(read, claims, printed, check, "vLLM's 'Available KV cache memory' / 'GPU KV cache size'",
                   check_options=("max_model_len", "kv_offloading_size", "cudagraph_bytes"), runs=RUNS,
                   command_flags=COMMAND_FLAGS, command_switches=COMMAND_SWITCHES, positional_model=True, generic=True)

"""SGLang's startup lines, checked (srt/mem_cache/memory_pool.py; kvmem.engines.sglang).

    "KV Cache is allocated. [dtype: D, ]#tokens: N, K size: X GB, V size: Y GB"  (or "KV size" for MLA)
    "KV Cache is allocated. K size: X GB, V size: Y GB."  (builds before about Feb 2025: #tokens from the
                                                           scheduler's "max_total_num_tokens=N")
    "Mamba Cache is allocated. max_mamba_cache_size: S, conv_state size: A GB, ssm_state size: B GB"
    "max_total_num_tokens=N, chunked_prefill_size=..., max_prefill_tokens=..., max_running_requests=R,
     context_len=C, available_gpu_mem=X GB"     (srt/managers/scheduler.py#L1268-L1276)
Given the #tokens (and the slots) the log states, kvmem's pools must print the same line: the
sizes follow from the settings alone (exact), compared field by field whatever the spacing (a line
copied by hand as "conv_state size: 0.00 GB" reads as SGLang's "0.00GB"). A "dtype:" field dates the
release (from 0.5.13). Different K/V sizes mean other bytes per token: the KV dtype
(--kv-cache-dtype), the heads per rank (--tp-size) or the layers per rank (--pp-size) differ from
those given. R is checked against SGLang's resolve_max_num_reqs (kvmem.engines.sglang.mamba.
max_running_requests, from N, C and the state slots) on scheduler lines that print available_gpu_mem
(builds from mid-2025); the earlier line printed the request pool's size (2049 in the Jan and Mar 2025
logs of docs/research/engine_logs_serving.json), a rule kvmem does not model, so it is not checked there.

Under data-parallel attention every attention group prints its own lines, for attn_tp = tp // attn_dp_size
and its share of --max-running-requests; the settings' attn_dp_size (or the deprecated "dp_size=N,
enable_dp_attention=True"), ep_size, ep_num_redundant_experts and nnodes are read too.

The multimodal reservation ("Reserving X GB of the KV budget for post-sizing multimodal allocations"):
kvmem.engines.sglang.encoder. The CUDA-graph capture, weight-load and pool lines ("Capture ... graph end. ...
mem usage=Y GB", "Load weight begin/end", "Memory pool end"): kvmem.engines.sglang.cudagraph, the graphs against
the reserve beside the pool.

Settings, read from the log (``printed``): "server_args=ServerArgs(model_path=..., tp_size=..., ...)"
(0.5.x: "server_args={'model_path': ..., ...}", sglang@v0.5.23 python/sglang/srt/entrypoints/engine.py#L311).
"""

from __future__ import annotations

import re

from ...layer import LINEAR
from ...logcheck.base import GIB, LineCheck, logged_number, strip_prefix
from ...logcheck.printed import field, read_fields, value_of
from ..serving import LogReader
from . import draft as spec_draft
from . import mamba
from .cudagraph import check_graph_lines, read_graph_lines
from .encoder import check_reserve_line, read_reserve_line
from .own_configs import sglang_model
from .parallel import kv_groups, kv_tp
from .pools import DEFAULTS, make_layout, state_parts_of
from .pools import pools as make_pools

# Each pattern starts with a literal and repeats only a character class a separator ends (linear in a line).
KV_LINE = re.compile(r"KV Cache is allocated\. +(dtype: *([^\s,]+), +)?#tokens: *(\d+) *,")
LEGACY_LINE = re.compile(r"KV Cache is allocated\. +K size: *[0-9.]+ *GB, +V size: *[0-9.]+ *GB\.")   # before ~Feb 2025
TOTAL = re.compile(r"max_total_num_tokens=(\d+)")
MAMBA_LINE = re.compile(r"Mamba Cache is allocated\. +max_mamba_cache_size: *(\d+) *,")
# the HiCache host pool (sglang@v0.5.23 python/sglang/srt/mem_cache/pool_host/base.py#L273-L278; GB = 1e9 B):
# kvmem.engines.sglang.hicache
HICACHE_LINE = re.compile(r"Allocating (\w+) hierarchical KV host pool: +(\d+) tokens, +([0-9.]+) GB host memory")
_CAUSE = ("the K/V bytes per token differ: the KV dtype (--kv-cache-dtype), heads per rank (--tp-size) or "
          "layers per rank (--pp-size) differ from the ones given")


ARGS_MARKER = "server_args="
ARGS_FIELDS = {"model_path": "model", "tp_size": "tp", "pp_size": "pp", "kv_cache_dtype": "kv_dtype",
               "page_size": "page_size", "max_running_requests": "max_running_requests",
               "swa_full_tokens_ratio": "swa_full_tokens_ratio",
               "disable_hybrid_swa_memory": "disable_hybrid_swa_memory",
               "mamba_full_memory_ratio": "mamba_full_memory_ratio", "max_mamba_cache_size": "max_mamba_cache_size",
               "disable_radix_cache": "disable_radix_cache", "disable_overlap_schedule": "disable_overlap_schedule",
               "mamba_scheduler_strategy": "mamba_scheduler_strategy", "context_length": "context_length",
               "mem_fraction_static": "mem_fraction_static",
               # data-parallel attention and expert parallelism (kvmem.engines.sglang.parallel)
               "attn_dp_size": "attn_dp_size", "ep_size": "ep_size",
               "ep_num_redundant_experts": "ep_num_redundant_experts", "nnodes": "nnodes",
               "enable_dp_lm_head": "enable_dp_lm_head", "moe_dense_tp_size": "moe_dense_tp_size",
               "moe_a2a_backend": "moe_a2a_backend",
               # the reserve the CUDA graphs and activations fit in (kvmem.engines.sglang.cudagraph)
               "chunked_prefill_size": "chunked_prefill_size", "cuda_graph_max_bs": "cuda_graph_max_bs"}
SSM_DTYPES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}   # --mamba-ssm-dtype as kvmem names it


def printed(lines: list[str]) -> dict:
    """The settings the log states: kvmem name -> (value, line number); the first of each wins."""
    found: dict = {}
    for n, line in enumerate(lines, 1):
        if (at := line.find(ARGS_MARKER)) >= 0:
            read_fields(line, n, at, ARGS_FIELDS, found)
            raw = field(line, "mamba_ssm_dtype", at)
            if raw is not None and "mamba_ssm_dtype" not in found:
                value = value_of(raw, n, line)
                found["mamba_ssm_dtype"] = (SSM_DTYPES.get(value, value), n)
    # the deprecated spelling: "dp_size=N, enable_dp_attention=True" is N attention groups, no replicas
    # (sglang@v0.5.23 python/sglang/srt/arg_groups/parallel_hook.py#L39-L62 handle_deprecated_dp_attention)
    for n, line in enumerate(lines, 1):
        if "attn_dp_size" not in found and (at := line.find(ARGS_MARKER)) >= 0:
            flag, dp = field(line, "enable_dp_attention", at), field(line, "dp_size", at)
            if flag is not None and value_of(flag, n, line) is True and dp is not None:
                found["attn_dp_size"] = (value_of(dp, n, line), n)
    if "mamba_scheduler_strategy" in found:      # --mamba-scheduler-strategy extra_buffer: kvmem's mamba_extra_buffer
        value, n = found.pop("mamba_scheduler_strategy")
        found["mamba_extra_buffer"] = (value == "extra_buffer", n)
    return found


def read(lines: list[str]) -> dict:
    found: dict = {"kv": [], "mamba": None, "legacy": None, "total": None, "scheduler": None}
    seen = set()
    for n, line in enumerate(lines, 1):
        if m := KV_LINE.search(line):
            text = strip_prefix(line, "KV Cache is allocated")
            if text not in seen:                                     # every rank prints it: read it once
                seen.add(text)
                found["kv"].append((n, text, logged_number(m.group(3), n, line), m.group(1) is not None))
        elif found["legacy"] is None and LEGACY_LINE.search(line):
            found["legacy"] = (n, strip_prefix(line, "KV Cache is allocated"))
        elif found["total"] is None and (m := TOTAL.search(line)):
            found["total"] = logged_number(m.group(1), n, line)
            numbers = {name: field(line, name, m.start()) for name in ("max_running_requests", "context_len")}
            if all(v is not None and v.isdigit() for v in numbers.values()):
                found["scheduler"] = (n, strip_prefix(line, "max_total_num_tokens"), found["total"],
                                      logged_number(numbers["max_running_requests"], n, line),
                                      logged_number(numbers["context_len"], n, line),
                                      field(line, "available_gpu_mem", m.start()) is not None)
        elif found.get("hicache") is None and (m := HICACHE_LINE.search(line)):
            found["hicache"] = (n, strip_prefix(line, "Allocating"), m.group(1), logged_number(m.group(2), n, line),
                                m.group(3))
        elif found["mamba"] is None and (m := MAMBA_LINE.search(line)):
            found["mamba"] = (n, strip_prefix(line, "Mamba Cache is allocated"), logged_number(m.group(1), n, line))
    found.update(read_graph_lines(lines))
    found["mm_reserve"] = read_reserve_line(lines)
    return found


def _same(a: str, b: str) -> bool:
    """The same line but for spacing (SGLang writes "0.10GB"; a line copied by hand may read "0.10 GB")."""
    return "".join(a.split()) == "".join(b.split())


def check(model, found: dict, *, kv_dtype, tp: int, pp: int, info: dict | None = None,
          **options) -> tuple[dict, list[LineCheck], list[str]]:
    """The pools' lines (every setting they depend on is an engine option), then the CUDA-graph lines
    (against the reserve: mem_fraction_static, chunked_prefill_size and cuda_graph_max_bs, printed or given)."""
    model = sglang_model(model)   # as SGLang's own config class reads the file (own_configs)
    graph_options = {name: options.pop(name) for name in GRAPH_OPTIONS if name in options}
    settings, checks, notes = _check_pools(model, found, kv_dtype=kv_dtype, tp=tp, pp=pp, **options)
    check_graph_lines(found, info={**(info or {}), **graph_options}, options=graph_options, settings=settings,
                      checks=checks, notes=notes)
    if found.get("mm_reserve"):
        check_reserve_line(model, found["mm_reserve"], checks, notes)
    if "load_end" in found:
        _weights_note(model, found["load_end"], tp, pp, (info or {}).get("weight_dtype"), options, settings, notes)
    return settings, checks, notes


def _weights_note(model, logged, tp: int, pp: int, weight_dtype, options: dict, settings: dict, notes: list) -> None:
    """What SGLang measured over the weight load ("Load weight end. ... mem usage=W GB": free memory before less
    after, model_runner.py#L1364-L1365) beside the weights kvmem budgets per GPU: a note, not a check, for the load
    also keeps buffers that are no weight (kvmem's budget does not hold them: its pool is that much larger)."""
    from ...weights import weights
    from .dp_weights import weights_per_device
    n, text, _, logged_bytes = logged
    if weight_dtype is None and "quant=" in text:
        notes.append(f"line {n}: the weights are not compared: the line names a quantization; give weight_dtype")
        return
    parallel = {k: v for k, v in options.items() if k in ("attn_dp_size", "ep_size", "ep_num_redundant_experts",
                                                           "nnodes", "enable_dp_lm_head", "moe_dense_tp_size",
                                                           "moe_a2a_backend")}
    held = weights(model, weight_dtype or "auto")
    ours, _ = weights_per_device(held, model, tp=tp, pp=pp, options=parallel)
    settings["weights_bytes_kvmem"] = int(ours)
    notes.append(f"line {n}: SGLang measured {logged_bytes / GIB:.2f} GB over the weight load; kvmem's "
                 f"{held.weight_dtype} weights are {ours / GIB:.2f} GB a GPU ({(logged_bytes - ours) / GIB:+.2f} GB: "
                 "what loads beside the weights, which kvmem's budget leaves in the KV pool)")


GRAPH_OPTIONS = ("chunked_prefill_size", "cuda_graph_max_bs")


def _check_pools(model, found: dict, *, kv_dtype, tp: int, pp: int,
                 **options) -> tuple[dict, list[LineCheck], list[str]]:
    settings: dict = {}
    checks: list[LineCheck] = []
    notes: list[str] = []
    options.pop("max_model_len", None)
    hicache = {name: options.pop(name) for name in ("hicache_ratio", "hicache_size") if name in options}
    spec, options = spec_draft.split(options)   # a speculative draft's pool logs its own line (draft.py)
    # each attention group prints its own pool, laid out for attn_tp, and its share of the requests
    attn_dp = kv_groups(options)
    tp, options = kv_tp(model, tp, pp, options)
    if attn_dp > 1 and options.get("max_running_requests"):
        # sglang@v0.5.23 python/sglang/srt/mem_cache/kv_cache_configurator.py#L3130-L3132 per DP worker
        options["max_running_requests"] = max(1, options["max_running_requests"] // attn_dp)
    if not found["kv"] and found["legacy"] and found["total"]:
        # the old line has no #tokens: the scheduler's "max_total_num_tokens=N" gives them
        n, text = found["legacy"]
        settings["tokens"] = [found["total"]]
        (pool,) = make_pools(model, num_tokens=found["total"], kv_dtype=kv_dtype, tp=tp, pp=pp,
                             **{k: v for k, v in options.items() if k != "version"})[-1:]
        expected = pool.log_line(legacy=True)
        ok = _same(expected, text)
        checks.append(LineCheck(n, text, "KV Cache is allocated", text, expected, ok, "" if ok else _CAUSE))
        return settings, checks, notes
    if not found["kv"]:
        return settings, checks, notes
    version = options.pop("version", None) or ("latest" if found["kv"][0][3] else "0.5.12")
    settings["dtype_in_log"] = found["kv"][0][3]
    tokens = [t for _, _, t, _ in found["kv"]]
    settings["tokens"] = tokens
    full, swa = (tokens[-1], tokens[0]) if len(tokens) > 1 else (tokens[0], None)
    made = make_pools(model, num_tokens=full, swa_num_tokens=swa, kv_dtype=kv_dtype, tp=tp, pp=pp, version=version,
                      **options)
    for (n, text, _, _), pool in zip(found["kv"], made, strict=False):
        expected = pool.log_line(version=version)
        ok = _same(expected, text)
        checks.append(LineCheck(n, text, "KV Cache is allocated", text, expected, ok, "" if ok else _CAUSE))
    if len(found["kv"]) == len(made) + 1:
        _check_draft(model, found["kv"][-1], made, spec, kv_dtype, tp, version, options, checks, notes)
    slots = None
    if found["mamba"] is not None:
        n, text, slots = found["mamba"]
        settings["max_mamba_cache_size"] = slots
        layout = make_layout(model, kv_dtype=kv_dtype, tp=tp, **{**DEFAULTS, **options, "version": version})
        parts = [state_parts_of(model, layout, i, tp) for i, layer in enumerate(model.layers)
                 if layer.kind == LINEAR]
        conv, ssm = sum(c for c, _ in parts), sum(s for _, s in parts)
        pool = mamba.StatePool(slots=slots, conv_bytes=(slots + 1) * conv, ssm_bytes=(slots + 1) * ssm, rest_bytes=0,
                               per_request=conv + ssm)
        expected = pool.log_line().rstrip()
        ok = _same(expected, text)
        checks.append(LineCheck(n, text, "Mamba Cache is allocated", text, expected, ok, "" if ok else (
            "the state bytes per request differ: --mamba-ssm-dtype, the model dtype or tp differ from the ones given")))
    if found["scheduler"] is not None:
        _check_requests(found["scheduler"], slots, options, settings, checks, notes)
    if found.get("hicache") is not None:
        _check_hicache(found["hicache"], made, hicache, checks, notes)
    return settings, checks, notes


def _check_draft(model, logged, made, spec: dict, kv_dtype, tp: int, version, options: dict, checks: list,
                 notes: list) -> None:
    """The draft worker's "KV Cache is allocated" line (the target's #tokens, the draft's layers) against
    kvmem.engines.sglang.draft, where the speculative options are given."""
    n, text, tokens, _ = logged
    drafting = spec_draft.draft_layers(model, spec)
    if not drafting.layers:
        notes.append(f"line {n}: a second pool of {tokens:,} tokens, as a speculative draft's worker logs it, is not "
                     "checked: give -o speculative_algorithm=... (and speculative_draft_model_path) to check it")
        return
    layout = make_layout(model, kv_dtype=kv_dtype, tp=tp, **{**DEFAULTS, **options, "version": version})
    spec_draft.check_target(model, layout, 1)
    if layout.swa:
        notes.append(f"line {n}: the draft worker's pool for a hybrid sliding-window target is not modelled; "
                     "its line is not checked")
        return
    expected = spec_draft.draft_pool_of(layout, tokens, drafting.layers, made[-1].dtype).log_line(version=version)
    ok = _same(expected, text)
    checks.append(LineCheck(n, text, "draft KV pool", text, expected, ok, "" if ok else (
        "the draft's bytes per token differ: its layers (speculative_draft_model_path, the MTP layers), the KV dtype "
        "or tp differ from the ones given")))


def _check_hicache(logged, made, given: dict, checks: list, notes: list) -> None:
    """The HiCache host pool's tokens and GB against kvmem.engines.sglang.hicache for the device pool logged."""
    from .hicache import hicache_tier
    n, text, label, tokens, gb = logged
    if len(made) != 1 or label != "kv":
        notes.append(f"the HiCache {label} host pool ({tokens:,} tokens) is not checked: kvmem sizes the one-pool "
                     "MHA and MLA host pool only")
        return
    if not given:
        notes.append(f"the HiCache host pool ({tokens:,} tokens) is logged without --hicache-ratio or --hicache-size: "
                     "SGLang auto-sized it from the host's free RAM; give -o hicache_ratio=... to check it")
        return
    (pool,) = made
    cell = (pool.k_bytes + pool.v_bytes) // (pool.num_tokens + pool.page_size)
    tier = hicache_tier(device_tokens=pool.num_tokens, size_per_token=cell, page_size=pool.page_size,
                        device_pool_bytes=pool.k_bytes + pool.v_bytes,
                        hicache_ratio=float(given["hicache_ratio"]) if "hicache_ratio" in given else None,
                        hicache_size=int(given.get("hicache_size") or 0))
    expected = f"{tier.tokens} tokens, {tier.host_bytes_per_rank / 1e9:.2f} GB"
    ok = tier.tokens == tokens and f"{tier.host_bytes_per_rank / 1e9:.2f}" == gb
    checks.append(LineCheck(n, text, "HiCache host pool", f"{tokens} tokens, {gb} GB", expected, ok, "" if ok else
                            "a host pool of another size: the ratio or size, the page size or the KV layout differ"))


def _check_requests(scheduler, slots, options: dict, settings: dict, checks: list, notes: list) -> None:
    """max_running_requests against SGLang's resolve_max_num_reqs (kvmem.engines.sglang.mamba), from the
    tokens, context_len and state slots the log prints (module docstring: on lines of builds from mid-2025)."""
    n, text, tokens, requests, context_len, current = scheduler
    settings.update(max_running_requests=requests, context_len=context_len)
    if not current:
        notes.append(f"line {n}: max_running_requests is not checked: a scheduler line without available_gpu_mem "
                     "is from a build before mid-2025, which printed the request pool's size (a rule kvmem does "
                     "not model)")
        return
    ratio = mamba.ratio(disable_radix_cache=options.get("disable_radix_cache", False),
                        mamba_extra_buffer=options.get("mamba_extra_buffer", False),
                        disable_overlap_schedule=options.get("disable_overlap_schedule", False))
    ours = mamba.max_running_requests(tokens, context_len, slots, ratio, options.get("max_running_requests"))
    ok = ours == requests
    cause = "" if ok else (
        "another --max-running-requests than given (server_args prints it), or for a hybrid other state slots "
        "(--disable-radix-cache, --mamba-scheduler-strategy, --disable-overlap-schedule)")
    checks.append(LineCheck(n, text, "max_running_requests", f"{requests:,}", f"{ours:,}", ok, cause))


def claims(found: dict) -> bool:
    return bool(found["kv"] or found["legacy"] or found.get("graphs"))


# The launch command above a log (kvmem.logcheck.command): SGLang's arguments (python/sglang/srt/server_args.py)
RUNS = ("sglang.launch_server", "sglang serve ")
COMMAND_FLAGS = {"--model-path": "model", "--model": "model", "--tp-size": "tp", "--tp": "tp", "--pp-size": "pp",
                 "--kv-cache-dtype": "kv_dtype", "--page-size": "page_size",
                 "--max-running-requests": "max_running_requests", "--context-length": "context_length",
                 "--mem-fraction-static": "mem_fraction_static", "--swa-full-tokens-ratio": "swa_full_tokens_ratio",
                 "--max-mamba-cache-size": "max_mamba_cache_size", "--hicache-ratio": "hicache_ratio",
                 "--hicache-size": "hicache_size", "--chunked-prefill-size": "chunked_prefill_size",
                 "--cuda-graph-max-bs": "cuda_graph_max_bs"}
COMMAND_SWITCHES = {"--disable-radix-cache": ("disable_radix_cache", True),
                    "--disable-overlap-schedule": ("disable_overlap_schedule", True)}
READER = LogReader(read, claims, printed, check,
                   "SGLang's 'KV Cache is allocated' / 'Mamba Cache is allocated' / 'Capture cuda graph end'",
                   check_options=("hicache_ratio", "hicache_size", *GRAPH_OPTIONS), runs=RUNS,
                   command_flags=COMMAND_FLAGS, command_switches=COMMAND_SWITCHES)

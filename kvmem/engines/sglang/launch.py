"""`python -m sglang.launch_server` for SGLang 0.5.23: the flags that realise a fit.

Argument names as SGLang 0.5.23 declares them (python/sglang/srt/server_args.py
ServerArgs.add_cli_args; tests/oracles/test_plan_roundtrip.py parses the command with it):
    --model-path, --tp-size, --pp-size, --dp-size   the checkpoint and the parallel layout
                               (0.5.23 has no "--tp" of its own: argparse takes it only as an
                               abbreviation, so the command spells the full name)
    --context-length           the context planned
    --mem-fraction-static      the fraction kvmem sized with, pinned: SGLang's default depends on
                               the GPU, tp and pp (server_args.py _handle_gpu_memory_settings)
    --kv-cache-dtype           auto, bf16, fp8_e4m3, fp8_e5m2, nvfp4 (its choices in 0.5.23)
    --max-running-requests     the sequences planned per replica
    --page-size                tokens per page (default 1)
    --attn-dp-size, --ep-size, --ep-num-redundant-experts, --nnodes, --enable-dp-lm-head, --moe-dense-tp-size,
    --moe-a2a-backend
                               data-parallel attention, expert parallelism, nodes (kvmem.engines.sglang.parallel);
                               --max-running-requests is then the requests of all attention groups together
                               (SGLang gives each max_running_requests // attn_dp_size)
    --chunked-prefill-size     the prefill chunk the reserve was sized for
    --speculative-algorithm, --speculative-draft-model-path, --speculative-num-steps,
    --speculative-eagle-topk, --speculative-num-draft-tokens
                               the speculative draft the pools were sized with (kvmem.engines.sglang.draft;
                               python/sglang/srt/arg_groups/fields/spec.py#L31-L69)
Engine options with a flag: swa_full_tokens_ratio, disable_hybrid_swa_memory,
mamba_full_memory_ratio, mamba_ssm_dtype, max_mamba_cache_size, disable_radix_cache,
disable_overlap_schedule; for a linear/Mamba hybrid the command pins --mamba-radix-cache-strategy
(extra_buffer with mamba_extra_buffer, else no_buffer: 0.5.23's "auto" picks by backend,
srt/arg_groups/overrides.py) and is refused when the state slots admit fewer requests than the
batch (slots // 3, or // 5 with the extra buffer and overlap: kvmem.engines.sglang.mamba).
A release other than 0.5.23 is refused by name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from ...launch.base import (
    Flag,
    Inputs,
    PlanRefused,
    kv_dtype_value,
    model_argument,
    refuse_options,
    weight_flags,
)
from ..serving import Launcher
from .budget import sglang_chunked_prefill_size
from .details import SglangCapacityDetails
from .disagg import roles
from .draft import DRAFT_DEFAULTS
from .mamba import resolve_extra_buffer
from .parallel import PARALLEL_DEFAULTS
from .pools import DEFAULTS

if TYPE_CHECKING:                 # annotations only: not imported at run time
    from ...sizing.results import Fit
    from ...sizing.setup import Setup

RELEASE = "SGLang 0.5.23"
PROGRAM = ("python", "-m", "sglang.launch_server")
KV_CACHE_DTYPE = {"bf16": "bf16", "fp8": "fp8_e4m3", "fp8_e4m3": "fp8_e4m3", "fp8_e5m2": "fp8_e5m2",
                  "nvfp4": "nvfp4"}                    # server_args.py --kv-cache-dtype choices
SSM_DTYPE = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}   # --mamba-ssm-dtype
_VALUED = {"swa_full_tokens_ratio": "--swa-full-tokens-ratio", "mamba_full_memory_ratio": "--mamba-full-memory-ratio"}
_SIZING_ONLY = {"weights_bytes", "activation_bytes", "non_torch_bytes", "mem_fraction_static", "chunked_prefill_size",
                "cuda_graph_max_bs", "page_size", "version", "max_running_requests", "mamba_extra_buffer",
                *PARALLEL_DEFAULTS,   # the parallel options: their flags are written below
                "enable_hierarchical_cache", "hicache_ratio", "hicache_size", "hicache_host_memory_fraction",
                "host_memory_bytes",   # hicache_flags
                *DRAFT_DEFAULTS}       # draft_flags


def hicache_flags(sizing: dict) -> list[Flag]:
    """--enable-hierarchical-cache and its size as fit sized the host pool (kvmem.engines.sglang.hicache;
    python/sglang/srt/arg_groups/fields/memory.py#L98-L120); fit refuses a pool the host's RAM does not hold."""
    if not sizing.get("enable_hierarchical_cache"):
        return []
    out = [Flag("--enable-hierarchical-cache", "", "a host-RAM tier mirroring the device pool (HiCache)")]
    if sizing.get("hicache_size"):
        out.append(Flag("--hicache-size", str(sizing["hicache_size"]), "GB (10**9 B) of host pool per rank"))
    elif sizing.get("hicache_ratio") is not None:
        out.append(Flag("--hicache-ratio", f"{sizing['hicache_ratio']:g}", "host pool tokens per device pool token"))
    elif sizing.get("hicache_host_memory_fraction") not in (None, 0.8):
        out.append(Flag("--hicache-host-memory-fraction", f"{sizing['hicache_host_memory_fraction']:g}",
                        "of the host's free RAM (less 10 GiB) for the pools of all ranks"))
    return out
def draft_flags(options: dict) -> list[Flag]:
    """--speculative-* as the pools were sized (kvmem.engines.sglang.draft): the algorithm, the draft's
    checkpoint (its Hugging Face id, or its path to fill in) and the step settings given."""
    algorithm = options.get("speculative_algorithm")
    if algorithm is None:
        return []
    out = [Flag("--speculative-algorithm", str(algorithm).upper(), "the speculative algorithm the draft pool was "
                "sized for")]
    draft = options.get("speculative_draft_model_path")
    if draft is not None:
        from ...catalog import as_model
        value, why = model_argument(as_model(draft))
        out.append(Flag("--speculative-draft-model-path", value, f"the draft whose layers were sized: {why}"))
    for name in ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens"):
        if options.get(name) is not None:
            out.append(Flag("--" + name.replace("_", "-"), str(options[name]), f"{name}={options[name]} as planned"))
    return out


_SWITCHES = {"disable_hybrid_swa_memory": ("--disable-hybrid-swa-memory", "sliding layers cached at full length"),
             "disable_radix_cache": ("--disable-radix-cache", "no prefix cache: one state slot per request"),
             "disable_overlap_schedule": ("--disable-overlap-schedule", "no overlap scheduling")}


def kv_cache_dtype(inp: Inputs) -> str:
    return kv_dtype_value("sglang", inp, KV_CACHE_DTYPE,
                          "sglang: --kv-cache-dtype has no {name} other than the model's own ({auto}); "
                          "SGLang 0.5.23 takes auto, bf16, fp8_e4m3, fp8_e5m2, nvfp4")


def flags(inp: Inputs) -> tuple[Flag, ...]:
    s, fit, opts = cast("Setup", inp.setup), cast("Fit", inp.fit), inp.options
    if str(opts.get("version", "latest")).lower() not in ("latest", "0.5.23", "v0.5.23"):
        raise PlanRefused(f"sglang: the command is for {RELEASE}; version={opts['version']!r} has other flags")
    refuse_options("sglang", opts, set(_VALUED) | set(_SWITCHES) | {"mamba_ssm_dtype", "max_mamba_cache_size"},
                   _SIZING_ONLY)
    model, why = model_argument(inp.model)
    # the model's own default where its architecture changes it (budget.model_defaults: Inkling's prefill graph, a
    # vision tower), as plan resolved it for this setup
    mfs = inp.defaults["mem_fraction_static"]
    chunk = opts.get("chunked_prefill_size") or sglang_chunked_prefill_size(s.gpu.memory_bytes)
    out = [Flag("--model-path", model, why),
           Flag("--tp-size", str(s.tp), f"tp={s.tp}: each GPU holds 1/{s.tp} of the KV heads and weights"),
           Flag("--pp-size", str(s.pp), f"pp={s.pp}: each stage holds its run of layers")]
    copies = s.num_gpus // (s.tp * s.pp)
    attn_dp, ep, redundant = (int(opts.get(name) or PARALLEL_DEFAULTS[name])
                              for name in ("attn_dp_size", "ep_size", "ep_num_redundant_experts"))
    if copies > 1 and attn_dp > 1:
        # sglang@v0.5.23 python/sglang/srt/arg_groups/parallel_hook.py#L287-L292
        raise PlanRefused(f"sglang: --dp-size {copies} with --attn-dp-size {attn_dp}: SGLang 0.5.23 refuses "
                          "data-parallel replicas combined with attention data parallelism")
    if copies > 1:
        out.append(Flag("--dp-size", str(copies), f"{copies} replicas, each with its own pool"))
    if attn_dp > 1:
        out.append(Flag("--attn-dp-size", str(attn_dp), f"{attn_dp} attention groups of tp // {attn_dp} GPUs, each "
                        "with its own requests and KV pool (was --dp-size N --enable-dp-attention)"))
    if ep > 1:
        out.append(Flag("--ep-size", str(ep), f"the routed experts shared by {ep} expert-parallel ranks"))
    if redundant:
        out.append(Flag("--ep-num-redundant-experts", str(redundant), f"{redundant} redundant experts, as planned"))
    if opts.get("enable_dp_lm_head") and attn_dp > 1:
        out.append(Flag("--enable-dp-lm-head", "", "lm_head split over each attention group, as sized"))
    if (opts.get("moe_a2a_backend") or "none") != "none":
        out.append(Flag("--moe-a2a-backend", str(opts["moe_a2a_backend"]), "DeepEP all-to-all (SGLang sets ep_size to "
                        "tp and reserves 2 GiB more for its buffers), as sized"))
    if opts.get("moe_dense_tp_size") == 1:
        out.append(Flag("--moe-dense-tp-size", "1", "dense MLP layers whole on every GPU, as sized"))
    nnodes = int(opts.get("nnodes") or 1)
    if nnodes > 1:
        if s.num_gpus % nnodes:
            raise PlanRefused(f"sglang: {s.num_gpus} GPUs do not split evenly over nnodes={nnodes}")
        out.append(Flag("--nnodes", str(nnodes), f"{s.num_gpus // nnodes} GPUs a node; run the command on every "
                        "node with its own --node-rank and one --dist-init-addr"))
    out += [Flag("--context-length", str(fit.context), "the context planned"),
            Flag("--mem-fraction-static", repr(float(mfs)), "the fraction kvmem sized the pool with, pinned "
                 "(SGLang's default depends on the GPU, tp and pp)"),
            Flag("--kv-cache-dtype", kv_cache_dtype(inp), f"KV elements in {fit.kv_dtype}, as planned"),
            Flag("--max-running-requests", str(inp.batch * attn_dp),
                 f"{inp.batch} sequences per replica, the batch planned" if attn_dp == 1 else
                 f"{inp.batch} sequences per attention group x {attn_dp} groups (SGLang divides it among them)"),
            Flag("--page-size", str(opts.get("page_size") or DEFAULTS["page_size"]), "tokens per page, as planned"),
            Flag("--chunked-prefill-size", str(chunk), "the prefill chunk the reserve was sized for")]
    out += weight_flags("sglang", inp.model, fit.weight_dtype)
    out += hicache_flags(s.sizing)
    out += draft_flags(opts)
    for name, flag in _VALUED.items():
        if opts.get(name) is not None and opts[name] != DEFAULTS[name]:
            out.append(Flag(flag, f"{opts[name]:g}", f"{name}={opts[name]} as planned"))
    for name, (flag, why) in _SWITCHES.items():
        if opts.get(name):
            out.append(Flag(flag, "", f"{why}, as planned"))
    details = fit.capacity.details if fit.capacity else None
    if (isinstance(details, SglangCapacityDetails) and details.max_mamba_cache_size is not None
            and details.max_running_requests is not None):     # a state pool: its slots and the requests they admit
        slots, admitted = details.max_mamba_cache_size, details.max_running_requests
        if admitted < inp.batch:
            raise PlanRefused(f"sglang: the state pool's {slots} slots admit only "
                              f"{admitted} requests at once, fewer than the {inp.batch} planned")
        # the strategy fit sized with: the one given, else SGLang's resolution of "auto" (mamba.resolve_extra_buffer)
        target: Any = inp.model
        resolved = resolve_extra_buffer(target.facts.architectures, {**DEFAULTS, **opts})
        strategy = "extra_buffer" if resolved["mamba_extra_buffer"] else "no_buffer"
        out.append(Flag("--mamba-radix-cache-strategy", strategy, f"state slots per request as planned "
                        f"({slots} slots admit {admitted} requests)"))
        if opts.get("max_mamba_cache_size") is not None:
            out.append(Flag("--max-mamba-cache-size", str(opts["max_mamba_cache_size"]), "the state slots planned"))
    ssm = opts.get("mamba_ssm_dtype")
    if ssm is not None and ssm != DEFAULTS["mamba_ssm_dtype"]:
        out.append(Flag("--mamba-ssm-dtype", SSM_DTYPE[str(ssm)], f"recurrent state in {ssm}, as planned"))
    return tuple(out)


LAUNCHER = Launcher(RELEASE, PROGRAM, flags, batch_option="max_running_requests", roles=roles)

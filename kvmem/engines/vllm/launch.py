"""`vllm serve` for vLLM 0.33.0: the flags that realise a fit.

Argument names as vLLM 0.33.0 declares them (vllm/engine/arg_utils.py EngineArgs.add_cli_args;
checked by tests/oracles/test_plan_roundtrip.py, which parses the command with that parser):
    --tensor-parallel-size, --pipeline-parallel-size, --data-parallel-size   the parallel layout
    --enable-expert-parallel, --enable-eplb --eplb-config   experts over tp x replicas (kvmem.engines.vllm.parallel)
    --max-model-len            the context planned (vLLM's per-request worst case uses it)
    --gpu-memory-utilization   the share of the device's total vLLM budgets (or
    --kv-cache-memory-bytes    the KV budget itself, when the plan was given one)
    --kv-cache-dtype           vllm/config/cache.py CacheDType: auto, bfloat16, float16, fp8, fp8_e4m3, ...
    --max-num-seqs             the sequences planned per replica; the sampler's profile peak
                               (min(max_num_seqs, max_num_batched_tokens) x vocab) is sized for it
    --max-num-batched-tokens   the tokens per step the activation peak was sized for
    --block-size               only when the plan set one (default 16, or the MLA backend's)
    --quantization fp8         weights planned in fp8 from a 16-bit checkpoint (vLLM's online fp8)
    --dtype                    weights planned in another 16/32-bit format than the checkpoint's
Engine options with a flag: hybrid_kv_cache_manager, enable_prefix_caching, async_scheduling,
attention_backend, mamba_cache_mode, mamba_cache_dtype, mamba_ssm_cache_dtype; the CPU offload tier
(--kv-offloading-size, --kv-offloading-backend). A draft model,
speculative tokens, a release other than 0.33 or the v0 engine are refused by name.
"""

from __future__ import annotations

import json

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
from .offload import LMCACHE_CHUNK_TOKENS, LMCACHE_CPU_GIB

RELEASE = "vLLM 0.33.0"
PROGRAM = ("vllm", "serve")
# kvmem's element format -> vLLM's --kv-cache-dtype value (vllm/config/cache.py CacheDType)
KV_CACHE_DTYPE = {"bf16": "bfloat16", "fp16": "float16", "fp8": "fp8", "fp8_e4m3": "fp8_e4m3",
                  "fp8_e5m2": "fp8_e5m2", "fp8_inc": "fp8_inc", "fp8_ds_mla": "fp8_ds_mla",
                  "int8_per_token_head": "int8_per_token_head", "fp8_per_token_head": "fp8_per_token_head",
                  "nvfp4": "nvfp4"}
_SWITCHES = {  # option -> (flag when the value differs from vLLM's default, the default)
    "hybrid_kv_cache_manager": ("--disable-hybrid-kv-cache-manager", True),
    "async_scheduling": ("--no-async-scheduling", True),
}
_VALUED = {"attention_backend": "--attention-backend", "mamba_cache_mode": "--mamba-cache-mode",
           "gdn_prefill_backend": "--gdn-prefill-backend",
           "mamba_cache_dtype": "--mamba-cache-dtype", "mamba_ssm_cache_dtype": "--mamba-ssm-cache-dtype"}
_SIZING_ONLY = {"weights_bytes", "activation_bytes", "non_torch_bytes", "cudagraph_bytes", "max_num_seqs",
                "max_num_batched_tokens", "block_size", "kv_cache_memory_bytes", "version", "swap_space",
                "enable_expert_parallel", "num_redundant_experts",   # expert_flags writes these two
                "kv_offloading_size", "kv_offloading_backend", "lmcache_l1_size_gb",   # offload_flags
                "lmcache_max_local_cpu_size", "lmcache_max_local_disk_size",           # lmcache_flags
                "host_memory_bytes"}


def offload_flags(sizing: dict) -> list[Flag]:
    """--kv-offloading-size / --kv-offloading-backend (vllm/config/cache.py#L383-L392), as fit sized the tier
    (kvmem.engines.vllm.offload; fit refuses a tier the host's RAM does not hold)."""
    size = sizing.get("kv_offloading_size")
    if size is None:
        return []
    backend = sizing.get("kv_offloading_backend") or "native"
    out = [Flag("--kv-offloading-size", f"{size:g}", "GiB of host RAM for the CPU KV tier, all ranks together")]
    if backend != "native":
        out.append(Flag("--kv-offloading-backend", backend,
                        f"the LMCache server's --l1-size-gb {sizing.get('lmcache_l1_size_gb')} sizes the tier (start "
                        "it with that); vLLM 0.33.0 does not pass --kv-offloading-size on to it"))
    return out


def lmcache_flags(sizing: dict) -> list[Flag]:
    """vLLM's in-process LMCacheConnectorV1 with the local tiers fit sized (kvmem.engines.vllm.offload
    lmcache_local_tiers). LMCache reads its settings from LMCACHE_CONFIG_FILE or the environment, then takes
    every "lmcache."-prefixed key of kv_connector_extra_config over them
    (LMCache 0.5.6 lmcache/integration/vllm/vllm_v1_adapter.py#L466-L470, #L494-L509), so the command carries
    them and needs no environment; vLLM registers the connector by that name
    (vllm@v0.33.0 vllm/distributed/kv_transfer/kv_connector/factory.py#L165-L169)."""
    cpu, disk = sizing.get("lmcache_max_local_cpu_size"), sizing.get("lmcache_max_local_disk_size")
    if cpu is None and disk is None:
        return []
    if disk not in (None, 0, 0.0):
        # LMCache 0.5.6 lmcache/v1/config.py#L103-L113: the disk tier needs local_disk, a path kvmem cannot choose
        raise PlanRefused("vllm: LMCache's disk tier needs local_disk (a path on the server) as well as "
                          f"max_local_disk_size={disk!r}; kvmem writes the CPU tier only: plan without "
                          "lmcache_max_local_disk_size, then add \"lmcache.local_disk\" and "
                          "\"lmcache.max_local_disk_size\" to the printed --kv-transfer-config")
    # LMCache 0.5.6 lmcache/v1/config.py#L90-L96: chunk_size 256 and max_local_cpu_size 5.0 unless set
    extra = {"lmcache.chunk_size": LMCACHE_CHUNK_TOKENS, "lmcache.local_cpu": True,
             "lmcache.max_local_cpu_size": float(LMCACHE_CPU_GIB if cpu is None else cpu)}
    config = {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both", "kv_connector_extra_config": extra}
    return [Flag("--kv-transfer-config", json.dumps(config, separators=(",", ":")),
                 f"LMCache's local CPU tier, {extra['lmcache.max_local_cpu_size']:g} GiB of pinned RAM per rank in "
                 f"chunks of {LMCACHE_CHUNK_TOKENS} tokens, as fit sized it")]


def expert_flags(sizing: dict, ranks: int) -> list[Flag]:
    """--enable-expert-parallel, and EPLB's redundant experts (kvmem.engines.vllm.parallel)."""
    out = []
    if sizing.get("enable_expert_parallel"):
        out.append(Flag("--enable-expert-parallel", "", f"whole experts on each of the {ranks} ranks (tp x replicas)"))
    if sizing.get("num_redundant_experts"):
        redundant = int(sizing["num_redundant_experts"])
        # vllm@v0.33.0 vllm/config/parallel.py#L77 EPLBConfig.num_redundant_experts, #L586-L591 needs --enable-eplb
        out += [Flag("--enable-eplb", "", "expert load balancing, which places the redundant experts"),
                Flag("--eplb-config", f'{{"num_redundant_experts": {redundant}}}', f"{redundant} redundant experts")]
    return out


def roles(_role: str, _model, _prompt_tokens: int, _options: dict) -> tuple[list[str], list[str]]:
    """Either role runs the NIXL connector as kv_both
    (vllm@v0.33.0 vllm/config/kv_transfer.py#L56-L148 KVTransferConfig:
    kv_connector, kv_role); the KV pool is registered in place, no GPU buffer beside it
    (vllm/distributed/kv_transfer/kv_connector/v1/nixl/base_worker.py#L794-L810: a host buffer only with
    kv_buffer_device "cpu")."""
    if any(_options.get(name) is not None for name in ("lmcache_max_local_cpu_size", "lmcache_max_local_disk_size")):
        raise PlanRefused("vllm: a disaggregated role takes one --kv-transfer-config, NIXL's; LMCache's local tiers "
                          "beside it need vLLM's MultiConnector, which kvmem does not write")
    return ["--kv-transfer-config", json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})], []


def kv_cache_dtype(inp: Inputs) -> str:
    return kv_dtype_value("vllm", inp, KV_CACHE_DTYPE, "vllm: --kv-cache-dtype has no {name} (vLLM 0.33 caches "
                          + ", ".join(sorted(set(KV_CACHE_DTYPE.values()))).replace("{", "{{") + ")")


def flags(inp: Inputs) -> tuple[Flag, ...]:
    s, fit, opts = inp.setup, inp.fit, inp.options
    version = str(opts.get("version", "latest")).lower()
    if version not in ("latest", "0.33", "0.33.0", "v0.33.0"):
        raise PlanRefused(f"vllm: the command is for {RELEASE}; version={opts['version']!r} has other flags")
    for name in ("draft", "num_speculative_tokens"):
        if opts.get(name):
            raise PlanRefused(f"vllm: kvmem does not write --speculative-config; option {name}={opts[name]!r} "
                              "has no flag here")
    refuse_options("vllm", opts, set(_SWITCHES) | set(_VALUED) | {"draft", "num_speculative_tokens",
                                                                   "enable_prefix_caching",
                                                                   "decode_context_parallel_size"}, _SIZING_ONLY)
    model, why = model_argument(inp.model)
    out = [Flag("", model, why),
           Flag("--tensor-parallel-size", str(s.tp), f"tp={s.tp}: each GPU holds 1/{s.tp} of the KV heads and weights"),
           Flag("--pipeline-parallel-size", str(s.pp), f"pp={s.pp}: each stage holds its run of layers")]
    if s.replicas > 1:
        out.append(Flag("--data-parallel-size", str(s.replicas),
                        f"{s.replicas} replicas of tp x pp = {s.tp * s.pp} GPUs, each with its own KV pool"))
    out += expert_flags(s.sizing, s.tp * s.replicas)
    if (opts.get("decode_context_parallel_size") or 1) > 1:
        dcp = opts["decode_context_parallel_size"]
        out.append(Flag("--decode-context-parallel-size", str(dcp), f"each of {dcp} tp ranks keeps every {dcp}th "
                        "token of a sequence (kvmem.engines.vllm.parallel)"))
    out.append(Flag("--max-model-len", str(fit.context), "the context planned; vLLM admits a request only if its "
                    "worst case fits"))
    if opts.get("kv_cache_memory_bytes") is not None:
        out.append(Flag("--kv-cache-memory-bytes", str(fit.kv_memory_bytes),
                        "the KV budget planned per device, given instead of a utilization"))
    else:
        out.append(Flag("--gpu-memory-utilization", f"{float(s.utilization):g}",
                        f"vLLM budgets this share of the device's {s.gpu.name} memory; the KV pool is what "
                        "weights, activations and overhead leave of it"))
    out.append(Flag("--kv-cache-dtype", kv_cache_dtype(inp), f"KV elements in {fit.kv_dtype}, as planned"))
    out.append(Flag("--max-num-seqs", str(inp.batch), f"{inp.batch} sequences per replica, the batch planned; the "
                    "sampler's profile peak is sized for it"))
    out.append(Flag("--max-num-batched-tokens", str(inp.defaults["max_num_batched_tokens"]),
                    "tokens per step the activation peak was sized for"))
    if opts.get("block_size") is not None:
        out.append(Flag("--block-size", str(opts["block_size"]), "the block size planned (vLLM's default: 16)"))
    out += weight_flags("vllm", inp.model, fit.weight_dtype)
    out += offload_flags(s.sizing)
    out += lmcache_flags(s.sizing)
    for name, (flag, default) in _SWITCHES.items():
        if name in opts and opts[name] is not None and opts[name] != default:
            out.append(Flag(flag, "", f"{name}={opts[name]} as planned"))
    prefix = opts.get("enable_prefix_caching")
    if prefix is not None:
        # unset, vLLM picks by the model (kvmem.engines.vllm.options.prefix_caching_default, on for Mamba hybrids
        # from 0.28): a value given is written either way (vllm@v0.33.0 vllm/engine/arg_utils.py#L3075-L3080)
        out.append(Flag("--enable-prefix-caching" if prefix else "--no-enable-prefix-caching", "",
                        f"enable_prefix_caching={prefix} as planned"))
    for name, flag in _VALUED.items():
        if opts.get(name) not in (None, "auto"):
            out.append(Flag(flag, str(opts[name]), f"{name}={opts[name]} as planned"))
    return tuple(out)


LAUNCHER = Launcher(RELEASE, PROGRAM, flags, batch_option="max_num_seqs", roles=roles)

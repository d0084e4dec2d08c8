"""SGLang 0.5.23's own pool sizing, run on the CPU, as the judge of kvmem's SGLang admission verdict.

kvmem.oracles.sglang.py leaves capacity sizing out because SGLang reads the GPU's free memory there;
the pieces after that read take a byte budget and are pure arithmetic, so they run here on a given
KV budget (SGLang's ``rest``, kvmem's ``kv_memory``):
    hybrid SWA   HybridSWAPoolConfigurator(kvc).calculate_pool_sizes(budget, page_size)
                 (python/sglang/srt/model_executor/pool_configurator.py): full_layer_tokens,
                 swa_layer_tokens, and validate_swa_pool_size's ValueError for a SWA pool that
                 cannot admit one request
    Mamba        KVCacheConfigurator._handle_max_mamba_cache(rest GiB) (mem_cache/kv_cache_configurator.py):
                 max_mamba_cache_size and the bytes left for KV; then the Default configurator's
                 tokens (available // cell // page x page, pool_configurator.py DefaultPoolConfigurator)
                 and KVCacheConfigurator.resolve_max_num_reqs(tokens): max_running_requests
Both read server context through get_schedule() / get_memory() / get_parallel() / get_exec() /
get_context(): those names are patched, for the call only, in the module that imports them, with
stand-ins holding SGLang's defaults (server_args.py: swa_full_tokens_ratio 0.8,
mamba_full_memory_ratio 0.9, radix cache and overlap scheduling on, no speculative decoding,
tp 1). ``kvc`` is a stand-in holding the attributes these methods read; ModelConfig is SGLang's
own, read from the config.json. SGLang's code is not edited.
"""

from __future__ import annotations

import functools
import types
from unittest import mock

from .sglang_runtime import config_dir
from .sglang_runtime import load as _load_sglang

__all__ = ["model_config", "swa_pools", "mamba_pools", "no_speculation", "Context", "resolved_defaults"]

GB = 1 << 30


@functools.cache
def _cached_model_config(cfg_json: str):
    """SGLang's ModelConfig read from a temporary directory holding the config.json (as sglang_families does)."""
    import json
    import logging
    import os
    import tempfile
    import warnings

    from sglang.srt.configs.model_config import ModelConfig
    warnings.filterwarnings("ignore")
    logging.getLogger("sglang").setLevel(logging.ERROR)
    cfg = {k: v for k, v in json.loads(cfg_json).items() if k != "quantization_config"}   # KV is unquantized
    with tempfile.TemporaryDirectory() as path:
        with open(os.path.join(path, "config.json"), "w") as f:
            json.dump(cfg, f)
        return ModelConfig(path, trust_remote_code=False)


def model_config(name: str, cfg: dict):   # noqa: ARG001 (name: the caller's label)
    """SGLang's ModelConfig for a config.json (cached; quantization_config dropped: gpt-oss's
    mxfp4 is a CUDA-only method ModelConfig refuses on the CPU, and it quantizes weights, not KV).
    The config.json rides along (``kvmem_config_json``) for the server settings SGLang resolves from it."""
    import json
    _load_sglang()
    text = json.dumps(cfg, sort_keys=True)
    mc = _cached_model_config(text)
    mc.kvmem_config_json = text
    return mc


def resolved_defaults(cfg: dict, *, gpu_mib: int = 81559, tp: int = 1, **server_args) -> dict:
    """SGLang's ServerArgs resolution for the checkpoint (as kvmem/oracles/sglang_reserve.py runs it), with the
    platform's extra-buffer support granted (a CUDA build has it; the CPU build does not); ``server_args``: flags
    given (ServerArgs fields)."""
    _load_sglang()
    import sglang.srt.arg_groups.mamba_hook as mamba_hook
    import sglang.srt.arg_groups.memory_hook as memory_hook
    from sglang.srt.server_args import ServerArgs
    with mock.patch.object(memory_hook, "get_device_memory_capacity", lambda *_a: float(gpu_mib)), \
            mock.patch.object(mamba_hook, "_platform_supports_mamba_cache_extra_buffer", lambda: True):
        resolved = ServerArgs(model_path=config_dir(cfg), tp_size=tp, device="cuda", **server_args)
        resolved.resolve_once()
    return resolved.resolved_dict()


@functools.cache
def _resolved_strategy(cfg_json: str) -> tuple[bool, bool]:
    """(extra buffer, overlap scheduling off) as SGLang 0.5.23's ServerArgs pipeline resolves them for the config on
    a CUDA device with no flag given (arg_groups/overrides.py _mamba_radix_cache_resolution)."""
    import json

    d = resolved_defaults(json.loads(cfg_json))
    return d["mamba_radix_cache_strategy"] == "extra_buffer", bool(d["disable_overlap_schedule"])


def _never(*_args, **_kwargs) -> bool:
    return False


def no_speculation():
    return types.SimpleNamespace(is_eagle=_never, is_standalone=_never, is_dflash_family=_never,
                                 is_none=lambda: True, is_dspark=_never)


def swa_pools(mc, *, kv_memory: int, page_size: int = 1, swa_full_tokens_ratio: float = 0.8) -> dict:
    """{"full", "swa", "window", "error"}: SGLang's hybrid-SWA pools for ``kv_memory`` bytes (bf16 KV)."""
    sg = _load_sglang()
    from sglang.srt.model_executor import pool_configurator as pc
    kvc = types.SimpleNamespace(
        kv_cache_dtype_str="auto", model_config=mc, kv_cache_dtype=sg.torch.bfloat16,
        layer_info=types.SimpleNamespace(full_attention_layer_ids=list(mc.full_attention_layer_ids),
                                         swa_attention_layer_ids=list(mc.swa_attention_layer_ids)),
        sliding_window_size=mc.sliding_window_size, page_size=page_size, spec_algorithm=no_speculation(),
        is_draft_worker=False, fused_entry_bytes=lambda _kind: None, attn_dp_size=1)
    with mock.patch.object(pc, "get_parallel", lambda: types.SimpleNamespace(attn_tp_size=1, attn_dcp_size=1)), \
            mock.patch.object(pc, "get_schedule",
                              lambda: types.SimpleNamespace(swa_full_tokens_ratio=swa_full_tokens_ratio)), \
            mock.patch.object(pc, "get_memory", lambda: types.SimpleNamespace(enable_unified_memory=False)):
        configurator = pc.HybridSWAPoolConfigurator(kvc)
        try:
            config = configurator.calculate_pool_sizes(kv_memory, page_size)
        except (ValueError, RuntimeError) as error:   # validate_swa_pool_size, MemoryPoolConfig
            return {"full": None, "swa": None, "window": mc.sliding_window_size, "error": str(error)}
    return {"full": config.full_max_total_num_tokens, "swa": config.swa_max_total_num_tokens,
            "window": mc.sliding_window_size, "error": None}


class Context:
    """get_context(): override(name, **fields) sets the fields on the schedule stand-in, as SGLang's
    runtime context makes them visible through get_schedule()."""

    def __init__(self, schedule):
        self.schedule = schedule

    def override(self, _name, **fields):
        for key, value in fields.items():
            setattr(self.schedule, key, value)


def mamba_pools(mc, *, kv_memory: int, context: int, page_size: int = 1) -> dict:
    """{"slots", "tokens", "max_running_requests", "error"}: SGLang's Mamba-hybrid sizing for ``kv_memory``
    bytes and ``--context-length context`` (bf16 KV, float32 SSM state, the radix-cache strategy SGLang resolves
    for the model: SGLang's defaults)."""
    _load_sglang()
    from sglang.srt.configs.hybrid_arch import mambaish_config
    from sglang.srt.mem_cache import kv_cache_configurator as kc
    from sglang.srt.runtime_context import get_parallel
    mc.context_len = context   # --context-length (ModelConfig.__init__ sets it from the argument)
    # the radix-cache strategy SGLang resolves for the model (extra_buffer for Qwen3-Next/3.5, Nemotron-H, ...)
    extra_buffer, no_overlap = _resolved_strategy(mc.kvmem_config_json)
    schedule = types.SimpleNamespace(max_mamba_cache_size=None, mamba_full_memory_ratio=0.9,
                                     max_running_requests=None, disable_overlap_schedule=no_overlap,
                                     max_total_tokens=None, page_size=page_size)
    memory = types.SimpleNamespace(disable_radix_cache=False, enable_unified_memory=False)
    exec_ = types.SimpleNamespace(mamba=types.SimpleNamespace(enable_linear_replayssm_spec=False,
                                                              enable_mamba_extra_buffer=extra_buffer,
                                                              enable_mamba_extra_buffer_lazy=False))
    kvc = types.SimpleNamespace(mambaish_config=None, pp_size=1, fused_entry_bytes=lambda _kind: None,
                                spec_algorithm=no_speculation(), hybrid_gdn_config=None, hybrid_kda_config=None,
                                extra_mamba_cache_bytes_per_req=0, attn_dp_size=1, model_config=mc)
    kvc._calculate_mamba_ratio = functools.partial(kc.KVCacheConfigurator._calculate_mamba_ratio, kvc)
    # the widths a launched server publishes (runtime_context.py), as sglang_families.sglang_view sets them
    with get_parallel().override(tp_size=1, attn_tp_size=1, enable_cp_tp_group_sharing=False), \
            mock.patch.object(kc, "get_schedule", lambda: schedule), \
            mock.patch.object(kc, "get_memory", lambda: memory), \
            mock.patch.object(kc, "get_exec", lambda: exec_), \
            mock.patch.object(kc, "get_context", lambda: Context(schedule)):
        kvc.mambaish_config = mamba = mambaish_config(mc)
        try:
            rest_gib = kc.KVCacheConfigurator._handle_max_mamba_cache(kvc, kv_memory / GB)
        except RuntimeError as error:
            return {"slots": schedule.max_mamba_cache_size, "tokens": None, "max_running_requests": None,
                    "error": str(error)}
        # kv_cache_configurator.py _profile_available_bytes: the rest in bytes; pool_configurator.py
        # DefaultPoolConfigurator: one cell per full-attention layer, MHA rows of K and V (bf16)
        available = int(rest_gib * GB)
        cell = len(mamba.full_attention_layer_ids) * mc.get_num_kv_heads(1) * (mc.head_dim + mc.v_head_dim) * 2
        tokens = available // cell // page_size * page_size
        if tokens <= 0:
            return {"slots": schedule.max_mamba_cache_size, "tokens": tokens, "max_running_requests": None,
                    "error": "Not enough memory"}
        try:
            requests = kc.KVCacheConfigurator.resolve_max_num_reqs(kvc, tokens)
        except RuntimeError as error:
            return {"slots": schedule.max_mamba_cache_size, "tokens": tokens, "max_running_requests": None,
                    "error": str(error)}
    return {"slots": schedule.max_mamba_cache_size, "tokens": tokens, "max_running_requests": requests,
            "error": None}

"""SGLang 0.5.23's own DeepSeek-V4 sizing and pool, run on the CPU: the judge of kvmem.engines.sglang.dsv4.

The server arguments are SGLang's: ServerArgs on the config.json, resolved by its own resolution pipeline
(arg_groups/pipeline.py run_resolution_pipeline, device "cuda": the DeepSeek-V4 override's page_size 256,
swa_full_tokens_ratio 0.1, kv fp8_e4m3, max_running_requests 256, the flashmla backend) and published in a
runtime context of their own (runtime_context.py create_context / use_context), so every get_schedule() /
get_exec() / get_spec() the configurator and the pool read answers what a launch would. Then, as
KVCacheConfigurator does (mem_cache/kv_cache_configurator.py _resolve_memory_pool_config, _build_dsv4_kv_pool):
    DSV4PoolConfigurator(kvc).calculate_pool_sizes(kv_memory, 256)     (model_executor/pool_configurator.py)
    resolve_max_num_reqs(full tokens), finalize_with_max_running_requests
    DeepSeekV4TokenToKVPool(...) on the meta device (no memory), start/end layer 0..num_hidden_layers
and the bytes of each of its buffers and the log lines the two print. ``kvc`` is a stand-in holding the
attributes these read; ModelConfig is SGLang's own. SGLang's code is not edited.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import tempfile
import types

from .sglang_runtime import load as _load_sglang

__all__ = ["dsv4_pools"]

_LOGGERS = ("sglang.srt.mem_cache.deepseek_v4_memory_pool", "sglang.srt.model_executor.pool_configurator")
_KEEP = ("DSV4 SWA sizing", "DSV4 memory calculation", "DSV4 pool sizes", "Initialize DeepSeekV4TokenToKVPool",
         "DSV4 SWA storage")


@functools.cache
def _resolved(cfg_json: str, swa_full_tokens_ratio, max_running_requests):
    """(ModelConfig, the runtime context of the resolved ServerArgs) for a config.json and the two flags."""
    _load_sglang()
    from sglang.srt import runtime_context as rc
    from sglang.srt.arg_groups.pipeline import run_resolution_pipeline
    from sglang.srt.configs.model_config import ModelConfig
    from sglang.srt.server_args import ServerArgs
    logging.getLogger("sglang").setLevel(logging.ERROR)
    cfg = {k: v for k, v in json.loads(cfg_json).items() if k != "quantization_config"}   # weights only
    path = tempfile.mkdtemp(prefix="kvmem-dsv4-")
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(cfg, f)
    flags = {}
    if swa_full_tokens_ratio is not None:
        flags["swa_full_tokens_ratio"] = swa_full_tokens_ratio
    if max_running_requests is not None:
        flags["max_running_requests"] = max_running_requests
    args = ServerArgs(model_path=path, device="cuda", **flags)
    run_resolution_pipeline(args)
    return ModelConfig(path, trust_remote_code=False), rc.create_context(args, role="scheduler")


def _never(*_args, **_kwargs) -> bool:
    return False


def _bytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def dsv4_pools(cfg: dict, *, kv_memory: int, swa_full_tokens_ratio=None, max_running_requests=None) -> dict:
    """{"error"} where SGLang raises, else {"full", "swa", "c4", "c128", "c4_state", "c128_state",
    "max_running_requests", "pools": {role: bytes}, "log": [lines]} from SGLang's own code."""
    sg = _load_sglang()
    torch = sg.torch
    mc, context = _resolved(json.dumps(cfg, sort_keys=True), swa_full_tokens_ratio, max_running_requests)
    from sglang.srt import runtime_context as rc
    from sglang.srt.mem_cache import kv_cache_configurator as kc
    from sglang.srt.mem_cache.deepseek_v4_memory_pool import DeepSeekV4TokenToKVPool, select_dsv4_kv_layout
    from sglang.srt.model_executor import pool_configurator as pc
    lines = []

    class Capture(logging.Handler):
        def emit(self, record):
            lines.append(record.getMessage())

    handler = Capture()
    loggers = [logging.getLogger(name) for name in _LOGGERS]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.addHandler(handler)
        lg.setLevel(logging.INFO)
    spec = types.SimpleNamespace(is_eagle=_never, is_standalone=_never, is_dflash_family=_never,
                                 is_none=lambda: True, is_dspark=_never)
    n = mc.num_hidden_layers
    kvc = types.SimpleNamespace(kv_cache_dtype_str="fp8_e4m3", model_config=mc, pp_size=1, attn_dp_size=1,
                                layer_info=types.SimpleNamespace(start_layer=0, end_layer=n),
                                sliding_window_size=mc.sliding_window_size, page_size=256, spec_algorithm=spec,
                                is_draft_worker=False, spec_aux_config=None, mambaish_config=None)
    try:
        with rc.use_context(context):
            page = rc.get_schedule().page_size
            kvc.page_size = page
            try:
                configurator = pc.DSV4PoolConfigurator(kvc)
                config = configurator.calculate_pool_sizes(kv_memory, page)
                config.max_running_requests = kc.KVCacheConfigurator.resolve_max_num_reqs(
                    kvc, config.max_total_num_tokens)
                config = configurator.finalize_with_max_running_requests(config)
            except (ValueError, RuntimeError) as error:   # validate_swa_pool_size, MemoryPoolConfig
                return {"error": str(error)}
            c4_dtype, c128_dtype = kc._get_dsv4_compress_state_dtypes()
            layout, compressed = select_dsv4_kv_layout()
            pool = DeepSeekV4TokenToKVPool(
                max_num_reqs=config.max_running_requests, num_req_slots=config.max_running_requests + 1,
                swa_size=config.swa_max_total_num_tokens, c4_size=config.c4_max_total_num_tokens,
                c128_size=config.c128_max_total_num_tokens, c4_state_pool_size=config.c4_state_pool_size,
                c128_state_pool_size=config.c128_state_pool_size, page_size=page, swa_page_size=page,
                sliding_window=mc.window_size, dtype=torch.float8_e4m3fn, c4_state_dtype=c4_dtype,
                c128_state_dtype=c128_dtype, qk_nope_head_dim=mc.qk_nope_head_dim,
                qk_rope_head_dim=mc.qk_rope_head_dim, indexer_head_dim=mc.index_head_dim, layer_num=n,
                device="meta", enable_memory_saver=False, compression_ratios=mc.compress_ratios, start_layer=0,
                end_layer=n, kv_source_layers=list(mc.hf_config.kv_source_layer_ids),
                full_size=config.full_max_total_num_tokens, kv_layout=layout, compressed_kv_layout=compressed)
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.removeHandler(handler)
            lg.setLevel(level)
    ratios = mc.compress_ratios[:n]
    states = [(ratios[i], p) for i, p in enumerate(pool.compress_state_pools[:n]) if p is not None]
    index_states = [(ratios[i], p) for i, p in enumerate(pool.indexer_compress_state_pools[:n]) if p is not None]
    pools = {"swa": _bytes(pool.swa_kv_pool.kv_buffer)}
    for ratio, kv in pool.kv_pools.items():
        if kv is not None and kv.layer_num:
            pools[f"c{ratio}"] = _bytes(kv.kv_buffer)
    for ratio, index in pool.index_pools.items():
        if index.layer_num:
            pools[f"c{ratio}_index"] = _bytes(index.index_k_with_scale_buffer)
    for ratio in (4, 128):
        if any(r == ratio for r, _ in states):
            pools[f"c{ratio}_state"] = _bytes(p.kv_score_buffer.kv_score for r, p in states if r == ratio)
        if any(r == ratio for r, _ in index_states):
            pools[f"c{ratio}_index_state"] = _bytes(p.kv_score_buffer.kv_score for r, p in index_states if r == ratio)
    return {"error": None, "full": config.full_max_total_num_tokens, "swa": config.swa_max_total_num_tokens,
            "c4": config.c4_max_total_num_tokens, "c128": config.c128_max_total_num_tokens,
            "c4_state": config.c4_state_pool_size, "c128_state": config.c128_state_pool_size,
            "max_running_requests": config.max_running_requests, "pools": pools,
            "log": [line for line in lines if line.startswith(_KEEP)]}

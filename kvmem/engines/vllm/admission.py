"""How many requests vLLM admits at once from a KV budget (SizingRules.pools_refuse).

Bytes alone do not decide it. vLLM 0.33's scheduler admits a waiting request only when the free blocks
hold its whole length (scheduler_reserve_full_isl, on by default), counting in every KV group the blocks
that "Maximum concurrency" counts: a full-attention group cdiv(length, block) pages, a sliding-window or
chunked-local group the window plus the in-flight tokens (max_admission_blocks_per_request), a Mamba
group its state pages. So at most floor(Maximum concurrency) requests of max_model_len run at once,
though their steady-state bytes are fewer: gemma-3-27b, 8,920 tokens, vLLM's 4.17x on the KV budget
kvmem.fit gives one A100-80GB, where the byte count said 17 (tests/oracles/test_hybrid_verdicts_oracle.py).
"""

from __future__ import annotations

import math

from ...model import Model
from .options import LATEST, OPTIONS, parse_release
from .parallel import dcp_capacity

# vllm@v0.33.0 vllm/v1/core/kv_cache_manager.py#L531-L548 allocate_slots(full_sequence_must_fit): the request's
#   full-length blocks (apply_admission_cap) must be free, else it waits
# vllm@v0.33.0 vllm/v1/core/sched/scheduler.py#L1449 full_sequence_must_fit=scheduler_reserve_full_isl;
#   vllm/config/scheduler.py#L190 scheduler_reserve_full_isl: bool = True; #L196 watermark 0.0
# vllm@v0.33.0 vllm/v1/core/single_type_kv_cache_manager.py#L214-L227: the cap equals the startup pool sizer's
#   (kv_cache_interface.py max_admission_blocks_per_request), so admission agrees with
#   kv_cache_utils.py#L1061-L1092 get_max_concurrency_for_kv_cache_config
RESERVES_FULL_LENGTH = LATEST   # checked in 0.33.0; older releases keep the byte rule (not checked)


def pools_refuse(model: Model, *, kv_memory: int, tokens: int, batch: int, kv_dtype, tp: int, pp: int,
                 **options) -> str | None:
    """Why vLLM does not admit ``batch`` requests of ``tokens`` tokens at once from ``kv_memory`` (None: it does)."""
    release = parse_release(options.get("version", "latest"))
    if release is None or release < RESERVES_FULL_LENGTH:
        return None
    # through decode context parallelism's wrapper: a request's tokens over its dcp ranks
    cap = dcp_capacity(model, kv_memory=kv_memory, kv_dtype=kv_dtype, tp=tp, pp=pp, max_model_len=tokens,
                       **{k: v for k, v in options.items() if k in OPTIONS or k == "decode_context_parallel_size"})
    if cap.refusal is not None:
        return cap.refusal.reason
    if cap.max_concurrency is None:
        return None
    admitted = math.floor(cap.max_concurrency)
    if batch <= admitted:
        return None
    return (f"vLLM admits {admitted:,} request{'s' if admitted != 1 else ''} of {tokens:,} tokens at once "
            f"(Maximum concurrency {cap.max_concurrency:.2f}x): each waiting request needs its whole length's "
            f"blocks free in every KV group, a sliding window's at window + in-flight tokens "
            f"(scheduler_reserve_full_isl), fewer than {batch:,}")

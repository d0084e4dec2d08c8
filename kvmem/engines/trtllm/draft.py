"""TensorRT-LLM's split of one KV budget between the target's cache and a one-model draft's (TRT-LLM#12188).

Read in NVIDIA/TensorRT-LLM tensorrt_llm/_torch/pyexecutor/_util.py at d8ae02ca (the one version the search
index stores; kvmem's TRT-LLM pin 001541ba could not be read, kvmem.engines.trtllm), KvCacheCreator:
    _get_target_and_draft_cache_costs   each cost is affine in tokens, CacheCost(slope, intercept): the slope
                                        bytes per token, the intercept GPU-resident state (Mamba SSM state);
                                        the draft's = the aggregate's (target + draft layers) less the target's
    _compute_draft_budget_shares        draft = draft.intercept + int((B - t.intercept - d.intercept) x d.slope
                                        / (t.slope + d.slope)); target = B - draft
    _split_kv_cache_budget_for_draft    the split of max_gpu_total_bytes (and of host_cache_size, whose split
                                        drops the intercepts: host memory holds no GPU state); a GPU budget not
                                        above the two intercepts raises ValueError ("KV cache GPU budget (X GiB)
                                        is smaller than the combined fixed cost ...")
It applies where the draft keeps a separate KV cache manager (one-model speculative decoding with
KVCacheManagerV2: _needs_gpu_kv_cache_budget_split). Each manager then sizes its own pool from its share.
Not wired into kvmem.fit: the rule is read at d8ae02ca, not at kvmem's pin.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...units import require_positive_int

__all__ = ["CacheCost", "split_budget", "mtp_costs"]

GIB = 1 << 30


@dataclass(frozen=True)
class CacheCost:
    slope: int            # bytes per token
    intercept: int = 0    # fixed bytes (GPU-resident state)


def split_budget(total: int, target: CacheCost, draft: CacheCost, *,
                 budget: str = "max_gpu_total_bytes") -> tuple[int, int]:
    """(target bytes, draft bytes) of ``total`` as _compute_draft_budget_shares splits them (module docstring)."""
    require_positive_int("total", total)
    if budget not in ("max_gpu_total_bytes", "host_cache_size"):
        raise ValueError(f"budget must be 'max_gpu_total_bytes' or 'host_cache_size', got {budget!r}")
    for name, cost in (("target", target), ("draft", draft)):
        if cost.slope <= 0 or cost.intercept < 0:
            raise ValueError(f"{name} cost must have a positive slope and no negative intercept, got {cost}")
    if budget != "max_gpu_total_bytes":      # host memory holds no GPU-resident state: the slopes alone
        target, draft = CacheCost(target.slope), CacheCost(draft.slope)
    fixed = target.intercept + draft.intercept
    if total - fixed <= 0:
        raise ValueError(f"TensorRT-LLM raises ValueError: KV cache GPU budget ({total / GIB:.2f} GiB) is smaller "
                         f"than the combined fixed cost ({fixed / GIB:.2f} GiB, e.g. mamba SSM state) for "
                         "target+draft")
    draft_bytes = draft.intercept + int((total - fixed) * draft.slope / (target.slope + draft.slope))
    return total - draft_bytes, draft_bytes


def mtp_costs(model, *, kv_dtype="auto", tp: int = 1) -> tuple[CacheCost, CacheCost]:
    """The target's and its MTP draft's per-token costs for a one-pool model whose MTP layers repeat its
    attention (DeepSeek-V3's nextn layer): the draft's slope is the aggregate's less the target's, i.e.
    mtp_layers x the bytes of one of its layers."""
    from .cache import bytes_per_token
    if not model.mtp_layers:
        raise ValueError(f"{model.name} has no MTP layers (num_nextn_predict_layers): give the draft's costs")
    if len({layer.kind for layer in model.layers}) != 1:
        raise ValueError(f"{model.name}: its layers are not all alike, so one MTP layer's bytes are not "
                         "the target's per layer; give the draft's costs")
    target = bytes_per_token(model, kv_dtype=kv_dtype, tp=tp)
    if target % model.num_layers:
        raise ValueError(f"{model.name}: {target} B per token does not split evenly over {model.num_layers} layers")
    return CacheCost(target), CacheCost(target // model.num_layers * model.mtp_layers)

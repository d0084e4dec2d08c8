"""TensorRT-LLM's speculative draft KV cache beside the target's, and the split of one KV budget between them
(TRT-LLM#12188), as KvCacheCreator does it
(trtllm@065ff9e9 tensorrt_llm/_torch/pyexecutor/_util.py#L308-L1955; the lines of each step below):

  cost      each manager's cost is affine in tokens, CacheCost(slope, intercept) (#L308-L347): the slope bytes a
            token, the intercept GPU-resident state (Mamba SSM state); _get_kv_size_per_token (#L714-L770) adds the
            draft's manager (two-model, or one-model with a separate draft cache) to the target's
  tokens    a one-window KVCacheManager target: max_tokens = budget // (target + draft slope) (#L1269-L1271), and
            both managers are built with it: no byte split (#L1937-L1938); cache.capacity applies it
  split     a target whose managers size pools from bytes (KVCacheManagerV2, or variable windows) splits
            max_gpu_total_bytes first (#L1893-L1909, #L1936-L1944): the draft's cost is the aggregate's less the
            target's (#L1524-L1545); draft = its intercept + int((B - both intercepts) x draft slope / both slopes),
            target = B - draft (#L1547-L1566); host_cache_size drops the intercepts (#L1618-L1620); a GPU budget not
            above the intercepts raises ValueError (#L1624-L1638)
The option (cache.DEFAULTS "draft"): "mtp" -- the model's num_nextn_predict_layers MTP layers, which take the target's
own config (#L1388-L1413) -- or a draft model (a kvmem Model or a preset name).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...model import Model
from ...units import require_positive_int

__all__ = ["CacheCost", "split_budget", "read_draft"]

GIB = 1 << 30


@dataclass(frozen=True)
class CacheCost:
    slope: int            # bytes per token
    intercept: int = 0    # fixed bytes (GPU-resident state)


def read_draft(draft):
    """The draft option: None, "mtp", or a Model (a preset name is read as one)."""
    if draft is None or draft == "mtp" or isinstance(draft, Model):
        return draft
    if isinstance(draft, str):
        from ...catalog import get_model
        return get_model(draft)
    raise ValueError(f"draft must be 'mtp', a kvmem Model or a preset name, got {type(draft).__name__}")


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

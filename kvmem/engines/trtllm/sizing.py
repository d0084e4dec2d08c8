"""TensorRT-LLM's memory budget for kvmem.sizing and its prefix sharing (whole blocks)."""

from __future__ import annotations

from ...activations import forward_bytes_per_token, forward_shape
from ...units import require_positive_int
from ..base import (
    Budget,
    BudgetRequest,
    PrefixSharing,
    SizingRules,
    StartupNumbers,
    fraction_option,
    share_whole_blocks,
)
from ..budget import kv_budget
from ..results import Estimate

__all__ = ["SIZING", "prefix_sharing"]


# kv = (total - weights - activation peak - non-torch) x free_gpu_memory_fraction (0.9)
# (tensorrt_llm/_torch/pyexecutor/_util.py KvCacheCreator: the fraction applies to what the
# profiling peak leaves; checked: (119.70 - 113.65 + 0.56) x 0.9 = 5.95 GiB). The peak is the
# forward at max_num_tokens (8192, the LLM API default; kvmem.activations); non-torch 1 GiB,
# a typical value read off logs.

NON_TORCH_BYTES = 1 << 30
SIZING_OPTIONS = {"weights_bytes": None, "activation_bytes": None, "non_torch_bytes": None,
                  "free_gpu_memory_fraction": 0.9, "max_num_tokens": 8192, "host_memory_bytes": None}


def _budget(req: BudgetRequest) -> Budget:
    opts = req.sizing_options
    fraction = fraction_option("free_gpu_memory_fraction", opts["free_gpu_memory_fraction"])
    act = req.activation_bytes
    if act is None:
        act = require_positive_int("max_num_tokens", opts["max_num_tokens"]) * forward_bytes_per_token(
            forward_shape(req.model), req.tp)
    total = req.gpu.usable_memory_bytes
    # of free: TRT-LLM gives the KV cache free_gpu_memory_fraction of the memory free after loading
    # the weights and profiling the activations (tensorrt_llm/_torch/pyexecutor/_util.py)
    kv = kv_budget("of_free", total=total, weights=req.weights_bytes, activations=act,
                   overhead=req.non_torch_bytes, fraction=fraction)
    return Budget(total, req.weights_bytes, act, req.non_torch_bytes, kv)


def prefix_sharing(options: dict, est: Estimate) -> PrefixSharing:
    """Block reuse shares whole blocks of tokens_per_block tokens."""
    return share_whole_blocks("tokens_per_block", options, est)


# Replicated weights: duplicate_kv_weight (tensorrt_llm/_torch/models/modeling_utils.py) repeats each
# K/V head tp // kv_heads times when tp exceeds them, a whole head per rank; MLA's kv_a_proj_with_mqa
# is a Linear without a tensor-parallel mode (tensorrt_llm/_torch/modules/attention.py): whole on each rank.
SIZING = SizingRules(budget=_budget, options=SIZING_OPTIONS, non_torch_bytes=NON_TORCH_BYTES, preallocates=True,
                     fraction_option="free_gpu_memory_fraction", loads_fp32_as_fp16=True,
                     replicates_kv_weights=True,
                     startup=StartupNumbers("max_tokens (paged KV cache)",
                                            "the free memory after TRT-LLM's profiling run, which kvmem estimates",
                                            "outside TRT-LLM's budget (1 − free_gpu_memory_fraction)"))

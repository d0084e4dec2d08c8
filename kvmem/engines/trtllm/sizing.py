"""TensorRT-LLM's memory budget for kvmem.sizing and its prefix sharing (whole blocks)."""

from __future__ import annotations

from ...activations import forward_bytes_per_token, forward_shape
from ...model import Model
from ...units import format_bytes, require_positive_int
from ..base import (
    Budget,
    BudgetRequest,
    PrefixSharing,
    SizingRules,
    StartupNumbers,
    byte_option,
    fraction_option,
    share_whole_blocks,
)
from ..budget import kv_budget
from ..results import Estimate
from . import draft as spec_draft

__all__ = ["SIZING", "prefix_sharing"]


# kv = (total - weights - activation peak - non-torch - multimodal encoder reserve) x free_gpu_memory_fraction (0.9)
# (trtllm@065ff9e9 tensorrt_llm/_torch/pyexecutor/_util.py#L772-L789 _cal_max_memory: the fraction applies to what the
# profiling peak leaves; checked: (119.70 - 113.65 + 0.56) x 0.9 = 5.95 GiB). The peak is the forward at
# max_num_tokens (8192, the LLM API default; kvmem.activations); non-torch 1 GiB, a typical value read off logs.

NON_TORCH_BYTES = 1 << 30
SIZING_OPTIONS = {"weights_bytes": None, "activation_bytes": None, "non_torch_bytes": None,
                  "free_gpu_memory_fraction": 0.9, "max_num_tokens": 8192, "host_memory_bytes": None,
                  "encoder_cache_max_bytes": None}
# The multimodal encoder cache: a VL model whose class keeps it (encoder_cache_active) adds
# multimodal_config.encoder_cache_max_bytes to the profiled peak before the fraction is applied
# (trtllm@065ff9e9 tensorrt_llm/_torch/pyexecutor/_util.py#L920-L936 _get_multimodal_encoder_memory_reserve,
# #L1181-L1194 peak_memory += the reserve, then _cal_max_memory). Which classes keep it (supports_encoder_cache) and
# MultimodalConfig's default are not in the code stored at the pin: kvmem reserves it when it is given.


def _budget(req: BudgetRequest) -> Budget:
    opts = req.sizing_options
    fraction = fraction_option("free_gpu_memory_fraction", opts["free_gpu_memory_fraction"])
    act = req.activation_bytes
    if act is None:
        act = require_positive_int("max_num_tokens", opts["max_num_tokens"]) * forward_bytes_per_token(
            forward_shape(req.model), req.tp)
    total = req.gpu.usable_memory_bytes
    encoder, notes = _encoder_reserve(req.model, opts.get("encoder_cache_max_bytes"))
    # of free: TRT-LLM gives the KV cache free_gpu_memory_fraction of the memory free after loading
    # the weights and profiling the activations, the encoder reserve counted in the peak (SIZING_OPTIONS' note)
    kv = kv_budget("of_free", total=total, weights=req.weights_bytes, activations=act,
                   overhead=req.non_torch_bytes + encoder, fraction=fraction)
    return Budget(total, req.weights_bytes, act, req.non_torch_bytes + encoder, kv, notes)


def _encoder_reserve(model: Model, value) -> tuple[int, tuple[str, ...]]:
    """The multimodal encoder cache's bytes TensorRT-LLM keeps out of the KV budget (SIZING_OPTIONS' note)."""
    if value is None:
        return 0, ()
    if isinstance(value, bool):
        raise ValueError(f"encoder_cache_max_bytes must be a byte count (an int or a string like '128MiB'), "
                         f"got {value!r}")
    value = byte_option("encoder_cache_max_bytes", value)
    if value and not isinstance(model.config.get("vision_config"), dict):
        # trtllm@065ff9e9 tensorrt_llm/_torch/pyexecutor/_util.py#L931-L933: only a MultimodalModelMixin model
        raise ValueError(f"encoder_cache_max_bytes: {model.name} has no vision_config; TensorRT-LLM reserves the "
                         "multimodal encoder cache only for multimodal models (_get_multimodal_encoder_memory_reserve)")
    if not value:
        return 0, ()
    return value, (f"multimodal encoder cache: {format_bytes(value)} (encoder_cache_max_bytes) kept out of the KV "
                   "budget, as TensorRT-LLM adds it to the profiled peak",)


def _weights_per_device(weights, model: Model, *, tp: int, pp: int, dp: int = 1,
                        options: dict) -> tuple[int, tuple[str, ...]]:
    """The target's weights on the most loaded device, and a draft model's beside them, in its own dtype: two-model
    speculative decoding loads the draft engine before the memory is profiled, so its weights are in the peak
    (trtllm@065ff9e9 tensorrt_llm/_torch/pyexecutor/_util.py#L1074-L1194 configure_kv_cache_capacity)."""
    del model, dp
    base = weights.per_device(tp=tp, pp=pp, replicated=True)
    draft = spec_draft.read_draft(options.get("draft"))
    if not isinstance(draft, Model):
        return base, ()
    from ...weights import weights as weights_of
    extra = weights_of(draft, draft.dtype).per_device(tp=tp, pp=pp, replicated=True)
    return base + extra, (f"weights include the draft {draft.name}'s, {format_bytes(extra)} a device",)


def prefix_sharing(options: dict, est: Estimate) -> PrefixSharing:
    """Block reuse shares whole blocks of tokens_per_block tokens."""
    return share_whole_blocks("tokens_per_block", options, est)


# Replicated weights: duplicate_kv_weight (tensorrt_llm/_torch/models/modeling_utils.py) repeats each
# K/V head tp // kv_heads times when tp exceeds them, a whole head per rank; MLA's kv_a_proj_with_mqa
# is a Linear without a tensor-parallel mode (tensorrt_llm/_torch/modules/attention.py): whole on each rank.
SIZING = SizingRules(budget=_budget, options=SIZING_OPTIONS, non_torch_bytes=NON_TORCH_BYTES, preallocates=True,
                     fraction_option="free_gpu_memory_fraction", loads_fp32_as_fp16=True,
                     replicates_kv_weights=True, weights_per_device=_weights_per_device,
                     startup=StartupNumbers("max_tokens (paged KV cache)",
                                            "the free memory after TRT-LLM's profiling run, which kvmem estimates",
                                            "outside TRT-LLM's budget (1 − free_gpu_memory_fraction)"))

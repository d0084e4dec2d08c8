"""What kvmem.sizing asks of transformers: the memory budget of one device, and prefix sharing.

One device per model copy: weights + the cache (its transient peak: DynamicCache grows by
torch.cat) + activations + 512 MiB of CUDA context (a typical value). Activations: the prompt
runs at once, batch x context x the forward per token (kvmem.activations), plus the last
token's logits in fp32 and their softmax, batch x vocab x 8 B.
"""

from __future__ import annotations

from ...activations import forward_bytes_per_token, forward_shape
from ...model import Model
from ..base import Budget, BudgetRequest, PrefixSharing, SizingRules
from ..budget import kv_budget

NON_TORCH_BYTES = 512 << 20
SIZING_OPTIONS = {"weights_bytes": None, "activation_bytes": None, "non_torch_bytes": None, "host_memory_bytes": None}
HF_WEIGHT_FORMATS = ("int8", "awq")


def hf_activation_bytes(model: Model, *, batch: int, context: int) -> int:
    """transformers' forward over the whole prompt plus the last-token logits and softmax."""
    shape = forward_shape(model)
    return batch * context * forward_bytes_per_token(shape, 1) + batch * shape.vocab * 8


def _budget(req: BudgetRequest) -> Budget:
    act = req.activation_bytes
    if act is None:
        act = hf_activation_bytes(req.model, batch=req.batch, context=req.context)
    total = req.gpu.usable_memory_bytes
    # reserve: transformers allocates the cache as it grows, no fraction held back: all that the
    # weights, the forward's activations and the CUDA context leave can hold KV
    return Budget(total, req.weights_bytes, act, req.non_torch_bytes,
                  kv_budget("reserve", total=total, weights=req.weights_bytes, activations=act,
                            overhead=req.non_torch_bytes))


def prefix_sharing(_options: dict, _est) -> PrefixSharing:
    """None: every sequence holds its own row, so a shared prefix is only a what-if."""
    return PrefixSharing(notes=("transformers caches keep one row per sequence and share nothing: "
                                "prefix sharing is a what-if",))


SIZING = SizingRules(budget=_budget, options=SIZING_OPTIONS, non_torch_bytes=NON_TORCH_BYTES, batch_dependent=True,
                     one_device=True, kv_smaller_dtype=None, weight_formats=HF_WEIGHT_FORMATS)

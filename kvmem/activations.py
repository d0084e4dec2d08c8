"""The forward pass's live activations per token: the shared model engines' budgets build on.

At the MLP of a layer the residual, its norm, gate_up (2 I), act(I) and down (H) are alive,
plus the all-reduce output under tensor parallelism; an MoE layer's fused-MoE caches hold
top_k x (3 I_moe/tp + H) per token instead (and the shared experts 3 I_shared/tp):

    forward bytes per token = (max(3 H + 3 I/tp, 3 H + top_k (3 I_moe/tp + H) + 3 I_shared/tp)
                               [+ H when tp > 1]) x 2 B      (activations in bf16/fp16)

A documented estimate, checked against vLLM logs (kvmem.engines.vllm); each engine module
says how its own profiler or allocator uses it.
"""

from __future__ import annotations

from dataclasses import dataclass

from .model import Model

__all__ = ["ForwardShape", "forward_shape", "forward_bytes_per_token", "ACTIVATION_BYTES"]

ACTIVATION_BYTES = 2                 # activations in bf16/fp16


@dataclass(frozen=True)
class ForwardShape:
    """The widths the forward pass's activations scale with."""

    hidden: int
    intermediate: int        # dense MLP width (0 when every layer is MoE)
    moe_intermediate: int
    shared_intermediate: int
    top_k: int
    vocab: int
    heads: int


def forward_shape(model: Model) -> ForwardShape:
    """The forward pass's widths, from the facts the config reader put on ``model``."""
    facts = model.facts
    moe = facts.moe
    inter = facts.intermediate_size
    moe_inter = shared = 0
    if moe is not None:
        moe_inter = moe.intermediate_size or inter
        shared = moe.shared_intermediate_size
        inter = moe.dense_intermediate_size
    elif not inter:
        inter = 4 * model.hidden_size
    return ForwardShape(model.hidden_size, inter, moe_inter, shared, moe.top_k if moe else 0,
                        facts.vocab_size, model.num_attention_heads)


def forward_bytes_per_token(shape: ForwardShape, tp: int) -> int:
    """Bytes of activations alive per token of a forward batch on one tensor-parallel rank."""
    h = shape.hidden
    dense = 3 * h + 3 * shape.intermediate // tp if shape.intermediate else 0
    moe = 0
    if shape.top_k:
        moe = 3 * h + shape.top_k * (3 * shape.moe_intermediate // tp + h) + 3 * shape.shared_intermediate // tp
    return (max(dense, moe) + (h if tp > 1 else 0)) * ACTIVATION_BYTES

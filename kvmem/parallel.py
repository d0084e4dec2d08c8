"""How tensor and pipeline parallelism split a model: the one home of these rules.

Tensor parallelism splits KV heads: a rank holds kv_heads // tp heads, or one replicated
head when tp >= kv_heads (tp must then be a multiple of kv_heads) — vLLM
``get_num_kv_heads`` (vllm/config/model.py), SGLang and TensorRT-LLM likewise. MLA's latent
has no heads and is replicated on every rank; a recurrent state splits over its heads. A
rank above the KV heads keeps whole replicated heads, weights included: 1 - heads/tp of their
K/V projections beyond an even share (vLLM QKVParallelLinear; MLA's down-projections as one head).
Where tp must split a count (heads, channels, groups) evenly, ``divides`` is the test and
``require_divides`` the error; an engine whose own message kvmem mirrors raises it itself.
Pipeline parallelism gives each stage a run of layers, so pp may not exceed them: n // pp
each, the remainder one apiece to the stages before the last (vLLM ``get_pp_indices``,
vllm/distributed/utils.py).
"""

from __future__ import annotations

from fractions import Fraction

from .layer import MLA, Layer
from .units import require_positive_int

MAX_PARALLEL = 65536  # tp and pp: far above any deployment (and any head or layer count kvmem reads)

__all__ = ["MAX_PARALLEL", "check_parallel", "kv_heads_per_rank", "pp_stages", "largest_stage", "layer_heads",
           "state_share", "divides", "require_divides", "kv_heads_split", "check_pp_layers",
           "replicated_excess", "attention_tp", "check_expert_parallel", "expert_share", "gpus_of"]


def divides(tp: int, count: int) -> bool:
    """``tp`` splits ``count`` (heads, channels, groups) evenly over its ranks."""
    return count % tp == 0


def require_divides(tp: int, count: int, what: str, *, owner: str = "", why: str = "") -> None:
    """tp must split ``count`` ``what`` evenly: "tp=8 must divide the model's 28 attention heads"."""
    if not divides(tp, count):
        raise ValueError(f"tp={tp} must divide the {owner}{count} {what}" + (f": {why}" if why else ""))


def kv_heads_split(kv_heads: int, tp: int) -> bool:
    """tp splits the KV heads evenly, or (tp above them) is a multiple of them, one replicated head a rank."""
    return divides(tp, kv_heads) if tp < kv_heads else divides(kv_heads, tp)


def kv_heads_per_rank(kv_heads: int, tp: int) -> int:
    """KV heads one tensor-parallel rank holds: kv_heads // tp, or 1 (replicated) if tp >= kv_heads."""
    if tp >= kv_heads:
        if not divides(kv_heads, tp):
            raise ValueError(f"tp={tp} must be a multiple of the {kv_heads} KV heads when it exceeds them")
        return 1
    require_divides(tp, kv_heads, "KV heads")
    return kv_heads // tp


def replicated_excess(heads: int, tp: int) -> Fraction:
    """What a rank holds of ``heads`` heads' weights beyond an even 1/tp share: 1 - heads/tp when tp
    exceeds them (each rank keeps a whole replicated head), else 0. MLA's latent is one head."""
    return 1 - Fraction(heads, tp) if tp > heads else Fraction(0)


def check_pp_layers(pp: int, n_layers: int) -> None:
    """Every pipeline stage holds at least one layer: pp may not exceed the layers."""
    if pp > n_layers:
        raise ValueError(f"pp={pp} exceeds the model's {n_layers} layers")


def pp_stages(n_layers: int, pp: int) -> list[range]:
    """Layer ranges per pipeline stage: n // pp each, the remainder to the stages before the last."""
    check_pp_layers(pp, n_layers)
    sizes = [n_layers // pp] * pp
    for i in range(2, n_layers % pp + 2):
        sizes[-i] += 1
    stages, start = [], 0
    for size in sizes:
        stages.append(range(start, start + size))
        start += size
    return stages


def check_parallel(tp, pp) -> tuple[int, int]:
    return require_positive_int("tp", tp, MAX_PARALLEL), require_positive_int("pp", pp, MAX_PARALLEL)


def largest_stage(rows: list[tuple[int, int, int]], stages: list[range]) -> range:
    """The pipeline stage whose layers hold the most bytes (the device a report is about)."""
    totals = [sum(sum(rows[i]) for i in stage) for stage in stages]
    return stages[max(range(len(stages)), key=lambda s: totals[s])]


def layer_heads(layer: Layer, tp: int) -> int:
    """KV heads of ``layer`` on one rank (MLA: its single latent 'head', never split)."""
    if layer.kind == MLA or not layer.kv_heads:
        return 1
    return kv_heads_per_rank(layer.kv_heads, tp)


def state_share(elements: int, heads: int, tp: int) -> int:
    """A recurrent state's elements on one rank: split over its heads by tp."""
    if tp > 1:
        require_divides(tp, heads, "recurrent-state heads")
    return elements // tp if tp > 1 else elements


# ---- past one server: data-parallel attention, expert parallelism, nodes (issue 36) -------------------
#
# Data-parallel attention (SGLang --attn-dp-size, formerly --dp-size N --enable-dp-attention) splits the
# tp ranks into attn_dp groups of attn_tp = tp // attn_dp: attention weights and the KV cache split over
# attn_tp only, and each group keeps its own requests and its own KV pool, while the MoE layers stay
# over all tp ranks (sglang@v0.5.23 python/sglang/srt/runtime_context.py#L73-L76 derive_attn_tp_size).
# Expert parallelism: ep ranks each hold (experts + redundant) // ep routed experts, each of them split
# again over moe_tp = tp // ep (sglang@v0.5.23 python/sglang/srt/layers/moe/fused_moe_triton/layer.py
# #L403-L416): one rank holds (experts + redundant) / (experts x tp) of the routed experts' bytes, so
# without redundant experts ep moves experts between ranks but not bytes.


def attention_tp(tp: int, attn_dp: int) -> int:
    """The attention TP width under data-parallel attention: tp // attn_dp (attn_dp must divide tp)."""
    if tp % attn_dp:
        # sglang@v0.5.23 python/sglang/srt/arg_groups/parallel_hook.py#L326 assert tp_size % attn_dp_size == 0
        raise ValueError(f"attn_dp_size={attn_dp} must divide tp={tp} (attention groups of tp // attn_dp_size ranks)")
    return tp // attn_dp


def check_expert_parallel(tp: int, ep: int, experts: int, redundant: int = 0) -> int:
    """Routed experts (physical: with ``redundant`` copies) one EP rank holds; ep must divide tp and them."""
    if tp % ep:
        raise ValueError(f"ep_size={ep} must divide tp={tp} (moe_tp = tp // ep_size ranks split each expert)")
    physical = experts + redundant
    if physical % ep:
        raise ValueError(f"ep_size={ep} must divide the {physical} physical experts ({experts} routed + {redundant} "
                         "redundant): each EP rank holds an equal share")
    return physical // ep


def expert_share(tp: int, experts: int, redundant: int = 0) -> Fraction:
    """What one rank holds of the routed experts' bytes: (experts + redundant) / (experts x tp), whatever ep."""
    return Fraction(experts + redundant, experts * tp)


def gpus_of(nodes: int, gpus_per_node: int) -> int:
    """GPUs in all: nodes x GPUs per node (SGLang --nnodes, vLLM's ranks over hosts)."""
    require_positive_int("nodes", nodes, MAX_PARALLEL)
    require_positive_int("gpus_per_node", gpus_per_node, MAX_PARALLEL)
    return nodes * gpus_per_node

"""vLLM past one tensor-parallel group: data-parallel replicas and expert parallelism (issue 36).

--data-parallel-size D runs D engine replicas of tp x pp GPUs, each with its own KV pool, its own budget and its
own requests (kvmem: the extra GPUs are replicas, Setup.replicas). Their MoE layers are not replicated: vLLM
flattens the MoE layers' tensor parallelism across the replicas, tp_moe = tp x D
(vllm@v0.33.0 vllm/model_executor/layers/fused_moe/config.py#L1194-L1203 FusedMoEParallelConfig.make,
flatten_tp_across_dp_and_pcp), so a rank holds 1 / (tp x D) of the routed experts whether or not
--enable-expert-parallel is given. With it, ep = tp x D ranks hold whole experts instead
(config.py#L1219-L1233): global // ep each and one more on the first global % ep ranks
(vllm@v0.33.0 vllm/model_executor/layers/fused_moe/expert_map_manager.py#L66-L69 determine_expert_map), so the
most loaded rank holds ceil((E + R) / ep) of the E + R physical experts, R the EPLB redundant experts
(--eplb-config '{"num_redundant_experts": R}' with --enable-eplb; vllm@v0.33.0 vllm/config/parallel.py#L77,
#L586-L591: R without EPLB is an error). Attention, dense MLPs and embeddings stay per replica over tp.

Sizing options (kvmem.engines.vllm.budget SIZING_OPTIONS): enable_expert_parallel, num_redundant_experts.
"""

from __future__ import annotations

from fractions import Fraction

from ...model import Model
from ...parallel import pp_stages
from ...units import cdiv

__all__ = ["PARALLEL_OPTIONS", "weights_per_device"]

PARALLEL_OPTIONS = {
    "enable_expert_parallel": False,   # vllm@v0.33.0 vllm/config/parallel.py#L190 enable_expert_parallel
    "num_redundant_experts": 0,        # vllm@v0.33.0 vllm/config/parallel.py#L77 EPLBConfig.num_redundant_experts
}


def _settings(options: dict) -> tuple[bool, int]:
    ep = options.get("enable_expert_parallel", False)
    if not isinstance(ep, bool):
        raise ValueError(f"enable_expert_parallel must be True or False, got {ep!r}")
    redundant = options.get("num_redundant_experts", 0)
    if isinstance(redundant, bool) or not isinstance(redundant, int) or redundant < 0:
        raise ValueError(f"num_redundant_experts must be a non-negative integer, got {redundant!r}")
    if redundant and not ep:
        raise ValueError("num_redundant_experts needs enable_expert_parallel: vLLM 0.33.0 places redundant experts "
                         "with EPLB, which runs under expert parallelism only (vllm/config/parallel.py)")
    return ep, redundant


def weights_per_device(weights, model: Model, *, tp: int, pp: int, dp: int = 1,
                       options: dict) -> tuple[int, tuple[str, ...]]:
    """Weight bytes on the most loaded GPU of ``dp`` replicas of tp x pp (module docstring)."""
    ep, redundant = _settings(options)
    base = weights.per_device(tp=tp, pp=pp, replicated=True)
    moe = model.facts.moe
    if moe is None or not moe.experts or not weights.expert_bytes:
        if ep:
            raise ValueError(f"enable_expert_parallel splits routed experts; {model.name} has none")
        return base, ()
    if dp == 1 and not ep:
        return base, ()
    ranks = tp * dp
    largest = max(len(stage) for stage in pp_stages(weights.layout.n_layers, pp))
    stage_experts = Fraction(weights.expert_bytes * largest, weights.layout.n_layers)   # as Weights.per_device
    if ep:
        held = Fraction(cdiv(moe.experts + redundant, ranks), moe.experts)
        note = (f"expert parallel over {ranks} ranks (tp {tp} x {dp} replicas): up to "
                f"{cdiv(moe.experts + redundant, ranks)} of {moe.experts + redundant} experts a GPU")
    else:
        held = Fraction(1, ranks)
        note = f"routed experts split over tp x replicas = {ranks} GPUs (vLLM flattens MoE tensor parallelism over DP)"
    return base + int(stage_experts * (held - Fraction(1, tp))), (note,)

"""vLLM 0.33.0's own MoE placement, run on the CPU, as the judge of kvmem's expert share per GPU under
--data-parallel-size and --enable-expert-parallel (kvmem.engines.vllm.parallel).

For each rank (tp_rank, dp_rank) of tp x dp GPUs: FusedMoEParallelConfig.make(tp, 1, dp, 1, ParallelConfig(
enable_expert_parallel=...)) (vllm/model_executor/layers/fused_moe/config.py), with the rank published
through patched get_dp_group / get_tensor_model_parallel_rank, gives the MoE tp and ep widths and the rank's
ep_rank; determine_expert_map(ep_size, ep_rank, experts + redundant) (fused_moe/expert_map_manager.py) gives
its local experts. The most loaded rank holds local / (experts x moe_tp) of the routed experts' bytes; kvmem's
weights_per_device must add exactly (that - 1/tp) x the routed experts' bytes to Weights.per_device.
vLLM's code is not edited.
"""

from __future__ import annotations

import random
import types
from fractions import Fraction
from unittest import mock

from .report import Check

__all__ = ["vllm_share", "cases", "random_case", "run_case"]

MODELS = ("deepseek-v3", "qwen3-30b-a3b", "kimi-k2-instruct", "gpt-oss-120b", "qwen3-235b-a22b")


def vllm_share(*, tp: int, dp: int, experts: int, redundant: int, expert_parallel: bool) -> Fraction:
    """The largest share of the routed experts' bytes one GPU holds, as vLLM places them."""
    from vllm.config import ParallelConfig
    from vllm.model_executor.layers.fused_moe import config as moe_config
    from vllm.model_executor.layers.fused_moe.expert_map_manager import determine_expert_map
    parallel = ParallelConfig(enable_expert_parallel=expert_parallel)
    best = Fraction(0)
    for dp_rank in range(dp):
        for tp_rank in range(tp):
            group = types.SimpleNamespace(rank_in_group=dp_rank)
            with mock.patch.object(moe_config, "get_dp_group", lambda g=group: g), \
                    mock.patch.object(moe_config, "get_tensor_model_parallel_rank", lambda r=tp_rank: r):
                made = moe_config.FusedMoEParallelConfig.make(tp, 1, dp, 1, parallel)
            local, _map, _mask = determine_expert_map(made.ep_size, made.ep_rank, experts + redundant)
            best = max(best, Fraction(local, experts * made.tp_size))
    return best


def cases() -> list[tuple[str, dict]]:
    return [("deepseek-v3 tp8 dp2", dict(model="deepseek-v3", tp=8, dp=2, ep=False, redundant=0)),
            ("deepseek-v3 tp8 dp2 ep r32", dict(model="deepseek-v3", tp=8, dp=2, ep=True, redundant=32)),
            ("qwen3-30b-a3b tp1 dp2 ep", dict(model="qwen3-30b-a3b", tp=1, dp=2, ep=True, redundant=0)),
            ("qwen3-30b-a3b tp1 dp3 ep (uneven)", dict(model="qwen3-30b-a3b", tp=1, dp=3, ep=True, redundant=0))]


def random_case(seed: int, i: int) -> tuple[str, dict]:
    rng = random.Random(f"vllm-dp-{seed}-{i}")
    ep = rng.random() < 0.6
    return f"vllm-dp-{seed}-{i}", dict(model=rng.choice(MODELS), tp=rng.choice((1, 2, 4, 8)),
                                       dp=rng.choice((1, 2, 3, 4, 8)), ep=ep,
                                       redundant=rng.choice((0, 0, 8, 32)) if ep else 0)


def run_case(name: str, setting: dict) -> list[Check]:
    import kvmem
    from kvmem.engines.vllm.parallel import weights_per_device
    from kvmem.sizing.setup import model_weights
    model = kvmem.get_model(setting["model"])
    weights = model_weights(model, "auto")
    tp, dp = setting["tp"], setting["dp"]
    ours, _notes = weights_per_device(weights, model, tp=tp, pp=1, dp=dp,
                                      options={"enable_expert_parallel": setting["ep"],
                                               "num_redundant_experts": setting["redundant"]})
    share = vllm_share(tp=tp, dp=dp, experts=model.facts.moe.experts, redundant=setting["redundant"],
                       expert_parallel=setting["ep"])
    theirs = weights.per_device(tp=tp, pp=1, replicated=True) + int(weights.expert_bytes * (share - Fraction(1, tp)))
    return [Check(name, "weights per GPU", ours, theirs)]

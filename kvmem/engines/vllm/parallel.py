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

from ...layer import FULL, MLA
from ...model import Model
from ...parallel import divides, pp_stages
from ...units import cdiv

__all__ = ["PARALLEL_OPTIONS", "weights_per_device", "DCP_DEFAULT", "dcp_size", "check_dcp", "dcp_estimate",
           "dcp_capacity"]

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


# ---- decode context parallelism (--decode-context-parallel-size) -------------------------------------------------
#
# DCP reuses the tp ranks: each of the dcp ranks that hold the same KV heads keeps every dcp-th token of a sequence,
# so a page is unchanged but a request at max_model_len needs cdiv(cdiv(max_model_len, dcp), block_size) pages of
# each attention layer (vllm@v0.33.0 vllm/v1/kv_cache_interface.py#L643-L648 FullAttentionSpec.max_memory_usage_bytes,
# #L610-L615 max_num_blocks_per_req; MLA's spec inherits it): the logged tokens, int(concurrency x max_model_len),
# and the concurrency grow by about dcp. Sized here for models whose every layer is full attention or MLA (a
# sliding, chunked or recurrent layer keeps its own rule, not read here), at vLLM 0.33.0.

DCP_DEFAULT = 1   # vllm@v0.33.0 vllm/config/parallel.py#L389-L389 decode_context_parallel_size


def dcp_size(options: dict) -> int:
    """--decode-context-parallel-size from engine options, checked (1: off)."""
    dcp = options.get("decode_context_parallel_size", DCP_DEFAULT)
    if isinstance(dcp, bool) or not isinstance(dcp, int) or dcp < 1:
        raise ValueError(f"decode_context_parallel_size must be a positive integer, got {dcp!r}")
    return dcp


def check_dcp(model: Model, tp: int, dcp: int, version) -> None:
    """Refused where vLLM 0.33.0 refuses the width, or kvmem does not size it (with which)."""
    if str(version).strip().lower() not in ("latest", "0.33.0", "v0.33.0"):
        raise ValueError(f"kvmem sizes decode_context_parallel_size as vLLM 0.33.0 plans it; version={version!r}")
    if not divides(dcp, tp):
        # vllm@v0.33.0 vllm/config/parallel.py#L596-L606 (prefill context parallelism 1)
        raise ValueError(f"tp_size={tp} must be divisible by dcp_size={dcp} (vLLM 0.33.0's check)")
    kinds = {layer.kind for layer in model.layers}
    if kinds - {FULL, MLA}:
        raise ValueError(f"kvmem sizes decode_context_parallel_size for models whose every layer is full attention "
                         f"or MLA; {model.name} has {', '.join(sorted(str(k) for k in kinds - {FULL, MLA}))} layers")
    if MLA not in kinds:
        # vllm@v0.33.0 vllm/config/model.py#L1578-L1606: the KV heads' tp replicas carry the shards
        kv_heads = max(layer.kv_heads for layer in model.layers)
        heads = model.num_attention_heads
        if dcp > tp // kv_heads:
            raise ValueError(f"decode_context_parallel_size={dcp} exceeds tp_size // num_kv_heads = {tp} // "
                             f"{kv_heads} = {tp // kv_heads} for GQA/MQA (vLLM 0.33.0's check)")
        if not divides(dcp, heads // kv_heads):
            raise ValueError(f"the {heads // kv_heads} query heads per KV head must divide by "
                             f"decode_context_parallel_size={dcp} for GQA/MQA (vLLM 0.33.0's check)")


def dcp_estimate(model: Model, *, tokens: int, tp: int, pp: int, **options):
    """entry.estimate on one GPU: each rank holds cdiv(tokens, dcp) of a sequence's tokens."""
    from .entry import estimate
    dcp = dcp_size(options)
    rest = {k: v for k, v in options.items() if k != "decode_context_parallel_size"}
    if dcp == 1:
        return estimate(model, tokens=tokens, tp=tp, pp=pp, **rest)
    check_dcp(model, tp, dcp, rest.get("version", "latest"))
    from ..results import with_note
    return with_note(estimate(model, tokens=cdiv(tokens, dcp), tp=tp, pp=pp, **rest),
                     f"decode context parallel {dcp}: a GPU holds cdiv({tokens:,}, {dcp}) = {cdiv(tokens, dcp):,} "
                     "tokens of each sequence")


def dcp_capacity(model: Model, *, kv_memory: int, kv_dtype, tp: int, pp: int, max_model_len: int | None,
                 **options):
    """entry.capacity with a request's tokens over dcp ranks (the section above)."""
    from dataclasses import replace

    from .entry import capacity, pool_log_lines
    from .options import parse_release
    dcp = dcp_size(options)
    rest = {k: v for k, v in options.items() if k != "decode_context_parallel_size"}
    if dcp == 1:
        return capacity(model, kv_memory=kv_memory, kv_dtype=kv_dtype, tp=tp, pp=pp, max_model_len=max_model_len,
                        **rest)
    check_dcp(model, tp, dcp, rest.get("version", "latest"))
    length = max_model_len or model.max_position_embeddings
    if length is None:
        raise ValueError("max_model_len is needed: the model config gives no max_position_embeddings")
    share = cdiv(length, dcp)
    cap = capacity(model, kv_memory=kv_memory, kv_dtype=kv_dtype, tp=tp, pp=pp, max_model_len=share, **rest)
    concurrency = cap.max_concurrency     # num_blocks / cdiv(share, block_size): vLLM's
    tokens = int(concurrency * length)    # vllm@v0.33.0 vllm/v1/core/kv_cache_utils.py#L1120-L1128
    log = pool_log_lines(parse_release(rest.get("version", "latest")), cap.blocks, tokens, concurrency, length)
    notes = list(cap.notes)
    notes.append(f"decode context parallel {dcp}: each of {dcp} GPUs holds every {dcp}th token, "
                 f"cdiv({length:,}, {dcp}) = {share:,} of a {length:,}-token request")
    # a request of n tokens fits where cdiv(n, dcp) does: up to dcp x the longest share
    longest = cap.longest_request_tokens * dcp if cap.longest_request_tokens is not None else None
    return replace(cap, tokens=tokens, longest_request_tokens=longest, notes=tuple(notes), log_lines=tuple(log),
                   details=replace(cap.details, log=log))

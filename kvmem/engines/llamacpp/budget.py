"""llama.cpp's memory for kvmem.sizing: weights + KV (its n_ctx cells) + compute buffer + CUDA context."""

from __future__ import annotations

from ..base import Budget, BudgetRequest, PrefixSharing, SizingRules, StartupNumbers
from ..budget import kv_budget
from ..results import Estimate
from .checkpoints import HOST_INPUTS, host_terms
from .compute import llamacpp_compute_bytes
from .entry import startup_cells
from .plan import run_plan
from .settings import DEFAULTS, LLAMA_MAX_SEQ
from .verdict import placement_verdict

# ---- sizing: weights + KV + compute buffer --------------------------------------------------
#
# llama.cpp allocates weights, its n_ctx cells of KV and a compute buffer up front, plus the CUDA
# context (512 MiB, a typical value). The compute buffer here is compute.llamacpp_compute_bytes, an
# estimate (the largest stage of the graph with n_ubatch outputs' logits, 512 by default; llama.cpp's
# scheduled graph reserves min(n_batch, n_seq) outputs), so it runs above the placement's buffer and is no
# reproduction of a CUDA log. Flash attention, n_ubatch, n_batch, the cells per stream and the sliding-window
# cache's cells are the cache's own settings (plan.run_plan).
# This budget is the fallback only: kvmem.sizing asks the placement verdict (verdict.placement_verdict) for
# every workload, and fit's verdict, max batch and max context come from kvmem's placement (layouts.layout:
# the scheduled graph, the projector on the first GPU) wherever kvmem can lay the model out; this budget
# answers where it cannot (weights or activations given as byte counts, a family refused from a config).

NON_TORCH_BYTES = 512 << 20
# host_memory_bytes: the host RAM a placement may use beyond the GPUs (kvmem.engines.llamacpp.verdict);
# None: not bounded
# ctx_checkpoints (--ctx-checkpoints) and cache_ram_mib (--cache-ram): llama-server's host RAM beside the model
# (kvmem.engines.llamacpp.checkpoints, each default's source there)
# mmproj (an mmproj GGUF path or its weight bytes) and mmproj_offload: the multimodal projector, its weights and
# compute buffer on the first GPU (kvmem.engines.llamacpp.offload.mmproj_option)
SIZING_OPTIONS = {"weights_bytes": None, "activation_bytes": None, "non_torch_bytes": None, "host_memory_bytes": None,
                  "ctx_checkpoints": 32, "cache_ram_mib": 8192, "mmproj": None, "mmproj_offload": True}
GGUF_WEIGHT_FORMATS = ("q8_0", "q6_k", "q5_k_m", "q4_k_m", "q3_k_m", "q2_k")


def _budget(req: BudgetRequest) -> Budget:
    act = req.activation_bytes
    if act is None:
        options = {**DEFAULTS, **req.engine_options, "n_ctx": None, "n_seq": None}
        s, plan, _ = run_plan(req.model, tokens=req.context, batch=req.batch, kv_dtype=req.kv_dtype, tp=1, pp=1,
                              options=options)
        act = llamacpp_compute_bytes(req.model, n_ctx=plan.n_ctx, n_ubatch=s.n_ubatch, flash_attn=s.flash_attn,
                                     cells_per_stream=plan.n_ctx_seq, swa_cells=plan.swa_cells)
    from .offload import mmproj_option
    total = req.gpu.usable_memory_bytes
    weights, mm_weights, mm_compute, mm_note = req.weights_bytes, *mmproj_option(
        req.model, req.sizing_options, req.engine_options.get("flash_attn"))
    # the projector on the (first) GPU; this budget is one device's, so at pp > 1 it charges every stage with it
    # (mtmd loads it on the first only): the fallback leaves the later stages too little room; the placement
    # counts it on CUDA0 alone
    if req.sizing_options.get("mmproj_offload", True):
        weights, act = weights + mm_weights, act + dict(mm_compute or ()).get("CUDA0", 0)
    # reserve: llama.cpp takes no memory fraction; the cache is sized by n_ctx and must fit in
    # what the weights, the compute buffers and the CUDA context leave
    return Budget(total, weights, act, req.non_torch_bytes,
                  kv_budget("reserve", total=total, weights=weights, activations=act, overhead=req.non_torch_bytes),
                  (mm_note,) if mm_note else ())


def prefix_sharing(_options: dict, est: Estimate) -> PrefixSharing:
    """Sequences share cells only in a unified cache (-kvu): one stream per sequence shares nothing."""
    if getattr(est.details, "kv_unified", None) is False:
        return PrefixSharing(refusal="llama.cpp keeps one cache stream per sequence unless kv_unified=True")
    return PrefixSharing()


# What it prints at start-up: its pool is the cells -c makes, read off its estimate (exact)
STARTUP = StartupNumbers("KV cells (n_ctx)", "-c, -np, the cache types and the model alone",
                         from_estimate=startup_cells)
SIZING = SizingRules(budget=_budget, options=SIZING_OPTIONS, non_torch_bytes=NON_TORCH_BYTES, batch_dependent=True,
                     max_sequences=LLAMA_MAX_SEQ, layer_split=True,
                     fixed_options={"n_ctx": "n_ctx = context x batch", "n_seq": "n_seq = batch"},
                     kv_smaller_dtype="q8_0", weight_formats=GGUF_WEIGHT_FORMATS, startup=STARTUP,
                     placement_verdict=placement_verdict, host_terms=host_terms, host_inputs=HOST_INPUTS)

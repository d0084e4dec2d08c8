"""llama.cpp's memory for kvmem.sizing: weights + KV (its n_ctx cells) + compute buffer + CUDA context."""

from __future__ import annotations

from ...activations import forward_shape
from ..budget import kv_budget
from ..base import Budget, BudgetRequest, Estimate, PrefixSharing, SizingRules
from .plan import cells_of
from .settings import DEFAULTS, LLAMA_MAX_SEQ, pad_to, resolve_settings


# ---- sizing: weights + KV + compute buffer --------------------------------------------------
#
# llama.cpp allocates weights, its n_ctx cells of KV and a compute buffer up front, plus the CUDA
# context (512 MiB, a typical value). The compute buffer (ggml-alloc reuses memory across layers,
# so the largest stage wins), f32, n_ub = min(n_ubatch, n_batch, n_ctx), n_kv = cells per stream:
#     output    n_ub x (vocab + H)                     logits + the final norm
#     attention n_ub x (n_kv x (heads + 1) + 4 H)      flash attention off: KQ, its softmax in
#                                                      place, the f32 mask
#               n_ub x (n_kv / 2 + 4 H)                flash attention on: f16 mask only
#     ffn       n_ub x (3 I + 2 H)                     gate, up, their product
# x 4 B, the largest. Flash attention off, checked exactly: Llama-3-8B n_ctx 512 / 8192
# "CUDA0 compute buffer size = 258.50 / 560.00 MiB"; Mistral-7B n_ctx 2048 / 32768 164.00 /
# 2144.00 MiB (fedora-copr/logdetective#106). The flash-attention and ffn stages are not checked
# against a log. Flash attention, n_ubatch, n_batch and the cells per stream are the cache's own
# settings (settings.resolve_settings, plan.cells_of), so the buffer and the cache never disagree.

NON_TORCH_BYTES = 512 << 20
SIZING_OPTIONS = {"weights_bytes": None, "activation_bytes": None, "non_torch_bytes": None}
GGUF_WEIGHT_FORMATS = ("q8_0", "q6_k", "q5_k_m", "q4_k_m", "q3_k_m", "q2_k")


def llamacpp_compute_bytes(model, *, n_ctx: int, n_ubatch: int = 512, flash_attn: bool = True,
                           cells_per_stream: int | None = None) -> int:
    """llama.cpp's compute buffer on one device (see the sizing comment above)."""
    from ...catalog import as_model
    model = as_model(model)
    shape = forward_shape(model)
    n_ub = min(n_ubatch, n_ctx)
    h = shape.hidden
    ffn = 3 * shape.intermediate if shape.intermediate else 3 * shape.top_k * shape.moe_intermediate
    cells = cells_per_stream if cells_per_stream is not None else pad_to(n_ctx, 256)
    attention = cells // 2 + 4 * h if flash_attn else cells * (shape.heads + 1) + 4 * h
    return 4 * n_ub * max(shape.vocab + h, ffn + 2 * h, attention)


def _budget(req: BudgetRequest) -> Budget:
    act = req.activation_bytes
    if act is None:
        options = {**DEFAULTS, **req.engine_options, "n_ctx": None, "n_seq": None}
        s = resolve_settings(req.model, tokens=req.context, batch=req.batch, kv_dtype=req.kv_dtype, tp=1,
                             options=options)
        n_ctx, n_ctx_seq, _, _, _ = cells_of(s)
        act = llamacpp_compute_bytes(req.model, n_ctx=n_ctx, n_ubatch=s.n_ubatch, flash_attn=s.flash_attn,
                                     cells_per_stream=n_ctx_seq)
    total = req.gpu.usable_memory_bytes
    # reserve: llama.cpp takes no memory fraction; the cache is sized by n_ctx and must fit in
    # what the weights, the compute buffers and the CUDA context leave
    return Budget(total, req.weights_bytes, act, req.non_torch_bytes,
                  kv_budget("reserve", total=total, weights=req.weights_bytes, activations=act,
                            overhead=req.non_torch_bytes))


def prefix_sharing(_options: dict, est: Estimate) -> PrefixSharing:
    """Sequences share cells only in a unified cache (-kvu): one stream per sequence shares nothing."""
    if est.details.get("kv_unified") is False:
        return PrefixSharing(refusal="llama.cpp keeps one cache stream per sequence unless kv_unified=True")
    return PrefixSharing()


SIZING = SizingRules(budget=_budget, options=SIZING_OPTIONS, non_torch_bytes=NON_TORCH_BYTES, batch_dependent=True,
                     max_sequences=LLAMA_MAX_SEQ, layer_split=True,
                     fixed_options={"n_ctx": "n_ctx = context x batch", "n_seq": "n_seq = batch"},
                     kv_smaller_dtype="q8_0", weight_formats=GGUF_WEIGHT_FORMATS)

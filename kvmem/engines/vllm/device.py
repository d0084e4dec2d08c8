"""vLLM 0.33.0's picks by the fit's GPU: the MLA attention backend and the GatedDeltaNet prefill backend."""

from __future__ import annotations

from ...layer import MLA
from ...model import Model
from .formats import kv_format
from .options import GDN_CHECKPOINT_TYPES, LATEST, OPTIONS, parse_release

__all__ = ["device_name", "mla_backend_on", "gdn_backend_on", "device_options"]

# ----------------------------------------------------------------------------- picks by the GPU
#
# What vLLM 0.33.0 selects by the device where kvmem.fit knows it (GPU.platform, GPU.compute_capability):
# the MLA attention backend (its block size: mla_block) and the GatedDeltaNet prefill backend (its checkpoint
# grid: exports_checkpoints). Without a GPU (estimate, capacity) OPTIONS' None keeps the Hopper assumption.
# Judged by vLLM's own selection code with the capability patched (kvmem/oracles/vllm_device.py).
#
# CUDA, dense MLA: the first backend of _get_backend_priorities (vllm@v0.33.0 vllm/platforms/cuda.py#L84-L155)
# that validate_configuration accepts (vllm/v1/attention/backend.py#L279-L370; cuda.py#L377-L416):
#   SM 10.x  FLASHINFER_MLA where qk_nope_head_dim is 64, 128 or 192 (flashinfer_mla.py#L220-L249), else
#            CUTLASS_MLA (cutlass_mla.py#L65-L66; TOKENSPEED_MLA between them needs the tokenspeed_mla package,
#            which vLLM's requirements do not install)
#   SM 9.x   FLASH_ATTN_MLA for 16-bit caches (flashattn_mla.py#L40-L46, #L69-L87: FA3, which vLLM's CUDA wheels
#            build for SM90, fa_utils.py#L325-L345), else FLASHMLA (fp8 / fp8_e4m3; flashmla.py#L47-L54, #L73-L74)
#   others   TRITON_MLA (triton_mla.py#L140-L141; SM 12.x's list is TRITON_MLA first, cuda.py#L134-L138)
# Sparse MLA (DeepSeek-V3.2, GLM-5) stays on FLASHMLA_SPARSE (kvmem.engines.vllm.layout), vLLM's pick on
# SM 9.x/10.x with 64+ heads; elsewhere a note says vLLM picks another sparse backend.
# ROCm (vllm@v0.33.0 vllm/platforms/rocm.py#L536-L552): TRITON_MLA unless VLLM_ROCM_USE_AITER=1 (default off,
# vllm/envs.py#L1267-L1269), which kvmem assumes unset.
_MLA_16BIT_KV = ("bf16", "fp16")
_MLA_FP8_KV = ("fp8", "fp8_e4m3")
_FLASHINFER_MLA_NOPE = (64, 128, 192)
# The CUDA runtime vLLM 0.33.0's wheels ship: VLLM_MAIN_CUDA_VERSION "13.0" (vllm@v0.33.0 vllm/envs.py#L91), torch
# 2.14.0 pinned with nvidia-cutlass-dsl[cu13] (its requirements/cuda.txt); _resolve_gdn_prefill_backend's
# get_cuda_runtime_major() >= 13 holds there
WHEEL_CUDA_RUNTIME_MAJOR = 13
GDN_FLASHINFER_HEAD_K_DIM = 128


def device_name(gpu) -> str:
    cap = gpu.compute_capability
    return f"{gpu.name} (SM {cap[0]}.{cap[1]})" if cap else f"{gpu.name} ({gpu.platform or 'unknown platform'})"


def mla_backend_on(gpu, kv_name: str, qk_nope_head_dim: int) -> str | None:
    """The dense-MLA backend vLLM 0.33.0 selects on ``gpu`` for a cache of ``kv_name`` (KVFormat.name);
    None where kvmem does not know the device (no platform, or CUDA without a capability)."""
    if gpu.platform == "rocm":
        return "TRITON_MLA"
    cap = gpu.compute_capability if gpu.platform == "cuda" else None
    if cap is None:
        return None
    major = cap[0]
    if major == 10:
        if kv_name not in (*_MLA_16BIT_KV, *_MLA_FP8_KV):
            return None
        return "FLASHINFER_MLA" if qk_nope_head_dim in _FLASHINFER_MLA_NOPE else "CUTLASS_MLA"
    if major == 9:
        if kv_name in _MLA_16BIT_KV:
            return "FLASH_ATTN_MLA"
        return "FLASHMLA" if kv_name in _MLA_FP8_KV else None
    return "TRITON_MLA"


def gdn_backend_on(gpu, head_k_dim) -> str | None:
    """The GatedDeltaNet prefill backend vLLM 0.33.0's _resolve_gdn_prefill_backend picks on ``gpu`` with
    --gdn-prefill-backend unset (vllm@v0.33.0 vllm/model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py#L148-L271):
    FlashInfer on SM 9.0; on SM 10.x / 12.x with head_k_dim 128 and CUDA >= 13 (the wheels' CUDA:
    WHEEL_CUDA_RUNTIME_MAJOR); Triton elsewhere on CUDA. ROCm: Triton, or AITER FlyDSL only with
    VLLM_ROCM_USE_AITER=1 (neither exports checkpoints: "triton" sizes both). None: the device unknown."""
    if gpu.platform == "rocm":
        return "triton"
    cap = gpu.compute_capability if gpu.platform == "cuda" else None
    if cap is None:
        return None
    if cap == (9, 0):
        return "flashinfer"
    if cap[0] in (10, 12) and head_k_dim == GDN_FLASHINFER_HEAD_K_DIM and WHEEL_CUDA_RUNTIME_MAJOR >= 13:
        return "flashinfer"
    return "triton"


def device_options(gpu, model: Model, kv_dtype, engine_options: dict) -> tuple[dict, tuple[str, ...]]:
    """The engine options vLLM 0.33.0 picks by the device, where the caller gave none: attention_backend
    (dense MLA models) and gdn_prefill_backend (Qwen's GatedDeltaNet), with a note for each; nothing for
    the v0 engine, older releases or a device kvmem does not know (the Hopper assumption stands)."""
    release = parse_release(engine_options.get("version", OPTIONS["version"]))
    if release is None or release < LATEST or not gpu.platform:
        return {}, ()
    if gpu.platform not in ("cuda", "rocm"):
        return {}, (f"vLLM 0.33.0 on {gpu.name} ({gpu.platform}): kvmem sizes its CUDA Hopper backends",)
    picks, notes = {}, []
    layers = [layer for layer in model.layers if layer.kind == MLA]
    if layers and engine_options.get("attention_backend") is None:
        sparse = any(layer.index_head_dim for layer in layers)
        cap = gpu.compute_capability
        if sparse:
            if gpu.platform == "cuda" and cap is not None and cap[0] < 9:
                # the sparse tail of _get_backend_priorities: FLASH_ATTN_MLA_SPARSE (SM 9.x,
                # flashattn_mla_sparse.py#L82-L83), FLASHMLA_SPARSE (SM 9.x / 10.x, flashmla_sparse.py),
                # FLASHINFER_MLA_SPARSE_SM90 (SM 9.x): none runs below SM 9.0
                raise ValueError(f"{model.name} under vLLM 0.33.0 on {device_name(gpu)}: its sparse MLA (an indexer) "
                                 "has no attention backend there (vllm/platforms/cuda.py _get_backend_priorities: "
                                 "FLASH_ATTN_MLA_SPARSE, FLASHMLA_SPARSE and FLASHINFER_MLA_SPARSE_SM90 take SM 9.x or "
                                 "10.x only)")
            if gpu.platform != "cuda" or cap is None or cap[0] not in (9, 10):
                notes.append(f"vLLM 0.33.0 picks another sparse MLA backend on {device_name(gpu)} "
                             "(cuda.py / rocm.py backend priorities); kvmem sizes FLASHMLA_SPARSE's 64-token blocks")
            elif cap[0] == 10 and model.model_type == "glm_moe_dsa" and kv_format(model, kv_dtype).mode == "" \
                    and str(kv_dtype).strip().lower() == "auto":
                # vllm@v0.33.0 vllm/model_executor/models/config.py#L89-L116 GlmMoeDsaForCausalLM
                notes.append(f"on {device_name(gpu)} vLLM 0.33.0 runs GLM-5's kv_cache_dtype 'auto' as fp8_e4m3 "
                             "(GlmMoeDsaForCausalLM.verify_and_update_config), with the fp8 sparse backends first: "
                             "kvmem sizes the 16-bit FLASHMLA_SPARSE cache, not that one")
        else:
            kv = kv_format(model, kv_dtype).name
            backend = mla_backend_on(gpu, kv, model.facts.qk_nope_head_dim)
            if backend is not None:
                picks["attention_backend"] = backend
                notes.append(f"MLA backend {backend}: vLLM 0.33.0's pick on {device_name(gpu)} for a {kv} cache "
                             "(vllm/platforms/cuda.py _get_backend_priorities, rocm.py)")
    if (model.model_type in GDN_CHECKPOINT_TYPES and engine_options.get("gdn_prefill_backend") is None):
        cfg = model.config or {}
        text = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else {}
        head_k_dim = text.get("linear_key_head_dim", cfg.get("linear_key_head_dim"))
        backend = gdn_backend_on(gpu, head_k_dim)
        if backend is not None:
            picks["gdn_prefill_backend"] = backend
            why = (f" (head_k_dim {head_k_dim}, CUDA {WHEEL_CUDA_RUNTIME_MAJOR} as vLLM 0.33.0's wheels ship; an "
                   "older CUDA runtime gets Triton)" if gpu.compute_capability and gpu.compute_capability[0] in (10, 12)
                   else "")
            notes.append(f"GatedDeltaNet prefill on {backend}: vLLM 0.33.0's pick on {device_name(gpu)}{why} "
                         "(qwen_gdn_linear_attn.py _resolve_gdn_prefill_backend)")
    return picks, tuple(notes)

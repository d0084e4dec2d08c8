"""vLLM 0.33.0's own backend selection as the judge of kvmem's picks by the GPU (kvmem.engines.vllm.device
device_options: the MLA attention backend and its block size, the GatedDeltaNet prefill backend).

The CPU environment has no CUDA: the selection code runs with the device answers patched in, each to what a
CUDA build of vLLM 0.33.0 sees on the GPU asked:
    CudaPlatform.get_valid_backends(capability, AttentionSelectorConfig) (vllm/platforms/cuda.py#L377-L416) over
    its own _get_backend_priorities, and the first valid backend's get_preferred_block_size(16) (what
    update_block_size_for_backend takes for one backend, vllm/platforms/interface.py#L700-L722);
    _resolve_gdn_prefill_backend (qwen_gdn_linear_attn.py#L148-L271) with is_device_capability /
    is_device_capability_family / get_cuda_runtime_major answered for the capability and the wheels' CUDA 13.
The kernels a CUDA wheel builds are answered present: vllm._flashmla_C (FlashMLA, SM90/SM100), FA3's MLA
(flash_attn_supports_mla: SM90), FlashInfer (a stand-in module, flashinfer-python being a requirement of the
CUDA wheel); the tokenspeed_mla package (not a requirement) stays absent. The model's qk_nope_head_dim
reaches FlashInfer MLA's check through a stand-in current vLLM config.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
from contextlib import ExitStack
from unittest import mock

from ..catalog import as_model
from ..engines.vllm.device import device_options
from ..gpus import get_gpu, list_gpus

FA_NAMES = ("flash_attn_varlen_func", "get_scheduler_metadata")


class _StandIns(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports of ``flashinfer`` and its submodules give MagicMock modules (the CPU env has no flashinfer)."""

    def find_spec(self, fullname, _path, _target=None):
        if fullname == "flashinfer" or fullname.startswith("flashinfer."):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        module = mock.MagicMock(name=spec.name)
        module.__path__ = []
        module.__spec__ = spec
        return module

    def exec_module(self, _module):
        return None


_READY = {}


def _prepare():
    """Import vLLM's CUDA platform and MLA backends once, with the CUDA-only pieces stood in for."""
    if _READY:
        return _READY
    import torch
    sys.modules.setdefault("vllm._C_stable_libtorch", types.ModuleType("vllm._C_stable_libtorch"))
    if not any(isinstance(f, _StandIns) for f in sys.meta_path):
        sys.meta_path.insert(0, _StandIns())
    import vllm.utils.platform_utils as platform_utils
    import vllm.v1.attention.backends.fa_utils as fa_utils
    for name in FA_NAMES:
        if not hasattr(fa_utils, name):
            setattr(fa_utils, name, lambda *_a, **_k: None)
    real_empty = torch.empty

    def host_empty(*args, **kwargs):
        kwargs.pop("device", None)
        return real_empty(*args, **kwargs)
    # cutlass_mla.py allocates its SM100 workspace on the device at import
    with mock.patch.object(torch, "empty", host_empty), \
            mock.patch.object(platform_utils, "num_compute_units", lambda *_: 132):
        import vllm.v1.attention.backends.mla.cutlass_mla  # noqa: F401
    from vllm.platforms.cuda import CudaPlatform
    from vllm.v1.attention.backends.mla import flashattn_mla, flashinfer_mla
    from vllm.v1.attention.ops import flashmla
    _READY.update(torch=torch, CudaPlatform=CudaPlatform, flashattn_mla=flashattn_mla, flashmla=flashmla,
                  flashinfer_mla=flashinfer_mla)
    return _READY


def _platform_patches(stack: ExitStack, cap: tuple[int, int]):
    from vllm.platforms import current_platform
    major, minor = cap
    answers = dict(is_cuda=lambda *_: True, is_rocm=lambda *_: False, is_xpu=lambda *_: False,
                   is_device_capability=classmethod(lambda _c, c, _d=0: c == major * 10 + minor),
                   is_device_capability_family=classmethod(lambda _c, fam, _d=0: fam == major * 10),
                   get_cuda_runtime_major=classmethod(lambda _c: 13))
    for platform in {type(current_platform), _READY["CudaPlatform"]}:
        for name, answer in answers.items():
            stack.enter_context(mock.patch.object(platform, name, answer, create=True))


def vllm_attention(cap: tuple[int, int], *, use_mla: bool, kv_cache_dtype: str = "auto", head_size: int = 576,
                   qk_nope_head_dim: int = 128, num_heads: int = 128,
                   use_sparse: bool = False) -> tuple[str, int] | None:
    """(backend name, block size) vLLM 0.33.0 selects on a CUDA device of capability ``cap``; None: no backend."""
    ready = _prepare()
    torch, cuda = ready["torch"], ready["CudaPlatform"]
    import vllm.config as vllm_config
    from vllm.platforms.interface import DeviceCapability
    from vllm.v1.attention.selector import AttentionSelectorConfig
    stand_in = types.SimpleNamespace(
        parallel_config=types.SimpleNamespace(decode_context_parallel_size=1, prefill_context_parallel_size=1,
                                              tensor_parallel_size=1),
        model_config=types.SimpleNamespace(hf_text_config=types.SimpleNamespace(
            qk_nope_head_dim=qk_nope_head_dim, qk_rope_head_dim=64, kv_lora_rank=512, num_attention_heads=num_heads)))
    config = AttentionSelectorConfig(head_size=head_size, dtype=torch.bfloat16, kv_cache_dtype=kv_cache_dtype,
                                     block_size=None, use_mla=use_mla, use_sparse=use_sparse)
    with ExitStack() as stack:
        _platform_patches(stack, cap)
        stack.enter_context(mock.patch.object(vllm_config, "get_current_vllm_config", lambda: stand_in))
        # flashinfer_mla.py imports it by name (#L14)
        stack.enter_context(mock.patch.object(ready["flashinfer_mla"], "get_current_vllm_config", lambda: stand_in))
        stack.enter_context(mock.patch.object(ready["flashattn_mla"], "flash_attn_supports_mla",
                                              lambda: cap[0] == 9))
        stack.enter_context(mock.patch.object(ready["flashmla"], "_is_flashmla_available", lambda: (True, None)))
        valid, _ = cuda.get_valid_backends(DeviceCapability(*cap), config, num_heads=num_heads)
        if not valid:
            return None
        first = min(valid, key=lambda c: c.priority)
        return first.backend.name, first.backend_class.get_preferred_block_size(16)


def vllm_gdn_backend(cap: tuple[int, int], head_k_dim: int) -> str:
    """The GatedDeltaNet prefill backend _resolve_gdn_prefill_backend picks, --gdn-prefill-backend unset."""
    _prepare()
    from vllm.model_executor.layers.mamba.gdn import qwen_gdn_linear_attn as gdn
    config = types.SimpleNamespace(additional_config={}, model_config=types.SimpleNamespace(
        hf_text_config=types.SimpleNamespace(linear_key_head_dim=head_k_dim, linear_value_head_dim=head_k_dim)))
    with ExitStack() as stack:
        _platform_patches(stack, cap)
        return gdn._resolve_gdn_prefill_backend(config)[1]


def kvmem_picks(gpu, model, kv_dtype="auto") -> dict:
    """kvmem's picks for ``model`` on ``gpu`` as fit makes them (attention backend with its block, GDN backend)."""
    import kvmem
    gpu, model = get_gpu(gpu), as_model(model)
    picks, _ = device_options(gpu, model, kv_dtype, {})
    out = dict(picks)
    est = kvmem.estimate(model, engine="vllm", tokens=1024, kv_dtype=kv_dtype, **picks)
    out["block_size"] = est.details.block_size     # VllmDetails
    return out


def cuda_gpus() -> list:
    """The catalog's CUDA GPUs with a compute capability."""
    return [g for g in map(get_gpu, list_gpus()) if g.platform == "cuda" and g.compute_capability]

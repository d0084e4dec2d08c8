"""vLLM 0.33.0's own VllmConfig._set_cudagraph_sizes as the judge of kvmem.engines.vllm.cudagraph.capture_sizes.

The method is run on a stand-in holding only what it reads (model_config.enforce_eager, the compilation
config's mode and unset sizes, the scheduler's max_num_seqs and max_num_batched_tokens,
uniform_decode_query_len, performance_mode, no speculative schedule); the platform's Blackwell question is
answered as the case asks.
"""

from __future__ import annotations

import types

from ..engines.vllm.cudagraph import capture_sizes
from .report import Check


def vllm_sizes(*, max_num_seqs: int, max_num_batched_tokens: int, num_speculative_tokens: int = 0,
               blackwell: bool = False, performance_mode: str = "balanced") -> list[int]:
    from vllm.config import CompilationConfig, VllmConfig
    from vllm.config.compilation import CUDAGraphMode
    from vllm.platforms import current_platform
    compilation = CompilationConfig()
    compilation.cudagraph_mode = CUDAGraphMode.FULL_AND_PIECEWISE
    compilation.max_cudagraph_capture_size = None
    compilation.cudagraph_capture_sizes = None
    stand_in = types.SimpleNamespace(
        model_config=types.SimpleNamespace(enforce_eager=False), compilation_config=compilation,
        scheduler_config=types.SimpleNamespace(max_num_seqs=max_num_seqs,
                                               max_num_batched_tokens=max_num_batched_tokens),
        uniform_decode_query_len=1 + num_speculative_tokens, speculative_config=None,
        performance_mode=performance_mode)
    platform = type(current_platform)
    saved = platform.is_device_capability_family
    platform.is_device_capability_family = classmethod(lambda _cls, family, _device_id=0: blackwell and family == 100)
    try:
        VllmConfig._set_cudagraph_sizes(stand_in)
    finally:
        platform.is_device_capability_family = saved
    return list(compilation.cudagraph_capture_sizes)


def cases() -> list[dict]:
    out = []
    for seqs in (1, 3, 8, 100, 128, 256, 1024):
        for tokens in (2, 64, 300, 2048, 8192):
            for spec in (0, 3):
                for blackwell in (False, True):
                    out.append(dict(max_num_seqs=seqs, max_num_batched_tokens=tokens, num_speculative_tokens=spec,
                                    blackwell=blackwell))
    out.append(dict(max_num_seqs=256, max_num_batched_tokens=8192, performance_mode="interactivity"))
    return out


def run_case(setting: dict) -> list[Check]:
    return [Check(str(setting), "cudagraph_capture_sizes", capture_sizes(**setting), vllm_sizes(**setting))]

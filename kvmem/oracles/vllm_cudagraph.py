"""vLLM 0.33.0's own VllmConfig._set_cudagraph_sizes as the judge of kvmem.engines.vllm.cudagraph.capture_sizes,
and its CudagraphDispatcher (initialize_cudagraph_keys, get_capture_descs) as the judge of graph_counts: the
"PIECEWISE=N (largest=L), FULL=M (largest=K)" its profiler logs.

The method is run on a stand-in holding only what it reads (model_config.enforce_eager, the compilation
config's mode and unset sizes, the scheduler's max_num_seqs and max_num_batched_tokens,
uniform_decode_query_len, performance_mode, no speculative schedule); the platform's Blackwell question is
answered as the case asks.
"""

from __future__ import annotations

import types

from ..engines.vllm.cudagraph import capture_sizes, graph_counts
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


def vllm_graph_counts(*, max_num_seqs: int, max_num_batched_tokens: int, num_speculative_tokens: int = 0,
                      blackwell: bool = False, mode: str = "FULL_AND_PIECEWISE") -> dict:
    """mode -> (graphs, largest) from vLLM's own dispatcher over vLLM's own capture sizes (no LoRA), as
    profile_cudagraph_memory logs them (gpu_model_runner.py#L6287-L6304)."""
    from vllm.config import CompilationConfig
    from vllm.config.compilation import CUDAGraphMode
    from vllm.v1.cudagraph_dispatcher import CudagraphDispatcher
    sizes = vllm_sizes(max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens,
                       num_speculative_tokens=num_speculative_tokens, blackwell=blackwell)
    compilation = CompilationConfig()
    compilation.cudagraph_capture_sizes = sizes
    compilation.max_cudagraph_capture_size = max(sizes)
    dispatcher = object.__new__(CudagraphDispatcher)        # __init__ asserts on the compile mode only
    dispatcher.vllm_config = types.SimpleNamespace(
        scheduler_config=types.SimpleNamespace(max_num_seqs=max_num_seqs), lora_config=None,
        num_speculative_tokens=num_speculative_tokens)
    dispatcher.compilation_config = compilation
    dispatcher.uniform_decode_query_len = 1 + num_speculative_tokens
    dispatcher.cudagraph_keys = {CUDAGraphMode.PIECEWISE: set(), CUDAGraphMode.FULL: set()}
    dispatcher.keys_initialized = False
    dispatcher.specialize_lora_count = False
    dispatcher.cudagraph_mode = CUDAGraphMode.NONE
    dispatcher.initialize_cudagraph_keys(CUDAGraphMode[mode], 1 + num_speculative_tokens)
    return {m.name: (len(descs), descs[0].num_tokens) for m, descs in dispatcher.get_capture_descs()}


def graph_cases() -> list[dict]:
    out = []
    for seqs, tokens in ((256, 2048), (1024, 8192), (4, 8192), (8, 64), (128, 300)):
        for spec in (0, 3):
            for mode in ("FULL_AND_PIECEWISE", "PIECEWISE", "FULL_DECODE_ONLY"):
                out.append(dict(max_num_seqs=seqs, max_num_batched_tokens=tokens, num_speculative_tokens=spec,
                                mode=mode))
    return out


def run_graph_case(setting: dict) -> list[Check]:
    mode = setting.get("mode", "FULL_AND_PIECEWISE")
    sizing = {k: v for k, v in setting.items() if k != "mode"}
    ours = graph_counts(capture_sizes(**sizing), max_num_seqs=setting["max_num_seqs"],
                        num_speculative_tokens=setting.get("num_speculative_tokens", 0), mode=mode)
    return [Check(str(setting), "graphs per mode", ours, vllm_graph_counts(**setting))]


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

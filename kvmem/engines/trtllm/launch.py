"""`trtllm-serve` for TensorRT-LLM (the PyTorch backend kvmem's trtllm mode follows): the flags of a fit.

Argument names of trtllm-serve (tensorrt_llm/commands/serve.py, click options): --backend pytorch,
--tp_size, --pp_size, --max_seq_len, --max_batch_size, --max_num_tokens,
--kv_cache_free_gpu_memory_fraction (0.9 by default), and --extra_llm_api_options FILE, a YAML of
LLM API arguments: ``kv_cache_config: {dtype: ...}`` sets the KV element format (KvCacheConfig.dtype,
"auto" = the model's). A tokens_per_block other than 32 or a window list are refused by name.
"""

from __future__ import annotations

from ...launch.base import Flag, Inputs, PlanRefused, kv_dtype_value, model_argument, refuse_options
from ..base import byte_option
from ..serving import Launcher
from .cache import DEFAULTS

RELEASE = "TensorRT-LLM (trtllm-serve, PyTorch backend)"
PROGRAM = ("trtllm-serve",)
EXTRA_OPTIONS_FILE = "kvmem-extra-llm-api-options.yaml"
KV_CACHE_DTYPE = {"fp8": "fp8", "fp8_e4m3": "fp8", "nvfp4": "nvfp4"}
_SIZING_ONLY = {"weights_bytes", "activation_bytes", "non_torch_bytes", "free_gpu_memory_fraction", "max_num_tokens",
                "block_rounding"}


def kv_cache_dtype(inp: Inputs) -> str:
    return kv_dtype_value("trtllm", inp, KV_CACHE_DTYPE,
                          "trtllm: kv_cache_config.dtype has no {name}; kvmem writes auto, fp8 or nvfp4")


def flags(inp: Inputs) -> tuple[Flag, ...]:
    s, fit, opts = inp.setup, inp.fit, inp.options
    for name in ("tokens_per_block", "max_attention_window"):
        if opts.get(name) not in (None, DEFAULTS[name]):
            raise PlanRefused(f"trtllm: kvmem writes no flag for {name}={opts[name]!r}")
    refuse_options("trtllm", opts, {"tokens_per_block", "max_attention_window", "encoder_cache_max_bytes"},
                   _SIZING_ONLY)
    if s.replicas > 1:
        raise PlanRefused(f"trtllm: {s.replicas} replicas need {s.replicas} servers; "
                          f"plan one with num_gpus={s.tp * s.pp}")
    model, why = model_argument(inp.model)
    dtype = kv_cache_dtype(inp)
    fraction = opts.get("free_gpu_memory_fraction", 0.9)
    out = (Flag("", model, why),
           Flag("--backend", "pytorch", "the PyTorch backend, whose KV cache manager kvmem follows"),
           Flag("--tp_size", str(s.tp), f"tp={s.tp}"),
           Flag("--pp_size", str(s.pp), f"pp={s.pp}"),
           Flag("--max_seq_len", str(fit.context), "the context planned"),
           Flag("--max_batch_size", str(inp.batch), f"{inp.batch} sequences, the batch planned"),
           Flag("--max_num_tokens", str(opts.get("max_num_tokens") or 8192), "tokens per step the activations were "
                "sized for"),
           Flag("--kv_cache_free_gpu_memory_fraction", f"{float(fraction):g}", "the share of free memory the KV "
                "pool takes, as planned"),
           Flag("--extra_llm_api_options", EXTRA_OPTIONS_FILE, f"sets kv_cache_config.dtype: {dtype} (KV in "
                f"{fit.kv_dtype})"))
    return out


def files(inp: Inputs) -> dict:
    """The extra LLM API options YAML --extra_llm_api_options names (after flags(), which refuses first)."""
    text = f"kv_cache_config:\n  dtype: {kv_cache_dtype(inp)}\n"
    encoder = inp.options.get("encoder_cache_max_bytes")
    if encoder is not None:     # MultimodalConfig.encoder_cache_max_bytes: the reserve the fit kept out of the budget
        text += f"multimodal_config:\n  encoder_cache_max_bytes: {byte_option('encoder_cache_max_bytes', encoder)}\n"
    return {EXTRA_OPTIONS_FILE: text}


LAUNCHER = Launcher(RELEASE, PROGRAM, flags, files)

"""vLLM's --kv-cache-dtype formats (bytes per element, quantisation mode) and the state dtypes it takes."""

from __future__ import annotations

from dataclasses import dataclass

from ...dtypes import FLOAT_NAMES, float_bytes
from ...layer import MLA
from ...model import Model

__all__ = ["MODEL_DTYPE_BYTES", "STATE_DTYPES", "KVFormat", "kv_format"]

# --kv-cache-dtype values (vllm@v0.33.0 vllm/config/cache.py#L44-L67 CacheDType): bytes per element, quantisation
# mode. fp8 / fp8_e4m3 / fp8_e5m2 / fp8_inc: 1 byte, their per-tensor scales take no page space.
_KV_FORMATS = {
    "float16": ("fp16", 2, ""), "fp16": ("fp16", 2, ""), "half": ("fp16", 2, ""),
    "bfloat16": ("bf16", 2, ""), "bf16": ("bf16", 2, ""),
    "fp8": ("fp8", 1, ""), "fp8_e4m3": ("fp8_e4m3", 1, ""), "fp8_e5m2": ("fp8_e5m2", 1, ""),
    "fp8_inc": ("fp8_inc", 1, ""), "fp8_ds_mla": ("fp8_ds_mla", 1, "fp8_ds_mla"),
    "int8_per_token_head": ("int8_per_token_head", 1, "per_token_head"),
    "fp8_per_token_head": ("fp8_per_token_head", 1, "per_token_head"),
    "nvfp4": ("nvfp4", 1, "nvfp4"),
}
MODEL_DTYPE_BYTES = {name: float_bytes(name) for name in FLOAT_NAMES}
# --mamba-cache-dtype / --mamba-ssm-cache-dtype values and the config spellings kvmem takes, with their bytes
STATE_DTYPES = {name: float_bytes(name) for name in ("float32", "fp32", "float16", "fp16", "bfloat16", "bf16")}


@dataclass(frozen=True)
class KVFormat:
    name: str
    nbytes: int
    mode: str          # "", "per_token_head", "nvfp4", "fp8_ds_mla"


def kv_format(model: Model, kv_dtype) -> KVFormat:
    """The attention cache format of --kv-cache-dtype ``kv_dtype`` ("auto" = the model dtype)."""
    if isinstance(kv_dtype, str):
        key = kv_dtype.strip().lower().replace("-", "_")
    else:
        key = getattr(kv_dtype, "name", None)
    sparse = any(layer.kind == MLA and layer.index_head_dim for layer in model.layers)
    if key == "auto":
        # vllm@v0.33.0 vllm/config/model.py#L2423-L2464 _resolve_auto_dtype: float32 checkpoints are downcast to
        # the platform's first supported dtype, bfloat16 on CUDA (sm80+); fp16/bf16 checkpoints keep theirs.
        # DeepSeek-V3.2 with kv "auto" is bf16 in 0.33.0; older releases (models/config.py at commit 0144dd5b)
        # mapped it to fp8_ds_mla too (unverified per release: pass kv_dtype="fp8_ds_mla")
        name = model.dtype if model.dtype in ("fp16", "bf16") else "bf16"
        return KVFormat(name, MODEL_DTYPE_BYTES[name], "")
    if key not in _KV_FORMATS:
        valid = ", ".join(["auto", *_KV_FORMATS])
        from ...sources.bounded import quote
        raise ValueError(f"kv_dtype {quote(kv_dtype)} is not a vLLM --kv-cache-dtype; valid: {valid}")
    name, nbytes, mode = _KV_FORMATS[key]
    if sparse and name.startswith("fp8"):
        # DeepseekV32ForCausalLM.verify_and_update_config: fp8 caches become "fp8_ds_mla".
        return KVFormat("fp8_ds_mla", 1, "fp8_ds_mla")
    if mode == "fp8_ds_mla":
        raise ValueError("kv_dtype 'fp8_ds_mla' is DeepSeek-V3.2's sparse-MLA format; this model has no "
                         "indexer (index_head_dim)")
    return KVFormat(name, nbytes, mode)

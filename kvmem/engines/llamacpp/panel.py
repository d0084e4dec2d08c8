"""What the Fit page's offload panel and ``kvmem fit``'s offload report (EngineSpec.panels
"offload") pass to kvmem.llamacpp_offload beside the placement they give it: the options it takes,
read from its own signature, so neither lists them."""

from __future__ import annotations

# given by the panel and the report themselves: the model, the cards, the context, the formats, the host
PLACED = frozenset({"model", "gpus", "context", "weight_dtype", "kv_dtype", "host_memory"})


def offload_options(options: dict) -> dict:
    """The entries of ``options`` that kvmem.llamacpp_offload takes as keyword arguments (its
    parameters beyond PLACED: type_k, type_v, flash_attn, n_ubatch, n_seq, ...)."""
    from .offload import llamacpp_offload
    code = llamacpp_offload.__code__     # its parameters, without importing inspect (the CLI's start-up)
    takes = set(code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]) - PLACED
    return {name: value for name, value in options.items() if name in takes}

"""Why SGLang would not serve a batch at once from a budget whose bytes hold it (SizingRules.pools_refuse).

Bytes alone do not decide it: a hybrid-SWA model splits its tokens between a full-attention pool and
a sliding-window pool (entry._split_swa, swa_full_tokens_ratio), and a request needs its whole
length in the first and its window in the second; a Mamba hybrid admits at most
max_running_requests requests (mamba.max_running_requests). gpt-oss-120b at 128k on one H100:
the pools hold 80,318 full-layer tokens, fewer than one 131,072-token request, though the bytes
of both pools together exceed the request's.
"""

from __future__ import annotations

from ...model import Model
from ...units import cdiv
from .own_configs import sglang_model
from .parallel import capacity, kv_tp
from .pools import make_layout


def pools_refuse(model: Model, *, kv_memory: int, tokens: int, batch: int, kv_dtype, tp: int, pp: int,
                 **options) -> str | None:
    """Why ``batch`` requests of ``tokens`` tokens are not served at once from ``kv_memory`` (None: they are)."""
    model = sglang_model(model)   # as SGLang's own config class reads the file (own_configs)
    cap = capacity(model, kv_memory=kv_memory, kv_dtype=kv_dtype, tp=tp, pp=pp, max_model_len=tokens, **options)
    if cap.refusal is not None:
        return cap.refusal.reason
    details, page = cap.details, cap.block_size
    # sglang@v0.5.23 python/sglang/srt/mem_cache/swa_memory_pool.py#L21-L424 SWAKVPool: a request takes whole pages
    # of its full length in the full pool, and of its window in the SWA pool
    full_tokens = details.full_layer_tokens if details.full_layer_tokens is not None else cap.tokens
    need = batch * cdiv(tokens, page) * page
    pool = "full-attention pool" if details.swa_layer_tokens is not None else "token pool"
    if full_tokens < need:
        return (f"SGLang's {pool} holds {full_tokens:,} tokens (max_total_num_tokens), fewer than the "
                f"{need:,} {_requests(batch, tokens)}")
    if details.swa_layer_tokens is not None:
        tp_kv, rest = kv_tp(model, tp, pp, options)
        window = make_layout(model, kv_dtype=kv_dtype, tp=tp_kv, **rest).window
        need = batch * cdiv(min(tokens, window), page) * page
        if details.swa_layer_tokens < need:
            return (f"SGLang's sliding-window pool holds {details.swa_layer_tokens:,} tokens, fewer than the "
                    f"{need:,} of the window{'s' if batch != 1 else ''} {_requests(batch, tokens)}")
    # sglang@v0.5.23 python/sglang/srt/mem_cache/kv_cache_configurator.py#L3119-L3172 resolve_max_num_reqs
    # (mamba.py here)
    if details.max_running_requests is not None and batch > details.max_running_requests:
        return (f"SGLang admits {details.max_running_requests:,} requests at once (max_running_requests), "
                f"fewer than {batch:,}")
    return None


def _requests(batch: int, tokens: int) -> str:
    """Who takes the tokens: 'that one request of N tokens takes', 'that B requests of N tokens take'."""
    if batch == 1:
        return f"that one request of {tokens:,} tokens takes"
    return f"that {batch:,} requests of {tokens:,} tokens take"


"""vLLM's multimodal encoder cache: the tokens of encoder output it keeps on the GPU, and their bytes.

The rule (vLLM 0.33.0):
    encoder_cache_size = max_num_encoder_input_tokens = max_num_batched_tokens   vllm/config/scheduler.py#L306-L307
    space budget = max(encoder_cache_size, the largest item's tokens)   v1/core/encoder_cache_manager.py#L333-L380
    compute budget = max(max_num_encoder_input_tokens, the largest item's tokens)
with --disable-chunked-mm-input an item longer than max_num_batched_tokens is refused (#L362-L371).
Each cached token is one row of encoder output in the language model's hidden size and dtype (the
embeddings merged into the prompt): bytes = budget x hidden_size x dtype bytes. The largest item's tokens
come from the model's processor (an image at its max pixels, a video's frames): the caller gives them.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...records import Record


@dataclass(frozen=True)
class EncoderCache(Record):
    compute_budget_tokens: int
    cache_tokens: int
    cache_bytes: int            # cache_tokens x hidden_size x dtype bytes


def encoder_cache(*, max_num_batched_tokens: int, max_tokens_per_item: int, hidden_size: int, dtype_bytes: int = 2,
                  disable_chunked_mm_input: bool = False) -> EncoderCache:
    """vLLM 0.33.0's encoder budgets for a model whose largest multimodal item is ``max_tokens_per_item`` tokens."""
    for name, value in (("max_num_batched_tokens", max_num_batched_tokens),
                        ("max_tokens_per_item", max_tokens_per_item), ("hidden_size", hidden_size),
                        ("dtype_bytes", dtype_bytes)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if disable_chunked_mm_input and max_tokens_per_item > max_num_batched_tokens:
        raise ValueError(f"Chunked MM input disabled but max_tokens_per_mm_item ({max_tokens_per_item}) is larger "
                         f"than max_num_batched_tokens ({max_num_batched_tokens}). Please increase "
                         "max_num_batched_tokens.")
    compute = max(max_num_batched_tokens, max_tokens_per_item)
    cache = max(max_num_batched_tokens, max_tokens_per_item)
    return EncoderCache(compute_budget_tokens=compute, cache_tokens=cache,
                        cache_bytes=cache * hidden_size * dtype_bytes)

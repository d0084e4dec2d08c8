"""The sequence counts llama.cpp cannot create a context for: with a KV stream per sequence, kimi-linear's and
minimax-01's one-sequence prompt reserve aborts where its tokens are not a multiple of the streams
(tensors_kimi.check_kimi_streams, graphs_minimax01.check_minimax01_streams). Such a count is not "too large":
one more or one fewer sequence may be created, so a search for the most sequences asks only the counts that are
(kvmem.engines.llamacpp.verdict)."""

from __future__ import annotations

from .graphs_minimax01 import check_minimax01_streams
from .tensors_kimi import check_kimi_streams

__all__ = ["check_streams", "creatable_streams"]


def check_streams(model, n_seq: int, unified: bool, n_tokens: int) -> None:
    """Raise ValueError (llama.cpp's abort, with its assert) where ``n_seq`` streams of a reserve of ``n_tokens``
    tokens abort creating the context."""
    check_kimi_streams(model, n_seq, unified, n_tokens)
    check_minimax01_streams(model, n_seq, unified, n_tokens)


def creatable_streams(model, cap: int, unified: bool, n_tokens) -> tuple[int, ...]:
    """The sequence counts 1..cap whose context llama.cpp creates, ``n_tokens(n_seq)`` the reserve's tokens
    (min(n_ctx, n_ubatch))."""
    counts = []
    for n_seq in range(1, cap + 1):
        try:
            check_streams(model, n_seq, unified, n_tokens(n_seq))
        except ValueError:
            continue
        counts.append(n_seq)
    return tuple(counts)

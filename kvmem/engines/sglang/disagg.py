"""SGLang's disaggregated prefill/decode roles (kvmem.disagg): the flags and the sliding-window tail a decode
server preallocates."""

from __future__ import annotations

from ...model import Model

__all__ = ["swa_tail_tokens", "roles"]


def swa_tail_tokens(seq_len: int, window: int, page_size: int = 1) -> int:
    """Tokens of a sliding-window layer SGLang's PD decode server preallocates for a request of ``seq_len``: the
    window's page-aligned tail (sglang@v0.5.23 python/sglang/srt/disaggregation/decode.py#L563-L580 _swa_tail_len;
    the radix cache is off on a PD decode server, arg_groups/pd_disaggregation_hook.py#L120-L126)."""
    start = max(0, seq_len - window) // page_size * page_size
    return seq_len - start


def roles(role: str, model: Model, prompt_tokens: int, options: dict) -> tuple[list[str], list[str]]:
    """--disaggregation-mode prefill|decode (sglang@v0.5.23 python/sglang/srt/arg_groups/fields/disagg.py#L55-L58),
    and for the decode role of a sliding-window model the tail it preallocates of each window layer."""
    flags, notes = ["--disaggregation-mode", role], []
    window = min((layer.window for layer in model.layers if layer.kind.windowed and layer.window), default=None)
    if role == "decode" and window:
        page = options.get("page_size") or 1
        notes.append(f"SGLang's decode server preallocates {swa_tail_tokens(prompt_tokens, window, page):,} tokens "
                     f"of each sliding-window layer for a {prompt_tokens:,}-token prompt (the window's tail), not "
                     "the whole prompt")
    return flags, notes

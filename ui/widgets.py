"""Widgets bound to the URL, each checking its URL parameter first (ui/urlparams.py), and the
bounded token parser they share. Pages reach them through ui.inputs."""

from __future__ import annotations

import streamlit as st

import kvmem
from ui import urlparams

MAX_TOKENS = 1 << 40  # 1,099,511,627,776 tokens: 10^4 x the longest real context; bounds the sweeps


def select(container, label: str, options, *, key: str, help: str, default=None, **kw):
    """A selectbox bound to the URL; a URL value that is not an option is refused by name."""
    options = list(options)
    urlparams.check_choice(key, options)
    index = options.index(default) if default is not None else 0
    return container.selectbox(label, options, index=index, key=key, bind="query-params", help=help, **kw)


def radio(container, label: str, options, *, key: str, help: str, **kw):
    urlparams.check_choice(key, options)
    return container.radio(label, options, key=key, bind="query-params", help=help, **kw)


def multiselect(container, label: str, options, *, default, key: str, help: str):
    urlparams.check_choices(key, options)
    return container.multiselect(label, options, default=default, key=key, bind="query-params", help=help)


def number(container, label: str, low, high, default, *, key: str, help: str, step=None, typed_low=None,
           typed_high=None):
    """A number_input bound to the URL: whole numbers where ``default`` is an int.

    ``typed_low`` / ``typed_high``: bounds for typing outside ``low`` .. ``high`` (a link still needs
    them), so that such a value reaches the page's own check and its message, instead of the box
    keeping its last value behind a red icon whose message shows only on hover."""
    integer = isinstance(default, int)
    urlparams.check_number(key, low, high, integer=integer)
    value = container.number_input(label, low if typed_low is None else typed_low,
                                   high if typed_high is None else typed_high, default, step, key=key,
                                   bind="query-params", help=help)
    return int(value) if integer else value


def slider(container, label: str, low, high, default, *, key: str, help: str, step=None):
    urlparams.check_number(key, low, high, integer=isinstance(default, int))
    return container.slider(label, low, high, default, step, key=key, bind="query-params", help=help)


def parse_tokens(text) -> int:
    """kvmem.parse_tokens, bounded by MAX_TOKENS so that every sweep stays finite."""
    if isinstance(text, str) and len(text) > 40:
        raise ValueError(f"tokens: {len(text)} characters is not a token count; at most {MAX_TOKENS:,}")
    tokens = kvmem.parse_tokens(text)
    if tokens > MAX_TOKENS:
        raise ValueError(f"tokens must be at most {MAX_TOKENS:,} (2^40), got {tokens:,}")
    return tokens


def _parsed_text_input(container, label: str, default: str, *, parse, key: str, help: str) -> int:
    """A text box read by ``parse``; an unreadable value is shown as an error and stops the page."""
    urlparams.check_text(key, parse)
    text = container.text_input(label, default, key=key, bind="query-params", help=help)
    try:
        return parse(text)
    except (ValueError, OverflowError) as exc:
        st.error(f"{label}: {exc}")
        st.stop()


def parse_tokens_input(container, label: str, default: str, *, key: str, help: str) -> int:
    """A token-count text box ("8k")."""
    return _parsed_text_input(container, label, default, parse=parse_tokens, key=key, help=help)


def parse_bytes_input(container, label: str, default: str, *, key: str, help: str) -> int:
    """A byte-count text box ("20GiB", "16GB")."""
    return _parsed_text_input(container, label, default, parse=kvmem.parse_bytes, key=key, help=help)

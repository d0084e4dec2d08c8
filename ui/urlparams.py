"""Shared links: check a URL parameter before its bound widget reads it.

Streamlit seeds a ``bind="query-params"`` widget from the URL and, for a value it cannot take,
drops the parameter silently (or, for ``batch=1e400``, raises OverflowError). Each widget
builder here checks its parameter first: a value it refuses is removed from the URL (so the
widget shows its default), and the refusal is kept for the session and shown as one message
that names the parameter, says why, and suggests the nearest valid value. The other
parameters are kept. Only a link's parameters are checked so: a value the user typed is also
in the URL (the widget writes it there), and a bad one is the page's input error, not a
refused link; changing a refused parameter's widget, or a valid link value, clears its refusal.
"""

from __future__ import annotations

import difflib
import math

import streamlit as st

REFUSED_KEY = "_url_refused"
LINKED_KEY = "_url_linked"  # parameter -> the value a link gave it, while the widget still holds it


def _raw(key: str) -> list[str]:
    return st.query_params.get_all(key)


def _forget(key: str) -> None:
    """Remove ``key`` from the URL and from the values Streamlit seeds widgets with.

    Streamlit keeps the page-load query string apart (``_initial_query_params``) to seed bound
    widgets; there is no public call to drop one parameter from it, hence the private access.
    """
    from streamlit.runtime.state import get_session_state

    with get_session_state().query_params() as qp:
        getattr(qp, "_initial_query_params", {}).pop(key, None)
        qp.remove_param(key)


def refuse(key: str, value: str, why: str, nearest=None) -> None:
    """Record a refused parameter and drop it from the URL."""
    shown = value if len(value) <= 40 else value[:37] + "..."
    message = f"`{key}={shown}` refused: {why}"
    if nearest is not None:
        message += f"; nearest valid value: `{nearest}`"
    st.session_state.setdefault(REFUSED_KEY, {})[key] = message
    _forget(key)


def _typed(key: str, values: list[str]) -> bool:
    """True when the URL holds what the widget ``key`` already holds: the user typed or chose it
    (a bound widget writes its value to the URL), so it is an input, not a link parameter."""
    if key not in st.session_state:
        return False
    held = st.session_state[key]
    if isinstance(held, (list, tuple)):
        return [str(v) for v in held] == [v for v in values if v]
    text = values[-1]
    if isinstance(held, bool):
        return text.lower() == str(held).lower()
    if isinstance(held, (int, float)):
        try:
            return float(text) == float(held)
        except ValueError:
            return False
    return text == str(held)


def _link_values(key: str) -> list[str]:
    """The URL's values of ``key`` when they came from a link (not from the widget itself), else [].
    A parameter the user has since changed in its widget clears that parameter's refusal."""
    values = _raw(key)
    if values and _typed(key, values):
        st.session_state.get(REFUSED_KEY, {}).pop(key, None)
        return []
    return values


def from_link(key: str) -> bool:
    """True when ``key``'s value is still the one a link gave it (checked and accepted), not one
    the user has typed since."""
    values = _raw(key)
    return bool(values) and st.session_state.get(LINKED_KEY, {}).get(key) == values[-1]


def _accepted(key: str) -> None:
    """A link value that passed its check: any earlier refusal of ``key`` no longer applies, and
    the value is remembered as the link's (``from_link``)."""
    st.session_state.get(REFUSED_KEY, {}).pop(key, None)
    st.session_state.setdefault(LINKED_KEY, {})[key] = _raw(key)[-1]


def refusals() -> list[str]:
    """Every refusal recorded in this session, for one message on the page."""
    return list(st.session_state.get(REFUSED_KEY, {}).values())


def show_refusals(container=st) -> None:
    """One warning naming every refused link parameter (``container``: where, e.g. a placeholder
    drawn above the page and filled after it, so the page's own parameters are in it at once)."""
    messages = refusals()
    if messages:
        container.warning("Some link parameters were refused and left at their defaults (the rest were kept):\n\n"
                   + "\n".join(f"- {m}" for m in messages), icon=":material/link_off:")


def nearest_choice(value: str, options) -> str | None:
    """The option closest in spelling to ``value`` (difflib ratio >= 0.5), or None."""
    names = [str(o) for o in options]
    lowered = {n.lower(): n for n in names}
    if value.lower() in lowered:
        return lowered[value.lower()]
    close = difflib.get_close_matches(value, names, n=1, cutoff=0.5)
    return close[0] if close else None


def _not_a_choice(names: list[str]) -> str:
    return "not one of the choices" + (f" ({', '.join(names)})" if len(names) <= 12 else "")


def check_choice(key: str, options) -> None:
    """A selectbox/radio parameter must be one of ``options``."""
    values = _link_values(key)
    names = [str(o) for o in options]
    if values and values[-1] not in names:
        refuse(key, values[-1], _not_a_choice(names), nearest_choice(values[-1], names))
    elif values:
        _accepted(key)


def check_choices(key: str, options) -> None:
    """A multiselect parameter: every value must be one of ``options``."""
    names = [str(o) for o in options]
    values = _link_values(key)
    bad = [v for v in values if v and v not in names]
    if bad:
        refuse(key, ",".join(bad), f"{', '.join(bad)} not among the choices", nearest_choice(bad[0], names))
    elif values:
        _accepted(key)


def check_number(key: str, low, high, *, integer: bool) -> None:
    """A number_input/slider parameter: a finite number in [low, high] (whole where ``integer``)."""
    values = _link_values(key)
    if not values:
        return
    text = values[-1]
    try:
        number = float(text)
    except (ValueError, OverflowError):
        refuse(key, text, "not a number", low)
        return
    if not math.isfinite(number):
        refuse(key, text, "not a finite number", high if number > 0 else low)
        return
    if integer and not number.is_integer():
        refuse(key, text, "must be a whole number", min(max(round(number), low), high))
        return
    if not low <= number <= high:
        bound = low if number < low else high
        refuse(key, text, f"must be from {low:,} to {high:,}", bound)
        return
    _accepted(key)


def check_text(key: str, parse, max_chars: int = 200) -> None:
    """A text parameter read by ``parse`` (which raises ValueError on a bad value)."""
    values = _link_values(key)
    if not values:
        return
    text = values[-1]
    if len(text) > max_chars:
        refuse(key, text, f"longer than {max_chars} characters")
        return
    try:
        parse(text)
    except (ValueError, OverflowError) as exc:
        refuse(key, text, str(exc))
        return
    _accepted(key)


def link_value(key: str) -> str | None:
    """The URL's value of ``key`` when a link gave it (not a widget the user changed), else None: for a
    parameter whose widget the page does not draw this run (the Fit page's mixed cards under another engine)."""
    values = _link_values(key)
    return values[-1] if values else None

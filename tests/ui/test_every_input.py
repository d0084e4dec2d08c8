"""Every sidebar input reaches every page (AppTest): changing it changes what the page shows,
or the page says that the input does not apply to it. A page that silently ignores an input
(issue 14: Fit ignored the engine options) fails here."""

import pytest

from tests.ui.apptest import load

# Strategies computes one tab at a time: each tab is its own page here.
STRATEGY_TABS = ["Side by side", "Eviction", "Paged vs contiguous", "Prefix sharing and offloading",
                 "Architecture variants"]
PAGES = ["ui/calculator.py", "ui/compare.py", "ui/fit.py"] + [f"ui/strategies.py?strategy_view={tab}"
                                                              for tab in STRATEGY_TABS]
PAGES.append("ui/overview.py?ov_gpus=rtx-4090-24gb")   # the sidebar's GPU and one more column: every preset's row
# input -> (widget kind, key, new value, label the page uses when it says the input is not used)
CHANGES = {
    "model": ("selectbox", "model", "qwen3-8b", "model"),
    "tokens": ("text_input", "tokens", "16k", "tokens"),
    "batch": ("number_input", "batch", 2, "batch"),
    "kv_dtype": ("selectbox", "kv_dtype", "fp8", "KV dtype"),
    "engine": ("selectbox", "engine", "sglang", "engine"),
    "tp": ("number_input", "tp", 2, "tensor parallel"),
    "pp": ("number_input", "pp", 2, "pipeline parallel"),
    "gpu": ("selectbox", "gpu", "l40s-48gb", "GPU"),
    "num_gpus": ("number_input", "num_gpus", 2, "GPUs"),
    "weight_dtype": ("selectbox", "weight_dtype", "fp8", "weight format"),
}


def shown(at) -> tuple:
    """What a person sees as the page's result: metrics, tables, charts, headings and text."""
    charts = tuple(c.proto.spec for c in at.get("plotly_chart"))
    tables = tuple(d.value.to_csv() for d in at.table)
    return (tuple(m.value for m in at.metric), tables, charts, tuple(m.value for m in at.markdown),
            tuple(s.value for s in at.subheader), tuple(e.value for e in at.error))


def not_used_caption(at) -> str:
    return " ".join(c.value for c in at.caption if c.value.startswith("Not used on this "))  # page or tab


def run(page):
    """Run ``page`` ("path" or "path?param=value") once."""
    path, _, query = page.partition("?")
    at = load(path)
    if query:
        at.query_params.update(dict([query.split("=", 1)]))
    return at.run()


def changed(page, kind, key, value, setup=()):
    base = run(page)
    for s_kind, s_key, s_value in setup:
        getattr(base, s_kind)(key=s_key).set_value(s_value)
    base.run()
    before = shown(base)
    getattr(base, kind)(key=key).set_value(value)
    base.run()
    assert not base.exception
    return before != shown(base), not_used_caption(base)


@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize("name", list(CHANGES))
def test_each_input_changes_the_result_or_is_said_not_to_apply(page, name):
    kind, key, value, label = CHANGES[name]
    differs, caption = changed(page, kind, key, value)
    assert differs or label in caption, f"{page} ignores {name} silently"


@pytest.mark.parametrize("page", PAGES)
def test_engine_options_change_the_result_or_are_said_not_to_apply(page):
    # llama.cpp with K in q8_0 instead of f16
    differs, caption = changed(page, "selectbox", "opt_llama_cpp_type_k", "q8_0",
                               setup=[("selectbox", "engine", "llama.cpp")])
    assert differs or "engine options" in caption, f"{page} ignores the engine options silently"


@pytest.mark.parametrize("page", ["ui/validate.py", "ui/learn.py"])
def test_pages_that_do_not_use_the_sidebar_say_so(page):
    caption = not_used_caption(run(page))
    assert "engine" in caption and "GPU" in caption

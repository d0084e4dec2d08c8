"""Issue 24 item 1: an engine declares its options once, in its own spec; validation, the CLI's
help, the app's widgets and the URL state follow. A toy engine with two options, registered
here and nowhere else, shows up in all of them."""

import pytest

import kvmem
from kvmem import engines
from kvmem.cli import main
from kvmem.engines import ideal
from kvmem.engines.base import EngineSpec
from kvmem.engines.declared import Option
from tests.ui.apptest import load


def toy_estimate(model, *, tokens, batch, kv_dtype, tp, pp, window, mode):
    """The ideal count of the last ``window`` tokens (all of them at 0), twice over in "double" mode."""
    held = min(tokens, window) if window else tokens
    return ideal.estimate(model, tokens=held * (2 if mode == "double" else 1), batch=batch, kv_dtype=kv_dtype,
                          tp=tp, pp=pp)


TOY = EngineSpec("toy", {"window": 0, "mode": "single"}, toy_estimate,
                 declared=(Option("mode", choices=("single", "double"), help="count the window once or twice"),))


@pytest.fixture
def toy():
    engines.ENGINES["toy"] = TOY
    yield TOY
    del engines.ENGINES["toy"]


def test_every_engine_option_is_typed_and_every_declaration_names_an_option():
    for name in engines.list_engines():
        spec = engines.ENGINES[name]
        specs = spec.option_specs()    # raises if a declaration names no option
        assert [o.name for o in specs] == list(spec.options)
        assert all(o.kind in ("choice", "model", "bool", "int", "float", "text") for o in specs)
        assert all(o.default in o.choices for o in specs if o.kind == "choice" and o.default is not None)


def test_the_toy_engine_is_validated_from_its_declaration(toy):
    one = kvmem.estimate("llama-3.1-8b", engine="toy", tokens=8192, window=1024)
    two = kvmem.estimate("llama-3.1-8b", engine="toy", tokens=8192, window=1024, mode="double")
    assert two.kv_bytes == 2 * one.kv_bytes == 2 * kvmem.estimate("llama-3.1-8b", tokens=1024).kv_bytes
    with pytest.raises(ValueError, match="engine 'toy' has no option 'colour'; its options: mode, window"):
        kvmem.estimate("llama-3.1-8b", engine="toy", tokens=8192, colour=1)


def test_the_toy_engine_and_its_options_are_in_the_cli_help(toy, capsys):
    with pytest.raises(SystemExit):
        main(["estimate", "--help"])
    out = capsys.readouterr().out
    assert "  toy:\n    window=0\n    mode=single (single|double): count the window once or twice" in out
    assert "llama.cpp:" in out and "flash_attn=(engine default) (on|off|auto)" in out


def test_the_toy_engine_options_are_widgets_bound_to_the_url(toy):
    at = load("app.py")
    at.query_params.update({"engine": "toy", "opt_toy_mode": "double", "opt_toy_window": "1024"})
    at.run()
    assert not at.exception
    assert at.selectbox(key="opt_toy_mode").value == "double"
    assert at.selectbox(key="opt_toy_mode").options == ["single", "double"]
    assert at.number_input(key="opt_toy_window").value == 1024


def test_the_options_doc_is_the_one_the_declarations_give():
    """docs/engine_options.md is generated (kvmem.engines.declared.options_markdown): the committed file
    equals what the engines declare now; after a change, regenerate it with declared.REGENERATE."""
    from pathlib import Path

    from kvmem.engines.declared import REGENERATE, options_markdown
    doc = Path(__file__).resolve().parents[2] / "docs" / "engine_options.md"
    assert doc.read_text(encoding="utf-8") == options_markdown(engines.ENGINES.values()), REGENERATE

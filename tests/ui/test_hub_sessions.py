"""Issue 32: a Hub failure met in one app session is that session's alone, with a Retry button."""

from __future__ import annotations

from kvmem.sources import hub as hub_source
from tests.sources.conftest import hub, stalled  # noqa: F401  (the loopback Hub, stalled)
from tests.ui.apptest import load


def _session_with(repo_id: str):
    at = load("ui/calculator.py")
    at.run()
    at.radio(key="source").set_value("Hugging Face id").run()
    at.text_input(key="hf_id").input(repo_id).run()
    return at


def _errors(at) -> str:
    return " ".join(e.value for e in at.error)


def test_one_sessions_hub_failure_is_not_another_sessions(stalled):  # noqa: F811
    first = _session_with("slow/model")              # the Hub stalls: this session's try fails
    assert "slow/model" in _errors(first) and not first.exception
    stalled.release()                                  # the Hub is back
    first.run()
    assert "remembered from an earlier try in this session" in _errors(first)
    assert [b.label for b in first.button if b.key == "hf_retry"] == ["Retry the Hub"]
    second = _session_with("slow/model")               # another user: asks the Hub, and gets the model
    assert _errors(second) == "" and not second.exception
    first.button(key="hf_retry").click().run()         # the first user retries
    assert _errors(first) == "" and not first.exception
    assert hub_source._FAILED == {}                    # nothing remembered for the whole process

"""Issue 32: one session's Hub failure never fails that id for another session (kvmem.sources.hub
keep_failures_in: the app keeps each session's failures in its own store; forget_failures retries)."""

from __future__ import annotations

import pytest

import kvmem
from kvmem.sources import SourceError
from kvmem.sources import hub as hub_source


def test_a_failure_is_remembered_for_its_session_only_and_retried_on_request(stalled):
    first, second = {}, {}
    hub_source.keep_failures_in(first)            # session A: the Hub stalls, the deadline ends the try
    with pytest.raises(SourceError, match="config.json"):
        kvmem.get_model("slow/model")
    assert hub_source.failed_ids() == {"slow/model"} and hub_source._FAILED == {}
    stalled.release()                             # the Hub answers again
    asked = len(stalled.requests)
    with pytest.raises(SourceError, match=r"remembered from an earlier try in this session: retry"):
        kvmem.get_model("slow/model")             # A: at once, without asking
    assert len(stalled.requests) == asked
    hub_source.keep_failures_in(second)           # session B: its own try, which now succeeds
    assert kvmem.get_model("slow/model").hf_id == "slow/model" and second == {}
    hub_source.keep_failures_in(first)            # A presses Retry
    assert hub_source.forget_failures("slow/model") == 1
    assert kvmem.get_model("slow/model").hf_id == "slow/model"


def test_outside_a_session_the_process_remembers(stalled):
    with pytest.raises(SourceError):
        kvmem.get_model("slow/model")
    assert [key[1] for key in hub_source._FAILED] == ["slow/model"]
    with pytest.raises(SourceError, match=r"remembered from an earlier try in this process\)"):
        kvmem.get_model("slow/model")

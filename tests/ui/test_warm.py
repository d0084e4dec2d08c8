"""ui/warm.py: the collector is kept off imported modules, and torch is imported in the background once."""

import gc
import sys
import types

import pytest

from ui import warm


@pytest.fixture
def fresh(monkeypatch):
    monkeypatch.setattr(warm, "_state", {"frozen_modules": 0, "warming": False})


def test_freezes_only_when_modules_were_imported(fresh, monkeypatch):
    assert warm.freeze_new_imports() is True  # first call: everything imported so far
    frozen = gc.get_freeze_count()
    assert frozen > 0
    assert warm.freeze_new_imports() is False  # nothing new: no work on this run
    monkeypatch.setitem(sys.modules, "kvmem_test_new_module", types.ModuleType("kvmem_test_new_module"))
    assert warm.freeze_new_imports() is True
    assert warm._state["frozen_modules"] == len(sys.modules)


def test_warm_later_imports_once_per_process(fresh, monkeypatch):
    monkeypatch.delitem(sys.modules, "colorsys", raising=False)
    timer = warm.warm_later(("colorsys",), delay_s=0)
    assert timer is not None and timer.daemon
    timer.join(timeout=30)
    assert "colorsys" in sys.modules
    assert warm.warm_later(("colorsys",), delay_s=0) is None  # already started in this process


def test_a_module_that_fails_to_import_stops_the_warm_up_quietly(fresh, monkeypatch):
    monkeypatch.delitem(sys.modules, "colorsys", raising=False)
    warm._import_all(("kvmem_no_such_module", "colorsys"))  # no exception: the page reports it when used
    assert "colorsys" not in sys.modules

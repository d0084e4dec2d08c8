"""ui/collector.py: the collector is kept off imported modules, and only does the work when some were imported."""

import gc
import sys
import types

import pytest

from ui import collector


@pytest.fixture
def fresh(monkeypatch):
    monkeypatch.setattr(collector, "_state", {"frozen_modules": 0})


def test_freezes_only_when_modules_were_imported(fresh, monkeypatch):
    assert collector.freeze_new_imports() is True  # first call: everything imported so far
    assert gc.get_freeze_count() > 0
    assert collector.freeze_new_imports() is False  # nothing new: no work on this run
    monkeypatch.setitem(sys.modules, "kvmem_test_new_module", types.ModuleType("kvmem_test_new_module"))
    assert collector.freeze_new_imports() is True
    assert collector._state["frozen_modules"] == len(sys.modules)


def test_objects_imported_later_leave_the_collectors_scan(fresh, monkeypatch):
    collector.freeze_new_imports()
    module = types.ModuleType("kvmem_test_late_module")
    module.tables = [[i] for i in range(20_000)]  # like a big library imported by one page (torch)
    monkeypatch.setitem(sys.modules, module.__name__, module)
    tracked = len(gc.get_objects())
    assert collector.freeze_new_imports() is True
    assert len(gc.get_objects()) < tracked - 20_000  # frozen: a full collection no longer scans them

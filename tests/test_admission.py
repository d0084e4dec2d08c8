"""kvmem.admission: one measurement at a time, a visible queue, a ledger, the process's limits."""

import threading

import pytest

from kvmem import admission


def test_a_second_caller_is_told_it_waits_and_runs_after_the_first():
    events, told = [], []
    with admission.serialised():
        worker = threading.Thread(target=lambda: _run(events, told))
        worker.start()
        while admission.waiting() != 1:  # the worker is queued behind us
            threading.Event().wait(0.01)
        events.append("first done")
    worker.join(timeout=30)
    assert events == ["first done", "second ran"]
    assert told == ["waiting for another measurement to finish (1 in the queue)"]
    assert admission.waiting() == 0


def _run(events, told):
    with admission.serialised(on_wait=told.append):
        events.append("second ran")


def test_the_same_thread_may_nest_runs():
    # validate() holds the lock across the suite and each measure() takes it again
    with admission.serialised(), admission.serialised(on_wait=pytest.fail):
        pass


def test_the_ledger_deducts_what_is_admitted(monkeypatch):
    monkeypatch.setattr(admission, "_meminfo_available", lambda: 10 * 2**30)
    monkeypatch.setattr(admission, "_cgroup_free", lambda: None)
    monkeypatch.setattr(admission, "_address_space_free", lambda: None)
    assert admission.free_bytes("cpu") == 10 * 2**30
    with admission.reserve("cpu", 8 * 2**30):
        assert admission.free_bytes("cpu") == 2 * 2**30   # a second run cannot take the same 8 GiB
    assert admission.free_bytes("cpu") == 10 * 2**30


def test_the_smallest_of_machine_cgroup_and_address_space_limits(monkeypatch):
    monkeypatch.setattr(admission, "_meminfo_available", lambda: 10 * 2**30)
    monkeypatch.setattr(admission, "_cgroup_free", lambda: 3 * 2**30)
    monkeypatch.setattr(admission, "_address_space_free", lambda: 5 * 2**30)
    assert admission.free_bytes("cpu") == 3 * 2**30
    monkeypatch.setattr(admission, "_address_space_free", lambda: 2**30)
    assert admission.free_bytes("cpu") == 2**30


def test_rlimit_as_is_read(monkeypatch):
    resource = pytest.importorskip("resource")
    monkeypatch.setattr(resource, "getrlimit", lambda which: (64 * 2**30, resource.RLIM_INFINITY))
    free = admission._address_space_free()
    assert free is not None and free < 64 * 2**30  # the limit less this process's own VmSize

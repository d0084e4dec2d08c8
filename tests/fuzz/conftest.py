"""The fuzz suite's tally, printed at the end of a run (counts of this process's calls, and of each
pytest-xdist worker's under `make fuzz`, which runs them side by side)."""

import pytest

from .harness import SLOW_SECONDS, SLOWEST, STATS


def pytest_sessionfinish(session):
    workeroutput = getattr(session.config, "workeroutput", None)     # set on a pytest-xdist worker only
    if workeroutput is not None:
        workeroutput["kvmem_fuzz"] = {"stats": dict(STATS), "slowest": list(SLOWEST)}


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """pytest-xdist's controller: add a finished worker's tally to this process's."""
    tally = getattr(node, "workeroutput", {}).get("kvmem_fuzz")
    if tally:
        STATS.update(tally["stats"])
        SLOWEST.extend(tuple(s) for s in tally["slowest"])
        SLOWEST.sort(reverse=True)
        del SLOWEST[5:]


def pytest_terminal_summary(terminalreporter):
    if not STATS["calls"]:
        return
    terminalreporter.section("kvmem fuzz tally")
    terminalreporter.write_line(
        f"{STATS['calls']:,} calls: {STATS['ok']:,} ok, {STATS['refused']:,} refused naming the field, "
        f"{STATS['crash']} crashes, {STATS['unnamed']} refusals without a field name, "
        f"{STATS['nonsense']} nonsense results, {STATS['slow']} calls over {SLOW_SECONDS:g} s")
    for seconds, label in SLOWEST:
        terminalreporter.write_line(f"  slow: {seconds:.2f} s {label}")

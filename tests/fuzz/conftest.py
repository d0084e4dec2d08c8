"""The fuzz suite's tally, printed at the end of a run (counts of this process's calls)."""

from .harness import SLOW_SECONDS, SLOWEST, STATS


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

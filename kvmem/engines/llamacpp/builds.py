"""llama.cpp's build number, as a log prints it, read as the date kvmem's build rules go by.

A build's number is ``git rev-list --count`` of the commit it was built from (cmake/build-info.cmake of the vendored
build 0c1e57098), printed as "build: 5331 (33eff402) with ..." (llama.cpp@74b8fc17f common/common.cpp#L370), "main:
build = 1234 (...)" (2024: common/common.h #L30 at e141ce624), "version: 6699 (c08002a1)" (--version, common/arg.cpp
#L1728 at 74b8fc17f), "version: X (build N, commit H)" (common/build-info.cpp.in #L33 at 3f545becc) or "build_info:
b8946-0f1bb602d" (tools/server/server.cpp #L113 at b97ebdc98), "common_params_print_info: build 10505 (ee4c505a4) with
..." (common/common.cpp#L403 at 3f545becc), and llama-bench's "build: e3a9421b (5389)", the commit first
(tools/llama-bench/llama-bench.cpp#L2065 at 3f545becc). Build N of master is dated by
kvmem/data/llamacpp_builds.json (tools/llamacpp_builds.py, from master's history): the day of its commit, moved only
where that day holds the merge of a pull request kvmem's rules date (settings.PR_<N>, from
kvmem/data/llamacpp_prs.json: each PR's date and first build) and the build comes before it, or where master's
commit dates step back, so that the date gives the build the rules it has. A build past the table, or a commit that
is not master's build N (a fork or a local branch: "(e59a5f1e)"), is said, never dated silently. """

from __future__ import annotations

import datetime
import re

from ...datafiles import read_json
from .settings import PR_DATES, PR_ROWS

# a log's build line: the number and, where printed, the commit (its first hex digits)
BUILD_LINES = (re.compile(r"\bbuild: (\d{1,6}) \(([0-9a-f]{4,40})\)"),
               re.compile(r"\w: build = (\d{1,6}) \(([0-9a-f]{4,40})\)"),
               re.compile(r"^version: (\d{1,6}) \(([0-9a-f]{4,40})\)"),
               re.compile(r"^version: \S{1,40} \(build (\d{1,6}), commit ([0-9a-f]{4,40})\)"),
               re.compile(r"\bbuild_info: b(\d{1,6})-([0-9a-f]{4,40})\b"),
               re.compile(r"\w: build (\d{1,6}) \(([0-9a-f]{4,40})\) with "))
# llama-bench's: the commit, then the number (tools/llama-bench/llama-bench.cpp#L2065 at 3f545becc)
BENCH_BUILD_LINE = re.compile(r"^build: ([0-9a-f]{7,40}) \((\d{1,6})\)$")
PINNED = (11312, "0c1e57098", "2026-10-01")    # the build kvmem's rules are pinned to (settings.py)
_TABLE: dict = {}


def table() -> dict:
    if not _TABLE:
        _TABLE.update(read_json("llamacpp_builds.json"))
    return _TABLE


def build_line(lines: list[str]):
    """(line number, build number, commit or None, the line) of the log's first build line, or None."""
    for n, line in enumerate(lines, 1):
        if "build" not in line and "version: " not in line:
            continue
        for pattern in BUILD_LINES:
            if m := pattern.search(line.strip()):
                return n, int(m.group(1)), m.group(2), line.strip()
        if m := BENCH_BUILD_LINE.search(line.strip()):
            return n, int(m.group(2)), m.group(1), line.strip()
    return None


def uncounted(number: int, commit: str | None) -> str | None:
    """Why ``number`` is not a count of master's commits, or None. cmake counts the commits the checkout holds
    (cmake/build-info.cmake#L1, #L31-L38 at 3f545becc: BUILD_NUMBER 0 without git, else ``git rev-list --count
    HEAD``): a shallow clone (``git clone --depth 1``, as packagers and Dockerfiles make) prints build 1, a tarball
    build 0, whatever its code. Such a number dates nothing; a build 1 whose commit is master's build 1 is master's."""
    if number == 0:
        return "build 0 is cmake's number where no git history was found (a source tarball): it dates nothing"
    if number == 1 and commit is not None:
        ours = table()["hashes"][:4]
        if not commit.lower().startswith(ours):
            return (f"build 1 with commit {commit}, which is not master's build 1 ({ours}...): the commit count of a "
                    "shallow clone (git clone --depth 1), not a build number; it dates nothing")
    return None


def _dated_prs() -> dict:
    """PR number -> (its date, its first build): settings.PR_ROWS, the table settings.PR_<N> come from."""
    return {n: (PR_DATES[n], first) for n, (first, *_) in PR_ROWS.items() if first is not None}


def build_date(number: int, commit: str | None = None) -> tuple[str | None, list[str]]:
    """The date ("YYYY-MM-DD") kvmem's rules should use for llama.cpp build ``number``, or None (the newest rules
    kvmem knows), and what the reader should be told about it."""
    data = table()
    last, last_date, last_commit = data["last"]
    notes: list[str] = []
    if number == PINNED[0]:           # the pinned build itself: its rules are kvmem's newest, nothing undetermined
        shared = min(len(commit or ""), len(PINNED[1]))
        if commit is not None and commit.lower()[:shared] != PINNED[1][:shared]:
            notes.append(f"the log's commit {commit} is not master's build {number} ({PINNED[1]}): a fork or a local "
                         f"branch; checked under the rules of master's build {number} ({PINNED[2]})")
        return None, notes
    if number > last:
        beyond = (f"build {number} is newer than kvmem's table of llama.cpp builds (build {last}, {last_date}; "
                  "kvmem/data/llamacpp_builds.json)")
        if number <= PINNED[0]:
            notes.append(f"{beyond}: checked under the rules of build {PINNED[0]} ({PINNED[1]}, {PINNED[2]}), the "
                         "newest kvmem knows; a rule changed between the two (ggml_backend_sched's input copies "
                         "with -ts pipeline parallelism, settings.SCHED_USED_INPUT_COPIES_TO) is undetermined: "
                         "-o build=YYYY-MM-DD pins it")
        else:
            notes.append(f"{beyond} and than build {PINNED[0]} ({PINNED[1]}, {PINNED[2]}) kvmem's rules are pinned "
                         "to: checked under that build's rules, which may not be this build's")
        return None, notes
    if number < 1:
        return None, [f"build {number} is not a llama.cpp build number"]
    days = data["days"]
    lo, hi = 0, len(days) - 1
    while lo < hi:                                   # the last day whose first build is <= number
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if days[mid][0] <= number else (lo, mid - 1)
    day = datetime.date.fromisoformat(days[lo][1])
    if commit is not None:
        ours = data["hashes"][4 * (number - 1):4 * number]
        if not commit.lower().startswith(ours):
            notes.append(f"the log's commit {commit} is not master's build {number} ({ours}...): a fork or a local "
                         f"branch; dated by its number as master's build {number} ({day})")
    # the PR dates kvmem's rules use, against the first build holding each PR
    has: list[tuple] = []
    lacks: list[tuple] = []
    for pr, (date, first) in _dated_prs().items():
        (has if number >= first else lacks).append((date, pr, first))
    low = max(has, default=None)
    high = min(lacks, default=None)
    chosen = day
    if low is not None and chosen < low[0]:
        chosen = low[0]
    if high is not None and chosen >= high[0]:
        chosen = high[0] - datetime.timedelta(days=1)
    if low is not None and chosen < low[0]:
        notes.append(f"build {number} ({day}) has PR #{low[1]} (build {low[2]}), which kvmem's rules date "
                     f"{low[0]}, and not PR #{high[1]} (build {high[2]}), dated {high[0]}: no date gives both; "  # type: ignore[index]
                     f"checked as {chosen}, without PR #{low[1]}'s rule: -o build=YYYY-MM-DD decides")
    elif chosen != day:
        pr = (high if high is not None and chosen < day else low)
        notes.append(f"build {number} is of {day}; checked as {chosen}: kvmem's rules date PR #{pr[1]} "  # type: ignore[index]
                     f"{pr[0]} and the build {'lacks' if chosen < day else 'has'} it (its first build is "  # type: ignore[index]
                     f"{pr[2]})")  # type: ignore[index]
    return chosen.isoformat(), notes

"""The llama.cpp pull requests kvmem's rules switch on: one table (kvmem/data/llamacpp_prs.json, written by
tools/llamacpp_builds.py from master's history), every PR_<N> constant equal to its date, the table consistent with
the build table (kvmem/data/llamacpp_builds.json) it was read beside."""

from __future__ import annotations

import datetime
import importlib
import pathlib
import pkgutil
import re

import pytest

import kvmem.engines.llamacpp as llamacpp_pkg
from kvmem.datafiles import read_json
from kvmem.engines.llamacpp import settings
from kvmem.engines.llamacpp.builds import build_date
from kvmem.engines.llamacpp.log_lines import _style

PRS = read_json("llamacpp_prs.json")["prs"]
BUILDS = read_json("llamacpp_builds.json")


def _constants() -> dict:
    """(module, PR_<N>) -> its value, over every module of kvmem.engines.llamacpp."""
    found = {}
    for info in pkgutil.iter_modules(llamacpp_pkg.__path__):
        module = importlib.import_module(f"kvmem.engines.llamacpp.{info.name}")
        for name, value in vars(module).items():
            if name.startswith("PR_") and name[3:].isdigit():
                found[(info.name, name)] = value
    return found


def test_every_pr_constant_is_the_tables_date():
    # a PR_<N> anywhere in the llama.cpp engine is the table's date of PR #N: a new one goes into the table
    # (tools/llamacpp_builds.py GIT_DIR --add N) and is imported from settings, never written as a date
    constants = _constants()
    assert len(constants) >= len(PRS)
    wrong = {key: value for key, value in constants.items()
             if key[1][3:] not in PRS or value != datetime.date.fromisoformat(PRS[key[1][3:]][1])}
    assert wrong == {}
    # and settings exports every PR of the table as PR_<N>, from the table itself
    assert {f"PR_{n}" for n in PRS} <= set(vars(settings))
    assert settings.PR_DATES == {int(n): datetime.date.fromisoformat(row[1]) for n, row in PRS.items()}
    assert settings.FA_AUTO == settings.PR_15434 == datetime.date(2025, 8, 30)


def test_table_rows_are_masters_builds():
    # each row [first build, date, commit, subject]: its date is the build table's day of that build and its
    # commit that build's (the build table's 4 hex digits a build), and dates never go back as builds go up
    days, hashes = BUILDS["days"], BUILDS["hashes"]

    def day_of(build: int) -> str:
        return max((d for d in days if d[0] <= build), key=lambda d: d[0])[1]

    rows = sorted((row for row in PRS.values() if row[0] is not None), key=lambda row: row[0])
    assert len(rows) == len(PRS)                            # every PR kvmem dates is on the mirror (a first build)
    for first, date, commit, subject in rows:
        assert day_of(first) == date, (first, date, subject)
        assert commit.startswith(hashes[4 * (first - 1):4 * first]), (first, commit)
        assert first <= BUILDS["last"][0]
    dates = [row[1] for row in rows]
    assert dates == sorted(dates)                           # monotone: a later first build is never dated earlier
    assert [n for n in PRS] == sorted(PRS, key=int)         # a PR a line, in number order (the tool's output)


def test_table_is_the_prs_the_rules_name():
    # the table holds what tools/llamacpp_builds.py reads into it (_dated_prs): each PR_<N> named in the engine's
    # sources, and nothing else; it grows with them (42 rows when this was written, 35 before), so no count here
    named = set()
    for path in pathlib.Path(llamacpp_pkg.__file__).parent.glob("*.py"):
        named |= set(re.findall(r"\bPR_(\d+)\b", path.read_text(encoding="utf-8")))
    assert named == set(PRS)


@pytest.mark.parametrize("pr, row", [
    # git --git-dir=<ngxson/llama.cpp> log --format='%H %cs %s' master | grep '(#N)'; build = git rev-list --count
    (6177, [2493, "2024-03-22", "95d576b48", "metal : pad n_ctx by 32"]),
    (5021, [2771, "2024-04-30", "9c67c2773", "ggml : add Flash Attention"]),
    (14959, [6071, "2025-08-02", "a4569c41f", "llama : enable LLAMA_SET_ROWS=1 by default"]),
    (15040, [6072, "2025-08-02", "4fdea540b", "kv-cache : skip alignment of n_stream in kv-cache log msg [no ci]"]),
    (17046, [6975, "2025-11-07", "16bcc1259", "kv-cache : pad the cache size to 256 for performance"]),
    (18148, [7467, "2025-12-18", "57c1e0564", "llama: offload output layer to GPU first"]),
    (18550, [7774, "2026-01-19", "365a3e8c3", "ggml : add ggml_build_forward_select"]),
    (19067, [7832, "2026-01-25", "d9c6ce46f", "kv-cache : support V-less cache"]),
    (23907, [9489, "2026-06-03", "f8f0a47a5", "cuda: reserve space for quantize kv-cache at startup"]),
])
def test_pinned_rows(pr, row):
    # the dates that were approximate before the table (layouts 2025-08-01 / 2026-01-03, settings 2025-11-06 /
    # 2026-01-24, placement 2025-12-17, scheduled 2026-06-04, log_lines ~2025-07-20, n_pad's PR #6438 of 2024-04-02)
    assert PRS[str(pr)] == row


def test_log_styles_switch_on_their_prs():
    # the KV self prefix: llama_new_context_with_model -> llama_init_from_model (PR #11110, afa8a9ec9 renamed the
    # function whose __func__ the line prints) -> llama_context (PR #12181) -> llama_kv_cache_unified (PR #12799);
    # the size line: "%2u seqs" (PR #13660) -> "%2u/%2u seqs" (PR #14363) -> "%2u/%u seqs" (PR #15040,
    # 4fdea540b src/llama-kv-cache-unified.cpp) -> "llama_kv_cache:" (PR #15467)
    assert [_style(d, None) for d in ("2025-05-20", "2025-05-21", "2025-07-16", "2025-08-01", "2025-08-02",
                                      "2025-08-21")] == \
        ["unified_layers", "unified", "unified_streams", "unified_streams", "unified_seqs", "current"]
    from kvmem.engines.llamacpp.log_lines import _KV_SELF_PREFIX
    assert [(d.isoformat(), name) for d, name in _KV_SELF_PREFIX] == [
        ("2025-01-12", "llama_init_from_model"), ("2025-03-13", "llama_context"),
        ("2025-05-02", "llama_kv_cache_unified")]


def test_build_numbers_around_a_merge_day():
    # master's 2025-08-02 runs from build 6061 (days: [6061, "2025-08-02"]); PR #14959 is build 6071, PR #15040 6072.
    # A build is dated by its day, moved only where that day's merges come after it
    assert build_date(6060) == ("2025-08-01", [])
    assert build_date(6072) == ("2025-08-02", [])
    date, notes = build_date(6070)                  # of 2025-08-02, before both merges: the day before, said
    assert date == "2025-08-01" and "PR #14959" in notes[0] and "lacks" in notes[0]
    # build 6071 has PR #14959 but not PR #15040, both of 2025-08-02: no date gives it both (said, as the day before)
    date, notes = build_date(6071)
    assert date == "2025-08-01" and "no date gives both" in notes[0] and "PR #15040" in notes[0]
    # build 7773 is of 2026-01-19, the day of PR #18550 (build 7774), and lacks it: the day before, said
    date, notes = build_date(7773)
    assert date == "2026-01-18" and "PR #18550" in notes[0]
    assert build_date(7774) == ("2026-01-19", [])

"""Write kvmem/data/llamacpp_builds.json (llama.cpp's build numbers and their dates) and kvmem/data/llamacpp_prs.json
(the pull requests kvmem's llama.cpp rules date: settings.PR_<N>).

llama.cpp's build number is `git rev-list --count HEAD` of the commit it was built from
(llama.cpp@0c1e57098 cmake/build-info.cmake: BUILD_NUMBER from "git rev-list --count HEAD"); its logs print it
("build: 5331 (33eff402) with ...", "build_info: b8946-...", "main: build = 1234 (...)"). Build N of master is
master's commit whose history holds N commits. This script reads a git directory holding llama.cpp's master (a
mirror: `fetch github:ngxson/llama.cpp`, whose master follows ggml-org/llama.cpp's) and writes:
- "days": [first build of a day, "YYYY-MM-DD"] for each day master moved (the committer's date, as printed by
  git's %cs; the dates kvmem's rules use, kvmem/engines/llamacpp/settings.py, are the same squash-merge dates);
- "hashes": the first 4 hex digits of build N's commit at characters 4(N-1) .. 4N (a log's "(33eff402)" confirms
  that its number is master's build);
- "source": the mirror and commit it was generated from;
and llamacpp_prs.json's "prs": PR number -> [first build that holds it, its date, its commit, its subject] for every
PR of the existing table, every PR_<N> name under kvmem/engines/llamacpp/ and each --add N (found by the "(#N)" its
squash-merge subject ends with): the one table kvmem's PR dates come from (settings.py loads it). A PR the mirror
lacks (merged after its tip, or never on master) is kept as the table has it, [null, date, null, its source], and
said.

Usage: python tools/llamacpp_builds.py GIT_DIR [--ref master] [--add N ...]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import re
import subprocess

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "kvmem" / "data" / "llamacpp_builds.json"
PRS = ROOT / "kvmem" / "data" / "llamacpp_prs.json"


def _git(git_dir: str, *args: str) -> str:
    return subprocess.run(["git", f"--git-dir={git_dir}", *args], check=True, capture_output=True,
                          text=True).stdout


def _dated_prs(old: dict, added: list[int]) -> list[int]:
    """The PR numbers kvmem's llama.cpp rules date: the table's, the PR_<N> names under kvmem/engines/llamacpp/ and
    those added."""
    found = {int(n) for n in old} | set(added)
    for path in (ROOT / "kvmem" / "engines" / "llamacpp").glob("*.py"):
        found |= {int(n) for n in re.findall(r"\bPR_(\d+)\b", path.read_text())}
    return sorted(found)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("git_dir")
    parser.add_argument("--ref", default="master")
    parser.add_argument("--source", default="github:ngxson/llama.cpp (a mirror of ggml-org/llama.cpp master)")
    parser.add_argument("--add", type=int, nargs="*", default=[], help="PR numbers to add to the table")
    args = parser.parse_args()
    # every commit of the ref, oldest first, with its build number: rev-list --count of each, computed from the
    # first-parent chain plus the commits each merge brings in (master is squash-merged: one merge in 10,587)
    log = _git(args.git_dir, "log", "--first-parent", "--reverse", "--format=%H %P|%cs|%s", args.ref).splitlines()
    builds, seen = [], 0
    for line in log:
        head, date, subject = line.split("|", 2)
        commit, *parents = head.split()
        if len(parents) > 1:                                  # a merge: the side commits count too
            seen += int(_git(args.git_dir, "rev-list", "--count", f"{parents[0]}..{commit}").strip()) - 1
        seen += 1
        builds.append((seen, commit, date, subject))
    tip = builds[-1]
    check = int(_git(args.git_dir, "rev-list", "--count", tip[1]).strip())
    if check != tip[0]:
        raise SystemExit(f"build count {tip[0]} != git rev-list --count {check}")
    days: list = []
    for n, _, date, _ in builds:
        if not days or days[-1][1] != date:
            days.append([n, date])
    hashes = [""] * tip[0]
    for n, commit, _, _ in builds:
        hashes[n - 1] = commit[:4]
    hashes = [h or "...." for h in hashes]                  # a merged side commit: no master build of its own
    old = json.loads(PRS.read_text())["prs"] if PRS.exists() else {}
    prs, kept = {}, []
    for pr in _dated_prs(old, args.add):
        tag = f"(#{pr})"
        hit = next(((n, c, d, s) for n, c, d, s in builds if s.rstrip().endswith(tag) or f" {tag}" in s), None)
        if hit is not None:
            prs[str(pr)] = [hit[0], hit[2], hit[1][:9], hit[3].replace(f" {tag}", "").strip()]
        elif str(pr) in old and old[str(pr)][0] is None:
            prs[str(pr)] = old[str(pr)]                     # not on the mirror: its date and source as kept
            kept.append(pr)
        else:
            raise SystemExit(f"PR #{pr}: no '{tag}' commit on {args.ref}; enter it as [null, date, null, source]")
    source = (f"{args.source} {args.ref} at {tip[1][:9]} (build {tip[0]}, {tip[2]}); written by "
              "tools/llamacpp_builds.py")
    data = {"source": source, "last": [tip[0], tip[2], tip[1][:9]], "days": days, "hashes": "".join(hashes)}
    OUT.write_text(json.dumps(data, separators=(",", ":")) + "\n")
    note = ("[first build, date (%cs of the squash merge), commit, subject]; [null, date, null, source]: not on the "
            "mirror")
    rows = ",\n".join(f"{json.dumps(n)}:{json.dumps(prs[n])}" for n in sorted(prs, key=int))   # a PR a line
    PRS.write_text(f'{{"source":{json.dumps(source + ": " + note)},\n"prs":{{\n{rows}}}}}\n')
    print(f"{OUT}: {len(days)} days, builds 1..{tip[0]}; {PRS}: {len(prs)} PRs ({len(kept)} not on the mirror: "
          f"{kept})")


if __name__ == "__main__":
    main()

"""mypy on kvmem/ (issue 35 item 8): the errors per file may only shrink.

tests/mypy_baseline.txt holds today's count per file; a file with more errors than its line
fails, and so does any error in the packages kept clean (CLEAN). A fixed file is taken off the
baseline by running, after the fix:  KVMEM_MYPY_UPDATE=1 .venv/bin/python -m pytest tests/test_typecheck.py
"""

import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BASELINE = ROOT / "tests" / "mypy_baseline.txt"
CLEAN = ("kvmem/model.py", "kvmem/layer.py", "kvmem/facts.py", "kvmem/configs/", "kvmem/engines/base.py",
         "kvmem/sizing/")
ERROR = re.compile(r"^(kvmem/[\w/]+\.py):\d+: error:", re.M)

pytestmark = pytest.mark.slow      # ~10 s with mypy's cache, ~60 s without: `make test`, not test-fast


def _errors() -> Counter:
    run = subprocess.run([sys.executable, "-m", "mypy", "kvmem"], cwd=ROOT, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode in (0, 1), run.stdout[-2000:] + run.stderr[-2000:]   # 2: mypy itself failed
    return Counter(ERROR.findall(run.stdout))


def _baseline() -> dict[str, int]:
    rows = (line.split() for line in BASELINE.read_text(encoding="utf-8").splitlines()
            if line.strip() and not line.startswith("#"))
    return {path: int(count) for path, count in rows}


def test_mypy_errors_do_not_grow():
    found = _errors()
    if os.environ.get("KVMEM_MYPY_UPDATE") == "1":
        lines = [f"{path} {count}" for path, count in sorted(found.items())]
        BASELINE.write_text("# mypy kvmem: errors per file (tests/test_typecheck.py); may only shrink\n"
                            + "\n".join(lines) + "\n", encoding="utf-8")
    baseline = _baseline()
    grown = {path: (count, baseline.get(path, 0)) for path, count in found.items() if count > baseline.get(path, 0)}
    assert grown == {}, "more mypy errors than tests/mypy_baseline.txt allows (found, allowed): " + repr(grown)
    assert [path for path in found if path.startswith(CLEAN)] == []


def test_the_clean_packages_have_no_baseline():
    assert [path for path in _baseline() if path.startswith(CLEAN)] == []
    assert sum(_baseline().values()) <= 542        # 2026-12-06, when this check began: 542 errors in 104 files

"""The Makefile's recipes, read with ``make -n`` (nothing is run)."""

import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_run_shows_its_install_progress():
    # issue 23 item 20: `make run` was silent for ~3.5 minutes on a fresh clone (pip --quiet)
    recipe = subprocess.run(["make", "-n", "-B", "run"], cwd=ROOT, capture_output=True, text=True,
                            check=True).stdout.splitlines()
    install = next(line for line in recipe if "pip install" in line and "requirements.txt" in line)
    assert "--quiet" not in install and "--progress-bar on" in install
    assert any("installing requirements.txt" in line and "few minutes" in line for line in recipe)

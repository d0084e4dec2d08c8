"""`make fuzz` (issue 32 item 8): the seeded fuzz with a fresh seed it prints, and more calls."""

import importlib
import pathlib
import shutil
import subprocess

import pytest

from . import test_fuzz_seeded

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_fuzz_draws_and_prints_a_seed_and_passes_it_on():
    recipe = subprocess.run(["make", "-n", "fuzz"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert "secrets.randbelow(2**32)" in recipe and 'echo "==> kvmem fuzz: seed $seed, 200000 calls' in recipe
    assert "KVMEM_FUZZ_SEED=$seed KVMEM_FUZZ_CALLS=200000" in recipe and "tests/fuzz/test_fuzz_seeded.py" in recipe
    again = subprocess.run(["make", "-n", "fuzz", "FUZZ_SEED=12345", "FUZZ_CALLS=99"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout
    assert 'seed="12345"' in again and "KVMEM_FUZZ_CALLS=99" in again


def test_the_seed_and_the_number_of_calls_come_from_the_environment(monkeypatch):
    try:
        monkeypatch.setenv("KVMEM_FUZZ_SEED", "12345")
        monkeypatch.setenv("KVMEM_FUZZ_CALLS", "99")
        module = importlib.reload(test_fuzz_seeded)
        assert (module.SEED, module.CALLS) == (12345, 99)
        monkeypatch.delenv("KVMEM_FUZZ_SEED")
        monkeypatch.delenv("KVMEM_FUZZ_CALLS")
        module = importlib.reload(test_fuzz_seeded)
        assert (module.SEED, module.CALLS) == (20_260_020, 20_000)      # CI's fixed seed
    finally:
        monkeypatch.undo()
        importlib.reload(test_fuzz_seeded)


def test_a_finding_names_its_seed_and_call_to_keep(monkeypatch):
    from .harness import Finding

    def wrong(rng, i):
        raise Finding(f"#{i} made up")
    monkeypatch.setattr(test_fuzz_seeded, "_one", wrong)
    (finding,) = test_fuzz_seeded._run(777, [5])
    assert finding.startswith("seed 777 call 5 (keep it: KEPT.append((777, 5))): #5 made up")

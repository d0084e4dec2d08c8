"""tools/cuda_validate.sh's CPU dry run: the same phases and report as on a GPU, at reduced sizes."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

import kvmem
import kvmem.validation
from kvmem.measurement import cuda_report

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def dry(tmp_path_factory):
    out = tmp_path_factory.mktemp("cuda")
    # one suite model (GQA, dynamic and static) and no quanto
    # (its C++ kernels compile on first use): a short run that still has every phase
    env = {**os.environ, "OUT": str(out), "KVMEM_CUDA_DEVICE": "cpu", "KVMEM_PYTHON": sys.executable,
           "KVMEM_CUDA_SUITE_MODELS": "llama-3.1-8b", "KVMEM_CUDA_SKIP_BACKENDS": "quanto"}
    done = subprocess.run(["bash", str(ROOT / "tools" / "cuda_validate.sh")], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return out, json.loads((out / "cuda_report.json").read_text()), (out / "cuda.md").read_text()


@pytest.mark.slow
def test_dry_run_report_has_every_phase_and_case(dry):
    out, report, md = dry
    assert report["dry_run"] is True and report["machine"]["device"] == "cpu"
    assert report["phase_exit_codes"] == {"machine": "0", "suite": "0", "formats": "0", "seed": "0", "long": "0"}
    # the suite is what `kvmem validate --quick` runs for these models, case for case
    expected = [(e["model"], e["engine"], e["tokens"]) for e in kvmem.validation.suite(
        models=["llama-3.1-8b"], quick=True)]
    assert [(r["model"], r["engine"], r["tokens"]) for r in report["suite"]] == expected
    assert [r["label"] for r in report["formats"]["rows"]] == [f[0] for f in cuda_report.FORMATS]
    assert len(report["long"]["rows"]) == 2
    rows = report["suite"] + report["formats"]["rows"] + report["long"]["rows"]
    ran = [r for r in rows if not r.get("skipped")]
    skipped = [r for r in rows if r.get("skipped")]
    assert all(r["matches"] and r["tensor_bytes"] == r["predicted_bytes"] for r in ran)
    assert {r["options"]["backend"] for r in skipped} == {"quanto"} and len(ran) == 12
    assert report["summary"] == {"cases": 14, "ran": 12, "matched": 12, "bytes_matched": 12, "skipped_or_failed": 2,
                                 "not_reached": 0, "seed_matches": True}
    # every case is in the markdown, with its figures
    assert md.startswith("# kvmem validate on CUDA — CPU DRY RUN")
    for r in ran:
        assert f"| {r['predicted_bytes']:,} | {r['tensor_bytes']:,} | 0 |" in md
    for label, *_ in cuda_report.FORMATS:
        assert f"| {label} |" in md
    assert "12 of 12 cases match" in md and "quanto left out of this run" in md
    assert {p.name for p in out.iterdir()} >= {"cuda_report.json", "cuda.md", "cuda_validate.log", "validate.json"}


@pytest.mark.slow
def test_dry_run_seed_and_long_context_figures(dry):
    _, report, md = dry
    seed, spec = report["seed"], cuda_report.SIZES["dry"]["seed"]
    # 2 (K, V) x 2 B (fp16) x b x layers x heads x d_head x t, for the reduced shape
    formula = 2 * 2 * spec["batch"] * spec["layers"] * spec["heads"] * spec["head_dim"] * spec["tokens"]
    assert seed["tensor_bytes"] == seed["formula_bytes"] == seed["estimate_bytes"] == formula == 36_864
    assert seed["matches"] and seed["seed_bytes"] is None and seed["allocator"] is None
    assert seed["cached"]["steps"] == spec["tokens"] - spec["prompt"]
    assert [r["context"] for r in seed["uncached"]["timed_at"]] == list(spec["uncached_lengths"])
    assert all(r["ms_uncached"] > 0 and r["ms_cached"] > 0 for r in seed["uncached"]["timed_at"])
    assert f"| the cache's tensors (unique storages) | {formula:,} |" in md
    long = report["long"]["rows"]
    tokens = cuda_report.SIZES["dry"]["long"]["tokens"]
    # Llama-3.1-8B: 32 layers x 8 KV heads x 128 x (K, V) x 2 B = 131,072 B per token
    assert [r["tensor_bytes"] for r in long] == [tokens * 131_072] * 2
    assert [r["engine"] for r in long] == ["hf-dynamic", "hf-static"]


def test_full_sizes_are_the_issues():
    seed, long = cuda_report.SIZES["full"]["seed"], cuda_report.SIZES["full"]["long"]
    assert kvmem.formula(bytes_per_element=2, batch=seed["batch"], layers=seed["layers"], kv_heads=seed["heads"],
                         head_dim=seed["head_dim"], tokens=seed["tokens"]) == cuda_report.SEED_BYTES == 8_388_608_000
    assert (long["model"], long["tokens"]) == ("llama-3.1-8b", 131_072)
    # the 128k point's dynamic cache: 16 GiB of K/V, its peak one more layer's K and V (cat growth)
    assert kvmem.estimate("llama-3.1-8b", engine="hf-dynamic", tokens=131_072, kv_dtype="bf16",
                          prompt_tokens=131_072 - long["decode"]).total_bytes == 16 * 2**30


def test_report_names_a_phase_that_did_not_finish(tmp_path):
    (tmp_path / "machine.json").write_text(json.dumps({"device": "cuda:0", "gpu": "NVIDIA H200"}))
    (tmp_path / "formats.json").write_text(json.dumps({"rows": [], "not_reached": ["bf16", "fp16"],
                                                       "finished": False}))
    report = cuda_report.assemble(tmp_path, size="full", statuses={"suite": "124", "formats": "124"})
    md = (tmp_path / "cuda.md").read_text()
    assert report["summary"]["not_reached"] == 2 and report["suite_problem"].startswith("validate.json")
    assert "Stopped at its time limit before: bf16; fp16." in md and "suite 124" in md
    assert "The seed's experiment" in md and "Did not run: seed.json" in md

"""`kvmem report` in a subprocess: the whole plan as Markdown or JSON; the JSON runs again to the same numbers."""

import json
import subprocess
import sys

import kvmem

WORKLOAD = ["llama-3.3-70b", "--gpu", "h100-sxm-80gb", "--num-gpus", "2", "--context", "32k", "--batch", "8",
            "--kv-dtype", "fp8", "--weight-dtype", "fp8"]


def kvmem_cli(*argv):
    return subprocess.run([sys.executable, "-m", "kvmem", *argv], capture_output=True, text=True, timeout=120)


def test_report_json_file_round_trips(tmp_path):
    path = tmp_path / "plan.json"
    done = kvmem_cli("report", *WORKLOAD, "--output", str(path))
    assert done.returncode == 0, done.stderr
    assert f"json report written to {path}" in done.stderr
    doc = json.loads(path.read_text())
    assert doc["fit"]["max_batch"] == 14 and doc["fit"]["max_context"] == 58208
    assert doc["plan"]["argv"][:3] == ["vllm", "serve", "meta-llama/Llama-3.3-70B-Instruct"]
    assert kvmem.rerun_report(path).to_dict() == doc


def test_report_markdown_on_stdout_and_exit_1_when_it_does_not_fit():
    done = kvmem_cli("report", *WORKLOAD)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("# kvmem plan: llama-3.3-70b on 2 × h100-sxm-80gb (vllm): fits")
    assert "| max batch at 32,768 tokens | 14 |" in done.stdout and "vllm serve meta-llama" in done.stdout
    short = kvmem_cli("report", "llama-3.3-70b", "--gpu", "rtx-4090-24gb", "--context", "32k", "--json")
    assert short.returncode == 1
    doc = json.loads(short.stdout)
    assert doc["fit"]["fits"] is False and doc["plan"] is None and doc["fit"]["suggestions"]

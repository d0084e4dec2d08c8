"""`kvmem sweep` in a subprocess: the overview as CSV, JSON and Parquet; refusals are rows without numbers."""

import json
import subprocess
import sys

import pytest

from tests.fixtures import ABRIDGED


def kvmem(*argv):
    return subprocess.run([sys.executable, "-m", "kvmem", *argv], capture_output=True, text=True, timeout=120)


def test_sweep_json_has_the_numbers_and_the_refusals():
    done = kvmem("sweep", "--models", f"llama-3.1-8b,{ABRIDGED}", "--gpus", "h100-sxm-80gb,rtx-4090-24gb",
                 "--engines", "vllm,sglang", "--json")
    assert done.returncode == 0, done.stderr
    rows = {(r["model"], r["gpu"], r["engine"]): r for r in json.loads(done.stdout)}
    assert len(rows) == 8
    h100 = rows["llama-3.1-8b", "h100-sxm-80gb", "vllm"]
    assert (h100["fits"], h100["max_batch"], h100["max_context"], h100["context"]) == (True, 54, 131072, 8192)
    # SGLang 0.5.23's 24 GB default: mem_fraction_static 0.720 -> 16,007 tokens, one 8k sequence (was 4 at 0.847)
    assert rows["llama-3.1-8b", "rtx-4090-24gb", "sglang"]["max_batch"] == 1
    refused = rows["gemma-3n-e2b-abridged", "h100-sxm-80gb", "sglang"]
    assert refused["refused"] == "has no parameter count" and refused["max_batch"] is None and refused["fits"] is None


def test_sweep_csv_and_parquet(tmp_path):
    done = kvmem("sweep", "--models", "llama-3.1-8b", "--gpus", "h100-sxm-80gb", "--contexts", "8k,32k")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("model,gpu,engine,context,num_gpus,fits,max_batch,max_context,max_concurrency")
    assert lines[1].startswith("llama-3.1-8b,h100-sxm-80gb,vllm,8192,1,True,54,131072,")
    assert lines[2].startswith("llama-3.1-8b,h100-sxm-80gb,vllm,32768,1,True,13,131072,")
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    path = tmp_path / "overview.parquet"
    done = kvmem("sweep", "--models", "llama-3.1-8b", "--gpus", "h100-sxm-80gb,rtx-4090-24gb", "--format", "parquet",
                 "--output", str(path))
    assert done.returncode == 0 and "2 cells (0 refused) written" in done.stderr
    assert pd.read_parquet(path)["max_batch"].tolist() == [54, 5]


def test_sweep_bad_input_is_named():
    done = kvmem("sweep", "--gpus", "h100-sxm-80gb", "--format", "parquet")
    assert done.returncode == 2 and "--format parquet writes a binary file: give --output FILE" in done.stderr
    done = kvmem("sweep", "--models", "llama-3.1-8b", "--engines", "vlm")
    assert done.returncode == 2 and "engines: unknown engine 'vlm'" in done.stderr

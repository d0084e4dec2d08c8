"""`kvmem validate`: one JSON array, a table, a progress bar on stderr, exit 1 on any mismatch."""

import dataclasses
import importlib
import json

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from kvmem.cli import main  # noqa: E402

validation = importlib.import_module("kvmem.validation")  # where validate() finds measure
KEYS = {"model", "engine", "tokens", "batch", "kv_dtype", "device", "predicted_bytes", "tensor_bytes",
        "allocated_bytes", "peak_bytes", "matches"}


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_json_is_one_array_with_the_contract_keys(capsys):
    code, out, err = run(capsys, "validate", "--quick", "--json", "--device", "cpu", "--models", "gpt2", "falcon-7b")
    rows = json.loads(out)
    assert code == 0
    assert [(r["model"], r["engine"]) for r in rows] == [("gpt2", "toy"), ("falcon-7b", "hf-dynamic"),
                                                        ("gpt2", "hf-quantized")]
    for row in rows:
        assert KEYS <= set(row) and row["matches"] is True and row["device"] == "cpu"
        assert row["predicted_bytes"] == row["tensor_bytes"] == row["allocated_bytes"]
    # falcon-7b, 10 tokens x batch 2: 32 layers x 1 KV head x 64 x 2 (K, V) x 2 B x 10 x 2
    assert rows[1]["tensor_bytes"] == 32 * 64 * 2 * 2 * 10 * 2 == 163_840
    # stderr is not a terminal here: one plain line per entry, no \r redraws (issue 13)
    assert "[1/3] falcon-7b hf-dynamic\n" in err and "[3/3] done\n" in err and "\r" not in err


def test_table_states_the_columns_and_the_allocator(capsys):
    code, out, _ = run(capsys, "validate", "--quick", "--device", "cpu", "--models", "falcon-7b")
    lines = out.splitlines()
    assert code == 0
    assert lines[0].split() == ["model", "engine", "tokens", "batch", "predicted", "measured", "difference",
                                "peak", "pred.", "peak", "meas.", "ok"]
    # peak: the 163,840 B cache plus the last layer's old V while its new V is concatenated,
    # 9 tokens x batch 2 x 1 head x 64 x 2 B = 2,304 B -> 166,144 B
    assert lines[1].split() == ["falcon-7b", "hf-dynamic", "10", "2", "163,840", "163,840", "0", "166,144",
                                "166,144", "yes"]
    assert "1 of 1 match on cpu" in out and "rounds each request up to 512 B" in out


def test_any_mismatch_exits_1(capsys, monkeypatch):
    real = validation.measure

    def off_by_one(*args, **kwargs):
        result = real(*args, **kwargs)
        return dataclasses.replace(result, tensor_bytes=result.tensor_bytes + 1)

    monkeypatch.setattr(validation, "measure", off_by_one)
    code, out, _ = run(capsys, "validate", "--quick", "--device", "cpu", "--models", "falcon-7b")
    assert code == 1
    assert out.splitlines()[1].split()[4:7] == ["163,840", "163,841", "1"] and out.splitlines()[1].endswith("NO")
    code, out, _ = run(capsys, "validate", "--quick", "--json", "--device", "cpu", "--models", "falcon-7b")
    assert code == 1 and json.loads(out)[0]["matches"] is False


def test_a_backend_that_cannot_run_is_skipped_with_its_reason(capsys, monkeypatch):
    reason = "optimum-quanto's C++ extension (quanto_cpp) cannot be built or loaded on this machine"
    monkeypatch.setattr(validation, "backend_problem", lambda backend: reason if backend == "quanto" else None)
    code, out, _ = run(capsys, "validate", "--quick", "--json", "--device", "cpu", "--models", "qwen2.5-0.5b")
    rows = json.loads(out)
    assert code == 0 and rows[0]["matches"] is None and rows[0]["skipped"] == reason
    code, out, _ = run(capsys, "validate", "--quick", "--device", "cpu", "--models", "qwen2.5-0.5b")
    assert f"skipped: {reason}" in out and "0 of 0 match on cpu, 1 skipped" in out


def test_unknown_models_are_an_error(capsys):
    code, _, err = run(capsys, "validate", "--models", "llama-3.3-70b")
    assert code == 2 and "no validation entry for llama-3.3-70b; suite models: deepseek-v2-lite" in err

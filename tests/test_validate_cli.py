"""`kvmem validate`: one JSON array, a table, a progress bar on stderr, exit 1 on any mismatch."""

import dataclasses
import importlib
import json
import os

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


def _config(folder, data):
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(data))


TINY = {"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "hidden_size": 256, "head_dim": 64, "vocab_size": 1000, "max_position_embeddings": 65536}


def test_reach_sizes_every_config_in_every_mode_and_exits_0(capsys, tmp_path):
    _config(tmp_path / "tiny", TINY)
    code, out, _ = run(capsys, "validate", "--reach", str(tmp_path), "--json")
    data = json.loads(out)
    assert code == 0 and data["gaps"] == 0 and [c["path"] for c in data["configs"]] == ["tiny/config.json"]
    # 2 layers x 2 KV heads x 64 x 2 (K, V) x 2 B (bf16, no torch_dtype) x 32,768 tokens = 33,554,432 B
    assert data["configs"][0]["engines"]["vllm"] == {"status": "sized", "kv_bytes": 33_554_432, "state_bytes": 0,
                                                     "total_bytes": 33_554_432, "start_refusal": None}
    assert set(data["counts"]) == {"ideal", "hf-dynamic", "hf-static", "hf-quantized", "vllm", "sglang", "llama.cpp",
                                   "trtllm"}
    code, out, _ = run(capsys, "validate", "--reach", str(tmp_path))
    assert code == 0 and out.splitlines()[2].split()[:4] == ["tiny/config.json", "llama", "2", "full"]


def test_reach_exits_1_on_a_config_kvmem_does_not_size(capsys, tmp_path):
    _config(tmp_path / "tiny", TINY)
    _config(tmp_path / "odd", {"model_type": "no_such_family"})
    code, out, _ = run(capsys, "validate", "--reach", str(tmp_path))
    assert code == 1 and "odd/config.json" in out and "reader refuses: model_type 'no_such_family'" in out


def test_reach_bad_input_exits_2(capsys, tmp_path):
    code, out, err = run(capsys, "validate", "--reach", str(tmp_path / "missing"), "--json")
    assert code == 2 and "no such folder or file" in err and json.loads(out)["exit_code"] == 2
    code, _, err = run(capsys, "validate", "--reach", str(tmp_path))
    assert code == 2 and "no file named config.json under" in err
    code, _, err = run(capsys, "validate", "--reach", str(tmp_path), "--engine", "vllm")
    assert code == 2 and "--reach takes no --engine" in err


def test_reach_over_the_corpus_with_a_glob(capsys):
    corpus = os.path.join(os.path.dirname(__file__), "fixtures", "configs", "corpus")
    code, out, _ = run(capsys, "validate", "--reach", corpus, "--glob", "*.json", "--json")
    data = json.loads(out)
    assert len(data["configs"]) == len([n for n in os.listdir(corpus) if n.endswith(".json")]) >= 100
    glm5 = next(c for c in data["configs"] if c["path"] == "zai-org--GLM-5.json")
    # 78 MLA layers x (512 latent + 64 rope + the indexer's 128-wide key) x 2 B x 32,768 tokens
    assert (glm5["model_type"], glm5["layers"]) == ("glm_moe_dsa", {"mla": 78})
    assert glm5["engines"]["ideal"]["kv_bytes"] == 78 * (512 + 64 + 128) * 2 * 32_768 == 3_598_712_832
    assert code == (1 if data["gaps"] else 0)

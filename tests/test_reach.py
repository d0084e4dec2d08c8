"""kvmem.reach: every config under a folder, bounded, through the reader and every engine mode: sized,
the engine's own refusal, or kvmem's gap (FamilyNotChecked, the reader's refusal)."""

import json
import os

import pytest

from kvmem.configs import files
from kvmem.engines import ENGINES
from kvmem.engines.base import EngineSpec
from kvmem.reach import NOT_YET, REFUSED, SIZED, find_configs, reach, reach_config

LLAMA = {"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
         "hidden_size": 256, "head_dim": 64, "intermediate_size": 512, "vocab_size": 1000, "torch_dtype": "bfloat16",
         "max_position_embeddings": 65536}
# 2 layers x 2 KV heads x 64 x 2 (K, V) x 2 B x 32,768 tokens
LLAMA_BYTES = 2 * 2 * 64 * 2 * 2 * 32_768
assert LLAMA_BYTES == 33_554_432


@pytest.fixture
def toy():
    """An engine mode that runs ideal's rules, declares no opt-in family and refuses gpt_bigcode by its own reason."""
    ideal = ENGINES["ideal"]
    ENGINES["toy-reach"] = EngineSpec("toy-reach", {}, ideal.estimate, pinned="Toy 1.0",
                                      refusals={"gpt_bigcode": "Toy 1.0's registry has no GPTBigCodeForCausalLM"})
    yield "toy-reach"
    del ENGINES["toy-reach"]


def _write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        json.dump(data, handle)


def test_a_config_is_sized_by_every_mode_with_its_bytes():
    entry = reach_config(LLAMA, path="a/config.json", name="a")
    assert (entry.model_type, entry.layers, entry.refusal) == ("llama", {"full": 2}, None)
    for engine in ("ideal", "hf-dynamic", "vllm", "llama.cpp", "trtllm"):
        assert entry.engines[engine] == {"status": SIZED, "kv_bytes": LLAMA_BYTES, "state_bytes": 0,
                                         "total_bytes": LLAMA_BYTES, "start_refusal": None}, engine
    # SGLang keeps one padding page (page_size 1: one token) per layer: + 2 x 2 x 64 x 2 x 2 B = 1,024 B
    assert entry.engines["sglang"]["total_bytes"] == LLAMA_BYTES + 1_024


def test_the_engines_own_refusal_and_kvmems_gap_are_told_apart(toy):
    bigcode = {"model_type": "gpt_bigcode", "n_layer": 2, "n_head": 4, "n_embd": 256, "multi_query": True,
               "vocab_size": 1000, "n_positions": 4096}
    refused = reach_config(bigcode, path="b", engines=("ideal", toy)).engines[toy]
    assert refused == {"status": REFUSED, "reason": "engine 'toy-reach' (Toy 1.0) does not size model_type "
                                                    "'gpt_bigcode': Toy 1.0's registry has no GPTBigCodeForCausalLM; "
                                                    "engines that size it: " + refused["reason"].rsplit(": ", 1)[1]}
    mpt = {"model_type": "mpt", "n_layers": 2, "n_heads": 4, "d_model": 256, "vocab_size": 1000, "max_seq_len": 4096}
    entry = reach_config(mpt, path="m", engines=("ideal", toy))
    assert entry.engines["ideal"]["status"] == SIZED
    gap = entry.engines[toy]
    assert gap["status"] == NOT_YET
    assert "kvmem has not checked this family's cache against Toy 1.0's code (a gap in kvmem" in gap["reason"]


def test_the_readers_refusal_names_the_type_and_is_a_gap_in_every_mode():
    entry = reach_config({"model_type": "no_such_family"}, path="c", engines=("ideal", "vllm"))
    assert entry.model_type == "no_such_family" and "model_type 'no_such_family' is not a family" in entry.refusal
    assert {e: r["status"] for e, r in entry.engines.items()} == {"ideal": NOT_YET, "vllm": NOT_YET}


def test_a_folder_and_an_hf_cache_snapshot(tmp_path):
    _write(tmp_path / "plain" / "config.json", LLAMA)
    _write(tmp_path / "plain" / "tokenizer_config.json", {"model_type": "ignored"})
    # the HF cache: snapshots/REV/config.json is a link to ../../blobs/HASH
    repo = tmp_path / "hub" / "models--org--tiny"
    _write(repo / "blobs" / "abc123", dict(LLAMA, num_hidden_layers=3))
    os.makedirs(repo / "snapshots" / "rev1")
    os.symlink("../../blobs/abc123", repo / "snapshots" / "rev1" / "config.json")
    report = reach(tmp_path, engines=["ideal", "vllm"])
    assert [(e.path, e.model, e.layers) for e in report.entries] == [
        ("hub/models--org--tiny/snapshots/rev1/config.json", "org/tiny", {"full": 3}),
        ("plain/config.json", "plain", {"full": 2})]
    assert report.counts() == {"ideal": {SIZED: 2, REFUSED: 0, NOT_YET: 0}, "vllm": {SIZED: 2, REFUSED: 0, NOT_YET: 0}}
    assert report.gaps == 0
    # the snapshot folder alone: its link leads to the repository's blobs, which the snapshot's reader allows
    alone = reach(repo / "snapshots" / "rev1", engines=["ideal"])
    assert alone.entries[0].engines["ideal"]["total_bytes"] == LLAMA_BYTES * 3 // 2


def test_links_out_of_the_folder_are_not_followed(tmp_path):
    outside = tmp_path / "outside"
    _write(outside / "config.json", LLAMA)
    root = tmp_path / "root"
    os.makedirs(root / "inside")
    os.symlink(outside, root / "linked_folder")                      # a folder link: not entered
    os.symlink(outside / "config.json", root / "inside" / "config.json")  # a file link out: refused by name
    report = reach(root, engines=["ideal"])
    assert [e.path for e in report.entries] == ["inside/config.json"]
    assert "is a link to" in report.entries[0].refusal and "outside" in report.entries[0].refusal
    assert report.gaps == 1


def test_the_walk_is_bounded(tmp_path, monkeypatch):
    deep = tmp_path / "a" / "b" / "c"
    _write(deep / "config.json", LLAMA)
    assert find_configs(tmp_path, max_depth=3) == [("a/b/c/config.json", str(deep / "config.json"))]
    assert find_configs(tmp_path, max_depth=2) == []
    for i in range(3):
        _write(tmp_path / f"m{i}" / "config.json", LLAMA)
    with pytest.raises(ValueError, match=r"more than 3 files named config.json, the most one reach reads"):
        find_configs(tmp_path, max_files=3)
    with pytest.raises(ValueError, match=r"more than 5 entries, the most one reach walk looks at"):
        find_configs(tmp_path, max_entries=5)
    monkeypatch.setattr(files, "MAX_CONFIG_BYTES", 100)
    entry = reach(tmp_path / "m0", engines=["ideal"]).entries[0]
    assert entry.refusal == f"config file {str(tmp_path / 'm0' / 'config.json')!r} is larger than 100 bytes"


def test_not_json_and_not_an_object(tmp_path):
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "config.json").write_text("[1, 2]")
    (tmp_path / "y").mkdir()
    (tmp_path / "y" / "config.json").write_text("{oops")
    report = reach(tmp_path, engines=["ideal"])
    assert report.entries[0].refusal == "config must be a JSON object, got list"
    assert report.entries[1].refusal.startswith("config 'config.json' is not valid JSON")


def test_a_published_infinity_is_read_as_kvmem_estimate_reads_it(tmp_path):
    # Nemotron-H's config.json: "time_step_limit": [0.0, Infinity] (Python's json reads it)
    (tmp_path / "config.json").write_text(json.dumps(dict(LLAMA, time_step_limit=[0.0, float("inf")])))
    assert "Infinity" in (tmp_path / "config.json").read_text()
    assert reach(tmp_path, engines=["ideal"]).entries[0].engines["ideal"]["total_bytes"] == LLAMA_BYTES


def test_the_table_and_the_dict(tmp_path):
    _write(tmp_path / "m" / "config.json", LLAMA)
    _write(tmp_path / "n" / "config.json", {"model_type": "no_such_family"})
    report = reach(tmp_path, engines=["ideal", "sglang"])
    lines = report.lines()
    assert lines[1].split() == ["config", "model_type", "layers", "ideal", "sglang"]
    # 33,554,432 B / 32,768 = 1,024.0 B per token; SGLang's 1,024 B of padding pages: 1,024.03
    assert lines[2].split() == ["m/config.json", "llama", "2", "full", "1,024.0", "1,024.0"]
    assert lines[3].startswith("n/config.json") and "reader refuses: model_type 'no_such_family'" in lines[3]
    assert "2 configs under" in lines[5] and "1 refused by the reader" in lines[5]
    data = report.to_dict()
    assert data["gaps"] == 1 and data["counts"]["sglang"] == {SIZED: 1, REFUSED: 0, NOT_YET: 1}
    assert json.loads(json.dumps(data)) == data


def test_one_file_is_read_whatever_its_name(tmp_path):
    _write(tmp_path / "my-model.json", LLAMA)
    report = reach(tmp_path / "my-model.json", engines=["ideal"])
    assert [(e.path, e.model, e.engines["ideal"]["total_bytes"]) for e in report.entries] == [
        ("my-model.json", "my-model", LLAMA_BYTES)]


def test_sized_but_the_engine_would_not_start_at_the_context():
    short = dict(LLAMA, max_position_embeddings=4096)
    report_entry = reach_config(short, path="s", engines=("vllm",))
    result = report_entry.engines["vllm"]
    assert result["status"] == SIZED and result["total_bytes"] == LLAMA_BYTES
    assert "32,768 tokens exceed the model's 4,096 positions" in result["start_refusal"]
    assert "VLLM_ALLOW_LONG_MAX_MODEL_LEN" in result["start_refusal"]

"""Exact weight bytes from safetensors headers: local folders and Hub repositories, single and sharded."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import kvmem
from kvmem.cli import main
from kvmem.sources.safetensors import checkpoint_from_folder, read_header
from kvmem.weights import weights
from tests.fixtures import safetensors_models as fx


@pytest.mark.parametrize("sharded", [False, True])
def test_local_folder_weights_are_the_headers_bytes(tmp_path, sharded):
    written = fx.write_folder(tmp_path / "tiny-moe", sharded=sharded)
    model = kvmem.catalog.as_model(str(tmp_path / "tiny-moe"))
    w = weights(model)
    expected = fx.group_bytes(written["tensors"])
    # embedding and lm_head: 256 x 64 x 2 B = 32,768 B each; experts: 2 layers x 4 experts x 3 x 96 x 64 x 2 B
    assert expected["embedding"] == expected["lm_head"] == 32_768
    assert expected["experts"] == 2 * 4 * 3 * 96 * 64 * 2 == 294_912
    assert (w.source, w.weight_dtype) == ("safetensors", "safetensors")
    assert (w.embedding_bytes, w.lm_head_bytes, w.expert_bytes, w.dense_bytes) == (
        expected["embedding"], expected["lm_head"], expected["experts"], expected["dense"])
    assert w.total_bytes == sum(fx.nbytes(t) for t in written["tensors"].values())
    assert "weights: exact" in w.notes[0] and ("2 shards" in w.notes[0]) == sharded
    # the bytes on disk are the headers plus the data: nothing else is counted
    on_disk = sum(os.path.getsize(p) for p in written["files"])
    headers = sum(8 + len(json.dumps(read_header(p), separators=(",", ":"))) for p in written["files"])
    assert w.total_bytes <= on_disk and on_disk - w.total_bytes >= headers - 64 * len(written["files"])


def test_header_reader_agrees_with_the_safetensors_package(tmp_path):
    from safetensors import safe_open
    written = fx.write_folder(tmp_path / "m", fp8=True)
    header = read_header(written["files"][0])
    with safe_open(written["files"][0], framework="pt") as handle:
        assert sorted(handle.keys()) == sorted(k for k in header if k != "__metadata__")
        for name in handle.keys():
            assert list(handle.get_slice(name).get_shape()) == header[name]["shape"]
    checkpoint = checkpoint_from_folder(tmp_path / "m")
    # fp8 linears are 1 B per weight, their scales F32: the real dtypes, counted as stored
    assert set(checkpoint.bytes_by_dtype()) == {"F8_E4M3", "BF16", "F32"}
    assert checkpoint.total_bytes == sum(fx.nbytes(t) for t in written["tensors"].values())


def test_moe_split_and_active_bytes_from_the_headers(tmp_path):
    fx.write_folder(tmp_path / "m")
    w = weights(kvmem.catalog.as_model(str(tmp_path / "m")))
    # one sequence routes to 2 of 4 experts: half the expert bytes are read per step
    assert w.active_bytes(1) == w.dense_bytes + w.lm_head_bytes + w.expert_bytes // 2
    assert w.per_device(tp=2) < w.total_bytes


def test_an_explicit_format_is_a_what_if_by_the_formula(tmp_path):
    fx.write_folder(tmp_path / "m")
    model = kvmem.catalog.as_model(str(tmp_path / "m"))
    assert weights(model, "fp8").source == "formula"


def _serve_folder(hub, repo_id: str, folder: Path):
    hub.add(repo_id, {name: (folder / name if name.endswith(".safetensors") else (folder / name).read_bytes())
                      for name in os.listdir(folder)})


@pytest.mark.parametrize("sharded", [False, True])
def test_hub_weights_come_from_range_requests_of_the_headers(hub, tmp_path, sharded):
    written = fx.write_folder(tmp_path / "m", sharded=sharded)
    _serve_folder(hub, "org/tiny-moe", tmp_path / "m")
    model = kvmem.get_model("org/tiny-moe")
    assert hub.calls(".safetensors") == []                    # only config.json until weights are asked for
    w = weights(model)
    assert w.source == "safetensors" and w.total_bytes == sum(fx.nbytes(t) for t in written["tensors"].values())
    shard_calls = [c for c in hub.calls("/resolve/") if c["path"].endswith(".safetensors")]
    # headers only: the 8-byte length, then the JSON header after it
    assert shard_calls and all(c["range"] == "bytes=0-7" or (c["range"] or "").startswith("bytes=8-")
                               for c in shard_calls)
    assert sum(c["sent"] for c in shard_calls) < sum(os.path.getsize(p) for p in written["files"])
    if sharded:
        assert any(c["path"].endswith("model.safetensors.index.json") for c in hub.calls())


def test_hub_repo_without_safetensors_falls_back_to_the_formula_and_says_so(hub, capsys):
    hub.add("org/bin-only", {"config.json": fx.CONFIG, "pytorch_model.bin": b"\x80\x02"})
    w = weights(kvmem.get_model("org/bin-only"))
    assert w.source == "formula"
    assert any("formula estimate" in n and "no safetensors checkpoint" in n for n in w.notes)
    code = main(["fit", "org/bin-only", "--gpu", "h100-sxm-80gb", "--context", "4096"])
    out = capsys.readouterr().out
    assert code == 0 and "weights from: the formula" in out


def test_fit_says_it_used_the_headers(hub, tmp_path, capsys):
    fx.write_folder(tmp_path / "m")
    _serve_folder(hub, "org/tiny-moe", tmp_path / "m")
    code = main(["fit", "org/tiny-moe", "--gpu", "h100-sxm-80gb", "--context", "4096", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["weights_source"] == "safetensors"
    code = main(["fit", str(tmp_path / "m"), "--gpu", "h100-sxm-80gb", "--context", "4096"])
    assert code == 0 and "weights from: the safetensors headers, exact" in capsys.readouterr().out


def test_offline_without_cached_headers_is_the_labelled_formula(hub, monkeypatch):
    hub.add("org/tiny", {"config.json": fx.CONFIG, "model.safetensors": b"x"})
    model = kvmem.get_model("org/tiny")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    w = weights(model)
    assert w.source == "formula" and any("HF_HUB_OFFLINE" in n for n in w.notes)


def test_gpt_neox_names_its_embeddings_embed_in_and_embed_out(tmp_path):
    import torch
    from safetensors.torch import save_file
    folder = tmp_path / "pythia"
    folder.mkdir()
    cfg = {"model_type": "gpt_neox", "hidden_size": 32, "num_attention_heads": 4, "num_hidden_layers": 1,
           "intermediate_size": 64, "vocab_size": 100, "tie_word_embeddings": False, "torch_dtype": "float16"}
    (folder / "config.json").write_text(json.dumps(cfg))
    save_file({"gpt_neox.embed_in.weight": torch.zeros(100, 32, dtype=torch.float16),
               "embed_out.weight": torch.zeros(100, 32, dtype=torch.float16),
               "gpt_neox.layers.0.attention.query_key_value.weight": torch.zeros(96, 32, dtype=torch.float16)},
              str(folder / "model.safetensors"))
    w = weights(kvmem.catalog.as_model(str(folder)))
    # 100 x 32 x 2 B = 6,400 B each; the fused QKV 96 x 32 x 2 B = 6,144 B is dense
    assert (w.embedding_bytes, w.lm_head_bytes, w.dense_bytes) == (6_400, 6_400, 6_144)


def test_headers_read_once_serve_offline(hub, tmp_path, monkeypatch):
    from kvmem.sources import hub as hub_source
    written = fx.write_folder(tmp_path / "m", sharded=True)
    _serve_folder(hub, "org/tiny-moe", tmp_path / "m")
    online = weights(kvmem.get_model("org/tiny-moe"))
    hub_source._checkpoint_once.cache_clear()                      # a new process
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    before = len(hub.requests)
    offline = weights(kvmem.get_model("org/tiny-moe"))
    assert offline.source == "safetensors" and offline.total_bytes == online.total_bytes
    assert offline.total_bytes == sum(fx.nbytes(t) for t in written["tensors"].values())
    assert len(hub.requests) == before and "read earlier" in offline.notes[0]

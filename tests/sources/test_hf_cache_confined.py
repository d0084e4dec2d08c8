"""Issue 32 M5, M8 and Low: the Hugging Face cache is read inside each repository's own folder
(the real paths of its snapshots, blobs and refs), a ref is read bounded, and a config.json that is
not a file is called what it is. Caches are built by hand here, offline."""

from __future__ import annotations

import json
import os
import time

import pytest

import kvmem
from kvmem.sources import SourceError
from tests.fixtures import safetensors_models as fx

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An offline HF cache holding org/name at COMMIT (refs/main -> COMMIT, config.json as a blob link)."""
    root = tmp_path / "hub"
    repo = root / "models--org--name"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(COMMIT)
    (repo / "blobs").mkdir()
    (repo / "blobs" / "abc").write_text(json.dumps(fx.CONFIG))
    (repo / "snapshots" / COMMIT).mkdir(parents=True)
    os.symlink("../../blobs/abc", repo / "snapshots" / COMMIT / "config.json")
    monkeypatch.setenv("HF_HUB_CACHE", str(root))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    from kvmem.sources import hub as hub_source
    hub_source._checkpoint_once.cache_clear()
    return repo


def test_a_cached_model_is_read_from_its_blob(cache):
    model = kvmem.get_model("org/name")
    assert model.hf_id == "org/name" and model.source.endswith(f"/org/name/blob/{COMMIT}/config.json")


def test_a_snapshot_that_is_a_link_out_of_the_cache_is_refused(cache, tmp_path):
    outside = tmp_path / "elsewhere"                  # e.g. a folder of someone else's files
    outside.mkdir()
    (outside / "config.json").write_text(json.dumps(fx.CONFIG))
    snapshot = cache / "snapshots" / COMMIT
    os.remove(snapshot / "config.json")
    os.rmdir(snapshot)
    os.symlink(outside, snapshot)
    with pytest.raises(SourceError, match=f"org/name: snapshot {COMMIT} is a link to .*elsewhere.*, outside "):
        kvmem.get_model("org/name")


def test_a_ref_that_is_a_link_out_of_the_repository_is_refused(cache, tmp_path):
    (tmp_path / "other").write_text("f" * 40)
    os.remove(cache / "refs" / "main")
    os.symlink(tmp_path / "other", cache / "refs" / "main")
    with pytest.raises(SourceError, match="refs/main in the Hugging Face cache is a link to .*other.*, outside the "
                                          "repository's refs folder"):
        kvmem.get_model("org/name")


def test_a_huge_ref_is_refused_unread(cache):
    """huggingface_hub's try_to_load_from_cache read a 1 GB refs/main whole (3.1 GB); kvmem reads 256 bytes."""
    with open(cache / "refs" / "main", "r+b") as handle:
        handle.truncate(64 << 20)                     # sparse: 64 MiB of zeros
    start = time.monotonic()
    with pytest.raises(SourceError, match="refs/main in the Hugging Face cache is over 256 bytes"):
        kvmem.get_model("org/name")
    assert time.monotonic() - start < 2


@pytest.mark.parametrize("text", ["../../../../etc", "main", "x" * 500 + "\n"])
def test_a_ref_that_is_not_a_commit_hash_is_refused_by_what_it_holds(cache, text):
    (cache / "refs" / "main").write_text(text[:200])
    quoted = r"('[^']{1,98}'|'[^']{99}\.\.\. \(\d+ characters\))"      # at most 100 characters of it
    with pytest.raises(SourceError, match=f"refs/main in the Hugging Face cache holds {quoted}, not a 40-character "
                                          "commit hash"):
        kvmem.get_model("org/name")


@pytest.mark.parametrize("kind, word", [("fifo", "a FIFO"), ("directory", "a directory")])
def test_a_config_json_that_is_not_a_file_is_called_what_it_is(cache, kind, word):
    path = cache / "snapshots" / COMMIT / "config.json"
    os.remove(path)
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()
    with pytest.raises(SourceError, match=f"org/name: config.json: .* in the Hugging Face cache is {word}, not a "
                                          "file") as refused:
        kvmem.get_model("org/name")
    assert "not in the Hugging Face cache" not in str(refused.value)


def test_a_config_json_linked_to_a_device_is_a_link_out(cache):
    path = cache / "snapshots" / COMMIT / "config.json"
    os.remove(path)
    os.symlink("/dev/zero", path)
    with pytest.raises(SourceError, match="org/name: config.json: 'config.json' is a link to '/dev/zero', outside "):
        kvmem.get_model("org/name")


@pytest.mark.parametrize("planted", ["snapshot", "incomplete blob"])
def test_a_fetch_never_writes_through_a_link_out_of_the_repository(hub, tmp_path, planted):
    from .conftest import commit_of
    hub.add("org/name", {"config.json": fx.CONFIG})
    repo = tmp_path / "hf-home" / "hub" / "models--org--name"
    outside = tmp_path / "outside"
    outside.mkdir()
    if planted == "snapshot":
        (repo / "snapshots").mkdir(parents=True)
        os.symlink(outside, repo / "snapshots" / commit_of("org/name", "main"))
        with pytest.raises(SourceError, match="org/name: models--org--name/snapshots/.* is a link to .*outside"):
            kvmem.get_model("org/name")
    else:                          # the loopback Hub's ETag for config.json names the blob
        kvmem.get_model("org/name")
        blob = next(p for p in (repo / "blobs").iterdir())
        os.remove(blob)
        import shutil
        shutil.rmtree(repo / "snapshots")
        os.symlink(outside / "victim", str(blob) + ".incomplete")
        assert kvmem.get_model("org/name").hf_id == "org/name"
    assert list(outside.iterdir()) == []

"""Issue 32 M3/M4: a shared report is an input from outside. rerun_report parses it with size, depth
and item bounds, never takes JSON text for a path, and re-reads only presets, Hub ids and inline
configs: a path inside the document is refused before anything opens it."""

from __future__ import annotations

import json
import pathlib
import time

import pytest

import kvmem
from kvmem.sources.bounded import MAX_REPORT_BYTES

BASE = {"format": "kvmem-report/1", "inputs": {"model": {"preset": "llama-3.1-8b"}, "gpu": "h100-sxm-80gb",
                                               "context": 4096, "options": {}}}


def _doc(**model) -> dict:
    doc = json.loads(json.dumps(BASE))
    if model:
        doc["inputs"]["model"] = model
    return doc


def _refused(data, *words, **kwargs) -> str:
    with pytest.raises(ValueError) as info:
        kvmem.rerun_report(data, **kwargs)
    message = str(info.value)
    assert all(w in message for w in words), message
    assert len(message) < 400, message
    return message


def _max_batch() -> int:
    """kvmem.fit's max batch for BASE's workload (tests/export/test_document.py asserts its value)."""
    return kvmem.fit("llama-3.1-8b", gpu="h100-sxm-80gb", context=4096).max_batch


def test_the_base_document_runs():
    assert kvmem.rerun_report(_doc()).fit.max_batch == _max_batch() > 100


def test_deep_nesting_is_refused():
    # was RecursionError (not a ValueError: exit 70 / "Something went wrong")
    text = '{"format": "kvmem-report/1", "x": ' + "[" * 100_000 + "]" * 100_000 + "}"
    _refused(text, "report is nested deeper than 64 levels")
    _refused('{"format": "kvmem-report/1", "x": ' + "[" * 65 + "]" * 65 + "}", "nested deeper than 64")
    deep: dict = {}
    node = deep
    for _ in range(100):
        node["a"] = {}
        node = node["a"]
    _refused({**_doc(), "deep": deep}, "nested deeper than 64")


@pytest.mark.parametrize("text, got", [("[1, 2]", "'list'"), ('"plan.json"', "'str'"), ("3", "'int'"),
                                       ("null", "'NoneType'")])
def test_json_text_is_never_a_path(text, got):
    # text starting with '[' or '"' was opened as a file name (OSError, IsADirectoryError)
    _refused(text, f"format must be 'kvmem-report/1', got {got}")
    _refused(" \n" + text, "format must be")


def test_a_bom_before_the_text_is_read_as_text():
    again = kvmem.rerun_report("\ufeff" + json.dumps(_doc()))      # was taken as a path
    assert again.fit.max_batch == _max_batch()
    assert kvmem.rerun_report(("\ufeff" + json.dumps(_doc())).encode()).fit.max_batch == _max_batch()


def test_a_str_that_is_a_file_name_is_text_and_the_message_says_how_to_pass_a_file(tmp_path):
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(_doc()))
    _refused(str(path), "not valid JSON", "give a file as a pathlib.Path")
    assert kvmem.rerun_report(path).fit.max_batch == _max_batch()


def test_a_hundred_thousand_extra_keys_are_refused_at_once():
    # inputs with 100,000 extra keys took > 30 s (a tuple rebuilt per key); now refused naming the count
    doc = _doc()
    doc["inputs"].update({f"k{i}": i for i in range(100_000)})
    started = time.perf_counter()
    _refused(json.dumps(doc), "inputs has 100,000 key(s) kvmem.fit does not take, the first 'k0'")
    doc = _doc()
    doc["inputs"]["options"] = {f"k{i}": i for i in range(100_000)}
    _refused(doc, "inputs.options has 100,000 entries; kvmem reads at most 64")
    assert time.perf_counter() - started < 5


def test_too_many_items_anywhere_are_refused():
    doc = {**_doc(), "sources": {"padding": list(range(250_000))}}
    _refused(json.dumps(doc), "has over 200,000 keys and list items")


def test_report_over_the_size_cap_is_refused(tmp_path):
    _refused(" " * (MAX_REPORT_BYTES + 1), f"report is over {MAX_REPORT_BYTES:,} bytes")
    path = tmp_path / "huge.json"
    with open(path, "wb") as handle:            # a path was read with no size limit
        handle.truncate(1 << 30)
    started = time.perf_counter()
    _refused(path, f"is over {MAX_REPORT_BYTES:,} bytes")
    assert time.perf_counter() - started < 5


def test_a_path_that_is_not_a_regular_file_is_refused(tmp_path):
    link = tmp_path / "zero.json"
    link.symlink_to("/dev/zero")
    _refused(link, "is a character device, not a regular file")
    _refused(tmp_path, "is a directory, not a regular file")


def test_an_hf_id_that_is_a_local_folder_is_refused_before_it_is_read(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    config = dict(kvmem.catalog.preset("qwen3-8b")["config"])
    (folder / "config.json").write_text(json.dumps(config))
    # was: as_model read the folder's config.json and put it into the new report
    _refused(_doc(name="x", hf_id=str(folder)), "inputs.model.hf_id", "is not a Hugging Face id")
    _refused(_doc(name="x", hf_id="/any/folder"), "is not a Hugging Face id", "never names a local path")
    _refused(_doc(name="x", hf_id="../../etc"), "is not a Hugging Face id")
    _refused(_doc(name="x", hf_id=str(folder / "config.json")), "is not a Hugging Face id")
    _refused(_doc(name="x", hf_id="org/model.gguf/x"), "is not a Hugging Face id")
    _refused(_doc(name="x", hf_id=["org/name"]), "is not a Hugging Face id")


def test_an_hf_id_shaped_like_a_local_folder_is_not_read_from_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "org" / "name"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(kvmem.catalog.preset("qwen3-8b")["config"]))
    _refused(_doc(name="x", hf_id="org/name"), "unknown model")     # get_model: a preset or the Hub, never ./org/name


@pytest.mark.parametrize("value", ["/etc/passwd", "config.json", str(pathlib.Path(__file__)), ["/etc/passwd"], 5])
def test_a_config_that_is_not_an_inline_object_is_refused(value):
    # {"config": "/etc/passwd"} made Model.from_hf_config open the file
    _refused(_doc(name="x", config=value), "inputs.model.config must be the config.json as an object",
             "never names a file")


def test_a_preset_that_is_not_one_is_refused():
    _refused(_doc(preset="/etc/passwd"), "inputs.model.preset '/etc/passwd' is not a kvmem preset")
    _refused(_doc(preset="org/name"), "is not a kvmem preset")


def test_a_model_option_names_only_a_preset(tmp_path):
    doc = _doc()
    for value in (str(tmp_path), "/etc/passwd", "org/name", {"config": {}}):
        doc["inputs"]["options"] = {"draft": value}
        _refused(doc, "inputs.options.draft must name a preset")
    doc["inputs"]["options"] = {"draft": "llama-3.2-1b"}
    assert kvmem.rerun_report(doc).inputs["options"] == {"draft": "llama-3.2-1b"}


def test_unknown_model_keys_and_long_values_are_refused_quoting_little():
    _refused(_doc(preset="llama-3.1-8b", path="/etc/passwd"), "inputs.model has 'path'")
    message = _refused(_doc(name="x", hf_id="a" * 100_000), "is not a Hugging Face id", "100,002 characters")
    assert "a" * 101 not in message
    message = _refused({"format": "x" * 100_000}, "format must be")
    assert "x" * 101 not in message
    _refused(_doc(name="n" * 201, config={}), "inputs.model.name must be a name of at most 200 characters")


def test_the_callers_own_model_may_still_be_a_local_file(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(kvmem.catalog.preset("llama-3.1-8b")["config"]))
    doc = _doc(name="mine", checkpoint="local files (a model folder or a GGUF): rerun_report needs model=")
    _refused(doc, "was read from a checkpoint's headers in local files; pass model=")
    assert kvmem.rerun_report(doc, model=str(path)).fit.max_batch == _max_batch()

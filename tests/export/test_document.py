"""kvmem.report / kvmem.rerun_report (kvmem/export): the whole plan as JSON and Markdown, and its round trip."""

import json

import pytest

import kvmem
from kvmem import catalog

SEVENTY_B = dict(gpu="h100-sxm-80gb", num_gpus=2, context="32k", batch=8, kv_dtype="fp8", weight_dtype="fp8")


@pytest.fixture(scope="module")
def seventy_b():
    return kvmem.report("llama-3.3-70b", **SEVENTY_B)


def test_the_document_holds_inputs_results_lines_command_and_sources(seventy_b):
    doc = json.loads(seventy_b.to_json())
    assert doc["format"] == "kvmem-report/1"
    assert doc["inputs"] == {"model": {"preset": "llama-3.3-70b"}, "gpu": "h100-sxm-80gb", "num_gpus": 2, "tp": None,
                             "pp": 1, "context": 32768, "batch": 8, "weight_dtype": "fp8", "kv_dtype": "fp8",
                             "engine": "vllm", "gpu_memory_utilization": 0.9, "options": {}}
    fit = kvmem.fit("llama-3.3-70b", **SEVENTY_B)
    assert doc["fit"]["max_batch"] == fit.max_batch == 14 and doc["fit"]["max_context"] == fit.max_context == 58208
    assert doc["fit"]["kv_memory_bytes"] == 38_147_743_383
    # the command kvmem.plan writes for the workload, and what vLLM prints for it
    assert doc["plan"]["command"] == kvmem.plan("llama-3.3-70b", **SEVENTY_B).command
    assert "--max-num-seqs 8" in doc["plan"]["command"] and doc["plan_refused"] is None
    # the server started with --max-num-seqs 8 profiles a smaller sampler peak than fit's default 1024 sequences
    assert doc["engine_lines"] == ["Available KV cache memory: 35.53 GiB",
                                   "GPU KV cache size: 465,664 tokens, Maximum concurrency for 32,768 tokens per "
                                   "request: 14.21x"]
    assert doc["engine_lines_for"] == "the launch command"
    assert doc["sources"]["model"]["config"].startswith("ai-dynamo/aiconfigurator")
    assert "nccl/issues/1264" in doc["sources"]["gpu"]["memory_source"]
    assert "glennklockwood.com" in doc["sources"]["gpu"]["spec_source"]


def test_markdown_says_the_same(seventy_b):
    text = seventy_b.to_markdown()
    assert text.startswith("# kvmem plan: llama-3.3-70b on 2 × h100-sxm-80gb (vllm): fits\n")
    assert "| max batch at 32,768 tokens | 14 |" in text
    assert "| KV budget (per device) | 38,147,743,383 B (35.53 GiB) |" in text
    assert "## What the engine will print (for the launch command)" in text
    assert "GPU KV cache size: 465,664 tokens" in text
    assert seventy_b.plan.command in text
    assert "- `--max-num-seqs 8` — 8 sequences per replica" in text
    assert "## Sources" in text and "nccl/issues/1264" in text


def test_the_json_round_trips_to_the_same_numbers(seventy_b):
    again = kvmem.rerun_report(seventy_b.to_json())
    assert again.to_dict() == seventy_b.to_dict()
    assert again.fit.max_batch == 14


def test_round_trip_of_a_users_config_a_custom_gpu_and_engine_options(tmp_path):
    mine = kvmem.Model.from_hf_config(catalog.preset("qwen3-8b")["config"], name="my-qwen")
    first = kvmem.report(mine, gpu="custom:48GiB:1TB/s", context="16k", engine="sglang", batch=4,
                         mem_fraction_static=0.85)
    doc = first.to_dict()
    assert doc["inputs"]["model"]["name"] == "my-qwen" and doc["inputs"]["model"]["config"]["head_dim"] == 128
    assert doc["inputs"]["gpu"] == "custom:48GiB:1TB/s" and doc["inputs"]["options"] == {"mem_fraction_static": 0.85}
    assert doc["sources"]["model"]["config"] == "given by the user (not a preset)"
    path = tmp_path / "plan.json"
    path.write_text(first.to_json())
    assert kvmem.rerun_report(path).to_dict() == doc
    assert doc["fit"]["fits"] and doc["plan"]["command"].startswith("python -m sglang.launch_server")


def test_a_workload_that_does_not_fit_has_no_command_and_says_why():
    doc = kvmem.report("llama-3.3-70b", gpu="rtx-4090-24gb", context="32k", batch=8).to_dict()
    assert doc["fit"]["fits"] is False and doc["plan"] is None
    assert doc["plan_refused"].startswith("no command: llama-3.3-70b does not fit on 1 x rtx-4090-24gb")
    assert doc["fit"]["suggestions"] == ["16 GPUs per replica (tp=16)"]
    assert kvmem.rerun_report(doc).to_dict() == doc


def test_bad_documents_are_refused_by_field():
    with pytest.raises(ValueError, match="format must be 'kvmem-report/1'"):
        kvmem.rerun_report({"format": "other"})
    with pytest.raises(ValueError, match="report is not valid JSON: Expecting property name"):
        kvmem.rerun_report("{not json")
    with pytest.raises(ValueError, match="inputs missing"):
        kvmem.rerun_report({"format": "kvmem-report/1"})
    doc = {"format": "kvmem-report/1", "inputs": {"model": {"name": "hand-built"}, "gpu": "h100-sxm-80gb",
                                                  "context": 4096}}
    with pytest.raises(ValueError, match="inputs.model 'hand-built' has no preset, hf_id or config"):
        kvmem.rerun_report(doc)
    assert kvmem.rerun_report(doc, model="llama-3.1-8b").fit.max_batch == 109


def test_a_draft_model_option_is_written_by_its_preset_name():
    first = kvmem.report("llama-3.1-8b", gpu="h100-sxm-80gb", context="8k", draft=kvmem.get_model("llama-3.2-1b"))
    doc = first.to_dict()
    assert doc["inputs"]["options"] == {"draft": "llama-3.2-1b"}
    assert kvmem.rerun_report(doc).to_dict() == doc
    mine = kvmem.Model.from_hf_config(catalog.preset("llama-3.2-1b")["config"], name="my-draft")
    with pytest.raises(ValueError, match="options: draft is a model that is not a preset"):
        kvmem.report("llama-3.1-8b", gpu="h100-sxm-80gb", context="8k", draft=mine)


def test_a_model_read_from_local_headers_is_not_re_read_from_its_config(tmp_path):
    pytest.importorskip("gguf")
    from tests.fixtures.gguf_models import write

    path = tmp_path / "llama-3-8b-q4_k_m.gguf"
    written = write(path, "llama-3-8b", tiny=False)
    doc = kvmem.report(str(path), gpu="rtx-4090-24gb", context="8k", engine="llama.cpp").to_dict()
    assert doc["fit"]["weight_dtype"] == "gguf"          # exact bytes from the tensor list, not the formula
    # the placement's CUDA0 part: every tensor but token_embd (Q4_K, 128,256 x 4,096), which stays on the host
    assert doc["fit"]["breakdown"]["weights"] == written["weight_bytes"] - 128_256 * 4096 * 144 // 256
    assert "checkpoint" in doc["inputs"]["model"]
    with pytest.raises(ValueError, match="was read from a checkpoint's headers in local files; pass model="):
        kvmem.rerun_report(doc)
    assert kvmem.rerun_report(doc, model=str(path)).to_dict() == doc

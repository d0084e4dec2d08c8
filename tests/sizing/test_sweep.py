"""kvmem.sweep (kvmem/sizing/sweep.py): fit's own numbers per cell, refusals as reasons, and its tables."""

import io
import json

import pytest

import kvmem
from kvmem import tables
from kvmem.sizing.sweep import short_reason
from tests.fixtures import ABRIDGED


def _fit(cell):
    return kvmem.fit(cell.model, gpu=cell.gpu, context=cell.context, engine=cell.engine, num_gpus=cell.num_gpus)


def test_llama_8b_on_h100_and_4090_under_vllm():
    h100, rtx = kvmem.sweep(["llama-3.1-8b"], ["h100-sxm-80gb", "rtx-4090-24gb"], contexts=["8k"])
    # vLLM's pool at 0.9 x 79.22 GiB less 14.99 GiB of bf16 weights, 768 MiB of overhead and its profile peak at
    # max_num_seqs 54 (the batch, as plan sets it: the forward at 8,192 tokens, 905,969,664 B): 58,750,291,607 B;
    # 8,192 tokens x 32 layers x 8 heads x 128 x 2 (K,V) x 2 B = 1 GiB per sequence -> 54 sequences
    assert (h100.fits, h100.max_batch, h100.max_context, h100.kv_memory_bytes) == (True, 54, 131072, 58_750_291_607)
    assert h100.max_concurrency == pytest.approx(54.71, abs=0.005)   # vLLM's "Maximum concurrency"
    # the longest context: vLLM refuses 46,192 tokens on that budget (the null block left out: "the estimated
    # maximum model length is 46176", its own planning in tests/oracles/test_hybrid_verdicts_oracle.py's helpers)
    assert (rtx.fits, rtx.max_batch, rtx.max_context) == (True, 5, 46176)
    assert rtx.refused is None and rtx.text == "fits · batch 5 · ctx 46,176"


@pytest.mark.parametrize("engine", ["vllm", "sglang", "llama.cpp", "trtllm", "hf-dynamic"])
def test_each_cell_is_what_kvmem_fit_answers(engine):
    models = ["qwen3-8b", "gemma-3-27b", "deepseek-v3", "gpt-oss-20b", "llama-2-7b"]
    gpus = ["h100-sxm-80gb", "rtx-3060-12gb", "a100-sxm-40gb"]
    cells = kvmem.sweep(models, gpus, contexts=["4k", "64k"], engines=[engine])
    assert len(cells) == 30
    for cell in cells:
        if cell.refused:
            continue
        fit = _fit(cell)
        concurrency = fit.engine_numbers.max_concurrency if fit.engine_numbers else None
        assert (cell.fits, cell.max_batch, cell.max_context, cell.max_concurrency, cell.kv_memory_bytes) == (
            fit.fits, fit.max_batch, fit.max_context, concurrency, fit.kv_memory_bytes), cell


def test_refusals_are_short_reasons_never_numbers():
    cells = {(c.model, c.engine, c.num_gpus): c for c in
             kvmem.sweep([ABRIDGED, "llama-2-7b", "jamba-1.5-mini"], ["h100-sxm-80gb"], contexts=["8k"],
                         engines=["vllm", "llama.cpp", "sglang"])}
    no_params = cells["gemma-3n-e2b-abridged", "vllm", 1]
    assert no_params.refused == "has no parameter count"
    assert "weights_bytes" in no_params.refusal
    past = cells["llama-2-7b", "vllm", 1]          # vLLM will not start past max_position_embeddings
    assert past.refused == "past the model's 4,096 positions" and "VLLM_ALLOW_LONG_MAX_MODEL_LEN" in past.refusal
    assert cells["llama-2-7b", "llama.cpp", 1].refused is None    # llama.cpp starts (and warns)
    jamba = cells["jamba-1.5-mini", "sglang", 1]                # a family the engine does not run: its reason
    assert jamba.refused == "SGLang 0.5.23 has no model file for JambaForCausalLM"
    for cell in (no_params, past, jamba):
        assert (cell.fits, cell.max_batch, cell.max_context, cell.max_concurrency, cell.kv_memory_bytes) == (None,) * 5
        assert cell.text.startswith("refused: ")
    (tp3,) = kvmem.sweep(["llama-3.1-8b"], ["h100-sxm-80gb"], num_gpus=3)
    assert tp3.refused == "tp=3 must divide the model's 32 attention heads"


def test_every_preset_and_gpu_by_default_and_bad_input_named():
    cells = kvmem.sweep(contexts="8k", engines="vllm")
    assert len(cells) == len(kvmem.list_models()) * len(kvmem.list_gpus())
    with pytest.raises(ValueError, match="engines: unknown engine 'vlm'"):
        kvmem.sweep(["llama-3.1-8b"], ["h100-sxm-80gb"], engines=["vlm"])
    with pytest.raises(ValueError, match="contexts: give at least one"):
        kvmem.sweep(["llama-3.1-8b"], ["h100-sxm-80gb"], contexts="")
    with pytest.raises(ValueError, match="option 'block_sizee': none of the engines vllm, sglang takes it"):
        kvmem.sweep(["llama-3.1-8b"], ["h100-sxm-80gb"], engines="vllm,sglang", block_sizee=32)
    (cell,) = kvmem.sweep(["llama-3.1-8b"], ["h100-sxm-80gb"], engines="sglang", mem_fraction_static=0.8)
    assert cell.max_batch == kvmem.fit("llama-3.1-8b", gpu="h100-sxm-80gb", context="8k", engine="sglang",
                                       mem_fraction_static=0.8).max_batch
    with pytest.raises(ValueError, match="unknown GPU|gpu"):
        kvmem.sweep(["llama-3.1-8b"], ["h200-nonexistent"])


def test_short_reason():
    assert short_reason("model 'x' has no parameter count (params_total is unknown); give ...") == \
        "has no parameter count"
    assert short_reason("m: llama.cpp keeps it elsewhere", "m") == "llama.cpp keeps it elsewhere"
    assert len(short_reason("a" * 200)) == 60
    assert short_reason("engine 'sglang' (SGLang 0.5.23) does not size model_type 'jamba': SGLang 0.5.23 has no "
                        "model file for it; engines that size it: ideal") == "SGLang 0.5.23 has no model file for it"
    assert short_reason("engine 'trtllm' (TensorRT-LLM main): kvmem does not size model_type 'gemma4_text' the way "
                        "this engine does yet: kvmem has not checked ...").startswith("kvmem does not size model_type")


def test_matrix_and_files_keep_refusals_apart_from_numbers():
    cells = kvmem.sweep(["llama-3.1-8b", ABRIDGED], ["h100-sxm-80gb", "rtx-4090-24gb"], contexts=["8k"])
    matrix = tables.sweep_matrix(cells, show="max_batch")
    assert list(matrix.columns) == ["model", "h100-sxm-80gb", "rtx-4090-24gb"]
    assert matrix.iloc[0].tolist() == ["llama-3.1-8b", "54", "5"]
    assert matrix.iloc[1].tolist() == ["gemma-3n-e2b-abridged"] + ["refused: has no parameter count"] * 2
    assert tables.sweep_matrix(cells, show="max_concurrency").iloc[0, 2] == "5.64x"
    assert tables.sweep_matrix(cells, show="fits").iloc[0, 1] == "yes"
    out = io.StringIO()
    tables.write_sweep(cells, out, "json")
    rows = json.loads(out.getvalue())
    assert rows[0]["max_batch"] == 54 and rows[2]["max_batch"] is None and rows[2]["refused"]
    out = io.StringIO()
    tables.write_sweep(cells, out, "csv")
    assert out.getvalue().splitlines()[1].startswith("llama-3.1-8b,h100-sxm-80gb,vllm,8192,1,True,54,131072,")
    with pytest.raises(ValueError, match="a matrix is one context"):
        tables.sweep_matrix(kvmem.sweep(["llama-3.1-8b"], ["h100-sxm-80gb"], contexts="4k,8k"))

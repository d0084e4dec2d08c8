"""Typed results: frozen records with named *_bytes fields whose to_dict() keeps the plain keys."""

import dataclasses

import pytest

import kvmem
from kvmem.sizing import MemoryBreakdown
from kvmem.weights import WeightLayout, weights


def test_fit_breakdown_is_a_frozen_record_with_the_old_keys():
    result = kvmem.fit("llama-3.1-8b", gpu="h100", context=8192)
    b = result.breakdown
    assert isinstance(b, MemoryBreakdown)
    assert list(b.to_dict()) == ["total", "weights", "kv", "kv_pool", "activations", "overhead", "free", "shortfall"]
    assert b["kv"] == b.kv_bytes and dict(b.items())["free"] == b.free_bytes
    assert result.to_dict()["breakdown"] == b.to_dict()
    # free = total - weights - kv_pool - activations - overhead (the engine's reserve, fits or not);
    # shortfall = the KV beyond the budget, 0 here
    assert b.free_bytes == (b.total_bytes - b.weights_bytes - b.kv_pool_bytes - b.activations_bytes - b.overhead_bytes)
    assert b.kv_pool_bytes >= b.kv_bytes and b.shortfall_bytes == 0
    with pytest.raises(dataclasses.FrozenInstanceError):
        b.kv_bytes = 0
    with pytest.raises(KeyError, match="MemoryBreakdown has no 'kv_cache'; keys: total, weights"):
        b["kv_cache"]


@pytest.mark.parametrize("engine, options, block", [
    ("vllm", {}, 16), ("sglang", {"page_size": 64}, 64), ("trtllm", {}, 32), ("ideal", {}, 1),
])
def test_estimate_names_its_block_size(engine, options, block):
    est = kvmem.estimate("llama-3.1-8b", engine=engine, tokens=1000, **options)
    assert est.block_size == block
    assert "block_size" not in est.to_dict() and "log_lines" not in est.to_dict()   # JSON keys unchanged


def test_engine_log_lines_are_named_fields():
    est = kvmem.estimate("llama-3.1-8b", engine="llama.cpp", tokens=4096)
    assert est.log_lines and list(est.log_lines) == est.details.log
    cap = kvmem.capacity("llama-3.1-8b", engine="vllm", kv_memory="8GiB", max_model_len=8192)
    assert cap.log_lines and list(cap.log_lines) == cap.details.log
    assert "log_lines" not in cap.to_dict()


def test_weights_layout_is_typed():
    w = weights("deepseek-v3", "fp8")
    assert isinstance(w.layout, WeightLayout)
    assert (w.layout.n_layers, w.layout.experts, w.layout.top_k) == (61, 256, 8)
    assert w.details["experts"] == 256 and "layout" not in w.to_dict()


def test_engine_details_are_typed_and_keep_their_keys():
    from kvmem.engines.trtllm import TrtllmDetails
    from kvmem.engines.vllm.entry import VllmCapacityDetails, VllmDetails
    # vLLM: 1000 tokens = 63 blocks of 16 per sequence, x 2 sequences
    vllm = kvmem.estimate("llama-3.1-8b", engine="vllm", tokens=1000, batch=2)
    assert isinstance(vllm.details, VllmDetails) and vllm.details.blocks == 126 == vllm.to_dict()["details"]["blocks"]
    assert list(vllm.to_dict()["details"]) == ["version", "block_size", "page_bytes", "groups", "blocks",
                                               "pool_bytes", "padding_bytes", "uniform_type"]
    # TRT-LLM counts blocks per attention window: 1000 tokens = 32 blocks of 32, x 2 (window 0 = whole sequence)
    trt = kvmem.estimate("llama-3.1-8b", engine="trtllm", tokens=1000, batch=2)
    assert isinstance(trt.details, TrtllmDetails) and trt.details.blocks_by_window == {0: 64} == trt.to_dict()["details"]["blocks"]
    assert "blocks" in trt.to_dict()["details"] and "blocks_by_window" not in trt.to_dict()["details"]
    cap = kvmem.capacity("llama-3.1-8b", engine="vllm", kv_memory="8GiB", max_model_len=8192)
    assert isinstance(cap.details, VllmCapacityDetails) and cap.to_dict()["details"]["num_blocks"] == cap.blocks


def test_sglang_llamacpp_and_hf_details_are_typed_and_keep_their_keys():
    from kvmem.engines.hf import HfDetails, HfQuantizedDetails, HfStaticDetails
    from kvmem.engines.llamacpp.entry import LlamacppCapacityDetails, LlamacppDetails
    from kvmem.engines.sglang.entry import SglangCapacityDetails, SglangDetails
    from kvmem.records import Record

    # SGLang: pages of 1 token; a sliding model adds its swa_* keys, a dense one has none
    dense = kvmem.estimate("llama-3.1-8b", engine="sglang", tokens=1000, batch=2)
    assert isinstance(dense.details, SglangDetails) and dense.details.pool_tokens == 2000 == dense.to_dict()["details"]["pool_tokens"]
    assert list(dense.to_dict()["details"]) == ["layout", "page_size", "pages_per_sequence", "pool_tokens",
                                                "padding_tokens_per_layer", "kv_heads_per_rank", "cell_bytes_per_token"]
    cap = kvmem.capacity("llama-3.1-8b", engine="sglang", kv_memory="8GiB")
    assert isinstance(cap.details, SglangCapacityDetails)
    assert list(cap.details.to_dict()) == ["layout", "page_size", "cell_bytes_per_token", "max_total_num_tokens",
                                 "max_running_requests", "pools", "allocated_bytes", "log"]
    assert tuple(cap.details.log) == cap.log_lines and cap.details.max_total_num_tokens == cap.tokens
    # llama.cpp: the log lines it prints are a key, as before
    llama = kvmem.estimate("llama-3.1-8b", engine="llama.cpp", tokens=1000)
    assert isinstance(llama.details, LlamacppDetails) and tuple(llama.details.log) == llama.log_lines
    assert llama.details.cells == llama.details.n_ctx_seq and "devices" in llama.to_dict()["details"]
    lcap = kvmem.capacity("llama-3.1-8b", engine="llama.cpp", kv_memory="1GiB")
    assert isinstance(lcap.details, LlamacppCapacityDetails) and lcap.details.n_ctx == lcap.tokens
    # transformers: one class per cache mode
    kinds = {"hf-dynamic": HfDetails, "hf-static": HfStaticDetails, "hf-quantized": HfQuantizedDetails}
    for engine, kind in kinds.items():
        details = kvmem.estimate("llama-3.1-8b", engine=engine, tokens=1000).details
        assert type(details) is kind and isinstance(details, Record) and details.prompt_tokens == 1000
    assert kvmem.estimate("llama-3.1-8b", engine="hf-static", tokens=1000).details.max_cache_len == 1000
    with pytest.raises(dataclasses.FrozenInstanceError):
        dense.details.pool_tokens = 0

"""Sweeps and summaries: rows of library numbers, no arithmetic of their own beyond sums."""

import pytest

import kvmem
from kvmem import strategies, tables


def test_context_points():
    assert tables.context_points(1000) == [256, 512, 1000]
    assert tables.context_points(1000, at_least=2048) == [256, 512, 1024, 2048]
    assert tables.eviction_contexts(512, 1024)[-1] == 4096
    assert tables.model_contexts(kvmem.get_model("llama-3.1-8b"), 8192)[-1] == 131072


def test_summary_with_weights_and_gpu():
    result = kvmem.estimate("llama-3.1-8b", tokens="8k", batch=2)
    summary = tables.estimate_summary(result, weights_bytes=16 * 2**30, gpu_memory_bytes=80 * 2**30)
    assert summary.total_bytes == 2 * 2**30 and summary.per_sequence_bytes == 2**30
    assert summary.device_bytes == 18 * 2**30 and summary.gpu_share == pytest.approx(18 / 80)
    assert summary.per_token_bytes == 131072 and summary.total_gib == "2.00 GiB"


def test_rows_and_frames_agree():
    model = kvmem.get_model("gemma-3-27b")
    rows = tables.context_rows(model, contexts=[1024, 65536], engine="ideal")
    frame = tables.context_sweep(model, contexts=[1024, 65536], engine="ideal")
    assert list(frame["kv_bytes"]) == [r["kv_bytes"] for r in rows] == [
        kvmem.estimate(model, tokens=t).kv_bytes for t in (1024, 65536)]
    assert tables.as_columns(rows)["tokens"] == [1024, 65536]


def test_eviction_policies():
    policies = strategies.eviction_policies(1024)
    assert list(policies.by_label()) == ["keep everything", "StreamingLLM 4 + 1020", "H2O 1024"]
    assert policies.h2o.recent == 512 and policies.streaming.window == 1020 and policies.keep is None
    assert type(policies) is strategies.EvictionPolicies and policies.by_label() == {
        "keep everything": None, "StreamingLLM 4 + 1020": strategies.Eviction("streaming", sink=4, window=1020),
        "H2O 1024": strategies.Eviction("h2o", budget=1024, recent=512)}
    assert policies.to_dict()["StreamingLLM 4 + 1020"] == {"policy": "streaming", "sink": 4, "window": 1020}
    with pytest.raises(ValueError, match="budget"):
        strategies.eviction_policies(0)


def test_summary_is_a_frozen_record():
    summary = tables.estimate_summary(kvmem.estimate("llama-3.1-8b", tokens=16))
    assert type(summary) is tables.EstimateSummary and summary.total_bytes == summary.to_dict()["total_bytes"] == 16 * 131072
    assert summary.gpu_share is None

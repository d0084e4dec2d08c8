"""One spelling per result field (issue 35 item 4): a Record is read by attribute and gives plain data by
``to_dict()``; it is not a mapping. A DictRecord (the results docs/api.md promises as dicts) is also a
read-only dict of the same keys."""

import json
from collections.abc import Mapping

import pytest

import kvmem
from kvmem import strategies, tables
from kvmem.records import DictRecord, Record
from kvmem.textbook import seed_terms


def _plain_records():
    est = kvmem.estimate("llama-3.1-8b", engine="vllm", tokens=1000, batch=2, offload=0.5)
    return {"VllmDetails": est.details, "Offloaded": est.offload,
            "QuantRow": strategies.quantization_options("llama-3.1-8b", tokens=1000)[0],
            "VariantRow": strategies.architecture_variants("llama-3.1-8b", tokens=1000)[0],
            "EstimateSummary": tables.estimate_summary(est),
            "SeedTerms": seed_terms(kvmem.get_model("llama-3.1-8b"), tokens=8, batch=1),
            "EvictionPolicies": strategies.eviction_policies(1024)}


@pytest.mark.parametrize("name", list(_plain_records()))
def test_a_record_is_read_by_attribute_only(name):
    record = _plain_records()[name]
    assert type(record).__name__ == name and isinstance(record, Record) and not isinstance(record, Mapping)
    key = next(iter(record.to_dict()))
    with pytest.raises(TypeError, match="not subscriptable"):
        record[key]
    with pytest.raises(AttributeError):
        record.get(key)
    with pytest.raises(TypeError):
        len(record)


def test_plain_data_keeps_the_keys_the_dicts_had():
    # vLLM: 1000 tokens = 63 blocks of 16 per sequence, x 2 sequences = 126 blocks
    est = kvmem.estimate("llama-3.1-8b", engine="vllm", tokens=1000, batch=2)
    assert est.details.blocks == est.to_dict()["details"]["blocks"] == 126
    row = next(r for r in strategies.quantization_options("llama-3.1-8b", tokens=1000) if r.k_dtype == "bf16")
    # 1000 tokens x 32 layers x 8 KV heads x 128 x 2 (K,V) x 2 B = 131,072,000 B, key "bytes" in plain data
    assert row.kv_bytes == row.to_dict()["bytes"] == 131_072_000
    policies = strategies.eviction_policies(1024)
    assert policies.by_label()["H2O 1024"] is policies.h2o and policies.h2o.recent == 512


def test_frozen_records_compare_by_their_fields():
    one = tables.estimate_summary(kvmem.estimate("llama-3.1-8b", tokens=16))
    again = tables.estimate_summary(kvmem.estimate("llama-3.1-8b", tokens=16))
    assert one == again and one != one.to_dict()


def test_the_contracts_dicts_stay_dicts():
    # docs/api.md: compare_strategies -> list[dict], preallocation_waste -> dict, Fit.breakdown a dict
    rows = kvmem.compare_strategies("llama-3.1-8b", tokens=1000)
    waste = kvmem.preallocation_waste("llama-3.1-8b", lengths=[100, 1000], max_model_len=2048)
    breakdown = kvmem.fit("llama-3.1-8b", gpu="h100", context=8192).breakdown
    for result in (rows[0], waste, waste["paged"], breakdown):
        assert isinstance(result, DictRecord) and isinstance(result, dict)
    assert rows[0]["bytes"] == rows[0].total_bytes and breakdown["kv"] == breakdown.kv_bytes
    assert json.loads(json.dumps(breakdown)) == breakdown.to_dict()
    with pytest.raises(KeyError, match="MemoryBreakdown has no 'kv_cache'; keys: total, weights"):
        breakdown["kv_cache"]
    with pytest.raises(TypeError, match="read-only"):
        breakdown["kv"] = 0

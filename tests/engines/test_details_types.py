"""Issue 24 item 2: ``Estimate.details`` is the engine's own record, one type per engine, in every
path: each engine mode alone, through each strategy and past the model's positions; what the
strategies did is a typed record beside it, and a refusal is a Refusal, never a details key."""

import pytest

import kvmem
from kvmem.engines.hf.entry import HfDetails, HfQuantizedDetails, HfStaticDetails
from kvmem.engines.llamacpp.entry import LlamacppCapacityDetails, LlamacppDetails
from kvmem.engines.results import IdealDetails, Refusal
from kvmem.engines.sglang.entry import SglangCapacityDetails, SglangDetails
from kvmem.engines.trtllm import TrtllmCapacityDetails, TrtllmDetails
from kvmem.engines.vllm.entry import VllmCapacityDetails, VllmDetails
from kvmem.engines.vllm.v0 import VllmV0CapacityDetails, VllmV0Details
from kvmem.strategies import EvictionApplied, Offloaded, PrefixShared

DETAILS = {"ideal": IdealDetails, "hf-dynamic": HfDetails, "hf-static": HfStaticDetails,
           "hf-quantized": HfQuantizedDetails, "vllm": VllmDetails, "sglang": SglangDetails,
           "llama.cpp": LlamacppDetails, "trtllm": TrtllmDetails}
STRATEGIES = {"none": {}, "eviction": {"eviction": kvmem.Eviction("streaming", sink=4, window=1020)},
              "shared_prefix": {"shared_prefix": 1024}, "offload": {"offload": 0.25},
              "past the positions": {"tokens": 200_000}}


def test_every_engine_has_its_record():
    assert set(DETAILS) == set(kvmem.list_engines())


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("engine", DETAILS)
def test_details_are_the_engines_record_through_every_strategy(engine, strategy):
    kwargs = {"tokens": 4096, "batch": 4, **STRATEGIES[strategy]}
    est = kvmem.estimate("llama-3.1-8b", engine=engine, kv_dtype="bf16", **kwargs)
    assert type(est.details) is DETAILS[engine]
    assert (est.k_dtype, est.v_dtype) == ("bf16", "bf16")
    assert type(est.eviction) is (EvictionApplied if strategy == "eviction" else type(None))
    assert type(est.shared_prefix) is (PrefixShared if strategy == "shared_prefix" else type(None))
    assert type(est.offload) is (Offloaded if strategy == "offload" else type(None))
    assert est.refusal is None or type(est.refusal) is Refusal
    assert "engine_refuses" not in est.details.to_dict() and "engine_refuses" in est.to_dict()


def test_strategy_records_hold_what_they_did():
    est = kvmem.estimate("llama-3.1-8b", tokens=4096, batch=4, eviction=kvmem.Eviction("h2o", budget=1024))
    assert est.eviction.held_tokens == 1024 and est.eviction.policy == kvmem.Eviction("h2o", budget=1024)
    assert est.eviction.to_dict() == {"policy": "h2o", "budget": 1024, "recent": 512, "held_tokens": 1024}
    shared = kvmem.estimate("llama-3.1-8b", engine="vllm", tokens=4096, batch=4, shared_prefix=1000)
    assert shared.shared_prefix == PrefixShared(tokens=1000, shared_tokens=992, unit_tokens=16,
                                                saved_bytes=3 * 992 * 131_072)
    moved = kvmem.estimate("llama-3.1-8b", tokens=4096, offload=0.5)
    assert moved.offload.to_dict()["host_kv_bytes"] == moved.offload.host_kv_bytes == 4096 * 131_072 // 2
    assert moved.to_dict()["offload"]["device_kv_bytes"] == moved.kv_bytes


def test_the_refusal_is_a_field_with_its_way_out():
    est = kvmem.estimate("llama-3.1-8b", engine="vllm", tokens="1M", offload=0.5)   # past 131,072 positions
    assert est.refusal == Refusal(est.notes[0], "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1")
    assert (est.engine_refuses, est.engine_allows_with) == (est.refusal.reason, est.refusal.allow_with)
    cap = kvmem.capacity("llama-3.1-8b", kv_memory="1GiB")     # one 131,072-token request needs 16 GiB
    assert cap.refusal.reason.startswith("vLLM refuses to start") and cap.refusal.allow_with is None
    assert cap.to_dict()["engine_refuses"] == cap.refusal.reason and "engine_refuses" not in cap.details.to_dict()
    fit = kvmem.fit("qwen3-8b", gpu="h100-sxm-80gb", context="64k", batch=1)
    assert type(fit.refusal) is Refusal and fit.to_dict()["engine_allows_with"] == "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1"


@pytest.mark.parametrize("engine, kv_dtype, record", [
    ("ideal", "fp8", IdealDetails), ("vllm", "fp8", VllmCapacityDetails), ("sglang", "fp8", SglangCapacityDetails),
    ("llama.cpp", "q8_0", LlamacppCapacityDetails), ("trtllm", "fp8", TrtllmCapacityDetails)])
def test_capacity_details_are_the_engines_record(engine, kv_dtype, record):
    cap = kvmem.capacity("llama-3.1-8b", engine=engine, kv_memory="20GiB", kv_dtype=kv_dtype, max_model_len=8192)
    est = kvmem.estimate("llama-3.1-8b", engine=engine, tokens=1, kv_dtype=kv_dtype)
    assert type(cap.details) is record and (cap.k_dtype, cap.v_dtype) == (est.k_dtype, est.v_dtype)
    assert cap.k_dtype in ("fp8", "fp8_e4m3", "q8_0")
    assert cap.to_dict()["max_model_len"] == cap.to_dict()["longest_request_tokens"] == cap.longest_request_tokens


def test_vllm_v0_has_its_own_records():
    est = kvmem.estimate("llama-3.1-8b", engine="vllm", tokens=4096, version="v0", offload=0.5)
    cap = kvmem.capacity("llama-3.1-8b", engine="vllm", kv_memory="20GiB", version="v0")
    assert (type(est.details), type(cap.details)) == (VllmV0Details, VllmV0CapacityDetails)


def test_llamacpp_keeps_k_and_v_apart():
    est = kvmem.estimate("llama-3.1-8b", engine="llama.cpp", tokens=4096, type_k="q8_0", type_v="f16",
                         flash_attn=True)
    assert (est.kv_dtype, est.k_dtype, est.v_dtype) == ("q8_0/f16", "q8_0", "f16")
    tiny = kvmem.capacity("llama-3.1-8b", engine="llama.cpp", kv_memory=1000)
    assert type(tiny.details) is LlamacppCapacityDetails and tiny.longest_request_tokens == 0


def test_the_engine_level_estimate_has_its_own_name():
    from kvmem import engines
    # llama-3.1-8b: 32 layers x 8 heads x 128 x 2 (K, V) x 2 B = 131,072 B/token; 64 tokens 8,388,608 B
    assert engines.engine_estimate("llama-3.1-8b", tokens=64).kv_bytes == 8_388_608
    assert not hasattr(engines, "estimate")          # the deprecated alias is gone


def test_no_module_takes_the_old_name_or_merges_into_details():
    # issue 24 item 6: kvmem.estimate and the engines' estimate shared a name and six modules aliased one;
    # item 2: details turned into a plain dict wherever a strategy or a note was merged in
    import re
    from pathlib import Path

    root = Path(kvmem.__file__).parent
    old_name = re.compile(r"from \.+engines import [^\n]*\bestimate\b|engines\.estimate\(|estimate as _estimate")
    merged = re.compile(r"details=\{\*\*|details\[\"(eviction|shared_prefix|offload|host_kv_bytes|engine_refuses)")
    found = [f"{path.relative_to(root)}: {m.group(0)}" for path in sorted(root.rglob("*.py"))
             for pattern in (old_name, merged) for m in pattern.finditer(path.read_text(encoding="utf-8"))]
    assert found == []

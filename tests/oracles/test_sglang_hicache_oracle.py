"""kvmem's SGLang HiCache host pool against SGLang 0.5.23's own HostKVCache and auto-sizing
(kvmem/oracles/sglang_offload.py)."""

from tests.oracles.conftest import require

require("sglang")

from kvmem.oracles import sglang_offload as oracle  # noqa: E402


def test_dense_and_mla_host_pools_equal_sglangs():
    cases = oracle.directed_cases()
    assert {c["model"].name for c in cases} >= {"llama-3.1-8b", "deepseek-v3"}
    checks = [c for case in cases for c in oracle.run_case(**case)]
    bad = [f"{c.case}: {c.quantity}: kvmem {c.kvmem!r}, SGLang {c.engine!r}" for c in checks if not c.matches]
    assert not bad, "\n".join(bad)
    refused = {c.case for c in checks if c.quantity == "refused" and c.engine is True}
    assert refused == {c["name"] for c in cases if c["name"].endswith("ratio 20 on 64 GiB")}


def test_a_hybrid_sliding_window_models_host_pools_equal_sglangs():
    checks = [c for case in oracle.swa_cases() for c in oracle.run_swa_case(**case)]
    bad = [f"{c.case}: {c.quantity}: kvmem {c.kvmem!r}, SGLang {c.engine!r}" for c in checks if not c.matches]
    assert not bad, "\n".join(bad)
    assert [c.engine for c in checks if c.quantity == "refused"] == [False, False, True]

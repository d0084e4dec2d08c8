"""kvmem's vllm mode on DeepSeek-V4 against vLLM 0.33.0's own planning code: the sliding, compressed,
indexer and compressor-state specs built with vLLM's classes as its DeepSeek-V4 layers build them, grouped
and sized by get_global_kv_cache_groups / get_kv_cache_configs under the block-outermost layout its indexer
backend asks for (kvmem/oracles/vllm.py random_dsv4_case, _dsv4_specs, run_case)."""

from tests.oracles.conftest import require

require("vllm")

from kvmem.catalog import get_model  # noqa: E402
from kvmem.oracles import vllm as oracle  # noqa: E402

GIB = 1 << 30


def _bad(case) -> list[str]:
    return [f"{c.case}: {c.quantity}: kvmem {c.kvmem!r}, vLLM {c.engine!r}" for c in oracle.run_case(*case)
            if not c.matches]


def test_seeded_deepseek_v4_shapes():
    bad = [line for seed in range(60) for line in _bad(oracle.random_dsv4_case(seed))]
    assert not bad, "\n".join(bad)


def test_deepseek_v4_flash_at_20_gib():
    case = ("deepseek-v4-flash", get_model("deepseek-v4-flash"),
            dict(kv_memory=20 * GIB, max_model_len=65536, max_num_batched_tokens=8192))
    checks = {c.quantity: c for c in oracle.run_case(*case)}
    assert all(c.matches for c in checks.values())
    assert checks["num_blocks"].engine == 21_426 and checks["KV cache size tokens"].engine == 202_388

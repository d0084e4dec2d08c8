"""LMCache 0.5.6's own code as the judge of kvmem.engines.vllm.offload's LMCache tiers: its config defaults, and
(kvmem/oracles/vllm_offload.py) the kv_shape its vLLM service factory builds from vLLM 0.33.0's own ModelConfig,
the chunk bytes and CPU chunk budget of its LocalCPUBackend, the disk tier's chunks by its AddressManager's
alignment, for a dense, an MLA and a sliding-window hybrid model."""

from tests.oracles.conftest import require

require("lmcache")
require("vllm")

from kvmem.engines.vllm import offload  # noqa: E402
from kvmem.oracles import vllm_offload as oracle  # noqa: E402


def test_chunk_size_and_local_sizes_are_lmcaches_defaults():
    from lmcache.v1.config import _CONFIG_DEFINITIONS
    assert _CONFIG_DEFINITIONS["chunk_size"]["default"] == offload.LMCACHE_CHUNK_TOKENS == 256
    assert _CONFIG_DEFINITIONS["max_local_cpu_size"]["default"] == offload.LMCACHE_CPU_GIB == 5.0
    assert _CONFIG_DEFINITIONS["max_local_disk_size"]["default"] == offload.LMCACHE_DISK_GIB == 0.0
    assert oracle.load_lmcache().address.ALIGN_BYTES == offload.LMCACHE_ALIGN_BYTES == 4096


def test_dense_mla_and_hybrid_tiers_equal_lmcaches():
    cases = oracle.lmcache_cases()
    assert {c["preset"] for c in cases} >= {"llama-3.1-8b", "deepseek-v2-lite", "gpt-oss-20b"}
    bad = [f"{c.case}: {c.quantity}: kvmem {c.kvmem!r}, LMCache {c.engine!r}"
           for case in cases for c in oracle.run_lmcache_case(**case) if not c.matches]
    assert not bad, "\n".join(bad)


def test_mla_keeps_one_latent_in_lmcaches_own_shape():
    # deepseek-v2-lite at tp 2: (27 layers, 1, 256 tokens, 1 head, 512 + 64), 7,962,624 B, 674 chunks in 5 GiB
    sizes = oracle.lmcache_sizes("deepseek-v2-lite", tp=2)
    assert sizes["use_mla"] is True and sizes["kv_shape"] == [(27, 1, 256, 1, 576)]
    assert (sizes["chunk_bytes"], sizes["cpu_chunks"]) == ([7_962_624], [674])

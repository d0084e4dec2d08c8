"""The LMCache defaults kvmem.engines.vllm.offload uses, read from LMCache 0.5.6's own config module
(its config imports on the CPU; the backends need its compute backend, so their rule is cited, not run)."""

from tests.oracles.conftest import require

require("lmcache")

from kvmem.engines.vllm import offload  # noqa: E402


def test_chunk_size_and_local_cpu_size_are_lmcaches_defaults():
    from lmcache.v1.config import _CONFIG_DEFINITIONS
    assert _CONFIG_DEFINITIONS["chunk_size"]["default"] == offload.LMCACHE_CHUNK_TOKENS == 256
    assert _CONFIG_DEFINITIONS["max_local_cpu_size"]["default"] == offload.LMCACHE_CPU_GIB == 5.0

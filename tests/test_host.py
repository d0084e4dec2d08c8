"""Host memory as a budget (kvmem.host): the node's RAM, each engine's terms, the refusal naming them."""

import pytest

import kvmem
from kvmem.cli import main
from kvmem.host import NODE_PRESETS, host_memory_bytes

GIB = 1 << 30


def test_host_memory_reads_sizes_and_nodes_and_refuses_a_bandwidth():
    assert host_memory_bytes("512GiB") == 512 * GIB
    assert host_memory_bytes("dgx-h100") == 2048 * GIB == NODE_PRESETS["dgx-h100"][0]
    with pytest.raises(ValueError, match="got a bandwidth '89.6GB/s'"):
        host_memory_bytes("89.6GB/s")
    with pytest.raises(ValueError, match="host memory must be a size"):
        host_memory_bytes("lots")


def test_vllm_offload_above_the_host_does_not_fit_and_says_why():
    # llama-3.1-8b at 32k: 100 GiB = 51,200 chunks of 2,097,152 B, 819,200 tokens, more than 64 GiB of host
    f = kvmem.fit("llama-3.1-8b", gpu="h100-sxm-80gb", context="32k", engine="vllm", kv_offloading_size=100,
                  host_memory_bytes="64GiB")
    assert not f.fits and f.max_batch == 13            # the GPU side unchanged
    assert f.host["terms"][0]["tokens"] == 819_200
    assert f.why_not.startswith("host RAM: the plan keeps 100.00 GiB (107,374,182,400 B) in host memory per node, "
                                "more than host_memory_bytes 64.00 GiB (68,719,476,736 B): vLLM KV offload (native)")
    ok = kvmem.fit("llama-3.1-8b", gpu="h100-sxm-80gb", context="32k", engine="vllm", kv_offloading_size=37.5,
                   host_memory_bytes="64GiB")
    assert ok.fits and ok.host["total_bytes"] == 40_265_318_400


def test_replicas_each_keep_their_offload_region():
    # 8 GPUs, tp 2: 4 engines on the node, 4 x 37.5 GiB
    f = kvmem.fit("llama-3.1-8b", gpu="h100-sxm-80gb", num_gpus=8, tp=2, context="32k", engine="vllm",
                  kv_offloading_size=37.5)
    assert f.host["total_bytes"] == 4 * 40_265_318_400 and f.host["host_memory_bytes"] is None


def test_sglang_hicache_on_a_dgx_is_refused_with_sglangs_numbers():
    f = kvmem.fit("llama-3.1-8b", gpu="h100-sxm-80gb", num_gpus=8, tp=2, context="32k", engine="sglang",
                  enable_hierarchical_cache=True, hicache_ratio=20.0, host_memory_bytes="dgx-h100")
    assert not f.fits
    assert "Not enough host memory available. Requesting" in f.why_not


def test_no_term_and_no_bound_adds_nothing():
    assert kvmem.fit("llama-3.1-8b", gpu="h100-sxm-80gb", context="8k", engine="vllm").host is None


def test_cli_fit_host_memory_takes_a_size_and_prints_the_terms(capsys):
    code = main(["fit", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--context", "32k", "-o", "kv_offloading_size=100",
                 "--host-memory", "64GiB"])
    out = capsys.readouterr().out
    assert code == 1
    assert "host RAM per node: 100.00 GiB of 64.00 GiB (--host-memory)" in out
    assert "vLLM KV offload (native): 100.00 GiB (107,374,182,400 B), holds 819,200 tokens" in out
    code = main(["fit", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--context", "8k", "--host-memory", "64GiB",
                 "-o", "host_memory_bytes=1GiB"])
    assert code != 0 and "give the host RAM once" in capsys.readouterr().err


def test_plan_refuses_a_tier_the_host_cannot_hold_naming_it():
    with pytest.raises(kvmem.PlanRefused, match="no command: host RAM: the plan keeps 100.00 GiB"):
        kvmem.plan("llama-3.1-8b", gpu="h100-sxm-80gb", context="32k", engine="vllm", kv_offloading_size=100,
                   host_memory_bytes="64GiB")

"""SGLang's HiCache host pool (kvmem.engines.sglang.hicache) by hand; SGLang's own code judges it in
tests/oracles/test_sglang_hicache_oracle.py."""

import pytest

import kvmem
from kvmem.engines.sglang.hicache import hicache_log_line, hicache_tier, model_hicache_tier

GIB = 1 << 30


def test_ratio_mirrors_the_device_pool_plus_a_padding_page():
    # llama-3.1-8b on 20 GiB: 163,840 device tokens of 32 x 8 x 256 x 2 B = 131,072 B;
    # ratio 2.5: int(163,840 x 2.5) = 409,600, + 1 padding page = 409,601 tokens = 53,687,222,272 B a rank
    tier = model_hicache_tier(kvmem.get_model("llama-3.1-8b"), kv_memory=20 * GIB, hicache_ratio=2.5)
    assert (tier.tokens, tier.host_bytes_per_rank) == (409_601, 53_687_222_272)
    assert hicache_log_line(tier) == ("Allocating kv hierarchical KV host pool: 409601 tokens, "
                                      "53.69 GB host memory.")


def test_size_is_gb_per_rank_over_the_cell():
    # deepseek-v3 tp8, --hicache-size 40: 61 x 576 x 2 B = 70,272 B a token (MLA, whole on every rank);
    # int(40e9 // 70,272) = 569,216, + 1 = 569,217 tokens; 8 ranks on the node pin 8 x that
    tier = model_hicache_tier(kvmem.get_model("deepseek-v3"), kv_memory=20 * GIB, tp=8, hicache_size=40)
    assert tier.tokens == 569_217
    assert tier.host_bytes_per_node == 8 * 569_217 * 70_272


def test_auto_sizing_lowers_the_ratio_to_the_hosts_free_ram():
    # 48 GiB free, 1 rank: budget int(38 GiB x 0.8) = 32,641,751,449 B; x 0.95 / 21,474,967,552 device bytes
    # (163,841 x 131,072) = ratio 1.44399...; int(163,840 x ratio) = 236,583, + 1 = 236,584 tokens
    tier = model_hicache_tier(kvmem.get_model("llama-3.1-8b"), kv_memory=20 * GIB, ranks_per_node=1,
                              host_available_bytes=48 * GIB)
    assert tier.tokens == 236_584
    assert "ratio 2.000 -> 1.444" in tier.notes[0]


def test_a_ratio_the_host_cannot_hold_is_refused_with_the_numbers():
    # the InferenceX#2777 shape: ratio 2.5 with 240 GB device pools on 8 ranks of a 3 TB node:
    # 600 GB a rank, 4.8 TB the node; SGLang may take (3e12 - 10 GiB) // 8 a rank
    with pytest.raises(ValueError, match=r"Requesting 600.00 GB but only have 373.66 GB free"):
        hicache_tier(device_tokens=240_000_000_000 // 1000, size_per_token=1000, page_size=1,
                     device_pool_bytes=240 * 10**9, hicache_ratio=2.5, host_available_bytes=3 * 10**12,
                     ranks_per_node=8)


def test_unknown_host_keeps_the_default_ratio_and_says_so():
    tier = model_hicache_tier(kvmem.get_model("llama-3.1-8b"), kv_memory=20 * GIB)
    assert tier.tokens == 327_681          # int(163,840 x 2.0) + 1
    assert "--host-memory" in tier.notes[0]


def test_refusals():
    with pytest.raises(ValueError, match=r"must be in \(0, 1\]"):
        hicache_tier(device_tokens=1, size_per_token=1, page_size=1, device_pool_bytes=1,
                     hicache_host_memory_fraction=1.5)
    with pytest.raises(ValueError, match="hybrid_pool_assembler.py"):
        model_hicache_tier(kvmem.get_model("qwen3-next-80b-a3b"), kv_memory=20 * GIB, hicache_ratio=2.0)


def test_a_sliding_window_hybrid_gets_a_host_pool_per_device_pool():
    # gpt-oss-20b on 20 GiB: a full pool of 485,451 tokens, cell 12 full layers x 8 KV heads x (64 + 64) x 2 B
    # = 24,576 B; ratio 2: int(970,902) + 1 = 970,903 full host tokens (x 24,576 = 23,860,912,128 B), the SWA
    # pool's 776,721 beside them (19,088,695,296 B): 42,949,607,424 B a rank
    tier = model_hicache_tier(kvmem.get_model("gpt-oss-20b"), kv_memory=20 * GIB, hicache_ratio=2.0)
    assert (tier.tokens, tier.host_bytes_per_rank) == (970_903, 42_949_607_424)
    assert "SWA host pool 776,721 tokens" in tier.notes[-1]


def test_plan_writes_the_hicache_flags():
    command = kvmem.plan("llama-3.1-8b", gpu="h100-sxm-80gb", context="32k", engine="sglang",
                         enable_hierarchical_cache=True, hicache_ratio=2.5).command
    assert command.endswith("--enable-hierarchical-cache --hicache-ratio 2.5")
    sized = kvmem.plan("llama-3.1-8b", gpu="h100-sxm-80gb", context="32k", engine="sglang",
                       enable_hierarchical_cache=True, hicache_size=40).command
    assert sized.endswith("--enable-hierarchical-cache --hicache-size 40")


def test_check_log_reads_the_host_pool_line():
    from kvmem.logcheck import check_log
    log = ("$ python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct --enable-hierarchical-cache "
           "--hicache-ratio 2.5\n"
           "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 163840, K size: 10.00 GB, V size: 10.00 GB\n"
           "Allocating kv hierarchical KV host pool: 409601 tokens, 53.69 GB host memory.\n")
    (line,) = [c for c in check_log(log).checks if c.quantity == "HiCache host pool"]
    assert line.matches and line.kvmem == "409601 tokens, 53.69 GB"
    auto = check_log(log.replace(" --hicache-ratio 2.5", ""))
    assert any("auto-sized it" in note for note in auto.notes)

"""vLLM's native CPU offload tier (kvmem.engines.vllm.offload), by hand; vLLM's own code judges it in
tests/oracles/test_vllm_offload_oracle.py."""

import json

import pytest

import kvmem
from kvmem.engines.vllm.offload import (
    lmcache_kv_shapes,
    lmcache_local_tiers,
    lmcache_server_tier,
    lmcache_tier,
    native_tier,
    offload_log_line,
    pp_stage_layers,
)

GIB = 1 << 30


def test_dense_tier_is_the_size_over_one_block_of_every_layer():
    # llama-3.1-8b: 32 layers x 16 tokens x 8 heads x (128 + 128) x 2 B = 2,097,152 B a block;
    # 37.5 GiB = 40,265,318,400 B // 2,097,152 = 19,200 chunks; at 8,192 tokens a request takes 512 of
    # them: 19,200 x 8,192 // 512 = 307,200 tokens
    tier = native_tier(kvmem.get_model("llama-3.1-8b"), kv_offloading_size=37.5, max_model_len=8192)
    assert (tier.chunk_bytes, tier.chunks, tier.tokens) == (2_097_152, 19_200, 307_200)
    assert tier.host_bytes_per_node == 40_265_318_400 == tier.host_bytes_per_rank


def test_the_size_is_a_total_across_tp_ranks():
    # tp 4: a rank's block is 524,288 B, a chunk row holds the four ranks' shares: the same 19,200 chunks
    tier = native_tier(kvmem.get_model("llama-3.1-8b"), kv_offloading_size=37.5, max_model_len=8192, tp=4)
    assert (tier.chunk_bytes, tier.chunks, tier.tokens) == (2_097_152, 19_200, 307_200)
    assert tier.host_bytes_per_rank == 19_200 * 524_288
    assert tier.host_bytes_per_node == 4 * tier.host_bytes_per_rank


def test_a_hybrid_pays_a_chunk_per_group():
    # gpt-oss-20b: 2 groups (12 full, 12 sliding-128 layers) of 16 x 8 x 128 x 2 x 2 B = 32,768 B pages:
    # a block of one group 12 x 32,768 = 393,216 B; 100 GiB // 393,216 = 273,066 chunks; a 32,768-token
    # request takes 2,048 full chunks + max(cdiv(128, 16), cdiv(127, 16)) = 8 window chunks:
    # 273,066 x 32,768 // 2,056 = 4,352,055 tokens (vllm#56871: about half a dense model's)
    tier = native_tier(kvmem.get_model("gpt-oss-20b"), kv_offloading_size=100, max_model_len=32768)
    assert (tier.chunk_bytes, tier.chunks, tier.tokens) == (393_216, 273_066, 4_352_055)
    assert any("2 KV cache groups" in note for note in tier.notes)


def test_mla_on_tp_keeps_one_copy_for_all_ranks():
    # deepseek-v2-lite: 27 x 64 x 576 x 2 B = 1,990,656 B; tp 2 on one node: one copy (replicated layout)
    tier = native_tier(kvmem.get_model("deepseek-v2-lite"), kv_offloading_size=100, max_model_len=32768, tp=2,
                       block_size=64)
    assert (tier.chunk_bytes, tier.chunks) == (1_990_656, 53_939)
    assert tier.host_bytes_per_rank == tier.host_bytes_per_node == 53_939 * 1_990_656
    assert offload_log_line(tier).endswith("(107.37 GB)")


def test_refusals_name_the_value():
    with pytest.raises(ValueError, match="kv_offloading_size must be a positive number of GiB, got -1"):
        native_tier(kvmem.get_model("llama-3.1-8b"), kv_offloading_size=-1, max_model_len=8192)
    with pytest.raises(ValueError, match="'blocks_per_chunk' must be greater than 0, got 0"):
        native_tier(kvmem.get_model("llama-3.1-8b"), kv_offloading_size=1, max_model_len=8192, blocks_per_chunk=0)
    with pytest.raises(ValueError, match="enable-prefix-caching"):
        native_tier(kvmem.get_model("qwen3-next-80b-a3b"), kv_offloading_size=1, max_model_len=8192)


def test_lmcache_pins_its_size_per_rank():
    # 5 GiB per rank of llama-3.1-8b at tp 2: 65,536 B / token / rank x 256 = 16,777,216 B a chunk;
    # 5,368,709,120 // 16,777,216 = 320 chunks = 81,920 tokens; 2 ranks pin 10 GiB
    tier = lmcache_tier(65_536, ranks=2)
    assert (tier.chunks, tier.tokens, tier.host_bytes_per_node) == (320, 81_920, 10 * GIB)


def test_lmcache_chunks_align_to_4k():
    # deepseek-v2-lite: 27 x 576 x 2 B = 31,104 B / token; x 256 = 7,962,624 B (a multiple of 4,096 already);
    # an odd 1,000 B / token: 256,000 -> 258,048 B a chunk, 5 GiB // 258,048 = 20,805 chunks
    assert lmcache_tier(31_104).chunk_bytes == 7_962_624
    tier = lmcache_tier(1_000)
    assert (tier.chunk_bytes, tier.chunks) == (258_048, 20_805)


def test_plan_writes_the_offload_flags():
    command = kvmem.plan("llama-3.1-8b", gpu="h100-sxm-80gb", context="32k", engine="vllm", kv_offloading_size=37.5,
                         host_memory_bytes="64GiB").command
    assert command.endswith("--kv-offloading-size 37.5")
    lm = kvmem.plan("llama-3.1-8b", gpu="h100-sxm-80gb", context="32k", engine="vllm", kv_offloading_size=10,
                    kv_offloading_backend="lmcache", lmcache_l1_size_gb=64).command
    assert lm.endswith("--kv-offloading-size 10 --kv-offloading-backend lmcache")


def test_the_lmcache_backend_is_sized_by_its_servers_l1():
    # vLLM 0.33.0 --kv-offloading-backend lmcache: the LMCache server's --l1-size-gb 64 = 68,719,476,736 B a node
    assert lmcache_server_tier(64).host_bytes_per_node == 64 << 30
    f = kvmem.fit("llama-3.1-8b", gpu="h100-sxm-80gb", context="32k", engine="vllm", kv_offloading_size=10,
                  kv_offloading_backend="lmcache", lmcache_l1_size_gb=64, host_memory_bytes="48GiB")
    assert not f.fits and "the LMCache server's --l1-size-gb 64" in f.why_not
    with pytest.raises(ValueError, match="give lmcache_l1_size_gb"):
        kvmem.fit("llama-3.1-8b", gpu="h100-sxm-80gb", context="32k", engine="vllm", kv_offloading_size=10,
                  kv_offloading_backend="lmcache")


def test_check_log_reads_the_offload_region():
    from kvmem.logcheck import check_log
    log = ("$ vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 8192 --kv-offloading-size 37.5\n"
           "INFO [shared_offload_region.py:177] Created mmap file /dev/shm/vllm_offload_x.mmap (40.27 GB)\n")
    (line,) = [c for c in check_log(log).checks if c.quantity == "CPU offload region"]
    assert line.matches and line.kvmem.startswith("40.27 GB (19,200 chunks of 2,097,152 B)")
    wrong = check_log(log.replace("40.27", "80.53")).checks
    assert not [c for c in wrong if c.quantity == "CPU offload region"][0].matches
    bare = check_log(log.replace(" --kv-offloading-size 37.5", ""))
    assert any("give -o kv_offloading_size" in note for note in bare.notes)


def test_lmcache_connector_tiers_dense():
    # llama-3.1-8b, tp 2: kv_shape (32 layers, K and V, 256 tokens, 4 heads, 128) x 2 B = 16,777,216 B a rank's
    # chunk (a multiple of 4,096); 5 GiB // 16,777,216 = 320 chunks = 81,920 tokens; 100 GiB of disk: 6,400 chunks
    model = kvmem.get_model("llama-3.1-8b")
    assert lmcache_kv_shapes(model, tp=2) == ([(32, 2, 256, 4, 128)], 2)
    cpu, disk = lmcache_local_tiers(model, tp=2, max_local_disk_size=100)
    assert (cpu.backend, cpu.chunk_bytes, cpu.chunks, cpu.tokens) == ("lmcache-cpu", 16_777_216, 320, 81_920)
    assert (cpu.host_bytes_per_rank, cpu.host_bytes_per_node) == (5 * GIB, 10 * GIB)
    assert (disk.backend, disk.chunks, disk.tokens) == ("lmcache-disk", 6_400, 1_638_400)
    # fp8: 1 B, half the chunk, twice the tokens; no disk tier by default (max_local_disk_size 0)
    (fp8,) = lmcache_local_tiers(model, tp=2, kv_dtype="fp8")
    assert (fp8.chunk_bytes, fp8.tokens) == (8_388_608, 163_840)


def test_lmcache_connector_tiers_mla_keep_one_latent():
    # deepseek-v2-lite: (27 layers, 1, 256 tokens, 1 head, 512 + 64) x 2 B = 7,962,624 B at any tp (one latent,
    # not split); 5 GiB // 7,962,624 = 674 chunks = 172,544 tokens, stored on rank 0 while both ranks pin 5 GiB
    model = kvmem.get_model("deepseek-v2-lite")
    assert lmcache_kv_shapes(model, tp=2) == ([(27, 1, 256, 1, 576)], 2)
    (cpu,) = lmcache_local_tiers(model, tp=2)
    assert (cpu.chunk_bytes, cpu.chunks, cpu.tokens, cpu.host_bytes_per_node) == (7_962_624, 674, 172_544, 10 * GIB)
    assert "rank 0 stores the chunks" in cpu.notes[0]


def test_lmcache_connector_tiers_sliding_hybrid_count_every_layer():
    # gpt-oss-20b (12 sliding-128 + 12 full layers): LMCache's budget counts all 24 at the chunk's length:
    # 24 x 2 x 256 x 8 x 64 x 2 B = 12,582,912 B; 5 GiB // 12,582,912 = 426 chunks = 109,056 tokens
    (cpu,) = lmcache_local_tiers(kvmem.get_model("gpt-oss-20b"))
    assert (cpu.chunk_bytes, cpu.chunks, cpu.tokens) == (12_582_912, 426, 109_056)
    assert any("sliding-window layers at the chunk's full length" in note for note in cpu.notes)


def test_lmcache_pipeline_stages_and_alignment():
    # 32 layers over 3 stages: 11, 11, 10 (vLLM gives the remainder to the stages before the last); the
    # tier holds what its fullest stage's ranks hold: 37.5 GiB // (11 x 2 x 256 x 4 x 128 x 2 = 5,767,168 B) = 6,981
    assert pp_stage_layers(32, 3) == [11, 11, 10] and pp_stage_layers(61, 4) == [15, 15, 16, 15]
    (cpu,) = lmcache_local_tiers(kvmem.get_model("llama-3.1-8b"), tp=2, pp=3, max_local_cpu_size=37.5)
    assert (cpu.chunks, cpu.tokens, cpu.ranks) == (6_981, 1_787_136, 6)
    # a chunk that is no multiple of 4 KiB is aligned up: qwen3-8b at tp 8 with chunk_size 1 is
    # 36 x 2 x 1 x 1 x 128 x 2 = 18,432 B raw -> 20,480 B; 0.001 GiB = 1,073,741 B // 20,480 = 52 chunks
    shapes, element = lmcache_kv_shapes(kvmem.get_model("qwen3-8b"), tp=8, chunk_size=1)
    assert shapes == [(36, 2, 1, 1, 128)] and element == 2
    (tiny,) = lmcache_local_tiers(kvmem.get_model("qwen3-8b"), tp=8, max_local_cpu_size=0.001, chunk_size=1)
    assert (tiny.chunk_bytes, tiny.chunks, tiny.tokens) == (20_480, 52, 52)


def test_lmcache_refuses_what_its_one_shape_cannot_describe():
    with pytest.raises(ValueError, match=r"layers of kind \['linear'\]"):
        lmcache_local_tiers(kvmem.get_model("qwen3-next-80b-a3b"))
    with pytest.raises(ValueError, match="saves an MLA model's chunks on rank 0 only"):
        lmcache_local_tiers(kvmem.get_model("deepseek-v2-lite"), pp=2)
    with pytest.raises(ValueError, match="kv_dtype 'nvfp4'"):
        lmcache_local_tiers(kvmem.get_model("llama-3.1-8b"), kv_dtype="nvfp4")
    with pytest.raises(ValueError, match="max_local_cpu_size must be a positive number of GiB, got 0"):
        lmcache_local_tiers(kvmem.get_model("llama-3.1-8b"), max_local_cpu_size=0)


def test_fit_reports_the_lmcache_connector_tiers():
    # 2 ranks x 20 GiB pinned = 40 GiB of host RAM; 20 GiB // 16,777,216 = 1,280 chunks = 327,680 tokens; the
    # disk tier (500 GiB a rank) is reported with its tokens and not counted against the RAM
    f = kvmem.fit("llama-3.1-8b", gpu="h100-sxm-80gb", num_gpus=2, tp=2, context="32k", engine="vllm",
                  lmcache_max_local_cpu_size=20, lmcache_max_local_disk_size=500, host_memory_bytes="64GiB")
    terms = {t["name"]: t for t in f.host["terms"]}
    cpu, disk = terms["LMCache local CPU (LMCacheConnectorV1)"], terms["LMCache local disk"]
    assert (cpu["bytes_per_node"], cpu["tokens"], cpu["binding"]) == (40 * GIB, 327_680, True)
    assert (disk["tokens"], disk["binding"]) == (8_192_000, False) and f.host["total_bytes"] == 40 * GIB
    over = kvmem.fit("llama-3.1-8b", gpu="h100-sxm-80gb", num_gpus=2, tp=2, context="32k", engine="vllm",
                     lmcache_max_local_cpu_size=40, host_memory_bytes="64GiB")
    assert not over.fits and "LMCache local CPU (LMCacheConnectorV1) 80.00 GiB" in over.why_not
    # deepseek-v3 at tp 8: one 61 x 576 x 2 B x 256 = 17,989,632 B latent chunk; 20 GiB // it = 1,193 chunks
    mla = kvmem.fit("deepseek-v3", gpu="h200-sxm-141gb", num_gpus=8, tp=8, context="32k", engine="vllm",
                    lmcache_max_local_cpu_size=20)
    assert (mla.host["terms"][0]["tokens"], mla.host["terms"][0]["bytes_per_node"]) == (1_193 * 256, 8 * 20 * GIB)
    with pytest.raises(ValueError, match="kvmem does not size LMCache's tiers with a draft"):
        kvmem.fit("deepseek-v3", gpu="h200-sxm-141gb", num_gpus=8, tp=8, context="32k", engine="vllm", draft="mtp",
                  lmcache_max_local_cpu_size=20)
    with pytest.raises(ValueError, match="vLLM 0.33.0 runs one KV connector"):
        kvmem.fit("llama-3.1-8b", gpu="h100-sxm-80gb", context="32k", engine="vllm", kv_offloading_size=10,
                  lmcache_max_local_cpu_size=20)


def test_plan_writes_lmcache_local_cpu_tier_into_kv_transfer_config():
    # the tier fit sized travels as lmcache.-prefixed extra config (vllm_v1_adapter.py#L494-L509); 20 GiB a rank
    plan = kvmem.plan("llama-3.1-8b", gpu="h100-sxm-80gb", num_gpus=2, tp=2, context=32768, engine="vllm",
                      lmcache_max_local_cpu_size=20, host_memory_bytes="128GiB")
    value = plan.argv[plan.argv.index("--kv-transfer-config") + 1]
    assert json.loads(value) == {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both",
                                 "kv_connector_extra_config": {"lmcache.chunk_size": 256, "lmcache.local_cpu": True,
                                                               "lmcache.max_local_cpu_size": 20.0}}
    assert "'" + value + "'" in plan.command       # one shell word, pasted as is


def test_plan_refuses_lmcache_disk_tier_without_a_path():
    with pytest.raises(kvmem.PlanRefused, match="needs local_disk"):
        kvmem.plan("llama-3.1-8b", gpu="h100-sxm-80gb", context=32768, engine="vllm",
                   lmcache_max_local_disk_size=20, host_memory_bytes="128GiB")


def test_disaggregated_roles_refuse_lmcache_beside_nixl():
    from kvmem.disagg import disaggregate
    with pytest.raises(kvmem.PlanRefused, match="MultiConnector"):
        disaggregate("llama-3.1-8b", gpu="h100-sxm-80gb", engine="vllm", prompt_tokens=4096, output_tokens=1024,
                     request_rate=2, lmcache_max_local_cpu_size=20, host_memory_bytes="128GiB")

"""vllm mode: DeepSeek-V4 as vLLM 0.33.0 lays it out (kvmem/engines/vllm/compressed.py), the CUDA default
(FLASHMLA_SPARSE_DSV4, fp8_ds_mla). Every number below is also what vLLM's own planning code gives for
these specs (tests/oracles/test_vllm_deepseek_v4_oracle.py)."""

import pytest

import kvmem
from kvmem.engines import engine_estimate

GIB = 1 << 30


@pytest.fixture(scope="module")
def flash():
    return kvmem.get_model("deepseek-v4-flash")    # 43 layers: 2 sliding, 21 CSA (ratio 4), 20 HCA (128)


def test_pages_and_groups_of_deepseek_v4_flash(flash):
    # fp8_ds_mla rows of 584 B, pages rounded up to 576 B multiples:
    #   sliding 64 x 584 = 37,376 -> 37,440; CSA rows 256 / 4 = 64 x 584 -> 37,440; HCA 256 / 128 = 2 x 584 =
    #   1,168 -> 1,728; indexer 64 x (128 + 4) = 8,448 -> 8,640; CSA state 4 x (2 x 2 x 512) x 4 B = 32,768
    #   -> 32,832; HCA state 8 x 1,024 x 4 B = 32,768 -> 32,832; indexer state 4 x 512 x 4 B = 8,192 -> 8,640
    c = kvmem.capacity(flash, engine="vllm", kv_memory=20 * GIB, max_model_len=65536, max_num_batched_tokens=8192)
    assert c.details.page_bytes == [1_728, 8_640, 32_832, 37_440]
    # 43 sliding caches in 2 groups (22, 21: repeats 22, _approximate_gcd of 43, 21, 20 from 21 up), the
    # 62 MLA-type caches (21 + 21 + 20) whole, 42 CSA and indexer states, 20 HCA states
    assert c.details.group_layers == [22, 21, 62, 42, 20]
    # a block: the widest group, 21 x 37,440 + 21 x 8,640 + 20 x 1,728 = 1,002,240 B; 20 GiB // that = 21,426
    assert c.blocks == 21_474_836_480 // 1_002_240 == 21_426
    # a request of 65,536 tokens with 2 x 8,192 in flight: sliding 2 x (cdiv(127 + 16,384, 64) + 1) = 518,
    # MLA cdiv(65,536, 256) = 256, CSA states cdiv(7 + 16,384, 4) + 1 = 4,099, HCA states
    # cdiv(127 + 16,384, 8) + 1 = 2,065: 6,938 blocks; 21,426 / 6,938 = 3.09x, int(3.0882... x 65,536)
    assert c.details.blocks_per_request == 6_938
    assert c.tokens == 202_388
    assert c.log_lines == ("GPU KV cache size: 202,388 tokens, Maximum concurrency for 65,536 tokens per request: "
                           "3.09x",)


def test_deepseek_v4_flash_estimate_counts_whole_packed_blocks(flash):
    # 1,024 tokens: sliding 16 - (1,024 - 128) // 64 = 2 blocks in each sliding group, MLA cdiv(1,024, 256) = 4,
    # CSA states 256 - (1,024 - 8) // 4 = 2, HCA states 128 - (1,024 - 128) // 8 = 16: 26 blocks of 1,002,240 B
    e = engine_estimate(flash, engine="vllm", tokens=1024)
    assert [g["blocks_per_sequence"] for g in e.details.groups] == [2, 2, 4, 2, 16]
    assert e.total_bytes == 26 * 1_002_240 == 26_058_240
    assert e.kv_dtype == "fp8_ds_mla"
    # the layers' own pages: 43 x 2 x 37,440 + 4 x (21 x 37,440 + 21 x 8,640 + 20 x 1,728) + 2 x 21 x 32,832
    # + 2 x 21 x 8,640 + 16 x 20 x 32,832 = 19,476,864 B; the rest of the 26 blocks is the narrower groups' slack
    assert sum(e.per_layer) == 19_476_864


@pytest.mark.parametrize("options, message", [
    (dict(kv_dtype="bf16"), "stores only fp8_ds_mla"),
    (dict(pp=2), "not pp > 1"),
    (dict(block_size=64), "not block_size 64"),
    (dict(hybrid_kv_cache_manager=False), "not hybrid_kv_cache_manager=False"),
    (dict(version="0.30.0"), "only 0.33.0's DeepSeek-V4"),
])
def test_what_kvmem_does_not_model_is_refused(flash, options, message):
    with pytest.raises(ValueError, match=message):
        engine_estimate(flash, engine="vllm", tokens=1024, **options)


def test_a_compress_rate_vllm_asserts_against_is_refused(flash):
    model = kvmem.Model.from_hf_config({**flash.config, "compress_rates": {"compressed_sparse_attention": 8,
                                                                           "heavily_compressed_attention": 128}})
    with pytest.raises(ValueError, match=r"asserts compress_ratio in \[4, 128\]"):
        engine_estimate(model, engine="vllm", tokens=1024)

"""sglang mode: DeepSeek-V4 as SGLang 0.5.23 sizes it (kvmem/engines/sglang/dsv4.py): DSV4PoolConfigurator's
tokens and DeepSeekV4TokenToKVPool's buffers at the launch defaults (page 256, fp8, SWA ratio 0.1, 256 requests).
The same numbers come out of SGLang's own code on the CPU (tests/oracles/test_sglang_dsv4_oracle.py)."""

import pytest

import kvmem
from kvmem.engines import engine_estimate

GIB = 1 << 30


@pytest.fixture(scope="module")
def flash():
    return kvmem.get_model("deepseek-v4-flash")    # 43 layers: 2 SWA-only, 21 ratio 4, 20 ratio 128


def test_flash_pools_at_40_gib(flash):
    c = kvmem.capacity(flash, engine="sglang", kv_memory=40 * GIB, max_model_len=65536)
    # a SWA slot: 43 x 585 B (149,760 B pages of 256 rows) + 8 / 256 x (8,192 + 2,048) B x 21 c4 state rows = 31,875;
    # a full token: 0.1 x 31,875 + 21 x (585 / 4 + 132 / 4) + 20 x 864 / 128 = 7,086.75 B;
    # c128 state: cdiv(257 x 128 + 129, 128) x 128 = 33,152 rows x 4,096 B x 20 = 2,715,811,840 B fixed;
    # (42,949,672,960 - 2,715,811,840) / 7,086.75 = 5,677,409.9 -> 5,677,312 (pages of 256); SWA int(0.1 x that)
    # -> 567,552; c4 rows // 4, c128 rows // 128
    assert c.tokens == 5_677_312
    assert c.details.swa_layer_tokens == 567_552
    assert c.details.max_running_requests == 256
    pools = {p["role"]: (p["num_tokens"], p["k_bytes"]) for p in c.details.pools}
    assert pools == {
        "swa": (567_552, 43 * 2_218 * 149_760),           # cdiv(567,552 + 256, 256) pages
        "c4": (1_419_328, 21 * 22_181 * 37_440),          # cdiv(1,419,328 + 256, 64) pages of 64 x 584 -> 37,440 B
        "c4_index": (1_419_328, 21 * 22_181 * 64 * 132),  # 44,354 x 32 rows, 128 fp8 + 4 B scale each
        "c4_state": (17_736, 21 * 17_748 * 8_192),        # 567,552 // 256 x 8 rows (+ 9, to 4s) x 4 x 512 fp32
        "c4_index_state": (17_736, 21 * 17_748 * 2_048),
        "c128": (44_354, 20 * 22_305 * 1_728),            # cdiv(44,354 + 256, 2) pages of 2 x 584 -> 1,728 B
        "c128_state": (32_896, 2_715_811_840),
    }
    assert c.details.allocated_bytes == 42_961_089_088
    assert c.log_lines[2] == "DSV4 pool sizes: full=5677312, swa=567552, c4=1419328, c128=44354, c4_state=17736, " \
                             "c128_state=0"
    assert not any("KV Cache is allocated" in line for line in c.log_lines)   # the V4 pool prints none
    # concurrency at 64k: min(5,677,312 / 65,536, 567,552 / 256, 256 requests) = 86.6
    assert c.max_concurrency == pytest.approx(5_677_312 / 65_536)


def test_swa_ratio_and_request_cap_are_sglangs_flags(flash):
    c = kvmem.capacity(flash, engine="sglang", kv_memory=40 * GIB, swa_full_tokens_ratio=0.25, max_running_requests=64)
    # 0.25 x 31,875 + 3,764.25 + 135 = 11,868 B a full token; c128 state 20 x cdiv(65 x 128 + 129, 128) x 128 x
    # 4,096 = 20 x 8,576 x 4,096 = 702,545,920 B: (42,949,672,960 - 702,545,920) / 11,868 = 3,559,751.2 -> 3,559,680
    assert c.tokens == 3_559_680
    assert c.details.swa_layer_tokens == 889_856     # int(0.25 x 3,559,680) = 889,920 -> 3,476 pages of 256
    assert c.details.max_running_requests == 64


def test_a_budget_without_one_request_of_swa_is_sglangs_error(flash):
    c = kvmem.capacity(flash, engine="sglang", kv_memory=GIB // 4)
    # 268,435,456 - 2,715,811,840 < 0: no full token, a SWA pool of 0 -> validate_swa_pool_size raises
    assert c.tokens == 0 and "SWA pool (0 tokens) cannot hold even one request" in c.refusal.reason


def test_estimate_counts_each_pools_pages(flash):
    e = engine_estimate(flash, engine="sglang", tokens=1024)
    # every layer: SWA cdiv(256 + 256, 256) = 2 pages x 149,760; ratio 4: cdiv(256 + 256, 64) = 8 pages of
    # 37,440 + 64 x 132, states (1 + 1) x 8 rows x 10,240 B; ratio 128: cdiv(8 + 256, 2) = 132 pages x 1,728,
    # state 128 rows x 4,096 B
    swa = 2 * 149_760
    c4 = swa + 8 * (37_440 + 8_448)
    c128 = swa + 132 * 1_728
    assert e.k_bytes == 2 * swa + 21 * c4 + 20 * c128 == 25_150_464
    assert e.state_bytes == 21 * 2 * 8 * 10_240 + 20 * 128 * 4_096 == 13_926_400
    assert e.kv_dtype == "fp8_e4m3"


@pytest.mark.parametrize("options, message", [
    (dict(kv_dtype="bf16"), "store_dtype == torch.uint8"),
    (dict(kv_dtype="fp8_e5m2"), "kv_cache_dtype in \\[fp8_e4m3, bfloat16\\]"),
    (dict(pp=2), "pp = 1 only"),
    (dict(disable_hybrid_swa_memory=True), "DSV4PoolConfigurator"),
    (dict(swa_full_tokens_ratio=1.5), "should be in range"),
])
def test_what_sglang_or_kvmem_refuses(flash, options, message):
    with pytest.raises(ValueError, match=message):
        kvmem.capacity(flash, engine="sglang", kv_memory=40 * GIB, **options)

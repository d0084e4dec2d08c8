"""TensorRT-LLM's speculative draft beside the target (kvmem.engines.trtllm.draft): the split of one KV budget by hand
from _compute_draft_budget_shares (trtllm@065ff9e9 _util.py), and what capacity and fit make of a draft: a one-window
KVCacheManager target shares max_tokens = budget // (target + draft bytes a token) with its draft's manager."""

import pytest

import kvmem
from kvmem.engines.trtllm.draft import CacheCost, read_draft, split_budget

GIB = 1 << 30


def test_the_split_is_proportional_to_the_slopes():
    # 4 GiB, 4 target layers to 1 draft layer: draft int(4,294,967,296 x 1 / 5) = 858,993,459; target the rest
    assert split_budget(4 * GIB, CacheCost(4), CacheCost(1)) == (3_435_973_837, 858_993_459)


def test_intercepts_are_charged_first_on_the_gpu_and_dropped_for_the_host():
    # 10 GiB, Mamba state 1 GiB (target) + 0.5 GiB (draft); slopes 3:1 -> draft 0.5 GiB + int(8.5 GiB / 4)
    target, draft = CacheCost(3, GIB), CacheCost(1, GIB // 2)
    assert split_budget(10 * GIB, target, draft) == (10 * GIB - (GIB // 2 + 2_281_701_376), GIB // 2 + 2_281_701_376)
    # host_cache_size: slopes alone, 10 GiB / 4 = 2,684,354,560 to the draft
    assert split_budget(10 * GIB, target, draft, budget="host_cache_size")[1] == 2_684_354_560
    with pytest.raises(ValueError, match=r"KV cache GPU budget \(1.00 GiB\) is smaller than the combined fixed cost"):
        split_budget(GIB, CacheCost(1, GIB), CacheCost(1))


def test_deepseek_v3_mtp_layer_split():
    # 61 MLA layers of 576 x 2 B = 70,272 B a token; one nextn layer 1,152 B; 40 GiB:
    # draft int(42,949,672,960 x 1,152 / 71,424) = 692,736,660 B
    assert split_budget(40 * GIB, CacheCost(70_272), CacheCost(1_152)) == (42_256_936_300, 692_736_660)


def test_deepseek_v3_mtp_capacity_shares_max_tokens_with_its_draft_layer():
    # 40 GiB = 42,949,672,960 B; 61 x 576 x 2 = 70,272 B a token, the MTP layer 1,152 more
    alone = kvmem.capacity("deepseek-v3", engine="trtllm", kv_memory=40 * GIB)
    assert alone.tokens == 611_191                       # 42,949,672,960 // 70,272
    cap = kvmem.capacity("deepseek-v3", engine="trtllm", kv_memory=40 * GIB, draft="mtp")
    assert cap.tokens == 601_333                         # 42,949,672,960 // 71,424
    assert cap.blocks == 18_791                          # 601,333 // 32 (the pinned main floors)
    assert cap.details.draft_bytes_per_token == 1_152
    assert cap.details.allocated_bytes == 18_791 * 32 * 71_424 == 42_948_108_288   # both managers' blocks


def test_a_draft_model_shares_the_budget_and_its_weights_come_off_the_fit():
    # Llama-3.1-8B 32 x 2 x 8 x 128 x 2 = 131,072 B a token; Llama-3.2-1B 16 x 2 x 8 x 64 x 2 = 32,768
    cap = kvmem.capacity("llama-3.1-8b", engine="trtllm", kv_memory=20 * GIB, draft="llama-3.2-1b")
    assert cap.tokens == 131_072                         # 21,474,836,480 // 163,840 (163,840 without the draft)
    alone = kvmem.fit("llama-3.1-8b", gpu="h100-sxm-80gb", num_gpus=1, context="32k", engine="trtllm")
    fit = kvmem.fit("llama-3.1-8b", gpu="h100-sxm-80gb", num_gpus=1, context="32k", engine="trtllm",
                    draft="llama-3.2-1b")
    # the draft's 1.236 B parameters in bf16 join the weights: 16,060,522,496 -> 18,532,151,296 B
    assert (alone.breakdown.weights_bytes, fit.breakdown.weights_bytes) == (16_060_522_496, 18_532_151_296)
    # (85,061,827,297 - 18,532,151,296 - 905,969,664 - 1,073,741,824) x 0.9 = 58,094,968,061 B of KV budget
    assert fit.kv_memory_bytes == 58_094_968_061
    assert fit.capacity.tokens == 354_583                # 58,094,968,061 // 163,840
    # 11,081 blocks of 32 / 1,024 blocks a 32k sequence: 10 sequences (14 without the draft)
    assert (alone.max_batch, fit.max_batch) == (14, 10)


def test_a_windowed_target_splits_the_bytes_before_its_windows_share_them():
    # gpt-oss-20b with TRT-LLM's own windows: 24 layers x 2 x 8 x 64 x 2 = 2,048 B each, 12 sliding (128) + 12 full;
    # a draft of the same model: rule 2 prices both at 24 x 2,048 = 49,152 B a token, so each takes half of 8 GiB
    model = kvmem.get_model("gpt-oss-20b")
    cap = kvmem.capacity(model, engine="trtllm", kv_memory=8 * GIB, max_attention_window="model",
                         max_model_len=8192, draft=model)
    assert any("take 4,294,967,296 B of the 8,589,934,592 B budget" in note for note in cap.notes)
    alone = kvmem.capacity(model, engine="trtllm", kv_memory=4 * GIB, max_attention_window="model",
                           max_model_len=8192)
    assert cap.details.max_tokens == alone.details.max_tokens      # the target's windows share its 4 GiB


def test_drafts_kvmem_does_not_model_are_refused_by_name():
    with pytest.raises(ValueError, match="draft with pp=2: TensorRT-LLM keeps the draft's layers on the last pipeline"):
        kvmem.capacity("deepseek-v3", engine="trtllm", kv_memory=40 * GIB, pp=2, draft="mtp")
    with pytest.raises(ValueError, match="draft='mtp' needs MTP layers"):
        kvmem.capacity("llama-3.1-8b", engine="trtllm", kv_memory=GIB, draft="mtp")
    with pytest.raises(ValueError, match="KVCacheManagerV2 or recurrent-state layout"):
        kvmem.estimate("gemma-4-26b-a4b", engine="trtllm", tokens=64, draft="llama-3.2-1b")
    with pytest.raises(ValueError, match="draft must be 'mtp', a kvmem Model or a preset name"):
        read_draft(3)


def test_the_estimate_holds_the_draft_layers_for_the_same_tokens():
    # 1,000 tokens -> 1,024 slots: target 1,024 x 70,272 = 71,958,528 B, + the MTP layer 1,024 x 1,152 = 1,179,648 B
    assert kvmem.estimate("deepseek-v3", engine="trtllm", tokens=1000).kv_bytes == 71_958_528
    assert kvmem.estimate("deepseek-v3", engine="trtllm", tokens=1000, draft="mtp").kv_bytes == 73_138_176


def test_the_multimodal_encoder_cache_comes_off_the_kv_budget_before_the_fraction():
    # gemma-3-27b (a vision_config): 128 MiB more in the profiled peak -> the budget falls by
    # floor(0.9 x free) - floor(0.9 x (free - 134,217,728)) = 120,795,955 B
    kw = dict(gpu="h100-sxm-80gb", num_gpus=1, context="8k", engine="trtllm")
    alone = kvmem.fit("gemma-3-27b", **kw)
    fit = kvmem.fit("gemma-3-27b", encoder_cache_max_bytes=128 << 20, **kw)
    assert (alone.kv_memory_bytes, fit.kv_memory_bytes) == (25_783_368_394, 25_662_572_439)
    # 62 layers x 2 x 16 x 128 x 2 = 507,904 B a token at full length: 50,764 -> 50,526 tokens
    assert (alone.capacity.tokens, fit.capacity.tokens) == (50_764, 50_526)
    assert kvmem.fit("gemma-3-27b", encoder_cache_max_bytes="128MiB", **kw).kv_memory_bytes == 25_662_572_439
    with pytest.raises(ValueError, match="encoder_cache_max_bytes must be a byte count"):
        kvmem.fit("gemma-3-27b", encoder_cache_max_bytes="lots", **kw)
    with pytest.raises(ValueError, match="llama-3.1-8b has no vision_config; TensorRT-LLM reserves the multimodal"):
        kvmem.fit("llama-3.1-8b", encoder_cache_max_bytes=1 << 27, **kw)


def test_the_plan_carries_the_encoder_cache_and_refuses_a_draft():
    from kvmem.engines.trtllm import launch
    kw = dict(gpu="h100-sxm-80gb", num_gpus=1, context="8k", engine="trtllm")
    plan = kvmem.plan("gemma-3-27b", encoder_cache_max_bytes=128 << 20, **kw)
    assert "multimodal_config:\n  encoder_cache_max_bytes: 134217728\n" in plan.files[launch.EXTRA_OPTIONS_FILE]
    with pytest.raises(ValueError, match="kvmem has no launch flag for option draft"):
        kvmem.plan("llama-3.1-8b", draft="llama-3.2-1b", **kw)


def test_mtp_draft_needs_mtp_layers():
    with pytest.raises(ValueError, match=r"draft='mtp' needs MTP layers, but .* has none"):
        kvmem.capacity("llama-3.1-8b", engine="trtllm", kv_memory=20 * GIB, draft="mtp")

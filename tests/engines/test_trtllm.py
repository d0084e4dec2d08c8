"""TensorRT-LLM mode: real KV-cache log lines reproduced, and the block rules one by one.

GiB in TRT-LLM's logs is 2**30 bytes. A count TRT-LLM derived from printed memory is checked
by bracketing that memory by half its last printed digit.
"""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kvmem
from kvmem import Layer, Model
from kvmem.engines import trtllm

GiB = 2**30


def gib2(nbytes: int) -> float:
    return round(nbytes / GiB, 2)


def cap(model, kv_memory, **kw):
    return kvmem.capacity(model, engine="trtllm", kv_memory=int(kv_memory), **kw)


# Qwen1.5-7B, https://huggingface.co/Qwen/Qwen1.5-7B/blob/main/config.json: 32 layers, 32 heads,
# 32 KV heads (no GQA below 32B, per the model card), hidden 4096.
QWEN15_7B = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 4096,
             "intermediate_size": 11008, "num_hidden_layers": 32, "num_attention_heads": 32,
             "num_key_value_heads": 32, "max_position_embeddings": 32768, "max_window_layers": 28,
             "sliding_window": 32768, "use_sliding_window": False, "vocab_size": 151936,
             "rope_theta": 1000000.0, "torch_dtype": "bfloat16", "tie_word_embeddings": False}

# Kimi-K2.5's language model, https://huggingface.co/moonshotai/Kimi-K2.5/blob/main/config.json
# (text_config: DeepseekV3 architecture, continued from Kimi-K2-Base): 61 layers, MLA with
# kv_lora_rank 512 and qk_rope_head_dim 64, 64 heads, hidden 7168, 262,144 positions.
KIMI_K25_TEXT = {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "kimi_k2", "num_hidden_layers": 61,
                 "hidden_size": 7168, "num_attention_heads": 64, "num_key_value_heads": 64,
                 "intermediate_size": 18432, "moe_intermediate_size": 2048, "n_routed_experts": 384,
                 "n_shared_experts": 1, "num_experts_per_tok": 8, "first_k_dense_replace": 1,
                 "moe_layer_freq": 1, "kv_lora_rank": 512, "q_lora_rank": 1536, "qk_nope_head_dim": 128,
                 "qk_rope_head_dim": 64, "v_head_dim": 128, "vocab_size": 163840,
                 "max_position_embeddings": 262144, "torch_dtype": "bfloat16", "tie_word_embeddings": False}


# ---- real logs (docs/research/engine_logs_serving.json) -------------------------------------

def test_gpt_oss_120b_pytorch_backend_1_1_0rc3():
    # "Install and use TensorRT-LLM for GPT-OSS 120B ... on the DGX Spark" README (code-index file
    # id 2263047771), as kept in docs/research/engine_logs_serving.json; TRT-LLM 1.1.0rc3, tp 1:
    # "... available KV cache memory when calculating max tokens: 5.95 GiB, fraction is set
    #  0.8999999761581421, kv size is 73728. ..."
    # "Both free_gpu_memory_fraction and max_tokens are set (to 0.8999999761581421 and 86711, ...)"
    # "Attention window size 131072 exceeds upper bound 86720 for available blocks. Reducing to 86720."
    # "[MemUsageChange] Allocated 5.95 GiB for max tokens in paged KV cache (86720)."
    model = kvmem.get_model("gpt-oss-120b")
    # every one of the 36 layers counted full (no max_attention_window): 36 x 2 x 8 x 64 x 2 B
    assert trtllm.bytes_per_token(model) == 36 * 2 * 8 * 64 * 2 == 73_728
    # max_tokens = 5.95 GiB // 73,728: the printed 5.95 brackets it to 146 tokens
    low = cap(model, 5.945 * GiB).tokens
    high = cap(model, 5.955 * GiB).tokens
    assert low <= 86_711 <= high and high - low <= 146
    # 1.1.0rc3's Python calculate_max_num_blocks rounds up (math.ceil): block_rounding="ceil"
    exact = cap(model, 86_711 * 73_728, max_model_len=131_072, block_rounding="ceil")
    # blocks = ceil(86,711 / 32) = 2,710 -> 86,720 tokens x 73,728 B = 5.9546 GiB
    assert (exact.tokens, exact.blocks) == (86_711, 2_710)
    # the pinned main floors (DEFAULTS): 86,711 // 32 = 2,709 blocks = 86,688 tokens, 2,709 x 32 x 73,728 B
    pinned = cap(model, 86_711 * 73_728, max_model_len=131_072)
    assert (pinned.blocks, pinned.details.allocated_tokens) == (2_709, 86_688)
    assert pinned.details.allocated_bytes == 6_391_332_864 and pinned.details.block_rounding == "floor"
    assert exact.details.allocated_tokens == exact.longest_request_tokens == 86_720
    assert gib2(exact.details.allocated_bytes) == 5.95
    # the estimation pass first allocated max_num_tokens + 32 = 8,224 tokens:
    # "[MemUsageChange] Allocated 0.56 GiB for max tokens in paged KV cache (8224)." (8,224 x 73,728 B)
    probe = cap(model, 8_224 * 73_728)
    assert probe.details.allocated_tokens == 8_224 and gib2(probe.details.allocated_bytes) == 0.56


def test_kimi_k25_mla_fp8_pool():
    # Kimi K2.5 model-level test report, TRT-LLM 1.x PyTorch backend (code-index file id 59140501328),
    # as kept in docs/research/engine_logs_serving.json:
    # "Max KV cache blocks per sequence: 8192 [window size=262144], tokens per block=32,
    #  primary blocks=158543, ..."
    # "[MemUsageChange] Allocated 166.02 GiB for max tokens in paged KV cache (5073376)."
    model = Model.from_hf_config(KIMI_K25_TEXT, name="kimi-k2.5")
    # MLA: one latent of 512 + 64, factor 1, fp8, not split by tp: 61 x 576 x 1 B = 35,136 B
    assert trtllm.bytes_per_token(model, kv_dtype="fp8") == 35_136
    assert trtllm.bytes_per_token(model, kv_dtype="fp8", tp=8, allocated=True) == 35_136
    result = cap(model, 158_543 * 32 * 35_136, kv_dtype="fp8", tp=8, max_model_len=262_144)
    assert result.blocks == 158_543 and result.details.allocated_tokens == 158_543 * 32 == 5_073_376
    # 5,073,376 x 35,136 B = 178,258,139,136 B = 166.016 GiB
    assert gib2(result.details.allocated_bytes) == 166.02
    assert result.details.max_blocks_per_sequence == 262_144 // 32 == 8192


def test_qwen15_7b_cpp_runtime_rounds_blocks_up():
    # https://github.com/NVIDIA/TensorRT-LLM/issues/2268 (0.13.0.dev, C++ runtime, tp 1):
    # "Memory usage when calculating max tokens in paged kv cache: total: 39.39 GiB, available: 21.89 GiB"
    # "Number of blocks in KV cache primary pool: 631"
    model = Model.from_hf_config(QWEN15_7B, name="qwen1.5-7b")
    # MHA: 32 layers x 2 x 32 heads x 128 x 2 B (fp16) = 524,288 B per token
    assert trtllm.bytes_per_token(model, kv_dtype="fp16") == 524_288
    # 21.89 GiB x 0.9 / 524,288 = 40,347 tokens -> ceil(/64) = 631 (floor would be 630);
    # tokens_per_block 64, the TRT-engine default of that release (fits only with 64)
    # the C++ runtime's calculateMaxNumBlocks rounds up: block_rounding="ceil" (the pinned main floors: 630)
    for available in (21.885, 21.895):
        assert cap(model, available * 0.9 * GiB, kv_dtype="fp16", tokens_per_block=64,
                   block_rounding="ceil").blocks == 631
    floor = cap(model, 21.89 * 0.9 * GiB, kv_dtype="fp16", tokens_per_block=64)
    assert floor.blocks == 630


def test_docs_memory_example_blocks_and_allocation():
    # https://github.com/NVIDIA/TensorRT-LLM/blob/main/docs/source/reference/memory.md (TRT engine):
    # "available: 70.48 GiB" / "Number of blocks in KV cache primary pool: 4060"
    # "Max KV cache pages per sequence: 32" / "Number of tokens per block: 64."
    # "[MemUsageChange] Allocated 63.44 GiB for max tokens in paged KV cache (259840)."
    # The model is not named; the log's own ratio gives 63.44 GiB / 259,840 = 262,144 B per token,
    # the shape of Llama-2-7B (32 x 2 x 32 x 128) with a 1-byte cache. This checks the fraction,
    # the upward block rounding and the allocation line, not the model.
    model = kvmem.get_model("llama-2-7b")
    assert trtllm.bytes_per_token(model, kv_dtype="fp8") == 262_144
    results = [cap(model, available * 0.9 * GiB, kv_dtype="fp8", tokens_per_block=64, max_model_len=2048,
                   block_rounding="ceil") for available in (70.475, 70.485)]
    for result in results:
        # 70.48 x 0.9 GiB / 262,144 = 259,817 tokens -> ceil(/64) = 4,060 blocks = 259,840 tokens
        assert result.blocks == 4060 and result.details.allocated_tokens == 259_840
        assert gib2(result.details.allocated_bytes) == 63.44  # 4060 x 64 x 262,144 B = 63.4375 GiB
        assert result.details.max_blocks_per_sequence == 32   # ceil(2048 / 64)


def test_llama2_7b_v05_token_count_rounded_to_blocks():
    # https://github.com/NVIDIA/TensorRT-LLM/issues/224 (v0.5.0, Triton backend, A10, fp16,
    # tokens_per_block 16): "Using 10718 tokens in paged KV cache."; the maintainer: the count is
    # rounded up to whole blocks at allocation -> 670 blocks = 10,720 tokens. (The free memory is
    # not printed, so 10,718 itself is taken from the log.)
    model = kvmem.get_model("llama-2-7b")
    assert trtllm.bytes_per_token(model, kv_dtype="fp16") == 524_288  # 10,718 x this = 5.23 GiB
    result = cap(model, 10_718 * 524_288, kv_dtype="fp16", tokens_per_block=16, block_rounding="ceil")
    assert (result.tokens, result.blocks, result.details.allocated_tokens) == (10_718, 670, 10_720)
    # at the pinned main: 10,718 // 16 = 669 blocks = 10,704 tokens
    assert cap(model, 10_718 * 524_288, kv_dtype="fp16", tokens_per_block=16).details.allocated_tokens == 10_704


# ---- the rules ------------------------------------------------------------------------------

def test_gqa_fp8_and_nvfp4_bytes_per_token():
    model = kvmem.get_model("llama-3.1-8b")  # 32 layers, 8 KV heads of 128
    assert trtllm.bytes_per_token(model) == 32 * 2 * 8 * 128 * 2 == 131_072
    assert trtllm.bytes_per_token(model, tp=2) == 65_536
    assert trtllm.bytes_per_token(model, kv_dtype="fp8") == 65_536
    # NVFP4: x = 65,536 values per token; ceil(x/2) + ceil(x/16) = 32,768 + 4,096
    assert trtllm.bytes_per_token(model, kv_dtype="nvfp4") == 36_864
    assert trtllm.bytes_per_token(model, kv_dtype="nvfp4", allocated=True) == 36_864


def test_replication_past_the_heads_and_the_floored_estimate():
    model = kvmem.get_model("qwen3-235b-a22b")  # 94 layers, 4 KV heads of 128
    # allocated: ceil(4 / 8) = 1 head per rank: 94 x 2 x 1 x 128 x 2 B
    assert trtllm.bytes_per_token(model, tp=8, allocated=True) == 48_128
    # TRT-LLM's estimate floors 128 x 4 // 8 = 64 values (half a head): 94 x 2 x 64 x 2 B
    assert trtllm.bytes_per_token(model, tp=8) == 24_064
    result = cap(model, 24_064 * 1000, tp=8)
    # 1,000 // 32 = 31 blocks (the pinned main floors) of 32 tokens at the allocated 48,128 B
    assert result.tokens == 1000 and result.details.allocated_bytes == 31 * 32 * 48_128 == 47_742_976
    assert any("estimate of 24,064 B/token" in note for note in result.notes)
    estimate = kvmem.estimate(model, engine="trtllm", tokens=64, tp=8)
    assert estimate.kv_bytes == 64 * 48_128 and estimate.kv_bytes_all_devices == 8 * 64 * 48_128


def test_mla_factor_one_not_split_by_tp():
    model = kvmem.get_model("deepseek-v3")
    for tp in (1, 8):
        result = kvmem.estimate(model, engine="trtllm", tokens=100, tp=tp)
        # 100 tokens -> 4 blocks of 32 = 128 slots x 61 layers x 576 x 2 B, all in K
        assert result.k_bytes == 128 * 61 * 576 * 2 and result.v_bytes == 0


def test_blocks_per_sequence_and_rounding_direction():
    model = kvmem.get_model("llama-3.1-8b")
    result = kvmem.estimate(model, engine="trtllm", tokens=1000, batch=3, tokens_per_block=64)
    # cdiv(1000, 64) = 16 blocks per sequence -> 3 x 1024 slots x 131,072 B
    assert result.kv_bytes == 3 * 1024 * 131_072 and result.details.blocks_by_window == {0: 48}
    assert any("1,000 -> 1,024" in note for note in result.notes)
    budget = 86_711 * 131_072
    assert cap(model, budget, block_rounding="ceil").blocks == 2710
    assert cap(model, budget).blocks == 2709    # the pinned main floors: 86,711 // 32


def test_windows_only_when_asked():
    model = kvmem.get_model("gpt-oss-120b")  # sliding layers (window 128) at even indices
    full = kvmem.estimate(model, engine="trtllm", tokens=1000)
    assert full.per_layer[0] == full.per_layer[1] == 1024 * 2048
    assert any("cached at full length" in note for note in full.notes)
    windowed = kvmem.estimate(model, engine="trtllm", tokens=1000, max_attention_window="model")
    # sliding layer: cdiv(min(1000, 128), 32) = 4 blocks; full layer: 32 blocks
    assert windowed.per_layer[0] == 4 * 32 * 2048 and windowed.per_layer[1] == 1024 * 2048
    pattern = kvmem.estimate(model, engine="trtllm", tokens=1000, max_attention_window=[128, 131072])
    assert pattern.kv_bytes == windowed.kv_bytes
    assert windowed.details.blocks_per_sequence == {0: 32, 128: 4}


def test_variable_windows_share_memory_equally_at_the_pin_by_window_and_bytes_in_cpp():
    model = kvmem.get_model("gpt-oss-120b")
    # the pinned main (calculate_max_num_blocks_for_vswa): each of the 2 windows gets half of 42,949,672,960 B;
    # 18 layers x 2 x 8 x 64 x 2 B = 36,864 B a token in each window
    # 21,474,836,480 // 36,864 = 582,542 tokens -> 582,542 // 32 = 18,204 blocks in each pool
    result = cap(model, 40 * GiB, max_model_len=131_072, max_attention_window="model")
    assert result.details.max_tokens == {128: 582_542, 0: 582_542}
    assert result.details.blocks_per_window == {128: 18_204, 0: 18_204}
    assert result.blocks == 18_204 and result.tokens == 582_542
    assert result.details.allocated_bytes == 2 * 18_204 * 32 * 36_864 == 42_948_624_384
    assert result.max_concurrency == 18_204 / 4096     # min(18,204 / 4, 18,204 / 4,096)
    assert any("an equal share of the memory" in note for note in result.notes)
    # the C++ calculateMaxNumBlocks ("ceil" releases): shares 128 : 131,072 of 42,949,672,960 B
    # window 128: 42,949,672,960 x 128 / (131,200 x 36,864) = 1,136 tokens -> 36 blocks
    # full: 42,949,672,960 x 131,072 / (131,200 x 36,864) = 1,163,947 tokens -> 36,374 blocks
    cpp = cap(model, 40 * GiB, max_model_len=131_072, max_attention_window="model", block_rounding="ceil")
    assert cpp.details.max_tokens == {128: 1_136, 0: 1_163_947}
    assert cpp.details.blocks_per_window == {128: 36, 0: 36_374}
    assert cpp.blocks == 36_374 and cpp.tokens == 1_163_947
    assert cpp.max_concurrency == 36_374 / 4096         # min(36 / 4, 36,374 / 4,096)
    # one sequence at both windows takes 131,200 x 36,864 = 4,836,556,800 B: with less, TRT-LLM shrinks the
    # windows (adjust_window_sizes_for_vswa), which kvmem refuses by name
    with pytest.raises(ValueError, match="needs 4,836,556,800 B of the 4,836,556,800 B given"):
        cap(model, 4_836_556_800, max_model_len=131_072, max_attention_window="model")
    assert cap(model, 4_836_556_801, max_model_len=131_072, max_attention_window="model").tokens == 65_600


def test_pipeline_split_gives_first_ranks_the_extra_layer():
    assert [len(s) for s in trtllm.pp_layers(61, 4)] == [16, 15, 15, 15]
    model = kvmem.get_model("deepseek-v3")
    result = kvmem.estimate(model, engine="trtllm", tokens=32, pp=4)
    assert result.kv_bytes == 16 * 32 * 576 * 2 and result.per_layer[16] == 0
    assert trtllm.bytes_per_token(model, pp=4) == 16 * 576 * 2


def test_linear_hybrid_blocks_only_in_attention_layers():
    model = kvmem.get_model("qwen3-next-80b-a3b")  # 12 attention layers of 2 x 256
    result = kvmem.estimate(model, engine="trtllm", tokens=64, batch=2)
    assert result.kv_bytes == 2 * 64 * 12 * 2 * 2 * 256 * 2
    state = model.layers[0].state
    assert result.state_bytes == 2 * 36 * state.elements() * 2


def test_registered_with_alias():
    assert "trtllm" in kvmem.list_engines()
    model = kvmem.get_model("llama-3.1-8b")
    assert kvmem.estimate(model, engine="TensorRT-LLM", tokens=32).kv_bytes == 32 * 131_072


@pytest.mark.parametrize("options, message", [
    (dict(tokens_per_block=0), "tokens_per_block must be a positive integer, got 0"),
    (dict(block_rounding="up"), "block_rounding must be 'ceil' or 'floor', got 'up'"),
    (dict(max_attention_window="all"), "max_attention_window must be None, 'model' or a non-empty list"),
    (dict(max_attention_window=[]), "max_attention_window must be None, 'model' or a non-empty list"),
    (dict(max_attention_window=[128, 0]), "max_attention_window entries must be a positive integer, got 0"),
    (dict(kv_dtype="int8"), "kv_dtype: TensorRT-LLM caches auto, fp32, fp16, bf16, fp8 or nvfp4, got 'int8'"),
    (dict(tp=3), "tp=3 must divide the 8 KV heads"),
    (dict(page_size=16), "engine 'trtllm' has no option 'page_size'"),
])
def test_bad_input(options, message):
    with pytest.raises(ValueError, match=message):
        kvmem.estimate(kvmem.get_model("llama-3.1-8b"), engine="trtllm", tokens=10, **options)


def test_bad_capacity_input():
    with pytest.raises(ValueError, match="max_model_len is needed to share memory between attention windows"):
        cap(kvmem.get_model("gpt-oss-20b"), GiB, max_attention_window="model")
    split = Model(name="split-kv", layers=(Layer("full", kv_heads=2, head_dim_k=192, head_dim_v=128),),
                  hidden_size=1024, num_attention_heads=8)
    with pytest.raises(ValueError, match="one head_dim for K and V"):
        kvmem.estimate(split, engine="trtllm", tokens=10)


@settings(max_examples=50, deadline=None)
@given(tokens=st.integers(1, 200_000), batch=st.integers(1, 64), tpb=st.sampled_from([8, 32, 64, 128]))
def test_blocks_hold_ideal_plus_one_partial_block_per_sequence(tokens, batch, tpb):
    model = kvmem.get_model("llama-3.1-8b")
    ideal = kvmem.estimate(model, tokens=tokens, batch=batch).kv_bytes
    result = kvmem.estimate(model, engine="trtllm", tokens=tokens, batch=batch, tokens_per_block=tpb)
    assert result.kv_bytes == ideal + batch * (-(-tokens // tpb) * tpb - tokens) * 131_072
    assert result.kv_bytes - ideal < batch * tpb * 131_072

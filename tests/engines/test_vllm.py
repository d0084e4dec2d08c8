"""vLLM mode: real vLLM log lines reproduced to their printed precision, then the rules one by one.

Logs come from docs/research/engine_logs_serving.json (and two more found in vLLM issues and a
deployment note, cited where used). A printed "X GiB" is rounded to 0.01 GiB, so a log is
reproduced when kvmem's counts at X - 0.005 and X + 0.005 GiB bracket the printed count, the
bracket is tight, and the printed concurrency appears, to its two decimals, at some memory in
that interval. Where a log prints no memory, the test says so and checks what it does print.
"""

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kvmem
from kvmem import Layer, Model, capacity, estimate

GIB = 1 << 30


def gib_interval(printed: str) -> tuple[int, int]:
    """The bytes a value printed as ``printed`` GiB (two decimals, or round(x, 2)) can stand for."""
    value, half = Fraction(printed), Fraction(1, 200)
    return -(-(value - half) * GIB // 1), (value + half) * GIB // 1


def bracket(model, printed: str, **kw):
    low, high = gib_interval(printed)
    return (capacity(model, engine="vllm", kv_memory=low, **kw),
            capacity(model, engine="vllm", kv_memory=high, **kw))


def concurrencies(model, printed: str, **kw) -> set[str]:
    """The "%.2f" concurrencies printed anywhere in the memory interval (201 evenly spaced points)."""
    low, high = gib_interval(printed)
    memories = (low + (high - low) * i // 200 for i in range(201))
    return {f"{capacity(model, engine='vllm', kv_memory=m, **kw).max_concurrency:.2f}" for m in memories}


def config_model(name, **cfg):
    return Model.from_hf_config(cfg, name=name)


# Llama-3.1-8B (catalog): 32 layers x 8 KV heads x 128 x 2 (K,V) x 2 B = 131,072 B per token.
LLAMA_8B = kvmem.get_model("llama-3.1-8b")

# EAGLE drafter yuhuili/EAGLE-LLaMA3.1-Instruct-8B, config as published at
# https://huggingface.co/yuhuili/EAGLE-LLaMA3.1-Instruct-8B/blob/main/config.json: one Llama decoder
# layer of the target's shape (32 heads, 8 KV heads, hidden 4096 -> head_dim 128).
EAGLE_LLAMA = config_model("eagle-llama3.1-8b", model_type="llama", architectures=["LlamaForCausalLM"],
                           hidden_size=4096, intermediate_size=14336, num_attention_heads=32,
                           num_key_value_heads=8, num_hidden_layers=1, vocab_size=128256,
                           max_position_embeddings=2048, rms_norm_eps=1e-5, torch_dtype="float16")


# ------------------------------------------------------------------ v0 engine logs

def test_v0_llama31_8b_rtx3090_20k():
    # https://github.com/vllm-project/vllm/issues/10517 (v0.6.x): "kv_cache_size=3.81GiB",
    # "GPU blocks: 1952, # CPU blocks: 2048", "Maximum concurrency for 20000 tokens per request: 1.56x".
    # v0 cache block = 16 x 32 layers x 8 heads x 128 x 2 x 2 B = 2 MiB; 3.805..3.815 GiB -> 1948..1953 blocks;
    # CPU = 4 GiB swap // 2 MiB = 2048; concurrency = 1952 x 16 / 20000 = 1.5616.
    low, high = bracket(LLAMA_8B, "3.81", max_model_len=20000, version="v0")
    assert low.details.cache_block_bytes == 2 * 2**20
    assert (low.blocks, high.blocks) == (1948, 1953) and low.blocks <= 1952 <= high.blocks
    assert low.details.cpu_blocks == high.details.cpu_blocks == 2048
    assert "1.56" in concurrencies(LLAMA_8B, "3.81", max_model_len=20000, version="v0")
    exact = capacity(LLAMA_8B, engine="vllm", kv_memory=1952 * 2**21, max_model_len=20000, version="v0")
    assert exact.details.log == ["# GPU blocks: 1952, # CPU blocks: 2048",
                                    "Maximum concurrency for 20000 tokens per request: 1.56x"]


def test_v0_llama31_8b_rtx3090_29k_does_not_fit():
    # https://github.com/vllm-project/vllm/issues/10517: "kv_cache_size=2.89GiB", "# GPU blocks: 1478,
    # # CPU blocks: 2048", "0.82x", and "The model's max seq len (29000) is larger than the maximum number
    # of tokens that can be stored in KV cache (23648)". 2.885..2.895 GiB // 2 MiB = 1477..1482 blocks;
    # 1478 x 16 = 23,648 tokens; 23,648 / 29,000 = 0.815 -> 0.82.
    low, high = bracket(LLAMA_8B, "2.89", max_model_len=29000, version="v0")
    assert low.blocks <= 1478 <= high.blocks and high.blocks - low.blocks <= 5
    assert low.tokens <= 23648 <= high.tokens
    assert "0.82" in concurrencies(LLAMA_8B, "2.89", max_model_len=29000, version="v0")
    exact = capacity(LLAMA_8B, engine="vllm", kv_memory=1478 * 2**21, max_model_len=29000, version="v0")
    assert exact.tokens == exact.longest_request_tokens == 23648
    assert any("(29000) is larger than the maximum number of tokens that can be stored in KV cache (23648)" in n
               for n in exact.notes)


def test_v0_rho_1b_h200():
    # GRPO rollout log, code-index file id 54021851790 (v0.6.4-style worker.py:232, listed in
    # engine_logs_serving.json): "kv_cache_size=122.71GiB", "# GPU blocks: 365549, # CPU blocks: 11915",
    # "Maximum concurrency for 2048 tokens per request: 2855.85x". realtreetune/rho-1b-sft-GSM8K is
    # microsoft/rho-math-1b-v0.1 = the TinyLlama-1.1B shape (config at
    # https://huggingface.co/microsoft/rho-math-1b-v0.1/blob/main/config.json): 22 layers, 32 heads,
    # 4 KV heads, hidden 2048 -> head_dim 64. Block = 16 x 22 x 4 x 64 x 2 x 2 B = 360,448 B;
    # 122.705..122.715 GiB -> 365,527..365,556 blocks; CPU = 4 GiB // 360,448 = 11,915;
    # 365,549 x 16 / 2048 = 2855.85.
    rho = config_model("rho-1b", model_type="llama", architectures=["LlamaForCausalLM"], hidden_size=2048,
                       intermediate_size=5632, num_attention_heads=32, num_key_value_heads=4,
                       num_hidden_layers=22, vocab_size=32000, max_position_embeddings=2048,
                       torch_dtype="bfloat16")
    low, high = bracket(rho, "122.71", max_model_len=2048, version="v0")
    assert low.details.cache_block_bytes == 360_448
    assert low.blocks <= 365_549 <= high.blocks and (high.blocks - low.blocks) / 365_549 < 1e-4
    assert low.details.cpu_blocks == 11_915
    assert "2855.85" in concurrencies(rho, "122.71", max_model_len=2048, version="v0")


# ------------------------------------------------------------------ early V1 (0.7, 0.8)

def test_v07_llama31_70b_gpu_blocks_line():
    # https://github.com/vllm-project/vllm/pull/12569 (early V1, v0.7.x): "# GPU blocks: 1381",
    # "Maximum concurrency for 2048 tokens per request: 10.79x". No memory is printed, so the check is
    # the release's concurrency rule on the printed count: page = 16 x 8 x 256 x 2 B = 65,536 per layer,
    # 80 layers -> 5 MiB per block; 1381 x 16 / 2048 = 10.789 -> 10.79.
    model = kvmem.get_model("llama-3.1-70b")
    for memory in (1381 * 5 * 2**20, 1382 * 5 * 2**20 - 1):
        result = capacity(model, engine="vllm", kv_memory=memory, max_model_len=2048, version="0.7.0")
        assert result.details.log == ["# GPU blocks: 1381",
                                         "Maximum concurrency for 2048 tokens per request: 10.79x"]


def test_v08_deepseek_v3_mla_on_rocm():
    # https://github.com/vllm-project/vllm/issues/15928 (V1 v0.8.x, AMD MI308, tp > 1): three workers
    # print "GPU KV cache size: 107,824 / 107,456 / 107,312 tokens" with "3.29x / 3.28x / 3.27x" for
    # 32,768 tokens. No memory is printed. MLA page on ROCm's Triton MLA = 16 x (512 + 64) x 2 B =
    # 18,432 B, the same on every tp rank; 61 layers -> 1,124,352 B per block. v0.8: tokens =
    # blocks x 16 (6739, 6716, 6707 blocks), concurrency = tokens / 32,768.
    model = kvmem.get_model("deepseek-v3")
    for blocks, tokens, printed in ((6739, 107_824, "3.29"), (6716, 107_456, "3.28"), (6707, 107_312, "3.27")):
        result = capacity(model, engine="vllm", kv_memory=blocks * 1_124_352, tp=8, max_model_len=32768,
                          attention_backend="TRITON_MLA", version="0.8.2")
        assert result.details.page_bytes == [18_432]
        assert (result.blocks, result.tokens) == (blocks, tokens)
        assert f"{result.max_concurrency:.2f}" == printed


# ------------------------------------------------------------------ V1 logs with memory printed

def test_eagle_draft_layer_shares_the_pool():
    # https://github.com/vllm-project/vllm/issues/19996 (0.9.1.dev705, H100, EAGLE): "Available KV cache
    # memory: 51.63 GiB", "GPU KV cache size: 410,128 tokens", "3.13x" for 131,072. 32 target + 1 draft
    # layer, one group of 33: block = 33 x 65,536 = 2,162,688 B; 51.625..51.635 GiB -> 25,631..25,635
    # blocks; 25,633 x 16 = 410,128; 25,633 / 8192 = 3.129.
    kw = dict(max_model_len=131072, draft=EAGLE_LLAMA, version="0.9.1.dev705+g01220ce89")
    low, high = bracket(LLAMA_8B, "51.63", **kw)
    assert low.details.group_layers == [33]
    assert low.tokens <= 410_128 <= high.tokens and (high.tokens - low.tokens) / 410_128 < 0.005
    assert "3.13" in concurrencies(LLAMA_8B, "51.63", **kw)
    # Without the draft layer the same memory holds 422,944 tokens: the log rules that out.
    alone = capacity(LLAMA_8B, engine="vllm", kv_memory=gib_interval("51.63")[0], max_model_len=131072)
    assert alone.tokens > 420_000


def test_mistral_7b_gptq_dgx_spark():
    # DGX Spark learning path, code-index file id 9009555428 (V1 ~v0.11): "Available KV cache memory:
    # 102.56 GiB", "GPU KV cache size: 840,160 tokens", "25.64x" for 32,768, "num_gpu_blocks is: 52510".
    # Mistral-7B v0.2/v0.3 shape (no sliding window, which the 25.64x rules in): 32 x 8 x 128 x 2 x 2 B
    # = 131,072 B/token, block 2 MiB; 102.555..102.565 GiB -> 52,508..52,513 blocks; x 16 = 840,160.
    model = kvmem.get_model("mistral-7b-instruct-v0.3")
    low, high = bracket(model, "102.56", max_model_len=32768, version="0.11")
    assert low.blocks <= 52_510 <= high.blocks and low.tokens <= 840_160 <= high.tokens
    assert (high.tokens - low.tokens) / 840_160 < 0.001
    assert "25.64" in concurrencies(model, "102.56", max_model_len=32768, version="0.11")


def test_qwen25_7b_awq_format_gib():
    # Notes on a 16 GB WSL2 card, code-index file id 57428438798 (format_gib era, prints round(x, 2)):
    # "Available KV cache memory: 8.0 GiB", "GPU KV cache size: 149,712 tokens", "4.57x" for 32,768.
    # 28 layers x 4 KV heads x 128 x 2 x 2 B = 57,344 B/token, block 917,504 B; 7.995..8.005 GiB ->
    # 9356..9368 blocks; 9357 x 16 = 149,712 (= int(9357/2048 x 32,768)); 9357 / 2048 = 4.569.
    model = kvmem.get_model("qwen2.5-7b")
    low, high = bracket(model, "8.0", max_model_len=32768)
    assert low.tokens <= 149_712 <= high.tokens and (high.tokens - low.tokens) / 149_712 < 0.005
    assert "4.57" in concurrencies(model, "8.0", max_model_len=32768)


def test_qwen36_35b_fp8_kv_prefix_caching_v024():
    # https://github.com/noonghunna/club-3090/issues/612 (v0.24.0, RTX 5090, --kv-cache-dtype fp8,
    # --enable-prefix-caching, --max-num-batched-tokens 8192): "Available KV cache memory: 5.98 GiB",
    # "GPU KV cache size: 567,978 tokens", "Maximum concurrency for 131,072 tokens per request: 4.33x".
    # Not in the catalog: Qwen3.6-35B-A3B text_config as published at
    # https://huggingface.co/Qwen/Qwen3.6-35B-A3B/blob/main/config.json (the NVFP4 checkpoint keeps it).
    # fp8 attention 2 KV heads x (256 + 256) x 1 B = 1024 B/token; GatedDeltaNet state = conv (3, 8192)
    # bf16 49,152 B + ssm (32, 128, 128) fp32 2,097,152 B = 2,146,304 B -> block 16 x cdiv(2,146,304,
    # 16 x 1024) = 2096 tokens, page 2,146,304 B (no padding); 10 full + 30 GDN layers -> 4 groups of 10;
    # 5.975..5.985 GiB // (2,146,304 x 10) = 298..299 blocks; per request cdiv(131072, 2096) = 63 +
    # 3 GDN groups x 2 ("align") = 69; 299 / 69 = 4.333; int(4.3333 x 131,072) = 567,978.
    text = dict(model_type="qwen3_5_moe_text", hidden_size=2048, num_hidden_layers=40, num_attention_heads=16,
                num_key_value_heads=2, head_dim=256, full_attention_interval=4, linear_conv_kernel_dim=4,
                linear_key_head_dim=128, linear_num_key_heads=16, linear_value_head_dim=128,
                linear_num_value_heads=32, num_experts=256, num_experts_per_tok=8, moe_intermediate_size=512,
                shared_expert_intermediate_size=512, vocab_size=248320, max_position_embeddings=262144,
                mamba_ssm_dtype="float32", dtype="bfloat16", mtp_num_hidden_layers=1)
    model = config_model("qwen3.6-35b-a3b", model_type="qwen3_5_moe", tie_word_embeddings=False,
                         architectures=["Qwen3_5MoeForConditionalGeneration"], text_config=text)
    kw = dict(kv_dtype="fp8", max_model_len=131072, enable_prefix_caching=True, max_num_batched_tokens=8192,
              version="0.24.0")
    low, high = bracket(model, "5.98", **kw)
    assert low.block_size == 2096 and low.details.page_bytes == [2_146_304]
    assert low.details.group_layers == [10, 10, 10, 10] and low.details.blocks_per_request == 69
    assert (low.blocks, high.blocks) == (298, 299)
    assert low.tokens <= 567_978 <= high.tokens and (high.tokens - low.tokens) / 567_978 < 0.005
    assert high.details.log == ["GPU KV cache size: 567,978 tokens",
                                   "Maximum concurrency for 131,072 tokens per request: 4.33x"]
    assert "4.33" in concurrencies(model, "5.98", **kw)


def test_llama4_scout_chunked_local_tp8_v012():
    # Llama-4-Scout deployment note, vLLM v0.12.0 on 8x H200 with tp 8 and the hybrid manager on
    # (VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=1), code-index file id 14389956878: "Max model
    # len: 8,388,608", "GPU KV cache size: 3,919,664 tokens", "Available KV cache memory: 89.71 GiB",
    # "Max concurrency: 1.86x". 8 KV heads / tp 8 = 1 per rank: page 16 x 1 x 256 x 2 B = 8192 B for
    # full and chunked layers alike; 12 full + 36 chunked (chunk 8192) -> 4 groups of 12;
    # 89.705..89.715 GiB // 8192 // 12 = 979,816..979,924 blocks; tokens = blocks // 4 x 16 (v0.12) ->
    # 3,919,264..3,919,696; per request 524,288 (full) + 3 x cdiv(8192 + 8192, 16) = 527,360;
    # 979,916 / 527,360 = 1.858.
    model = kvmem.get_model("llama-4-scout-17b-16e")
    kw = dict(tp=8, max_model_len=8_388_608, max_num_batched_tokens=8192, version="0.12.0")
    low, high = bracket(model, "89.71", **kw)
    assert low.details.group_layers == [12, 12, 12, 12] and low.details.blocks_per_request == 527_360
    assert low.tokens <= 3_919_664 <= high.tokens and (high.tokens - low.tokens) / 3_919_664 < 0.001
    assert "1.86" in concurrencies(model, "89.71", **kw)
    # The same note's 5M (5,242,880) runs on that deployment: "2.96x" with the hybrid manager and "75%"
    # (0.75x) without it: 979,9xx / (327,680 + 3,072) and 244,979 / 327,680 (all 48 layers full).
    memory = gib_interval("89.71")[1]
    on = capacity(model, engine="vllm", kv_memory=memory, tp=8, max_model_len=5_242_880, version="0.12.0")
    off = capacity(model, engine="vllm", kv_memory=memory, tp=8, max_model_len=5_242_880, version="0.12.0",
                   hybrid_kv_cache_manager=False)
    assert (f"{on.max_concurrency:.2f}", f"{off.max_concurrency:.2f}") == ("2.96", "0.75")


def test_gpt_oss_120b_sliding_request_needs():
    # https://github.com/vllm-project/vllm/issues/27508 (H100, --max-num-batched-tokens 1024, default
    # max_model_len 131,072): "To serve at least one request with the models's max seq len (131072),
    # (4.54 GiB KV cache is needed, which is larger than the available KV cache memory (1.71 GiB)".
    # 18 full + 18 sliding (window 128) layers, page 16 x 8 x 64 x 2 x 2 B = 32,768 B; one request:
    # 18 x 32,768 x (8192 full + cdiv(127 + 1024, 16) + 1 = 73 sliding blocks) = 4.5401 GiB.
    model = kvmem.get_model("gpt-oss-120b")
    result = capacity(model, engine="vllm", kv_memory=gib_interval("1.71")[0], max_model_len=131072,
                      max_num_batched_tokens=1024, version="0.11")
    assert result.details.request_bytes == 18 * 32_768 * (8192 + 73)
    assert f"{result.details.request_bytes / GIB:.2f}" == "4.54"
    assert any("needs 4.54 GiB" in note and "1.71 GiB available" in note for note in result.notes)


# ------------------------------------------------------------------ V1 logs without a usable memory line

def test_qwen35_27b_hybrid_gdn_v019():
    # https://github.com/vllm-project/vllm/issues/40691 (0.19.0, H20, --max-num-batched-tokens 16384):
    # "GPU KV cache size: 290,864 tokens", "Maximum concurrency for 32,768 tokens per request: 33.04x".
    # No memory is printed. Attention 4 KV heads x (256 + 256) x 2 B = 4096 B/token; GDN state conv
    # (3, 10,240) bf16 61,440 B + ssm (48, 128, 128) fp32 3,145,728 B = 3,207,168 B -> block 16 x
    # cdiv(3,207,168, 65,536) = 784 tokens, page 3,211,264 B; 16 full + 48 GDN -> 4 groups of 16.
    # tokens = blocks // 4 x 784 and concurrency = blocks / (42 + 3 x 1): only 1487 blocks print both.
    model = kvmem.get_model("qwen3.5-27b")
    prints = {}
    for blocks in range(1480, 1496):
        result = capacity(model, engine="vllm", kv_memory=blocks * 16 * 3_211_264, max_model_len=32768,
                          max_num_batched_tokens=16384, version="0.19.0")
        assert result.blocks == blocks
        prints[blocks] = tuple(result.details.log)
    assert [b for b, log in prints.items() if log == (
        "GPU KV cache size: 290,864 tokens",
        "Maximum concurrency for 32,768 tokens per request: 33.04x")] == [1487]
    assert result.block_size == 784 and result.details.page_bytes == [3_211_264]
    assert result.details.group_layers == [16, 16, 16, 16]
    # The release that prints int(concurrency x L) gives 1,082,800 for the same 1487-block pool (the same layout:
    # --no-enable-prefix-caching, as 0.19 ran hybrids by default).
    newer = capacity(model, engine="vllm", kv_memory=1487 * 16 * 3_211_264, max_model_len=32768,
                     max_num_batched_tokens=16384, enable_prefix_caching=False)
    assert newer.tokens == int(1487 / 45 * 32768) == 1_082_800


def test_deepseek_v32_tp8_pp4_one_uniform_type_group():
    # https://github.com/vllm-project/vllm/issues/31903 (~v0.13, tp 8, pp 4): "GPU KV cache size:
    # 1,214,464 tokens", "Maximum concurrency for 163,840 tokens per request: 7.41x". No memory printed.
    # FLASHMLA_SPARSE forces 64-token blocks; MLA latent 64 x 576 x 2 B = 73,728 B and the indexer key
    # 64 x 132 B = 8,448 B are one UniformType group, so tokens = blocks x 64: 1,214,464 = 18,976 x 64
    # and 18,976 / cdiv(163,840, 64) = 7.4125. pp 4 over 61 layers = 15, 15, 16, 15: the 16-layer stage
    # sets the count, 16 x (73,728 + 8,448) = 1,314,816 B per block (kv "auto" as bf16; with fp8_ds_mla
    # pages the memory differs but the block count, and so both printed numbers, are the same).
    model = kvmem.get_model("deepseek-v3.2")
    per_block = 16 * (73_728 + 8_448)
    for memory in (18_976 * per_block, 18_977 * per_block - 1):
        result = capacity(model, engine="vllm", kv_memory=memory, tp=8, pp=4, max_model_len=163840,
                          version="0.13")
        assert result.block_size == 64 and result.details.uniform_type
        assert result.details.page_bytes == [8_448, 73_728]
        assert result.blocks == 18_976 and min(result.details.blocks_per_stage) == 18_976
        assert result.details.log == ["GPU KV cache size: 1,214,464 tokens",
                                         "Maximum concurrency for 163,840 tokens per request: 7.41x"]


def test_qwen3_235b_tp4_printed_memory_is_one_rank():
    # https://github.com/vllm-project/vllm/issues/21348 (4x H100, tp 4): "Available KV cache memory:
    # 8.11 GiB", "GPU KV cache size: 178,880 tokens". 4 KV heads / tp 4 = 1 per rank: page 16 x 1 x 256 x
    # 2 B = 8192 B, 94 layers -> 770,048 B per block. The printed memory is one rank's (info_once); the
    # count is the minimum over ranks, so 8.11 GiB gives more (11,301..11,315 blocks) than the printed
    # 178,880 = 11,180 blocks, which 8.018 GiB on the poorest rank gives exactly.
    model = kvmem.get_model("qwen3-235b-a22b")
    low, _ = bracket(model, "8.11", tp=4, max_model_len=32768)
    assert low.details.page_bytes == [8192] and low.tokens > 178_880
    poorest = capacity(model, engine="vllm", kv_memory=11_180 * 770_048, tp=4, max_model_len=32768)
    assert (poorest.blocks, poorest.tokens) == (11_180, 178_880)


def test_qwen3_235b_tp4_l40s_tokens_and_concurrency():
    # L40S hosting note, code-index file id 38962983769 (~v0.10, tp 4): "GPU KV cache size: 238,208
    # tokens", "Maximum concurrency for 32,768 tokens per request: 7.27x". The pair is consistent:
    # 238,208 / 16 = 14,888 blocks, 14,888 / 2048 = 7.27. The "10.65 GiB" printed beside it is 0.3% below
    # the 14,888 x 770,048 B those blocks take (unexplained in the source), so only the pair is checked.
    model = kvmem.get_model("qwen3-235b-a22b")
    result = capacity(model, engine="vllm", kv_memory=14_888 * 770_048, tp=4, max_model_len=32768,
                      version="0.10")
    assert result.details.log == ["GPU KV cache size: 238,208 tokens",
                                     "Maximum concurrency for 32,768 tokens per request: 7.27x"]


# ------------------------------------------------------------------ pages

def page(model, **kw):
    return capacity(model, engine="vllm", kv_memory=GIB, max_model_len=4096, **kw).details.page_bytes


def test_page_sizes_gqa_mqa_mha():
    # GQA Llama-3.1-8B: 16 x 8 x (128 + 128) x 2 B; MQA Falcon-7B: 16 x 1 x (64 + 64) x 2 B;
    # MHA Llama-2-7B: 16 x 32 x (128 + 128) x 2 B (the v0 block of PR #2031's logs: 32 layers -> 8 MiB).
    assert page(LLAMA_8B) == [65_536]
    assert page(kvmem.get_model("falcon-7b")) == [4_096]
    llama2 = kvmem.get_model("llama-2-7b")
    assert page(llama2) == [262_144]
    assert capacity(llama2, engine="vllm", kv_memory=GIB, max_model_len=4096,
                    version="v0").details.cache_block_bytes == 8 * 2**20


def test_page_with_different_k_and_v_head_dims():
    # FullAttentionSpec counts head_size + head_size_v: 16 x 2 x (192 + 128) x 2 B = 20,480.
    layer = Layer("full", kv_heads=2, head_dim_k=192, head_dim_v=128)
    model = Model(name="kv-split", layers=(layer,) * 4, hidden_size=2048, num_attention_heads=16)
    assert page(model) == [20_480]
    result = estimate(model, engine="vllm", tokens=16)
    assert (result.k_bytes, result.v_bytes) == (4 * 16 * 2 * 192 * 2, 4 * 16 * 2 * 128 * 2)


def test_sliding_page_uses_twice_head_size():
    # AttentionSpec (sliding, chunked): 2 x block x heads x head_size x dtype: gpt-oss 16 x 8 x 64 x 2 x 2.
    assert page(kvmem.get_model("gpt-oss-20b")) == [32_768]


def test_fp8_and_per_token_head_scales():
    # fp8: 1 byte per element -> half the bf16 page; per-token-head int8 adds 2 x 16 x 8 x 4 B of scales.
    assert page(LLAMA_8B, kv_dtype="fp8") == [32_768]
    assert page(LLAMA_8B, kv_dtype="fp8_e5m2") == [32_768]
    assert page(LLAMA_8B, kv_dtype="int8_per_token_head") == [32_768 + 1024]
    # nvfp4: head_size // 2 + head_size // 16 = 72 bytes per head for K and for V.
    assert page(LLAMA_8B, kv_dtype="nvfp4") == [16 * 8 * 144]
    assert estimate(LLAMA_8B, engine="vllm", tokens=16, kv_dtype="fp8").kv_dtype == "fp8"


def test_mla_latent_not_split_by_tp_and_backend_block_sizes():
    # One latent of 512 + 64 per token, 2 B, in 64-token FlashMLA blocks: 73,728 B at any tp.
    model = kvmem.get_model("deepseek-v3")
    assert page(model) == page(model, tp=8) == [73_728]
    assert capacity(model, engine="vllm", kv_memory=GIB, max_model_len=4096).block_size == 64
    assert capacity(model, engine="vllm", kv_memory=GIB, max_model_len=4096, block_size=16).block_size == 64
    assert capacity(model, engine="vllm", kv_memory=GIB, max_model_len=4096, block_size=128).block_size == 128
    assert page(model, attention_backend="CUTLASS_MLA") == [128 * 1152]
    assert page(model, attention_backend="FLASHINFER_MLA", block_size=32) == [32 * 1152]
    assert page(model, attention_backend="TRITON_MLA") == [16 * 1152]
    one, eight = (estimate(model, engine="vllm", tokens=64, tp=tp) for tp in (1, 8))
    assert one.kv_bytes == eight.kv_bytes == 61 * 73_728 and one.v_bytes == 0
    assert eight.kv_bytes_all_devices == 8 * one.kv_bytes


def test_deepseek_v32_indexer_and_fp8_ds_mla():
    # fp8 on V3.2 becomes fp8_ds_mla: 64 x 656 B; the indexer key stays 64 x 132 B (uint8).
    model = kvmem.get_model("deepseek-v3.2")
    assert page(model, kv_dtype="fp8") == [8_448, 41_984]
    assert estimate(model, engine="vllm", tokens=64, kv_dtype="fp8").kv_dtype == "fp8_ds_mla"
    with pytest.raises(ValueError, match="fp8_ds_mla' is DeepSeek-V3.2's sparse-MLA format"):
        estimate(kvmem.get_model("deepseek-v3"), engine="vllm", tokens=64, kv_dtype="fp8_ds_mla")


# ------------------------------------------------------------------ parallelism

def test_tp_replicates_kv_heads_beyond_their_count():
    # Llama-3.1-70B: 8 KV heads. tp 8 -> 1 head per rank; tp 16 -> still 1 (replicated), so one rank's
    # bytes stop falling and the total doubles.
    model = kvmem.get_model("llama-3.1-70b")
    results = {tp: estimate(model, engine="vllm", tokens=1024, tp=tp) for tp in (1, 8, 16)}
    assert results[8].kv_bytes == results[1].kv_bytes // 8 == 80 * 64 * 16 * 1 * 256 * 2
    assert results[16].kv_bytes == results[8].kv_bytes
    assert results[16].kv_bytes_all_devices == 2 * results[8].kv_bytes_all_devices
    assert page(model, tp=16) == [8_192]


def test_pp_reports_the_largest_stage():
    # 32 layers over 3 stages = 11, 11, 10 (vLLM get_pp_indices): capacity follows the 11-layer stage.
    result = capacity(LLAMA_8B, engine="vllm", kv_memory=11 * 65_536 * 1000, pp=3, max_model_len=4096)
    assert result.details.blocks_per_stage == [1000, 1000, 1100] and result.blocks == 1000
    est = estimate(LLAMA_8B, engine="vllm", tokens=16, pp=3)
    assert est.kv_bytes == 11 * 65_536 and est.per_layer[22:] == (0,) * 10


def test_pp_projects_hybrid_groups_onto_each_stage():
    # Gemma-3-27B (10 full + 52 sliding, groups of 10): with pp 2 each stage holds 5 layers of a group.
    model = kvmem.get_model("gemma-3-27b")
    one = capacity(model, engine="vllm", kv_memory=GIB, max_model_len=4096)
    two = capacity(model, engine="vllm", kv_memory=GIB, pp=2, max_model_len=4096)
    assert one.blocks == GIB // 131_072 // 10 and two.blocks == GIB // 131_072 // 5


# ------------------------------------------------------------------ groups

def test_sliding_hybrid_groups_and_padding():
    # Gemma-3-27B: 52 sliding + 10 full layers. Group size min(10, 52) = 10: 1 full group + cdiv(52, 10) = 6
    # sliding groups, the last padded by 8 layers. Page 16 x 16 x 256 x 2 B = 131,072 for both types.
    model = kvmem.get_model("gemma-3-27b")
    result = capacity(model, engine="vllm", kv_memory=10 * 131_072 * 1000, max_model_len=32768,
                      max_num_batched_tokens=8192)
    # Layer 0 is sliding, so its bucket comes first; stride split: members[i::6] -> 9, 9, 9, 9, 8, 8.
    assert result.details.group_layers == [9, 9, 9, 9, 8, 8, 10]
    assert result.details.padding_layers == 8 and result.blocks == 1000
    # Per request (v0.26+, async scheduling: 2 x 8192 in-flight tokens): 2048 full blocks
    # + 6 x (cdiv(1023 + 16384, 16) + 1 = 1089) sliding blocks.
    assert result.details.blocks_per_request == 2048 + 6 * 1089
    assert any("8 padding layer(s)" in note for note in result.notes)


def test_float32_checkpoint_caches_in_bfloat16():
    # vllm/config/model.py _resolve_auto_dtype downcasts a float32 config to bfloat16 (CUDA's first
    # supported dtype): gpt-neox-20b (torch_dtype float32), 44 layers x 16 x 64 heads x (96 + 96) x 2 B.
    model = kvmem.get_model("gpt-neox-20b")
    assert model.dtype == "fp32"
    result = capacity(model, engine="vllm", kv_memory=3 * GIB, max_model_len=2048)
    assert result.details.page_bytes == [16 * 64 * 192 * 2] and result.blocks == 3 * GIB // (393_216 * 44)


def test_in_flight_tokens_double_with_async_scheduling_from_v026():
    # VllmConfig.max_in_flight_tokens = max_concurrent_batches x max_num_batched_tokens (vllm/config/vllm.py,
    # PR #47728): 2 batches with async scheduling at pp 1, pp + 1 with pp, 1 x pp without async; v0.25
    # and before reserve one batch. gpt-oss-20b sliding window 128, block 16, T = 8192:
    model = kvmem.get_model("gpt-oss-20b")
    def sliding(**kw):   # the sliding group's share of one request's blocks (the full group: 8192)
        return capacity(model, engine="vllm", kv_memory=GIB, max_model_len=131072, **kw).details.blocks_per_request - 8192
    assert sliding() == 1033                              # cdiv(127 + 16384, 16) + 1
    assert sliding(async_scheduling=False) == 521         # cdiv(127 + 8192, 16) + 1
    assert sliding(version="0.25.1") == 521
    assert sliding(pp=2) == 1545                          # cdiv(127 + 3 x 8192, 16) + 1
    assert sliding(pp=2, async_scheduling=False) == 1033  # 2 x 8192: one batch per stage


def test_eagle_on_gpt_oss_uses_the_larger_group_from_v012():
    # PR #29303: gpt-oss + EAGLE has 12 sliding + 13 full layers. From v0.12 the group size is 13
    # (13 < 1.5 x 12): two groups, 1 padding layer. Before, min = 12: (12 full), (1 full + 11 padding),
    # (12 sliding).
    model = kvmem.get_model("gpt-oss-20b")
    draft = Model(name="eagle", layers=(Layer("full", kv_heads=8, head_dim_k=64, head_dim_v=64),),
                  hidden_size=2880, num_attention_heads=64)
    new = capacity(model, engine="vllm", kv_memory=GIB, max_model_len=4096, draft=draft, version="0.12.0")
    old = capacity(model, engine="vllm", kv_memory=GIB, max_model_len=4096, draft=draft, version="0.11.0")
    assert sorted(new.details.group_layers) == [12, 13] and new.details.padding_layers == 1
    assert sorted(old.details.group_layers) == [1, 12, 12] and old.details.padding_layers == 11
    assert new.blocks == GIB // 32_768 // 13 and old.blocks == GIB // 32_768 // 12


def test_hybrid_manager_off_treats_sliding_as_full():
    model = kvmem.get_model("gpt-oss-20b")
    on = capacity(model, engine="vllm", kv_memory=GIB, max_model_len=131072)
    off = capacity(model, engine="vllm", kv_memory=GIB, max_model_len=131072, hybrid_kv_cache_manager=False)
    # on: 2 groups of 12, per request 8192 + (cdiv(127 + 2 x 8192, 16) + 1 = 1033); off: 1 group of 24, 8192.
    assert (on.blocks, on.details.blocks_per_request) == (GIB // 32_768 // 12, 8192 + 1033)
    assert (off.blocks, off.details.blocks_per_request) == (GIB // 32_768 // 24, 8192)
    assert any("cached as full attention" in note for note in off.notes)
    with pytest.raises(ValueError, match="Hybrid KV cache manager is disabled but failed to convert"):
        estimate(kvmem.get_model("qwen3.5-27b"), engine="vllm", tokens=10, hybrid_kv_cache_manager=False)


def test_linear_hybrid_fixed_state_and_block_alignment():
    # Qwen3-Next-80B: 12 full (2 KV heads x 256) + 36 GDN layers, ssm state bf16 ("auto", no hook):
    # conv (3, 8192) x 2 B + (32, 128, 128) x 2 B = 49,152 + 1,048,576 = 1,097,728 B; attention
    # 2 x 512 x 2 = 2048 B/token -> without prefix caching (mamba_cache_mode "none") block 16 x
    # cdiv(1,097,728, 32,768) = 544, page 1,114,112 B.
    model = kvmem.get_model("qwen3-next-80b-a3b")
    result = estimate(model, engine="vllm", tokens=1000, batch=3, enable_prefix_caching=False)
    assert result.details.block_size == 544 and result.details.page_bytes == [1_114_112]
    # Each of 3 sequences: cdiv(1000, 544) = 2 pages per full layer, 1 state page per GDN layer.
    assert result.kv_bytes == 3 * 12 * 2 * 1_114_112
    assert result.state_bytes == 3 * 36 * 1_114_112
    assert any("padded from 1,097,728 B to 1,114,112 B" in note for note in result.notes)
    # tp 2 halves both the heads and the state.
    assert estimate(model, engine="vllm", tokens=1000, tp=2,
                    enable_prefix_caching=False).details.page_bytes == [557_056]
    # vLLM 0.33.0's default for a hybrid: prefix caching on, mode "align", the FlashInfer GDN prefill (Hopper)
    # checkpointing every 64 tokens: block 64 x cdiv(1,097,728, 64 x 2048) = 576, page 576 x 2048 = 1,179,648 B;
    # per sequence cdiv(1000, 576) = 2 pages per full layer, 2 + 1 checkpoint state pages per GDN layer
    # (judged by vLLM's own planning in tests/oracles/test_hybrid_verdicts_oracle.py)
    served = estimate(model, engine="vllm", tokens=1000, batch=3)
    assert served.details.block_size == 576 and served.details.page_bytes == [1_179_648]
    assert served.kv_bytes == 3 * 12 * 2 * 1_179_648 and served.state_bytes == 3 * 36 * 3 * 1_179_648


def test_mamba2_and_mamba1_states():
    # Nemotron-H-8B (mamba2, ssm float32 by vLLM's hook): conv (3, 8192 + 2 x 8 x 128 = 10,240) bf16
    # 61,440 B + ssm (128, 64, 128) fp32 4,194,304 B = 4,255,744 B; attention 8 x 256 x 2 = 4096 B/token
    # -> block 16 x cdiv(4,255,744, 65,536) = 1040.
    nemotron = estimate(kvmem.get_model("nemotron-h-8b"), engine="vllm", tokens=100)
    assert nemotron.details.block_size == 1040 and nemotron.details.page_bytes == [1040 * 4096]
    # Jamba-1.5-Mini (mamba1, ssm in the conv dtype): conv (8192, 3) + ssm (8192, 16) in bf16 =
    # 311,296 B; attention 4096 B/token -> block 16 x cdiv(311,296, 65,536) = 80.
    jamba = estimate(kvmem.get_model("jamba-1.5-mini"), engine="vllm", tokens=100)
    assert jamba.details.block_size == 80
    # The state dtype can be set: fp32 conv and ssm double Jamba's state to 622,592 B -> block 160.
    wide = estimate(kvmem.get_model("jamba-1.5-mini"), engine="vllm", tokens=100,
                    mamba_cache_dtype="float32", mamba_ssm_cache_dtype="float32")
    assert wide.details.block_size == 160


def test_mamba_modes_and_speculative_blocks():
    # Per request, each GDN group adds 1 block ("none", --no-enable-prefix-caching), 2 ("align", with prefix
    # caching) + 1 prefill checkpoint block (the FlashInfer GDN prefill, from 0.33), plus num_speculative_tokens
    # blocks; the conv state gains num_spec columns. vLLM 0.33.0's default for this hybrid is "align"
    # (prefix caching on: vllm/engine/arg_utils.py#L3075-L3080), its block 64 x cdiv(3,207,168, 64 x 4096) = 832.
    model = kvmem.get_model("qwen3.5-27b")
    blocks = {kw: capacity(model, engine="vllm", kv_memory=GIB * 20, max_model_len=32768, **dict(kw))
              for kw in ((), (("enable_prefix_caching", True),), (("enable_prefix_caching", False),))}
    off, on = blocks[(("enable_prefix_caching", False),)], blocks[(("enable_prefix_caching", True),)]
    assert (off.block_size, off.details.blocks_per_request) == (784, 42 + 3)
    assert (on.block_size, on.details.blocks_per_request) == (832, cdiv_(32768, 832) + 3 * 3) == (832, 49)
    assert blocks[()].details == on.details
    # before 0.33 kvmem's "align" has no checkpoint grid (0.24's Qwen3.6 log above reproduces without): 784, 2 blocks
    old = capacity(model, engine="vllm", kv_memory=GIB * 20, max_model_len=32768, version="0.28",
                   enable_prefix_caching=True)
    assert (old.block_size, old.details.blocks_per_request) == (784, 42 + 6)
    spec = capacity(model, engine="vllm", kv_memory=GIB * 20, max_model_len=32768, num_speculative_tokens=2,
                    enable_prefix_caching=False)
    # conv (5, 10,240) bf16 = 102,400 B + 3,145,728 -> block 16 x cdiv(3,248,128, 65,536) = 800.
    assert spec.block_size == 800 and spec.details.blocks_per_request == cdiv_(32768, 800) + 3 * 3
    # the default: block 64 x cdiv(3,248,128, 262,144) = 832, 2 + 1 + 2 state blocks per GDN group
    spec = capacity(model, engine="vllm", kv_memory=GIB * 20, max_model_len=32768, num_speculative_tokens=2)
    assert spec.block_size == 832 and spec.details.blocks_per_request == cdiv_(32768, 832) + 3 * 5


def cdiv_(a, b):
    return -(-a // b)


# ------------------------------------------------------------------ estimate(tokens, batch)

def test_estimate_rounds_to_whole_blocks_per_sequence():
    # 100 tokens -> 7 blocks of 16 per sequence and layer: 2 x 7 x 32 x 65,536 B.
    result = estimate(LLAMA_8B, engine="vllm", tokens=100, batch=2)
    assert result.kv_bytes == 2 * 7 * 32 * 65_536 and result.details.blocks == 14
    assert result.k_bytes == result.v_bytes
    assert any("100 tokens take 112 slots" in note for note in result.notes)


def test_estimate_sliding_layers_hold_their_window():
    # gpt-oss-20b, 1000 tokens: full layers cdiv(1000, 16) = 63 blocks; sliding layers free the blocks
    # before token 1000 - 128 = 872: 63 - 872 // 16 = 9 blocks (window 128 = 8 blocks, + 1 partly used).
    result = estimate(kvmem.get_model("gpt-oss-20b"), engine="vllm", tokens=1000)
    assert sorted(g["blocks_per_sequence"] for g in result.details.groups) == [9, 63]
    assert result.kv_bytes == 12 * 63 * 32_768 + 12 * 9 * 32_768


def test_estimate_chunked_layers_hold_the_current_chunk():
    # Llama-4-Scout, 10,000 tokens, chunk 8192: full 625 blocks; chunked 625 - 8192 // 16 = 113.
    result = estimate(kvmem.get_model("llama-4-scout-17b-16e"), engine="vllm", tokens=10_000)
    assert sorted({g["blocks_per_sequence"] for g in result.details.groups}) == [113, 625]
    assert result.kv_bytes == (12 * 625 + 36 * 113) * 65_536


def test_estimate_padding_slots_count_in_kv_bytes_not_per_layer():
    # Gemma-3-27B groups of 10 with 8 padding layers in the last sliding group: their slots come out of
    # the pool with every block (kv_bytes = pool_bytes) but belong to no layer.
    result = estimate(kvmem.get_model("gemma-3-27b"), engine="vllm", tokens=2000)
    sliding = cdiv_(2000, 16) - (2000 - 1024) // 16
    assert result.details.padding_bytes == 8 * sliding * 131_072
    assert result.kv_bytes == result.details.pool_bytes == sum(result.per_layer) + result.details.padding_bytes


def test_estimate_with_draft_and_lookahead():
    # Llama-3.1-8B + EAGLE, 3 speculative tokens: 33 layers, 100 + 3 slots -> 7 blocks each.
    result = estimate(LLAMA_8B, engine="vllm", tokens=100, draft=EAGLE_LLAMA, num_speculative_tokens=3)
    assert len(result.per_layer) == 33 and result.kv_bytes == 33 * 7 * 65_536
    mtp = estimate(kvmem.get_model("deepseek-v3"), engine="vllm", tokens=64, draft="mtp")
    assert len(mtp.per_layer) == 62 and mtp.kv_bytes == 62 * 73_728


def test_estimate_v0_engine():
    result = estimate(LLAMA_8B, engine="vllm", tokens=100, version="v0")
    assert result.kv_bytes == 7 * 32 * 65_536 and result.details.cache_block_bytes == 2 * 2**20


@settings(max_examples=50, deadline=None)
@given(tokens=st.integers(1, 200_000), batch=st.integers(1, 64))
def test_full_attention_estimate_is_ideal_plus_less_than_a_block(tokens, batch):
    ideal = estimate(LLAMA_8B, tokens=tokens, batch=batch).kv_bytes
    paged = estimate(LLAMA_8B, engine="vllm", tokens=tokens, batch=batch).kv_bytes
    assert ideal <= paged < ideal + batch * 32 * 65_536


@settings(max_examples=40, deadline=None)
@given(memory=st.integers(GIB // 4, 64 * GIB), extra=st.integers(1, GIB))
def test_capacity_never_shrinks_with_memory(memory, extra):
    model = kvmem.get_model("gemma-3-27b")
    small = capacity(model, engine="vllm", kv_memory=memory, max_model_len=32768)
    large = capacity(model, engine="vllm", kv_memory=memory + extra, max_model_len=32768)
    assert small.blocks <= large.blocks and small.longest_request_tokens <= large.longest_request_tokens


def test_longest_request_is_vllms_binary_search():
    # 1000 blocks of 32 layers: the worst case of one request is cdiv(L, 16) blocks. From v0.28 the
    # null block is held back first (PR #47272), so 999 usable blocks: L = 15,984; before, 16,000.
    result = capacity(LLAMA_8B, engine="vllm", kv_memory=1000 * 32 * 65_536, max_model_len=131072)
    assert result.longest_request_tokens == 15_984 and result.blocks == 1000
    assert any("the longest that fits is 15,984" in note for note in result.notes)
    assert any("(the null block left out)" in note for note in result.notes)
    old = capacity(LLAMA_8B, engine="vllm", kv_memory=1000 * 32 * 65_536, max_model_len=131072,
                   version="0.27.0")
    assert old.longest_request_tokens == 16_000
    assert any("the longest that fits is 16,000" in note for note in old.notes)


def test_null_block_held_back_before_auto_fit_and_refusal():
    # vLLM 0.33.0 get_kv_cache_configs: check_memory = available - bytes_per_block (one block of every
    # layer). qwen3-8b, 3 GiB: 36 layers x 16 x 8 x (128 + 128) x 2 B = 2,359,296 B a block; 1365 blocks, 1364
    # usable x 16 = 21,824 tokens (vLLM's auto-fit); 21,840 without the null block.
    qwen = kvmem.get_model("qwen3-8b")
    assert capacity(qwen, engine="vllm", kv_memory=3 * GIB, max_model_len=40960).longest_request_tokens == 21_824
    assert capacity(qwen, engine="vllm", kv_memory=3 * GIB, max_model_len=40960,
                    version="0.27").longest_request_tokens == 21_840
    # An exact fit of max_model_len is refused: 2048 blocks hold 32,768 tokens, one is the null block.
    exact = capacity(LLAMA_8B, engine="vllm", kv_memory=2048 * 32 * 65_536, max_model_len=32768)
    assert exact.longest_request_tokens == 32_752
    assert any(note.startswith("vLLM refuses to start: one request of 32,768 tokens") for note in exact.notes)


# ------------------------------------------------------------------ bad input

@pytest.mark.parametrize("bad, message", [
    (dict(tp=3), r"Total number of attention heads \(32\) must be divisible by tensor parallel size \(3\)\."),
    (dict(block_size=0), "block_size must be a positive integer, got 0"),
    (dict(block_size="16"), "block_size must be a positive integer, got '16'"),
    (dict(block_size=2.5), "block_size must be a positive integer, got 2.5"),
    (dict(block_size=True), "block_size must be a positive integer, got True"),
    (dict(max_num_batched_tokens=-1), "max_num_batched_tokens must be a positive integer"),
    (dict(page_size=16), "engine 'vllm' has no option 'page_size'; its options: async_scheduling, attention_backend"),
    (dict(kv_dtype="q4_0"), "kv_dtype 'q4_0' is not a vLLM --kv-cache-dtype; valid: auto, float16"),
    (dict(version="latest-ish"), "version must be 'latest', 'v0'"),
    (dict(attention_backend="FLASHMLA"), "is an MLA backend; llama-3.1-8b has no MLA layers"),
    (dict(attention_backend="NOPE"), "attention_backend must be one of FLASHMLA"),
    (dict(mamba_cache_mode="some"), "mamba_cache_mode must be 'none', 'align' or 'all'"),
    (dict(mamba_ssm_cache_dtype="int8"), "mamba_ssm_cache_dtype must be 'auto', 'float32'"),
    (dict(hybrid_kv_cache_manager="no"), "hybrid_kv_cache_manager must be True or False"),
    (dict(num_speculative_tokens=-1), "num_speculative_tokens must be a non-negative integer"),
    (dict(draft="eagle"), "unknown model 'eagle'"),
    (dict(draft=3), "draft must be a kvmem Model, a preset name or 'mtp'"),
    (dict(draft="mtp"), "draft='mtp' needs MTP layers, but llama-3.1-8b has none"),
    (dict(draft=EAGLE_LLAMA, pp=2), "draft with pp > 1"),
    (dict(pp=33), "pp=33 exceeds the model's 32 layers"),
])
def test_bad_input(bad, message):
    with pytest.raises(ValueError, match=message):
        estimate(LLAMA_8B, engine="vllm", tokens=100, **bad)


def test_bad_capacity_input():
    with pytest.raises(ValueError, match="bytes must be a positive integer"):
        capacity(LLAMA_8B, engine="vllm", kv_memory=0)
    no_length = Model(name="no-positions", layers=LLAMA_8B.layers, hidden_size=4096, num_attention_heads=32)
    with pytest.raises(ValueError, match="max_model_len is needed"):
        capacity(no_length, engine="vllm", kv_memory=GIB)
    with pytest.raises(ValueError, match="fp8_ds_mla' is DeepSeek-V3.2's sparse-MLA format"):
        capacity(LLAMA_8B, engine="vllm", kv_memory=GIB, kv_dtype="fp8_ds_mla")
    with pytest.raises(ValueError, match="kv_dtype nvfp4 is modelled for full-attention layers only"):
        capacity(kvmem.get_model("gpt-oss-20b"), engine="vllm", kv_memory=GIB, kv_dtype="nvfp4")


def test_default_max_model_len_and_version_strings():
    result = capacity(LLAMA_8B, engine="vllm", kv_memory=64 * GIB)
    expected = f"Maximum concurrency for 131,072 tokens per request: {result.max_concurrency:.2f}x"
    assert result.details.log[-1].endswith(expected)
    assert any("max_position_embeddings" in note for note in result.notes)
    for version in ("0.19.0", "v0.19.0", "0.19.1rc1.dev301+g60995c05b", "latest"):
        result = capacity(LLAMA_8B, engine="vllm", kv_memory=GIB, max_model_len=4096, version=version)
        assert result.blocks == 512


def test_unequal_pages_get_larger_blocks():
    # 4 full layers of 8 KV heads (page 16 x 8 x 256 x 2 = 65,536 B) beside 8 sliding layers of 4 heads
    # (32,768 B): unify_kv_cache_spec_page_size gives the sliding layers 32-token blocks, then groups of 4.
    full = Layer("full", kv_heads=8, head_dim_k=128, head_dim_v=128)
    sliding = Layer("sliding", kv_heads=4, head_dim_k=128, head_dim_v=128, window=512)
    model = Model(name="mixed", layers=(sliding, sliding, full) * 4, hidden_size=4096, num_attention_heads=32,
                  max_position_embeddings=32768)
    result = capacity(model, engine="vllm", kv_memory=GIB, max_model_len=32768, version="0.19")
    assert result.details.page_bytes == [65_536] and result.details.group_layers == [4, 4, 4]
    assert result.block_size == 16 and result.blocks == GIB // 65_536 // 4
    # One request: cdiv(32768, 16) full + 2 x (cdiv(511 + 8192, 32) + 1 = 273) sliding blocks.
    assert result.details.blocks_per_request == 2048 + 2 * 273
    # Old token formula: blocks // 3 groups x the smallest block size (16).
    assert result.tokens == result.blocks // 3 * 16
    odd = Layer("sliding", kv_heads=3, head_dim_k=128, head_dim_v=128, window=512)
    bad = model.with_layers((odd, full) * 4, num_attention_heads=24)
    with pytest.raises(ValueError, match="The page size of the layer is not divisible by the maximum page size"):
        capacity(bad, engine="vllm", kv_memory=GIB, max_model_len=4096, version="0.19")
    # 0.33 (kv_cache_planning.py unify_kv_cache_spec_page_size) pads the 16 x 3 x 256 x 2 = 24,576 B
    # sliding page to the 65,536 B full page instead, its block size kept
    padded = capacity(bad, engine="vllm", kv_memory=GIB, max_model_len=4096)
    assert padded.details.page_bytes == [65_536] and padded.block_size == 16
    assert any("padded to 65,536 B" in note for note in padded.notes)


def test_uniform_type_draft_with_its_own_page():
    # A full-attention draft with 4 KV heads (32,768 B pages) beside 32 target layers (65,536 B): one
    # UniformType group, num_blocks = memory // (32 x 65,536 + 32,768).
    draft = Model(name="small-draft", layers=(Layer("full", kv_heads=4, head_dim_k=128, head_dim_v=128),),
                  hidden_size=4096, num_attention_heads=32)
    result = capacity(LLAMA_8B, engine="vllm", kv_memory=GIB, max_model_len=8192, draft=draft)
    assert result.details.uniform_type and result.details.group_layers == [33]
    assert result.blocks == GIB // (32 * 65_536 + 32_768) and result.details.blocks_per_request == 512


def test_capacity_of_a_huge_budget_is_blocks_times_block_size():
    # issue 13: 10**30 bytes gave int(concurrency * max_model_len) rounded in floats
    cap = capacity("llama-3.1-8b", kv_memory=10**30)
    assert cap.tokens == cap.blocks * cap.block_size  # 131,072-token requests: 8,192 whole blocks each


def test_tokens_past_max_position_embeddings_say_what_vllm_does():
    # issue 14: 10M tokens on llama-3.1-8b (131,072 positions) printed 1.25 TiB silently
    est = estimate("llama-3.1-8b", engine="vllm", tokens="10M")
    assert est.engine_refuses.startswith("10,485,760 tokens exceed the model's 131,072 positions")
    assert "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1" in est.notes[-1]
    assert est.refusal.allow_with == est.engine_allows_with == "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1"
    assert estimate("llama-3.1-8b", engine="vllm", tokens=131072).engine_refuses is None
    cap = capacity("llama-3.1-8b", kv_memory="20GiB", max_model_len="1M")
    assert "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1" in cap.engine_refuses
    llama = estimate("llama-3.1-8b", engine="llama.cpp", tokens="10M")
    assert llama.engine_refuses is None and "possible training context overflow" in llama.notes[-1]


def test_capacity_that_vllm_refuses_to_start_says_so():
    cap = capacity("llama-3.1-8b", kv_memory="1GiB")  # 131,072 tokens need 16 GiB
    assert cap.engine_refuses.startswith("vLLM refuses to start: one request of 131,072 tokens needs 16.00 GiB")


def test_a_fit_builds_each_vllm_layout_once(monkeypatch):
    # issue 23 item 23: a vLLM 70B fit rebuilt the layout ~33 times (once per estimate); now once per
    # model, KV format and parallelism (tp 2 here, and the tp 4 / pp 2 set-ups "min GPUs" tries)
    import kvmem.engines.vllm.entry as entry

    built = []
    real = entry._make_plan
    monkeypatch.setattr(entry, "_make_plan", lambda *a: built.append(a[1:4]) or real(*a))
    entry._shared_plan.cache_clear()
    first = kvmem.fit("llama-3.3-70b", gpu="h100-sxm-80gb", num_gpus=2, context="32k", batch=16, kv_dtype="fp8",
                      weight_dtype="fp8")
    # each (KV format, tp, pp) once: the workload's, min GPUs' tp 1 and 4, and "what would fit"'s bf16 KV
    assert len(built) == len(set(built)) <= 6 and ("fp8", 2, 1) in built
    again = kvmem.fit("llama-3.3-70b", gpu="h100-sxm-80gb", num_gpus=2, context="32k", batch=16, kv_dtype="fp8",
                      weight_dtype="fp8")
    assert again == first and (first.fits, first.max_batch) == (False, 14)  # the README's figures


def test_a_shared_layout_gives_the_numbers_a_fresh_one_gives(monkeypatch):
    import kvmem.engines.vllm.entry as entry

    cases = [("gemma-3-27b", 40_000, 3), ("qwen3-next-80b-a3b", 9_000, 2), ("deepseek-v3", 5_000, 1)]
    cached = [kvmem.estimate(m, engine="vllm", tokens=t, batch=b, tp=tp) for m, t, b in cases for tp in (1, 2)]
    cached_again = [kvmem.estimate(m, engine="vllm", tokens=t, batch=b, tp=tp) for m, t, b in cases for tp in (1, 2)]
    monkeypatch.setattr(entry, "make_plan", lambda model, kv_dtype, tp, pp, opts: entry._make_plan(model, kv_dtype,
                                                                                                    tp, pp, opts))
    fresh = [kvmem.estimate(m, engine="vllm", tokens=t, batch=b, tp=tp) for m, t, b in cases for tp in (1, 2)]
    assert [e.to_dict() for e in cached] == [e.to_dict() for e in cached_again] == [e.to_dict() for e in fresh]


def test_one_log_line_from_pr_50462():
    # vllm@v0.33.0 vllm/v1/core/kv_cache_utils.py update_kv_cache_capacity: one logger.info_once with both
    # figures (PR #50462, merged 2026-07-30); 0.19 printed two lines (vllm#40691)
    result = capacity(LLAMA_8B, engine="vllm", kv_memory=GIB, max_model_len=4096)
    assert result.log_lines == ("GPU KV cache size: 8,192 tokens, Maximum concurrency for 4,096 tokens per request: "
                                "2.00x",)
    old = capacity(LLAMA_8B, engine="vllm", kv_memory=GIB, max_model_len=4096, version="0.26")
    assert old.log_lines == ("GPU KV cache size: 8,192 tokens", "Maximum concurrency for 4,096 tokens per request: 2.00x")


def test_options_resolve_once_into_a_frozen_record():
    """check_options gives a frozen record (issue 24 item 1): nothing downstream changes the options,
    and the budget reads the release it parsed instead of parsing version again."""
    import dataclasses
    import inspect

    from kvmem.engines.vllm import budget
    from kvmem.engines.vllm.options import check_options
    opts = check_options({"version": "0.19.0", "draft": "mtp", "enable_prefix_caching": True})
    assert (opts.release, opts.mamba_cache_mode, opts.block_size) == ((0, 19), "align", None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.block_size = 32
    assert "version" not in inspect.getsource(budget._budget) + inspect.getsource(budget._defaults_of)


def test_prefix_caching_default_follows_vllm_and_the_command_says_a_choice():
    # vLLM 0.33.0 with neither flag: prefix caching on for a decoder and a Mamba hybrid, off for an attention-free
    # model (vllm/engine/arg_utils.py#L3075-L3080, config/model.py#L2239-L2291); a hybrid then runs "align"
    from kvmem.engines.vllm.options import check_options
    hybrid, dense = kvmem.get_model("nemotron-h-8b"), kvmem.get_model("llama-3.1-8b")
    mamba = kvmem.Model.from_hf_config({"model_type": "mamba", "architectures": ["MambaForCausalLM"],
                                        "hidden_size": 768, "num_hidden_layers": 2, "expand": 2, "state_size": 16,
                                        "conv_kernel": 4, "vocab_size": 512})
    resolved = {m.name: check_options({}, m) for m in (hybrid, dense, mamba)}
    assert [(o.enable_prefix_caching, o.mamba_cache_mode) for o in resolved.values()] == [
        (True, "align"), (True, "align"), (False, "none")]
    # before PR #50991 (0.28) a hybrid's was opt-in: "none", as the 0.19 Qwen3.5 log ran
    old = check_options({"version": "0.19.0"}, hybrid)
    assert (old.enable_prefix_caching, old.mamba_cache_mode) == (False, "none")
    # vLLM 0.33.0 turns any mode into "none" without prefix caching, and "none" into "align" with it
    # (model_executor/models/config.py#L762-L785)
    assert check_options({"enable_prefix_caching": False, "mamba_cache_mode": "align"}, hybrid).mamba_cache_mode == "none"
    assert check_options({"mamba_cache_mode": "none"}, hybrid).mamba_cache_mode == "align"
    # the command: nothing written for vLLM's own default, the flag either way when the option is given
    argv = kvmem.plan("nemotron-h-8b", gpu="h100-sxm-80gb", context="32k", batch=4).argv
    assert not any("prefix-caching" in a for a in argv)
    off = kvmem.plan("nemotron-h-8b", gpu="h100-sxm-80gb", context="32k", batch=4, enable_prefix_caching=False)
    assert "--no-enable-prefix-caching" in off.argv and "--enable-prefix-caching" not in off.argv
    # and the fit it sizes is the "none" layout: Nemotron-H-8B's block 1040 either way, 1 state block a group
    assert off.fit.capacity.details.blocks_per_request == cdiv_(32768, 1040) + 6


def test_gdn_prefill_backend_triton_has_no_checkpoint_grid():
    # vLLM picks the Triton GDN prefill on Ampere/Ada (qwen_gdn_linear_attn.py _resolve_gdn_prefill_backend), or
    # --gdn-prefill-backend triton: no checkpoint alignment, so "align" keeps the "none" block (544 for Qwen3-Next)
    # and 2 state blocks per GDN group: cdiv(32,768, 544) = 61 + 3 groups x 2 per 32k request
    model = kvmem.get_model("qwen3-next-80b-a3b")
    triton = capacity(model, engine="vllm", kv_memory=20 * GIB, max_model_len=32768, gdn_prefill_backend="triton")
    hopper = capacity(model, engine="vllm", kv_memory=20 * GIB, max_model_len=32768)
    assert (triton.block_size, triton.details.blocks_per_request) == (544, cdiv_(32768, 544) + 3 * 2)
    assert (hopper.block_size, hopper.details.blocks_per_request) == (576, cdiv_(32768, 576) + 3 * 3)
    argv = kvmem.plan("qwen3-next-80b-a3b", gpu="a100-sxm-80gb", num_gpus=4, context="32k", batch=4,
                      gdn_prefill_backend="triton").argv
    assert argv[argv.index("--gdn-prefill-backend") + 1] == "triton"
    with pytest.raises(ValueError, match="gdn_prefill_backend must be one of flashinfer, triton"):
        capacity(model, engine="vllm", kv_memory=GIB, max_model_len=4096, gdn_prefill_backend="fla")

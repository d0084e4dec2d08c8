"""SGLang mode: real "KV Cache is allocated" lines reproduced, and the pool rules one by one.

GB in SGLang's logs is 2**30 bytes (memory_pool.py). A printed "X.XX GB" is reproduced
by rounding kvmem's exact bytes the same way; a printed token count that SGLang derived
from printed memory is checked by bracketing the memory by half its last printed digit.
"""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kvmem
from kvmem import Layer, Model
from kvmem.engines import sglang

GiB = 2**30


def gib2(nbytes: int) -> float:
    return round(nbytes / GiB, 2)


def tokens_for(model, rest_gib: float, **kw) -> int:
    """max_total_num_tokens for a budget of ``rest_gib`` GiB (SGLang's int(rest * 2**30) // cell)."""
    return kvmem.capacity(model, engine="sglang", kv_memory=int(rest_gib * GiB), **kw).tokens


# QwQ-32B, https://huggingface.co/Qwen/QwQ-32B/blob/main/config.json (Qwen2 architecture):
# 64 layers, 40 query heads, 8 KV heads, hidden 5120 (head_dim 128), bfloat16.
QWQ_32B = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 5120,
           "intermediate_size": 27648, "num_hidden_layers": 64, "num_attention_heads": 40,
           "num_key_value_heads": 8, "max_position_embeddings": 40960, "max_window_layers": 64,
           "sliding_window": 32768, "use_sliding_window": False, "rope_theta": 1000000.0,
           "vocab_size": 152064, "torch_dtype": "bfloat16", "tie_word_embeddings": False}


# ---- real logs (docs/research/engine_logs_serving.json) -------------------------------------

def test_qwen3_235b_tp4_one_replicated_head():
    # https://github.com/vllm-project/vllm/issues/21348 (SGLang, 4x H100, tp 4):
    # "KV Cache is allocated. #tokens: 367404, K size: 8.23 GB, V size: 8.23 GB"
    # 4 KV heads / tp 4 = 1 head; K = (367,404 + 1 padding) x 94 layers x 1 x 128 x 2 B
    #   = 8,841,233,920 B = 8.234 GiB
    model = kvmem.get_model("qwen3-235b-a22b")
    (pool,) = sglang.pools(model, num_tokens=367_404, tp=4)
    assert pool.k_bytes == pool.v_bytes == 367_405 * 94 * 128 * 2 == 8_841_233_920
    assert gib2(pool.k_bytes) == 8.23
    assert pool.log_line(version="0.4.9") == "KV Cache is allocated. #tokens: 367404, K size: 8.23 GB, V size: 8.23 GB"


def test_llama31_8b_pr4760_line_and_token_count():
    # https://github.com/sgl-project/sglang/pull/4760 (~v0.4.4, tp 1, default mem_fraction_static 0.88):
    # "Load weight end. ... avail mem=63.48 GB, mem usage=15.11 GB."
    # "KV Cache is allocated. #tokens: 442750, K size: 27.02 GB, V size: 27.02 GB"
    model = kvmem.get_model("llama-3.1-8b")
    (pool,) = sglang.pools(model, num_tokens=442_750)
    # K = 442,751 x 32 layers x 8 heads x 128 x 2 B = 29,016,064,000 B = 27.023 GiB
    assert pool.k_bytes == 442_751 * 32 * 8 * 128 * 2
    assert pool.log_line(version="0.4.4") == "KV Cache is allocated. #tokens: 442750, K size: 27.02 GB, V size: 27.02 GB"
    # rest = after - before x (1 - 0.88), before = after + usage:
    #   = after x 0.88 - usage x 0.12 = 54.049 GiB; / 131,072 B per token = 442,771
    # after and usage are printed to 0.01: the bracket is 82 tokens wide.
    low = tokens_for(model, 63.475 * 0.88 - 15.115 * 0.12)
    high = tokens_for(model, 63.485 * 0.88 - 15.105 * 0.12)
    assert low <= 442_750 <= high and high - low <= 82


def test_llama31_8b_docs_notebook_legacy_line_and_max_total_num_tokens():
    # https://docs.sglang.ai/backend/openai_api_completions.html (rendered 2025-01-23, ~v0.4.1):
    # "Load weight begin. avail mem=78.81 GB" / "Load weight end. ... avail mem=63.72 GB"
    # "KV Cache is allocated. K size: 27.13 GB, V size: 27.13 GB."  ...  "max_total_num_tokens=444500"
    model = kvmem.get_model("llama-3.1-8b")
    (pool,) = sglang.pools(model, num_tokens=444_500)
    # K = 444,501 x 32 layers x 8 heads x 128 x 2 B = 29,130,817,536 B = 27.130 GiB
    assert gib2(pool.k_bytes) == gib2(pool.v_bytes) == 27.13
    assert pool.log_line(legacy=True) == "KV Cache is allocated. K size: 27.13 GB, V size: 27.13 GB."
    # rest = 63.72 - 78.81 x 0.12 = 54.263 GiB -> 444,521 tokens; bracket +/-0.005 on both: 92 tokens
    low = tokens_for(model, 63.715 - 78.815 * 0.12)
    high = tokens_for(model, 63.725 - 78.805 * 0.12)
    assert low <= 444_500 <= high and high - low <= 92


def test_qwq_32b_tp4_two_heads_per_rank():
    # QwQ-32B on 4 x 24 GB PCIe GPUs, SGLang docker (~v0.4.4, Mar 2025); the log as kept in
    # docs/research/engine_logs_serving.json, entry "Qwen/QwQ-32B" (code-index file id 47376055009):
    # "Load weight begin. avail mem=21.63 GB" / "Load weight end. ... avail mem=6.09 GB"
    # "KV Cache is allocated. #tokens: 46611, K size: 1.42 GB, V size: 1.42 GB"
    model = Model.from_hf_config(QWQ_32B, name="qwq-32b")
    (pool,) = sglang.pools(model, num_tokens=46_611, tp=4)
    # 8 KV heads / tp 4 = 2 per rank; K = 46,612 x 64 layers x 2 x 128 x 2 B = 1.4225 GiB
    assert pool.k_bytes == 46_612 * 64 * 2 * 128 * 2
    assert pool.log_line(version="0.4.4") == "KV Cache is allocated. #tokens: 46611, K size: 1.42 GB, V size: 1.42 GB"
    # default mem_fraction_static for tp >= 4 in that era: 0.85 (server_args.py)
    # rest = 6.09 - 21.63 x 0.15 = 2.8455 GiB; cell = 2 x 256 x 64 x 2 = 65,536 B -> 46,621
    assert sglang.cell_size(model, tp=4) == 65_536
    low = tokens_for(model, 6.085 - 21.635 * 0.15, tp=4)
    high = tokens_for(model, 6.095 - 21.625 * 0.15, tp=4)
    assert low <= 46_611 <= high and high - low <= 189


def test_llama31_8b_24gb_card_line():
    # SGLang docker inference server README (Jul 2025; code-index file id 49361099215), as kept in
    # docs/research/engine_logs_serving.json:
    # "KV Cache is allocated. #tokens: 38141, K size: 2.33 GB, V size: 2.33 GB"
    # K = 38,142 x 65,536 B = 2.328 GiB (the token count itself is not reproducible from the
    # printed memory at mem_fraction_static 0.88: see the report)
    model = kvmem.get_model("llama-3.1-8b")
    (pool,) = sglang.pools(model, num_tokens=38_141)
    assert pool.k_bytes == 38_142 * 65_536
    assert pool.log_line(version="0.4.9") == "KV Cache is allocated. #tokens: 38141, K size: 2.33 GB, V size: 2.33 GB"


# ---- the rules ------------------------------------------------------------------------------

def dense(kv_heads=8, layers=4, head_dim=128, heads=32, kind="full", window=0, config=None):
    layer = Layer(kind, kv_heads=kv_heads, head_dim_k=head_dim, head_dim_v=head_dim, window=window)
    return Model(name="toy", layers=(layer,) * layers, hidden_size=heads * head_dim,
                 num_attention_heads=heads, config=config or {})


def test_gqa_cell_and_estimate_with_page_padding():
    model = kvmem.get_model("llama-3.1-8b")
    # cell: 8 heads x (128 + 128) x 32 layers x 2 B = 131,072 B per token
    assert sglang.cell_size(model) == 131_072
    result = kvmem.estimate(model, engine="sglang", tokens=1000, batch=2, page_size=16)
    # 1000 tokens -> 63 pages of 16 = 1008 per sequence; 2 sequences = 2016 rows, + 16 padding
    # K = 2032 x 32 x 8 x 128 x 2 B
    assert result.k_bytes == result.v_bytes == 2032 * 32 * 8 * 128 * 2
    assert result.details.pages_per_sequence == 63 and result.details.pool_tokens == 2016
    # 32 rows more than the ideal 2000 (8 + 8 page tail, 16 padding), 131,072 B each
    assert result.kv_bytes - kvmem.estimate(model, tokens=1000, batch=2).kv_bytes == 32 * 131_072
    assert any("1,000 -> 1,008" in note for note in result.notes)


def test_mqa_replicates_its_one_head():
    model = kvmem.get_model("falcon-7b")  # 32 layers, 1 KV head of 64
    assert sglang.cell_size(model) == 1 * 128 * 32 * 2 == 8192
    assert sglang.cell_size(model, tp=2) == 8192  # max(1, 1 // 2): each rank keeps the head
    # tp must divide the 71 query heads (SGLang asserts total_num_heads % attn_tp_size == 0): tp=71
    result = kvmem.estimate(model, engine="sglang", tokens=100, tp=71)
    assert result.kv_bytes_all_devices == 71 * result.kv_bytes


def test_tp_splits_heads_and_replicates_past_them():
    model = kvmem.get_model("qwen3-235b-a22b")  # 4 KV heads
    assert sglang.cell_size(model, tp=2) == 2 * 256 * 94 * 2
    assert sglang.cell_size(model, tp=8) == sglang.cell_size(model, tp=4) == 1 * 256 * 94 * 2
    assert any("tp=8 > 4 KV heads" in n for n in kvmem.estimate(model, engine="sglang", tokens=8, tp=8).notes)


def test_mla_one_latent_not_split_and_kv_size_line():
    model = kvmem.get_model("deepseek-v3")
    # (512 + 64) x 61 layers x 2 B = 70,272 B per token, on every rank
    assert sglang.cell_size(model) == sglang.cell_size(model, tp=8) == 576 * 61 * 2 == 70_272
    (pool,) = sglang.pools(model, num_tokens=100_000, tp=8)
    assert pool.layout == "mla" and pool.v_bytes == 0
    assert pool.k_bytes == 100_001 * 61 * 576 * 2
    assert pool.log_line(version="0.5.0") == (
        f"KV Cache is allocated. #tokens: 100000, KV size: {pool.k_bytes / GiB:.2f} GB")
    assert pool.log_line(version="0.5.0") == "KV Cache is allocated. #tokens: 100000, KV size: 6.54 GB"
    # SGLang 0.5.23 names the cache dtype first (memory_pool.py KVCache._finalize_allocation_log)
    assert pool.log_line() == "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 100000, KV size: 6.54 GB"


def test_log_line_names_the_dtype_from_0_5_13():
    # srt/mem_cache/memory_pool.py: "KV Cache is allocated. dtype: {self.dtype}, #tokens: ...", printed by
    # SGLang 0.5.13 (held-out log) and 0.5.23; not by the April 2026 main build (its Qwen3.5-9B log, below)
    model = kvmem.get_model("llama-3.1-8b")
    (bf16,) = sglang.pools(model, num_tokens=442750)
    assert bf16.log_line() == ("KV Cache is allocated. dtype: torch.bfloat16, #tokens: 442750, "
                               "K size: 27.02 GB, V size: 27.02 GB")
    assert bf16.log_line(version="0.5.13") == bf16.log_line(version="0.5.22") == bf16.log_line()
    assert bf16.log_line(version="0.5.12").startswith("KV Cache is allocated. #tokens: 442750")
    (fp8,) = sglang.pools(model, num_tokens=442750, kv_dtype="fp8_e4m3")
    assert fp8.log_line().startswith("KV Cache is allocated. dtype: torch.float8_e4m3fn, #tokens: 442750")
    result = kvmem.capacity(model, engine="sglang", kv_memory=GiB, version="0.4.4")
    assert all("dtype" not in line for line in result.details.log)
    with pytest.raises(ValueError, match="version must be 'latest' or an SGLang release"):
        sglang.pools(model, num_tokens=10, version="newest")


def test_nsa_fp8_latent_indexer_and_forced_pages():
    model = kvmem.get_model("deepseek-v3.2")
    result = kvmem.estimate(model, engine="sglang", tokens=1000, kv_dtype="fp8")
    assert result.details.page_size == 64 and any("forces 64-token pages" in n for n in result.notes)
    # 1000 -> 16 pages = 1024 rows + 64 padding = 1088 rows of 656 B (512 fp8 + 16 B scales + 128 B rope);
    # indexer: (1024 + 64 + 1) // 64 = 17 pages x 64 x 132 B; both x 61 layers
    assert result.k_bytes == 61 * (1088 * 656 + 17 * 64 * 132) and result.v_bytes == 0
    # 0.5.23's profile counts the latent as the buffer holds it: 656 + 132 = 788 B per layer
    # (pool_configurator.py _compute_cell_size with calculate_mla_kv_cache_dim)
    assert sglang.cell_size(model, kv_dtype="fp8") == 61 * 788
    # bf16: the latent is 576 x 2 B
    bf16 = kvmem.estimate(model, engine="sglang", tokens=1000, kv_dtype="bf16")
    assert bf16.k_bytes == 61 * (1088 * 1152 + 17 * 64 * 132)


def test_fp8_halves_and_fp4_adds_one_scale_per_16():
    model = kvmem.get_model("llama-3.1-8b")
    bf16 = kvmem.estimate(model, engine="sglang", tokens=4096)
    assert kvmem.estimate(model, engine="sglang", tokens=4096, kv_dtype="fp8_e5m2").kv_bytes * 2 == bf16.kv_bytes
    fp4 = kvmem.estimate(model, engine="sglang", tokens=4096, kv_dtype="fp4_e2m1")
    # per layer and token: 8 heads x (128 // 2 + 128 // 16) = 576 B for K and again for V
    assert fp4.k_bytes == fp4.v_bytes == 4097 * 32 * 576
    assert fp4.kv_dtype == "nvfp4"


def test_capacity_floors_to_pages():
    model = kvmem.get_model("llama-3.1-8b")
    budget = 1000 * 131_072 + 5
    assert kvmem.capacity(model, engine="sglang", kv_memory=budget).tokens == 1000
    paged = kvmem.capacity(model, engine="sglang", kv_memory=budget, page_size=64, max_model_len=480)
    assert (paged.tokens, paged.blocks, paged.block_size) == (960, 15, 64)
    assert paged.max_concurrency == 960 / 512  # a 480-token request takes 8 pages


def test_hybrid_swa_split_for_gpt_oss():
    model = kvmem.get_model("gpt-oss-120b")  # 18 sliding (window 128) + 18 full, 8 x 64 heads
    cap = kvmem.capacity(model, engine="sglang", kv_memory=40 * GiB, max_model_len=131_072)
    # cell = (2048 x 18 + 2048 x 18) B = 73,728 B -> 42,949,672,960 // 73,728 = 582,542 tokens
    # full = int(42,949,672,960 // (36,864 + 0.8 x 36,864)) = 647,269 (SGLang's own from the bytes;
    # tests/oracles/test_hybrid_verdicts_oracle.py); swa = int(647,269 x 0.8) = 517,815
    assert cap.details.max_total_num_tokens == 582_542
    assert (cap.tokens, cap.details.swa_layer_tokens) == (647_269, 517_815)
    swa_pool, full_pool = sglang.pools(model, num_tokens=647_269, swa_num_tokens=517_815)
    assert (swa_pool.role, full_pool.role) == ("swa", "full")
    assert swa_pool.k_bytes == 517_816 * 18 * 8 * 64 * 2
    # the two pools fill the budget to within a padding row per layer (SGLang's split leaves the padding rows
    # out: 57,344 B over here, under 36 x 2,048 = 73,728)
    assert abs(40 * GiB - (swa_pool.kv_bytes + full_pool.kv_bytes)) < 73_728
    # estimate: sliding layers hold the 128-token window, full layers everything
    result = kvmem.estimate(model, engine="sglang", tokens=1000)
    assert result.per_layer[0] == 129 * 2048 and result.per_layer[1] == 1001 * 2048
    off = kvmem.estimate(model, engine="sglang", tokens=1000, disable_hybrid_swa_memory=True)
    assert off.per_layer[0] == off.per_layer[1] == 1001 * 2048


def test_sliding_layers_of_other_architectures_cached_whole():
    model = kvmem.get_model("gemma-3-27b")  # 52 sliding layers, not a hybrid-SWA architecture in SGLang
    result = kvmem.estimate(model, engine="sglang", tokens=8192)
    assert len(set(result.per_layer)) == 1  # every layer holds all 8192 tokens (+ 1 padding)
    assert result.per_layer[0] == 8193 * 16 * 128 * 2 * 2
    assert any("cached at full length" in n for n in result.notes)


def test_linear_hybrid_pools_only_attention_layers_and_splits_mamba_memory():
    model = kvmem.get_model("qwen3-next-80b-a3b")  # 12 full (2 x 256) + 36 gated-DeltaNet layers
    result = kvmem.estimate(model, engine="sglang", tokens=1000, batch=4, tp=2)
    assert result.kv_bytes == 12 * (4000 + 1) * 1 * 256 * 2 * 2
    # state per request and layer on one of 2 ranks: conv 8192/2 x 3 x 2 B + 524,288/2 x 4 B (fp32)
    assert result.state_bytes == 4 * 36 * (4096 * 3 * 2 + 262_144 * 4)
    cap = kvmem.capacity(model, engine="sglang", kv_memory=30 * GiB, tp=2)
    per_request = 36 * (4096 * 3 * 2 + 262_144 * 4)
    # 0.5.23's joint solve: one slot fewer than the ratio split (the pool's padding slot), and the
    # KV cells get what the slots + 1 entries leave
    slots = int((30 * 0.9 / 1.9 * GiB - per_request) // per_request)
    assert slots == int((30 * 0.9 / 1.9) * GiB // per_request) - 1
    assert cap.details.max_mamba_cache_size == slots
    assert cap.tokens == (30 * GiB - (slots + 1) * per_request) // (12 * 1024)
    # SGLang 0.5.23 resolves --mamba-radix-cache-strategy auto to extra_buffer for Qwen3NextForCausalLM with overlap
    # scheduling on (arg_groups/overrides.py _mamba_radix_cache_resolution): 3 + 2 state slots a request
    assert cap.details.max_running_requests == slots // 5
    pinned = kvmem.capacity(model, engine="sglang", kv_memory=30 * GiB, tp=2, mamba_extra_buffer=False)
    assert pinned.details.max_running_requests == slots // 3


def qwen35_9b():
    """Qwen/Qwen3.5-9B (config.json as the held-out log's author quotes it): 32 layers, every 4th full
    attention (4 KV heads x 256), the rest gated DeltaNet (16 key / 32 value heads of 128, conv kernel 4)."""
    from kvmem.layer import Layer, RecurrentState
    from kvmem.model import Model
    state = RecurrentState(conv_channels=2 * 16 * 128 + 32 * 128, conv_kernel=4, ssm_elements=32 * 128 * 128,
                           ssm_heads=32)
    layers = [Layer("full", kv_heads=4, head_dim_k=256, head_dim_v=256) if (i + 1) % 4 == 0
              else Layer("linear", state=state) for i in range(32)]
    return Model(name="qwen3.5-9b", layers=tuple(layers), hidden_size=4096, num_attention_heads=16,
                 model_type="qwen3_5_text", max_position_embeddings=262144)


def test_qwen35_9b_tp2_held_out_log_186_slots_62_requests_327310_tokens():
    # (the model below names no architecture, so no extra buffer is resolved for it: the April build printed 186 // 3;
    # SGLang 0.5.23 would resolve extra_buffer for Qwen3_5ForConditionalGeneration and admit 186 // 5 = 37)
    # Held-out SGLang log (main build 0.0.0.dev11582+g4df60434d, 2026-04-14; --tp-size 2
    # --mem-fraction-static 0.8 --context-length 262144): "Mamba Cache is allocated. max_mamba_cache_size: 186,
    # conv_state size: 0.10GB, ssm_state size: 4.38GB", "KV Cache is allocated. #tokens: 327310, K size: 2.50 GB,
    # V size: 2.50 GB", "max_total_num_tokens=327310, ... max_running_requests=62".
    # Per request on one of 2 ranks: 24 layers x (conv 8192/2 x 3 x 2 B + SSM 16 x 128 x 128 x 4 B) = 25,755,648 B.
    # Cell: 8 full layers x 2 heads x (256 + 256) x 2 B = 16,384 B per token.
    # rest = 327,310 x 16,384 + (186 + 1) x 25,755,648 = 10,178,953,216 B (9.480 GiB; the log's
    # 14.08 - 0.2 x 22.93 GB = 9.494 GiB is rounded and measured at other instants)
    per_request, cell = 24 * (4096 * 3 * 2 + 16 * 128 * 128 * 4), 8 * 2 * 512 * 2
    rest = 327_310 * cell + 187 * per_request
    cap = kvmem.capacity(qwen35_9b(), engine="sglang", kv_memory=rest, tp=2, max_model_len=262144, version="0.5.12")
    assert cap.tokens == 327_310
    assert cap.details.max_mamba_cache_size == 186          # the ratio split alone gives 187
    assert int(rest / GiB * 0.9 / 1.9 * GiB // per_request) == 187
    assert cap.details.max_running_requests == 62           # 186 // 3 (MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO)
    assert cap.log_lines == ("Mamba Cache is allocated. max_mamba_cache_size: 186, conv_state size: 0.10GB, "
                             "ssm_state size: 4.38GB ",
                             "KV Cache is allocated. #tokens: 327310, K size: 2.50 GB, V size: 2.50 GB")
    # with the extra buffer's ping-pong slots and overlap scheduling, a request holds 3 + 2 slots: 186 // 5
    extra = kvmem.capacity(qwen35_9b(), engine="sglang", kv_memory=rest, tp=2, max_model_len=262144,
                           mamba_extra_buffer=True)
    assert extra.details.max_running_requests == 37
    # --disable-radix-cache --max-running-requests 62: the pool is sized from the requests (62 slots)
    sized = kvmem.capacity(qwen35_9b(), engine="sglang", kv_memory=rest, tp=2, max_model_len=262144,
                           disable_radix_cache=True, max_running_requests=62)
    assert sized.details.max_mamba_cache_size == 62 and sized.details.max_running_requests == 62
    assert sized.tokens == (rest - 63 * per_request) // cell


def test_pipeline_stage_with_most_layers():
    model = kvmem.get_model("llama-3.1-8b")
    # 32 layers over 3 stages: 11, 11, 10 -> the budget fills an 11-layer stage
    assert sglang.cell_size(model, pp=3) == 11 * 4096
    assert kvmem.capacity(model, engine="sglang", kv_memory=11 * 4096 * 500, pp=3).tokens == 500
    (pool,) = sglang.pools(model, num_tokens=10, pp=3)
    assert len(pool.layers) == 11


def test_registered_with_its_defaults():
    assert "sglang" in kvmem.list_engines()
    from kvmem.engines.sglang.draft import DRAFT_DEFAULTS
    from kvmem.engines.sglang.parallel import PARALLEL_DEFAULTS
    assert kvmem.engines.ENGINES["sglang"].options == {**sglang.DEFAULTS, **PARALLEL_DEFAULTS, **DRAFT_DEFAULTS}


@pytest.mark.parametrize("options, message", [
    (dict(page_size=0), "page_size must be a positive integer, got 0"),
    (dict(page_size=1.5), "page_size must be a positive integer, got 1.5"),
    (dict(swa_full_tokens_ratio=0), "swa_full_tokens_ratio must be a positive number, got 0"),
    (dict(disable_hybrid_swa_memory="yes"), "disable_hybrid_swa_memory must be True or False"),
    (dict(mamba_ssm_dtype="fp8"), "mamba_ssm_dtype must be fp32, bf16 or fp16"),
    (dict(kv_dtype="q8_0"), "kv_dtype: SGLang caches auto, fp32, fp16, bf16, fp8_e4m3, fp8_e5m2 or fp4_e2m1"),
    (dict(tp=3), "tp=3 must divide the 8 KV heads"),
    (dict(block_size=16), "engine 'sglang' has no option 'block_size'"),
])
def test_bad_input(options, message):
    with pytest.raises(ValueError, match=message):
        kvmem.estimate(kvmem.get_model("llama-3.1-8b"), engine="sglang", tokens=10, **options)


def test_bad_pool_input():
    with pytest.raises(ValueError, match="num_tokens must be a positive integer, got 0"):
        sglang.pools(dense(), num_tokens=0)
    with pytest.raises(ValueError, match="kv_dtype: SGLang's NSA pool .* holds bf16 or fp8_e4m3"):
        kvmem.estimate(kvmem.get_model("deepseek-v3.2"), engine="sglang", tokens=10, kv_dtype="nvfp4")
    mixed = Model(name="mixed", layers=(Layer("full", kv_heads=8, head_dim_k=128, head_dim_v=128),
                                        Layer("full", kv_heads=4, head_dim_k=128, head_dim_v=128)),
                  hidden_size=4096, num_attention_heads=32)
    with pytest.raises(ValueError, match="SGLang's full pool has one head shape"):
        kvmem.estimate(mixed, engine="sglang", tokens=10)


@settings(max_examples=50, deadline=None)
@given(tokens=st.integers(1, 200_000), batch=st.integers(1, 64), page=st.sampled_from([1, 16, 64]))
def test_pool_holds_ideal_plus_page_tails_and_padding(tokens, batch, page):
    model = dense()
    ideal = kvmem.estimate(model, tokens=tokens, batch=batch).kv_bytes
    result = kvmem.estimate(model, engine="sglang", tokens=tokens, batch=batch, page_size=page)
    per_token = 4 * 8 * 256 * 2  # 4 layers x 8 heads x (128 + 128) x 2 B
    extra_rows = batch * (-(-tokens // page) * page - tokens) + page
    assert result.kv_bytes == ideal + extra_rows * per_token


def test_pools_refuse_unknown_options():
    with pytest.raises(ValueError, match="SGLang has no option 'block_size'"):
        sglang.pools(dense(), num_tokens=10, block_size=16)


def test_mla_with_a_window_pool_is_refused_not_a_crash():
    # an MLA variant of gpt-oss keeps its sliding layers: SGLang has no MLA pool with a window pool
    from kvmem import strategies

    rows = strategies.architecture_variants("gpt-oss-20b", tokens=32768, engine="sglang")
    mla = next(r for r in rows if r.variant.startswith("MLA"))
    assert mla.total_bytes is None and "mixes both" in mla.cost


@pytest.mark.parametrize("engine", ["ideal", "sglang", "trtllm"])
def test_tp_must_divide_the_query_heads(engine):
    # issue 13: tp=64 on 32 query heads was accepted; SGLang and TensorRT-LLM assert it divides them
    with pytest.raises(ValueError, match="tp=64 must divide the model's 32 query heads"):
        kvmem.estimate("llama-3.1-8b", engine=engine, tokens=100, tp=64)


# ---- budgets SGLang refuses (issue 32, M1) ------------------------------------------------

def test_a_mamba_hybrid_whose_state_does_not_fit_is_refused_with_sglangs_runtime_error(capsys):
    # Qwen3-Next-80B-A3B on one rank: 36 gated-DeltaNet layers x (conv 8192 x 3 x 2 B + SSM 524,288 x 4 B)
    #   = 36 x 2,146,304 = 77,266,944 B = 73.69 MiB per request. 1 GB (10**9 B) x 0.9 / 1.9 = 473,684,210 B
    # gives (473,684,210 - 77,266,944) // 77,266,944 = 5 slots; 1 B gives int((0.47 - 77,266,944) // 77,266,944) = -1 slots: SGLang raises
    # (kv_cache_configurator.py _handle_max_mamba_cache, max_mamba_cache_size <= 0).
    model = kvmem.get_model("qwen3-next-80b-a3b")
    cap = kvmem.capacity(model, engine="sglang", kv_memory=1)
    assert (cap.tokens, cap.blocks) == (0, 0)
    assert cap.refusal.reason == (
        "SGLang raises RuntimeError: Not enough GPU memory for hybrid (mamba/linear-attention) state cache. "
        "Computed max_mamba_cache_size=-1 (total_rest_memory=0.00 GB, mamba_cache_per_req=73.69 MB): one "
        "request's state does not fit in mamba_full_memory_ratio's share of the budget")
    assert kvmem.capacity(model, engine="sglang", kv_memory=10**9).details.max_mamba_cache_size == 5
    from kvmem.cli import main
    assert main(["capacity", "qwen3-next-80b-a3b", "--engine", "sglang", "--kv-memory", "1B"]) == 1
    assert "max_mamba_cache_size=-1" in capsys.readouterr().err


def test_a_budget_of_no_token_is_refused_as_sglang_does():
    # llama-3.1-8b: 32 layers x 8 heads x 256 x 2 B = 131,072 B per token; 1,000 B hold none and
    # SGLang's MemoryPoolConfig raises "Not enough memory" (pool_configurator.py)
    cap = kvmem.capacity("llama-3.1-8b", engine="sglang", kv_memory=1000)
    assert cap.tokens == 0
    assert cap.refusal.reason == ("SGLang raises RuntimeError: Not enough memory. Please try to increase "
                                  "--mem-fraction-static.")
    assert kvmem.capacity("llama-3.1-8b", engine="sglang", kv_memory=131_072).refusal is None

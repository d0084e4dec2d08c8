"""llama.cpp mode: every log in docs/research/engine_logs_llamacpp.json reproduced, then the rules.

Each log test names its source (the "source" field of that JSON entry) and shows the
arithmetic. MiB = bytes / 2**20, printed as the log does ("%7.2f" of a float32). Where the
source collapsed the log's column padding, lines are compared with runs of spaces squashed.
"""

import pytest

from kvmem import Layer, Model, RecurrentState, capacity, estimate, fit, get_model
from kvmem.engines.llamacpp import log_lines

MiB = 2**20


def llama(model, **kw):
    kw.setdefault("tokens", 1)
    return estimate(model, engine="llama.cpp", **kw)


def squash(line: str) -> str:
    """The line with column padding removed: runs of spaces, and spaces after "(", dropped."""
    return " ".join(line.split()).replace("( ", "(")


def squashed(lines):
    return [squash(line) for line in lines]


def toy(name, layers, *, heads, hidden, model_type=""):
    return Model(name=name, layers=tuple(layers), hidden_size=hidden, num_attention_heads=heads,
                 model_type=model_type)


def dense(name, n_layer, kv_heads, head_dim, *, heads, hidden):
    return toy(name, [Layer("full", kv_heads=kv_heads, head_dim_k=head_dim, head_dim_v=head_dim)] * n_layer,
               heads=heads, hidden=hidden)


def qwen35(name, n_layer, kv_heads, v_heads, d_inner_heads, hidden):
    """Qwen3.5 hybrid: every 4th layer full attention (head_dim 256), the rest gated DeltaNet.
    R = 3 x (2 x 16 x 128 + v_heads x 128) conv values, S = v_heads x 128 x 128 per sequence."""
    state = RecurrentState(conv_channels=2 * 16 * 128 + v_heads * 128, conv_kernel=4,
                           ssm_elements=v_heads * 128 * 128, ssm_heads=v_heads)
    layers = [Layer("full", kv_heads=kv_heads, head_dim_k=256, head_dim_v=256) if (i + 1) % 4 == 0
              else Layer("linear", state=state) for i in range(n_layer)]
    return toy(name, layers, heads=d_inner_heads, hidden=hidden, model_type="qwen3_5_text")


def gemma3_270m():
    # google/gemma-3-270m (arch in the JSON): 18 layers, 1 KV head x 256, window 512,
    # sliding if (i + 1) % 6 -> 15 SWA + 3 full
    layers = [Layer("sliding", kv_heads=1, head_dim_k=256, head_dim_v=256, window=512) if (i + 1) % 6
              else Layer("full", kv_heads=1, head_dim_k=256, head_dim_v=256) for i in range(18)]
    return toy("gemma-3-270m", layers, heads=4, hidden=640, model_type="gemma3_text")


def gemma4_12b():
    # gemma4 (arch in the JSON, from its GGUF keys): 48 layers, head_count_kv [8,8,8,8,8,1,...]:
    # 5 SWA (8 x 256, window 1024) then 1 full (1 x 512) -> 40 SWA + 8 full
    layers = [Layer("full", kv_heads=1, head_dim_k=512, head_dim_v=512) if (i + 1) % 6 == 0
              else Layer("sliding", kv_heads=8, head_dim_k=256, head_dim_v=256, window=1024) for i in range(48)]
    return toy("gemma-4-12b", layers, heads=16, hidden=3840, model_type="gemma4_text")


# ---- the logs ---------------------------------------------------------------------------------

def test_gpt_oss_20b_two_swa_lines_q8_0_and_the_four_device_buffers():
    # https://github.com/ggml-org/llama.cpp/blob/868d10ce2e0854396329bf94444dbb36ded678ca/docs/backend/snapdragon/developer.md
    # -c 8192 -b 128 -ctk q8_0 -ctv q8_0 -fa on, 4 HTP devices. n_ubatch = min(128, 512) = 128.
    # q8_0 row of 8 x 64 = 512 values = 16 blocks x 34 B = 544 B.
    # non-SWA: 8192 cells x 12 layers x 544 B = 51.00 MiB for K, the same for V
    # SWA: pad256(min(8192, 128 x 1 + 128)) = 256 cells x 12 x 544 B = 1.59375 MiB -> "1.59"; K+V 3.1875 -> "3.19"
    result = llama("gpt-oss-20b", tokens=8192, n_ctx=8192, n_batch=128, kv_dtype="q8_0", flash_attn=True, pp=4)
    assert log_lines(result) == [
        "llama_kv_cache_iswa: creating non-SWA KV cache, size = 8192 cells",
        "llama_kv_cache: size =  102.00 MiB (  8192 cells,  12 layers,  1/1 seqs), K (q8_0):   51.00 MiB, V (q8_0):   51.00 MiB",
        "llama_kv_cache_iswa: creating     SWA KV cache, size = 256 cells",
        "llama_kv_cache: size =    3.19 MiB (   256 cells,  12 layers,  1/1 seqs), K (q8_0):    1.59 MiB, V (q8_0):    1.59 MiB",
    ]
    assert result.details.swa_cells == 256 and result.details.n_ubatch == 128
    # layer il -> device upper_bound(il / 25): layers 0-6, 7-12, 13-18, 19-23. Each holds 3 full layers
    # (25.50 MiB) and 4/3/3/2 SWA layers of 256 x 1088 B = 0.265625 MiB -> 1.06, 0.80, 0.80, 0.53 MiB
    buffers = [d["buffer_mib"] for d in result.details.devices]
    assert [b["kv"] for b in buffers] == [25.5] * 4
    assert [b["kv_swa"] for b in buffers] == [1.06, 0.8, 0.8, 0.53]
    assert result.kv_bytes == 3 * 8192 * 1088 + 4 * 256 * 1088  # the fullest device
    assert result.kv_bytes_all_devices == 102 * MiB + 3_342_336


def test_qwen25_coder_05b_unified_cache_for_32_sequences():
    # https://github.com/ggml-org/llama.cpp/pull/14363 (ggerganov, 2025-07-12, 'Unified cache (i.e. old)')
    # Qwen2.5-Coder-0.5B has Qwen2.5-0.5B's architecture (the JSON's arch): 24 layers, 2 KV heads x 64.
    # 133120 cells x 24 layers x 128 values x 2 B = 780.00 MiB for K, the same for V; one stream.
    result = llama("qwen2.5-0.5b", tokens=4160, batch=32, n_ctx=133120, kv_unified=True, flash_attn=True,
                   n_batch=2048, n_ubatch=2048, build="2025-07-16")
    assert log_lines(result, style="unified_streams") == [
        "llama_kv_cache_unified: size = 1560.00 MiB (133120 cells,  24 layers, 32/ 1 seqs), "
        "K (f16):  780.00 MiB, V (f16):  780.00 MiB"]
    assert result.kv_bytes == 1560 * MiB


def test_command_r_old_kv_self_size_line_2024():
    # https://github.com/ggml-org/llama.cpp/pull/6122 (Wuzzooy, turn 20); model inferred in the JSON: c4ai-command-r-v01
    # 40 layers, MHA 64 x 128 = 8192 values: 4096 cells x 40 x 8192 x 2 B = 2560.00 MiB per K and per V
    model = dense("c4ai-command-r-v01", 40, 64, 128, heads=64, hidden=8192)
    result = llama(model, tokens=4096, n_ctx=4096, build="2024-03-20")
    assert log_lines(result) == ["llama_new_context_with_model: KV self size  = 5120.00 MiB, "
                                 "K (f16): 2560.00 MiB, V (f16): 2560.00 MiB"]
    # the 12/28 layer split of the two GPUs: 128 MiB per layer -> 1536.00 and 3584.00 MiB
    assert sum(result.per_layer[:12]) == 1536 * MiB and sum(result.per_layer[12:]) == 3584 * MiB


def test_deepseek_v3_per_head_cache_one_buffer_for_8_sequences_2025():
    # https://github.com/ggml-org/llama.cpp/issues/9390 (CHN-STUDENT, turn 11): kv_size = 16384 with
    # n_seq_max 8, type_k q4_0, type_v f16, flash_attn 0. A GGUF without the MLA split (mla="none"):
    # K 128 heads x (128 + 64) = 24576 q4_0 -> 13824 B, V 128 x 128 = 16384 f16 -> 32768 B per cell;
    # x 16384 cells = 728 MiB per layer; the log's buffers: 8 layers 5824.00 MiB, 7 layers 5096.00 MiB
    result = llama("deepseek-v3", tokens=2048, batch=8, n_ctx=16384, n_seq=8, type_k="q4_0", type_v="f16",
                   mla="none", n_batch=256, n_ubatch=256, build="2025-02-01")
    assert result.details.cells == 16384 and result.details.n_stream == 1
    assert result.per_layer == (728 * MiB,) * 61
    assert sum(result.per_layer[:8]) == 5824 * MiB and sum(result.per_layer[:7]) == 5096 * MiB
    assert (result.k_bytes, result.v_bytes) == (13176 * MiB, 31232 * MiB)  # derived totals, 44408 MiB
    assert "one buffer shared by all sequences" in result.notes[0]


@pytest.mark.parametrize("n_seq, nextn, line", [
    (2, False, "llama_memory_recurrent: size =  299.25 MiB (     2 cells,  64 layers,  2 seqs  0 rs_seq), "
               "R (f32):   11.25 MiB, S (f32):  288.00 MiB"),
    (3, True, "llama_memory_recurrent: size =  448.88 MiB (     3 cells,  65 layers,  3 seqs  0 rs_seq), "
              "R (f32):   16.88 MiB, S (f32):  432.00 MiB"),
])
def test_qwen35_27b_recurrent_state_per_sequence(n_seq, nextn, line):
    # https://github.com/ggml-org/llama.cpp/pull/23792 (Stoney49th, turns 6 and 10). 48 gated-DeltaNet layers:
    # R = 3 x (2 x 16 x 128 + 48 x 128) = 30720 f32 = 120 KiB, S = 48 x 128 x 128 f32 = 3 MiB per cell.
    # 2 cells: R 2 x 48 x 120 KiB = 11.25 MiB, S 288 MiB. 3 cells: R 16.875 -> "16.88", total 448.875 -> "448.88".
    # The second run loads the MTP layer (llama.cpp n_layer_all = 65, "layer 64: skipped").
    model = get_model("qwen3.5-27b")
    if nextn:
        model = model.with_layers(model.layers, mtp_layers=1)
    result = llama(model, batch=n_seq, kv_dtype="f16", n_rs_seq=0, nextn=nextn)
    assert log_lines(result)[-1] == line
    assert result.state_bytes == n_seq * 48 * (30720 + 786432) * 4


def test_qwen35_9b_recurrent_line_one_sequence():
    # https://github.com/JamePeng/llama-cpp-python/issues/78 (KLL535, turn 0). Qwen3.5-9B: 24 DeltaNet layers,
    # R = 3 x (4096 + 2 x 16 x 128) = 24576 f32 = 96 KiB, S = 128 x 4096 f32 = 2 MiB per layer:
    # 24 x 96 KiB = 2.25 MiB, 24 x 2 MiB = 48 MiB
    model = qwen35("qwen3.5-9b", 32, kv_heads=4, v_heads=32, d_inner_heads=16, hidden=4096)
    assert log_lines(llama(model, tokens=4096))[-1] == (
        "llama_memory_recurrent: size =   50.25 MiB (     1 cells,  32 layers,  1 seqs), "
        "R (f32):    2.25 MiB, S (f32):   48.00 MiB")


def test_qwen25_3b_class_kv_self_line_of_llama_init_from_model():
    # https://github.com/SciSharp/LLamaSharp/issues/1099 (phil-scott-78, turn 5), Feb 2025. 36 layers,
    # n_embd_k_gqa = n_embd_v_gqa = 256: 4096 cells x 36 x 256 x 2 B = 72.00 MiB per K and per V
    model = dense("qwen2.5-3b-class", 36, 2, 128, heads=16, hidden=2048)
    assert log_lines(llama(model, tokens=4096, build="2025-02-15")) == [
        "llama_init_from_model: KV self size  =  144.00 MiB, K (f16):   72.00 MiB, V (f16):   72.00 MiB"]


@pytest.mark.parametrize("n_seq, n_ctx, base_cells, swa_cells, total_mib", [
    (1, 4096, 4096, 1024, 27.0), (2, 4096, 2048, 1024, 42.0), (4, 4096, 1024, 1024, 72.0),
    (8, 4096, 512, 512, 72.0), (1, 8192, 8192, 1024, 39.0), (2, 8192, 4096, 1024, 54.0),
])
def test_gemma3_270m_parallel_slots(n_seq, n_ctx, base_cells, swa_cells, total_mib):
    # https://github.com/unslothai/unsloth/pull/5225 (danielhanchen, 2026-05-03): sum of the two size lines.
    # n_ctx_seq = pad256(n_ctx / np); SWA = pad256(min(n_ctx_seq, 512 + 512)) per stream; 1024 B per cell-layer
    # (1 head x 256 x 2 B x K,V): np x (3 x n_ctx_seq + 15 x swa) KiB, e.g. np 2, 4096: 2 x (6144 + 15360) KiB = 42 MiB
    result = llama(gemma3_270m(), batch=n_seq, n_ctx=n_ctx)
    base, swa = result.details.caches
    assert (base["cells"], swa["cells"], base["streams"]) == (base_cells, swa_cells, n_seq)
    assert base["size_mib"] + swa["size_mib"] == total_mib
    assert result.kv_bytes == n_seq * (3 * base_cells + 15 * swa_cells) * 1024 == int(total_mib * MiB)


def test_gemma3_with_fewer_layers_than_the_pattern_keeps_two_caches():
    # llama.cpp 0c1e57098 (llama-cpp-python 0.3.36), a 3-layer gemma3 GGUF, window 512, n_ctx 32113:
    # every layer is sliding (pattern 6), yet iSWA builds an empty non-SWA cache of pad256(32113) =
    # 32256 cells and, with n_ubatch 256, an SWA cache of pad256(min(32256, 512 + 256)) = 768 cells:
    # 3 layers x 1 head x 256 x 2 (K, V) x 2 B x 768 = 2,359,296 B = 2.25 MiB.
    model = toy("gemma-3-tiny", [Layer("sliding", 1, 256, 256, window=512)] * 3, heads=4, hidden=640,
                model_type="gemma3_text")
    result = llama(model, n_ctx=32113, n_ubatch=256)
    assert result.details.log == [
        "llama_kv_cache_iswa: creating non-SWA KV cache, size = 32256 cells",
        "llama_kv_cache: size =    0.00 MiB ( 32256 cells,   0 layers,  1/1 seqs), K (f16):    0.00 MiB, "
        "V (f16):    0.00 MiB",
        "llama_kv_cache_iswa: creating     SWA KV cache, size = 768 cells",
        "llama_kv_cache: size =    2.25 MiB (   768 cells,   3 layers,  1/1 seqs), K (f16):    1.12 MiB, "
        "V (f16):    1.12 MiB"]
    assert result.kv_bytes == 2_359_296
    # Mistral-style all-sliding llama models keep one full cache: llama.cpp does not read that window
    mistral = toy("mistral-tiny", [Layer("sliding", 8, 128, 128, window=4096)] * 2, heads=32, hidden=4096,
                  model_type="mistral")
    assert len(llama(mistral, n_ctx=8192).details.log) == 1


@pytest.mark.parametrize("n_seq, cells_total, mib", [(3, 1536, 27.0), (4, 1024, 18.0)])
def test_gemma3_270m_three_slots_round_the_total_up(n_seq, cells_total, mib):
    # https://github.com/unslothai/unsloth/pull/7530 (danielhanchen, 2026-07-28), b10107.
    # -c 1024 -np 3: 1024 // 3 = 341 -> 512 per stream, n_ctx = 1536; SWA min(512, 1024) = 512:
    # 3 x (3 x 512 + 15 x 512) KiB = 27 MiB. -np 4: 256 per stream, 1024 cells, 18 MiB.
    result = llama(gemma3_270m(), batch=n_seq, n_ctx=1024)
    assert result.details.cells_total == cells_total
    assert result.kv_bytes == int(mib * MiB)


def test_qwen3_14b_q4_0_cache():
    # GitHub repository file, search-index file id 61071482478 (setup notes, 'Qwen3-14B-Q4_K_M.gguf', May 2026).
    # 40 layers, 8 KV heads x 128: q4_0 row of 1024 = 32 blocks x 18 B = 576 B; 65536 x 40 x 576 B = 1440 MiB
    model = dense("qwen3-14b", 40, 8, 128, heads=40, hidden=5120)
    result = llama(model, tokens=65536, kv_dtype="q4_0")
    assert squashed(log_lines(result)) == [squash(
        "llama_kv_cache: size = 2880.00 MiB (65536 cells, 40 layers, 1/1 seqs), K (q4_0): 1440.00 MiB, V (q4_0): 1440.00 MiB")]


def test_qwen35_9b_unified_two_slots_q8_0_and_the_recurrent_buffer():
    # GitHub repository file, search-index file id 57397882540: -c 262144 -np 2 -kvu -ctk q8_0 -ctv q8_0 -fa on.
    # 8 attention layers x 1024 values: q8_0 1088 B; 262144 x 8 x 1088 B = 2176 MiB per K and V.
    # RS buffer 100.50 MiB = 2 cells x (2.25 + 48) MiB
    model = qwen35("qwen3.5-9b", 32, kv_heads=4, v_heads=32, d_inner_heads=16, hidden=4096)
    result = llama(model, tokens=131072, batch=2, n_ctx=262144, kv_unified=True, kv_dtype="q8_0", flash_attn=True)
    assert log_lines(result)[0] == ("llama_kv_cache: size = 4352.00 MiB (262144 cells,   8 layers,  2/1 seqs), "
                                    "K (q8_0): 2176.00 MiB, V (q8_0): 2176.00 MiB")
    assert result.state_bytes == int(100.5 * MiB)


@pytest.mark.parametrize("n_ubatch", [512, 1024])
def test_qwen35_2b_hybrid_attention_and_recurrent_lines(n_ubatch):
    # GitHub repository file, search-index file ids 53333481378 / 56777796281 (Qwen3.5-2B, -np auto: 4 slots,
    # kv_unified). KV: 262144 x 6 layers x 512 x 2 B = 1536 MiB. Recurrent, 18 layers x 4 cells:
    # R 3 x (2048 + 4096) f32 = 72 KiB -> 5.0625 MiB "5.06"; S 128 x 2048 f32 = 1 MiB -> 72 MiB
    model = qwen35("qwen3.5-2b", 24, kv_heads=2, v_heads=16, d_inner_heads=8, hidden=2048)
    result = llama(model, tokens=65536, batch=4, n_ctx=262144, kv_unified=True, n_ubatch=n_ubatch)
    assert log_lines(result) == [
        "llama_kv_cache: size = 3072.00 MiB (262144 cells,   6 layers,  4/1 seqs), K (f16): 1536.00 MiB, V (f16): 1536.00 MiB",
        "llama_memory_recurrent: size =   77.06 MiB (     4 cells,  24 layers,  4 seqs), R (f32):    5.06 MiB, S (f32):   72.00 MiB",
    ]


@pytest.mark.parametrize("n_seq, unified, line", [
    (4, True, "llama_kv_cache: size = 4320.00 MiB ( 16384 cells, 27 layers, 4/1 seqs), K (f16): 2592.00 MiB, V (f16): 1728.00 MiB"),
    (8, False, "llama_kv_cache: size = 4320.00 MiB ( 2048 cells, 27 layers, 8/8 seqs), K (f16): 2592.00 MiB, V (f16): 1728.00 MiB"),
])
def test_deepseek_coder_v2_lite_per_head_cache_unified_and_streams(n_seq, unified, line):
    # GitHub repository file, search-index file ids 63456768367 / 66375053134 ('deepseek-coder-v2-16b-c16384/n4-t1.log').
    # No MLA split: K 16 x (128 + 64) = 3072, V 16 x 128 = 2048 values; 16384 cells x 27 layers x 3072 x 2 B
    # = 2592 MiB, V 1728 MiB. Non-unified: 8 streams of 2048 cells, the same bytes.
    result = llama("deepseek-v2-lite", tokens=2048, batch=n_seq, n_ctx=16384, kv_unified=unified, mla="none")
    assert squashed(log_lines(result)) == [squash(line)]


def test_qwen_7b_chat_streams_round_up_and_oom_sizes():
    # GitHub repository file, search-index file id 68952056531 (probe logs). 32 layers MHA 4096 values;
    # q8_0 row 4352 B. -c 4096 -np 10: 409 -> 512 per stream; 512 x 10 x 32 x 4352 B = 680 MiB per K and V.
    model = dense("qwen-7b-chat", 32, 32, 128, heads=32, hidden=4096)
    split = llama(model, tokens=409, batch=10, n_ctx=4096, kv_dtype="q8_0", flash_attn=True)
    assert log_lines(split) == ["llama_kv_cache: size = 1360.00 MiB (   512 cells,  32 layers, 10/10 seqs), "
                                "K (q8_0):  680.00 MiB, V (q8_0):  680.00 MiB"]
    unified = llama(model, tokens=512, batch=10, n_ctx=5120, kv_dtype="q8_0", flash_attn=True, kv_unified=True)
    assert squashed(log_lines(unified)) == [squash("llama_kv_cache: size = 1360.00 MiB (  5120 cells,  32 layers, "
                                                   "10/1 seqs),  K (q8_0):  680.00 MiB, V (q8_0):  680.00 MiB")]
    # f16, -c 32768 -np 10: 3276 -> 3328 per stream, "rounding down to 33280"; allocating 16640.00 MiB
    # = 33280 x 32 x 4096 x 2 B x (K, V). With --kv-unified: 32768 cells, 16384.00 MiB.
    oom = llama(model, tokens=3276, batch=10, n_ctx=32768)
    assert oom.details.cells_total == 33280 and oom.kv_bytes == 16640 * MiB
    assert oom.notes == ("n_ctx is not divisible by n_seq_max - rounding down to 33280",)
    assert llama(model, tokens=3276, batch=10, n_ctx=32768, kv_unified=True).kv_bytes == 16384 * MiB


def test_llama_70b_over_two_rpc_devices_july_2025():
    # GitHub repository file, search-index file id 21146195652 (RPC cluster notes). Llama-3.x-70B: 80 layers,
    # 8 KV heads x 128: 4096 x 80 x 1024 x 2 B = 640 MiB per K and V; 16 MiB per layer.
    # Layer split, 2 devices: il / 81 < 0.5 for il <= 40 -> 41 layers (656.00 MiB) and 39 (624.00 MiB)
    # its "1/1 seqs" is PR #15040's form (4fdea540b, 2025-08-02; "%2u/%2u" from PR #14363 before): a build of
    # 2025-08-02 to 08-20 (llama_kv_cache_unified: until PR #15467)
    result = llama("llama-3.3-70b", tokens=4096, n_ctx=4096, flash_attn=False, build="2025-08-05", pp=2)
    assert log_lines(result) == ["llama_kv_cache_unified: size = 1280.00 MiB (  4096 cells,  80 layers,  1/1 seqs), "
                                 "K (f16):  640.00 MiB, V (f16):  640.00 MiB"]
    assert [d["buffer_mib"]["kv"] for d in result.details.devices] == [656.0, 624.0]
    assert result.kv_bytes == 656 * MiB and result.kv_bytes_all_devices == 1280 * MiB


def test_llama32_1b_wasi_nn_one_seqs_format():
    # GitHub repository file, search-index file id 18289010330 (WasmEdge WASI-NN log, 2025-07-09).
    # 16 layers, 8 KV heads x 64: 4096 x 16 x 512 x 2 B = 64 MiB per K and V
    result = llama("llama-3.2-1b", tokens=4096, flash_attn=False, build="2025-07-09")
    assert log_lines(result) == ["llama_kv_cache_unified: size =  128.00 MiB (  4096 cells,  16 layers,  1 seqs), "
                                 "K (f16):   64.00 MiB, V (f16):   64.00 MiB"]


def test_phi3_mini_window_not_used_by_llama_cpp():
    # GitHub repository file, search-index file id 68635202314 (llama-server log). Phi-3-mini-4k: every layer
    # has sliding_window 2047, which llama.cpp ignores: 4096 x 32 x 3072 x 2 B = 768 MiB per K and V
    result = llama("phi-3-mini-4k", tokens=4096, n_batch=256, n_ubatch=256, flash_attn=False, build="2025-06-15")
    assert log_lines(result) == ["llama_kv_cache_unified: size = 1536.00 MiB (  4096 cells,  32 layers,  1 seqs), "
                                 "K (f16):  768.00 MiB, V (f16):  768.00 MiB"]
    assert "does not use the sliding window" in result.notes[0]


def test_deepseek_r1_qwen3_8b_lm_studio_and_partial_offload():
    # GitHub repository file, search-index file id 43394454807 (LM Studio log, 2025-07-22, '1/ 1 seqs').
    # DeepSeek-R1-0528-Qwen3-8B has Qwen3-8B's architecture: 36 layers, 8 x 128.
    # 131072 x 36 x 1024 x 2 B = 9216 MiB per K and V; 512 MiB per layer: CPU 17 layers 8704.00, CUDA0 19 layers 9728.00
    result = llama("qwen3-8b", tokens=131072, kv_unified=True, flash_attn=False, build="2025-07-17")
    assert log_lines(result, style="unified_streams") == [
        "llama_kv_cache_unified: size = 18432.00 MiB (131072 cells,  36 layers,  1/ 1 seqs), "
        "K (f16): 9216.00 MiB, V (f16): 9216.00 MiB"]
    assert sum(result.per_layer[:17]) == 8704 * MiB and sum(result.per_layer[17:]) == 9728 * MiB


def test_deepseek_r1_mla_latent_with_v_mid_2025_and_without_v_now():
    # GitHub repository file, search-index file id 24785785173 (an 'Example:' line in a regex comment).
    # MLA GGUF, one head: K 512 + 64 = 576 q4_0 = 324 B, V 512 q4_0 = 288 B per cell;
    # 131072 x 61 x 324 B = 2470.50 MiB, x 288 B = 2196.00 MiB. Since PR #19067 the V tensor is gone.
    mid_2025 = llama("deepseek-r1", tokens=131072, kv_dtype="q4_0", flash_attn=True, build="2025-06-01")
    assert mid_2025.details.mla == "latent+v"
    assert squashed(log_lines(mid_2025)) == [squash(
        "llama_kv_cache_unified: size = 4666.50 MiB (131072 cells, 61 layers, 1 seqs), "
        "K (q4_0): 2470.50 MiB, V (q4_0): 2196.00 MiB")]
    now = llama("deepseek-r1", tokens=131072, kv_dtype="q4_0")
    assert now.details.mla == "latent" and now.v_bytes == 0
    assert log_lines(now) == ["llama_kv_cache: size = 2470.50 MiB (131072 cells,  61 layers,  1/1 seqs), "
                              "K (q4_0): 2470.50 MiB, V (q4_0):    0.00 MiB"]


def test_qwen35_27b_q4_0_attention_layers():
    # GitHub repository file, search-index file id 70517769573 ('2 x 16 x 4 x 256 x 18/32 x 8192').
    # 16 attention layers x 1024 values q4_0 = 576 B: 8192 x 16 x 576 B = 72 MiB per K and V
    result = llama("qwen3.5-27b", tokens=8192, kv_dtype="q4_0", flash_attn=True)
    assert squashed(log_lines(result))[0] == squash(
        "llama_kv_cache: size = 144.00 MiB (8192 cells, 16 layers, 1/1 seqs), K (q4_0): 72.00 MiB, V (q4_0): 72.00 MiB")


def test_qwen35_27b_with_rollback_snapshots():
    # GitHub repository file, search-index file id 69838590195 (notes at --log-verbosity 4).
    # KV: 200704 (= 784 x 256) x 16 x 576 B = 1764 MiB. Recurrent rows = 1 x (1 + 4) = 5:
    # S = 5 x 48 x 3 MiB = 720 MiB, R = 5 x 48 x 120 KiB = 28.125 MiB -> "28.12", total 748.125 -> "748.12"
    result = llama("qwen3.5-27b", tokens=200704, kv_dtype="q4_0", n_rs_seq=4)
    assert log_lines(result) == [
        "llama_kv_cache: size = 3528.00 MiB (200704 cells,  16 layers,  1/1 seqs), K (q4_0): 1764.00 MiB, V (q4_0): 1764.00 MiB",
        "llama_memory_recurrent: size =  748.12 MiB (     1 cells,  64 layers,  1 seqs  4 rs_seq), R (f32):   28.12 MiB, S (f32):  720.00 MiB",
    ]


def test_gemma4_12b_two_streams_swa_cache():
    # GitHub repository file, search-index file id 62861137369 (llmbench notes). -c 8192 -np 2, f16.
    # non-SWA: 4096 per stream x 2 x 8 layers x 512 x 2 B = 64 MiB per K and V.
    # SWA: pad256(min(4096, 1024 + 512)) = 1536 per stream x 2 x 40 layers x 2048 x 2 B = 480 MiB per K and V.
    # The notes also report -ub 256 -> 1280 SWA cells (1024 + 256).
    result = llama(gemma4_12b(), tokens=4096, batch=2, n_ctx=8192)
    assert squashed(log_lines(result)) == squashed([
        "llama_kv_cache_iswa: creating non-SWA KV cache, size = 4096 cells",
        "llama_kv_cache: size =  128.00 MiB ( 4096 cells,  8 layers, 2/2 seqs), K (f16): 64.00 MiB, V (f16): 64.00 MiB",
        "llama_kv_cache_iswa: creating     SWA KV cache, size = 1536 cells",
        "llama_kv_cache: size =  960.00 MiB ( 1536 cells, 40 layers, 2/2 seqs), K (f16): 480.00 MiB, V (f16): 480.00 MiB",
    ])
    assert llama(gemma4_12b(), tokens=4096, batch=2, n_ctx=8192, n_ubatch=256).details.swa_cells == 1280


def test_gemma4_12b_unified_auto_slots_swa_grows_with_sequences():
    # GitHub repository file, search-index file ids 57409019887 / 57750453327 (the notes cut the lines after
    # 'seqs)'). -np auto: 4 slots, unified, q8_0. non-SWA: 8192 x 8 x 544 B x 2 = 68 MiB.
    # SWA: pad256(min(8192, 1024 x 4 + 512)) = 4608 cells x 40 x 2176 B x 2 = 765 MiB.
    result = llama(gemma4_12b(), tokens=2048, batch=4, n_ctx=8192, kv_unified=True, kv_dtype="q8_0")
    sizes = [squash(line.split("seqs)")[0] + "seqs)") for line in log_lines(result) if "size =" in line and "MiB" in line]
    assert sizes == [squash("llama_kv_cache: size =   68.00 MiB ( 8192 cells,  8 layers, 4/1 seqs)"),
                     squash("llama_kv_cache: size =  765.00 MiB ( 4608 cells, 40 layers, 4/1 seqs)")]
    swa = result.details.caches[1]
    assert (swa["k_mib"], swa["v_mib"]) == (382.5, 382.5)


def test_qwen3_32b_ollama_q8_0_and_partial_offload():
    # GitHub repository file, search-index file id 65940070224 (Ollama server log). 64 layers, 8 x 128:
    # q8_0 1088 B; 8192 x 64 x 1088 B = 544 MiB per K and V; 17 MiB per layer: CPU 35 layers 595.00, CUDA0 29 493.00
    result = llama("qwen3-32b", tokens=8192, kv_dtype="q8_0", flash_attn=True)
    assert log_lines(result) == ["llama_kv_cache: size = 1088.00 MiB (  8192 cells,  64 layers,  1/1 seqs), "
                                 "K (q8_0):  544.00 MiB, V (q8_0):  544.00 MiB"]
    assert sum(result.per_layer[:35]) == 595 * MiB and sum(result.per_layer[35:]) == 493 * MiB


# ---- the rules --------------------------------------------------------------------------------

@pytest.mark.parametrize("build, flash_attn, cells", [
    ("2023-06-01", False, 4100),   # no padding
    ("2024-03-21", False, 4100),   # still none: PR #4280 (2023-12-03) padded the graph's view, not the cache
    ("2024-03-22", False, 4128),   # PR #6177: pad 32
    ("2024-04-29", False, 4128),   # ... to the day before flash attention (PR #5021)
    ("2024-04-30", False, 4352),   # PR #5021: pad 256
    ("2024-06-01", False, 4128),   # PR #7257: 32 without flash attention ...
    ("2024-06-01", True, 4352),    # ... 256 with it
    ("2025-10-30", True, 4100),    # PR #16812: no padding for a week
    ("current", False, 4352),      # PR #17046: 256 always
])
def test_padding_eras(build, flash_attn, cells):
    result = llama("llama-3.2-1b", tokens=4100, build=build, flash_attn=flash_attn)
    assert result.details.cells == cells
    assert result.kv_bytes == cells * 16 * 512 * 2 * 2  # 16 layers x 512 values x 2 B x (K, V)


def test_streams_before_and_after_pr_14363_and_the_unverified_window():
    model = dense("toy", 2, 1, 64, heads=1, hidden=64)
    before = llama(model, batch=3, n_ctx=1000, build="2025-06-01", flash_attn=False)
    assert (before.details.n_stream, before.details.cells) == (1, 1024)  # one buffer, pad 32
    window = llama(model, batch=3, n_ctx=1000, build="2025-09-01", flash_attn=False)
    assert (window.details.n_stream, window.details.cells) == (3, 352)  # pad32(ceil(1000 / 3))
    now = llama(model, batch=3, n_ctx=1000)
    assert (now.details.n_stream, now.details.cells, now.details.cells_total) == (3, 512, 1536)


def test_swa_cells_rule_unified_full_and_before_the_swa_cache():
    model = gemma3_270m()
    # non-unified: pad256(min(n_ctx_seq, n_swa + n_ubatch)); n_ubatch = min(n_ctx, n_batch, n_ubatch)
    assert llama(model, n_ctx=4096, n_ubatch=100).details.swa_cells == 768  # pad256(612)
    assert llama(model, n_ctx=300).details.swa_cells == 512  # pad256(min(512, 512 + 300)) with n_ctx 512
    # unified: the window counts once per sequence
    assert llama(model, batch=4, n_ctx=8192, kv_unified=True).details.swa_cells == 2560  # 4 x 512 + 512
    # 2025-09 era: min(n_ctx_seq, pad(n_swa + n_ubatch, 32)) without flash attention
    assert llama(model, n_ctx=4096, n_ubatch=100, build="2025-09-01", flash_attn=False).details.swa_cells == 640
    full = llama(model, n_ctx=4096, swa_full=True)
    assert full.details.swa_cells == 4096 and "using full-size SWA cache" in full.notes[0]
    old = llama(model, n_ctx=4096, build="2025-05-01")
    assert old.details.swa_cells is None and old.details.caches[0]["layers"] == 18


def test_llama4_chunked_layers_use_the_swa_cache():
    result = llama("llama-4-scout-17b-16e", tokens=32768)
    base, swa = result.details.caches
    assert (base["layers"], swa["layers"]) == (12, 36)
    assert swa["cells"] == 8192 + 512  # pad256(min(32768, 8192 + 512))


def test_gemma3n_shared_layers_hold_no_cache():
    result = llama("gemma-3n-e2b", tokens=4096)
    assert [c["layers"] for c in result.details.caches] == [4, 16]  # 10 KV-sharing layers left out
    assert result.per_layer[20:] == (0,) * 10


def test_mla_modes_and_their_default_per_build():
    # 61 layers x 1024 cells x f16: latent 576, latent+v 576 + 512, none 128 x 192 + 128 x 128 values
    per_value = 61 * 1024 * 2
    assert llama("deepseek-v3", tokens=1024, mla="latent").kv_bytes == per_value * 576
    mid = llama("deepseek-v3", tokens=1024, build="2025-06-01")
    assert (mid.details.mla, mid.k_bytes, mid.v_bytes) == ("latent+v", per_value * 576, per_value * 512)
    old = llama("deepseek-v3", tokens=1024, build="2025-03-01")
    assert (old.details.mla, old.k_bytes, old.v_bytes) == ("none", per_value * 24576, per_value * 16384)


def test_variable_v_widths_are_padded_without_flash_attention():
    # gemma4 full layers V 1 x 512, SWA layers V 8 x 256 = 2048: without FA every V row is 2048 wide
    fa = llama(gemma4_12b(), tokens=4096, n_ctx=4096, swa_full=True)
    no_fa = llama(gemma4_12b(), tokens=4096, n_ctx=4096, swa_full=True, flash_attn=False)
    assert no_fa.v_bytes - fa.v_bytes == 8 * 4096 * (2048 - 512) * 2
    assert no_fa.k_bytes == fa.k_bytes
    assert "padding V cache to 2048" in " ".join(no_fa.notes)


def gemma4_six(kv_sliding, kv_full):
    # Gemma 4 shrunk to 6 layers as tests/oracles/test_gguf_arches_oracle.py writes it: 5 SWA (kv_sliding x 256,
    # window 1024) then 1 full (kv_full x 512)
    layers = [Layer("sliding", kv_heads=kv_sliding, head_dim_k=256, head_dim_v=256, window=1024)] * 5
    return toy("gemma-4-six", [*layers, Layer("full", kv_heads=kv_full, head_dim_k=512, head_dim_v=512)],
               heads=16, hidden=2816, model_type="gemma4_text")


@pytest.mark.parametrize(("kv_sliding", "kv_full", "full_on", "full_off", "swa"), [
    # 26B-A4B: SWA 5 x 1536 x (2048 + 2048) x 2 B = 60 MiB; full 4096 x (1024 + 1024) x 2 = 16 MiB with FA,
    # 4096 x (1024 + 2048) x 2 = 24 MiB without (V padded to the SWA layers' 8 x 256 = 2048)
    (8, 2, ("16.00", "8.00", "8.00"), ("24.00", "8.00", "16.00"), ("60.00", "30.00", "30.00")),
    # 31B: SWA 5 x 1536 x (4096 + 4096) x 2 = 120 MiB; full 4096 x (2048 + 2048) x 2 = 32 MiB with FA,
    # 4096 x (2048 + 4096) x 2 = 48 MiB without
    (16, 4, ("32.00", "16.00", "16.00"), ("48.00", "16.00", "32.00"), ("120.00", "60.00", "60.00"))])
def test_gemma4_six_layers_printed_by_llamacpp_with_and_without_flash_attention(kv_sliding, kv_full, full_on,
                                                                                 full_off, swa):
    # llama.cpp 0c1e57098 printed these lines for the 6-layer GGUFs (n_ctx 4096, n_ubatch 512, swa_full off):
    # SWA cells min(4096, 1024 + 512) = 1536; without FA every layer's V row is n_embd_v_gqa_max wide
    # (src/llama-kv-cache.cpp L157-L161, L208-L210)
    model = gemma4_six(kv_sliding, kv_full)
    for fa, full in (("on", full_on), ("off", full_off)):
        result = llama(model, tokens=4096, n_ctx=4096, flash_attn=fa)
        sizes = [line for line in result.log_lines if line.startswith("llama_kv_cache: size")]
        assert squashed(sizes) == [
            squash(f"llama_kv_cache: size = {full[0]} MiB ( 4096 cells, 1 layers, 1/1 seqs), "
                   f"K (f16): {full[1]} MiB, V (f16): {full[2]} MiB"),
            squash(f"llama_kv_cache: size = {swa[0]} MiB ( 1536 cells, 5 layers, 1/1 seqs), "
                   f"K (f16): {swa[1]} MiB, V (f16): {swa[2]} MiB")]
        assert result.kv_bytes == (float(full[0]) + float(swa[0])) * MiB


def test_defaults_f16_cache_whatever_the_model_dtype_and_one_sequence_per_batch_row():
    result = llama("llama-3.1-8b", tokens=1000, batch=2)
    assert result.details.type_k == result.details.type_v == "f16" and result.kv_dtype == "f16"
    assert (result.details.n_seq, result.details.n_stream, result.details.cells) == (2, 2, 1024)
    assert llama("llama-3.1-8b", tokens=1000, type_k="q8_0", type_v="f16").kv_dtype == "q8_0/f16"


def test_capacity_counts_cells_in_whole_pads():
    # llama-3.1-8b: 32 layers x 1024 values x 2 B x (K, V) = 131072 B per cell
    assert capacity("llama-3.1-8b", engine="llama.cpp", kv_memory="16GiB").tokens == 131072
    just_under = capacity("llama-3.1-8b", engine="llama.cpp", kv_memory=16 * 2**30 - 1, max_model_len=8192)
    assert (just_under.blocks, just_under.block_size, just_under.max_concurrency) == (130816, 1, 1.0)
    four = capacity("llama-3.1-8b", engine="llama.cpp", kv_memory="16GiB", n_seq=4, max_model_len=8192)
    assert (four.tokens, four.longest_request_tokens, four.max_concurrency) == (131072, 32768, 4.0)
    hybrid = capacity("qwen3.5-27b", engine="llama.cpp", kv_memory="1GiB")
    state = 48 * (30720 + 786432) * 4
    assert hybrid.tokens == (2**30 - state) // (16 * 1024 * 2 * 2) // 256 * 256


# ---- bad input --------------------------------------------------------------------------------

def test_quantised_v_needs_flash_attention_with_llama_cpp_words():
    with pytest.raises(ValueError, match="quantized V cache requires flash_attn to be enabled"):
        llama("llama-3.1-8b", kv_dtype="q8_0", flash_attn=False)
    with pytest.raises(ValueError, match="V cache quantization requires flash_attn"):
        llama("llama-3.1-8b", kv_dtype="q8_0", build="2025-03-01")
    assert llama("llama-3.1-8b", type_k="q8_0", flash_attn=False).details.type_k == "q8_0"


def test_mla_gguf_refuses_different_k_and_v_types():
    # src/llama-context.cpp (llama-cpp-python 0.3.36, llama.cpp 0c1e57098): hparams.is_mla() and
    # type_k != type_v -> "model does not support different K (q8_0) and V (f16) cache types", checked
    # before the quantised-V rule, so it wins even with flash attention off.
    with pytest.raises(ValueError, match=r"model does not support different K \(q8_0\) and V \(f16\) cache types"):
        llama("deepseek-v2-lite", tokens=4096, type_k="q8_0", type_v="f16")
    with pytest.raises(ValueError, match=r"different K \(f16\) and V \(q8_0\)"):
        llama("deepseek-v2-lite", tokens=4096, type_k="f16", type_v="q8_0", flash_attn=False)
    # same types pass; a GGUF without the MLA split (mla="none") is not is_mla() and takes mixed types
    assert llama("deepseek-v2-lite", tokens=4096, kv_dtype="q8_0").details.type_k == "q8_0"
    assert llama("deepseek-v2-lite", tokens=4096, type_k="q8_0", type_v="f16", mla="none").k_bytes > 0


def test_quantised_block_must_divide_each_head_with_flash_attention():
    # src/llama-context.cpp (llama.cpp 0c1e57098): flash attention on or auto and a quantised type: the
    # 32-value block must divide the per-head dim. phi-3-medium has head_dim 5120 / 40 = 128: fine; a
    # head of 80 (phi-2 style) is refused although its row of 32 x 80 = 2560 values is whole blocks.
    model = Model.from_hf_config({"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 2560,
                                  "num_attention_heads": 32, "num_key_value_heads": 32,
                                  "max_position_embeddings": 4096})
    with pytest.raises(ValueError, match="K cache type q8_0 with block size 32 does not divide n_embd_head_k=80"):
        llama(model, tokens=4096, kv_dtype="q8_0")                   # flash attention auto
    with pytest.raises(ValueError, match="V cache type q4_0 with block size 32 does not divide n_embd_head_v=80"):
        llama(model, tokens=4096, type_v="q4_0", flash_attn=True)
    # flash attention off: only the row must be whole blocks; 2560 q8_0 values = 80 blocks x 34 B
    assert llama(model, tokens=4096, type_k="q8_0", flash_attn=False).k_bytes == 2 * 4096 * 80 * 34


def test_unknown_mla_mode_lists_the_valid_ones():
    with pytest.raises(ValueError, match="mla must be one of latent, latent\\+v, none, got 'compressed'"):
        llama("deepseek-v3", mla="compressed")
    with pytest.raises(ValueError, match="needs a build from 2026-01-25 on"):
        llama("deepseek-v3", mla="latent", build="2025-06-01")
    with pytest.raises(ValueError, match="keep no V tensor"):
        llama("deepseek-v3", mla="latent+v")
    with pytest.raises(ValueError, match="has no MLA layers"):
        llama("llama-3.1-8b", mla="latent")
    # DeepSeek-V3.2 is sized from PR #23346 on (tests/engines/test_llamacpp_dsa_builds.py); an earlier build,
    # which has no deepseek32 architecture, and a mode other than the K-only latent are refused
    with pytest.raises(ValueError, match="have no deepseek32 architecture; build 2026-02-01"):
        llama("deepseek-v3.2", build="2026-02-01")
    with pytest.raises(ValueError, match="caches the latent alone"):
        llama("deepseek-v3.2", mla="none")


def test_cache_type_names_must_be_ggml_cache_types():
    valid = "f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1"
    with pytest.raises(ValueError, match=f"type_k must be a llama.cpp cache type \\({valid}\\), got 'fp8'"):
        llama("llama-3.1-8b", kv_dtype="fp8")
    with pytest.raises(ValueError, match="type_v must be a llama.cpp cache type .* got 'q3_K'"):
        llama("llama-3.1-8b", type_v="q3_K")


def test_a_context_past_what_minus_c_reads_is_refused():
    # -c goes through std::stoi: an int (llama.cpp@0c1e57098 common/arg.cpp#L853-L857); the fuzz found a 2**40
    # context searched for 33 s on CI before this refusal
    assert llama("qwen3-4b", tokens=2**31 - 1).details.n_ctx == 2**31     # padded to 256 cells, in its uint32_t
    with pytest.raises(ValueError, match="n_ctx=2,147,483,648 cells .* at most 2,147,483,647"):
        llama("qwen3-4b", tokens=2**31)
    with pytest.raises(ValueError, match="n_ctx=2,147,483,648 cells"):
        llama("qwen3-4b", tokens=2**30, batch=2)
    with pytest.raises(ValueError, match="n_ctx=1,099,511,627,776 cells"):
        fit("glm-5.1", gpu="h100-sxm-80gb", engine="llama.cpp", context=2**40)


def test_sequences_that_do_not_fit_the_streams():
    with pytest.raises(ValueError, match="batch=8 sequences need n_seq >= 8"):
        llama("llama-3.1-8b", batch=8, n_seq=4)
    with pytest.raises(ValueError, match="n_seq_max must be <= 256"):
        llama("llama-3.1-8b", batch=300)
    with pytest.raises(ValueError, match="need 5000 cells in each sequence's stream, which holds 1024"):
        llama("llama-3.1-8b", tokens=5000, batch=4, n_ctx=4096)
    with pytest.raises(ValueError, match="need 8000 cells in the shared cache, which holds 4096"):
        llama("llama-3.1-8b", tokens=2000, batch=4, n_ctx=4096, kv_unified=True)


def test_tensor_parallel_refused_and_bad_options():
    with pytest.raises(ValueError, match="tp=2: llama.cpp does not split the KV cache by heads"):
        llama("llama-3.1-8b", tp=2)
    with pytest.raises(ValueError, match="build must be the llama.cpp build's date"):
        llama("llama-3.1-8b", build="b6000")
    with pytest.raises(ValueError, match="nextn=True but llama-3.1-8b has no MTP/NextN layers"):
        llama("llama-3.1-8b", nextn=True)
    with pytest.raises(ValueError, match="style must be one of kv_self, unified"):
        log_lines(llama("llama-3.1-8b"), style="2024")
    with pytest.raises(ValueError, match="log_lines needs a llama.cpp estimate"):
        log_lines(estimate("llama-3.1-8b", tokens=1))

"""DeepSeek-V4 under kvmem's trtllm mode: DeepseekV4CacheManager's buffers (kvmem/engines/trtllm/dsv4.py cites
each rule), worked by hand on DeepSeek-V4-Flash's published config.

DeepSeek-V4-Flash: 43 layers, compress_ratios [0, 0, 4, 128, 4, 128, ..., 4]: 2 layers of ratio 1 (0 read as 1),
21 of ratio 4, 20 of ratio 128; head_dim 512, index_head_dim 128, sliding_window 128, bf16.
Bytes a token per buffer (get_token_bytes; compressed rows divided by the ratio, floored):
    SWA                     512 x 2 = 1,024 (fp8 cache: 512)
    COMPRESS                1,024 // 4 = 256 (ratio 4), 1,024 // 128 = 8 (ratio 128)
    COMPRESSOR_KV, _SCORE   2 x 512 x 4 = 4,096 each (ratio 4, overlap), 512 x 4 = 2,048 each (ratio 128)
    INDEXER_COMPRESS        (128 + 128 // 128 x 4) // 4 = 33 (fp8), (64 + 4) // 4 = 17 (fp4)
    INDEXER_COMPRESSOR_*    2 x 128 x 4 = 1,024 each
    ratio 1: 1,024; ratio 4: 1,024 + 256 + 2 x 4,096 + 33 + 2 x 1,024 = 11,553; ratio 128: 1,024 + 8 + 2 x 2,048 = 5,128
    get_cache_bytes_per_token = 2 x 1,024 + 21 x 11,553 + 20 x 5,128 = 347,221
"""

import json
import pathlib

import pytest

import kvmem
from kvmem.engines import check_family, engine_estimate, engine_spec
from kvmem.engines.trtllm import dsv4
from kvmem.reach import SIZED, family_reach

CORPUS = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "configs" / "corpus"
FLASH = json.loads((CORPUS / "deepseek-ai--DeepSeek-V4-Flash.json").read_text())
RUN = {"tokens_per_block": 128, "indexer_k_dtype": "fp8"}


def _flash(**changes):
    return kvmem.Model.from_hf_config({**FLASH, **changes})


def test_the_flash_layers_are_two_ratio_1_21_ratio_4_and_20_ratio_128():
    ratios = [layer.compressor.rate if layer.compressor else 1 for layer in _flash().layers]
    assert (ratios.count(1), ratios.count(4), ratios.count(128)) == (2, 21, 20)


def test_get_cache_bytes_per_token_by_hand():
    model = _flash()
    bufs = dsv4.buffers(model, k_dtype_name="bf16", indexer_k_dtype="fp8")
    assert dsv4.cache_bytes_per_token(bufs, range(43)) == 2 * 1024 + 21 * 11553 + 20 * 5128 == 347221
    # fp4 indexer: 17 instead of 33 on each ratio-4 layer
    bufs = dsv4.buffers(model, k_dtype_name="bf16", indexer_k_dtype="fp4")
    assert dsv4.cache_bytes_per_token(bufs, range(43)) == 347221 - 21 * 16 == 346885
    # fp8 cache: SWA 512, COMPRESS 128 (ratio 4) / 4 (ratio 128); ratio 4: 512 + 128 + 8,192 + 33 + 2,048 = 10,913,
    # ratio 128: 512 + 4 + 4,096 = 4,612
    bufs = dsv4.buffers(model, k_dtype_name="fp8_e4m3", indexer_k_dtype="fp8")
    assert dsv4.cache_bytes_per_token(bufs, range(43)) == 2 * 512 + 21 * 10913 + 20 * 4612 == 322437


def test_flash_1024_tokens_blocks_of_128():
    # 1,024 tokens = 8 blocks of 128. Whole-sequence buffers keep 8; a window w frees blocks
    # [0, (1,024 + 1 - w) // 128): w = 128 -> 7 freed, 1 kept; w = 8 -> 7 freed, 1 kept.
    # ratio 1:   SWA 1 x 128 x 1,024 = 131,072
    # ratio 4:   SWA 131,072 + COMPRESS 8 x 32 rows x 1,024 = 262,144 + states 2 x 1 x 128 x 4,096 = 1,048,576
    #            + indexer rows 8 x 32 x 132 = 33,792 + indexer states 2 x 128 x 1,024 = 262,144 -> 1,737,728
    # ratio 128: SWA 131,072 + COMPRESS 8 x 1 row x 1,024 = 8,192 + states 2 x 128 x 2,048 = 524,288 -> 663,552
    est = engine_estimate(_flash(), engine="trtllm", tokens=1024, **RUN)
    assert est.total_bytes == 2 * 131072 + 21 * 1737728 + 20 * 663552 == 50025472
    # states (the compressors' fp32 rows): 21 x (1,048,576 + 262,144) + 20 x 524,288
    assert est.state_bytes == 21 * 1310720 + 20 * 524288 == 38010880
    assert est.kv_bytes == 50025472 - 38010880
    assert est.details.bytes_per_token == 347221
    assert est.details.blocks_per_sequence == {0: 8, 8: 1, 128: 1}
    assert engine_estimate(_flash(), engine="trtllm", tokens=1024, batch=2, **RUN).total_bytes == 2 * 50025472


def test_flash_1000_tokens_blocks_of_256():
    # ceil(1,000 / 256) = 4 blocks; windows 128 and 8 free (1,001 - w) // 256 = 3 -> 1 block kept
    # ratio 1:   256 x 1,024 = 262,144
    # ratio 4:   262,144 + 4 x 64 x 1,024 + 2 x 256 x 4,096 + 4 x 64 x 132 + 2 x 256 x 1,024
    #            = 262,144 + 262,144 + 2,097,152 + 33,792 + 524,288 = 3,179,520
    # ratio 128: 262,144 + 4 x 2 x 1,024 + 2 x 256 x 2,048 = 262,144 + 8,192 + 1,048,576 = 1,318,912
    est = engine_estimate(_flash(), engine="trtllm", tokens=1000, tokens_per_block=256, indexer_k_dtype="fp8")
    assert est.total_bytes == 2 * 262144 + 21 * 3179520 + 20 * 1318912 == 93672448


def test_pipeline_parallel_reports_the_heavier_stage():
    # pp 2 splits 43 layers 22 + 21 (Mapping.pp_layers); stage 0: 2 ratio-1 + 10 ratio-4 + 10 ratio-128 =
    # 24,274,944 B at 1,024 tokens; stage 1 (layers 22..42): 11 ratio-4 + 10 ratio-128 = 25,750,528 B
    est = engine_estimate(_flash(), engine="trtllm", tokens=1024, pp=2, **RUN)
    assert est.total_bytes == 11 * 1737728 + 10 * 663552 == 25750528
    assert est.details.bytes_per_token == 11 * 11553 + 10 * 5128 == 178363


def test_every_tp_rank_holds_the_whole_latent():
    one = engine_estimate(_flash(), engine="trtllm", tokens=1024, **RUN)
    four = engine_estimate(_flash(), engine="trtllm", tokens=1024, tp=4, **RUN)
    assert four.total_bytes == one.total_bytes and any("tp 4" in n for n in four.notes)


def test_the_defaults_are_refused_with_tensorrt_llms_reasons():
    model = _flash()
    with pytest.raises(ValueError, match=r"tokens_per_block 32: .*asserts tokens_per_block in \[128, 256\]"):
        engine_estimate(model, engine="trtllm", tokens=1024)
    with pytest.raises(ValueError, match="indexer_k_dtype: .*the GPU decides"):
        engine_estimate(model, engine="trtllm", tokens=1024, tokens_per_block=128)
    with pytest.raises(ValueError, match="asserts dtype in"):
        engine_estimate(model, engine="trtllm", tokens=1024, kv_dtype="fp16", **RUN)
    with pytest.raises(ValueError, match="max_attention_window"):
        engine_estimate(model, engine="trtllm", tokens=1024, max_attention_window=[4096], **RUN)
    with pytest.raises(ValueError, match="window_size == 128"):
        engine_estimate(_flash(sliding_window=256), engine="trtllm", tokens=1024, **RUN)
    with pytest.raises(ValueError, match="one byte quota"):
        kvmem.capacity(model, engine="trtllm", kv_memory=10 * 2**30, **RUN)


def test_the_indexer_option_belongs_to_deepseek_v4():
    with pytest.raises(ValueError, match="no DeepSeek-V4 indexer"):
        engine_estimate("llama-3.1-8b", engine="trtllm", tokens=64, indexer_k_dtype="fp8")
    assert engine_spec("trtllm").options["indexer_k_dtype"] is None


def test_the_family_is_declared_and_compressed_layers_pass_the_check():
    check_family(engine_spec("trtllm"), _flash())          # raised FamilyNotChecked before trtllm sized V4
    assert family_reach()["deepseek_v4"]["trtllm"] == (SIZED, "")

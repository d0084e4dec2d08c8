"""llama.cpp's DeepSeek-V4 memory, llama_kv_cache_dsv4 (kvmem/engines/llamacpp/dsv4.py), on the published
configs; every number by hand from src/llama-kv-cache-dsv4.cpp's constructor."""

import json
import pathlib

import pytest

import kvmem
from kvmem.engines import engine_estimate

CORPUS = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "configs" / "corpus"
MIB = 1 << 20


def _model(stem):
    return kvmem.Model.from_hf_config(json.loads((CORPUS / f"{stem}.json").read_text()))


def test_flash_at_8k_one_sequence():
    # DeepSeek-V4-Flash: 43 layers, head_dim 512 (one K=V head), window 128, ratios: 2 x 0, 21 x 4, 20 x 128,
    # index_head_dim 128; f16, n_ctx 8,192, n_ubatch 512
    e = engine_estimate(_model("deepseek-ai--DeepSeek-V4-Flash"), engine="llama.cpp", tokens=8192)
    swa = 43 * 768 * 512 * 2           # GGML_PAD(min(8192, 128 + 512), 256) = 768 cells: 33,816,576
    csa = 21 * 2048 * 512 * 2          # GGML_PAD(ceil(8192 / 4), 256) = 2,048 cells: 44,040,192
    hca = 20 * 256 * 512 * 2           # GGML_PAD(ceil(8192 / 128) = 64, 256) = 256 cells: 5,242,880
    lid = 21 * 2048 * 128 * 2          # the indexer keys, CSA's cells: 11,010,048
    assert (e.k_bytes, e.v_bytes) == (swa + csa + hca + lid, 0) == (94_109_696, 0)
    # compressor states, f32 kv + score: CSA 8 x 1,024, HCA 128 x 512, indexer 8 x 256, one plane
    assert e.state_bytes == 21 * 2 * 8 * 1024 * 4 + 20 * 2 * 128 * 512 * 4 + 21 * 2 * 8 * 256 * 4 == 12_206_080
    assert e.log_lines[4] == ("llama_kv_cache: size =   32.25 MiB (   768 cells,  43 layers,  1/1 seqs), "
                              "K (f16):   32.25 MiB, V (f16):    0.00 MiB")
    assert e.log_lines[8] == ("llama_kv_cache: size =    5.00 MiB (   256 cells,  20 layers,  1/1 seqs), "
                              "K (f16):    5.00 MiB, V (f16):    0.00 MiB")
    assert e.log_lines[7] == "llama_kv_cache_dsv4: creating DSV4 HCA compressed KV cache, size = 64 cells"
    assert e.log_lines[-3] == ("llama_dsv4_comp_state: hca ratio = 128, state = 128 x 512, streams = 1, rs_seq = 0, "
                               "layers = 20, size =   10.00 MiB")


def test_pro_four_sequences_q8_0_and_rollback_snapshots():
    # DeepSeek-V4-Pro: 61 layers, 30 of ratio 4 and 31 of ratio 128 (its compress_ratios); -np 4 -c 32768: n_ctx_seq
    # 8,192 a stream, 4 streams; q8_0 K rows 512 / 32 x 34 = 544 B, 128 / 32 x 34 = 136 B; n_rs_seq 2: 3 planes
    model = _model("deepseek-ai--DeepSeek-V4-Pro")
    ratios = model.config["compress_ratios"][:61]
    n4, n128 = ratios.count(4), ratios.count(128)
    e = engine_estimate(model, engine="llama.cpp", tokens=8192, batch=4, kv_dtype="q8_0", n_rs_seq=2)
    swa = 61 * 768 * 544 * 4            # n_ubatch max(512, 2 + 2) = 512
    comp = n4 * 2048 * (544 + 136) * 4 + n128 * 256 * 544 * 4
    assert (n4, n128) == (30, 31)
    assert e.k_bytes == swa + comp == 286_326_784
    planes = 4 * 3
    assert e.state_bytes == planes * (n4 * 2 * 8 * (1024 + 256) * 4 + n128 * 2 * 128 * 512 * 4) == 224_526_336


def test_swa_full_holds_the_whole_stream():
    e = engine_estimate(_model("deepseek-ai--DeepSeek-V4-Flash"), engine="llama.cpp", tokens=8192, swa_full=True)
    assert e.k_bytes == 43 * 8192 * 1024 + 21 * 2048 * 1024 + 20 * 256 * 1024 + 21 * 2048 * 256


@pytest.mark.parametrize("stem", ["sgl-project--DeepSeek-V4-Flash-FP8", "sgl-project--DeepSeek-V4-Pro-FP8"])
def test_reference_format_configs_do_not_convert(stem):
    # conversion/deepseek.py DeepseekV4Model.set_gguf_parameters reads hparams["routed_scaling_factor"] etc.
    with pytest.raises(ValueError, match="reads routed_scaling_factor, norm_topk_prob, swiglu_limit, which this "
                                         "config does not set: it does not convert"):
        engine_estimate(_model(stem), engine="llama.cpp", tokens=1024)


def test_other_builds_and_nextn_are_refused():
    model = _model("deepseek-ai--DeepSeek-V4-Flash")
    with pytest.raises(ValueError, match="modelled at the vendored build 0c1e57098 only"):
        engine_estimate(model, engine="llama.cpp", tokens=1024, build="2026-03-01")
    with pytest.raises(ValueError, match="MTP context"):
        engine_estimate(model, engine="llama.cpp", tokens=1024, nextn=True)


def test_a_hyper_connection_count_but_4_is_refused():
    # build_hc_pre asserts hc == 4 (llama.cpp@0c1e57098 src/models/deepseek4.cpp#L366): the context is never created
    cfg = json.loads((CORPUS / "deepseek-ai--DeepSeek-V4-Flash.json").read_text())
    model = kvmem.Model.from_hf_config(dict(cfg, hc_mult=2), name="hc-2")
    with pytest.raises(ValueError, match=r"hc_mult 2: llama.cpp 0c1e57098 aborts building deepseek4.s graph at context creation"):
        engine_estimate(model, engine="llama.cpp", tokens=1024)

"""Disaggregated prefill/decode (kvmem.disagg): the arithmetic by hand for one MLA and one GQA model."""

import math
from fractions import Fraction

import pytest

import kvmem
from kvmem.disagg import disaggregate
from kvmem.engines.sglang.disagg import swa_tail_tokens


def test_swa_tail_tokens():
    # sglang decode.py _swa_tail_len: seq - floor(max(0, seq - window) / page) x page
    assert swa_tail_tokens(4096, 128) == 128
    assert swa_tail_tokens(100, 128) == 100
    assert swa_tail_tokens(4100, 128, 64) == 4100 - 3968 == 132      # (4100 - 128) // 64 x 64 = 3968


def test_mla_deepseek_v3_on_h200_with_attention_dp():
    r = disaggregate("deepseek-v3", gpu="h200-sxm-141gb", engine="sglang", prompt_tokens=4096, output_tokens=1024,
                     request_rate=10, prefill_gpus=8, decode_gpus=8, attn_dp_size=8)
    d = kvmem.fit("deepseek-v3", gpu="h200-sxm-141gb", engine="sglang", num_gpus=8, context=5120, attn_dp_size=8)
    # decode: 10 req/s x 1,024 tokens / s tokens/s a sequence = concurrent sequences; 8 groups x 53 = 424 an instance
    # (273,420 tokens a GPU // 5,120 = 53)
    concurrent = Fraction(10 * 1024) / Fraction(str(d.decode_tokens_per_s))
    assert (d.max_batch, r.decode.sequences_per_instance) == (424, 424)
    assert r.decode.sequences_needed == math.ceil(concurrent) == 243     # 10,240 / 42.19 tokens/s a sequence
    assert r.decode.instances == math.ceil(concurrent / 424) == 1
    assert r.decode.kv_tokens_per_gpu == 273420
    # prefill: 8 x 989.4e12 x 0.4 / (2 x 36,625,603,584) = 43,222 tokens/s; 10 x 4,096 / 43,222 -> 1 instance,
    # ceil(0.95) = 1 prompt in flight
    assert r.prefill.tokens_per_s == pytest.approx(8 * 989.4e12 * 0.4 / (2 * 36625603584))
    assert (r.prefill.instances, r.prefill.sequences_needed) == (1, 1)
    assert r.gpus == 16
    assert r.decode.command[-2:] == ["--disaggregation-mode", "decode"]
    assert r.prefill.command[r.prefill.command.index("--context-length") + 1] == "4096"
    assert "--attn-dp-size" in r.decode.command


def test_gqa_llama_3_1_70b_on_h100():
    r = disaggregate("llama-3.1-70b", gpu="h100-sxm-80gb", engine="sglang", prompt_tokens=4096, output_tokens=1024,
                     request_rate=10, prefill_gpus=4, decode_gpus=4, prefill_tokens_per_s=20000)
    d = kvmem.fit("llama-3.1-70b", gpu="h100-sxm-80gb", engine="sglang", num_gpus=4, context=5120)
    concurrent = Fraction(10 * 1024) / Fraction(str(d.decode_tokens_per_s))
    assert r.decode.sequences_per_instance == d.max_batch == 81     # 419,576 tokens a GPU // 5,120
    assert r.decode.instances == math.ceil(concurrent / 81)
    # prefill given: 10 x 4,096 / 20,000 = 2.048 -> 3 instances; in flight ceil(10 / 3 x 4,096 / 20,000) = 1
    assert (r.prefill.instances, r.prefill.sequences_needed, r.prefill.tokens_per_s) == (3, 3, 20000.0)
    assert r.gpus == 4 * 3 + 4 * r.decode.instances
    # a token on one GPU at tp 4: 80 layers x (8 KV heads / 4) x (128 + 128) x 2 B = 81,920 B; SGLang's pool is
    # rest // cell tokens
    assert r.decode.kv_tokens_per_gpu == r.decode.kv_pool_bytes // 81920 == 419576


def test_cli_plan_disaggregate(capsys):
    from kvmem.cli import main
    code = main(["plan", "llama-3.1-70b", "--engine", "vllm", "--gpu", "h100-sxm-80gb", "--context", "5k",
                 "--disaggregate", "--output-tokens", "1024", "--request-rate", "10", "--prefill-gpus", "4",
                 "--decode-gpus", "4"])
    out = capsys.readouterr().out
    assert code == 0
    assert "## prefill: " in out and "## decode: " in out
    assert """--kv-transfer-config '{"kv_connector": "NixlConnector", "kv_role": "kv_both"}'""" in out


def test_refusals():
    with pytest.raises(ValueError, match="request_rate must be in"):
        disaggregate("llama-3.1-8b", gpu="h100-sxm-80gb", prompt_tokens=1000, output_tokens=100, request_rate=0)
    with pytest.raises(ValueError, match="disaggregated commands for (vllm, sglang|sglang, vllm)"):
        disaggregate("llama-3.1-8b", gpu="h100-sxm-80gb", prompt_tokens=1000, output_tokens=100, request_rate=1,
                     engine="llama.cpp")

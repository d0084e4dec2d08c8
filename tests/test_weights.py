"""Weight bytes against published checkpoints, GGUF files and what vLLM reports after loading."""

import re

import pytest

import kvmem
from kvmem.catalog import preset
from kvmem.weights import Weights, resolve_weight_dtype, weight_bytes, weight_formats, weights
from tests.fixtures import ABRIDGED

GIB = 2**30

# Presets whose `published` block carries the checkpoint's safetensors total_size (bf16/fp16).
CHECKPOINTS = ["llama-2-7b", "llama-3-8b", "llama-3.1-8b", "llama-3.1-70b", "mistral-7b-v0.1", "mixtral-8x7b",
               "phi-3-mini-4k", "qwen2.5-7b", "qwen2.5-72b", "qwen3-8b", "qwen3-32b"]


@pytest.mark.parametrize("name", CHECKPOINTS)
def test_bf16_checkpoints_within_2_percent(name):
    published = preset(name)["published"]["checkpoint_bytes"]
    assert abs(weight_bytes(kvmem.get_model(name)) - published) <= published // 50


def test_llama_3_1_8b_checkpoint_exact():
    # model.safetensors.index.json total_size 16,060,522,496 = 8,030,261,248 params x 2 B
    assert weight_bytes("llama-3.1-8b") == 16_060_522_496


def test_gpt_oss_20b_mxfp4_checkpoint_exact():
    # openai/gpt-oss-20b index total_size 13,761,264,768 (docs/research/weights_and_memory_logs.json):
    #   experts 24 layers x 32 x (2880 x 5760 + 2880 x 2880) = 19,110,297,600 weights x 17/32 = 10,152,345,600
    #   expert biases 24 x 32 x (5760 + 2880) = 6,635,520 x 2 B                              =     13,271,040
    #   the rest (attention, router, embed_tokens, lm_head, norms) 1,797,824,064 x 2 B       =  3,595,648,128
    result = weights("gpt-oss-20b")
    assert result.weight_dtype == "mxfp4"           # auto: gpt-oss ships MXFP4 experts
    assert result.total_bytes == 13_761_264_768
    assert result.expert_bytes == 10_152_345_600 + 13_271_040


@pytest.mark.parametrize("fmt, published_gb, source", [
    # hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4: shards 4.68 + 1.05 GB
    ("awq", 5.73, "https://huggingface.co/hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4/tree/main"),
    # hugging-quants/Meta-Llama-3.1-8B-Instruct-GPTQ-INT4: shards 4.97 GB + 764 MB
    ("gptq", 5.734, "https://huggingface.co/hugging-quants/Meta-Llama-3.1-8B-Instruct-GPTQ-INT4/tree/main"),
    # bartowski Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf 4.92 GB, Q8_0 8.54 GB
    ("q4_k_m", 4.92, "https://huggingface.co/bartowski/Meta-Llama-3.1-8B-Instruct-GGUF"),
    ("q8_0", 8.54, "https://huggingface.co/bartowski/Meta-Llama-3.1-8B-Instruct-GGUF"),
])
def test_quantised_llama_3_1_8b_files(fmt, published_gb, source):
    # AWQ: 6,979,321,856 linear weights x 133/256 B + 2 x 525,336,576 (embed, lm_head) x 2 B = 5.727 GB
    predicted = weight_bytes("llama-3.1-8b", fmt)
    assert abs(predicted / 1e9 - published_gb) <= published_gb * 0.02


def test_awq_keeps_embeddings_in_fp16():
    result = weights("llama-3.1-8b", "awq")
    assert result.embedding_bytes == result.lm_head_bytes == 525_336_576 * 2
    # dense = 8,030,261,248 - 2 x 525,336,576 = 6,979,588,096 params (linears + 266,240 norm weights,
    # which kvmem rates like the linears: 0.4 MB under the fp16 norms of the real file) x 133/256
    assert result.dense_bytes == 6_979_588_096 * 133 // 256 == 3_626_114_128
    assert result.bits_per_weight == pytest.approx(5.706, abs=0.001)


def test_deepseek_v3_block_fp8_with_its_mtp_module():
    # The 163-shard FP8 checkpoint holds 688,586,727,753 B including the MTP module, which kvmem leaves
    # out of params_total (README_WEIGHTS: 671B main + 11.5B unique MTP params, the MTP layer also
    # stores copies of embed_tokens and the head: 2 x 926,679,040 x 2 B).
    main = weights("deepseek-v3")
    assert main.weight_dtype == "fp8-block"
    mtp = 11_500_000_000 + 11_500_000_000 * 4 // 16384 + 2 * 926_679_040 * 2
    assert abs(main.total_bytes + mtp - 688_586_727_753) <= 688_586_727_753 // 1000


def test_gguf_moe_overestimate_is_bounded_and_noted():
    # Mixtral-8x7B Q4_K_M "model size = 24.62 GiB (4.53 BPW)" (ggml-org/llama.cpp#5206); kvmem uses the
    # dense-model 4.8944 BPW: 46,702,792,704 x 4.8944 / 8 = 28.57 GB = 26.61 GiB, 8% high, and says so.
    result = weights("mixtral-8x7b", "q4_k_m")
    assert 24.62 < result.total_bytes / GIB < 24.62 * 1.09
    assert any("MoE files land lower" in note for note in result.notes)


def test_tied_embeddings_counted_once():
    # Llama-3.2-1B ties lm_head to embed_tokens: 1,235,814,400 params x 2 B, no second table
    result = weights("llama-3.2-1b")
    assert result.lm_head_bytes == 0 and result.total_bytes == 1_235_814_400 * 2
    assert result.active_bytes() == result.total_bytes   # the tied table is read as the lm_head


def test_active_bytes_dense_and_moe():
    # dense, untied: a token reads everything but the input table: 2 x 7,504,924,672
    assert weights("llama-3.1-8b").active_bytes() == 15_009_849_344
    moe = weights("qwen3-30b-a3b")
    one = moe.active_bytes(1)
    # 8 of 128 experts at batch 1
    assert one == moe.dense_bytes + moe.lm_head_bytes + round(moe.expert_bytes * 8 / 128)
    assert one < moe.active_bytes(8) < moe.active_bytes(256) <= moe.total_bytes - moe.embedding_bytes
    assert moe.active_bytes(4096) == pytest.approx(moe.total_bytes - moe.embedding_bytes, rel=1e-6)


def test_per_device_tensor_and_pipeline_split():
    result = weights("llama-3.1-8b")
    total = result.total_bytes
    assert result.per_device(tp=2) == total // 2
    # tp 16 > 8 KV heads, where the engine replicates: each rank keeps a whole K and V head: 32 layers
    # x 4096 x 256 params x (1 - 8/16) x 2 B = 33,554,432 B above an even split
    assert result.per_device(tp=16, replicated=True) == -(-total // 16) + 33_554_432
    assert result.per_device(tp=16) == -(-total // 16)
    # pp 2: 16 layers each; the first stage adds embed_tokens, the last lm_head (both 1,050,673,152 B)
    decoder = result.dense_bytes
    assert result.per_device(pp=2) == decoder * 16 // 32 + 1_050_673_152


def test_auto_reads_quantization_config():
    assert resolve_weight_dtype(kvmem.get_model("deepseek-r1"))[0] == "fp8-block"
    assert resolve_weight_dtype(kvmem.get_model("gpt-oss-120b"))[0] == "mxfp4"
    assert resolve_weight_dtype(kvmem.get_model("llama-2-7b"))[0] == "fp16"
    cfg = dict(preset("qwen3-0.6b")["config"], quantization_config={"quant_method": "awq", "bits": 4})
    assert resolve_weight_dtype(kvmem.Model.from_hf_config(cfg))[0] == "awq"
    cfg["quantization_config"] = {"quant_method": "compressed-tensors", "config_groups": {
        "group_0": {"weights": {"num_bits": 8, "type": "int"}}}}
    assert resolve_weight_dtype(kvmem.Model.from_hf_config(cfg))[0] == "int8"


def test_every_format_is_smaller_than_bf16_and_named():
    model = kvmem.get_model("qwen3-8b")
    bf16 = weight_bytes(model, "bf16")
    for fmt in weight_formats():
        result = weights(model, fmt)
        assert isinstance(result, Weights) and result.weight_dtype == fmt
        assert (result.total_bytes < bf16) == (fmt not in ("bf16", "fp16", "fp32"))
        assert result.to_dict()["total_bytes"] == result.total_bytes


def test_kimi_k3_compressed_tensors_mxfp4_experts_only():
    # moonshotai/Kimi-K3: compressed-tensors "mxfp4-pack-quantized", group 32, uint8 scales; its ignore list
    # keeps attention, shared experts, the dense MLP and lm_head BF16, and the latent projections are BF16 in
    # the published shards too (sglang@v0.5.23 kimi_k3.py#L654-L681 builds them unquantised).
    # routed experts: 92 MoE layers x 896 x 3 x 3,072 x 3,584 = 2,722,740,830,208 params x 17/32 B
    #   = 1,446,456,066,048 B; the rest: (2,779,484,393,568 - 2,722,740,830,208) params x 2 B = 113,487,126,720 B
    # = 1,559,943,192,768 B: the "1.42 TiB across 96 shards" of the release (1.4188 TiB; 1.4125 had the latent
    # projections been MXFP4)
    w = weights("kimi-k3")
    assert w.weight_dtype == "mxfp4"
    assert w.expert_bytes == 1_446_456_066_048
    assert w.total_bytes == 1_559_943_192_768
    assert round(w.total_bytes / 2**40, 2) == 1.42
    assert kvmem.fit("kimi-k3", gpu="h200-sxm-141gb", num_gpus=16, context="32k").fits


def test_kimi_k2_5_int4_experts_only():
    # moonshotai/Kimi-K2.5: compressed-tensors pack-quantized int4, group 32, symmetric, 16-bit scales, with the
    # ignore list of Kimi-K3's; it was sized as awq on every linear (536,728,480,204 B). Routed experts:
    # 60 MoE layers x 384 x 3 x 7,168 x 2,048 = 1,014,686,023,680 params x (1/2 + 2/32) B = 570,760,888,320 B;
    # the rest (1,026,408,209,408 - 1,014,686,023,680) params x 2 B = 23,444,371,456 B
    from pathlib import Path
    path = Path(__file__).parent / "fixtures" / "configs" / "corpus" / "moonshotai--Kimi-K2.5.json"
    w = weights(kvmem.Model.from_hf_config(str(path)))
    assert w.weight_dtype == "int4-g32"
    assert w.expert_bytes == 570_760_888_320
    assert w.total_bytes == 594_205_259_776
    # with no ignore list every linear is int4: sized as awq, as before
    import json
    cfg = json.loads(path.read_text())
    cfg["text_config"]["quantization_config"]["ignore"] = []
    assert weights(kvmem.Model.from_hf_config(cfg)).weight_dtype == "awq"


@pytest.mark.parametrize("change, message", [
    (lambda qc: qc.update(ignore=["re:.*lm_head.*"]),
     "quantises attention, shared experts, dense MLP as well"),
    (lambda qc: qc["ignore"].append("re:.*experts.*"), "quantises the routed experts themselves as well"),
    (lambda qc: qc["config_groups"]["group_0"]["weights"].update(group_size=128),
     "kvmem sizes MXFP4 only as 32 weights per uint8 scale"),
    (lambda qc: qc["config_groups"]["group_0"]["weights"].update(type="int", group_size=128),
     "compressed-tensors int4 experts with group_size 128"),
])
def test_compressed_tensors_mxfp4_refuses_what_it_cannot_split(change, message):
    import copy
    cfg = copy.deepcopy(preset("kimi-k3")["config"])
    change(cfg["text_config"]["quantization_config"])
    with pytest.raises(ValueError, match=re.escape(message)):
        weights(kvmem.Model.from_hf_config(cfg))


@pytest.mark.parametrize("call, message", [
    (lambda: weights("llama-3.1-8b", "q1_k"), "unknown weight_dtype 'q1_k'; formats: auto, fp32"),
    (lambda: weights(kvmem.Model.from_hf_config(ABRIDGED, name="gemma-3n-e2b-abridged")), "model 'gemma-3n-e2b-abridged' has no parameter count"),
    (lambda: resolve_weight_dtype(kvmem.Model.from_hf_config(dict(
        preset("qwen3-0.6b")["config"], quantization_config={"quant_method": "bitsandbytes"}))),
     "quantization_config.quant_method 'bitsandbytes' is not a format kvmem sizes"),
    (lambda: weights(3.5), "model must be a kvmem.Model, a preset name or a config dict, got float"),
])
def test_errors_name_the_problem(call, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        call()


@pytest.mark.parametrize("engine, replicates", [("ideal", False), ("vllm", True), ("sglang", True), ("trtllm", True)])
def test_replicated_kv_weights_are_the_engines_rule(engine, replicates):
    """Only engines whose code keeps a whole K/V head per rank (vLLM and SGLang QKVParallelLinear,
    TensorRT-LLM duplicate_kv_weight) are charged for it; the ideal count splits every weight evenly
    (before issue 24 it was charged too: 33,554,432 B more per device here)."""
    from kvmem.engines import ENGINES
    assert ENGINES[engine].sizing.replicates_kv_weights is replicates
    even = -(-weights("llama-3.1-8b").total_bytes // 16)
    fit = kvmem.fit("llama-3.1-8b", gpu="h100-sxm-80gb", num_gpus=16, tp=16, context="8k", batch=1, engine=engine,
                    weight_dtype="bf16")
    rope = 131_072 * 128 * 2 if engine == "vllm" else 0     # vLLM's rotary cache beside the weights
    assert fit.breakdown["weights"] == even + rope + (33_554_432 if replicates else 0)

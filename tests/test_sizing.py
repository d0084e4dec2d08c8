"""fit(): each engine's memory budget against real logs, the decode bound, properties and errors.

Log reproductions start from the numbers a log prints (total memory, utilisation, profiled
weights/activations/non-torch), run them through fit() and the engine module's capacity(), and
compare with the printed KV memory, blocks and tokens. Printed inputs carry +-0.005 GiB each, so
where a count is printed the test also runs the pessimistic and optimistic corners and checks
the printed count lies between them.
"""

import re

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import kvmem
from kvmem import Fit, Layer, Model, fit
from kvmem.engines.llamacpp import llamacpp_compute_bytes
from kvmem.engines.sglang import sglang_mem_fraction_static
from kvmem.engines.vllm import vllm_activation_bytes
from kvmem.sizing import kv_crossover_tokens

GIB, MIB = 2**30, 2**20


def gib(x: float) -> int:
    return round(x * GIB)


def run(**kwargs) -> Fit:
    """fit() (a workload that does not fit is a Fit with .fits False, never raised)."""
    return fit(**kwargs)


QWEN25_32B = {  # Qwen/Qwen2.5-32B-Instruct config.json (shapes)
    "model_type": "qwen2", "hidden_size": 5120, "intermediate_size": 27648, "num_hidden_layers": 64,
    "num_attention_heads": 40, "num_key_value_heads": 8, "vocab_size": 152064,
    "max_position_embeddings": 32768, "tie_word_embeddings": False, "torch_dtype": "bfloat16"}


# ----------------------------------------------------------------------------- vLLM, end to end

def vllm_v0(model, *, total, peak_or_act, non_torch, weights, context, d=0.0, **kw):
    """vLLM v0.6/v0.7 profile: kv = total x util - weights - activation - non-torch.

    d shifts every printed input by its rounding in the direction that lowers (d > 0) or
    raises (d < 0) the KV memory.
    """
    return run(model=model, gpu={"memory": gib(total - d)}, context=context, weights_bytes=gib(weights),
               activation_bytes=gib(peak_or_act + d), non_torch_bytes=gib(non_torch + d), cudagraph_bytes=0,
               version="v0", **kw)


def test_vllm_llama_3_1_8b_rtx_3090_max_model_len_20000():
    # https://github.com/vllm-project/vllm/issues/10517 (v0.6.x):
    #   "Loading model weights took 14.9888 GB"
    #   "total_gpu_memory=23.58GiB ... peak_torch_memory=17.06GiB ... non_torch_memory=0.35GiB
    #    kv_cache_size=3.81GiB gpu_memory_utilization=0.90", "# GPU blocks: 1952, # CPU blocks: 2048",
    #   "Maximum concurrency for 20000 tokens per request: 1.56x"
    # kv = 23.58 x 0.9 - 17.06 (weights + activations) - 0.35 = 3.812 GiB
    # block = 16 x 32 layers x 8 heads x 128 x 2 (K, V) x 2 B = 2 MiB -> 3.812 GiB // 2 MiB = 1951
    args = dict(model="llama-3.1-8b", total=23.58, peak_or_act=17.06 - 14.9888, non_torch=0.35,
                weights=14.9888, context=20000)
    mid, low, high = (vllm_v0(**args, d=d) for d in (0, 0.005, -0.005))
    assert mid.fits and f"{mid.kv_memory_bytes / GIB:.2f}" == "3.81"
    assert low.capacity.blocks <= 1952 <= high.capacity.blocks and high.capacity.blocks - low.capacity.blocks <= 16
    assert mid.capacity.details.log[0] == "# GPU blocks: 1951, # CPU blocks: 2048"  # CPU: 4 GiB // 2 MiB
    assert mid.max_batch == 1 and 1952 * 16 // 20000 == 1                              # 1.56x: one request


def test_vllm_llama_3_1_8b_rtx_3090_max_model_len_29000_does_not_fit():
    # Same issue, max_model_len 29000: "peak_torch_memory=17.98GiB ... kv_cache_size=2.89GiB",
    # "# GPU blocks: 1478", and vLLM refuses: "The model's max seq len (29000) is larger than the
    # maximum number of tokens that can be stored in KV cache (23648)" = 1478 x 16.
    args = dict(model="llama-3.1-8b", total=23.58, peak_or_act=17.98 - 14.9888, non_torch=0.35,
                weights=14.9888, context=29000)
    refused = fit(model="llama-3.1-8b", gpu={"memory": gib(23.58)}, context=29000, weights_bytes=gib(14.9888),
                  activation_bytes=gib(17.98 - 14.9888), non_torch_bytes=gib(0.35), cudagraph_bytes=0, version="v0")
    assert not refused.fits and re.search(r"one sequence of 29,000 tokens needs 3\.54 GiB of KV per device "
                                          r"and 2\.89 GiB is left for KV per device — short by", refused.why_not)
    low, high = vllm_v0(**args, d=0.005), vllm_v0(**args, d=-0.005)
    assert low.capacity.blocks <= 1478 <= high.capacity.blocks
    assert low.max_context <= 23648 <= high.max_context            # vLLM's "23648" tokens
    assert not low.fits and low.max_batch == 0


def test_vllm_qwen2_5_32b_two_l40s():
    # https://github.com/vllm-project/vllm/issues/15815 (v0 engine, tp 2, max_model_len 10000):
    #   "total_gpu_memory (44.42GiB) x gpu_memory_utilization (0.90) = 39.98GiB"
    #   "model weights take 30.71GiB; non_torch_memory takes 0.30GiB; PyTorch activation peak memory
    #    takes 1.26GiB; the rest of the memory reserved for KV Cache is 7.71GiB."
    #   "# CUDA blocks: 3947, # CPU blocks: 2048"
    # kv = 39.978 - 30.71 - 0.30 - 1.26 = 7.708 GiB; block per rank = 16 x 64 x (8/2) x 128 x 2 x 2 B = 2 MiB
    model = Model.from_hf_config(QWEN25_32B, name="qwen2.5-32b")
    args = dict(total=44.42, peak_or_act=1.26, non_torch=0.30, weights=30.71, context=10000, num_gpus=2)
    mid, low, high = (vllm_v0(model, **args, d=d) for d in (0, 0.005, -0.005))
    assert mid.tp == 2 and f"{mid.kv_memory_bytes / GIB:.2f}" == "7.71"
    assert low.capacity.blocks <= 3947 <= high.capacity.blocks
    assert "# CPU blocks: 2048" in mid.capacity.details.log[0]


def test_vllm_llama_3_2_11b_vision_h100():
    # https://github.com/vllm-project/vllm/pull/12126 (H100, max_model_len 65536, util 0.90):
    #   "total_gpu_memory (79.22GiB) x gpu_memory_utilization (0.90) = 71.29GiB"
    #   "model weights take 19.86GiB; non_torch_memory takes 0.16GiB; PyTorch activation peak memory
    #    takes 36.63GiB; the rest of the memory reserved for KV Cache is 14.65GiB."
    #   "# CUDA blocks: 6001, # CPU blocks: 1638"
    # 40 cached layers (32 self + 8 cross attention), 8 KV heads x 128: block = 16 x 40 x 8 x 128 x 2 x 2 B
    # = 2.5 MiB; 14.65 GiB / 2.5 MiB = 6000.6; CPU 4 GiB // 2.5 MiB = 1638
    layer = Layer("full", kv_heads=8, head_dim_k=128, head_dim_v=128)
    model = Model(name="llama-3.2-11b-vision", layers=(layer,) * 40, hidden_size=4096, num_attention_heads=32)
    common = dict(gpu="h100-sxm-80gb", context=65536, weights_bytes=gib(19.86), cudagraph_bytes=0, version="v0")
    mid = fit(model=model, activation_bytes=gib(36.63), non_torch_bytes=gib(0.16), **common)
    low = fit(model=model, activation_bytes=gib(36.635), non_torch_bytes=gib(0.165),
              **{**common, "weights_bytes": gib(19.865)})
    high = fit(model=model, activation_bytes=gib(36.625), non_torch_bytes=gib(0.155),
               **{**common, "weights_bytes": gib(19.855)})
    assert f"{mid.kv_memory_bytes / GIB:.2f}" == "14.65"
    assert low.capacity.blocks <= 6001 <= high.capacity.blocks
    assert "# CPU blocks: 1638" in mid.capacity.details.log[0]


def test_vllm_llama_3_1_70b_eight_h200_kv_memory():
    # https://github.com/vllm-project/vllm/issues/10702 (v0.6, tp 8): "total_gpu_memory=139.72GiB ...
    #   peak_torch_memory=16.53GiB ... non_torch_memory=5.68GiB kv_cache_size=110.52GiB
    #   gpu_memory_utilization=0.95"; 139.72 x 0.95 - 16.53 - 5.68 = 110.524
    result = fit(model="llama-3.1-70b", gpu="h200", num_gpus=8, context=8192, gpu_memory_utilization=0.95,
                 weights_bytes=gib(16.53), activation_bytes=0, non_torch_bytes=gib(5.68), cudagraph_bytes=0)
    assert result.tp == 8 and f"{result.kv_memory_bytes / GIB:.2f}" == "110.52"


def test_vllm_qwen2_5_7b_awq_16gb_card():
    # Code-index file 57428438798 (WSL2, 15.99 GiB card; no public URL): "Available KV cache memory: 8.0 GiB",
    # "GPU KV cache size: 149,712 tokens", "Maximum concurrency for 32,768 tokens per request: 4.57x";
    # its breakdown: weights 5.29, activation 1.04, non-torch 0.06 (and a 0.48 GiB CUDA-graph figure
    # that the printed 8.0 does NOT subtract: 15.99 x 0.9 - 5.29 - 1.04 - 0.06 = 8.001, with it 7.52).
    # 28 layers x 4 KV heads x 128 x 2 x 2 B = 57,344 B/token; 9,357 blocks x 16 = 149,712
    kw = dict(model="qwen2.5-7b", context=32768, cudagraph_bytes=0)
    mid = fit(gpu={"memory": gib(15.99)}, weights_bytes=gib(5.29), activation_bytes=gib(1.04),
              non_torch_bytes=gib(0.06), **kw)
    low = fit(gpu={"memory": gib(15.985)}, weights_bytes=gib(5.295), activation_bytes=gib(1.045),
              non_torch_bytes=gib(0.065), **kw)
    high = fit(gpu={"memory": gib(15.995)}, weights_bytes=gib(5.285), activation_bytes=gib(1.035),
               non_torch_bytes=gib(0.055), **kw)
    assert round(mid.kv_memory_bytes / GIB, 2) == 8.0
    assert low.capacity.tokens <= 149_712 <= high.capacity.tokens
    assert mid.max_batch == 4 and mid.capacity.max_concurrency == pytest.approx(mid.capacity.blocks / 2048)


@pytest.mark.parametrize("model, weight_dtype, tp, printed_gib, source", [
    # "Loading model weights took 14.9888 GB" (GB = GiB in v0): vllm#10517; 16,060,522,496 B of
    # checkpoint + 131,072 x 128 x 2 B rotary cache = 16,094,076,928 B = 14.98878 GiB
    ("llama-3.1-8b", "auto", 1, 14.9888, "https://github.com/vllm-project/vllm/issues/10517"),
    # DeepSeek-R1-Distill-Llama-8B (Llama-3.1-8B shapes) "14.99 GiB": awslabs/data-on-eks ray-vllm-deepseek.md
    ("llama-3.1-8b", "auto", 1, 14.99, "https://github.com/awslabs/data-on-eks"),
    # neuralmagic Llama-3.1-70B w8a8 "Loading model weights took 67.7229 GB": vllm PR #12569
    ("llama-3.1-70b", "int8", 1, 67.7229, "https://github.com/vllm-project/vllm/pull/12569"),
    # Qwen2.5-32B tp 2 "Loading model weights took 30.7098 GB" per rank: vllm#15815
    (QWEN25_32B, "auto", 2, 30.7098, "https://github.com/vllm-project/vllm/issues/15815"),
])
def test_vllm_loaded_weights_within_2_percent(model, weight_dtype, tp, printed_gib, source):
    result = run(model=model, gpu="h200", num_gpus=tp, context=1024, weight_dtype=weight_dtype)
    assert abs(result.breakdown["weights"] / GIB - printed_gib) <= printed_gib * 0.02


def test_vllm_weights_llama_3_1_8b_exact():
    assert run(model="llama-3.1-8b", gpu="h100", context=1024).breakdown["weights"] == 16_094_076_928


# ----------------------------------------------------------------------------- vLLM activation model

@pytest.mark.parametrize("model, tokens, seqs, tp, printed_gib, tolerance, source", [
    # v0 without chunked prefill profiles max(max_model_len, 2048) tokens: vllm#10517
    # 20,000 x (3 x 4096 + 3 x 14336) x 2 B = 2.060 GiB; printed 17.06 - 14.9888 = 2.071
    ("llama-3.1-8b", 20000, 256, 1, 17.06 - 14.9888, 0.01, "https://github.com/vllm-project/vllm/issues/10517"),
    # 29,000 tokens: 2.987 GiB; printed 17.98 - 14.9888 = 2.991
    ("llama-3.1-8b", 29000, 256, 1, 17.98 - 14.9888, 0.01, "https://github.com/vllm-project/vllm/issues/10517"),
    # tp 2: 10,000 x (4 x 5120 + 3 x 13824) x 2 B = 1.154 GiB; printed 1.26
    (QWEN25_32B, 10000, 256, 2, 1.26, 0.10, "https://github.com/vllm-project/vllm/issues/15815"),
    # v1 sampler: 256 x 152,064 x 28 B = 1.015 GiB > forward 2048 x 142,336 B; printed 1.04
    ("qwen2.5-7b", 2048, 256, 1, 1.04, 0.03, "code-index file 57428438798"),
])
def test_vllm_activation_model_against_logs(model, tokens, seqs, tp, printed_gib, tolerance, source):
    predicted = vllm_activation_bytes(model if isinstance(model, str) else Model.from_hf_config(model),
                                      max_num_batched_tokens=tokens, max_num_seqs=seqs, tp=tp) / GIB
    assert abs(predicted - printed_gib) <= printed_gib * tolerance


def test_vllm_defaults_follow_the_gpu():
    # get_batch_defaults: >= 70 GiB (not A100) 8192 tokens / 1024 seqs, else 2048 / 256; the sampler
    # dominates for a 128k vocabulary: 1024 x 128,256 x 28 B = 3.42 GiB vs 256 x ... = 0.86 GiB
    # (max_num_seqs given as vLLM's default: without it fit sizes the batch's, as plan's --max-num-seqs)
    big = run(model="llama-3.1-8b", gpu="h100", context=8192, max_num_seqs=1024)
    small = run(model="llama-3.1-8b", gpu="l40s", context=8192, max_num_seqs=256)
    assert big.breakdown["activations"] == 1024 * 128_256 * 28
    assert small.breakdown["activations"] == 256 * 128_256 * 28
    # vLLM's real step: just above 70 GiB the larger defaults leave LESS KV than just below it
    below = run(model="llama-3.1-8b", gpu="custom:69GiB", context=8192, max_num_seqs=256)
    above = run(model="llama-3.1-8b", gpu="custom:71GiB", context=8192, max_num_seqs=1024)
    assert above.kv_memory_bytes < below.kv_memory_bytes


# ----------------------------------------------------------------------------- SGLang, TensorRT-LLM

@pytest.mark.parametrize("gpu, tp, expected", [
    # H100 nvidia-smi 81,559 MiB, tp 1: chunked 8192, graphs 256 -> reserved 512 + 12,288 + 512 + 128
    # = 13,440 MiB (above the 10,240 floor); (81,559 - 13,440) / 81,559 = 0.83521 -> 0.835
    ("h100-sxm-80gb", 1, "0.835"),
    # tp 8: graphs 512 -> 512 + 12,288 + 1,024 + 1,024 = 14,848; 66,711 / 81,559 = 0.81795 -> 0.818
    ("h100-sxm-80gb", 8, "0.818"),
    # RTX 4090 24,564 MiB: 4096, 48 (0.5.23's 24/32 GB bucket) -> 512 + 6,144 + 96 + 128 = 6,880;
    # 17,684 / 24,564 = 0.71992 -> 0.720 (SGLang's own resolution: tests/oracles/test_sglang_reserve_oracle.py)
    ("rtx-4090-24gb", 1, "0.720"),
    # tp 4: graphs 160 -> 512 + 6,144 + 320 + 512 = 7,488; 17,076 / 24,564 = 0.69516 -> 0.695
    ("rtx-4090-24gb", 4, "0.695"),
    # L40S 46,068 MiB: 4096, 32 -> 512 + 6,144 + 64 + 128 = 6,848; 39,220 / 46,068 -> 0.851
    ("l40s-48gb", 1, "0.851"),
])
def test_sglang_default_mem_fraction_static(gpu, tp, expected):
    value = sglang_mem_fraction_static(kvmem.get_gpu(gpu).memory_bytes, tp=tp)
    assert f"{float(value):.3f}" == expected


@pytest.mark.parametrize("before, after, printed_tokens, source", [
    # "Load weight end. ... avail mem=63.48 GB, mem usage=15.11 GB" ... "KV Cache is allocated.
    # #tokens: 442750" (mem_fraction_static 0.88): https://github.com/sgl-project/sglang/pull/4760
    # rest = 78.59 x 0.88 - 15.11 = 54.049 GiB; / 131,072 B per token = 442,771
    (63.48 + 15.11, 63.48, 442_750, "https://github.com/sgl-project/sglang/pull/4760"),
    # "Load weight begin. avail mem=78.81 GB" / "end ... avail mem=63.72 GB", max_total_num_tokens=444500
    # https://docs.sglang.ai/backend/openai_api_completions.html: 78.81 x 0.88 - 15.09 = 54.263 -> 444,521
    (78.81, 63.72, 444_500, "https://docs.sglang.ai/backend/openai_api_completions.html"),
])
def test_sglang_llama_3_1_8b_logs(before, after, printed_tokens, source):
    def tokens(d):
        return fit(model="llama-3.1-8b", gpu={"memory": gib(before - d)}, engine="sglang", context=131072,
                   weights_bytes=gib(before - after + d), non_torch_bytes=0,
                   mem_fraction_static=0.88).capacity.tokens
    assert tokens(0.01) <= printed_tokens <= tokens(-0.01)
    assert abs(tokens(0) - printed_tokens) <= 25


def test_trtllm_gpt_oss_120b_dgx_spark():
    # Code-index file 2263047771 (TensorRT-LLM 1.1.0rc3, PyTorch backend; no public URL):
    #   "Memory used after loading model weights (inside torch) ...: 63.52 GiB"
    #   "Memory dynamically allocated during inference (inside torch) ...: 0.85 GiB"
    #   "Memory used outside torch (e.g., NCCL and CUDA graphs) ...: 49.28 GiB" (0.56 GiB of it the
    #   temporary KV cache) "Peak memory ... 113.65 GiB, available KV cache memory ...: 5.95 GiB,
    #   fraction is set 0.8999999761581421, kv size is 73728. device total memory 119.70 GiB"
    # (119.70 - 63.52 - 0.85 - 48.72) x 0.9 = 5.949 GiB; / 73,728 B = 86,638 (printed max_tokens 86,711)
    def result(d):
        return fit(model="gpt-oss-120b", gpu={"memory": gib(119.70 - d)}, engine="trtllm", context=8192,
                   weights_bytes=gib(63.52 + d), activation_bytes=gib(0.85 + d), non_torch_bytes=gib(48.72 + d))
    mid = result(0)
    assert f"{mid.kv_memory_bytes / GIB:.2f}" == "5.95"
    assert result(0.005).capacity.details.max_tokens[0] <= 86_711 <= result(-0.005).capacity.details.max_tokens[0]


# ----------------------------------------------------------------------------- llama.cpp, transformers

@pytest.mark.parametrize("model, n_ctx, printed_mib, source", [
    # "n_ctx = 512 ... flash_attn = 0 ... CUDA0 compute buffer size = 258.50 MiB" (Llama-3-8B GGUF,
    # code-index file 47209433997): output stage 512 x (128,256 + 4,096) x 4 B = 258.50 MiB
    ("llama-3-8b", 512, 258.50, "code-index file 47209433997"),
    # n_ctx 8192, flash_attn 0: "560.00 MiB" (code-index files 55209596794, 19108540381):
    # attention stage 512 x (8,192 x (32 + 1) + 4 x 4,096) x 4 B = 560.00 MiB
    ("llama-3-8b", 8192, 560.00, "code-index file 55209596794"),
    # Mistral-7B (rope base 1e6), flash_attn 0, n_ctx 2048 / 32768: "164.00 MiB" / "2144.00 MiB"
    # https://github.com/fedora-copr/logdetective/pull/106: 512 x (2,048 x 33 + 16,384) x 4 B = 164 MiB
    ("mistral-7b-instruct-v0.3", 2048, 164.00, "https://github.com/fedora-copr/logdetective/pull/106"),
    ("mistral-7b-instruct-v0.3", 32768, 2144.00, "https://github.com/fedora-copr/logdetective/pull/106"),
])
def test_llamacpp_compute_buffer_exact(model, n_ctx, printed_mib, source):
    assert llamacpp_compute_bytes(model, n_ctx=n_ctx, n_ubatch=512, flash_attn=False) == round(printed_mib * MIB)


def test_llamacpp_budget_is_weights_kv_compute():
    result = fit(model="llama-3.1-8b", gpu="rtx-4090", context=8192, batch=4, engine="llama.cpp",
                 weight_dtype="q4_k_m")
    b = result.breakdown
    # the parts are CUDA0's in kvmem's placement (review finding 3: fit's verdict is the placement's, every layer on
    # the GPU): its q4_k_m tensors there, 4,617,396,480 B, the token embeddings' 320,679,968 B in host RAM (the
    # budget's estimate, 4,912,913,834 B, counted the whole file on the GPU)
    assert result.fits and result.weight_dtype == "q4_k_m" and b["weights"] == 4_617_396_480
    assert result.placement["whole"] and result.placement["host_bytes"] == 320_679_968
    # n_ctx = 4 x 8192 cells x 131,072 B (32 layers x 8 heads x 128 x 2 x f16)
    assert b["kv"] == 4 * 8192 * 131_072 == b["kv_pool"]
    # the scheduled graph's buffer (4 outputs), below budget.py's estimate (512 outputs' logits)
    assert b["activations"] == 121_645_184 < llamacpp_compute_bytes("llama-3.1-8b", n_ctx=4 * 8192)
    assert b["free"] == b["total"] - b["weights"] - b["kv"] - b["activations"] - b["overhead"]


def test_llamacpp_splits_layers_over_gpus():
    result = fit(model="llama-3.1-70b", gpu="rtx-3090", num_gpus=4, context=4096, engine="llama.cpp",
                 weight_dtype="q4_k_m")
    assert (result.tp, result.pp) == (1, 4) and result.fits
    with pytest.raises(ValueError, match="llama.cpp splits layers across GPUs"):
        fit(model="llama-3.1-70b", gpu="rtx-3090", num_gpus=4, tp=4, context=4096, engine="llama.cpp")


def test_transformers_budget_is_weights_cache_activations():
    # Qwen3-0.6B: 28 layers x 8 KV heads x 128 x 2 (K, V) x 2 B = 114,688 B per token
    result = fit(model="qwen3-0.6b", gpu="t4", context=2048, batch=2, engine="hf-dynamic")
    est = kvmem.estimate("qwen3-0.6b", engine="hf-dynamic", tokens=2048, batch=2)
    b = result.breakdown
    assert b["kv"] == max(est.total_bytes, est.peak_bytes) == 2 * 2048 * 114_688
    assert b["weights"] == 596_049_920 * 2
    # the prompt at once: 2 x 2048 tokens x (3 x 1024 + 3 x 3072) x 2 B + 2 x 151,936 logits x 8 B
    assert b["activations"] == 2 * 2048 * 24_576 + 2 * 151_936 * 8 == 103_094_272
    assert b["free"] == 15_837_691_904 - b["weights"] - b["kv"] - b["activations"] - 512 * MIB
    static = fit(model="qwen3-0.6b", gpu="t4", context=2048, batch=2, engine="hf-static", max_cache_len=8192)
    assert static.breakdown["kv"] >= 2 * 8192 * 114_688      # preallocated to max_cache_len
    with pytest.raises(ValueError, match=r"engine .hf-dynamic. sizes one device per model copy \(tp and pp 1; extra GPUs serve as replicas\), got tp=2, pp=1"):
        fit(model="qwen3-0.6b", gpu="t4", num_gpus=2, tp=2, context=2048, engine="hf-dynamic")


# ----------------------------------------------------------------------------- results

def test_fit_result_for_llama_3_1_8b_on_an_h100():
    result = fit(model="llama-3.1-8b", gpu="h100", context=8192)
    b = result.breakdown
    # 79.22 GiB x 0.9 - 14.9888 GiB weights - 0.84 GiB profile peak at max_num_seqs 54 (the batch, as plan sets
    # it; the forward at 8,192 tokens passes the sampler's 54 x 128,256 x 28 B) - 768 MiB overhead = 54.71 GiB
    assert b["activations"] == 905_969_664
    assert result.kv_memory_bytes == 85_061_827_297 * 9 // 10 - 16_094_076_928 - 905_969_664 - 768 * MIB
    # 1 GiB per 8192-token sequence (131,072 B/token): 54 sequences, vLLM's 54.71x
    assert result.max_batch == 54 == int(result.capacity.max_concurrency)
    assert result.kv_bytes_per_sequence == 8192 * 131_072
    assert b["kv_pool"] == result.kv_memory_bytes and b["kv"] == 54 * 8192 * 131_072
    assert b["total"] == b["weights"] + b["kv_pool"] + b["activations"] + b["overhead"] + b["free"]
    assert result.max_context == 131072 and result.min_gpus == 1
    data = result.to_dict()
    assert data["capacity"]["blocks"] == result.capacity.blocks and data["fits"] is True


def test_decode_bound_batch_one():
    # a step reads 15,009,849,344 B of weights (all but the input table) + 8192 x 131,072 B of KV
    result = fit(model="llama-3.1-8b", gpu="h100", context=8192, batch=1, engine="ideal")
    assert result.decode_tokens_per_s == pytest.approx(3.35e12 / (15_009_849_344 + 8192 * 131_072))
    assert result.decode_tokens_per_s_aggregate == result.decode_tokens_per_s
    # KV overtakes the weights at cdiv(15,009,849,344, 131,072) = 114,517 tokens
    assert result.kv_crossover_tokens == kv_crossover_tokens("llama-3.1-8b") == 114_517


def test_decode_bound_batch_and_tensor_parallel():
    one = fit(model="llama-3.1-8b", gpu="h100", context=4096, batch=16, engine="ideal")
    # 16 sequences: weights read once, KV 16 times
    assert one.decode_tokens_per_s == pytest.approx(3.35e12 / (15_009_849_344 + 16 * 4096 * 131_072))
    assert one.decode_tokens_per_s_aggregate == pytest.approx(16 * one.decode_tokens_per_s)
    two = fit(model="llama-3.1-8b", gpu="h100", num_gpus=2, context=4096, batch=16, engine="ideal")
    assert two.decode_tokens_per_s == pytest.approx(2 * one.decode_tokens_per_s)     # two HBMs read in parallel
    assert kv_crossover_tokens("llama-3.1-8b", batch=16) == -(-15_009_849_344 // (16 * 131_072))


def test_decode_bound_moe_reads_active_experts():
    model = "qwen3-30b-a3b"
    w = kvmem.weights.weights(model)
    result = fit(model=model, gpu="h100", context=1024, batch=1, engine="ideal")
    step = w.dense_bytes + w.lm_head_bytes + round(w.expert_bytes * 8 / 128) + result.kv_bytes_per_sequence
    assert result.decode_tokens_per_s == pytest.approx(3.35e12 / step)
    assert kv_crossover_tokens(model) > kv_crossover_tokens(model, batch=64) > 0


def test_no_crossover_for_a_sliding_window_only_model():
    layer = Layer("sliding", kv_heads=8, head_dim_k=128, head_dim_v=128, window=4096)
    model = Model(name="swa", layers=(layer,) * 8, hidden_size=1024, num_attention_heads=8,
                  params_total=2 * 10**9, params_active=2 * 10**9)
    assert kv_crossover_tokens(model, weight_dtype="bf16") is None


def test_data_parallel_replicas():
    # 4 GPUs, tp 2: two replicas, each with its own weights; max_batch counts both
    one = fit(model="llama-3.1-8b", gpu="l40s", num_gpus=2, tp=2, context=8192)
    two = fit(model="llama-3.1-8b", gpu="l40s", num_gpus=4, tp=2, context=8192)
    assert two.replicas == 2 and two.max_batch == 2 * one.max_batch


def test_not_fitting_batch_reports_shortfall_and_options():
    result = fit(model="llama-3.1-70b", gpu="h100", num_gpus=4, context=32768, batch=64)
    assert not result.fits and result.max_batch < 64 and result.shortfall_bytes > 0
    assert any(s.startswith("context <= ") for s in result.suggestions)
    assert any(re.match(r"\d+ GPUs as \d+ replicas of tp=4", s) for s in result.suggestions)
    assert f"batch <= {result.max_batch} at 32,768 tokens" in result.suggestions


def test_model_that_does_not_fit_at_batch_one():
    result = fit(model="llama-3.1-70b", gpu="h100", context=8192)    # one contract: a Fit, .fits False (no raise)
    message = result.why_not
    # 141,107,412,992 B of weights + 32 MiB rotary cache on one 80 GB GPU
    assert "llama-3.1-70b does not fit on 1 x h100-sxm-80gb (vllm, tp=1, pp=1, weights bf16, KV bf16)" in message
    assert "the weights (131.45 GiB per device)" in message and "short by 65.09 GiB" in message
    # AWQ weights (~37 GiB) would fit, but vLLM reads AWQ only from an AWQ checkpoint: kvmem plan refuses
    # it for this bf16 one (launch/base.py weight_flags), so it is not suggested (issue 33 finding 3)
    assert message.endswith("What would fit: 2 GPUs per replica (tp=2).")
    assert result.min_gpus == 2 and result.max_batch == 0 and not result.fits


@pytest.mark.parametrize("kwargs, message", [
    (dict(num_gpus=4, tp=8), "tp=8 x pp=1 needs 8 GPUs, but num_gpus=4"),
    (dict(num_gpus=3), "tp=3 must divide the model's 32 attention heads"),
    (dict(gpu="h100-sxm-81gb"), "unknown GPU 'h100-sxm-81gb'; did you mean h100-sxm-80gb"),
    (dict(engine="sglang", gpu_memory_utilization=0.8), "gpu_memory_utilization is vLLM's setting; "
                                                        "engine 'sglang' takes mem_fraction_static=..."),
    (dict(bogus=1), "engine 'vllm' has no option 'bogus' for fit; its options:"),
    (dict(context=0), "tokens must be a positive integer, got 0"),
    (dict(batch=0), "batch must be a positive integer, got 0"),
    (dict(gpu_memory_utilization=1.5), "gpu_memory_utilization must be in (0, 1], got 1.5"),
    (dict(engine="llama.cpp", n_ctx=4096), "fit sets llama.cpp's n_ctx itself"),
])
def test_impossible_set_ups(kwargs, message):
    args = dict(model="llama-3.1-8b", gpu="h100", context=8192)
    args.update(kwargs)
    with pytest.raises(ValueError, match=re.escape(message)):
        fit(**args)


# ----------------------------------------------------------------------------- properties

SMALL_MODELS = ["llama-3.1-8b", "qwen3-8b", "mistral-7b-v0.1", "qwen2.5-7b", "gemma-2-9b"]
PINNED = dict(max_num_seqs=256, max_num_batched_tokens=2048)   # vLLM's defaults jump at 70 GiB


def max_batch(**kwargs) -> int:
    return run(**kwargs).max_batch


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=st.sampled_from(SMALL_MODELS), memory_gib=st.integers(16, 160), extra_gib=st.integers(1, 64),
       context=st.integers(256, 65536))
def test_more_memory_never_fits_less(model, memory_gib, extra_gib, context):
    smaller = max_batch(model=model, gpu=f"custom:{memory_gib}GiB", context=context, **PINNED)
    larger = max_batch(model=model, gpu=f"custom:{memory_gib + extra_gib}GiB", context=context, **PINNED)
    assert smaller <= larger


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=st.sampled_from(["llama-3.1-8b", "qwen3-8b", "mistral-7b-v0.1", "gemma-2-9b"]), tp=st.sampled_from([1, 2, 4]), gpu=st.sampled_from(["l4", "l40s", "h100"]),
       context=st.integers(256, 65536))
def test_more_gpus_never_fit_less(model, tp, gpu, context):
    fewer = max_batch(model=model, gpu=gpu, num_gpus=tp, context=context, **PINNED)
    more = max_batch(model=model, gpu=gpu, num_gpus=2 * tp, context=context, **PINNED)
    replicas = max_batch(model=model, gpu=gpu, num_gpus=2 * tp, tp=tp, context=context, **PINNED)
    assert fewer <= more and fewer <= replicas


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=st.sampled_from(SMALL_MODELS), engine=st.sampled_from(["vllm", "sglang", "trtllm", "llama.cpp", "ideal"]),
       context=st.integers(128, 32768), longer=st.integers(1, 65536))
@example(model="mistral-7b-v0.1", engine="vllm", context=4097, longer=15)   # found: 50 then 51 (window 4096)
@example(model="gemma-2-9b", engine="trtllm", context=1024, longer=1)      # trtllm's windowed case: gemma-3-12b
def test_longer_context_never_fits_more_sequences(model, engine, context, longer):
    if (model, engine) == ("gemma-2-9b", "trtllm"):
        # TensorRT-LLM's registry has no Gemma2ForCausalLM (refused): its sliding-window case on a Gemma the registry
        # has, Gemma 3 12B (Gemma3ForConditionalGeneration: 5 of 6 layers windowed at 1,024)
        model = "gemma-3-12b"
    kw = dict(PINNED) if engine == "vllm" else {"mem_fraction_static": 0.85} if engine == "sglang" else {}
    short = max_batch(model=model, gpu="l40s", engine=engine, context=context, **kw)
    long = max_batch(model=model, gpu="l40s", engine=engine, context=context + longer, **kw)
    assert long <= short


def test_llamacpp_batch_stops_at_its_sequence_limit():
    result = fit(model="qwen3-0.6b", gpu="h200", context=512, engine="llama.cpp")
    assert result.max_batch == 256
    assert "max_batch stops at llama.cpp's limit of 256 sequences per replica" in result.notes


# ----------------------------------------------------------------------------- command line

def test_cli_fit_json(capsys):
    from kvmem.cli import main
    code = main(["fit", "llama-3.1-8b", "--gpu", "h100", "--context", "8k", "--json"])
    data = __import__("json").loads(capsys.readouterr().out)
    assert code == 0 and data["fits"] is True and data["max_batch"] == 54
    assert data["breakdown"]["weights"] == 16_094_076_928 and data["capacity"]["blocks"] == 28_014


def test_cli_fit_not_fitting(capsys):
    from kvmem.cli import main
    code = main(["fit", "llama-3.1-70b", "--gpu", "h100", "--context", "8192"])
    out, err = capsys.readouterr()
    assert code == 1 and "fits: no" in out
    assert "short by 65.09 GiB" in err and "What would fit: 2 GPUs per replica (tp=2)" in err
    code = main(["fit", "llama-3.1-70b", "--gpu", "h100", "--context", "8192", "--json"])
    data = __import__("json").loads(capsys.readouterr().out)
    assert code == 1 and data["fits"] is False and data["min_gpus"] == 2 and "short by" in data["error"]


def test_cli_fit_options_and_errors(capsys):
    from kvmem.cli import main
    code = main(["fit", "llama-3.1-8b", "--gpu", "l40s", "--context", "4096", "--engine", "sglang",
                 "-o", "mem_fraction_static=0.8", "--json"])
    data = __import__("json").loads(capsys.readouterr().out)
    assert code == 0 and data["engine"] == "sglang"
    code = main(["fit", "llama-3.1-8b", "--gpu", "h100-sxm-81gb", "--context", "4096"])
    assert code == 2 and "did you mean h100-sxm-80gb" in capsys.readouterr().err


# issue 13: refusals that name the field; no negative KV memory when nothing fits
@pytest.mark.parametrize("kwargs, message", [
    ({"gpu_memory_utilization": float("nan")}, r"gpu_memory_utilization must be a number in \(0, 1\], got nan"),
    ({"swap_space": float("nan")}, "swap_space must be a number of GiB from 0 to"),
    ({"max_num_batched_tokens": "abc"}, "max_num_batched_tokens must be a positive integer, got 'abc'"),
])
def test_fit_refuses_bad_numbers_by_name(kwargs, message):
    with pytest.raises(ValueError, match=message):
        fit("llama-3.1-8b", gpu="h100-sxm-80gb", context=1000, **kwargs)


def test_fit_kv_memory_is_never_negative():
    # 70B in bf16 (131.45 GiB of weights) on one 24 GB card: nothing is left for the KV
    result = fit("llama-3.1-70b", gpu="rtx-4090-24gb", context=1000)
    assert not result.fits and result.why_not.startswith("llama-3.1-70b does not fit on 1 x rtx-4090-24gb")
    assert result.kv_memory_bytes == 0
    assert any(note.startswith("no memory left for KV") for note in result.notes)


def test_fit_says_which_workload_the_breakdown_is_for():
    # issue 14: without batch the breakdown is for the largest batch that fits; with it, for it
    free = fit("llama-3.1-8b", gpu="h100-sxm-80gb", context=16384)
    assert (free.breakdown_batch, free.breakdown_context) == (free.max_batch, 16384)
    assert free.to_dict()["breakdown_batch"] == free.max_batch > 1
    given_batch = fit("llama-3.1-8b", gpu="h100-sxm-80gb", context=16384, batch=3)
    assert (given_batch.breakdown_batch, given_batch.breakdown_context) == (3, 16384)


def test_fit_past_max_position_embeddings_names_the_engine_rule():
    result = fit("qwen3-0.6b", gpu="h100-sxm-80gb", context="64k")  # 40,960 positions
    assert result.fits and result.engine_allows_with == "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1"
    assert result.engine_refuses.startswith("65,536 tokens exceed the model's 40,960 positions")
    assert result.to_dict()["engine_refuses"] == result.engine_refuses


def test_a_fit_asks_the_engine_once_per_workload(monkeypatch):
    # issue 23 item 23: the searches asked for the same (tokens, batch) again (33 estimates, 22 workloads here)
    import collections

    import kvmem.sizing.setup as setup

    asked = collections.Counter()
    real = setup.engine_estimate

    def counted(model, **kw):
        asked[(kw["tokens"], kw["batch"], kw["tp"], kw["pp"])] += 1
        return real(model, **kw)

    monkeypatch.setattr(setup, "engine_estimate", counted)
    setup._shared_estimate.cache_clear()        # estimates are shared by value across fits: start empty
    fit("llama-3.3-70b", gpu="h100-sxm-80gb", num_gpus=4, context="32k", batch=16, kv_dtype="fp8", weight_dtype="fp8")
    # once per workload and parallelism, whichever set-up asks (min GPUs' tp 4 is the fit's own)
    assert asked and max(asked.values()) == 1
    setup._shared_estimate.cache_clear()        # none of the counting wrapper's results stay behind


@pytest.mark.parametrize("engine", ["vllm", "sglang", "llama.cpp", "trtllm", "ideal"])
def test_a_context_past_the_positions_that_fits_is_not_contradicted_by_max_context(engine):
    # DeepSeek-V2-Lite has 163,840 positions; 1M tokens of its 27 x 576-wide latent fit an H100's memory.
    # The fit says so, max_context is at least the context asked, and the engine's refusal is said apart.
    name, setup, context = "deepseek-v2-lite", {"gpu": "h100-sxm-80gb"}, 1_048_576
    if engine == "trtllm":
        # TensorRT-LLM's pinned registry has no DeepseekV2ForCausalLM (refused): the same case on an MLA model it
        # registers, DeepSeek-V3 (DeepseekV3ForCausalLM, 163,840 positions, 61 x 576-wide latent): 262,144 tokens are
        # 61 x 576 x 2 B x 262,144 = 18.4 GB on each of 8 H200s (the latent is not split by tp) beside 84.9 GB of weights
        with pytest.raises(ValueError, match="registers no DeepseekV2ForCausalLM"):
            kvmem.fit(name, engine=engine, context=context, batch=1, **setup)
        name, setup, context = "deepseek-v3", {"gpu": "h200", "num_gpus": 8}, 262_144
    f = kvmem.fit(name, engine=engine, context=context, batch=1, **setup)
    assert f.fits and f.max_context >= context
    assert kvmem.fit(name, engine=engine, context=32_768, **setup).max_context == 163_840
    if engine == "vllm":
        assert "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1" in f.engine_allows_with

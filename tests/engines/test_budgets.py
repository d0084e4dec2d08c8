"""Each engine's sizing rules, asked through its own module (one home per rule), and the two
drift bugs they replaced: a second parse of llama.cpp's flash_attn and a second GPU catalog."""

import pytest

import kvmem
from kvmem.engines import ENGINES
from kvmem.engines.llamacpp import llamacpp_compute_bytes
from kvmem.engines.vllm import batch_defaults
from kvmem.sizing import engine_defaults, fit
from kvmem.strategies import offload_transfer_seconds

GIB = 2**30


def test_every_engine_fit_sizes_has_its_rules_in_its_own_module():
    for name, spec in ENGINES.items():
        assert spec.sizing is not None, name
        home = ".".join(spec.estimate.__module__.split(".")[:3])        # kvmem.engines.<engine>
        assert spec.sizing.budget.__module__.startswith(home), name


@pytest.mark.parametrize("word", ["enabled", "on", True, "auto", None])
def test_llamacpp_flash_attn_words_cost_the_activations_the_cache_is_built_with(word):
    # Llama-3.1-8B, 32,768 cells, n_ubatch 512, flash attention on: budget.py's estimate (the fallback where no
    # placement is laid out) takes the output stage, 4 B x 512 x (128,256 vocab + 4,096) = 271,056,896 B. Off, the
    # attention stage: 4 B x 512 x (32,768 x (32 + 1) + 4 x 4,096) = 2,248,146,944 B (the cost "enabled" got before).
    assert llamacpp_compute_bytes("llama-3.1-8b", n_ctx=32768, flash_attn=True) == 271_056_896
    # fit's breakdown is the placement's (review finding 3): its scheduled graph with min(n_batch, n_seq) = 1 output
    # row of logits, 146,811,008 B on CUDA0 at every word for flash attention on (2,252,347,520 B off, below)
    result = fit(model="llama-3.1-8b", gpu="rtx-4090", context=32768, engine="llama.cpp", weight_dtype="q4_k_m",
                 flash_attn=word)
    assert result.breakdown["activations"] == result.placement["breakdown"]["activations_bytes"] == 146_811_008
    est = kvmem.estimate("llama-3.1-8b", engine="llama.cpp", tokens=32768, flash_attn=word)
    assert est.details.flash_attn is True


@pytest.mark.parametrize("word", ["disabled", "off", False])
def test_llamacpp_flash_attn_off_costs_the_kq_matrix(word):
    result = fit(model="llama-3.1-8b", gpu="rtx-4090", context=32768, engine="llama.cpp", weight_dtype="q4_k_m",
                 flash_attn=word)
    assert llamacpp_compute_bytes("llama-3.1-8b", n_ctx=32768, flash_attn=False) == \
        4 * 512 * (32_768 * 33 + 4 * 4_096) == 2_248_146_944
    # the placement's graph (fit's breakdown since review finding 3): the same KQ matrix stage, 4,200,576 B more
    assert result.breakdown["activations"] == 2_252_347_520 == 2_248_146_944 + 4_200_576


def test_llamacpp_flash_attn_bad_word_is_refused_once_by_the_engine():
    with pytest.raises(ValueError, match="flash_attn must be True/'on', False/'off', 'auto' or None, got 'yes'"):
        fit(model="llama-3.1-8b", gpu="rtx-4090", context=4096, engine="llama.cpp", flash_attn="yes")


@pytest.mark.parametrize("name", ["h100", "H100", "h100-sxm-80gb"])
def test_offload_transfer_takes_every_gpu_name_get_gpu_takes(name):
    # H100 SXM PCIe Gen5 x16: 64 GB/s per direction (kvmem/data/gpus.json)
    assert kvmem.get_gpu(name).name == "h100-sxm-80gb"
    assert offload_transfer_seconds(10**9, gpu=name) == 10**9 / 64e9
    assert offload_transfer_seconds(10**9, gpu=name, link="nvlink") == 10**9 / 450e9


def test_offload_transfer_unknown_gpu_says_what_get_gpu_says():
    with pytest.raises(ValueError, match="unknown GPU 'h1000'"):
        offload_transfer_seconds(1, gpu="h1000")


# ----------------------------------------------------------------------------- defaults by device

@pytest.mark.parametrize("gpu, tokens, seqs, why", [
    # get_batch_defaults (vllm/engine/arg_utils.py): >= 70 GiB and not an A100 -> 8192 / 1024
    ("h100-sxm-80gb", 8192, 1024, "70 GiB or more and not an A100"),
    ("a100-sxm-80gb", 2048, 256, "an A100"),            # 80 GB, but its name says A100
    ("l40s-48gb", 2048, 256, "under 70 GiB"),
])
def test_vllm_batch_defaults_in_force_and_why(gpu, tokens, seqs, why):
    defaults = engine_defaults("vllm", gpu, context=32768)
    assert defaults.values == {"max_num_batched_tokens": tokens, "max_num_seqs": seqs}
    assert why in defaults.reason and "get_batch_defaults" in defaults.reason
    given = fit(model="llama-3.1-8b", gpu=gpu, context=32768, max_num_seqs=seqs)
    assert any(defaults.reason in note for note in given.notes)
    # without max_num_seqs, fit sizes the activations for the batch, as plan's --max-num-seqs, and names the default
    result = fit(model="llama-3.1-8b", gpu=gpu, context=32768)
    assert any(f"max_num_seqs={result.max_batch}: the batch sized" in note and f"default is {seqs:,}" in note
               for note in result.notes)


def test_vllm_batch_defaults_follow_context_and_options():
    # min(seqs x context, tokens): 256 sequences of 4 tokens batch 1,024 tokens
    assert batch_defaults(kvmem.get_gpu("l40s"), context=4).values == {"max_num_batched_tokens": 1024,
                                                                        "max_num_seqs": 256}
    given = engine_defaults("vllm", "h100", context=8192, max_num_batched_tokens=4096, max_num_seqs=64)
    assert given.values == {"max_num_batched_tokens": 4096, "max_num_seqs": 64}
    assert given.reason == "max_num_batched_tokens and max_num_seqs given"
    # v0 without chunked prefill: max(max_model_len, 2048) tokens, 256 sequences
    v0 = engine_defaults("vllm", "h100", context=20000, version="v0")
    assert v0.values == {"max_num_batched_tokens": 20000, "max_num_seqs": 256}


def test_sglang_and_llamacpp_defaults():
    # SGLang on an H100: (81,559 - 13,440) / 81,559 -> 0.835 (tests/test_sizing.py works it out)
    assert float(engine_defaults("sglang", "h100", context=8192).values["mem_fraction_static"]) == 0.835
    assert engine_defaults("llama.cpp", "h100", context=8192) is None


# ----------------------------------------------------------------------------- vLLM v0

def test_vllm_v0_fit_uses_v0_batching_and_no_graph_reserve():
    # https://github.com/vllm-project/vllm/issues/10517 (v0.6, RTX 3090, max_model_len 20000):
    # "total_gpu_memory=23.58GiB ... non_torch_memory=0.35GiB kv_cache_size=3.81GiB".
    # v0 batches max(20,000, 2048) = 20,000 tokens: forward 20,000 x (3 x 4,096 + 3 x 14,336) x 2 B
    # = 2.06 GiB (the log's peak 17.06 - 14.99 = 2.07); no CUDA-graph reserve;
    # 23.58 x 0.9 - 14.99 (weights + rotary cache) - 2.06 - 0.35 = 3.82 GiB
    gpu = {"memory": round(23.58 * GIB)}
    v0 = fit(model="llama-3.1-8b", gpu=gpu, context=20000, version="v0", non_torch_bytes=round(0.35 * GIB))
    assert v0.breakdown["activations"] == 20_000 * (3 * 4096 + 3 * 14336) * 2
    assert v0.breakdown["overhead"] == round(0.35 * GIB)              # no graph estimate
    assert abs(v0.kv_memory_bytes / GIB - 3.81) < 0.015
    v1 = fit(model="llama-3.1-8b", gpu=gpu, context=20000, non_torch_bytes=round(0.35 * GIB))
    assert v1.kv_memory_bytes > v0.kv_memory_bytes + round(0.5 * GIB)  # v1 defaults: 2048 tokens, graphs 512 MiB


# ----------------------------------------------------------------------------- monotone sizing

def test_vllm_sliding_window_peak_keeps_fit_monotone():
    # Mistral-7B-v0.1: 32 sliding layers, window 4096, 8 KV heads x 128, block 16:
    # page = 16 x 8 x 128 x 2 x 2 B = 64 KiB per layer, x 32 layers = 2 MiB per block of the model.
    # At 4097 tokens a sequence holds blocks 0..256 (257); at 4112 block 0 has left the window
    # (256) but the sequence held 257 on its way there, so every context past 4096 needs 257.
    est = kvmem.estimate("mistral-7b-v0.1", engine="vllm", tokens=4112)
    assert est.kv_bytes == 256 * 2 * 2**20 and est.peak_bytes == 257 * 2 * 2**20
    assert kvmem.estimate("mistral-7b-v0.1", engine="vllm", tokens=4097).peak_bytes == 257 * 2 * 2**20
    assert kvmem.estimate("mistral-7b-v0.1", engine="vllm", tokens=4096).peak_bytes == 256 * 2 * 2**20
    batches = [fit(model="mistral-7b-v0.1", gpu="l40s-48gb", context=n).max_batch
               for n in (4096, 4097, 4112, 4200, 8192)]
    # floor of vLLM's own "Maximum concurrency" on these budgets (50.84, 50.64, 50.64, 49.49, 25.47x; vLLM 0.33
    # planning, tests/oracles/test_hybrid_verdicts_oracle.py): a request is admitted only with min(window - 1 +
    # in-flight tokens, length) free, so 8,192 tokens reserve 8,192 (was 51/50/50/50/50 by bytes, 51/50/51/50/51)
    assert batches == [50, 50, 50, 49, 25]
    assert any("sized for the engine's peak" in note for note in fit(model="mistral-7b-v0.1", gpu="l40s-48gb",
                                                                     context=4112).notes)

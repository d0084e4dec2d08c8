"""vLLM's picks by the GPU of the fit (kvmem.engines.vllm.device.device_options): the MLA backend and the
GatedDeltaNet prefill backend follow the GPU's compute capability (gpus.json), as vLLM 0.33.0's
_get_backend_priorities and _resolve_gdn_prefill_backend do (judged in tests/oracles/test_vllm_device_oracle.py);
without a GPU, or with a custom one, kvmem keeps its Hopper assumption."""

from __future__ import annotations

import pytest

import kvmem
from kvmem.engines.vllm.device import device_options
from kvmem.engines.vllm.mla import mla_block
from kvmem.gpus import GPU, get_gpu
from kvmem.sizing.setup import make_setup

GIB = 1 << 30


def _setup(model, gpu, n, **kw):
    base = dict(gpu=gpu, num_gpus=n, tp=None, pp=1, context=32768, batch=1, weight_dtype=kw.pop("weight_dtype", "auto"),
                kv_dtype=kw.pop("kv_dtype", "auto"), engine="vllm", gpu_memory_utilization=0.9)
    return make_setup(model, **base, options=kw)


def test_the_catalog_knows_each_nvidia_parts_capability_and_each_platform():
    # NVIDIA's list (developer.nvidia.com/cuda-gpus): A100 8.0, L40S / RTX 4090 8.9, H100 9.0, B200 10.0, RTX 5090 12.0
    caps = {name: get_gpu(name).compute_capability for name in ("a100", "l40s", "rtx-4090", "h100", "b200", "rtx-5090",
                                                                "t4", "v100-sxm2-32gb", "a10g")}
    assert caps == {"a100": (8, 0), "l40s": (8, 9), "rtx-4090": (8, 9), "h100": (9, 0), "b200": (10, 0),
                    "rtx-5090": (12, 0), "t4": (7, 5), "v100-sxm2-32gb": (7, 0), "a10g": (8, 6)}
    assert [get_gpu(n).platform for n in ("h100", "mi300x", "gaudi3", "apple-m4-max-128gb")] == [
        "cuda", "rocm", "hpu", "mps"]
    assert get_gpu("mi355x").gfx_target == "gfx950" and get_gpu("mi300x").compute_capability is None
    assert get_gpu("custom:80GiB").compute_capability is None and get_gpu("custom:80GiB").platform == ""
    with pytest.raises(ValueError, match="compute_capability must be a"):
        GPU(name="x", memory_bytes=1, compute_capability=(9, "0"))


def test_mla_backend_follows_the_gpu():
    # SM 8.x / 12.x: TRITON_MLA keeps 16; SM 9.0: FLASH_ATTN_MLA (16) for a bf16 cache, FLASHMLA (64) for fp8;
    # SM 10.0: FLASHINFER_MLA, kernel sizes [32, 64], 16 -> 32; ROCm without AITER: TRITON_MLA
    model = kvmem.get_model("deepseek-v3")
    assert device_options(get_gpu("a100"), model, "auto", {})[0] == {"attention_backend": "TRITON_MLA"}
    assert device_options(get_gpu("h100"), model, "auto", {})[0] == {"attention_backend": "FLASH_ATTN_MLA"}
    assert device_options(get_gpu("h100"), model, "fp8", {})[0] == {"attention_backend": "FLASHMLA"}
    assert device_options(get_gpu("b200"), model, "auto", {})[0] == {"attention_backend": "FLASHINFER_MLA"}
    assert device_options(get_gpu("rtx-5090"), model, "auto", {})[0] == {"attention_backend": "TRITON_MLA"}
    assert device_options(get_gpu("mi300x"), model, "auto", {})[0] == {"attention_backend": "TRITON_MLA"}
    assert [mla_block(b, 16) for b in ("TRITON_MLA", "FLASH_ATTN_MLA", "FLASHMLA", "FLASHINFER_MLA", "CUTLASS_MLA")] \
        == [16, 16, 64, 32, 128]
    # given, the caller's backend stands; a custom GPU or no platform: nothing picked (the Hopper assumption)
    assert device_options(get_gpu("a100"), model, "auto", {"attention_backend": "FLASHMLA"})[0] == {}
    assert device_options(get_gpu("custom:80GiB"), model, "auto", {})[0] == {}
    assert device_options(get_gpu("a100"), model, "auto", {"version": "0.19.0"})[0] == {}


def test_deepseek_v3_on_eight_a100s_sizes_triton_mla_blocks_of_16():
    # 8 x A100 80 GB, int4 weights, 32k: TRITON_MLA keeps block 16 (was FLASHMLA's 64). 61 layers x (512 + 64) x 2 B
    # = 70,272 B a token on every rank; a 16-token page over the layers 1,124,352 B
    s, notes = _setup("deepseek-v3", "a100-sxm-80gb", 8, weight_dtype="int4")
    assert s.engine_options == {"attention_backend": "TRITON_MLA"}
    assert any("MLA backend TRITON_MLA" in n and "SM 8.0" in n for n in notes)
    fit = kvmem.fit("deepseek-v3", gpu="a100-sxm-80gb", num_gpus=8, context=32768, engine="vllm", weight_dtype="int4")
    cap = kvmem.capacity("deepseek-v3", engine="vllm", kv_memory=fit.kv_memory_bytes, max_model_len=32768, tp=8,
                   attention_backend="TRITON_MLA")
    assert cap.block_size == 16 and cap.details.page_bytes == [16 * 1152]
    # 31,037,547,378 B // 1,124,352 = 27,604 blocks x 16 = 441,664 tokens (64-token blocks: 6,901 x 64, the same)
    assert fit.kv_memory_bytes == 31_037_547_378 and cap.tokens == 27_604 * 16 == 441_664
    assert fit.engine_numbers.tokens == 441_664 and fit.max_batch == 13


def test_qwen3_next_gdn_prefill_follows_the_gpu():
    # A100 / L40S: Triton, no 64-token checkpoint grid (the 'none' block); H100: FlashInfer; B200 (head_k_dim 128,
    # the wheels' CUDA 13): FlashInfer; a custom GPU: the Hopper assumption (nothing picked)
    model = kvmem.get_model("qwen3-next-80b-a3b")
    assert [device_options(get_gpu(g), model, "auto", {})[0].get("gdn_prefill_backend")
            for g in ("a100", "l40s", "rtx-4090", "h100", "b200", "rtx-5090", "mi300x", "custom:80GiB")] == [
        "triton", "triton", "triton", "flashinfer", "flashinfer", "flashinfer", "triton", None]
    assert device_options(get_gpu("a100"), model, "auto", {"gdn_prefill_backend": "flashinfer"})[0] == {}


def test_qwen3_next_on_four_l40s_at_32k_takes_the_triton_block():
    # tp 4: the Hopper assumption's block was 320 (the 64-token grid), Triton's is 272: 156,233 -> 162,291 tokens
    fit = kvmem.fit("qwen3-next-80b-a3b", gpu="l40s-48gb", num_gpus=4, context=32768, engine="vllm")
    kv = fit.kv_memory_bytes
    triton = kvmem.capacity("qwen3-next-80b-a3b", engine="vllm", kv_memory=kv, max_model_len=32768, tp=4,
                      gdn_prefill_backend="triton")
    hopper = kvmem.capacity("qwen3-next-80b-a3b", engine="vllm", kv_memory=kv, max_model_len=32768, tp=4)
    assert (hopper.block_size, hopper.tokens) == (320, 156_233) and (triton.block_size, triton.tokens) == (272, 162_291)
    assert fit.engine_numbers.tokens == triton.tokens and fit.max_batch == 4
    assert any("GatedDeltaNet prefill on triton" in n and "SM 8.9" in n for n in fit.notes)


def test_plan_writes_no_backend_flag_where_vllm_picks_the_same():
    # on the GPU planned, vLLM selects what kvmem sized: the command leaves both flags out
    argv = kvmem.plan("qwen3-next-80b-a3b", gpu="l40s-48gb", num_gpus=4, context="32k", batch=2).argv
    assert "--gdn-prefill-backend" not in argv and "--attention-backend" not in argv
    argv = kvmem.plan("qwen3-next-80b-a3b", gpu="l40s-48gb", num_gpus=4, context="32k", batch=2,
                      gdn_prefill_backend="flashinfer").argv
    assert argv[argv.index("--gdn-prefill-backend") + 1] == "flashinfer"


def test_a_platform_vllm_is_not_sized_for_says_so():
    notes = device_options(get_gpu("gaudi3"), kvmem.get_model("deepseek-v3"), "auto", {})
    assert notes[0] == {} and "kvmem sizes its CUDA Hopper backends" in notes[1][0]


def test_sparse_mla_is_refused_below_hopper_and_glm5_on_blackwell_says_its_cache():
    # no sparse-MLA backend of vLLM 0.33.0 runs below SM 9.0 (cuda.py's sparse tail): fit refuses, naming it
    with pytest.raises(ValueError, match=r"glm-5 under vLLM 0.33.0 on a100-sxm-80gb \(SM 8.0\): its sparse MLA"):
        kvmem.fit("glm-5", gpu="a100-sxm-80gb", num_gpus=8, context=4096, engine="vllm")
    _, notes = device_options(get_gpu("b200"), kvmem.get_model("glm-5"), "auto", {})
    assert "runs GLM-5's kv_cache_dtype 'auto' as fp8_e4m3" in notes[0]
    assert device_options(get_gpu("h100"), kvmem.get_model("glm-5"), "auto", {}) == ({}, ())

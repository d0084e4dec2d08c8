"""vLLM 0.33.0's own backend selection, run with each catalog GPU's compute capability patched in, judges what
kvmem's fit picks on that GPU (kvmem.engines.vllm.device.device_options): the MLA backend and its block size
(deepseek-v3, bf16 and fp8 caches), the GatedDeltaNet prefill backend (qwen3-next-80b-a3b), and a plain GQA
model's block (llama-3.1-8b). Bounded: one selection per capability and case (8 capabilities), seconds."""

from __future__ import annotations

import pytest

pytest.importorskip("vllm")

from kvmem.catalog import get_model  # noqa: E402
from kvmem.gpus import get_gpu  # noqa: E402
from kvmem.oracles.vllm_device import cuda_gpus, kvmem_picks, vllm_attention, vllm_gdn_backend  # noqa: E402

GPUS = cuda_gpus()


def test_the_catalog_spans_every_backend_branch():
    # Volta 7.0, Turing 7.5, Ampere 8.0 / 8.6, Ada 8.9, Hopper 9.0, Blackwell 10.0 and 12.0
    assert sorted({g.compute_capability for g in GPUS}) == [(7, 0), (7, 5), (8, 0), (8, 6), (8, 9), (9, 0), (10, 0),
                                                            (12, 0)]


@pytest.mark.parametrize("kv_dtype, vllm_kv", [("auto", "auto"), ("fp8", "fp8")])
def test_mla_backend_and_block_are_vllms_on_every_gpu(kv_dtype, vllm_kv):
    model = get_model("deepseek-v3")
    seen = {}
    for gpu in GPUS:
        cap = gpu.compute_capability
        if cap not in seen:
            seen[cap] = vllm_attention(cap, use_mla=True, kv_cache_dtype=vllm_kv,
                                       qk_nope_head_dim=model.facts.qk_nope_head_dim)
        ours = kvmem_picks(gpu, model, kv_dtype)
        assert (ours["attention_backend"], ours["block_size"]) == seen[cap], gpu.name
    # by hand: SM 9.0 bf16 FLASH_ATTN_MLA 16 / fp8 FLASHMLA 64; SM 10.0 FLASHINFER_MLA 32; else TRITON_MLA 16
    assert seen[(9, 0)] == (("FLASH_ATTN_MLA", 16) if kv_dtype == "auto" else ("FLASHMLA", 64))
    assert seen[(10, 0)] == ("FLASHINFER_MLA", 32) and seen[(8, 0)] == ("TRITON_MLA", 16)


def test_blackwell_mla_without_flashinfers_head_dims_is_cutlass():
    # FlashInfer MLA takes qk_nope_head_dim 64 / 128 / 192 only (flashinfer_mla.py supports_combination)
    from kvmem.engines.vllm.device import mla_backend_on
    from kvmem.engines.vllm.mla import mla_block
    assert vllm_attention((10, 0), use_mla=True, qk_nope_head_dim=96) == ("CUTLASS_MLA", 128)
    assert mla_backend_on(get_gpu("b200"), "bf16", 96) == "CUTLASS_MLA" and mla_block("CUTLASS_MLA", 16) == 128


def test_gdn_prefill_backend_is_vllms_on_every_gpu():
    model = get_model("qwen3-next-80b-a3b")
    head_k_dim = model.config["linear_key_head_dim"]
    for gpu in GPUS:
        assert kvmem_picks(gpu, model)["gdn_prefill_backend"] == vllm_gdn_backend(gpu.compute_capability,
                                                                                   head_k_dim), gpu.name
    # head_k_dim 64 on Blackwell: Triton (FlashInfer there needs 128); Hopper FlashInfer whatever the width
    assert (vllm_gdn_backend((10, 0), 64), vllm_gdn_backend((12, 0), 64), vllm_gdn_backend((9, 0), 64)) == (
        "triton", "triton", "flashinfer")


def test_plain_gqa_keeps_16_token_blocks_on_every_gpu():
    model = get_model("llama-3.1-8b")
    for cap in sorted({g.compute_capability for g in GPUS}):
        assert vllm_attention(cap, use_mla=False, head_size=128, num_heads=32)[1] == 16, cap
    assert all(kvmem_picks(g, model) == {"block_size": 16} for g in GPUS)


def test_sparse_mla_below_hopper_has_no_backend_and_kvmem_refuses():
    # DeepSeek-V3.2 / GLM-5 (an indexer): vLLM's sparse tail has no backend for SM 8.x / 7.x; SM 9.0 / 10.0 run it
    import kvmem
    from kvmem.engines.vllm.device import device_options
    assert [vllm_attention(cap, use_mla=True, use_sparse=True, num_heads=64) for cap in ((7, 5), (8, 0), (8, 9))] \
        == [None, None, None]
    assert vllm_attention((10, 0), use_mla=True, use_sparse=True, num_heads=64) == ("FLASHMLA_SPARSE", 64)
    with pytest.raises(ValueError, match="has no attention backend there"):
        device_options(get_gpu("a100"), kvmem.get_model("glm-5"), "auto", {})

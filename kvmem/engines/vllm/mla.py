"""vLLM's MLA attention backends: the block size each runs with, the sparse-MLA page and indexer sizes."""

from __future__ import annotations

__all__ = ["MLA_BACKENDS", "OTHER_BACKENDS", "FP8_DS_MLA_BYTES_PER_TOKEN", "INDEXER_QUANT_BLOCK", "mla_block"]

# MLA backends: the block size each forces, from the kernel block sizes it supports; None = keep the block size.
# FLASHMLA 64 (vllm@v0.33.0 vllm/v1/attention/backends/mla/flashmla.py#L57-L58; Hopper's pick for fp8 caches, and
# kvmem's assumption where it knows no GPU), CUTLASS_MLA 128 (cutlass_mla.py#L49-L50), FLASHINFER_MLA 32, the
# Blackwell pick (kernel sizes [32, 64], flashinfer_mla.py#L204-L205: a multiple of 32 is kept, else the smallest:
# get_preferred_block_size, vllm/v1/attention/backend.py#L122-L163), FLASHMLA_SPARSE 64 (DeepSeek-V3.2;
# flashmla_sparse.py#L158-L165); TRITON_MLA and FLASH_ATTN_MLA (Hopper's pick for 16-bit caches) take any multiple of
# 16 (triton_mla.py#L114-L115, flashattn_mla.py#L49-L50): the block size is kept.
# The backend order: vllm@v0.33.0 vllm/platforms/cuda.py#L84-L155 _get_backend_priorities; by GPU: device_options.
MLA_BACKENDS = {"FLASHMLA": 64, "CUTLASS_MLA": 128, "FLASHINFER_MLA": 32, "FLASHMLA_SPARSE": 64,
                 "TRITON_MLA": None, "FLASH_ATTN_MLA": None}
OTHER_BACKENDS = ("FLASH_ATTN", "FLASHINFER", "TRITON_ATTN", "FLEX_ATTENTION")
FP8_DS_MLA_BYTES_PER_TOKEN = 656     # 512 fp8 latent + 16 B scales + 64 x 2 B rope (flashmla_sparse.py#L76-L88)
# DeepSeek-V3.2's lightning-indexer key: its own MLAAttentionSpec of 1 head x (index_head_dim + index_head_dim // 128
# x 4) uint8 = 132 B per token (vllm@v0.33.0 vllm/model_executor/models/deepseek_v2.py#L638-L676
# DeepseekV32IndexerCache), keyed on index_topk: fp8 values + one fp32 scale per 128
INDEXER_QUANT_BLOCK = 128


def mla_block(backend: str, block: int) -> int:
    """The block size an MLA backend runs with (MLA_BACKENDS: its kernel block sizes at v0.33.0)."""
    if backend == "FLASHMLA":
        return block if block % 64 == 0 else 64
    if backend == "CUTLASS_MLA":
        return block if block % 128 == 0 else 128
    if backend == "FLASHINFER_MLA":
        return block if block % 32 == 0 else 32
    if backend == "FLASHMLA_SPARSE":
        return 64
    return block

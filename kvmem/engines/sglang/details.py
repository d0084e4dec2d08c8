"""The records SGLang's estimate and capacity return as ``details`` (kvmem.engines.sglang.entry, .dsv4)."""

from __future__ import annotations

from dataclasses import dataclass

from ...records import Record


@dataclass(frozen=True)
class SglangDetails(Record):
    """Estimate.details: the pages the batch holds (keys as the fields; the swa_* keys only with SWA)."""

    layout: str
    page_size: int                  # tokens per page
    pages_per_sequence: int
    pool_tokens: int                # the full-attention pool's tokens for the batch
    padding_tokens_per_layer: int   # slot 0's page, written by padded tokens
    kv_heads_per_rank: int
    cell_bytes_per_token: int
    swa_window: int | None = None
    swa_pages_per_sequence: int | None = None
    swa_pool_tokens: int | None = None

    OPTIONAL = ("swa_window", "swa_pages_per_sequence", "swa_pool_tokens")


@dataclass(frozen=True)
class SglangCapacityDetails(Record):
    """Capacity.details: the pools a budget makes and what SGLang logs for them (optional keys
    only where they apply: SWA, Mamba, an allocated pool)."""

    layout: str
    page_size: int
    cell_bytes_per_token: int
    max_total_num_tokens: int
    full_layer_tokens: int | None = None
    swa_layer_tokens: int | None = None
    max_mamba_cache_size: int | None = None
    mamba_bytes_per_request: int | None = None
    max_running_requests: int | None = None
    pools: list | None = None
    allocated_bytes: int | None = None
    log: list | None = None
    draft_layers: int | None = None        # a speculative draft's pool (kvmem.engines.sglang.draft)
    draft_cell_bytes: int | None = None
    draft_pool_bytes: int | None = None
    mamba_verify_state_bytes: int | None = None   # a Mamba target's speculative verify states (mamba.state_pool)

    OPTIONAL = ("full_layer_tokens", "swa_layer_tokens", "max_mamba_cache_size", "mamba_bytes_per_request",
                "max_running_requests", "pools", "allocated_bytes", "log", "draft_layers", "draft_cell_bytes",
                "draft_pool_bytes", "mamba_verify_state_bytes")

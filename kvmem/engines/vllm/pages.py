"""Page specs: one block of one layer, as vLLM's KVCacheSpec (vllm/v1/kv_cache_interface.py)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from ...units import cdiv
from .mla import FP8_DS_MLA_BYTES_PER_TOKEN


@dataclass(frozen=True)
class PageSpec:
    """One layer's KV cache spec, as vLLM's KVCacheSpec: equal specs share a group."""

    kind: str                  # "full", "mla", "sliding", "chunked", "mamba"
    block_size: int
    heads: int = 1
    head_size: int = 0
    head_size_v: int = 0
    dtype_bytes: int = 0
    mode: str = ""
    window: int = 0
    state_bytes: int = 0       # mamba: the real state bytes of one sequence
    padded: int = 0            # the page it is padded to (0 = unpadded): Mamba, or attention from 0.33
    # DeepSeek-V4's specs (kvmem.engines.vllm.compressed): one stored row per tokens_per_state tokens, of
    # state_content bytes per head (0: (head_size + head_size_v) x dtype_bytes), the page rounded up to
    # a multiple of align (vllm@v0.33.0 vllm/v1/kv_cache_interface.py#L719-L725 _apply_alignment_padding);
    # role "state": a compressor's state, counted as state_bytes
    tokens_per_state: int = 1
    state_content: int = 0
    align: int = 0
    role: str = ""
    # mamba in "align" mode: MambaSpec.num_prefill_checkpoint_blocks, 1 where the layers export prefill
    # checkpoints (kvmem.engines.vllm.options.exports_checkpoints), each request holding one more block
    checkpoint_blocks: int = 0

    @property
    def family(self) -> tuple:
        """UniformTypeKVCacheSpecs.is_uniform_type: full and MLA are one type; windows must match."""
        if self.kind in ("full", "mla"):
            return ("full",)
        return (self.kind, self.window)

    @cached_property  # read per layer on every estimate; a frozen spec's page never changes
    def page_bytes(self) -> int:
        bs = self.block_size
        if self.kind == "mamba":   # the sum of its state tensors, padded up to the attention page in a hybrid model
            return self.padded or self.state_bytes    # vllm@v0.33.0 vllm/v1/kv_cache_interface.py#L1093-L1166 MambaSpec
        if self.padded:
            return self.padded
        if self.align or self.state_content or self.tokens_per_state != 1:
            content = self.state_content or (self.head_size + self.head_size_v) * self.dtype_bytes
            real = self.heads * (bs // self.tokens_per_state) * content
            return cdiv(real, self.align) * self.align if self.align else real
        # MLA: block_size x (kv_lora_rank + qk_rope_head_dim) x dtype_bytes, one "head" with no x2, the same on
        # every tensor-parallel rank (vllm@v0.33.0 vllm/v1/kv_cache_interface.py#L728-L746 MLAAttentionSpec:
        # head_size_v 0); kv_cache_dtype fp8_ds_mla: block_size x 656 B
        # (vllm@v0.33.0 vllm/v1/attention/backends/mla/flashmla_sparse.py#L76-L88)
        if self.kind == "mla":
            real = bs * FP8_DS_MLA_BYTES_PER_TOKEN if self.mode == "fp8_ds_mla" else (
                bs * self.heads * self.head_size * self.dtype_bytes)
        elif self.kind == "full" and self.mode == "nvfp4":
            real = bs * self.heads * (_nvfp4_dim(self.head_size) + _nvfp4_dim(self.head_size_v))
        elif self.kind == "full":   # block_size x kv_heads_per_rank x (head_size + head_size_v) x dtype_bytes
            # vllm@v0.33.0 vllm/v1/kv_cache_interface.py#L585-L608 state_content_size_bytes, page_size_bytes
            real = bs * self.heads * (self.head_size + self.head_size_v) * self.dtype_bytes
        else:   # sliding, chunked (the AttentionSpec base): (head_size + head_size_v) per head, head_size_v =
            # head_size but for MiMo-V2-Flash's sliding layers: vllm@v0.33.0 vllm/v1/kv_cache_interface.py#L603-L608
            real = bs * self.heads * (self.head_size + self.head_size_v) * self.dtype_bytes
        # int8/fp8_per_token_head add 2 x block_size x heads x 4 B of scales (the mode:
        # vllm@v0.33.0 vllm/v1/kv_cache_interface.py#L121-L133 get_kv_quant_mode)
        if self.mode == "per_token_head":
            real += 2 * bs * self.heads * 4
        return real

    def kv_split(self, blocks: int) -> tuple[int, int, int]:
        """(K, V, state) bytes of ``blocks`` pages of this spec."""
        total = blocks * self.page_bytes
        if self.kind == "mamba" or self.role == "state":
            return 0, 0, total
        if self.kind == "mla":
            return total, 0, 0
        v_dim = self.head_size_v
        if not v_dim:      # one row for K and V (DeepSeek-V4's SlidingWindowMLASpec): counted as K
            return total, 0, 0
        if self.mode == "nvfp4":
            k_share, v_share = _nvfp4_dim(self.head_size), _nvfp4_dim(v_dim)
        else:
            k_share, v_share = self.head_size, v_dim
        k = total * k_share // (k_share + v_share)
        return k, total - k, 0

    def worst_blocks(self, max_model_len: int, batched: int, mamba_mode: str, spec_blocks: int) -> int:
        """max_memory_usage_bytes // page: the pages one request of max_model_len (L) may need, T =
        ``batched`` in-flight tokens (kvmem.engines.vllm.pool.in_flight_tokens)."""
        bs, length = self.block_size, max_model_len
        if self.kind in ("full", "mla"):   # cdiv(L, bs): vllm@v0.33.0 vllm/v1/kv_cache_interface.py#L643-L648
            return cdiv(length, bs)
        # sliding: cdiv(min(window - 1 + T, L), bs) + 1: vllm@v0.33.0 vllm/v1/kv_cache_interface.py#L946-L955
        if self.kind == "sliding":
            return cdiv(min(self.window - 1 + batched, length), bs) + 1
        if self.kind == "chunked":   # cdiv(min(chunk + T, L), bs): vllm@v0.33.0 vllm/v1/kv_cache_interface.py#L883-L888
            return cdiv(min(self.window + batched, length), bs)
        # mamba: 1 + spec blocks ("none"), 2 + spec + checkpoint blocks ("align", the mode prefix caching selects),
        # cdiv(L, bs) ("all"): vllm@v0.33.0 vllm/v1/kv_cache_interface.py#L1135-L1141
        if mamba_mode == "all":
            return cdiv(length, bs)
        return (2 + self.checkpoint_blocks if mamba_mode == "align" else 1) + spec_blocks

    def held_blocks(self, tokens: int, lookahead: int, mamba_mode: str, spec_blocks: int) -> int:
        """Pages one sequence of ``tokens`` tokens holds (freed pages outside a window excluded): the blocks
        really allocated (vllm@v0.33.0 vllm/v1/core/kv_cache_manager.py#L380-L627 allocate_slots), full cdiv(t +
        k, bs), k = num_speculative_tokens lookahead slots; sliding the same minus max(0, t - window) // bs
        freed (vllm@v0.33.0 vllm/v1/core/single_type_kv_cache_manager.py#L1148-L1183 get_num_skipped_tokens);
        chunked minus ((t - 1) // chunk x chunk) // bs (#L1381-L1425); mamba as its worst case (2 for "align":
        the blocks a running decode holds are not verified, kvmem counts the worst case)."""
        bs = self.block_size
        allocated = cdiv(tokens + lookahead, bs)
        if self.kind in ("full", "mla"):
            return allocated
        if self.kind == "sliding":
            return allocated - max(0, tokens - self.window) // bs
        if self.kind == "chunked":
            return allocated - (tokens - 1) // self.window * self.window // bs
        if mamba_mode == "all":
            return cdiv(tokens, bs)
        return (2 + self.checkpoint_blocks if mamba_mode == "align" else 1) + spec_blocks

    def peak_blocks(self, tokens: int, lookahead: int, mamba_mode: str, spec_blocks: int) -> int:
        """The most pages one sequence holds on its way to ``tokens`` tokens.

        A window layer frees a page only once every token in it has left the window
        (SlidingWindowManager / ChunkedLocalAttentionManager.remove_skipped_blocks,
        vllm/v1/core/single_type_kv_cache_manager.py), so at n = window + m tokens it holds
        cdiv(window + lookahead + m mod block_size, block_size) pages: one more at some lengths
        than at longer ones. Past window + block_size - 1 tokens the peak is reached for good.
        """
        held = self.held_blocks(tokens, lookahead, mamba_mode, spec_blocks)
        bs, w = self.block_size, self.window
        if self.kind == "sliding" and tokens - w >= bs:
            return max(held, cdiv(w + lookahead + bs - 1, bs))
        if self.kind == "chunked":   # the end of each full chunk; its pages repeat within bs chunks
            ends = (w * c for c in range(1, min(tokens // w, bs) + 1))
            return max([held] + [self.held_blocks(n, lookahead, mamba_mode, spec_blocks) for n in ends])
        return held


def _nvfp4_dim(head_size: int) -> int:
    """Bytes of one nvfp4 head (full layers only): packed fp4 values + one fp8 scale per 16, head_size // 2 +
    head_size // 16 (vllm@v0.33.0 vllm/utils/torch_utils.py#L542-L544 nvfp4_kv_cache_full_dim)."""
    return head_size // 2 + head_size // 16

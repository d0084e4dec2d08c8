"""llama.cpp's output buffers with speculative decoding: the target's and the draft context's (llama.cpp#23446,
#23988: n_outputs_max), as the build llama-cpp-python 0.3.36 vendors (0c1e57098) sizes them.

The rules:
    a context's n_outputs_max: 0 (the C API's default) means n_batch            src/llama-context.cpp#L250-L252
    llama-server's target: min(n_batch, n_parallel x (1 + n_draft)) outputs, n_draft the largest
        --spec-draft-n-max of the draft types given (0 without speculation; embeddings/pooling: n_batch)
            tools/server/server-context.cpp#L41-L53 server_output_limits, #L995-L997;
            common/speculative.cpp#L2586-L2595 common_speculative_get_output_limits, #L2315-L2350 n_max
    the draft context (a draft model, or --spec-type draft-mtp's context on the target model):
        n_outputs_max = n_parallel (one output a sequence), DFlash/DSpark n_parallel x (n_max + 1)
            common/speculative.cpp#L2447-L2502 common_base_params_to_speculative
    the output buffer of a context for n outputs (output_reserve, src/llama-context.cpp#L2116-L2175):
        n = max(n, n_seq_max) rows of float32: n_vocab logits, + n_embd_out with embeddings, + n_embd_out
        MTP "nextn" rows (masked: one a row; the target's unmasked: n_batch rows), x 4 B; reserved at n_seq_max
        when the context is made (#L375-L384 "output buffer size = X MiB"), grown to the largest batch's
        outputs (<= n_outputs_max) at decode, never shrunk. It lives in the output device's host buffer type
        (CUDA_Host: pinned host RAM) or the CPU's (#L2193-L2200).
    MTP turns on nextn rows: the target's unmasked (n_batch rows), the draft's masked
        (common/speculative.cpp#L545-L553)
    the MTP context's KV cache (--spec-type draft-mtp): a plain attention cache of the nextn layers alone
        (il >= n_layer), n_ctx cells (padded to 256) of K and V rows in --cache-type-k/-v; the target's cache
        keeps the trunk (il < n_layer)            src/llama-model.cpp#L2796-L2804 (and #L2400-L2420 for the
        DSA architectures, whose nextn head runs dense MLA: not sized here)
Judged by llama.cpp's own "output buffer size" and "n_outputs_max" lines (kvmem/oracles/llamacpp_draft.py)
and by the MTP context's published lines in llama.cpp#22673 (a Qwen3.5 model, 8,192 cells: "output buffer
size = 0.95 MiB", "llama_kv_cache: size = 32.00 MiB (8192 cells, 1 layers, 1/1 seqs)").
Not sized here: the draft context's compute buffer (its n_ubatch is the target's, llama.cpp#22673's report);
the placement holds one context, so none of these enter a fit yet.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...units import require_positive_int

__all__ = ["n_outputs_max", "server_outputs", "draft_outputs", "output_buffer_bytes", "SpeculativeOutputs",
           "speculative_output_buffers", "mtp_kv_bytes"]

FLOAT_BYTES = 4
N_PAD = 256   # llama.cpp@0c1e57098 src/llama-context.cpp#L290-L296 (kvmem.engines.llamacpp.settings._n_pad)


def n_outputs_max(n_batch: int, requested: int = 0) -> int:
    """The context's n_outputs_max: ``requested``, or n_batch for 0 (src/llama-context.cpp#L250)."""
    return requested if requested else n_batch


def server_outputs(n_batch: int, n_parallel: int, n_draft: int = 0) -> int:
    """llama-server's n_outputs_max for the target: min(n_batch, n_parallel x (1 + n_draft)), at least 1."""
    for name, value in (("n_batch", n_batch), ("n_parallel", n_parallel)):
        require_positive_int(name, value)
    return max(1, min(n_batch, n_parallel * (1 + max(0, n_draft))))


def draft_outputs(n_parallel: int, *, n_draft: int = 0, block_draft: bool = False) -> int:
    """The draft context's n_outputs_max: n_parallel; DFlash/DSpark (``block_draft``) n_parallel x (n_draft + 1)."""
    require_positive_int("n_parallel", n_parallel)
    return n_parallel * max(1, n_draft + 1) if block_draft else n_parallel


def output_buffer_bytes(n_vocab: int, n_outputs: int, *, n_seq_max: int = 1, n_embd_out: int = 0,
                        embeddings: bool = False, nextn: str | None = None, n_batch: int = 0) -> int:
    """Bytes of a context's output buffer holding ``n_outputs`` rows (output_reserve; module docstring).
    ``nextn``: None, "masked" (a row an output) or "unmasked" (``n_batch`` rows)."""
    rows = max(n_outputs, n_seq_max)
    floats = n_vocab * rows
    if embeddings:
        floats += n_embd_out * rows
    if nextn == "masked":
        floats += n_embd_out * rows
    elif nextn == "unmasked":
        floats += n_embd_out * n_batch
    elif nextn is not None:
        raise ValueError(f"nextn must be None, 'masked' or 'unmasked', got {nextn!r}")
    return floats * FLOAT_BYTES


@dataclass(frozen=True)
class SpeculativeOutputs:
    target_outputs: int
    draft_outputs: int
    target_bytes: int      # the target's output buffer once a verify batch of target_outputs decodes
    draft_bytes: int


def speculative_output_buffers(*, n_vocab: int, n_embd: int, n_batch: int, n_parallel: int, n_draft: int,
                               mtp: bool = False, draft_n_vocab: int | None = None) -> SpeculativeOutputs:
    """The target's and the draft context's output buffers under llama-server with ``n_draft`` draft tokens
    (--spec-draft-n-max): host RAM (pinned with a GPU). ``mtp``: the draft is --spec-type draft-mtp on the
    target model (nextn rows on both); else a draft model of ``draft_n_vocab`` tokens."""
    target = server_outputs(n_batch, n_parallel, n_draft)
    draft = draft_outputs(n_parallel)
    t_bytes = output_buffer_bytes(n_vocab, target, n_seq_max=n_parallel, n_embd_out=n_embd,
                                  nextn="unmasked" if mtp else None, n_batch=n_batch)
    d_bytes = output_buffer_bytes(n_vocab if mtp or draft_n_vocab is None else draft_n_vocab, draft,
                                  n_seq_max=n_parallel, n_embd_out=n_embd, nextn="masked" if mtp else None)
    return SpeculativeOutputs(target, draft, t_bytes, d_bytes)


def mtp_kv_bytes(*, kv_heads: int, head_dim_k: int, head_dim_v: int, n_ctx: int, nextn_layers: int = 1,
                 type_k: str = "f16", type_v: str = "f16") -> tuple[int, int]:
    """(K bytes, V bytes) of the MTP context's KV cache: ``nextn_layers`` attention layers of ``kv_heads`` heads at
    n_ctx cells padded to 256 (module docstring)."""
    from ...dtypes import dtype
    for name, value in (("kv_heads", kv_heads), ("head_dim_k", head_dim_k), ("head_dim_v", head_dim_v),
                        ("n_ctx", n_ctx), ("nextn_layers", nextn_layers)):
        require_positive_int(name, value)
    cells = -(-n_ctx // N_PAD) * N_PAD
    k = cells * nextn_layers * dtype(type_k).row_bytes(kv_heads * head_dim_k)
    v = cells * nextn_layers * dtype(type_v).row_bytes(kv_heads * head_dim_v)
    return k, v

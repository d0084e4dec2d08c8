"""llama-server's host RAM beside the model: context checkpoints and the prompt cache.

The rules (llama.cpp at llama-cpp-python 0.3.36's vendored build, 0c1e5709):
    --ctx-checkpoints N (default 32) per slot, made only for a model whose memory cannot be rolled back
        by position: a recurrent/hybrid memory or a sliding window (n_swa > 0)
                                              common/common.h#L631, tools/server/server-context.cpp#L3441-L3455
    a checkpoint = llama_state_seq_get_size_ext(ctx, slot, PARTIAL_ONLY) bytes (+ the draft context's, with
        one): magic 4 + seq id 4 + the partial memory's state. PARTIAL_ONLY writes only the recurrent part of
        a hybrid memory and only the SWA cache of an iSWA one
            tools/server/server-context.cpp#L2335-L2352, common/common.cpp#L2288-L2303,
            src/llama-context.cpp#L3191-L3216, src/llama-memory-hybrid.cpp#L190-L195,
            src/llama-kv-cache-iswa.cpp#L259-L265
    recurrent state of one sequence: cell_count 4 + (pos 4, n_seq_id 4) + s_trans 4 + n_layer 4, then per
        recurrent layer: R type 4 + R row size 8 + the R row, S type 4 + S row size 8 + the S row: the
        sequence's current row only, whatever n_rs_seq rollback snapshots the memory keeps (rows 1 + n_rs_seq
        a cell; cell_id = rs_idx_cur * size + src)   src/llama-memory-recurrent.cpp#L766-L960, #L801-L803
    slots: -np; "auto" (the server's default) is 4 with a unified KV cache   tools/server/server.cpp#L155-L160
    --cache-ram M MiB (default 8192; -1 no limit, 0 off): the prompt cache of idle slots' states, evicted
        above M MiB, its limit lowered when an allocation fails (so reported, not counted against the host)
                                              common/common.h#L634, tools/server/server-task.cpp#L1731-L1775
Published (unsloth#11073): Qwen3.x-27B, 4 slots: one checkpoint 149.6 MiB, 32 a slot 18.7 GiB of host RAM;
this module: 156,894,364 B = 149.63 MiB, x 128 = 18.70 GiB.
"""

from __future__ import annotations

from ...host import HostInput, HostTerm
from ...layer import CHUNKED, SLIDING

CTX_CHECKPOINTS = 32          # common/common.h#L631 n_ctx_checkpoints
CACHE_RAM_MIB = 8192          # common/common.h#L634 cache_ram_mib
AUTO_SLOTS = 4                # tools/server/server.cpp#L155-L160: -np auto -> 4, kv_unified
STATE_HEADER_BYTES = 4 + 4    # io_magic, seq_id (llama-context.cpp#L3194-L3195)
RECURRENT_HEADER_BYTES = 4 + 8 + 4 + 4      # cell_count; pos, n_seq_id of the one cell; s_trans, n_layer
RECURRENT_LAYER_HEADER_BYTES = 2 * (4 + 8)  # R and S: type, row size
# a sliding-window cache's state (src/llama-kv-cache.cpp#L2065-L2133, #L2211-L2340): n_stream 4, the stream's
# cell_count 4, v_trans 4, n_layer 4; per cell pos 4, n_seq_id 4 and the one seq id 4; per layer K and V type 4 +
# row size 8 (transposed V: type 4, element size 4, width 4); only the cells the window does not mask
# (is_masked_swa, src/llama-hparams.h#L476-L486): min(tokens, n_swa) once the slot has seen them
SWA_HEADER_BYTES = 4 + 4 + 4 + 4
SWA_CELL_META_BYTES = 4 + 4 + 4
SWA_LAYER_HEADER_BYTES = 2 * (4 + 8)


class NotSized(ValueError):
    """A checkpoint whose contents kvmem has not read (the host table says so; nothing is counted)."""


def checkpoint_bytes(model, *, tokens: int = 1, **options) -> tuple[int, str]:
    """(bytes of one context checkpoint, what it holds) for ``model`` in llama-server after ``tokens`` tokens
    (one stream: the server's unified cache); (0, why) where the server makes none. A sliding-window model's
    grows with the prompt until the window is full: min(tokens, window) cells."""
    from ...engines import engine_estimate
    est = engine_estimate(model, engine="llamacpp", tokens=tokens, batch=1, **options)
    caches = est.details.caches
    recurrent = [c for c in caches if c["cache"] == "recurrent"]
    if recurrent:
        c = recurrent[0]
        layers = sum(layer.state is not None for layer in model.layers)
        # one R and one S row per cell: the current one, rs_idx_cur * size + src, never the n_rs_seq rollback
        # snapshots the memory holds beside it (llama.cpp@0c1e57098 src/llama-memory-recurrent.cpp#L801-L803)
        per_seq = (c["r_bytes"] + c["s_bytes"]) // (c["cells"] * (1 + (c.get("rs_seq") or 0)))
        return (STATE_HEADER_BYTES + RECURRENT_HEADER_BYTES + layers * RECURRENT_LAYER_HEADER_BYTES + per_seq,
                f"the recurrent state of one sequence ({layers} layers)")
    if any(c["cache"] == "dsv4_state" for c in caches):
        raise NotSized("llama_kv_cache_dsv4's checkpoint (its SWA, compressed and indexer caches and compressor "
                       "states) is not read by kvmem")
    swa = [c for c in caches if c["cache"] == "kv_swa"]
    if swa:
        c = swa[0]
        # state_write keeps the cells is_masked_swa does not mask against the slot's last position
        # (llama.cpp@0c1e57098 src/llama-kv-cache.cpp#L2092-L2096; src/llama-hparams.h#L475-L495): a window keeps
        # min(tokens, n_swa); a chunk keeps the tokens of the last chunk begun, ((tokens - 1) % n_swa) + 1
        sliding = [layer.window for layer in model.layers if layer.kind == SLIDING]
        if sliding:
            cells = min(tokens, min(sliding))
        else:
            chunk = min(layer.window for layer in model.layers if layer.kind == CHUNKED)
            cells = (max(tokens, 1) - 1) % chunk + 1
        per_cell = (c["k_bytes"] + c["v_bytes"]) // c["cells_total"]
        return (STATE_HEADER_BYTES + SWA_HEADER_BYTES + cells * (SWA_CELL_META_BYTES + per_cell)
                + c["layers"] * SWA_LAYER_HEADER_BYTES,
                f"the {cells:,} cells of the window one slot keeps ({c['layers']} SWA layers)")
    return 0, "none: the model's cache rolls back by position (no recurrent state, no sliding window)"


def host_terms(s, _kv_memory: int = 0, placement: dict | None = None) -> list[HostTerm]:
    """llama.cpp's host terms for a kvmem.sizing Setup (SizingRules.host_terms; kvmem.host): the tensors its
    placement keeps in host RAM, the context checkpoints and the prompt cache (its sizing options
    ctx_checkpoints, cache_ram_mib; the slots: the placement's n_seq, else its batch, else the server's auto 4)."""
    count = s.sizing.get("ctx_checkpoints", CTX_CHECKPOINTS)
    cache_ram = s.sizing.get("cache_ram_mib", CACHE_RAM_MIB)
    for name, value in (("ctx_checkpoints", count), ("cache_ram_mib", cache_ram)):
        if isinstance(value, bool) or not isinstance(value, int) or value < (-1 if name == "cache_ram_mib" else 0):
            raise ValueError(f"{name} must be a whole number ({'-1 for no limit, ' * (name == 'cache_ram_mib')}"
                             f"0 for none), got {value!r}")
    # the slots the KV was sized for: the placement's sequences (fit's work batch, the -np its commands write),
    # else the batch, else llama-server's auto 4
    slots = (placement or {}).get("n_seq") or s.batch or AUTO_SLOTS
    terms = []
    if placement and placement.get("host_bytes"):
        terms.append(HostTerm(name="llama.cpp tensors in host RAM", bytes_per_node=placement["host_bytes"],
                              bytes_per_rank=placement["host_bytes"],
                              source="the placement's layers and tensors on the CPU (kvmem.engines.llamacpp.verdict)"))
    try:
        one, what = checkpoint_bytes(s.model, tokens=s.context, kv_dtype=s.kv_dtype, **s.engine_options)
    except NotSized as gap:     # reported, never counted as 0 B: the table says what is not sized
        one, what = 0, ""
        if count:
            terms.append(HostTerm(name="llama.cpp context checkpoints (not sized)", bytes_per_node=0, bytes_per_rank=0,
                                  binding=False, source=f"--ctx-checkpoints {count}: {gap} (kvmem.engines.llamacpp."
                                                        "checkpoints); give ctx_checkpoints=0 to run without them"))
    if one and count:
        terms.append(HostTerm(name="llama.cpp context checkpoints", bytes_per_node=one * count * slots,
                              bytes_per_rank=one * count * slots,
                              source=f"--ctx-checkpoints {count} x {slots} slots x {one:,} B ({what}; "
                                     "kvmem.engines.llamacpp.checkpoints)"))
    if cache_ram == -1:
        raise ValueError("llama.cpp --cache-ram -1 puts no limit on the prompt cache: its host RAM has no bound "
                         "(tools/server/server-context.cpp#L1332-L1340); give cache_ram_mib")
    if cache_ram:
        # not binding: an allocation that fails lowers the limit to 0.4 x what the cache holds
        # (tools/server/server-task.cpp#L1762-L1775)
        terms.append(HostTerm(name="llama.cpp prompt cache (at most)", bytes_per_node=cache_ram << 20,
                              bytes_per_rank=cache_ram << 20, binding=False,
                              source=f"--cache-ram {cache_ram} MiB, shrunk by llama.cpp when RAM runs short "
                                     "(kvmem.engines.llamacpp.checkpoints)"))
    return terms


def checkpoint_log_size_mib(nbytes: int) -> str:
    """The size a 'created context checkpoint ... size = X MiB' line prints (server-context.cpp#L2349-L2352)."""
    return f"{nbytes / 1024 / 1024:.3f}"


HOST_INPUTS = (HostInput("ctx_checkpoints", "--ctx-checkpoints", "int", CTX_CHECKPOINTS),)

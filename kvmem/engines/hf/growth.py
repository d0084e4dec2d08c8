"""DynamicCache and StaticCache step by step: the bytes each layer holds and each update allocates.

``Workload`` is the replay shared by every cache (kvmem.engines.hf.quantized adds QuantizedCache):
a prefill, then one token per decode step, every layer updated in order; ``peak()`` runs the
allocations and reports the highest total. The rules (DynamicLayer's torch.cat, the sliding
layers' trim, StaticLayer's zeros and index_copy_ positions, StaticSlidingWindowLayer's roll) are in
DynamicGrowth's and StaticGrowth's docstrings, with their transformers 5.24.0 lines.

Workload: ``batch`` sequences get one prefill of ``prompt_tokens`` tokens (default: all ``tokens``),
then one token per decode step until they hold ``tokens``; every layer is updated in order, as a
forward pass does.
"""

from __future__ import annotations

from ...dtypes import dtype
from .slots import Slot

_RECURRENT_STATE_BYTES = 4  # fp32 (torch_chunk_gated_delta_rule, mamba(2) torch scans, Kimi's KDA)
_INT64 = 8


def _positions(s: int) -> list[int]:
    """StaticLayer.update: arange(s) + cumulative_length, then cumulative_length.add_(s)."""
    return [_INT64 * s, _INT64 * s, -_INT64 * s, _INT64, -_INT64, -_INT64 * s]


class Workload:
    """Per-layer held bytes after each step and the allocations of each update.

    Step 0 is the prefill of ``prompt`` tokens; step j >= 1 is the j-th decode token.
    Subclasses give ``held(i, j)`` (bytes layer i holds after step j, bookkeeping included),
    ``events(i, j)`` (signed allocation sizes of layer i's update at step j) and ``rows(i)``
    (the final (K, V, state) data bytes of layer i).
    """

    def __init__(self, slots_: tuple[Slot, ...], *, batch: int, prompt: int, tokens: int, e: int):
        self.slots, self.batch, self.prompt, self.e = slots_, batch, prompt, e
        self.steps = tokens - prompt

    def k_token(self, slot: Slot) -> int:
        return self.batch * slot.heads * slot.k_dim * self.e

    def v_token(self, slot: Slot) -> int:
        return self.batch * slot.heads * slot.v_dim * self.e

    def i_token(self, slot: Slot) -> int:
        return self.batch * slot.index_dim * self.e

    def state(self, slot: Slot) -> tuple[int, int]:
        """(conv, recurrent) bytes of a linear layer."""
        conv = self.batch * slot.conv_channels * slot.conv_kernel * (slot.conv_element_bytes or self.e)
        element = self.e if slot.recurrent_in_compute_dtype else _RECURRENT_STATE_BYTES
        return conv, self.batch * slot.recurrent_elements * element

    def linear_events(self, slot: Slot, j: int) -> list[int]:
        """LinearAttentionLayer: zeros for both states at the prefill; the prefill's conv input
        is left-padded to the kernel when shorter (F.pad, freed after); decode updates in place."""
        if j:
            return []
        conv, recurrent = self.state(slot)
        pad = [conv, -conv] if self.prompt < slot.conv_kernel else []
        return [conv, *pad, recurrent]

    def peak(self) -> int:
        """The highest running total over the steps where it can occur (see _peak_steps): ``.peak_bytes``.

        It replays the allocations each update makes (a tensor allocated is +bytes, one freed is -bytes):
        cache storage, recurrent state, int64 position tensors, and copies made inside ``update`` (cat
        results, dequantised copies, the quantiser's working set). The incoming K/V of the step are the
        model's activations and are not counted. The quantisers' working sets are counts of what their
        code allocates on torch 2.13 CPU (kvmem.engines.hf.quantized); on CUDA hqq optimises in fp16 and
        quanto may use other kernels, so treat quantised peaks there as approximate."""
        best = 0
        n = len(self.slots)
        for j in self._peak_steps():
            running = sum(self.held(i, j - 1) for i in range(n)) if j else 0
            best = max(best, running)
            for i in range(n):
                for delta in self.events(i, j):
                    running += delta
                    best = max(best, running)
        return best

    def _peak_steps(self) -> list[int]:
        # From decode step 2 on every layer's bytes and transients grow (or stay) with j, so the
        # last step bounds them; the prefill and the first decode step (where a sliding layer
        # drops a long prefill buffer) are checked on their own.
        return sorted({0, min(1, self.steps), self.steps})

    def events(self, i: int, j: int) -> list[int]:
        """Allocator deltas of layer ``i`` at step ``j``: a linear layer's states, nothing for a
        dummy layer, else the cache type's own token_events (after the Mamba mixer's states where
        the layer has both: LinearAttentionAndFullAttentionLayer)."""
        slot = self.slots[i]
        if slot.kind == "linear":
            return self.linear_events(slot, j)
        if slot.kind == "dummy":
            return []
        return (self.linear_events(slot, j) if slot.has_state else []) + self.token_events(slot, j)

    def rows(self, i: int) -> tuple[int, int, int]:
        """(K, V, state) bytes layer ``i`` holds at the end: ``held_tokens`` tokens of K (+ indexer)
        and V, or a linear layer's fixed states."""
        slot = self.slots[i]
        if slot.kind == "linear":
            return 0, 0, sum(self.state(slot))
        if slot.kind == "dummy":
            return 0, 0, 0
        tokens = self.held_tokens(slot)
        state = sum(self.state(slot)) if slot.has_state else 0
        return tokens * (self.k_token(slot) + self.i_token(slot)), tokens * self.v_token(slot), state


class DynamicGrowth(Workload):
    """A DynamicCache's storage step by step: torch.cat growth and sliding layers' trims (kvmem.measure).

    hf-dynamic (DynamicCache(config=...)): DynamicLayer keys = cat([keys, new]), the old K freed before V
    is concatenated (transformers@v5.24.0 src/transformers/cache_utils.py#L119-L138); DynamicSlidingWindowLayer
    (sliding and chunked layers, window = sliding_window or attention_chunk_size): both cats first, then it
    keeps the view full[:, :, -window + 1:] -- the view pins the whole buffer: P tokens right after a prefill
    of P, min(tokens, window) once decoding (cache_utils.py#L222-L259)."""

    def stored(self, slot: Slot, j: int) -> int:
        """Tokens of storage a layer holds after step j."""
        if j < 0:
            return 0
        if slot.kind == "sliding" and j > 0 and slot.window > 1:
            return min(self.prompt + j - 1, slot.window - 1) + 1
        return self.prompt + j

    def held(self, i: int, j: int) -> int:
        slot = self.slots[i]
        if slot.kind == "linear":
            return sum(self.state(slot)) if j >= 0 else 0
        if slot.kind == "dummy":
            return 0
        state = sum(self.state(slot)) if slot.has_state and j >= 0 else 0
        return (self.stored(slot, j) * (self.k_token(slot) + self.v_token(slot) + self.i_token(slot)) + state
                + sum(self.compressor_bytes(slot, j)))

    def compressor_bytes(self, slot: Slot, j: int) -> tuple[int, int]:
        """(compressed rows, buffers + overlap state) bytes of a DeepSeek-V4 compressor after step j.

        modeling_deepseek_v4.py DeepseekV4HCACache.store_compression_weights keeps buffer_kv and
        buffer_gate as the views kv[:, usable:] of the step's projection, concatenated with the old
        buffer when that was not empty: each pins t - rate x floor(t_prev / rate) tokens (the whole
        prompt after the prefill, rate tokens after a decode step that closes a window), not
        t mod rate. The compressed rows (cat) and the overlap slices (clones) are exact; the
        overlap gate is fp32 (Compressor.gate_dtype).
        """
        c = slot.compressor
        if c is None or j < 0:
            return 0, 0
        tokens = self.prompt + j
        before = self.prompt + j - 1 if j else 0
        pinned = tokens - c.rate * (before // c.rate)
        rows = self.batch * c.compressed_rows(tokens) * c.row_width * self.e
        overlap = self.batch * c.overlap_tokens(tokens) * c.row_width * (self.e + dtype(c.gate_dtype).row_bytes(1))
        return rows, self.batch * 2 * pinned * c.buffer_width * self.e + overlap

    def token_events(self, slot: Slot, j: int) -> list[int]:
        old, new = self.stored(slot, j - 1), self.stored(slot, j)
        k, v = self.k_token(slot), self.v_token(slot)
        if slot.kind == "sliding":
            out = [new * k, new * v, -old * k, -old * v]
        else:
            out = [new * k, -old * k, new * v, -old * v]
        if slot.index_dim:
            out += [new * self.i_token(slot), -old * self.i_token(slot)]
        if slot.compressor:
            # the new buffers, rows and overlap slices are made before the old ones are let go
            out += [sum(self.compressor_bytes(slot, j)), -sum(self.compressor_bytes(slot, j - 1))]
        return out

    def rows(self, i: int) -> tuple[int, int, int]:
        """Workload.rows, plus a compressor's rows (as K) and its buffers and overlap (as state)."""
        k, v, state = super().rows(i)
        rows, buffers = self.compressor_bytes(self.slots[i], self.steps)
        return k + rows, v, state + buffers

    def held_tokens(self, slot: Slot) -> int:
        return self.stored(slot, self.steps)


class StaticGrowth(Workload):
    """A StaticCache's storage step by step: max_cache_len zeros, int64 positions, sliding layers' roll.

    hf-static (StaticCache(config, max_cache_len)): StaticLayer allocates zeros [batch, heads,
    max_cache_len, dim] at the first update and writes by index_copy_ with positions arange(s) +
    cumulative_length (int64) (transformers@v5.24.0 src/transformers/cache_utils.py#L424-L494);
    StaticSlidingWindowLayer holds min(window, max_cache_len) tokens and, once full, rolls at each decode
    step: a transient copy of the layer's K and of its V (cache_utils.py#L547-L624)."""

    def __init__(self, slots_, *, max_cache_len: int, **kw):
        super().__init__(slots_, **kw)
        self.max_cache_len = max_cache_len

    def length(self, slot: Slot) -> int:
        if slot.kind == "sliding":
            return min(slot.window, self.max_cache_len)
        return self.max_cache_len

    def held(self, i: int, j: int) -> int:
        if j < 0:
            return 0
        slot = self.slots[i]
        if slot.kind == "linear":
            return sum(self.state(slot))
        if slot.kind == "dummy":
            return 0
        index = self.length(slot) * self.i_token(slot) + _INT64 if slot.index_dim else 0
        state = sum(self.state(slot)) if slot.has_state else 0
        return self.length(slot) * (self.k_token(slot) + self.v_token(slot)) + index + state

    def token_events(self, slot: Slot, j: int) -> list[int]:
        length = self.length(slot)
        k, v = length * self.k_token(slot), length * self.v_token(slot)
        s = self.prompt if j == 0 else 1
        before = 0 if j == 0 else self.prompt + j - 1
        out = [k, v] if j == 0 else []
        if slot.kind == "sliding" and before >= length:
            out += [k, v, _INT64, -k, -v, -_INT64]  # roll(-1) copies of K and V, index tensor([-1])
        elif not (slot.kind == "sliding" and before + s > length):
            out += _positions(s)
        if slot.index_dim:
            if j == 0:
                out += [length * self.i_token(slot), _INT64]  # indexer keys + their int64 counter
            out += _positions(s)
        return out

    def held_tokens(self, slot: Slot) -> int:
        return self.length(slot)

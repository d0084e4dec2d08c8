"""Hugging Face transformers caches: DynamicCache, StaticCache and QuantizedCache.

Rules read from the installed transformers 5.24.0 (``transformers/cache_utils.py`` unless
another file is named), hqq 0.2.8.post1 and optimum-quanto 0.2.7, and checked against the
real cache objects by ``kvmem.measure`` / ``kvmem validate`` (tests/test_measure.py).

Workload: ``batch`` sequences get one prefill of ``prompt_tokens`` tokens (default: all
``tokens``), then one token per decode step until they hold ``tokens``; every layer is
updated in order, as a forward pass does. What each layer hands to ``cache.update``:

    attention   K [batch, kv_heads, seq, head_dim_k], V [batch, kv_heads, seq, head_dim_v]
                Falcon with new_decoder_architecture broadcasts K/V to all query heads before
                caching: kv_heads = num_attention_heads (modeling_falcon.py, FalconAttention.forward)
    MLA         K slot: the normed latent [batch, 1, seq, kv_lora_rank]; V slot: the rope key
                [batch, 1, seq, qk_rope_head_dim] (modeling_deepseek_v3.py, DeepseekV3Attention);
                DeepSeek-V3.2 also an indexer key [batch, seq, index_head_dim] (update_indexer)
    linear/SSM  conv state [batch, conv_channels, conv_kernel] in the compute dtype (the whole
                kernel, not kernel - 1) and a recurrent state in fp32 (the torch paths compute it
                in fp32): gated DeltaNet [batch, v_heads, k_dim, v_dim], Mamba [batch, inner,
                d_state], Mamba2 [batch, heads, head_dim, d_state] (LinearAttentionLayer)
    shared/none DummyLayer: nothing (Gemma-3n kv-sharing consumers, Nemotron-H MLP blocks)

hf-dynamic (DynamicCache(config=...)):
    DynamicLayer             keys = cat([keys, new]): the old K is freed before V is concatenated
    DynamicSlidingWindowLayer (sliding and chunked layers, window = sliding_window or
                             attention_chunk_size): both cats first, then keeps the view
                             full[:, :, -window + 1:] -- the view pins the whole buffer: P tokens
                             right after a prefill of P, min(tokens, window) once decoding
hf-static (StaticCache(config, max_cache_len)):
    StaticLayer              zeros [batch, heads, max_cache_len, dim] at the first update; writes
                             by index_copy_ with positions arange(s) + cumulative_length (int64)
    StaticSlidingWindowLayer min(window, max_cache_len) tokens; once full each decode step
                             rolls: a transient copy of the layer's K and of its V
hf-quantized (QuantizedCache(backend, config, ...); full-attention models only):
    prefill                  K and V quantised whole, residual empty
    decode                   dequantise all, cat(dequantised, residual, new) is returned; when
                             residual + new >= residual_length everything is re-quantised and
                             the residual emptied, else the new token joins the residual
    quanto                   groups of q_group_size along axis 0: uint8 packed
                             ceil(groups / (8 / nbits)) x q_group_size bytes, scale + shift per
                             group in the compute dtype (optimum/quanto/tensor/weights/qbits.py)
    hqq                      [q_group_size, groups] packed along the group: 8/4/2/1 bit in uint8
                             rows of q_group_size x nbits / 8, 3 bit in ceil(q_group_size / 10)
                             int32 rows; scale + zero per group cast to the compute dtype
                             (hqq/core/quantize.py, bitpack.py). Neither backend keeps fp32
                             scales on CPU in these versions: bf16 K/V get bf16 scales.
    fp8                      float8_e4m3fn, one fp32 scale per tensor frozen at the prefill,
                             new tokens appended by cat, no residual (Fp8QuantizedLayer)

``.peak_bytes`` replays the allocations each update makes (a tensor allocated is +bytes, one
freed is -bytes) and reports the highest running total: cache storage, recurrent state,
int64 position tensors, and copies made inside ``update`` (cat results, dequantised copies,
the quantiser's working set). The incoming K/V of the step are the model's activations and
are not counted. The quantisers' working sets are counts of what their code allocates on
torch 2.13 CPU (table below); on CUDA hqq optimises in fp16 and quanto may use other
kernels, so treat quantised peaks there as approximate.

transformers keeps these caches on the device of each layer; kvmem models one device, so
tp and pp must be 1 (with a device_map split every GPU holds the ``per_layer`` bytes of
its own layers).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..dtypes import dtype as _dtype
from ..model import CHUNKED, FULL, LINEAR, MLA, NONE, SHARED, SLIDING, Model
from ..records import Record
from ..units import require_positive_int
from ..activations import forward_bytes_per_token, forward_shape
from .base import Budget, BudgetRequest, EngineSpec, PastPositions, PrefixSharing, SizingRules, assemble, cdiv

__all__ = ["Slot", "slots", "DEFAULTS", "quantized_bytes", "DynamicGrowth", "prompt_tokens_of"]

# Engine defaults, each with its source (transformers 5.24.0).
DEFAULTS = {
    # kvmem's workload: one prefill of every token (no decode steps).
    "prompt_tokens": None,
    # StaticCache(config, max_cache_len): kvmem sizes it to hold `tokens`; generate() uses
    # prompt + max_new_tokens - 1 (generation/utils.py, _prepare_cache_for_generation).
    "max_cache_len": None,
    # generation/utils.py _prepare_cache_for_generation: cache_config.pop("backend", "quanto").
    "backend": "quanto",
    # QuantizedLayer.__init__: nbits=4, q_group_size=64, residual_length=128 (None = these).
    "nbits": None,
    "q_group_size": None,
    "residual_length": None,
}
_QUANTIZED_LAYER_DEFAULTS = {"nbits": 4, "q_group_size": 64, "residual_length": 128}
# QuantoQuantizedLayer / HQQQuantizedLayer.__init__: the nbits each backend accepts.
_BACKEND_NBITS = {"quanto": (2, 4), "hqq": (1, 2, 3, 4, 8)}
# hqq/core/bitpack.py: values packed per storage row along the group (3 bit: 10 per int32).
_HQQ_ROW_VALUES = {8: 1, 4: 2, 2: 4, 1: 8}
_FLOAT_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2}
_RECURRENT_STATE_BYTES = 4  # fp32 (torch_chunk_gated_delta_rule, mamba(2) torch scans)
_INT64 = 8
# The quantisers' working sets on CPU, counted with the torch profiler on torch 2.13 for every
# nbits, dtype and shape tried (N elements in, G = N / q_group_size groups, e = bytes per
# compute-dtype element); each is the high-water mark above what was held before the call.
#   hqq quantize     32 N + (4 N unless e == 4) + 24 G + 16: W.float(), then the proximal
#                    optimiser's fp32 temporaries (W_q, W_r, W_e and their products; the
#                    previous iteration's W_q/W_r stay alive) and six fp32 per-group vectors
#   hqq dequantize   3 e N: the unpacked values, (W - zero), (W - zero) * scale
#   quanto quantize  (2e + 1) N + 2e G: the scaled copy, rounded uint8 values, packing
#   quanto dequantize (2e + 1) N: unpacked uint8, (data - shift), * scale
_WORKING_SET = {
    ("hqq", "quantize"): lambda n, g, e: 32 * n + (0 if e == 4 else 4 * n) + 24 * g + 16,
    ("hqq", "dequantize"): lambda n, _g, e: 3 * e * n,
    ("quanto", "quantize"): lambda n, g, e: (2 * e + 1) * n + 2 * e * g,
    ("quanto", "dequantize"): lambda n, _g, e: (2 * e + 1) * n,
}
_HF_TYPE = {FULL: "full_attention", SLIDING: "sliding_attention", CHUNKED: "chunked_attention",
            LINEAR: "linear_attention", SHARED: "dummy", NONE: "dummy"}


@dataclass(frozen=True)
class Slot:
    """What one decoder layer hands to its transformers cache layer (per sequence).

    ``kind``: "attention" (DynamicLayer / StaticLayer), "sliding" (the sliding-window classes,
    also used for chunked layers), "linear" (LinearAttentionLayer) or "dummy" (DummyLayer).
    """

    kind: str
    hf_type: str
    heads: int = 0
    k_dim: int = 0
    v_dim: int = 0
    window: int = 0
    index_dim: int = 0
    conv_channels: int = 0
    conv_kernel: int = 0
    recurrent_elements: int = 0


def slots(model: Model) -> tuple[Slot, ...]:
    """Per layer, the K/V (or state) shapes transformers 5.24 caches for ``model``."""
    falcon_broadcast = model.model_type == "falcon" and model.facts.new_decoder_architecture
    out = []
    for layer in model.layers:
        if layer.kind in (FULL, SLIDING, CHUNKED):
            heads = model.num_attention_heads if falcon_broadcast else layer.kv_heads
            kind = "attention" if layer.kind == FULL else "sliding"
            out.append(Slot(kind, _HF_TYPE[layer.kind], heads, layer.head_dim_k, layer.head_dim_v,
                            window=layer.window))
        elif layer.kind == MLA:
            out.append(Slot("attention", "indexed_attention" if layer.index_head_dim else "full_attention",
                            1, layer.kv_lora_rank, layer.qk_rope_head_dim, index_dim=layer.index_head_dim))
        elif layer.kind == LINEAR:
            state = layer.state
            out.append(Slot("linear", "linear_attention", conv_channels=state.conv_channels,
                            conv_kernel=state.conv_kernel, recurrent_elements=state.ssm_elements))
        else:
            out.append(Slot("dummy", "dummy"))
    return tuple(out)


def quantized_bytes(backend: str, n: int, *, nbits: int, q_group_size: int, element_bytes: int) -> int:
    """Bytes a backend stores for one quantised tensor of ``n`` elements (packed + scale/zero)."""
    if backend == "fp8":
        return n + 4  # float8_e4m3fn values + one fp32 scale
    groups = n // q_group_size
    if backend == "quanto":
        packed = cdiv(groups, 8 // nbits) * q_group_size
    elif nbits == 3:
        packed = cdiv(q_group_size, 10) * 4 * groups
    else:
        packed = q_group_size // _HQQ_ROW_VALUES[nbits] * groups
    return packed + 2 * groups * element_bytes


# ---------------------------------------------------------------------------------------------
# Common inputs


def _compute_dtype(model: Model, kv_dtype, engine: str) -> tuple[str, int]:
    name = _dtype(kv_dtype, model_dtype=model.dtype).name
    if name not in _FLOAT_BYTES:
        hint = "; for a quantised cache use engine='hf-quantized'" if engine != "hf-quantized" else ""
        raise ValueError(f"kv_dtype for {engine} is the model's compute dtype (fp32, fp16 or bf16): "
                         f"transformers caches K/V as the attention layer computes them, got {name!r}{hint}")
    return name, _FLOAT_BYTES[name]


def _single_device(engine: str, tp: int, pp: int) -> None:
    for field_name, value in (("tp", tp), ("pp", pp)):
        if value != 1:
            raise ValueError(
                f"{field_name} must be 1 for {engine}, got {value}: transformers builds the cache on the "
                "device of each layer and kvmem models one device (with a device_map split, each GPU "
                "holds the per_layer bytes of its own layers)")


def prompt_tokens_of(tokens: int, prompt_tokens) -> int:
    """The prompt length (tokens when not given), checked to be at most ``tokens``."""
    if prompt_tokens is None:
        return tokens
    prompt = require_positive_int("prompt_tokens", prompt_tokens)
    if prompt > tokens:
        raise ValueError(f"prompt_tokens must be at most tokens ({tokens}), got {prompt}")
    return prompt


def _positions(s: int) -> list[int]:
    """StaticLayer.update: arange(s) + cumulative_length, then cumulative_length.add_(s)."""
    return [_INT64 * s, _INT64 * s, -_INT64 * s, _INT64, -_INT64, -_INT64 * s]


class _Workload:
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
        conv = self.batch * slot.conv_channels * slot.conv_kernel * self.e
        return conv, self.batch * slot.recurrent_elements * _RECURRENT_STATE_BYTES

    def linear_events(self, slot: Slot, j: int) -> list[int]:
        """LinearAttentionLayer: zeros for both states at the prefill; the prefill's conv input
        is left-padded to the kernel when shorter (F.pad, freed after); decode updates in place."""
        if j:
            return []
        conv, recurrent = self.state(slot)
        pad = [conv, -conv] if self.prompt < slot.conv_kernel else []
        return [conv, *pad, recurrent]

    def peak(self) -> int:
        """The highest running total over the steps where it can occur (see _peak_steps)."""
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
        dummy layer, else the cache type's own token_events."""
        slot = self.slots[i]
        if slot.kind == "linear":
            return self.linear_events(slot, j)
        if slot.kind == "dummy":
            return []
        return self.token_events(slot, j)

    def rows(self, i: int) -> tuple[int, int, int]:
        """(K, V, state) bytes layer ``i`` holds at the end: ``held_tokens`` tokens of K (+ indexer)
        and V, or a linear layer's fixed states."""
        slot = self.slots[i]
        if slot.kind == "linear":
            return 0, 0, sum(self.state(slot))
        if slot.kind == "dummy":
            return 0, 0, 0
        tokens = self.held_tokens(slot)
        return tokens * (self.k_token(slot) + self.i_token(slot)), tokens * self.v_token(slot), 0


class DynamicGrowth(_Workload):
    """A DynamicCache's storage step by step: torch.cat growth and sliding layers' trims (kvmem.measure)."""

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
        return self.stored(slot, j) * (self.k_token(slot) + self.v_token(slot) + self.i_token(slot))

    def token_events(self, slot: Slot, j: int) -> list[int]:
        old, new = self.stored(slot, j - 1), self.stored(slot, j)
        k, v = self.k_token(slot), self.v_token(slot)
        if slot.kind == "sliding":
            out = [new * k, new * v, -old * k, -old * v]
        else:
            out = [new * k, -old * k, new * v, -old * v]
        if slot.index_dim:
            out += [new * self.i_token(slot), -old * self.i_token(slot)]
        return out

    def held_tokens(self, slot: Slot) -> int:
        return self.stored(slot, self.steps)


class _Static(_Workload):
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
        return self.length(slot) * (self.k_token(slot) + self.v_token(slot)) + index

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


class _Quantized(_Workload):
    def __init__(self, slots_, *, backend: str, nbits: int, q_group_size: int, residual_length: int, **kw):
        super().__init__(slots_, **kw)
        self.backend, self.nbits, self.group, self.residual = backend, nbits, q_group_size, residual_length

    def split(self, j: int) -> tuple[int, int]:
        """(quantised tokens, residual tokens) after step j."""
        if j < 0:
            return 0, 0
        if self.backend == "fp8" or j == 0:
            return self.prompt + j, 0
        residual = j % self.residual if self.residual > 1 else 0
        return self.prompt + j - residual, residual

    def q(self, elements: int) -> int:
        return quantized_bytes(self.backend, elements, nbits=self.nbits, q_group_size=self.group,
                               element_bytes=self.e)

    def elements(self, slot: Slot, tokens: int) -> tuple[int, int]:
        return self.batch * slot.heads * tokens * slot.k_dim, self.batch * slot.heads * tokens * slot.v_dim

    def part_bytes(self, slot: Slot, j: int) -> tuple[int, int]:
        quantised, residual = self.split(j)
        if j < 0:
            return 0, 0
        nk, nv = self.elements(slot, quantised)
        return (self.q(nk) + residual * self.k_token(slot), self.q(nv) + residual * self.v_token(slot))

    def held(self, i: int, j: int) -> int:
        return sum(self.part_bytes(self.slots[i], j))

    def rows(self, i: int) -> tuple[int, int, int]:
        return (*self.part_bytes(self.slots[i], self.steps), 0)

    def quantize(self, n: int) -> list[int]:
        work = _WORKING_SET[(self.backend, "quantize")](n, n // self.group, self.e)
        return [work, self.q(n) - work]

    def dequantize(self, n: int) -> list[int]:
        work = _WORKING_SET[(self.backend, "dequantize")](n, n // self.group, self.e)
        return [work, n * self.e - work]

    def events(self, i: int, j: int) -> list[int]:
        slot = self.slots[i]
        if self.backend == "fp8":
            return self.fp8_events(slot, j)
        if j == 0:
            nk, nv = self.elements(slot, self.prompt)
            return self.quantize(nk) + self.quantize(nv)
        quantised, residual = self.split(j - 1)
        k_t, v_t = self.k_token(slot), self.v_token(slot)
        nk, nv = self.elements(slot, quantised)
        full = quantised + residual + 1
        out = self.dequantize(nk) + self.dequantize(nv) + [full * k_t, full * v_t]
        fk, fv = self.elements(slot, full)
        if residual + 1 >= self.residual:
            out += self.quantize(fk) + [-self.q(nk)] + self.quantize(fv) + [-self.q(nv)]
            out += [-residual * k_t, -residual * v_t]
        else:
            out += [(residual + 1) * k_t, -residual * k_t, (residual + 1) * v_t, -residual * v_t]
        return out + [-nk * self.e, -nv * self.e, -full * k_t, -full * v_t]

    def fp8_cast(self, n: int) -> list[int]:
        """(x.float() / scale).to(float8_e4m3fn); x.float() is x itself for fp32 input."""
        widen = [] if self.e == 4 else [4 * n]
        return widen + [4 * n] + [-x for x in widen] + [n, -4 * n]

    def fp8_events(self, slot: Slot, j: int) -> list[int]:
        if j == 0:
            out = []
            for n in self.elements(slot, self.prompt):
                # scale = (x.abs().amax().float() / fp8_max).clamp(...): |x| is the large temporary
                out += [n * self.e, -n * self.e, 4] + self.fp8_cast(n)
            return out
        held_tokens = self.prompt + j - 1
        new_k, new_v = self.elements(slot, 1)
        old_k, old_v = self.elements(slot, held_tokens)
        all_k, all_v = self.elements(slot, held_tokens + 1)
        out = self.fp8_cast(new_k) + self.fp8_cast(new_v) + [all_k, all_v]
        for n in (all_k, all_v):  # (q.float() * scale).to(dtype)
            out += [4 * n, 4 * n, -4 * n] + ([] if self.e == 4 else [self.e * n, -4 * n])
        return out + [-old_k, -old_v, -new_k, -new_v, -all_k * self.e, -all_v * self.e]

    def _peak_steps(self) -> list[int]:
        # Bytes and transients grow with j; a re-quantising step has the largest transient of
        # its neighbourhood, so the last one is checked as well as the last step.
        steps = {0, self.steps}
        if self.backend != "fp8" and self.steps:
            period = max(self.residual, 1)
            last_flush = self.steps - self.steps % period
            if last_flush:
                steps.add(last_flush)
        return sorted(steps)


# ---------------------------------------------------------------------------------------------
# The three engine modes


@dataclass(frozen=True)
class HfDetails(Record):
    """Estimate.details of hf-dynamic: the prefill, the decode steps, each layer's cache class."""

    prompt_tokens: int
    decode_steps: int
    cache_layers: list           # transformers' cache layer class per layer


@dataclass(frozen=True)
class HfStaticDetails(HfDetails):
    """hf-static adds the StaticCache length."""

    max_cache_len: int


@dataclass(frozen=True)
class HfQuantizedDetails(HfDetails):
    """hf-quantized adds the quantiser and how many tokens it holds quantised vs in the residual."""

    backend: str
    nbits: int | None
    q_group_size: int | None
    residual_length: int
    quantized_tokens: int
    residual_tokens: int


def _finish(model: Model, engine: str, work: _Workload, *, tokens, batch, kv_name, notes, kind=HfDetails,
            **details):
    rows = [work.rows(i) for i in range(len(work.slots))]
    steady = sum(sum(row) for row in rows)
    kv = sum(row[0] + row[1] for row in rows)
    peak = max(work.peak(), steady)
    details = kind(prompt_tokens=work.prompt, decode_steps=work.steps,
                   cache_layers=[s.hf_type for s in work.slots], **details)
    return assemble(model, engine, tokens=tokens, batch=batch, kv_dtype=kv_name, tp=1, pp=1, rows=rows,
                    peak_extra=peak - kv, notes=notes, details=details)


def _common_notes(model: Model, found: tuple[Slot, ...]) -> list[str]:
    notes = []
    if model.model_type == "falcon" and model.facts.new_decoder_architecture:
        # a what-if variant may have no per-head layer left (MLA, shared): no note then
        kv_heads = next((layer.kv_heads for layer in model.layers if layer.kv_heads), None)
        if kv_heads is not None:
            notes.append(f"transformers caches Falcon's K/V broadcast to all {model.num_attention_heads} query "
                         f"heads, not its {kv_heads} KV heads (modeling_falcon.py)")
    if any(s.kind == "linear" for s in found):
        notes.append("linear/SSM layers: conv state of the whole kernel in the compute dtype, recurrent "
                     "state in fp32 (transformers' torch paths)")
    return notes


def estimate_dynamic(model: Model, *, tokens: int, batch: int, kv_dtype, tp: int, pp: int, prompt_tokens=None):
    _single_device("hf-dynamic", tp, pp)
    kv_name, e = _compute_dtype(model, kv_dtype, "hf-dynamic")
    found = slots(model)
    prompt = prompt_tokens_of(tokens, prompt_tokens)
    work = DynamicGrowth(found, batch=batch, prompt=prompt, tokens=tokens, e=e)
    notes = _common_notes(model, found)
    pinned = [s.window for s in found if s.kind == "sliding" and prompt >= s.window and prompt == tokens]
    if pinned:
        notes.append(f"sliding layers keep a view of the last window - 1 tokens, which pins the whole "
                     f"{prompt}-token prefill buffer until the next decode step (DynamicSlidingWindowLayer)")
    return _finish(model, "hf-dynamic", work, tokens=tokens, batch=batch, kv_name=kv_name, notes=notes)


def estimate_static(model: Model, *, tokens: int, batch: int, kv_dtype, tp: int, pp: int,
                    max_cache_len=None, prompt_tokens=None):
    _single_device("hf-static", tp, pp)
    kv_name, e = _compute_dtype(model, kv_dtype, "hf-static")
    found = slots(model)
    prompt = prompt_tokens_of(tokens, prompt_tokens)
    length = tokens if max_cache_len is None else require_positive_int("max_cache_len", max_cache_len)
    if length < tokens and any(s.kind == "attention" for s in found):
        raise ValueError(f"max_cache_len ({length}) must be at least tokens ({tokens}): a StaticCache "
                         "full-attention layer holds at most max_cache_len tokens")
    work = _Static(found, max_cache_len=length, batch=batch, prompt=prompt, tokens=tokens, e=e)
    return _finish(model, "hf-static", work, tokens=tokens, batch=batch, kv_name=kv_name,
                   notes=_common_notes(model, found), kind=HfStaticDetails, max_cache_len=length)


def _check_quantized(model: Model, found: tuple[Slot, ...], backend: str, nbits, q_group_size,
                     residual_length, prompt: int, tokens: int, batch: int) -> tuple[int, int, int]:
    if backend not in ("quanto", "hqq", "fp8"):
        raise ValueError(f"backend must be 'quanto', 'hqq' or 'fp8', got {backend!r}")
    invalid = sorted({s.hf_type for s in found} - {"full_attention"})
    if invalid:
        raise ValueError("`QuantizedCache` is only supported for models with only full attention layers. "
                         f"We found the following invalid layer types: {set(invalid)} (in {model.name})")
    given = {"nbits": nbits, "q_group_size": q_group_size, "residual_length": residual_length}
    if backend == "fp8":
        unsupported = [name for name, value in given.items() if value is not None]
        if unsupported:
            raise ValueError(f"The `fp8` backend quantizes per-tensor and does not support {unsupported}. "
                             "Use the `quanto` or `hqq` backend to quantize group-wise.")
        return 8, 1, 0
    values = {name: _QUANTIZED_LAYER_DEFAULTS[name] if value is None else value for name, value in given.items()}
    nbits = values["nbits"]
    group = require_positive_int("q_group_size", values["q_group_size"])
    residual = values["residual_length"]
    if isinstance(residual, bool) or not isinstance(residual, int) or residual < 0:
        raise ValueError(f"residual_length must be a non-negative integer, got {residual!r}")
    if nbits not in _BACKEND_NBITS[backend]:
        raise ValueError(f"`nbits` for `{backend}` backend has to be one of {list(_BACKEND_NBITS[backend])} "
                         f"but got {nbits!r}")
    if backend == "hqq" and nbits != 3 and group % _HQQ_ROW_VALUES[nbits]:
        raise ValueError(f"q_group_size ({group}) must be a multiple of {_HQQ_ROW_VALUES[nbits]}: hqq packs "
                         f"{_HQQ_ROW_VALUES[nbits]} {nbits}-bit values per byte along each group")
    # Every quantisation (the prefill, then each flush of the residual) must split into groups.
    lengths = [prompt]
    steps = tokens - prompt
    period = max(residual, 1)
    lengths += [prompt + k * period for k in range(1, min(steps // period, group) + 1)]
    for slot in found:
        for dim in (slot.k_dim, slot.v_dim):
            for length in lengths:
                per_row = slot.heads * length * dim  # quanto groups axis 0 (batch): the rest per row
                if backend == "quanto" and (group > per_row or per_row % group):
                    raise ValueError(f"Group size ({group}) must be a divisor of ({per_row}): quanto groups "
                                     f"[batch, {slot.heads}, {length}, {dim}] along axis 0 (q_group_size)")
                if backend == "hqq" and (batch * per_row) % group:  # hqq groups the whole tensor
                    raise ValueError(f"group_size should be divisble by the total tensor dimensions: hqq "
                                     f"cannot split [{batch}, {slot.heads}, {length}, {dim}] into groups of "
                                     f"{group} (q_group_size)")
    return nbits, group, residual


def estimate_quantized(model: Model, *, tokens: int, batch: int, kv_dtype, tp: int, pp: int, backend="quanto",
                       nbits=None, q_group_size=None, residual_length=None, prompt_tokens=None):
    _single_device("hf-quantized", tp, pp)
    kv_name, e = _compute_dtype(model, kv_dtype, "hf-quantized")
    found = slots(model)
    prompt = prompt_tokens_of(tokens, prompt_tokens)
    nbits, group, residual = _check_quantized(model, found, backend, nbits, q_group_size, residual_length,
                                              prompt, tokens, batch)
    work = _Quantized(found, backend=backend, nbits=nbits, q_group_size=group, residual_length=residual,
                      batch=batch, prompt=prompt, tokens=tokens, e=e)
    quantised, held_residual = work.split(work.steps)
    label = "fp8_e4m3 per-tensor" if backend == "fp8" else f"{backend} int{nbits} g{group}"
    notes = _common_notes(model, found)
    notes.append(f"{label}: {quantised} tokens quantised, {held_residual} in the {kv_name} residual; "
                 f"scales in {'fp32' if backend == 'fp8' else kv_name}")
    return _finish(model, "hf-quantized", work, tokens=tokens, batch=batch, kv_name=kv_name, notes=notes,
                   kind=HfQuantizedDetails, backend=backend, nbits=nbits, q_group_size=group,
                   residual_length=residual, quantized_tokens=quantised, residual_tokens=held_residual)


# ---- sizing --------------------------------------------------------------------------------
#
# One device per model copy: weights + the cache (its transient peak: DynamicCache grows by
# torch.cat) + activations + 512 MiB of CUDA context (a typical value). Activations: the prompt
# runs at once, batch x context x the forward per token (kvmem.activations), plus the last
# token's logits in fp32 and their softmax, batch x vocab x 8 B.

NON_TORCH_BYTES = 512 << 20
SIZING_OPTIONS = {"weights_bytes": None, "activation_bytes": None, "non_torch_bytes": None}
HF_WEIGHT_FORMATS = ("int8", "awq")


def hf_activation_bytes(model: Model, *, batch: int, context: int) -> int:
    """transformers' forward over the whole prompt plus the last-token logits and softmax."""
    shape = forward_shape(model)
    return batch * context * forward_bytes_per_token(shape, 1) + batch * shape.vocab * 8


def _budget(req: BudgetRequest) -> Budget:
    act = req.activation_bytes
    if act is None:
        act = hf_activation_bytes(req.model, batch=req.batch, context=req.context)
    total = req.gpu.usable_memory_bytes
    return Budget(total, req.weights_bytes, act, req.non_torch_bytes,
                  total - req.weights_bytes - act - req.non_torch_bytes)


def _prefix(_options: dict, _est) -> PrefixSharing:
    return PrefixSharing(notes=("transformers caches keep one row per sequence and share nothing: "
                                "prefix sharing is a what-if",))


SIZING = SizingRules(budget=_budget, options=SIZING_OPTIONS, non_torch_bytes=NON_TORCH_BYTES, batch_dependent=True,
                     one_device=True, kv_smaller_dtype=None, weight_formats=HF_WEIGHT_FORMATS)
POSITIONS = PastPositions("transformers does not check it")   # the caches take any length
SPECS = (
    EngineSpec("hf-dynamic", {"prompt_tokens": DEFAULTS["prompt_tokens"]}, estimate_dynamic, None, SIZING, _prefix,
               POSITIONS),
    EngineSpec("hf-static", {"max_cache_len": DEFAULTS["max_cache_len"],
                             "prompt_tokens": DEFAULTS["prompt_tokens"]}, estimate_static, None, SIZING, _prefix,
               POSITIONS),
    EngineSpec("hf-quantized", {name: DEFAULTS[name] for name in
                                ("backend", "nbits", "q_group_size", "residual_length", "prompt_tokens")},
               estimate_quantized, None, SIZING, _prefix, POSITIONS),
)

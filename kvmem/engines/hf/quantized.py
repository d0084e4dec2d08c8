"""QuantizedCache: what quanto, hqq and fp8 store, their working sets, the settings they accept, its growth.

Storage and layout rules (optimum-quanto 0.2.7, hqq 0.2.8.post1, transformers 5.24.0
QuantizedLayer / Fp8QuantizedLayer) are in QuantizedGrowth's docstring; the working sets are
counted below, with how they were measured.
"""

from __future__ import annotations

from ...errors import EngineRefusal
from ...model import Model
from ...units import cdiv, require_positive_int
from .growth import Workload
from .slots import Slot

# QuantizedLayer.__init__: nbits=4, q_group_size=64, residual_length=128 (DEFAULTS' None = these).
_QUANTIZED_LAYER_DEFAULTS = {"nbits": 4, "q_group_size": 64, "residual_length": 128}
# QuantoQuantizedLayer / HQQQuantizedLayer.__init__: the nbits each backend accepts.
_BACKEND_NBITS = {"quanto": (2, 4), "hqq": (1, 2, 3, 4, 8)}
# hqq/core/bitpack.py: values packed per storage row along the group (3 bit: 10 per int32).
_HQQ_ROW_VALUES = {8: 1, 4: 2, 2: 4, 1: 8}
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


def check_quantized(model: Model, found: tuple[Slot, ...], backend: str, nbits, q_group_size,
                    residual_length, prompt: int, tokens: int, batch: int) -> tuple[int, int, int]:
    """(nbits, q_group_size, residual_length) with QuantizedLayer's defaults filled in, or the error
    transformers, quanto or hqq raises for these settings on this model and workload."""
    if backend not in ("quanto", "hqq", "fp8"):
        raise ValueError(f"backend must be 'quanto', 'hqq' or 'fp8', got {backend!r}")
    invalid = sorted({s.hf_type for s in found} - {"full_attention"})
    if invalid:   # transformers@v5.24.0 src/transformers/cache_utils.py#L2237-L2243 QuantizedCache.__init__
        why = ("`QuantizedCache` is only supported for models with only full attention layers. "
               f"We found the following invalid layer types: {set(invalid)} (in {model.name})")
        raise EngineRefusal(why, engine="hf-quantized", release="transformers 5.24.0", reason=why,
                            way_out="hf-dynamic or hf-static (unquantized caches) size this model")
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


class QuantizedGrowth(Workload):
    """A QuantizedCache's storage step by step: the quantised prefill, the residual, each re-quantising flush.

    hf-quantized (QuantizedCache(backend, config, ...); full-attention models only): the prefill quantises
    K and V whole, residual empty; a decode step dequantises all and returns cat(dequantised, residual,
    new); when residual + new >= residual_length everything is re-quantised and the residual emptied,
    else the new token joins the residual (transformers@v5.24.0 src/transformers/cache_utils.py#L824-L865).
      quanto  groups of q_group_size along axis 0: uint8 packed ceil(groups / (8 / nbits)) x q_group_size
              bytes, scale + shift per group in the compute dtype (cache_utils.py#L897-L949;
              optimum/quanto/tensor/weights/qbits.py)
      hqq     [q_group_size, groups] packed along the group: 8/4/2/1 bit in uint8 rows of q_group_size x
              nbits / 8, 3 bit in ceil(q_group_size / 10) int32 rows; scale + zero per group cast to the
              compute dtype (cache_utils.py#L952-L1006; hqq/core/quantize.py, bitpack.py). Neither backend
              keeps fp32 scales on CPU in these versions: bf16 K/V get bf16 scales.
      fp8     float8_e4m3fn, one fp32 scale per tensor frozen at the prefill, new tokens appended by cat,
              no residual (cache_utils.py#L1009-L1076 Fp8QuantizedLayer)"""

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

"""The records of a llama.cpp placement: each tensor's device, each device's buffers
(kvmem.engines.llamacpp.placement.place makes them; its docstring has llama.cpp's rules)."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import NamedTuple

from .overrides import CPU

__all__ = ["PlacedTensor", "DeviceMemory", "Placement", "TensorInfos", "hashed_infos", "tensor_group", "per_run",
           "run_decode", "runs_of"]


class PlacedTensor(NamedTuple):
    """One weight tensor as llama.cpp loads it: GGUF name, ggml type, ne (ne0 first), bytes, file
    offset, group, layer (None for input/output tensors) and the device that holds it. A named tuple, not a frozen
    dataclass: a placement search makes thousands (6,500 for glm-4.7 on 4 GPUs), 1.0 us each, not 3.5."""

    name: str
    type: str
    ne: tuple
    nbytes: int
    offset: int
    group: str
    layer: int | None
    device: str


@dataclass(frozen=True)
class DeviceMemory:
    """One device's buffers: model weights (by group), KV, and the printed model buffer."""

    device: str
    model_bytes: int                 # the model buffer llama.cpp prints for this device
    group_bytes: dict                # group -> sum of ggml_nbytes of the tensors placed here
    kv_bytes: int
    layers: tuple                    # repeating layers whose tensors/KV are here
    buffer_name: str                 # "CUDA0", "CPU_Mapped", "CPU", "CUDA_Host"

    def to_dict(self) -> dict:
        return {"device": self.device, "buffer": self.buffer_name, "model_bytes": self.model_bytes,
                "group_bytes": dict(self.group_bytes), "kv_bytes": self.kv_bytes, "layers": list(self.layers)}


@dataclass(frozen=True)
class Placement:
    """Every tensor's device and each device's buffers for one set of llama.cpp options."""

    n_layer: int
    n_gpu_layers: int
    gpus: tuple                      # device names, main GPU first: ("CUDA0", "CUDA1")
    tensor_split: tuple
    mmap: bool
    kv_offload: bool
    tensors: tuple = field(repr=False)
    layer_device: tuple = ()         # device of each repeating layer
    output_device: str = CPU
    devices: tuple = ()              # DeviceMemory per GPU, then the host
    notes: tuple = ()
    # the file's NextN/MTP blocks (blk.n_layer .. blk.n_layer_all - 1): each gets a device by the split and holds
    # nothing (their tensors skipped at load, no KV cells in the main context)
    n_nextn: int = 0
    nextn_device: tuple = ()
    # ``tensors`` in runs (tensors concatenated in order): a run of one layer's tensors is the same tuple in every
    # placement that places it alike (placement._placed), so what is derived from a run can be kept by it (layouts)
    runs: tuple = field(default=(), repr=False, compare=False)

    def device(self, name: str) -> DeviceMemory:
        for d in self.devices:
            if d.device == name:
                return d
        raise KeyError(name)

    @property
    def host(self) -> DeviceMemory:
        return self.devices[-1]

    @property
    def n_layer_all(self) -> int:
        """hparams.n_layer_all: the GGUF's block_count, trunk and NextN/MTP blocks."""
        return self.n_layer + self.n_nextn

    @property
    def layers_total(self) -> int:
        """llama.cpp's "offloaded N/M layers to GPU" M: n_layer_all + 1 (the output layer)."""
        return self.n_layer_all + 1

    @property
    def offloaded_layers(self) -> int:
        """llama.cpp's "offloaded N/M layers to GPU" N = min(-ngl, n_layer_all + 1): the layers (trunk, MTP blocks
        and output) the split gives a GPU."""
        return sum(d != CPU for d in self.layer_device + self.nextn_device) + (self.output_device != CPU)

    def to_dict(self) -> dict:
        return {"n_layer": self.n_layer, "n_nextn": self.n_nextn, "n_gpu_layers": self.n_gpu_layers,
                "gpus": list(self.gpus), "tensor_split": list(self.tensor_split), "mmap": self.mmap,
                "kv_offload": self.kv_offload, "offloaded_layers": self.offloaded_layers,
                "layers_total": self.layers_total, "devices": [d.to_dict() for d in self.devices],
                "notes": list(self.notes)}


class TensorInfos(tuple):
    """A tuple of tensor infos whose hash is taken once: placement's caches are keyed by a file's 1,000+ tensors, and
    a search places the same tuple tens of times (hashing it was a quarter of place's time, qwen3-235b-a22b x4)."""

    def __hash__(self):
        h = self.__dict__.get("hash")
        if h is None:
            h = self.__dict__["hash"] = tuple.__hash__(self)
        return h


_LAST_INFOS: list = [None, None]        # the last tuple hashed_infos was given, and its TensorInfos


def hashed_infos(tensors) -> TensorInfos:
    """``tensors`` as TensorInfos; the last tuple given is kept (a tuple and its frozen infos do not change)."""
    if type(tensors) is tuple and _LAST_INFOS[0] is tensors:
        return _LAST_INFOS[1]
    out = TensorInfos(tensors)
    if type(tensors) is tuple:
        _LAST_INFOS[:] = [tensors, out]
    return out


# the groups of placement's per-group table (placement's module doc)
_INPUT: tuple[str, ...] = ("token_embd", "token_embd_norm", "token_types", "pos_embd", "per_layer_token_embd")
# gemma3n: LLM_TENSOR_LAYER_REPEATING tensors created with layer number 0, on layer 0's device (llama.cpp@0c1e57098
# src/models/gemma3n.cpp#L39-L40, src/llama-model.cpp#L1964); altup_proj / altup_unembd_proj LLM_TENSOR_LAYER_OUTPUT
# (src/llama-arch.cpp#L921-L925)
_LAYER_0 = ("per_layer_model_proj", "per_layer_proj_norm")
# LLM_TENSOR_POS_EMBD, an LLM_TENSOR_LAYER_INPUT (llama.cpp@0c1e57098 src/llama-arch.cpp#L484, #L729)
_INPUT += ("position_embd",)
_OUTPUT: tuple[str, ...] = ("output", "output_norm", "cls", "cls_out")
# DeepSeek-V4's head hyper-connection: LLM_TENSOR_LAYER_OUTPUT (llama.cpp@0c1e57098 src/llama-arch.cpp#L766-L768)
_OUTPUT += ("output_hc_fn", "output_hc_base", "output_hc_scale")
_OUTPUT += ("altup_proj", "altup_unembd_proj")     # gemma3n (_LAYER_0's comment)
_OUTPUT += ("output_res_score",)     # kimi-k3, LLM_TENSOR_LAYER_OUTPUT: llama.cpp@0c1e57098 src/llama-arch.cpp#L863
_LAYER = re.compile(r"^blk\.(\d+)\.(.+)$")


@functools.lru_cache(maxsize=1 << 16)
def tensor_group(name: str) -> tuple[str, int | None]:
    """(group, layer) of a GGUF tensor name; a name llama.cpp would not place here is refused
    (remembered: a placement search asks the same names for every trial)."""
    m = _LAYER.match(name)
    if m is None:
        base = name.rsplit(".", 1)[0]
        if base in _INPUT:
            return "embeddings", None
        if base in _OUTPUT:
            return "output", None
        if base == "rope_freqs":
            return "other", -1      # one copy per layer (TENSOR_DUPLICATED)
        if base in _LAYER_0:
            return "other", 0
        raise ValueError(f"tensor {name!r}: kvmem does not know which llama.cpp layer loads it "
                         "(not token_embd*, output*, rope_freqs or blk.N.*); a multimodal projector "
                         "belongs in its own --mmproj file")
    layer, rest = int(m.group(1)), m.group(2)
    base = rest.rsplit(".", 1)[0]
    if "exps" in base and "shexp" not in base:
        return "experts", layer
    if "shexp" in base:
        return "shared_experts", layer
    if base.startswith("attn_"):
        return "attention", layer
    if base in ("ffn_gate", "ffn_up", "ffn_down", "ffn_norm", "ffn_gate_up"):
        return "ffn", layer
    return "other", layer


_RUN_KEPT = 1 << 14
_RUN_DERIVED: dict = {}     # (id(run), what) -> (run, value): what layouts.layout derives from a run


def per_run(run: tuple, what: tuple, make):
    """``make(run, *what[1:])``, kept for ``run`` (a tuple of PlacedTensors, Placement.runs): a placement search's
    trials share most runs (placement._placed makes a run once for its device and targets), so a trial derives
    only what its new runs hold. The entry keeps ``run`` alive, so its id names it while kept."""
    key = (id(run),) + what
    hit = _RUN_DERIVED.get(key)
    if hit is not None and hit[0] is run:
        return hit[1]
    value = make(run, *what[1:])
    if len(_RUN_DERIVED) >= _RUN_KEPT:
        _RUN_DERIVED.pop(next(iter(_RUN_DERIVED)))
    _RUN_DERIVED[key] = (run, value)
    return value


def runs_of(p) -> tuple:
    """``p``'s tensors in runs (Placement.runs; all of them as one where it has none)."""
    return p.runs or ((p.tensors,) if p.tensors else ())


def run_decode(run: tuple, share: tuple) -> dict:
    """device -> the bytes one decoded token reads of ``run``'s tensors there: routed experts top_k of n_experts of
    each expert tensor (floored per tensor), token_embd none (one row per token: GET_ROWS)."""
    out: dict = {}
    for t in run:
        if t.group != "embeddings":
            out[t.device] = out.get(t.device, 0) + (t.nbytes * share[0] // share[1] if t.group == "experts"
                                                    else t.nbytes)
    return out

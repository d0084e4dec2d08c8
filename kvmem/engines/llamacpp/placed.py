"""The records of a llama.cpp placement: each tensor's device, each device's buffers
(kvmem.engines.llamacpp.placement.place makes them; its docstring has llama.cpp's rules)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .overrides import CPU

__all__ = ["PlacedTensor", "DeviceMemory", "Placement", "TensorInfos", "hashed_infos"]


@dataclass(frozen=True)
class PlacedTensor:
    """One weight tensor as llama.cpp loads it: GGUF name, ggml type, ne (ne0 first), bytes, file
    offset, group, layer (None for input/output tensors) and the device that holds it."""

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

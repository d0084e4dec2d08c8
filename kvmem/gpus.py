"""Accelerators: the catalog in data/gpus.json, and custom devices, as frozen ``GPU`` values.

Each catalog entry carries two memory figures, both with their sources:

    memory_bytes             what the vendor tool reports as the device total (nvidia-smi
                             "81559MiB" on an H100 SXM, rocm-smi "VRAM Total Memory (B)",
                             hl-smi); for Apple parts the installed unified memory
    cuda_total_memory_bytes  what the framework sees: torch.cuda.mem_get_info()[1] /
                             cudaMemGetInfo, printed by vLLM as "total_gpu_memory (79.22GiB)";
                             known for some parts only, read from logs printed to 0.01 GiB

Which one sizing uses (``GPU.usable_memory_bytes``):
    1. cuda_total_memory_bytes when known. vLLM budgets ``total × gpu_memory_utilization``
       with torch's total (vllm/v1/worker/gpu_worker.py ``init_snapshot.total_memory``),
       TensorRT-LLM and llama.cpp read the same CUDA total; it is 0.4–0.8 GiB below the
       nvidia-smi figure (H100 SXM: 81,559 MiB vs 79.22 GiB).
    2. memory_bytes × gpu_share for unified-memory parts (Apple: Metal's
       recommendedMaxWorkingSetSize is 0.75 of the installed memory at macOS defaults).
    3. memory_bytes otherwise, with a note on the result: CUDA will see a few hundred MiB less.
SGLang's default ``mem_fraction_static`` is computed from nvidia-smi's total, so it reads
``memory_bytes`` (kvmem.sizing).

Custom devices, accepted everywhere a catalog name is:
    GPU(name="my-card", memory_bytes=80 * 2**30, bandwidth_bytes_per_s=3_350_000_000_000)
    "custom:80GiB:3.35TB/s"        memory, then bandwidth (optional) — parse_bytes syntax
    {"memory": "80GiB", "bandwidth": "3.35TB/s", "name": "my-card"}
      (also memory_bytes / bandwidth_bytes_per_s / cuda_total_memory_bytes keys)
A custom memory figure is taken as what the framework sees (it becomes both totals).

Each catalog entry also names its software platform (``platform``: "cuda", "rocm", "hpu", "mps") and,
for NVIDIA parts, the CUDA compute capability (``compute_capability``, (major, minor), from NVIDIA's
list, developer.nvidia.com/cuda-gpus), for AMD parts the LLVM target (``gfx_target``): engines pick
kernels by them (vLLM's attention and GatedDeltaNet backends, kvmem.engines.vllm.device). A custom
device has neither: the engines' own default assumption holds, with its note.
Bandwidth is needed only for the decode-speed bound; without it that bound is None.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from fractions import Fraction
from functools import lru_cache
from numbers import Real

from .datafiles import read_json
from .units import parse_bytes

__all__ = ["GPU", "list_gpus", "get_gpu"]


@dataclass(frozen=True)
class GPU:
    """One accelerator: its memory (exact bytes) and memory bandwidth (bytes per second)."""

    name: str
    memory_bytes: int
    bandwidth_bytes_per_s: int | None = None
    cuda_total_memory_bytes: int | None = None
    gpu_share: float | None = None          # unified memory: the fraction the GPU may use
    label: str = ""                         # the long product name
    vendor: str = ""
    bf16_dense_tflops: float | None = None
    fp16_dense_tflops: float | None = None
    nvlink_bytes_per_s: int | None = None
    pcie_bytes_per_s: int | None = None
    source: str = ""
    platform: str = ""                      # "cuda", "rocm", "hpu", "mps"; "" unknown (custom)
    compute_capability: tuple[int, int] | None = None   # CUDA (major, minor); None unknown / not CUDA
    gfx_target: str = ""                    # ROCm LLVM target ("gfx942"); "" unknown / not ROCm

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError(f"GPU name must be a non-empty string, got {self.name!r}")
        _positive_int("memory_bytes", self.memory_bytes)
        for field in ("bandwidth_bytes_per_s", "cuda_total_memory_bytes"):
            if getattr(self, field) is not None:
                _positive_int(field, getattr(self, field))
        if self.gpu_share is not None and (isinstance(self.gpu_share, bool) or not isinstance(self.gpu_share, Real)
                                           or not 0 < self.gpu_share <= 1):
            raise ValueError(f"gpu_share must be in (0, 1], got {self.gpu_share!r:.100}")
        cap = self.compute_capability
        if cap is not None and not (isinstance(cap, tuple) and len(cap) == 2
                                    and all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x < 100
                                            for x in cap)):
            raise ValueError(f"compute_capability must be a (major, minor) pair of small integers, got {cap!r:.100}")

    @property
    def usable_memory_bytes(self) -> int:
        """The device total a serving framework budgets from (see the module docstring)."""
        if self.cuda_total_memory_bytes is not None:
            return self.cuda_total_memory_bytes
        if self.gpu_share is not None:
            share = Fraction(str(self.gpu_share))
            return self.memory_bytes * share.numerator // share.denominator
        return self.memory_bytes

    @property
    def usable_memory_source(self) -> str:
        """Which figure ``usable_memory_bytes`` is: "cuda_total", "gpu_share" or "vendor_tool"."""
        if self.cuda_total_memory_bytes is not None:
            return "cuda_total"
        return "gpu_share" if self.gpu_share is not None else "vendor_tool"

    def to_dict(self) -> dict:
        data = asdict(self)
        data.update(usable_memory_bytes=self.usable_memory_bytes,
                    usable_memory_source=self.usable_memory_source)
        return data


def _positive_int(field: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{field} must be a positive integer number of bytes, got {value!r}")


@lru_cache(maxsize=1)
def _catalog() -> dict[str, GPU]:
    gpus = {}
    for key, entry in read_json("gpus.json").items():
        links = entry.get("interconnect") or {}
        gpus[key] = GPU(
            name=key, memory_bytes=entry["memory_bytes"],
            bandwidth_bytes_per_s=entry.get("bandwidth_bytes_per_s"),
            cuda_total_memory_bytes=entry.get("cuda_total_memory_bytes"),
            gpu_share=entry.get("gpu_share"), label=entry.get("name", key),
            vendor=entry.get("vendor", ""), bf16_dense_tflops=entry.get("bf16_dense_tflops"),
            fp16_dense_tflops=entry.get("fp16_dense_tflops"),
            nvlink_bytes_per_s=links.get("nvlink_bytes_per_s"),
            pcie_bytes_per_s=links.get("pcie_bytes_per_s"),
            source=entry.get("memory_source", ""), platform=entry.get("platform", ""),
            compute_capability=_capability(entry.get("compute_capability")), gfx_target=entry.get("gfx_target", ""))
    return gpus


def _capability(text) -> tuple[int, int] | None:
    """"9.0" -> (9, 0), as nvidia-smi --query-gpu=compute_cap prints it."""
    if text is None:
        return None
    major, minor = str(text).split(".")
    return int(major), int(minor)


# Short names people type. "h100" and "a100" mean the SXM 80 GB parts (the PCIe and 40 GB
# variants have their own names); a catalog name without its memory suffix ("l40s",
# "rtx-4090") works when only one entry has it.
_ALIASES = {"h100": "h100-sxm-80gb", "h200": "h200-sxm-141gb", "b200": "b200-180gb",
            "gb200": "gb200-per-gpu", "a100": "a100-sxm-80gb", "a100-80gb": "a100-sxm-80gb",
            "a100-40gb": "a100-sxm-40gb", "mi250x": "mi250x-gcd-64gb"}


@lru_cache(maxsize=1)
def _index() -> dict[str, str]:
    index = {}
    stems: dict[str, list[str]] = {}
    for key in _catalog():
        index[key] = key
        stem = key.rsplit("-", 1)[0]               # "l40s-48gb" -> "l40s"
        stems.setdefault(stem, []).append(key)
    for stem, keys in stems.items():
        if len(keys) == 1 and stem not in index:
            index[stem] = keys[0]
    index.update(_ALIASES)
    return index


def _normal(name: str) -> str:
    key = name.strip().lower().replace("_", "-").replace(" ", "-")
    return key.removeprefix("nvidia-").removeprefix("amd-").removeprefix("geforce-")


def list_gpus() -> list[str]:
    """Catalog names, in catalog order (data centre NVIDIA, workstation/consumer, AMD, Intel, Apple)."""
    return list(_catalog())


def _custom(spec: str) -> GPU:
    parts = spec.split(":")
    if len(parts) not in (2, 3) or not parts[1].strip():
        raise ValueError(f"custom GPU spec must be 'custom:MEMORY[:BANDWIDTH/s]', like "
                         f"'custom:80GiB:3.35TB/s', got {spec!r}")
    memory = parse_bytes(parts[1].strip())
    bandwidth = _bandwidth(parts[2]) if len(parts) == 3 else None
    return GPU(name=spec, memory_bytes=memory, bandwidth_bytes_per_s=bandwidth,
               cuda_total_memory_bytes=memory, label="custom")


def _bandwidth(text) -> int:
    if isinstance(text, str):
        text = text.strip()
        text = text[:-2] if text.lower().endswith("/s") else text
    return parse_bytes(text)


def _from_dict(spec: dict) -> GPU:
    known = {"name", "memory", "memory_bytes", "bandwidth", "bandwidth_bytes_per_s",
             "cuda_total_memory_bytes", "gpu_share"}
    unknown = sorted(set(spec) - known)
    if unknown:
        raise ValueError(f"custom GPU dict has unknown key {unknown[0]!r}; keys: {', '.join(sorted(known))}")
    memory = spec.get("memory_bytes", spec.get("memory"))
    if memory is None:
        raise ValueError("custom GPU dict needs 'memory' (e.g. '80GiB') or 'memory_bytes'")
    memory = parse_bytes(memory)
    bandwidth = spec.get("bandwidth_bytes_per_s", spec.get("bandwidth"))
    cuda_total = spec.get("cuda_total_memory_bytes")
    return GPU(name=spec.get("name", "custom"), memory_bytes=memory,
               bandwidth_bytes_per_s=_bandwidth(bandwidth) if bandwidth is not None else None,
               cuda_total_memory_bytes=parse_bytes(cuda_total) if cuda_total is not None else memory,
               gpu_share=spec.get("gpu_share"), label="custom")


def get_gpu(name) -> GPU:
    """A catalog GPU by name ("h100-sxm-80gb", "H100", "l40s"), or a custom one.

    ``name`` may also be a ``GPU`` (returned as is), a dict, or "custom:80GiB:3.35TB/s".
    An unknown name raises ValueError listing the closest catalog names.
    """
    from .sources.bounded import quote
    if isinstance(name, GPU):
        return name
    if isinstance(name, dict):
        return _from_dict(name)
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"gpu must be a catalog name, a custom spec or a kvmem.GPU, got {quote(name)}")
    if name.strip().lower().startswith("custom:"):
        return _custom(name.strip())
    key = _index().get(_normal(name))
    if key is None:
        import difflib
        close = difflib.get_close_matches(_normal(name), list(_index()), n=5, cutoff=0.4) if len(name) <= 100 else []
        close = list(dict.fromkeys(_index()[c] for c in close))
        hint = (f"; did you mean {', '.join(close)}?" if close
                else f"; catalog: {', '.join(list_gpus())}")
        raise ValueError(f"unknown GPU {quote(name)}{hint} (or give a custom spec such as 'custom:80GiB:3.35TB/s')")
    return _catalog()[key]

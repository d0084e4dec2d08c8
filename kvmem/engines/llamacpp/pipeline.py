"""Whether llama.cpp runs a layer split with pipeline parallelism (GGML_SCHED_MAX_COPIES copies of each graph input),
from the devices' backends.

llama_context enables it only with several devices, every layer offloaded, the layer split, the KV cache offloaded
and no tensor override, and then only if every backend but the CPU reports both async compute and events
(llama.cpp@3f545becc src/llama-context.cpp#L428-L455; the same test at the 2025 builds since PR #12181). The caps
each backend reports, by the name its devices print ("CUDA0", "RPC[host:port]", "Vulkan1", ...), are in
BACKEND_CAPS. A device name that is no backend's (kvmem's own placements name GPUs "CUDA<n>"; a caller may name
them by their preset) takes CUDA's caps: the backend kvmem plans for.
"""

from __future__ import annotations

import re

from .settings import PR_18047

__all__ = ["BACKEND_CAPS", "pipeline_parallel"]

# device name prefix -> (async, events) of the backend's props->caps, at 3f545becc
BACKEND_CAPS = {
    # llama.cpp@3f545becc ggml/src/ggml-cuda/ggml-cuda.cu#L4830-L4843: events unless built with
    # GGML_CUDA_NO_PEER_COPY (off by default); ROCm and MUSA builds are ggml-cuda under their own GGML_CUDA_NAME
    "CUDA": (True, True), "ROCm": (True, True), "MUSA": (True, True),
    # llama.cpp@3f545becc ggml/src/ggml-vulkan/ggml-vulkan.cpp#L18036-L18042; before PR #18047 (e1f15b454,
    # 2025-12-21, "vulkan: Implement set_tensor_async and the event interfaces") neither (_caps)
    "Vulkan": (True, True),
    # llama.cpp@3f545becc ggml/src/ggml-metal/ggml-metal.cpp#L680-L686 (devices named "MTL<n>"; "Metal" before)
    "MTL": (True, True), "Metal": (True, True),
    # llama.cpp@3f545becc ggml/src/ggml-sycl/ggml-sycl.cpp#L5898-L5911: events unless GGML_SYCL_NO_PEER_COPY
    "SYCL": (True, True),
    # llama.cpp@3f545becc ggml/src/ggml-cann/ggml-cann.cpp#L2816-L2822: no async compute
    "CANN": (False, True),
    # llama.cpp@3f545becc ggml/src/ggml-rpc/ggml-rpc.cpp#L1888-L1894: neither ("RPC[endpoint]", "RPC<n>[endpoint]")
    "RPC": (False, False),
    # llama.cpp@3f545becc ggml/src/ggml-opencl/ggml-opencl.cpp#L11251-L11257: neither (device "GPUOpenCL")
    "GPUOpenCL": (False, False),
    # llama.cpp@3f545becc ggml/src/ggml-openvino/ggml-openvino.cpp#L850-L867: a GPU type with neither
    "OPENVINO": (False, False),
    # llama.cpp@3f545becc ggml/src/ggml-hexagon/ggml-hexagon.cpp#L3933-L3939: async, no events (devices "HTP<n>")
    "HTP": (True, False),
}
_PREFIX = re.compile(r"[A-Za-z]+")


def _caps(device: str, build) -> tuple:
    m = _PREFIX.match(device)
    name = m.group(0) if m and m.group(0) in BACKEND_CAPS else "CUDA"
    if name == "Vulkan" and build is not None and build < PR_18047:
        return (False, False)
    return BACKEND_CAPS[name]


def pipeline_parallel(gpus, *, full: bool, overrides: bool, kv_offload: bool = True, blas: bool = False,
                      build=None) -> bool:
    """Whether llama.cpp at ``build`` (a date; None: the newest) pipelines a layer split over the devices named
    ``gpus``: several of them, ``full`` offload (-ngl above the layer count), no tensor override (``overrides``: -ot,
    --n-cpu-moe), the KV cache offloaded, and every backend reporting async and events (BACKEND_CAPS). ``blas``: a
    GGML_BLAS build, whose BLAS backend is an ACCEL device (llama.cpp@3f545becc
    ggml/src/ggml-blas/ggml-blas.cpp#L354-L356) with neither (#L365-L371), and only the CPU one is skipped."""
    if len(gpus) < 2 or not full or overrides or not kv_offload or blas:
        return False
    return all(all(_caps(d, build)) for d in gpus)

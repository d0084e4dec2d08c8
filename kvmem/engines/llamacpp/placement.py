"""Where llama.cpp puts each tensor and each layer's KV cache: -ngl, -ts, --n-cpu-moe, -ot, -nkvo.

Rules, as llama.cpp 0c1e57098 (vendored by llama-cpp-python 0.3.36) and current master hold them:

Layers (src/llama-model.cpp llama_model::load_tensors, "calculate the split points"), builds from
PR #18148 ("llama: offload output layer to GPU first", 2025-12-18; ``build`` None or later):
    i_gpu_start    = max(n_layer + 1 - n_gpu_layers, 0)
    act_gpu_layers = min(n_gpu_layers, n_layer + 1)          (0 with no GPU)
    layer il in 0..n_layer (il == n_layer is the output layer) is on the CPU when
    il < i_gpu_start or il - i_gpu_start >= act_gpu_layers, else on GPU
    upper_bound(splits, float(il - i_gpu_start) / act_gpu_layers), splits the float32 prefix
    sums of -ts normalised by their total (all zero / unset: each device's free memory).
    So -ngl 1 offloads only the output layer, -ngl n_layer the output and layers 1..n-1, and
    -ngl n_layer + 1 (or more) every layer ("offloaded N/n_layer+1 layers to GPU").
    Builds before PR #18148: i_gpu_start = max(n_layer - n_gpu_layers, 0), the same act_gpu_layers:
    -ngl N offloads the last N repeating layers, and the output layer only from -ngl n_layer + 1.
NextN/MTP blocks (a GGUF whose block_count counts them and writes nextn_predict_layers: n_layer_all =
    block_count, the trunk n_layer = n_layer_all - n_nextn, src/llama-hparams.cpp#L348-L350): the split above runs
    over n_layer_all + 1, the MTP blocks il = n_layer .. n_layer_all - 1 taking their share and the output layer
    il = n_layer_all (llama.cpp@0c1e57098 src/llama-model.cpp#L1589-L1614), and the log prints "offloaded
    min(-ngl, n_layer_all + 1)/n_layer_all + 1" (#L1911-L1925). Their tensors are created with TENSOR_SKIP unless
    load_mtp (--spec-type draft-mtp, common/common.cpp#L1625): not loaded, in no buffer ("model has unused tensor
    blk.N.* -- ignoring", src/llama-model-loader.cpp#L1177-L1184; glm4-moe.cpp#L32-L40, glm-dsa.cpp#L79-L89,
    deepseek2.cpp / deepseek32.cpp / mimo2.cpp likewise, qwen35.cpp#L38, qwen35moe.cpp#L41, qwen3next.cpp#L40);
    their bytes stay in the file (offsets). Exception: glm-dsa and deepseek32 create the MTP block's
    exp_probs_b.bias without the MTP flags (glm-dsa.cpp#L155, deepseek32.cpp#L121): loaded on the block's device
    (checked: tests/oracles/test_llamacpp_nextn_oracle.py). The main context's KV cache holds the trunk only
    (src/llama-model.cpp#L2796-L2803, and #L2397-L2424 for glm-dsa/deepseek32). kvmem lays out load_mtp false.
Input layer ("assign the input layer ... always keep it on the CPU"): token_embd and the
    other input tensors are on the host whatever -ngl says.
Output layer: output.weight and output_norm follow layer n_layer. A GGUF without output.weight
    (tied embeddings) loads token_embd a second time as the output (TENSOR_DUPLICATED): a copy on
    the output layer's device when that is not the host; on the host it is the same tensor
    (llama-model-loader.cpp create_tensor returns the context's existing tensor of that name).
Per-layer duplicates: llama's rope_freqs.weight is created for every layer (TENSOR_DUPLICATED for
    il > 0): one copy per device that holds a layer.
Overrides (common/arg.cpp): --n-cpu-moe N adds, for il < N, the pattern
    "blk\\.{il}\\.ffn_(up|down|gate|gate_up)_(ch|)exps" -> CPU; --cpu-moe the same without the
    layer (every layer); -ot PATTERN=DEVICE in general. The first pattern that regex_search-es a
    tensor's name wins (llama-model-loader.cpp create_tensor, tensor_buft_overrides loop).
KV (src/llama-kv-cache.cpp constructor): layer il's K and V live on dev_layer(il) when
    offload_kqv (the default), on the host with --no-kv-offload (-nkvo).
Buffer bytes (ggml/src/ggml-alloc.c ggml_backend_alloc_ctx_tensors_from_buft_impl): per buffer
    type, the sum over its tensors of GGML_PAD(get_alloc_size, alignment).
    CPU: alloc_size = ggml_nbytes, alignment 32 (ggml-backend.cpp TENSOR_ALIGNMENT).
    CUDA: alignment 128; a quantised tensor whose ne0 is not a multiple of
    MATRIX_ROW_PADDING (512) gets ggml_row_size(type, 512 - ne0 % 512) more bytes
    (ggml-cuda.cu ggml_backend_cuda_buffer_type_get_alloc_size).
    Host tensors with mmap on (the default) are not copied: "CPU_Mapped model buffer size" is the
    file span from the first to the last byte of the host tensors (llama-model-loader.cpp
    get_mapping_range: min offs .. max offs + ggml_nbytes), GPU tensors lying between them
    included. Tensor offsets are the GGUF writer's: each tensor's data starts at the previous
    one's end padded to general.alignment (gguf-py GGUFWriter, llama.cpp gguf_add_tensor).
    With --no-mmap the host tensors are allocated: "CPU model buffer size" (a CUDA build puts
    them in pinned "CUDA_Host" memory, which takes the CPU buffer type's alignment and alloc size:
    ggml-cuda.cu ggml_backend_cuda_host_buffer_type, get_alignment / get_alloc_size =
    ggml_backend_cpu_buffer_type()'s; checked: Qwen2-72B Q4_K_M, 13/81 layers, "CUDA_Host buffer
    size = 37738.62 MiB", ollama issue #5540).

Checked: llama.cpp's own load of 200 random GGUFs on this CPU-only build (tests/oracles/
    test_llamacpp_buffers_oracle.py: "CPU_Mapped" / "CPU model buffer size" and "CPU KV buffer
    size" to the printed MiB), and published CUDA logs (docs/research/llamacpp_offload_logs.json:
    full and partial offload, two GPUs with a split, KV on four devices) to the printed MiB.

Groups (per tensor name, for the per-group table): embeddings (token_embd*, the input layer),
    output (output*, output_norm), and per layer: attention (attn_*), ffn (dense ffn_gate/up/down
    and ffn_norm), experts (routed *_exps, *_chexps), shared_experts (*_shexp), other (routers,
    extra norms, SSM and everything else under blk.N).

Not modelled, refused by name: --split-mode row; tensors outside blk.N that are not input or
    output tensors (multimodal towers: give the mmproj file separately); CPU_REPACK (builds that
    repack Q4_0/Q4_K/IQ4_NL/Q8_0 weights for the host CPU move those host tensors from
    CPU_Mapped to a "CPU_REPACK" buffer: the same bytes, another line; kvmem prints the
    --no-repack layout).
"""

from __future__ import annotations

import datetime
import functools

from ...dtypes import GGML_TYPES as _GGML
from ...units import pad
from .layer_split import free_split, layer_devices, layer_devices_cached
from .overrides import CPU, layer_rest, override_rules
from .placed import DeviceMemory, PlacedTensor, Placement, hashed_infos, tensor_group
from .settings import PR_18148  # the output layer offloaded first (2025-12-18, 57c1e0564)

__all__ = ["GGML_TYPES", "PlacedTensor", "Placement", "DeviceMemory", "GROUPS", "place", "tensor_group",
           "layer_devices", "cuda_alloc_bytes", "buffer_mib", "free_split", "PR_18148"]


GROUPS = ("embeddings", "attention", "ffn", "experts", "shared_experts", "other", "output")
CPU_ALIGNMENT = 32          # ggml-backend.cpp / ggml-impl.h TENSOR_ALIGNMENT
CUDA_ALIGNMENT = 128        # ggml-cuda.cu ggml_backend_cuda_buffer_type_get_alignment
MATRIX_ROW_PADDING = 512    # ggml-cuda/common.cuh
# GGUF tensor type name (ggml's, upper case: "Q4_K") -> (block size, bytes per block), from the one
# table of ggml's types, kvmem.dtypes.GGML_TYPES (ggml/src/ggml.c type_traits)
GGML_TYPES = {name.upper(): (t.block, t.size) for name, t in _GGML.items()}
_QUANTISED = {name for name, (block, _) in GGML_TYPES.items() if block > 1}


def buffer_mib(nbytes: int) -> float:
    """A "... buffer size = %8.2f MiB" figure: ggml_backend_buffer_get_size / 1024.0 / 1024.0, in
    double (llama-model.cpp load_tensors, llama-kv-cache.cpp, llama-context.cpp)."""
    return float(f"{nbytes / 1048576.0:.2f}")


def cuda_alloc_bytes(t: PlacedTensor) -> int:
    """ggml_backend_cuda_buffer_type_get_alloc_size, padded to CUDA's 128-byte alignment."""
    return _cuda_bytes(t.type, t.ne, t.nbytes)


def _cuda_bytes(type_: str, ne: tuple, nbytes: int) -> int:
    """cuda_alloc_bytes of a tensor of ggml type ``type_``, shape ``ne`` and ``nbytes`` bytes."""
    if type_ in _QUANTISED and ne[0] % MATRIX_ROW_PADDING:
        block, block_bytes = GGML_TYPES[type_]
        nbytes += (MATRIX_ROW_PADDING - ne[0] % MATRIX_ROW_PADDING) // block * block_bytes
    return pad(nbytes, CUDA_ALIGNMENT)


@functools.lru_cache(maxsize=8)
def _static(tensors: tuple, n_layer_all: int, alignment: int) -> tuple:
    """What placing ``tensors`` leaves alone from one set of flags to the next: (tensor, file offset (the previous
    one's end padded to ``alignment``), group, layer) of each; their names; the runs of one layer's tensors in
    file order (start, end, layer, (names, RESTs of blk.L.REST)) where names are unique; what _placed made; each
    one's _cost."""
    rows: list[tuple] = []
    runs: list[list] = []
    offset = 0
    for t in tensors:
        group, layer = tensor_group(t.name)
        if t.dtype not in GGML_TYPES:
            raise ValueError(f"tensor {t.name!r} has ggml type {t.dtype!r}, not one kvmem sizes")
        if layer is not None and layer != -1 and layer >= n_layer_all:
            raise ValueError(f"tensor {t.name!r} is in layer {layer}, past the model's {n_layer_all} layers")
        if layer is None or layer < 0 or not runs or runs[-1][2] != layer or runs[-1][1] != len(rows):
            runs.append([len(rows), len(rows), layer])
        runs[-1][1] += 1
        rows.append((t, offset, group, layer))
        offset += pad(t.nbytes, alignment)
    names = frozenset(t.name for t in tensors)
    unique = len(names) == len(rows)
    spans = [(a, b, il, (tuple(t.name for t, *_ in rows[a:b]), tuple(layer_rest(t.name)[1] for t, *_ in rows[a:b]))
              if unique and il is not None and il >= 0 else None) for a, b, il in runs]
    costs = [_cost(group, t.nbytes, offset, _cuda_bytes(t.dtype, tuple(t.shape), t.nbytes))
             for t, offset, group, _ in rows]
    return rows, names, spans, {}, costs


@functools.lru_cache(maxsize=256)
def _placed(tensors: tuple, n_layer, n_nextn, nextn_loaded, n_gpu_layers, gpus, tensor_split, n_cpu_moe, cpu_moe,
            override_tensor, alignment, tied_output, build) -> tuple:
    """(the placed tensors, the device of each layer, of each MTP block and of the output layer, _device_sums, the
    runs) for place: a run of one layer's tensors placed at once (its PlacedTensors made once for its device and its
    tensors' targets: the same tuple for every set of flags that places that run alike, Placement.runs); the MTP
    blocks' tensors are skipped (TENSOR_SKIP: the module doc)."""
    n_all = n_layer + n_nextn
    gpu_of = layer_devices_cached(n_all, n_gpu_layers, tensor_split, build) if gpus else (None,) * (n_all + 1)
    dev = [CPU if g is None else gpus[g] for g in gpu_of]
    rules = override_rules(n_cpu_moe, cpu_moe, override_tensor)
    rows, names, runs, made, costs = _static(tensors, n_all, alignment)
    tied_output = "output.weight" not in names if tied_output is None else tied_output
    placed, held = [], set()

    def one(i, group, layer, device, name=None):
        t = rows[i][0]
        device = rules.target(t.name) or device
        if (t.name, device) not in held:     # a duplicate on a device that has the tensor already is that tensor
            held.add((t.name, device))
            key = (i, name, group, layer, device)
            placed.append(made.get(key) or made.setdefault(key, PlacedTensor(
                name or t.name, t.dtype, tuple(t.shape), t.nbytes, rows[i][1], group, layer, device)))

    parts, pieces = [], []
    for a, b, layer, names_rests in runs:
        if layer is not None and layer >= n_layer:     # an MTP block: skipped, but for nextn_loaded's tensors
            first = len(placed)
            for i in range(a, b):
                if rows[i][0].name.endswith(nextn_loaded):
                    one(i, rows[i][2], layer, dev[layer])
            parts.append(_placed_sums(placed[first:]))
            pieces.append(tuple(placed[first:]))
            continue
        if names_rests is not None:     # unique names of one layer: none is a duplicate
            key = (a, dev[layer], rules.layer_targets(layer, *names_rests))
            hit = made.get(key)
            if hit is None:     # each tensor made once per device it is placed on (_on), whatever its run's others do
                devices = [to or dev[layer] for to in key[2]]
                run = tuple(_on(made, rows, i, d) for i, d in zip(range(a, b), devices, strict=True))
                hit = made[key] = (run, _sums(zip(devices, costs[a:b], strict=True)))
            placed += hit[0]
            parts.append(hit[1])
            pieces.append(hit[0])
            continue
        first = len(placed)
        for i in range(a, b):
            t, _, group, _ = rows[i]
            if layer == -1:         # rope_freqs: a copy in every layer
                for il in range(n_layer):
                    one(i, group, il, dev[il], name=f"{t.name}#{il}")
                continue
            one(i, group, layer, CPU if group == "embeddings" else dev[n_all if layer is None else layer])  # input
            if tied_output and t.name == "token_embd.weight":
                one(i, "output", None, dev[n_all], name="output.weight(token_embd)")
        parts.append(_placed_sums(placed[first:]))
        pieces.append(tuple(placed[first:]))
    return tuple(placed), tuple(dev), _device_sums(parts, gpus), tuple(piece for piece in pieces if piece)


def _on(made: dict, rows: list, i: int, device: str) -> PlacedTensor:
    """Row ``i``'s tensor (of a run of one layer: _static) placed on ``device``, made once and kept in ``made``."""
    key = ("on", i, device)
    hit = made.get(key)
    if hit is None:
        t, offset, group, layer = rows[i]
        hit = made[key] = PlacedTensor(t.name, t.dtype, tuple(t.shape), t.nbytes, offset, group, layer, device)
    return hit


def _cost(group: str, nbytes: int, offset: int, cuda: int) -> tuple:
    """What one tensor adds to _sums: (its group's index, its bytes, its host buffer bytes, its CUDA bytes, its file
    span's first and end offsets)."""
    return _GROUP_INDEX[group], nbytes, pad(nbytes, CPU_ALIGNMENT), cuda, offset, offset + nbytes


def _placed_sums(placed) -> dict:
    """_sums of PlacedTensors."""
    return _sums((p.device, _cost(p.group, p.nbytes, p.offset, cuda_alloc_bytes(p))) for p in placed)


def _sums(items) -> dict:
    """Per device holding some of ``items`` ((device, _cost) each): (bytes of each of GROUPS, the CUDA buffer's
    bytes, the host buffer's, the file span's first (None on a GPU) and end offsets), one flat tuple."""
    sums: dict = {}
    for device, (group, nbytes, host, cuda, first, end) in items:
        row = sums.get(device)
        if row is None:
            row = sums[device] = [0] * len(GROUPS) + [0, 0, None, 0]
        row[group] += nbytes
        if device == CPU:
            row[-3] += host
            row[-2] = first if row[-2] is None else min(row[-2], first)
            row[-1] = max(row[-1], end)
        else:
            row[-4] += cuda
    return {device: tuple(row) for device, row in sums.items()}


_GROUP_INDEX = {group: i for i, group in enumerate(GROUPS)}


def _device_sums(parts, gpus: tuple) -> dict:
    """Per device (each GPU, then the host): (bytes per group, CUDA bytes, host bytes, first offset, end offset) of
    every part's _sums together."""
    rows: dict = {name: [] for name in gpus + (CPU,)}
    for part in parts:
        for device, row in part.items():
            rows[device].append(row)
    out = {}
    n = len(GROUPS)
    for name, mine in rows.items():
        columns = list(zip(*mine, strict=True)) or [()] * (n + 4)
        firsts = [x for x in columns[n + 2] if x is not None]
        out[name] = (dict(zip(GROUPS, map(sum, columns[:n]), strict=True)), sum(columns[n]), sum(columns[n + 1]),
                     min(firsts) if firsts else 0, max(columns[n + 3], default=0))
    return out


def place(tensors, *, n_layer: int, n_gpu_layers: int, gpus=(), tensor_split=None, n_cpu_moe: int = 0,
          cpu_moe: bool = False, override_tensor=(), mmap: bool = True, kv_offload: bool = True,
          kv_per_layer=(), alignment: int = 32, tied_output: bool | None = None,
          gpu_backend: str = "CUDA", build: datetime.date | None = None, n_nextn: int = 0,
          nextn_loaded: tuple = ()) -> Placement:
    """Each tensor's device and each device's buffers.

    ``tensors``: the GGUF's tensor infos in file order (objects with name, dtype (ggml type name),
    shape (ne0 first) and nbytes: kvmem.sources.Tensor); ``gpus``: device names ("CUDA0", ...);
    ``tensor_split``: -ts, one weight per GPU (default: equal; llama.cpp's own with no -ts is by free memory,
    which kvmem's callers pass as free_split); ``kv_per_layer``: K+V bytes of each
    repeating layer (plan.rows); ``alignment``: the GGUF's general.alignment; ``build``: the
    llama.cpp build's date (None: current); ``n_layer``: the trunk's layers; ``n_nextn``: the NextN/MTP blocks the
    file carries after them (arch_tensors.gguf_nextn_layers; block_count = n_layer + n_nextn); ``nextn_loaded``:
    the name endings of MTP-block tensors the architecture loads all the same (arch_tensors.nextn_loaded).
    """
    gpus = tuple(gpus)
    tensor_split = (1.0,) * len(gpus) if tensor_split is None else tuple(tensor_split)
    if len(tensor_split) != len(gpus):
        raise ValueError(f"tensor_split has {len(tensor_split)} values for {len(gpus)} GPUs")
    if isinstance(n_gpu_layers, bool) or not isinstance(n_gpu_layers, int) or n_gpu_layers < 0:
        raise ValueError(f"n_gpu_layers must be a whole number >= 0, got {n_gpu_layers!r}")
    if isinstance(n_cpu_moe, bool) or not isinstance(n_cpu_moe, int) or n_cpu_moe < 0:
        raise ValueError(f"n_cpu_moe must be a whole number >= 0, got {n_cpu_moe!r}")
    if isinstance(n_nextn, bool) or not isinstance(n_nextn, int) or n_nextn < 0:
        raise ValueError(f"n_nextn must be a whole number >= 0, got {n_nextn!r}")
    for _, target in override_tensor or ():
        if target != CPU and target not in gpus:
            raise ValueError(f"override_tensor target {target!r} is neither CPU nor one of {list(gpus)}")
    key = (n_layer, n_nextn, tuple(nextn_loaded), n_gpu_layers, gpus, tensor_split, n_cpu_moe, cpu_moe,
           tuple(tuple(rule) for rule in override_tensor or ()), alignment, tied_output, build)
    try:
        placed, dev, sums, runs = _placed(hashed_infos(tensors), *key)   # the searches place the same flags at many
    except TypeError:           # tensor infos that do not hash: placed, not remembered          # contexts
        placed, dev, sums, runs = _placed.__wrapped__(tuple(tensors), *key)
    kv = list(kv_per_layer) + [0] * (n_layer - len(kv_per_layer))
    devices = []
    layers_of: dict = {name: [] for name in gpus + (CPU,)}
    kv_of = dict.fromkeys(gpus + (CPU,), 0)
    for il in range(n_layer):
        layers_of[dev[il]].append(il)
        kv_of[dev[il] if kv_offload else CPU] += kv[il]
    for il in range(n_layer, min(len(kv), len(dev) - 1)):   # an MTP block's cache layer (plan.rows after the trunk)
        kv_of[dev[il] if kv_offload else CPU] += kv[il]
    for name in gpus + (CPU,):
        groups, cuda, host, first, last = sums[name]
        if name != CPU:
            model_bytes, buffer = cuda, name
        elif mmap:
            # duplicated tensors (rope_freqs, a tied output) point into the same file bytes
            model_bytes, buffer = last - first, "CPU_Mapped"
        elif gpus:    # pinned host memory with the CPU buffer type's alignment and sizes
            model_bytes, buffer = host, f"{gpu_backend}_Host"
        else:
            model_bytes, buffer = host, CPU
        devices.append(DeviceMemory(name, model_bytes, dict(groups), kv_of[name], tuple(layers_of[name]), buffer))
    return Placement(n_layer=n_layer, n_gpu_layers=n_gpu_layers, gpus=gpus, tensor_split=tensor_split, mmap=mmap,
                     kv_offload=kv_offload, tensors=tuple(placed), layer_device=tuple(dev[:n_layer]),
                     output_device=dev[-1], devices=tuple(devices), n_nextn=n_nextn,
                     nextn_device=tuple(dev[n_layer:-1]), runs=runs)

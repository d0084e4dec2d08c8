"""The weights a llama.cpp layout hands its scheduled graph (kvmem.engines.llamacpp.layouts._scheduled): each weight on
the host but token_embd, and each one an -ot rule moved off its layer's GPU, with the bytes a CUDA copy of it takes; and
what the host's routed experts alone say of the first GPU's compute buffer, before any graph is scheduled
(``copy_floor``)."""

from __future__ import annotations

from ...units import cdiv, pad
from .ggml_sched import CUDA_ALIGNMENT
from .ggml_sched_plan import OFFLOAD_MIN_BATCH
from .placement import CPU, cuda_alloc_bytes

__all__ = ["graph_weights", "run_graph_weights", "copy_floor"]


def graph_weights(tensors, n_layer: int, layer_device, output_device, index) -> tuple:
    """(((layer, name), (device index, CUDA bytes)) of each of ``tensors`` on the host but token_embd and of each a
    rule moved off its layer's device, whether one was moved)."""
    weights, moved = [], False
    for t in tensors:
        layer = n_layer if t.group == "output" else t.layer
        if layer is None or t.name.startswith("rope_freqs") or (t.group != "output" and layer >= n_layer):
            continue                # token_embd (the host's GET_ROWS), rope_freqs (read by ROPE where it runs), an
            #                         MTP block's loaded tensor (placement nextn_loaded: in no main-context graph)
        own = output_device if layer == n_layer else layer_device[layer]
        if t.device != own:
            moved = True
        if t.device == CPU or t.device != own:
            name = t.name.split("(")[0].removeprefix(f"blk.{layer}.").removesuffix(".weight")
            weights.append(((layer, name), (index(t.device), cuda_alloc_bytes(t))))
    return weights, moved


def run_graph_weights(run: tuple, n_layer: int, own: str, gpus: tuple) -> tuple | None:
    """graph_weights of a run whose tensors are all of one repeating layer on device ``own`` (its layer's), the GPUs
    ``gpus``; None for any other run."""
    layer = run[0].layer
    if any(t.layer != layer or t.group == "output" for t in run):
        return None

    def index(device):
        return len(gpus) if device == CPU else gpus.index(device)
    weights, moved = graph_weights(run, n_layer, {layer: own}, None, index)
    return tuple(weights), moved


def copy_floor(weights, expert_names, n_layer: int, host: int, tokens: int) -> int:
    """The least the first GPU's compute buffer takes in a scheduled prompt graph of ``tokens`` tokens, from
    ``weights`` (graph_weights') alone: a routed expert on the host (``host``: its device index) is src[0] of a
    MUL_MAT_ID (``expert_names``) whose batch, the tokens, is at least OFFLOAD_MIN_BATCH, so ggml_sched runs it on the
    first GPU and copies the expert there (ggml_sched._copies: its CUDA bytes as f32 elements), an allocation in that
    buffer, whose high-water mark is then at least that copy, aligned (ggml_alloc.reserve_counted). The last layer is
    left out (its FFN runs on the output rows alone, out_ids). 0 where no such copy is made: the one-token graph only
    adds to a layout's buffer (scheduled._sized takes the larger), so the floor holds for the layout."""
    if tokens < OFFLOAD_MIN_BATCH:
        return 0
    largest = 0
    for (layer, name), (device, nbytes) in weights:
        if device == host and layer < n_layer - 1 and name in expert_names:
            largest = max(largest, pad(cdiv(nbytes, 4) * 4, CUDA_ALIGNMENT))
    return largest

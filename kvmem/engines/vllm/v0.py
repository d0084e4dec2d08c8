"""The v0 engine: one block table for every layer (CacheEngine), its block counts and log lines.

It logs "# GPU blocks: N, # CPU blocks: M", a block = bs x sum(heads x head_size x 2 [MLA x1]) x dtype over
the stage's attention layers, CPU blocks = swap_space // block (vllm/worker/worker.py
determine_num_available_blocks, in the releases that still have it: not in 0.33.0); concurrency
num_blocks x bs / L.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ...model import Model
from ...records import Record
from ...units import cdiv
from ..results import Capacity, Refusal, assemble
from .formats import MODEL_DTYPE_BYTES
from .layout import Plan
from .models import draft_layers
from .options import GIB, VllmOptions
from .pool import stage_units
from .states import state_elements


@dataclass(frozen=True)
class VllmV0Details(Record):
    """Estimate.details of the v0 engine: one block table for every layer."""

    version: str
    block_size: int
    blocks: int                  # blocks the batch holds
    cache_block_bytes: int       # CacheEngine.get_cache_block_size: one block of every layer


@dataclass(frozen=True)
class VllmV0CapacityDetails(Record):
    """Capacity.details of the v0 engine: GPU and CPU (swap) blocks and the lines it logs."""

    version: str
    num_blocks: int
    cpu_blocks: int
    cache_block_bytes: int
    log: list


def _v0_block_bytes(plan: Plan, members: set) -> int:
    """CacheEngine.get_cache_block_size: one block of every attention layer of the stage."""
    total = 0
    for i in members:
        spec = plan.units[i][1]
        if spec.kind == "mamba":
            continue
        if spec.kind == "mla":
            total += spec.block_size * spec.head_size * spec.dtype_bytes
        else:
            total += 2 * spec.block_size * spec.heads * spec.head_size * spec.dtype_bytes
    return total


def estimate_v0(model: Model, plan: Plan, *, tokens: int, batch: int, tp: int, pp: int, opts: VllmOptions):
    """v0: one block table for every layer; a block holds block_size tokens of each layer."""
    layers = model.layers + draft_layers(model, opts.draft)
    rows = [(0, 0, 0)] * plan.n_layers
    blocks = cdiv(tokens, plan.block_size)
    state_bytes = MODEL_DTYPE_BYTES.get(model.dtype, 2)
    for owner, spec in plan.units:
        if spec.kind == "mamba":   # v0's MambaCacheManager: a state per sequence, outside the KV pool
            conv, ssm = state_elements(model, layers[owner], tp, 0)
            k, v, s = 0, 0, batch * (conv + ssm) * state_bytes
        else:                      # CacheEngine: head_size x 2 (K and V), MLA one latent
            v0_spec = spec if spec.kind == "mla" else replace(spec, kind="sliding", mode="")
            k, v, s = v0_spec.kv_split(blocks * batch)
        rows[owner] = (rows[owner][0] + k, rows[owner][1] + v, rows[owner][2] + s)
    notes = list(plan.notes) + ["v0 engine: every attention layer holds cdiv(tokens, block_size) blocks "
                                "(sliding windows not recycled in this count); Mamba states per sequence "
                                "in the model dtype, outside the KV pool"]
    details = VllmV0Details(version="v0", block_size=plan.block_size, blocks=batch * blocks,
                            cache_block_bytes=max(_v0_block_bytes(plan, m) for m in stage_units(plan, pp)))
    return assemble(model, "vllm", tokens=tokens, batch=batch, kv_dtype=plan.fmt.name, tp=tp, pp=pp,
                    rows=rows, notes=notes, details=details, block_size=plan.block_size)


def capacity_v0(model: Model, plan: Plan, stages: list, kv_memory: int, length: int, opts: VllmOptions,
                 notes: list) -> Capacity:
    """v0: num_gpu_blocks = memory // cache block, CPU blocks = swap_space // cache block."""
    block_bytes = max(_v0_block_bytes(plan, members) for members in stages)
    if not block_bytes:
        raise ValueError(f"{model.name} has no attention layer for the v0 engine's KV cache")
    bs = plan.block_size
    num_blocks = kv_memory // block_bytes
    cpu_blocks = int(opts.swap_space * GIB) // block_bytes
    tokens = num_blocks * bs
    concurrency = tokens / length
    longest = min(tokens, model.max_position_embeddings) if model.max_position_embeddings else tokens
    refuses = None
    if length > tokens:
        refuses = (f"vLLM v0 refuses to start: The model's max seq len ({length}) is larger than the "
                   f"maximum number of tokens that can be stored in KV cache ({tokens}).")
        notes.append(refuses)
    log = [f"# GPU blocks: {num_blocks}, # CPU blocks: {cpu_blocks}",
           f"Maximum concurrency for {length} tokens per request: {concurrency:.2f}x"]
    details = VllmV0CapacityDetails(version="v0", num_blocks=num_blocks, cpu_blocks=cpu_blocks,
                                    cache_block_bytes=block_bytes, log=log)
    return Capacity(model=model.name, engine="vllm", kv_memory=kv_memory, blocks=num_blocks, tokens=tokens,
                    max_concurrency=concurrency, longest_request_tokens=longest, block_size=bs,
                    notes=tuple(notes), details=details, log_lines=tuple(log), k_dtype=plan.fmt.name,
                    v_dtype=plan.fmt.name, refusal=Refusal(refuses) if refuses else None)

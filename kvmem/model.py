"""Model: an immutable description of what a model caches, layer by layer (kvmem.layer), with the
few whole-model facts sizing needs (kvmem.facts), and its two readers: a Hugging Face config.json
(kvmem.configs) and a GGUF header (kvmem.sources.gguf)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, fields, replace
from functools import cached_property

from .facts import ConfigReading, ModelFacts
from .layer import COMPRESSED, FULL, KINDS, LINEAR, MLA, SHARED, Layer

__all__ = ["Model"]


def _canonical(value) -> str:
    """A dict (or None) as one text, whatever its key order: JSON with sorted keys; repr where JSON
    cannot say it (keys of mixed types)."""
    try:
        return json.dumps(value, sort_keys=True, default=repr, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError):
        return repr(value)


@dataclass(frozen=True)
class Model:
    """A model as kvmem sees it: its layers and the few whole-model facts sizing needs."""

    name: str
    layers: tuple[Layer, ...]
    hidden_size: int
    num_attention_heads: int
    dtype: str = "bf16"
    max_position_embeddings: int | None = None
    params_total: int | None = None
    params_active: int | None = None
    params_embedding: int = 0
    model_type: str = ""
    hf_id: str | None = None
    source: str | None = None
    mtp_layers: int = 0
    # Equality is "the same model": every field that can change a number is compared -- the facts
    # (quantisation, MoE, vocabulary), the raw config the engines read, the checkpoint's tensors
    # (their storage types); only ``reading`` (how the config was read, words) is not.
    # ``fingerprint`` is that identity as text, the key of every cache shared across users (ui/cache.py).
    facts: ModelFacts = field(default_factory=ModelFacts)
    config: dict = field(default_factory=dict, repr=False, hash=False)          # compared (a dict: not hashed)
    reading: ConfigReading | None = field(default=None, repr=False, compare=False, hash=False)
    # The tensors its safetensors or GGUF headers list (kvmem.sources.Checkpoint), when read:
    # kvmem.weights then counts exact bytes instead of the formula.
    checkpoint: object | None = field(default=None, repr=False)

    def __post_init__(self):
        if not self.layers:
            raise ValueError("a model needs at least one layer")
        object.__setattr__(self, "layers", tuple(self.layers))

    @classmethod
    def from_hf_config(cls, cfg, *, name: str | None = None, hf_id: str | None = None,
                       source: str | None = None) -> Model:
        """Read a Hugging Face ``config.json``: a dict, JSON text, or a path to the file (kvmem.configs).
        ``hf_id`` and ``source`` say where it came from (a Hub id; the file or preset it was read from)."""
        # imported here, not above: ``import kvmem.model`` (every engine's) stays without the config reader
        from .configs import model_fields
        return cls(**model_fields(cfg, name=name, hf_id=hf_id, source=source))

    @classmethod
    def from_gguf(cls, path) -> Model:
        """Read a GGUF file's header (never its tensor data): metadata -> layers, tensor infos ->
        exact weight bytes. Needs the ``gguf`` package (kvmem[sources])."""
        from .sources.gguf import fields_from_gguf
        return cls(**fields_from_gguf(path))

    def __hash__(self) -> int:
        """The cached fingerprint's hash: a model is hashed (functools.lru_cache keys) once, not
        layer by layer on every lookup; equal models hash alike, as ``fingerprint`` is their value."""
        return hash(self.fingerprint)

    @cached_property
    def fingerprint(self) -> str:
        """The model's identity as a SHA-256 hex digest of every compared field (what ``==``
        compares, dicts with their keys sorted): equal models have one fingerprint, and models that
        differ in anything that changes a number (quantization_config, a tensor's type) have two."""
        digest = hashlib.sha256()
        for item in fields(self):
            if not item.compare:
                continue
            value = getattr(self, item.name)
            if item.name == "facts":
                text = repr(replace(value, quantization_config=None)) + _canonical(value.quantization_config)
            else:
                text = _canonical(value) if isinstance(value, dict) else repr(value)
            digest.update(f"{item.name}={len(text)}:{text};".encode("utf-8", "surrogatepass"))
        return digest.hexdigest()

    def with_checkpoint(self, checkpoint) -> "Model":
        """A copy that carries the checkpoint's tensor list (exact weight bytes)."""
        return replace(self, checkpoint=checkpoint)

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    def count(self, kind: str) -> int:
        return sum(layer.kind == kind for layer in self.layers)

    @property
    def kinds(self) -> dict[str, int]:
        """Layer count per attention kind, in KINDS order, zero counts left out."""
        return {kind: self.count(kind) for kind in KINDS if self.count(kind)}

    def with_layers(self, layers, **changes) -> "Model":
        """A copy with other layers (and any other field changed): for what-if variants."""
        return replace(self, layers=tuple(layers), **changes)

    def describe(self) -> str:
        """A short human summary: layers by kind and shape (heads, head dims, windows, MLA ranks,
        states), query heads, params."""
        groups: dict[tuple, int] = {}
        for layer in self.layers:
            shape = (layer.kind, layer.kv_heads, layer.head_dim_k, layer.head_dim_v, layer.window,
                     layer.kv_lora_rank, layer.qk_rope_head_dim, layer.index_head_dim,
                     layer.state.elements() if layer.state else 0, layer.compressor)
            groups[shape] = groups.get(shape, 0) + 1
        parts = []
        for (kind, kv_heads, dim_k, dim_v, window, rank, rope, index, state, comp), n in sorted(
                groups.items(), key=lambda item: KINDS.index(item[0][0])):
            if kind.per_head:
                dims = f"head_dim {dim_k}" if dim_k == dim_v else f"head_dim K {dim_k} / V {dim_v}"
                text = f"{n} {kind} ({kv_heads} KV heads, {dims}" + (f", window {window}" if kind != FULL else "")
                text += f", indexer {index}" if index else ""
                text += f", beside a state of {state:,} elements per sequence)" if state else ")"
            elif kind == MLA:
                text = f"{n} MLA (latent {rank} + rope {rope}" + (f" + indexer {index}" if index else "") + ")"
            elif kind == LINEAR:
                text = f"{n} linear/SSM (state {state:,} elements per sequence)"
            elif kind == COMPRESSED:
                text = f"{n} compressed ({dim_k}-wide K=V rows, window {window}"
                if comp:
                    text += f", + 1 row per {comp.rate} tokens" + (f" + indexer {comp.index_head_dim}"
                                                                    if comp.index_head_dim else "")
                text += ")"
            elif kind == SHARED:
                text = f"{n} sharing another layer's KV"
            else:
                text = f"{n} without cache"
            parts.append(text)
        heads = f"{self.num_attention_heads} query heads, hidden {self.hidden_size}"
        params = ""
        if self.params_total:
            params = f", {self.params_total / 1e9:.2f}B params"
            if self.params_active and self.params_active < self.params_total - self.params_embedding:
                params += f" ({self.params_active / 1e9:.2f}B active)"
        checkpoint = self.checkpoint          # a kvmem.sources.Checkpoint (that module sits above this one)
        by_dtype = getattr(checkpoint, "bytes_by_dtype", None)
        # a GGUF: its tensors' own types, not a dtype it lacks (a Hub model's checkpoint is read when its
        # weights are asked for: kvmem.sources.hub.HubCheckpoint)
        stored = self.dtype
        if by_dtype is not None and getattr(checkpoint, "format", None) == "gguf":
            stored = f"weights {' + '.join(by_dtype())} (GGUF)"
        return f"{self.name}: {self.num_layers} layers — " + "; ".join(parts) + f"; {heads}{params}, {stored}"

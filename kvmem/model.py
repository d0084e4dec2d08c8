"""Layer and Model: an immutable, per-layer description of what a model caches.

Each layer has one attention kind:

    full      K and V for every token:      kv_heads x (head_dim_k + head_dim_v) per token
    sliding   the same, for the last ``window`` tokens only
    chunked   the same, for the tokens of the current ``window``-sized chunk (Llama 4)
    mla       one latent per token, shared by all heads: kv_lora_rank + qk_rope_head_dim
              (DeepSeek-V2/V3, Kimi K2); DeepSeek-V3.2 adds an indexer key of index_head_dim
    linear    no per-token cache; a fixed per-sequence state (linear attention / SSM)
    shared    reads the cache of layer ``shared_with`` and holds none of its own (Gemma-3n)
    none      no cache at all (an MLP-only block of a hybrid)
    compressed  DeepSeek-V4: one row of head_dim shared by K, V and every head for the last
              ``window`` tokens, and with a ``compressor`` one compressed row per compress_rate
              tokens (+ an indexer key row) and the compressor's per-sequence buffers (Compressor)

A layer of any kind may also carry a recurrent ``state`` (a parallel hybrid such as
Falcon-H1 has attention and an SSM in the same layer).

Over 300 lines by design: the cache's vocabulary (Kind, Layer, its states) and the Model made of
it, one home for both, as every other module reads them together.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, fields, replace
from enum import StrEnum
from functools import cached_property
from importlib import import_module

__all__ = ["Kind", "FULL", "SLIDING", "CHUNKED", "MLA", "LINEAR", "SHARED", "NONE", "COMPRESSED", "KINDS",
           "RecurrentState", "Compressor", "Layer", "Model", "ModelFacts", "MoeShape", "SsmFacts", "ConfigReading",
           "register_reader"]


class Kind(StrEnum):
    """A layer's attention kind, and what it stores: one vocabulary for the reader and the engines.

    A member is its name as a string ("full" == Kind.FULL), so results and JSON keep plain names.
    """

    FULL = "full"
    SLIDING = "sliding"
    CHUNKED = "chunked"
    MLA = "mla"
    LINEAR = "linear"
    SHARED = "shared"
    NONE = "none"
    COMPRESSED = "compressed"
    # Read from a config's layer types only, never a Layer's kind: kvmem.configs.layers builds each
    # as a full or sliding layer with a recurrent state beside it (hybrid, hybrid_sliding: Falcon-H1,
    # Inkling, ZAYA) or a full layer with an indexer key (sparse: MiniMax-M3).
    HYBRID = "hybrid"
    HYBRID_SLIDING = "hybrid_sliding"
    SPARSE = "sparse"

    @property
    def per_head(self) -> bool:
        """K and V rows per KV head, per token (full, sliding, chunked)."""
        return self in (Kind.FULL, Kind.SLIDING, Kind.CHUNKED)

    @property
    def latent(self) -> bool:
        """One latent row per token, shared by every head (MLA)."""
        return self is Kind.MLA

    @property
    def windowed(self) -> bool:
        """It holds at most ``window`` tokens (a sliding window or an attention chunk)."""
        return self in (Kind.SLIDING, Kind.CHUNKED)

    @property
    def compressed(self) -> bool:
        """Extra rows beyond its window: one compressed row per compress_rate tokens (DeepSeek-V4)."""
        return self is Kind.COMPRESSED

    @property
    def caches_tokens(self) -> bool:
        """It stores something per token."""
        return self.per_head or self.latent or self.compressed

    @property
    def has_state(self) -> bool:
        """Its cache is a fixed per-sequence state (linear attention / SSM) instead of tokens."""
        return self is Kind.LINEAR


FULL, SLIDING, CHUNKED, MLA, LINEAR, SHARED, NONE, COMPRESSED = KINDS = tuple(Kind)[:8]   # a Layer's kinds
PER_HEAD_KINDS = tuple(kind for kind in Kind if kind.per_head)


@dataclass(frozen=True)
class RecurrentState:
    """A fixed per-sequence state: a causal-conv window and an SSM/linear-attention state.

    ``conv_channels`` x ``conv_kernel`` is the convolution's input window (engines keep
    kernel - 1 or kernel columns of it); ``ssm_elements`` is the recurrent state
    (Mamba2: heads x head_dim x d_state; gated DeltaNet: v_heads x k_dim x v_dim).
    ``ssm_heads`` is the head count the recurrent state splits over with tensor parallelism.
    ``ssm_dtype`` is the dtype the model keeps its recurrent state in where its config or its
    modeling code fixes one (Qwen3.5 ``mamba_ssm_dtype``, Nemotron-H ``mamba_ssm_cache_dtype``,
    Kimi-Linear's KDA in float32); None: the model's own dtype. ``conv_dtype`` likewise for the
    conv window (Inkling's short convolutions run and keep their state in float32).
    """

    conv_channels: int = 0
    conv_kernel: int = 0
    ssm_elements: int = 0
    ssm_heads: int = 1
    ssm_dtype: str | None = None
    conv_dtype: str | None = None

    def elements(self, conv_columns: int | None = None) -> int:
        """Elements per sequence, with ``conv_columns`` (default kernel - 1) conv columns kept."""
        columns = self.conv_kernel - 1 if conv_columns is None else conv_columns
        return self.conv_channels * max(columns, 0) + self.ssm_elements


@dataclass(frozen=True)
class Compressor:
    """DeepSeek-V4's compressor of one layer: what it keeps per sequence of t tokens.

    Source: transformers 5.24 modeling_deepseek_v4.py, DeepseekV4HCACache (HCA: ``overlap``
    False, no indexer) and DeepseekV4CSACache (CSA: ``overlap`` True, an indexer of
    ``index_head_dim``), fed by DeepseekV4HCACompressor / DeepseekV4CSACompressor /
    DeepseekV4Indexer. Per sequence, ``w = head_dim + index_head_dim``:

        compressed rows   floor(t / rate) x w          (compressed_kv: one entry per closed window
                                                         of ``rate`` tokens, + the indexer's keys)
        buffer            (t mod rate) x b, kv and gate (buffer_kv / buffer_gate: the projected
                          tokens of the open window; b = 2w with overlap -- the Ca and Cb series --
                          else w)
        overlap           rate x w kv, rate x w gate    (overlap_kv / overlap_gate: the last closed
                          window's Ca slice, once a window has closed; CSA only)

    The compressed rows, the buffer and overlap_kv are in the model's dtype; the overlap gate is
    ``gate_dtype``: the gate plus the fp32 ``position_bias`` (kept fp32 by
    ``_keep_in_fp32_modules_strict``) promotes to fp32.
    """

    rate: int                   # compress_rate: tokens per compressed row
    head_dim: int               # the compressed K=V row (the attention's head_dim)
    index_head_dim: int = 0     # the lightning indexer's compressed key row (CSA); 0: none
    overlap: bool = False       # two series per token, the previous window's Ca slice kept (CSA)
    gate_dtype: str = "fp32"

    def __post_init__(self):
        if min(self.rate, self.head_dim) < 1 or self.index_head_dim < 0:
            raise ValueError(f"a compressor needs rate and head_dim >= 1, got rate {self.rate!r}, "
                             f"head_dim {self.head_dim!r}")

    @property
    def row_width(self) -> int:
        """Elements of one compressed row: the K=V entry and the indexer's key."""
        return self.head_dim + self.index_head_dim

    @property
    def buffer_width(self) -> int:
        """Elements one buffered token keeps, in kv and again in gate (Ca and Cb with overlap)."""
        return (2 if self.overlap else 1) * self.row_width

    def compressed_rows(self, tokens: int) -> int:
        """Compressed rows for a sequence of ``tokens``: floor(tokens / rate)."""
        return tokens // self.rate

    def buffered_tokens(self, tokens: int) -> int:
        """Tokens of the open window, projected and waiting: tokens mod rate."""
        return tokens % self.rate

    def overlap_tokens(self, tokens: int) -> int:
        """Rows of the kept Ca slice: rate once a window has closed (with overlap), else 0."""
        return self.rate if self.overlap and tokens >= self.rate else 0

    def state_elements(self, tokens: int) -> tuple[int, int]:
        """(elements in the model's dtype, elements in ``gate_dtype``) of the buffer and overlap
        state one sequence of ``tokens`` keeps; the compressed rows are its KV."""
        overlap = self.overlap_tokens(tokens) * self.row_width
        return 2 * self.buffered_tokens(tokens) * self.buffer_width + overlap, overlap


@dataclass(frozen=True)
class Layer:
    """What one decoder layer caches."""

    kind: Kind
    kv_heads: int = 0
    head_dim_k: int = 0
    head_dim_v: int = 0
    window: int = 0               # sliding window or attention chunk, in tokens
    kv_lora_rank: int = 0         # MLA latent width
    qk_rope_head_dim: int = 0     # MLA decoupled rope key width
    index_head_dim: int = 0       # a lightning-indexer key per token (DeepSeek-V3.2, MiniMax-M3 sparse layers)
    shared_with: int | None = None
    state: RecurrentState | None = None
    compressor: Compressor | None = None   # a compressed layer's compressor (None: its window only)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"layer kind must be one of {tuple(map(str, KINDS))}, got {self.kind!r}")
        object.__setattr__(self, "kind", Kind(self.kind))
        if (self.kind.windowed or self.kind.compressed) and self.window < 1:
            raise ValueError(f"a {self.kind} layer needs a positive window, got {self.window!r}")
        if self.kind.per_head and min(self.kv_heads, self.head_dim_k, self.head_dim_v) < 1:
            raise ValueError(f"a {self.kind} layer needs kv_heads, head_dim_k and head_dim_v >= 1")
        if self.kind == MLA and self.kv_lora_rank < 1:
            raise ValueError("an mla layer needs kv_lora_rank >= 1")
        if self.kind == SHARED and self.shared_with is None:
            raise ValueError("a shared layer needs shared_with (the layer whose cache it reads)")
        if self.kind == LINEAR and self.state is None:
            raise ValueError("a linear layer needs a recurrent state")
        if self.kind == COMPRESSED and (self.kv_heads != 1 or self.head_dim_k < 1 or self.head_dim_v):
            raise ValueError("a compressed layer caches one row shared by K and V: kv_heads 1, head_dim_k >= 1, "
                             "head_dim_v 0")
        if self.compressor is not None and self.kind != COMPRESSED:
            raise ValueError(f"only a compressed layer has a compressor, not a {self.kind} layer")

    @property
    def caches_tokens(self) -> bool:
        """True when this layer stores something per token."""
        return self.kind.caches_tokens

    @property
    def k_width(self) -> int:
        """Elements of K stored per token: kv_heads x head_dim_k (+ MiniMax-M3's one-head indexer
        key), or the MLA latent + rope (+ the V3.2 indexer key), which serves as both K and V, or
        a compressed layer's window row (K = V; its compressed rows are the compressor's)."""
        if self.kind.per_head:
            return self.kv_heads * self.head_dim_k + self.index_head_dim
        if self.kind.latent:
            return self.kv_lora_rank + self.qk_rope_head_dim + self.index_head_dim
        if self.kind.compressed:
            return self.head_dim_k
        return 0

    @property
    def v_width(self) -> int:
        """Elements of V stored per token (0 for MLA: the latent is counted once, in K)."""
        return self.kv_heads * self.head_dim_v if self.kind.per_head else 0

    def held_tokens(self, tokens: int) -> int:
        """Tokens this layer holds for a sequence of ``tokens``: min(tokens, window) for a
        sliding layer and for a chunked one (a whole chunk: the most the current chunk holds,
        whatever position in it the sequence has reached), all of them for full/MLA; a
        compressed layer's window rows (min(tokens, window); Compressor counts the rest)."""
        if self.kind.windowed or self.kind.compressed:
            return min(tokens, self.window)
        return tokens if self.caches_tokens else 0


# The readers Model's constructors hand to, registered by the modules above this one: "hf_config"
# by kvmem.configs (its one config reader), "gguf" by kvmem.catalog (kvmem.sources.gguf, lazily).
# ``import kvmem`` loads neither until a name needs it, so a constructor imports its registrar.
_READERS: dict = {}
_REGISTRARS = {"hf_config": "kvmem.configs", "gguf": "kvmem.catalog"}


def register_reader(kind: str, reader) -> None:
    """Model.from_hf_config ("hf_config") and Model.from_gguf ("gguf") read with ``reader``."""
    _READERS[kind] = reader


def _reader(kind: str):
    """The registered reader of ``kind``, importing the module that registers it on first use."""
    if kind not in _READERS:
        import_module(_REGISTRARS[kind])
    return _READERS[kind]


@dataclass(frozen=True)
class MoeShape:
    """A mixture-of-experts MLP: routed experts, the experts each token reads, their widths.

    ``moe_layers`` marks which layers route (DeepSeek's first_k_dense_replace, Llama 4's
    interleave step, Jamba's expert period, Qwen's decoder_sparse_step / mlp_only_layers);
    ``dense_intermediate_size`` is the MLP width of the other layers (0 when there are none).
    """

    experts: int
    top_k: int
    intermediate_size: int            # one routed expert's width
    shared_intermediate_size: int     # the shared experts' width together (0: none)
    dense_intermediate_size: int
    moe_layers: tuple[bool, ...] = ()

    def is_moe(self, layer: int) -> bool:
        return self.moe_layers[layer] if self.moe_layers else True


@dataclass(frozen=True)
class SsmFacts:
    """The config fields of a Mamba2-style SSM that engines lay their state out by."""

    n_groups: int = 0
    state_size: int = 0
    chunk_size: int = 0
    ssm_dtype: str | None = None       # the config's own state dtype (Qwen3.5 mamba_ssm_dtype,
                                       # Nemotron-H mamba_ssm_cache_dtype), verbatim; None: unset


@dataclass(frozen=True)
class ModelFacts:
    """Every config fact an engine or sizing reads beyond the layers, read once (kvmem.configs).

    A hand-built Model carries the empty facts: no MoE, vocabulary 0, no quantisation.
    """

    architectures: tuple[str, ...] = ()
    intermediate_size: int = 0                  # the dense MLP width (0: not given)
    vocab_size: int = 0
    tie_word_embeddings: bool = True
    q_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0
    partial_rotary_factor: str = "1"            # as written (rotary_pct for GPT-NeoX), exact
    new_decoder_architecture: bool = False
    quantization_config: dict | None = field(default=None, hash=False)   # compared (a dict: not hashed)
    moe: MoeShape | None = None
    ssm: SsmFacts | None = None


@dataclass(frozen=True)
class ConfigReading:
    """How a config.json was read: its family and the rule it follows, the fields taken from the
    file, those the file left out that came from transformers' config-class defaults, and the cache
    fields the file sets that its family's code leaves without effect on the cache (with why)."""

    model_type: str
    rule: str
    from_config: tuple[str, ...] = ()
    from_defaults: tuple[tuple[str, object], ...] = ()
    ignored: tuple[tuple[str, str], ...] = ()

    def lines(self) -> list[str]:
        """Plain sentences for the CLI, the app and explanations."""
        out = [f"Read as {self.model_type} ({self.rule}); fields read: {', '.join(self.from_config) or 'none'}."]
        if self.from_defaults:
            out.append("Not in the file, taken from transformers' defaults for this family: "
                       + ", ".join(f"{name} = {value!r}" for name, value in self.from_defaults) + ".")
        if self.ignored:
            out.append("Set in the file, without effect on the cache: "
                       + "; ".join(f"{name} ({why})" for name, why in self.ignored) + ".")
        return out


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
    def from_hf_config(cls, cfg, *, name: str | None = None) -> "Model":
        """Read a Hugging Face ``config.json``: a dict, JSON text, or a path to the file (kvmem.configs)."""
        return _reader("hf_config")(cfg, name=name)

    @classmethod
    def from_gguf(cls, path) -> "Model":
        """Read a GGUF file's header (never its tensor data): metadata -> layers, tensor infos ->
        exact weight bytes. Needs the ``gguf`` package (kvmem[sources])."""
        return _reader("gguf")(path)

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

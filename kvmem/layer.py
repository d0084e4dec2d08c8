"""Layer: what one decoder layer caches, in the vocabulary (Kind) every module reads.

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
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["Kind", "FULL", "SLIDING", "CHUNKED", "MLA", "LINEAR", "SHARED", "NONE", "COMPRESSED", "KINDS",
           "RecurrentState", "Compressor", "Layer"]


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

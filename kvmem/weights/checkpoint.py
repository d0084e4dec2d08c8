"""Weights read from a checkpoint's own headers, tensor by tensor, grouped by name.

Exact bytes (``Weights.source`` "safetensors" / "gguf"): for weight_dtype "auto" on a model that
carries a checkpoint (kvmem.sources: a local folder's or a Hub repository's safetensors headers,
a GGUF file's tensor infos), the bytes are the headers' own, tensor by tensor, grouped by name:
embedding (embed_tokens, wte, word_embeddings, embed_in, token_embd), lm_head (lm_head, embed_out,
GGUF output.weight),
experts (".experts." but not shared experts; GGUF *_exps) and dense (the rest, norms and any
vision/MTP tensors the checkpoint stores included). Without headers the formula above is the
fallback and says so (``source`` "formula", with the reason in the notes).
"""

from __future__ import annotations

from fractions import Fraction

from ..layer import MLA
from ..model import Model
from ..units import format_bytes
from .record import WeightLayout, Weights


def parallel_facts(model: Model) -> tuple[list[tuple[int, int]], int]:
    """Per layer (K/V projection params per KV head, KV heads), and MLA params vLLM replicates."""
    hidden = model.hidden_size
    kv_proj, mla = [], 0
    for layer in model.layers:
        if layer.kind.per_head:
            kv_proj.append((hidden * (layer.head_dim_k + layer.head_dim_v), layer.kv_heads))
        elif layer.kind == MLA:
            q_rank = model.facts.q_lora_rank
            mla += hidden * q_rank + hidden * (layer.kv_lora_rank + layer.qk_rope_head_dim)
    return kv_proj, mla


_EMBEDDING_NAMES = ("embed_tokens.", "wte.", "word_embeddings.", "tok_embeddings.", "token_embd.", "embed_in.")


_LM_HEAD_NAMES = ("lm_head.", "embed_out.")     # GPT-NeoX names its output projection embed_out


def _group(name: str) -> str:
    """embedding / lm_head / experts / dense, from a safetensors or GGUF tensor name."""
    if any(part in name for part in _EMBEDDING_NAMES) and "embed_tokens_per_layer" not in name:
        return "embedding"
    if any(name.startswith(p) or f".{p}" in name for p in _LM_HEAD_NAMES) or name == "output.weight":
        return "lm_head"
    if (".experts." in name or "_exps." in name) and "shared_expert" not in name:
        return "experts"
    return "dense"


def exact_weights(model: Model, checkpoint) -> Weights:
    """Weights whose bytes are the checkpoint's own (see the module docstring)."""
    groups = {"embedding": [0, 0], "lm_head": [0, 0], "experts": [0, 0], "dense": [0, 0]}
    for tensor in checkpoint.tensors:
        group = groups[_group(tensor.name)]
        group[0] += tensor.nbytes
        group[1] += tensor.elements
    moe = model.facts.moe
    experts, top_k = (moe.experts, moe.top_k) if moe else (0, 0)
    kv_proj, mla = parallel_facts(model)
    dense_bytes, dense_params = groups["dense"]
    by_dtype = ", ".join(f"{name} {format_bytes(n)}" for name, n in checkpoint.bytes_by_dtype().items())
    note = (f"weights: exact, {len(checkpoint.tensors):,} tensors from the {checkpoint.source} "
            f"({by_dtype})")
    packed = model.facts.quantization_config is not None and checkpoint.format == "safetensors"
    params = (model.params_total or checkpoint.elements) if packed else checkpoint.elements  # I32 packs 8 int4
    return Weights(model=model.name, weight_dtype=checkpoint.format, params_total=params,
                   embedding_bytes=groups["embedding"][0], lm_head_bytes=groups["lm_head"][0],
                   dense_bytes=dense_bytes, expert_bytes=groups["experts"][0], notes=(note,),
                   layout=WeightLayout(n_layers=model.num_layers, experts=experts if groups["experts"][0] else 0,
                                       top_k=top_k, expert_params=groups["experts"][1], dense_params=dense_params,
                                       tied=not groups["lm_head"][0],
                                       dense_rate=Fraction(dense_bytes, dense_params) if dense_params else Fraction(2),
                                       kv_proj=tuple(kv_proj), mla_replicated=mla,
                                       by_dtype=checkpoint.bytes_by_dtype()),
                   source=checkpoint.format)

"""The indexer caches llama.cpp keeps beside the KV cache: DeepSeek sparse attention's lightning-indexer
keys (llama_kv_cache_dsa: deepseek32, glm-dsa, hy_v4) and MiniMax-M3's (llama_kv_cache_msa), per layer."""

from __future__ import annotations

import datetime

from ...model import Model
from .settings import CURRENT, PR_24060, PR_25980, PR_26457, PR_26474

__all__ = ["indexer_widths", "dsa_cached_nextn", "msa_indexer", "MSA_FAMILIES"]


# llama.cpp's GLM-5.2 default indexer layers, for a glm-dsa GGUF without indexer types and a training
# context of 1M or more (src/models/glm-dsa.cpp GLM_5_2_DEFAULT_INDEXER_TYPES, L6-L26 and L58-L66):
# layers 0 and 1, then every fourth from layer 2
_GLM_5_2_CONTEXT = 1048576


def _glm_5_2_default(il: int) -> bool:
    return il < 2 or (il - 2) % 4 == 0


def indexer_widths(model: Model, build: datetime.date = CURRENT) -> dict[int, int]:
    """Layer -> the width of its lightning-indexer key row in llama_kv_cache_dsa's indexer cache (one K
    head of indexer_head_size; no V: the indexer hparams are MLA's), for the layers llama.cpp gives one.

    deepseek32: every trunk layer (src/llama-model.cpp create_memory, filter_lid = il < n_layer).
    glm-dsa: the layers hparams.is_indexer_full(il) marks: the converter writes indexer_types == "full"
    (llama.cpp@0c1e57098 conversion/glm.py#L380-L382) when the config has them; else every layer below a 1M training
    context, the GLM-5.2 default pattern from 1M (llama.cpp@0c1e57098 src/models/glm-dsa.cpp#L58-L66).
    hy_v4: indexer_types == "full", else the sparse layer_types, else none (conversion/hy_v4.py;
    llama.cpp@0c1e57098 src/llama-model.cpp#L2494-L2535: llama_kv_cache_dsa only when indexer_top_k > 0).
    glm-dsa at a ``build`` before PR #26474 (settings.PR_26474): every trunk layer, "full" or "shared" (one
    layer_filter_cb for both caches, llama.cpp@88bfee142 src/llama-model.cpp#L2068-L2085).
    """
    widths = {i: layer.index_head_dim for i, layer in enumerate(model.layers) if layer.index_head_dim}
    if not widths or model.model_type not in ("glm_moe_dsa", "hy_v4"):
        return widths
    if model.model_type == "glm_moe_dsa" and build < PR_26474:
        width = max(widths.values())
        return {i: width for i, layer in enumerate(model.layers) if layer.caches_tokens}
    width = max(widths.values())
    cfg = model.config or {}
    types = cfg.get("indexer_types")
    if isinstance(types, list) and len(types) == model.num_layers:
        full = [t == "full" for t in types]
    elif model.model_type == "hy_v4":
        # conversion/hy_v4.py HYV4Model.indexer_is_full (L67-L101): indexer_types, else the sparse
        # layer_types; neither: no DSA, a plain K-only latent cache (src/llama-model.cpp L2494-L2513)
        layer_types = cfg.get("layer_types") or []
        full = [t in ("sparse_attention", "deepseek_sparse_attention") for t in layer_types[:model.num_layers]]
        full += [False] * (model.num_layers - len(full))
    elif (model.max_position_embeddings or 0) < _GLM_5_2_CONTEXT:
        full = [True] * model.num_layers
    else:
        full = [_glm_5_2_default(i) for i in range(model.num_layers)]
    return {i: width for i in range(model.num_layers) if full[i] and model.layers[i].caches_tokens}


def dsa_cached_nextn(model: Model, n_nextn: int, build: datetime.date) -> int:
    """How many of the GGUF's ``n_nextn`` MTP blocks (arch_tensors.gguf_nextn_layers) the main context's cache of a
    glm-dsa / deepseek32 GGUF holds at ``build``: each a cache layer of a trunk layer's widths, in the indexer cache
    too where there is one. From PR #24060 (2026-06-05: glm-dsa and deepseek32 stopped setting
    n_layer_kv_from_start, and llama_kv_cache loops over n_layer_all with has_kv true for every layer,
    llama.cpp@00f5442cc src/llama-kv-cache.cpp#L100, #L163-L171, src/llama-hparams.cpp#L259-L270) until the trunk
    filter il < n_layer() came: glm-dsa's with PR #25980 (2026-07-29; before PR #25407 its plain cache had no
    filter either, llama.cpp@76f46ad29 src/llama-model.cpp#L2172-L2191), deepseek32's with PR #26457 (2026-08-03)."""
    until = {"glm_moe_dsa": PR_25980, "deepseek_v32": PR_26457}.get(model.model_type)
    return n_nextn if until is not None and PR_24060 <= build < until else 0


# MiniMax-M3 (llama_kv_cache_msa, src/llama-model.cpp L2375-L2395): K and V in every layer, and an indexer
# cache on the layers from n_layer_dense_lead on
MSA_FAMILIES = {"minimax_m3_vl_text", "minimax_m3", "minimax_m3_text"}


def msa_indexer(model: Model, *, value: bool = False) -> dict[int, int]:
    """Layer -> the indexer cache's K width (sparse_index_dim), or with ``value`` its V width: the indexer
    hparams are a copy of the model's with one KV head and key length indexer_head_size, so V keeps one
    head of value_length (llama.cpp@0c1e57098 src/llama-kv-cache-msa.cpp#L39-L50; not MLA: has_v). Layers il >=
    n_layer_dense_lead, the leading zeros of moe_layer_freq (llama.cpp@0c1e57098 conversion/minimax.py#L184-L198)."""
    cfg = model.config or {}
    text = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else cfg
    sac, freq = text.get("sparse_attention_config"), text.get("moe_layer_freq")
    if not isinstance(sac, dict) or not sac.get("sparse_index_dim") or not isinstance(freq, list):
        raise ValueError(f"{model.name}: llama.cpp's converter reads MiniMax-M3's sparse_attention_config "
                         "(sparse_index_dim) and moe_layer_freq (conversion/minimax.py L184-L198); this config "
                         "lacks them")
    n_dense = next((i for i, v in enumerate(freq) if v != 0), len(freq))
    return {i: (model.layers[i].head_dim_v if value else sac["sparse_index_dim"])
            for i in range(n_dense, model.num_layers)}

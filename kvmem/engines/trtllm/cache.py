"""TensorRT-LLM's KV cache: bytes per token (rules 1 and 2), the blocks a workload holds (rules 4 and 5)
and what a memory budget makes of them (rule 3), each rule in the docstring of the function that applies it.

Over 300 lines by design: the five rules' text sits beside their functions, with the TRT-LLM files it
was read in (kvmem.engines.trtllm says why without line ranges).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from ...dtypes import DType, dtype
from ...layer import LINEAR, MLA, SLIDING
from ...model import Model
from ...parallel import check_pp_layers, kv_heads_per_rank, largest_stage
from ...records import Record
from ...units import cdiv, require_positive_int
from ..results import Capacity, Estimate, assemble
from . import draft as spec_draft
from . import dsv4, minimax
from .models import (
    FORCED_DTYPE,
    V2_FAMILIES,
    check_model,
    check_v2,
    dsa_notes,
    gemma4_layout,
    indexer_elements,
    state_bytes_of,
    step3p5_text_config,
    v2_window_blocks,
)

__all__ = ["DEFAULTS", "bytes_per_token", "pp_layers", "estimate", "capacity", "TrtllmDetails",
           "TrtllmCapacityDetails"]

DEFAULTS = {
    "tokens_per_block": 32,        # llmapi KvCacheConfig / PyTorch backend ("Number of tokens per block: 32.");
                                   # TRT-engine (C++ runtime, Triton) deployments commonly ran 64
    "max_attention_window": None,  # KvCacheConfig.max_attention_window; None -> [max_seq_len]
    # the pinned main floors blocks: one pool, calculate_max_num_blocks (standard case, #L377-L390) int(max_tokens //
    # tokens_per_block) (trtllm@001541ba tensorrt_llm/_torch/pyexecutor/resource_manager.py#L866-L914, #L907); VSWA
    # pools, calculate_max_num_blocks_for_vswa, int(primary_tokens // tokens_per_block) (#L1384). "ceil" is the
    # logged releases' rule: the C++ runtime's calculateMaxNumBlocks (0.5 to 0.13 TRT engines) and 1.1.0rc3's Python
    # calculate_max_num_blocks (math.ceil), docs/research/engine_logs_serving.json (631, 4,060, 2,710 blocks)
    "block_rounding": "floor",
    "indexer_k_dtype": None,       # DeepSeek-V4 only: DeepSeekV4SparseAttentionConfig.indexer_k_dtype, whose default
                                   # the GPU decides (dsv4.check_options refuses None for a V4 model)
    "draft": None,                 # speculative decoding: "mtp" (the model's MTP layers) or a draft Model (draft.py)
}
# get_cache_bytes_per_token's accepted types
# (trtllm@001541ba tensorrt_llm/_torch/pyexecutor/resource_manager.py#L849-L864)
KV_DTYPES = ("fp32", "fp16", "bf16", "fp8_e4m3", "nvfp4")


@dataclass(frozen=True)
class _LayerCache:
    """One layer on one rank: what a token costs there, and its attention window."""

    k_bytes: int      # per token (MLA: the latent; DSA adds the indexer share)
    v_bytes: int      # per token (0 for MLA)
    window: int       # tokens held per sequence at most (0 = the whole sequence)


def pp_layers(n_layers: int, pp: int) -> list[range]:
    """TRT-LLM's pipeline split (Mapping.pp_layers): n // pp each, the first n % pp one more
    (trtllm@001541ba tensorrt_llm/_torch/pyexecutor/resource_manager.py#L120-L150 get_pp_layers)."""
    check_pp_layers(pp, n_layers)
    stages, start = [], 0
    for rank in range(pp):
        size = n_layers // pp + (rank < n_layers % pp)
        stages.append(range(start, start + size))
        start += size
    return stages


def _check(tokens_per_block, max_attention_window, block_rounding):
    require_positive_int("tokens_per_block", tokens_per_block)
    if block_rounding not in ("ceil", "floor"):
        raise ValueError(f"block_rounding must be 'ceil' or 'floor', got {block_rounding!r}")
    if max_attention_window is None or max_attention_window == "model":
        return
    if isinstance(max_attention_window, (str, bytes)) or not isinstance(max_attention_window, (list, tuple)) \
            or not max_attention_window:
        raise ValueError("max_attention_window must be None, 'model' or a non-empty list of positive "
                         f"integers, got {max_attention_window!r}")
    for w in max_attention_window:
        require_positive_int("max_attention_window entries", w)


def _kv_dtype(model: Model, kv_dtype) -> DType:
    k = dtype(kv_dtype, model_dtype=FORCED_DTYPE.get(model.model_type, model.dtype))
    if k.name not in KV_DTYPES:
        raise ValueError(f"kv_dtype: TensorRT-LLM caches auto, fp32, fp16, bf16, fp8 or nvfp4, got {kv_dtype!r}")
    return k


def _windows(model: Model, max_attention_window, max_seq_len: int | None) -> list[int]:
    """Per-layer window (0 = whole sequence), clamped to max_seq_len as KVCacheManager does (rule 4).

    TRT-LLM caches every layer for the whole sequence unless KvCacheConfig.max_attention_window is set:
    the default is [max_seq_len], a list given is clamped to max_seq_len
    (trtllm@001541ba tensorrt_llm/_torch/pyexecutor/resource_manager.py#L283-L295 KVCacheManager.__init__), so
    gpt-oss's sliding layers cost as much as its full ones (1.1.0rc3 logs "kv size is 73728" = 36 layers x 2 x 8 x
    64 x 2). max_attention_window takes that list (repeated over the layers as a pattern, each entry clamped to
    max_seq_len) or "model" for the model's own sliding windows. A layer then holds cdiv(min(tokens, window),
    tokens_per_block) blocks per sequence (KVCacheManager::calculateMaxBlockRequirementsPerBeam)."""
    n = model.num_layers
    if max_attention_window in (None, "model") and model.model_type in V2_FAMILIES:
        # trtllm@065ff9e9 tensorrt_llm/_torch/pyexecutor/_util.py#L2202-L2209 _create_kv_cache_manager (Gemma 4):
        # max_attention_window unset -> sliding_window on the sliding layers, max_seq_len on the full ones
        windows = [window for _, _, window in gemma4_layout(model)]
    elif max_attention_window is None:
        windows = [0] * n
    elif max_attention_window == "model":
        windows = [layer.window if layer.kind == SLIDING else 0 for layer in model.layers]
        if model.model_type == "exaone_moe" and {w for w in windows if w} - {model.config.get("sliding_window")}:
            # trtllm@d2c804bc tensorrt_llm/_torch/models/modeling_exaone_moe.py#L83-L90 ExaoneMoeAttention: every
            # sliding layer attends over config.sliding_window; K-EXAONE's per-layer sliding_windows are not read
            raise ValueError("max_attention_window='model': TensorRT-LLM's ExaoneMoeAttention gives every sliding "
                             "layer config.sliding_window, not the config's per-layer sliding_windows; pass the "
                             "windows as a list")
        if model.model_type == "step3p5" and not step3p5_text_config(model).get("layer_types"):
            # _layer_attention_type (trtllm@0c37d5ba tensorrt_llm/_torch/models/modeling_step3p7.py#L222-L229): without
            # layer_types, layers 0, 4, 8, ... are full and the others slide; kvmem's reading makes every such layer
            # full
            raise ValueError("max_attention_window='model': the config has no layer_types, from which TensorRT-LLM's "
                             "Step3p7Attention slides 3 of every 4 layers and kvmem's reading none; pass the windows "
                             "as a list")
    else:
        pattern = list(max_attention_window)
        windows = [pattern[i % len(pattern)] for i in range(n)]
    if max_seq_len:
        windows = [0 if w == 0 or w >= max_seq_len else w for w in windows]
    return windows


def _layers(model: Model, k_dtype: DType, tp: int, windows) -> list[_LayerCache | None]:
    """Rule 1 per layer on one tensor-parallel rank (None: no KV blocks): bytes per token as allocated
    (trtllm@001541ba tensorrt_llm/_torch/pyexecutor/resource_manager.py#L229-L271 KVCacheManager.__init__, #L849-L864
    get_cache_bytes_per_token), kv_factor x sum over the rank's layers of
    kv_heads_per_layer x head_dim in the cache dtype, kv_heads_per_layer = ceil(kv_heads / tp) ((num_kv_heads
    + tp - 1) // tp: one replicated head when tp > kv_heads; tp is 1 under attention data parallelism),
    kv_factor 2 (K and V), one head_dim for both. MLA (DeepSeek, Kimi) caches K only (CacheType SELFKONLY,
    kv_factor 1) with one "head" of kv_lora_rank + qk_rope_head_dim, not split by tp. NVFP4 adds one fp8
    scale per 16 values: ceil(x/2) + ceil(x/16) bytes (kvmem.dtype("nvfp4")). Layers without attention
    (Mamba, MLP-only) hold no blocks. DeepSeek sparse attention (DeepSeek-V3.2, GLM-5: DSACacheManager) adds
    an indexer key on every layer, index_head_dim + index_head_dim // 128 x 4 more elements in the cache dtype
    (trtllm@eaab4c3a tensorrt_llm/_torch/attention_backend/sparse/dsa/cache_manager.py#L137-L161; the pool holds
    them as fp8 values and float32 scales, 1 byte each, in the C++ KVCacheManager's indexer pool): TRT-LLM's own
    accounting, at any tokens_per_block (DSACacheManager.__init__ checks none:
    trtllm@eaab4c3a tensorrt_llm/_torch/attention_backend/sparse/dsa/cache_manager.py#L33-L91)."""
    out: list[_LayerCache | None] = []
    if model.model_type in V2_FAMILIES:
        # trtllm@00be09f7 tensorrt_llm/_torch/pyexecutor/kv_cache_manager_v2.py#L971-L1015 KVCacheManagerV2.__init__:
        # per layer (kv_heads + tp - 1) // tp heads (num_kv_heads_per_layer, #L971-L998; tp 1 under attention DP,
        # #L859-L861) of that layer's head_dim (head_dim_per_layer, #L1000-L1015); _build_base_config gives each
        # layer a KEY and a VALUE buffer, a page of tokens_per_block x heads x head_dim in the cache dtype
        # (get_buffers); every layer has them
        for (heads, head_dim, _), window in zip(gemma4_layout(model), windows, strict=True):
            row = k_dtype.row_bytes(kv_heads_per_rank(heads, tp) * head_dim)
            out.append(_LayerCache(row, row, window))
        return out
    if minimax.is_m3(model):
        # MiniMaxM3KVCacheManagerV2 (minimax.py): KVCacheManagerV2's K and V of (kv_heads + tp - 1) // tp heads on every
        # layer, and on the sparse layers an INDEX_KEY buffer of one head, not split by tp, kept here with K
        sparse, index = set(minimax.sparse_layers(model)), minimax.index_row_bytes(k_dtype.name)
        for i, (layer, window) in enumerate(zip(model.layers, windows, strict=True)):
            row = k_dtype.row_bytes(kv_heads_per_rank(layer.kv_heads, tp) * layer.head_dim_k)
            out.append(_LayerCache(row + (index if i in sparse else 0), row, window))
        return out
    index = indexer_elements(model)
    for layer, window in zip(model.layers, windows, strict=True):
        if layer.kind == MLA:
            out.append(_LayerCache(k_dtype.row_bytes(layer.kv_lora_rank + layer.qk_rope_head_dim + index), 0,
                                   window))
        elif layer.kind.per_head:
            if layer.head_dim_k != layer.head_dim_v:
                raise ValueError(f"TensorRT-LLM's cache has one head_dim for K and V; layer has "
                                 f"{layer.head_dim_k} and {layer.head_dim_v}")
            heads = kv_heads_per_rank(layer.kv_heads, tp)  # = ceil(kv/tp) for every tp it accepts
            row = k_dtype.row_bytes(heads * layer.head_dim_k)
            out.append(_LayerCache(row, row, window))
        else:
            out.append(None)
    return out


def _static_bytes_per_token(model: Model, k_dtype: DType, tp: int, pp: int):
    """Rule 2 (trtllm@001541ba tensorrt_llm/_torch/pyexecutor/resource_manager.py#L800-L847 get_cache_size_per_token)
    on the first (largest) pipeline rank: the cheaper estimate KvCacheCreator turns memory into max_tokens with
    (trtllm@065ff9e9 tensorrt_llm/_torch/pyexecutor/_util.py#L1269-L1271). MLA as rule 1; otherwise 2 x layers x
    (head_dim x kv_heads // tp) x dtype bytes -- the product is floored, so when tp > kv_heads it counts a
    fraction of a head and sizes the pool for fewer bytes than rule 1 then allocates (kvmem notes it). fp8
    1 byte, fp4 ceil(x/2) + ceil(x/16), any other dtype 2 bytes. Layers: this rank's share of the attention
    layers, the first n % pp ranks taking one more (Mapping.pp_layers: torch.tensor_split)."""
    if model.model_type in V2_FAMILIES:
        # KVCacheManagerV2 sizes its pools from a byte quota (max_gpu_total_bytes), not from a per-token estimate:
        # the bytes per token it reports are the allocated ones (get_layer_bytes_per_token over the layers)
        caches = _layers(model, k_dtype, tp, [0] * model.num_layers)
        return sum(c.k_bytes + c.v_bytes for c in caches if c)
    if minimax.is_m3(model):
        # its per-token cost is KVCacheManagerV2's K and V: MiniMaxM3KVCacheManagerV2 overrides neither
        # get_cache_size_per_token nor get_cache_bytes_per_token, so its index key is in no per-token cost
        # (trtllm@0462117e tensorrt_llm/_torch/attention_backend/sparse/minimax_m3/cache_manager.py#L132-L450)
        m3_layers = pp_layers(model.num_layers, pp)[0]
        return sum(2 * k_dtype.row_bytes(kv_heads_per_rank(model.layers[i].kv_heads, tp) * model.layers[i].head_dim_k)
                   for i in m3_layers)
    attention = [layer for layer in model.layers if layer.caches_tokens]
    if not attention:
        return 0
    layers = len(pp_layers(len(attention), pp)[0])
    first = attention[0]
    if first.kind == MLA:
        elements = 1 * layers * (first.kv_lora_rank + first.qk_rope_head_dim)
    elif model.model_type == "nemotron-nas":
        # NemotronNASModel (trtllm@4d365368 tensorrt_llm/_torch/models/modeling_nemotron_nas.py#L189-L194):
        # config.num_key_value_heads becomes one entry per layer, 0 where a block has no attention;
        # get_cache_size_per_token takes its float mean over every layer, floors head_dim x mean // tp (trtllm@001541ba
        # tensorrt_llm/_torch/pyexecutor/resource_manager.py#L807-L823) and counts get_num_attention_layers() =
        # num_hidden_layers of them (#L826-L828; trtllm@1a0dc5f7 tensorrt_llm/_torch/model_config.py#L602-L606):
        # float arithmetic, mirrored as such
        heads = [layer.kv_heads if layer.caches_tokens else 0 for layer in model.layers]
        layers = len(pp_layers(model.num_layers, pp)[0])
        elements = 2 * layers * int(first.head_dim_k * (sum(heads) / len(heads)) // tp)
    else:
        kv_heads = Fraction(sum(layer.kv_heads for layer in attention), len(attention))
        elements = 2 * layers * int(first.head_dim_k * kv_heads // tp)
    # trtllm@001541ba tensorrt_llm/_torch/pyexecutor/resource_manager.py#L831-L846: fp8 1 byte, fp4 packed + scales
    size: int | Fraction
    if k_dtype.name == "fp8_e4m3":
        size = elements
    elif k_dtype.name == "nvfp4":
        size = cdiv(elements, 2) + cdiv(elements, 16)
    else:
        size = 2 * elements
    index = indexer_elements(model) if first.kind == MLA else 0
    if index:
        # DSACacheManager.get_cache_size_per_token: x (1 + index / head_dim), head_dim = kv_lora_rank + rope
        size = size * (1 + Fraction(index, first.kv_lora_rank + first.qk_rope_head_dim))
    return size


def bytes_per_token(model: Model, *, kv_dtype="auto", tp: int = 1, pp: int = 1,
                    tokens_per_block: int = DEFAULTS["tokens_per_block"],  # type: ignore[assignment]  # an int: 32
                    allocated: bool = False):
    """TRT-LLM's bytes per token on the first pipeline rank: the estimate it sizes the pool
    with ("kv size is N"; rule 2), or with ``allocated`` what each token then takes (rule 1)."""
    require_positive_int("tokens_per_block", tokens_per_block)
    check_model(model)
    k_dtype = _kv_dtype(model, kv_dtype)
    if dsv4.is_dsv4(model):
        raise ValueError("bytes_per_token: DeepSeek-V4's buffers under TensorRT-LLM differ in rows per token and "
                         "window (kvmem.engines.trtllm.dsv4); use estimate")
    if allocated:
        caches = _layers(model, k_dtype, tp, [0] * model.num_layers)
        stage = pp_layers(model.num_layers, pp)[0]
        return sum(c.k_bytes + c.v_bytes for i in stage if (c := caches[i]))
    return _static_bytes_per_token(model, k_dtype, tp, pp)


def _stage_rows(model, caches, tp, tokens, batch, tokens_per_block):
    rows, blocks = [], {}
    for i, cache in enumerate(caches):
        if cache is None:
            state = batch * state_bytes_of(model, i, tp) if model.layers[i].kind == LINEAR else 0
            rows.append((0, 0, state))
            continue
        if cache.window and (model.model_type in V2_FAMILIES or minimax.is_m3(model)):
            n = v2_window_blocks(tokens, cache.window, tokens_per_block)
        else:
            n = cdiv(min(tokens, cache.window) if cache.window else tokens, tokens_per_block)
        blocks[cache.window] = n
        slots = batch * n * tokens_per_block
        rows.append((slots * cache.k_bytes, slots * cache.v_bytes, 0))
    return rows, blocks


def _dsv4(model: Model, indexer_k_dtype) -> bool:
    """DeepSeek-V4 takes dsv4's rules; indexer_k_dtype is its option alone."""
    if dsv4.is_dsv4(model):
        return True
    if indexer_k_dtype is not None:
        raise ValueError(f"indexer_k_dtype={indexer_k_dtype!r}: TensorRT-LLM's DeepSeek-V4 indexer option; "
                         f"{model.name} ({model.model_type}) has no DeepSeek-V4 indexer")
    return False


def _draft_caches(model: Model, draft, kv_dtype, tp: int, pp: int) -> tuple[list[_LayerCache], Fraction, str]:
    """A speculative draft's KV cache (draft.py): its layers' caches on one rank (whole sequences), the per-token cost
    TensorRT-LLM sizes it with (rule 2 of its layers), and what it is. "mtp": num_nextn_predict_layers layers of the
    target's own attention -- the draft manager takes the target's config and get_num_spec_layers layers
    (trtllm@065ff9e9 tensorrt_llm/_torch/pyexecutor/_util.py#L1388-L1413); a Model: its own layers and dtype."""
    draft = spec_draft.read_draft(draft)
    if pp > 1:
        # trtllm@065ff9e9 tensorrt_llm/_torch/pyexecutor/_util.py#L763-L769: EAGLE3/MTP draft layers on the last rank
        raise ValueError(f"draft with pp={pp}: TensorRT-LLM keeps the draft's layers on the last pipeline rank only "
                         "(_util.py _get_kv_size_per_token); kvmem sizes the draft on one pipeline stage (pp=1)")
    target = model if draft == "mtp" else draft
    for m in {model.name: model, target.name: target}.values():
        if (dsv4.is_dsv4(m) or m.model_type in V2_FAMILIES or minimax.is_m3(m)
                or any(layer.kind == LINEAR for layer in m.layers)):
            raise ValueError(f"draft with {m.name}: its cache is a KVCacheManagerV2 or recurrent-state layout whose "
                             "draft split kvmem has not modelled (draft.py covers one-pool KVCacheManager targets)")
    check_model(target)
    k_dtype = _kv_dtype(target, kv_dtype)
    caches = _layers(target, k_dtype, tp, [0] * target.num_layers)
    static = Fraction(_static_bytes_per_token(target, k_dtype, tp, 1))
    if draft != "mtp":
        return [c for c in caches if c], static, f"the draft {target.name}"
    n = model.mtp_layers
    if not n:
        raise ValueError(f"draft='mtp' needs MTP layers, but {model.name} has none (num_nextn_predict_layers)")
    shapes = {(layer.kind, layer.kv_heads, layer.head_dim_k, layer.kv_lora_rank, layer.qk_rope_head_dim,
               layer.index_head_dim) for layer in model.layers}
    if len(shapes) != 1 or not caches[0]:
        raise ValueError(f"draft='mtp' with {model.name}: its layers are not all alike, so an MTP layer's cache is not "
                         "one of the target's; kvmem sizes MTP drafts of one-kind targets (DeepSeek-V3's MLA, ...)")
    return [caches[0]] * n, static / model.num_layers * n, f"{n} MTP layer{'s' * (n != 1)}"


def _draft_share(model, draft, kv_dtype, tp, pp, kv_memory, static, windowed, blocking, notes):
    """(the target's memory, (draft bytes a token allocated, its per-token cost, its blocks)) of a budget shared with a
    speculative draft (draft.py): a one-window target keeps the whole budget, priced at both costs (blocks None: the
    target's); a windowed one splits the bytes first (draft.split_budget) and the draft holds its share's blocks."""
    draft_caches, draft_static, what = _draft_caches(model, draft, kv_dtype, tp, pp)
    draft_real = sum(c.k_bytes + c.v_bytes for c in draft_caches)
    if not windowed:
        notes.append(f"speculative decoding: {what}, in a KV cache manager of their own (a draft model, or "
                     f"use_separate_draft_kv_cache), price a token at {float(draft_static):,.0f} B more; both "
                     f"managers hold max_tokens = {kv_memory:,} // {float(static + draft_static):,.0f}")
        return kv_memory, (draft_real, draft_static, None)
    target_bytes, draft_bytes = spec_draft.split_budget(kv_memory, spec_draft.CacheCost(int(static)),
                                                        spec_draft.CacheCost(int(draft_static)))
    notes.append(f"speculative decoding: {what} take {draft_bytes:,} B of the {kv_memory:,} B budget (TensorRT-LLM's "
                 f"target/draft split of max_gpu_total_bytes); the target's windows share {target_bytes:,} B")
    blocks = _to_blocks(int(draft_bytes // draft_static), *blocking)
    return target_bytes, (draft_real, draft_static, blocks)


@dataclass(frozen=True)
class TrtllmDetails(Record):
    """Estimate.details: blocks per attention window (0 = the whole sequence), bytes per token."""

    tokens_per_block: int
    blocks_per_sequence: dict    # window -> blocks one sequence holds
    blocks_by_window: dict       # window -> blocks the batch holds (key "blocks")
    bytes_per_token: int         # rule 1, as allocated
    bytes_per_token_estimate: Fraction   # rule 2, what the pool is sized with
    windows: list

    KEYS = {"tokens_per_block": "tokens_per_block", "blocks_per_sequence": "blocks_per_sequence",
            "blocks": "blocks_by_window", "bytes_per_token": "bytes_per_token",
            "bytes_per_token_estimate": "bytes_per_token_estimate", "windows": "windows"}


def estimate(model: Model, *, tokens: int, batch: int, kv_dtype, tp: int, pp: int, tokens_per_block: int,
             max_attention_window, block_rounding, indexer_k_dtype=None, draft=None) -> Estimate:
    """Bytes TRT-LLM's block pools hold for ``batch`` sequences of ``tokens`` (rule 5): every layer holds
    whole blocks per sequence (rule 4) of rule-1 bytes; Mamba/linear state is batch x the per-sequence
    state in the model dtype (MambaHybridCacheManager; its dtype option was not verified), Kimi-K3's KDA
    state its whole conv window in the model dtype and its recurrent state in fp32 (config_utils.py
    extract_mamba_kv_cache_params; models.state_bytes_of). ``details`` keys block counts by window, 0
    standing for the whole sequence."""
    _check(tokens_per_block, max_attention_window, block_rounding)
    check_model(model)
    k_dtype = _kv_dtype(model, kv_dtype)
    if _dsv4(model, indexer_k_dtype):
        if draft is not None:
            _draft_caches(model, draft, kv_dtype, tp, pp)      # refuses: V4's draft layers are not modelled
        return dsv4.estimate(model, tokens=tokens, batch=batch, k_dtype_name=k_dtype.name, tp=tp, pp=pp,
                             tokens_per_block=tokens_per_block, indexer_k_dtype=indexer_k_dtype,
                             max_attention_window=max_attention_window, stages=pp_layers(model.num_layers, pp),
                             details_cls=TrtllmDetails)
    v2 = model.model_type in V2_FAMILIES
    if v2:
        check_v2(k_dtype.name, pp)
    if minimax.is_m3(model) and k_dtype.name == "nvfp4":
        raise ValueError("kv_dtype nvfp4: KVCacheManagerV2 adds per-layer block-scale buffers (Role.KEY_BLOCK_SCALE) "
                         "whose size kvmem has not read for MiniMax-M3; pass bf16/fp16 or fp8")
    windows = _windows(model, max_attention_window, None)
    caches = _layers(model, k_dtype, tp, windows)
    rows, blocks = _stage_rows(model, caches, tp, tokens, batch, tokens_per_block)
    stages = pp_layers(model.num_layers, pp)
    largest = largest_stage(rows, stages)
    real = sum(c.k_bytes + c.v_bytes for i in largest if (c := caches[i]))
    if draft is not None:
        # the draft's manager holds the same sequences in its own blocks (whole sequences: draft.py)
        draft_caches, _, what = _draft_caches(model, draft, kv_dtype, tp, pp)
        slots = batch * cdiv(tokens, tokens_per_block) * tokens_per_block
        rows = rows + [(slots * c.k_bytes, slots * c.v_bytes, 0) for c in draft_caches]
        stages = [range(len(rows))]
    static = _static_bytes_per_token(model, k_dtype, tp, pp)
    notes = dsa_notes(model)
    if draft is not None:
        draft_bytes = sum(c.k_bytes + c.v_bytes for c in draft_caches)
        notes.append(f"speculative decoding: {what} keep {draft_bytes:,} B a token in the draft's KV cache manager, "
                     "for the same sequences (the last rows of per_layer)")
    if blocks and max(blocks.values()) * tokens_per_block != tokens:
        notes.append(f"each sequence takes whole {tokens_per_block}-token blocks: {tokens:,} -> "
                     f"{max(blocks.values()) * tokens_per_block:,} tokens")
    if any(layer.kind == LINEAR for layer in model.layers):
        # trtllm@28295084 tensorrt_llm/_torch/pyexecutor/kv_cache/mamba_cache_manager/common.py#L608-L618
        # _get_mamba_hybrid_pool_size: max_batch_size + 1 slots, + 1 more under attention DP
        notes.append("TRT-LLM's MixedMambaHybridCacheManager preallocates the recurrent states for max_batch_size + 1 "
                     "sequences (+1 more with attention DP), whatever the batch; kvmem counts the batch's")
    windowed = sum(layer.kind != MLA and layer.window > 0 for layer in model.layers)
    if minimax.is_m3(model):
        sparse = minimax.sparse_layers(model)
        notes.append(f"TensorRT-LLM serves MiniMax-M3 with MiniMaxM3KVCacheManagerV2 (KVCacheManagerV2; the sparse "
                     "attention config selects it): K and V on every layer and a one-head index key of "
                     f"{minimax.INDEX_DIM} ({minimax.index_row_bytes(k_dtype.name)} B a token) on layers "
                     f"{sparse.start}..{sparse.stop - 1}, in the same blocks; the per-token cost it sizes its quota "
                     "with counts K and V only")
    if v2:
        notes.append("TensorRT-LLM lays Gemma 4 out with KVCacheManagerV2 (per-layer head_dim and KV heads); its "
                     "KV-shared layers keep their own (unused) K/V buffers; a sliding layer frees the blocks that "
                     "leave its window")
    elif windowed and max_attention_window is None:
        notes.append(f"{windowed} sliding/chunked layers are cached at full length: TRT-LLM applies windows "
                     "only when max_attention_window is set")
    if any(layer.kind.per_head and tp > layer.kv_heads for layer in model.layers):
        notes.append(f"tp={tp} exceeds the KV heads: each rank holds ceil(kv_heads / tp) = 1 head")
    if static != real and static and not minimax.is_m3(model):
        notes.append(f"TRT-LLM sizes its pool with {float(static):,.0f} B/token but allocates {real:,} B/token "
                     "on this rank")
    details = TrtllmDetails(tokens_per_block=tokens_per_block, blocks_per_sequence=dict(sorted(blocks.items())),
                            blocks_by_window={w: batch * n for w, n in sorted(blocks.items())},
                            bytes_per_token=real, bytes_per_token_estimate=static, windows=sorted(set(windows)))
    return assemble(model, "trtllm", tokens=tokens, batch=batch, kv_dtype=k_dtype.name, tp=tp, pp=pp, rows=rows,
                    notes=notes, details=details, stages=stages, block_size=tokens_per_block)


@dataclass(frozen=True)
class TrtllmCapacityDetails(Record):
    """Capacity.details: the pools a budget makes, per attention window (0 = the whole sequence)."""

    tokens_per_block: int
    bytes_per_token_estimate: Fraction   # rule 2, what the pool is sized with
    bytes_per_token: int                 # rule 1, as allocated
    max_tokens: dict                     # window -> tokens its pool holds
    blocks_per_window: dict
    allocated_tokens: int
    allocated_bytes: int
    block_rounding: str
    max_blocks_per_sequence: int | None = None   # a key only with max_model_len
    draft_bytes_per_token: int | None = None     # a key only with a speculative draft (its manager, allocated)

    OPTIONAL = ("max_blocks_per_sequence", "draft_bytes_per_token")


def _to_blocks(max_tokens: int, tokens_per_block: int, rounding: str) -> int:
    return cdiv(max_tokens, tokens_per_block) if rounding == "ceil" else max_tokens // tokens_per_block


def _vswa_pools(by_window: dict, kv_memory: int, max_model_len, block_rounding: str) -> dict:
    """Tokens each window's pool holds (rule 4). At the pinned main (block_rounding "floor") every window gets an
    equal share of the memory and max_tokens is ignored (trtllm@001541ba
    tensorrt_llm/_torch/pyexecutor/resource_manager.py#L1336-L1353, #L1364-L1373); when one sequence at every window
    does not fit, TRT-LLM first shrinks the windows (#L1141-L1257, adjust_window_sizes_for_vswa), which kvmem refuses.
    TRT-LLM divides in float64, kvmem exactly. The older C++ calculateMaxNumBlocks ("ceil") shares the memory by
    window x bytes per token (calculateWindowSizeToShare)."""
    window = {w: (w or max_model_len) for w in by_window}
    if block_rounding == "ceil":
        weight = {w: window[w] * b for w, b in by_window.items()}
        total = sum(weight.values())
        return {w: kv_memory * weight[w] // total // by_window[w] for w in by_window}
    # window sizes clamped to max_seq_len (#L283-L295): a full layer's window is max_model_len
    need = sum(min(window[w], max_model_len or window[w]) * b for w, b in by_window.items())
    if need >= kv_memory:
        raise ValueError(f"capacity: one sequence at every attention window needs {need:,} B of the {kv_memory:,} B "
                         "given; unless it needs less, TensorRT-LLM shrinks the windows to fit "
                         "(adjust_window_sizes_for_vswa), which kvmem does not model")
    return {w: kv_memory // len(by_window) // b for w, b in by_window.items()}


def capacity(model: Model, *, kv_memory: int, kv_dtype, tp: int, pp: int, max_model_len: int | None,
             tokens_per_block: int, max_attention_window, block_rounding, indexer_k_dtype=None,
             draft=None) -> Capacity:
    """max_tokens, blocks and the allocation a KV budget gives (rules 3 and 4).

    ``kv_memory`` is the memory TRT-LLM gives the cache on one rank: the PyTorch backend prints it as
    "available KV cache memory when calculating max tokens" = (device total - profiling peak + temporary
    KV) x free_gpu_memory_fraction (0.9); the older C++ runtime as "available" x free_gpu_memory_fraction.
    max_tokens = kv_memory // bytes_per_token (rule 2; "kv size is N" prints the divisor), blocks =
    max_tokens // tokens_per_block (block_rounding="floor", the pinned main: DEFAULTS cites the lines); "ceil"
    reproduces the logged releases, whose C++ calculateMaxNumBlocks (0.5 to 0.13 engines) and 1.1.0rc3's
    Python calculate_max_num_blocks round up (0.13's 631 blocks, 1.1.0rc3's 2,710). Allocated: blocks
    x tokens_per_block tokens x rule-1 bytes ("[MemUsageChange] Allocated X GiB for max tokens in paged KV
    cache (N)"). The longest request that fits is blocks x tokens_per_block ("Attention window size W
    exceeds upper bound U for available blocks"). With several distinct windows (VSWA) each window has its
    own pool (_vswa_pools: equal shares at the pinned main, window x bytes shares in the C++ path of the
    releases that round up), rounded to blocks as above; which memory the PyTorch backend hands to this split
    was not verified (kvmem gives it kv_memory)."""
    _check(tokens_per_block, max_attention_window, block_rounding)
    check_model(model)
    k_dtype = _kv_dtype(model, kv_dtype)
    if _dsv4(model, indexer_k_dtype):
        dsv4.refuse_capacity()
    if minimax.is_m3(model):
        # trtllm@065ff9e9 tensorrt_llm/_torch/pyexecutor/_util.py#L1244-L1246 (V2 ignores max_tokens), #L1287-L1288
        # (its budget is max_gpu_total_bytes), as for Gemma 4 below
        raise ValueError("capacity: TensorRT-LLM hands MiniMax-M3's KV budget to MiniMaxM3KVCacheManagerV2 "
                         "(KVCacheManagerV2) as one byte quota (max_gpu_total_bytes) that its runtime storage manager "
                         "turns into pools of K/V and index-key pages; kvmem sizes what a workload holds (estimate), "
                         "not how many tokens a quota holds")
    if model.model_type in V2_FAMILIES:
        # trtllm@065ff9e9 tensorrt_llm/_torch/pyexecutor/_util.py#L1236-L1288 configure_kv_cache_capacity: V2 gets the
        # budget as max_gpu_total_bytes only;
        # KVCacheManagerV2.__init__ makes it GpuCacheTierConfig(quota=...), the quota max_tokens' bytes or
        # max_gpu_total_bytes, the smaller
        # (trtllm@001541ba tensorrt_llm/_torch/pyexecutor/resource_manager.py#L1619-L1644; the class later moved to
        # pyexecutor/kv_cache_manager_v2.py);
        # trtllm@00f6bd61 tensorrt_llm/runtime/kv_cache_manager_v2/_storage_manager.py#L206-L276 StorageManager splits
        # the quota between pool groups (one per window life cycle) by a ratio from the typical batch, else one
        # 2,049-token request (#L243-L259), rounds pools to 2-32 MiB granules (#L116-L127), and resizes the groups
        # while serving (shrink_pool_group)
        raise ValueError("capacity: TensorRT-LLM hands Gemma 4's KV budget to KVCacheManagerV2 as one byte quota that "
                         "its runtime splits between the sliding and full pool groups and resizes while serving "
                         "(runtime/kv_cache_manager_v2/_storage_manager.py StorageManager); kvmem sizes what a "
                         "workload holds (estimate), not how many tokens a quota holds")
    windows = _windows(model, max_attention_window, max_model_len)
    caches = _layers(model, k_dtype, tp, windows)
    stage = pp_layers(model.num_layers, pp)[0]
    by_window: dict[int, int] = {}
    for i in stage:
        if (c := caches[i]) is not None:
            by_window[c.window] = by_window.get(c.window, 0) + c.k_bytes + c.v_bytes
    if not by_window:
        raise ValueError(f"{model.name} has no attention layer for TensorRT-LLM's KV cache")
    notes = dsa_notes(model)
    static = _static_bytes_per_token(model, k_dtype, tp, pp)
    if not static:
        raise ValueError(f"tp={tp}: {model.name} has no KV bytes per token left on a rank (more ranks than KV "
                         "heads to split); TensorRT-LLM needs tp <= the model's KV heads")
    draft_pool = None
    if draft is not None:
        kv_memory, draft_pool = _draft_share(model, draft, kv_dtype, tp, pp, kv_memory, static, len(by_window) > 1,
                                             (tokens_per_block, block_rounding), notes)
    if len(by_window) == 1:
        window, real = next(iter(by_window.items()))
        # with a draft, trtllm@065ff9e9 tensorrt_llm/_torch/pyexecutor/_util.py#L714-L770 (the per-token cost of target
        # and draft managers together), #L1269-L1271 (max_tokens = budget // that cost; both managers: #L1937-L1938)
        pools = {window: int(kv_memory // (static + (draft_pool[1] if draft_pool else 0)))}
        if static != real:
            notes.append(f"max_tokens uses TRT-LLM's estimate of {float(static):,.0f} B/token; the blocks "
                         f"then take {real:,} B/token on this rank")
    else:
        if 0 in by_window and not max_model_len:
            raise ValueError("max_model_len is needed to share memory between attention windows "
                             "(TRT-LLM's full-attention window is max_seq_len)")
        pools = _vswa_pools(by_window, kv_memory, max_model_len, block_rounding)
        if block_rounding == "ceil":
            notes.append("variable windows: each window has its own pool, sized by window x bytes per token "
                         "(the C++ calculateWindowSizeToShare of the releases that round blocks up); the memory "
                         "given to the split is not verified")
        else:
            notes.append("variable windows: each window has its own pool, an equal share of the memory "
                         "(calculate_max_num_blocks_for_vswa; TRTLLM_WINDOW_SIZE_SHARES, which changes the shares, "
                         "is not read); max_tokens does not cap them")
    blocks = {w: _to_blocks(t, tokens_per_block, block_rounding) for w, t in pools.items()}
    allocated = sum(blocks[w] * tokens_per_block * by_window[w] for w in blocks)
    if draft_pool is not None:
        draft_real, _, draft_blocks = draft_pool
        draft_blocks = max(blocks.values()) if draft_blocks is None else draft_blocks
        allocated += draft_blocks * tokens_per_block * draft_real
    main = 0 if 0 in blocks else max(blocks)
    longest_fit = blocks[main] * tokens_per_block
    concurrency = None
    if max_model_len:
        need = {w: cdiv(min(max_model_len, w) if w else max_model_len, tokens_per_block) for w in blocks}
        concurrency = min(blocks[w] / need[w] for w in blocks)
    details = TrtllmCapacityDetails(
        tokens_per_block=tokens_per_block, bytes_per_token_estimate=static, bytes_per_token=sum(by_window.values()),
        max_tokens=pools, blocks_per_window=blocks, allocated_tokens=blocks[main] * tokens_per_block,
        allocated_bytes=allocated, block_rounding=block_rounding,
        max_blocks_per_sequence=cdiv(max_model_len, tokens_per_block) if max_model_len else None,
        draft_bytes_per_token=draft_pool[0] if draft_pool else None)
    return Capacity(model=model.name, engine="trtllm", kv_memory=kv_memory, blocks=blocks[main],
                    tokens=pools[main], max_concurrency=concurrency, longest_request_tokens=longest_fit,
                    block_size=tokens_per_block, notes=tuple(notes), details=details, k_dtype=k_dtype.name,
                    v_dtype=k_dtype.name)

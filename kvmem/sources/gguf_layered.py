"""GGUF metadata -> config.json fields for the llama.cpp 0c1e57098 architectures whose attention shape differs per
layer (split from kvmem/sources/gguf_more.py for length), each read as src/models/<arch>.cpp load_arch_hparams
and the shared loader read it, as the Hugging Face config fields kvmem.configs reads:

    deci      Nemotron-NAS / DeciLM (conversion/deci.py): per-layer head_count, head_count_kv and
              feed_forward_length as block_configs (no-op and linear-replaced attention where head_count_kv is 0)
    step35    Step-3.5 / 3.7 (conversion/step3.py Step35Model): query and K/V heads per layer, one count for the
              full layers and one for the sliding ones (attention_other_setting)
    mimo2     MiMo-V2-Flash / V2.5 (conversion/mimo.py MimoV2Model): K/V heads per layer, the sliding layers' as
              swa_num_key_value_heads, the pattern as hybrid_layer_pattern
    minimax-m3  MiniMax-M3 (conversion/minimax.py MiniMaxM3Model): the sparse (MSA) layers, with their indexer,
              from leading_dense_block_count on, as moe_layer_freq and sparse_attention_config
    hy_v4     HY-V4 (conversion/hy_v4.py HYV4Model, on DeepseekV2Model): MLA (gguf_config's deepseek2 keys) and
              the DSA indexer on the layers attention.indexer.types marks "full"
    deepseek2-ocr  DeepSeek-OCR / OCR-2 / Unlimited-OCR's language model (conversion/deepseek.py DeepseekV2Model,
              is_ocr): DeepSeek-V2's MoE without MLA, heads of embedding_length / head_count, the window unread
    hrm_text  HRM-Text (conversion/hrm_text.py): block_count the cache slots, layers_per_stack x h_cycles x
              (l_cycles + 1), each caching whole (HrmTextConfig's num_hidden_layers)
"""

from __future__ import annotations

from . import SourceError

__all__ = ["LAYERED_MODEL_TYPES", "PER_LAYER_HEADS", "PER_LAYER_KV", "layered_fields", "layer_array"]

# llama.cpp arch (src/llama-arch.cpp LLM_ARCH_NAMES) -> the model_type kvmem.configs reads
LAYERED_MODEL_TYPES = {"deci": "nemotron-nas", "step35": "step3p5", "mimo2": "mimo_v2_flash",
                       "minimax-m3": "minimax_m3", "hy_v4": "hy_v4",
                       "deepseek2-ocr": "deepseek_ocr2_text", "hrm_text": "hrm_text"}
# architectures whose head_count / head_count_kv gguf_config takes per layer (the widest as the model's count; the
# per-layer shapes are set here)
PER_LAYER_HEADS = ("laguna", "deci", "step35")
PER_LAYER_KV = ("deci", "step35", "mimo2")


# The per-layer keys llama.cpp reads with get_key_or_arr(key, arr, n): one number for every layer, or an array of
# exactly n entries, else it refuses the file, "key %s has wrong array length; expected %u, got %u"
# (llama.cpp@0c1e57098 src/llama-model-loader.cpp#L459-L479). n is n_layer_all, block_count with the MTP layers:
_ALL_LAYERS = {"feed_forward_length": "src/llama-model.cpp#L1395", "attention.head_count": "src/llama-model.cpp#L1396",
               "attention.head_count_kv": "src/llama-model.cpp#L1404",
               "expert_used_count": "src/llama-model.cpp#L1333",
               "expert_feed_forward_length": "src/models/<arch>.cpp, e.g. step35.cpp#L12, mimo2.cpp#L8",
               "attention.recurrent_layers": "src/models/qwen3next.cpp#L17, qwen35.cpp#L17, qwen35moe.cpp#L20, "
                                             "minimax-01.cpp#L12"}
# ... or n_layer(), block_count less nextn_predict_layers (src/llama-hparams.cpp#L348-L350), for these arches only
# (dots3note.cpp#L40 reads its indexer types with get_arr, which takes any length)
_TRUNK_LAYERS = {("glm-dsa", "attention.indexer.types"): "src/models/glm-dsa.cpp#L66",
                 ("hy_v4", "attention.indexer.types"): "src/models/hy-v4.cpp#L59"}


def layer_array(arch: str, name: str, value, n_layers: int, trunk: int):
    """``value`` of GGUF key ``<arch>.<name>``, refused as llama.cpp refuses it where it is a per-layer array of
    another length than the loader reads."""
    if not isinstance(value, list):
        return value
    source, n, what = _ALL_LAYERS.get(name), n_layers, "block_count"
    if (arch, name) in _TRUNK_LAYERS:
        source, n, what = _TRUNK_LAYERS[arch, name], trunk, "block_count less nextn_predict_layers"
    if source is not None and len(value) != n:
        full = f"{arch}.{name}"
        raise SourceError(f"GGUF {full} has {len(value)} entries, one per layer, and {what} is {n}: llama.cpp "
                          f"0c1e57098 refuses the file (\"key {full} has wrong array length; expected {n}, got "
                          f"{len(value)}\", src/llama-model-loader.cpp#L476-L479 get_key_or_arr, read by {source})")
    return value


def _per_layer(value, trunk: int) -> list:
    return list(value[:trunk]) if isinstance(value, list) else [value] * trunk


def layered_fields(arch: str, cfg: dict, key, trunk: int) -> None:
    """Add the fields of ``arch`` (one of LAYERED_MODEL_TYPES) to ``cfg``."""
    if arch == "deci":
        _deci(cfg, key, trunk)
    elif arch == "step35":
        _step35(cfg, key, trunk)
    elif arch == "mimo2":
        _mimo2(cfg, key, trunk)
    elif arch == "minimax-m3":
        _minimax_m3(cfg, key, trunk)
    elif arch == "hy_v4":
        _hy_v4(cfg, key, trunk)
    elif arch == "deepseek2-ocr":
        _deepseek2_ocr(cfg, key, trunk)
    elif arch == "hrm_text":
        _hrm_text(cfg, key, trunk)


def _deci(cfg: dict, key, trunk: int) -> None:
    """DeciLM / Nemotron-NAS as configuration_decilm.py's block_configs. conversion/deci.py DeciModel L35-L80,
    L97-L125 writes per layer: head_count_kv = num_attention_heads // n_heads_in_group and head_count
    num_attention_heads for an attention block; 0 and num_attention_heads where it is replace_with_linear; 0 and 0
    for a no-op one; feed_forward_length the FFN's width (0: no FFN). DeciLM-7B writes head_count once and
    head_count_kv per layer (num_key_value_heads_per_layer). src/models/deci.cpp#L36-L46 builds attention where
    n_head_kv > 0, a linear map where n_head_kv == 0 < n_head, nothing where both are 0; the KV cache gives every
    layer its K and V tensors (0 wide where n_head_kv is 0: kvmem.engines.llamacpp.families.ZERO_WIDTH_LAYERS)."""
    heads = _per_layer(key("attention.head_count"), trunk)
    kv = _per_layer(key("attention.head_count_kv"), trunk)
    ffn = _per_layer(key("feed_forward_length"), trunk)
    blocks = []
    for i, (h, k, f) in enumerate(zip(heads, kv, ffn, strict=True)):
        if k and (not h or h % k):
            raise SourceError(f"GGUF deci.attention.head_count_kv[{i}] is {k}, which does not divide head_count[{i}] "
                              f"({h}): Nemotron-NAS groups num_attention_heads // n_heads_in_group query heads per "
                              "K/V head")
        if k:
            attention = {"n_heads_in_group": h // k, "no_op": False, "replace_with_linear": False}
        else:
            attention = {"n_heads_in_group": None, "no_op": not h, "replace_with_linear": bool(h)}
        blocks.append({"attention": attention,
                       "ffn": {"intermediate_size": f, "no_op": False} if f else {"no_op": True}})
    cfg["block_configs"] = blocks
    cfg.pop("intermediate_size", None)      # the blocks' own widths; the model has none (Nemotron-Super: null)
    cfg["head_dim"] = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]


def _one(values: list, what: str, source: str = "conversion/step3.py L146-L179") -> int:
    if len(set(values)) > 1:
        raise SourceError(f"GGUF {what} differs across the {len(values)} layers of one kind "
                          f"({sorted(set(values))}); {source} writes one count for the full layers and one for the "
                          "sliding ones, as the config has them")
    return values[0]


def _step35(cfg: dict, key, trunk: int) -> None:
    """Step-3.5: conversion/step3.py Step35Model L134-L226 writes head_count / head_count_kv per layer (the config's
    num_attention_heads / num_attention_groups on full layers, attention_other_setting's on sliding ones), the
    window and its pattern, the MoE widths and the leading dense blocks; step35.cpp#L3-L30 reads them (swa_type
    STANDARD, the window and pattern required). kvmem's step3p5 keeps one K/V count in every layer
    (configs/layers.py; vllm@v0.33.0 step3p5.py#L443 num_attention_groups): a file whose sliding layers keep
    another is refused."""
    heads = _per_layer(key("attention.head_count"), trunk)
    kv = _per_layer(key("attention.head_count_kv"), trunk)
    sliding = [t == "sliding_attention" for t in cfg.get("layer_types", ["full_attention"] * trunk)]
    full = [i for i in range(trunk) if not sliding[i]] or list(range(trunk))
    swa = [i for i in range(trunk) if sliding[i]]
    n_head, n_kv = _one([heads[i] for i in full], "step35.attention.head_count"), _one(
        [kv[i] for i in full], "step35.attention.head_count_kv")
    cfg.update(num_attention_heads=n_head, num_attention_groups=n_kv, num_key_value_heads=n_kv,
               share_expert_dim=key("expert_shared_feed_forward_length", 0),
               first_k_dense_replace=key("leading_dense_block_count", 0))
    if swa:
        swa_head = _one([heads[i] for i in swa], "step35.attention.head_count")
        swa_kv = _one([kv[i] for i in swa], "step35.attention.head_count_kv")
        if swa_kv != n_kv:
            raise SourceError(f"GGUF step35 keeps {swa_kv} K/V heads in its sliding layers and {n_kv} in its full "
                              "ones; kvmem reads Step-3.5's K/V heads as one count in every layer (model_type "
                              "step3p5: num_attention_groups, vllm@v0.33.0 step3p5.py#L443)")
        cfg["attention_other_setting"] = {"num_attention_heads": swa_head, "num_attention_groups": swa_kv}
    if cfg.get("num_experts"):
        cfg["n_shared_experts"] = 1 if cfg["share_expert_dim"] else 0


def _mimo2(cfg: dict, key, trunk: int) -> None:
    """MiMo-V2: conversion/mimo.py MimoV2Model L143-L175 writes head_count_kv per layer (swa_num_key_value_heads
    where hybrid_layer_pattern is 1, num_key_value_heads where 0), the window and that pattern (both required by
    mimo2.cpp#L3-L12, swa_type STANDARD), key_length head_dim and value_length v_head_dim; the sliding layers'
    query heads and head dims equal the full ones' (it asserts so, L146-L148): configuration_mimo_v2_flash.py's
    swa_* fields."""
    kv = _per_layer(key("attention.head_count_kv"), trunk)
    sliding = [t == "sliding_attention" for t in cfg.pop("layer_types", ["full_attention"] * trunk)]
    source = "conversion/mimo.py L151-L157"
    full = _one([kv[i] for i in range(trunk) if not sliding[i]] or [kv[0]], "mimo2.attention.head_count_kv", source)
    swa = _one([kv[i] for i in range(trunk) if sliding[i]] or [full], "mimo2.attention.head_count_kv", source)
    head, v_head = cfg["head_dim"], cfg.get("v_head_dim", cfg["head_dim"])
    cfg.update(num_key_value_heads=full, swa_num_key_value_heads=swa, swa_num_attention_heads=cfg[
        "num_attention_heads"], swa_head_dim=head, v_head_dim=v_head, swa_v_head_dim=v_head,
        hybrid_layer_pattern=[int(s) for s in sliding])


def _minimax_m3(cfg: dict, key, trunk: int) -> None:
    """MiniMax-M3: conversion/minimax.py MiniMaxM3Model L177-L198 (over MiniMaxM2Model L128-L132) writes the
    indexer's heads, key length, top-k, block size and local blocks from sparse_attention_config, the leading dense
    blocks (moe_layer_freq's leading zeros), the shared experts, feed_forward_length the dense MLP
    (dense_intermediate_size, conversion/base.py L1445) and expert_feed_forward_length intermediate_size;
    minimax-m3.cpp#L13-L33 reads them all (required). llama.cpp keeps the indexer cache on the layers from
    n_layer_dense_lead on (src/llama-model.cpp#L2375-L2395): those are the sparse ones read back."""
    lead = key("leading_dense_block_count", 0)
    if lead > trunk:
        raise SourceError(f"GGUF minimax-m3.leading_dense_block_count is {lead}, past block_count ({trunk})")
    sparse = [0] * lead + [1] * (trunk - lead)
    moe, shared = key("expert_feed_forward_length"), key("expert_shared_count")
    cfg.update(moe_layer_freq=sparse, first_k_dense_replace=lead, n_shared_experts=shared,
               dense_intermediate_size=cfg.pop("intermediate_size", None), intermediate_size=moe,
               moe_intermediate_size=moe, shared_intermediate_size=moe * shared,     # minimax-m3.cpp L80-L82
               rotary_dim=key("rope.dimension_count"),
               sparse_attention_config={"use_sparse_attention": True, "sparse_attention_freq": sparse,
                                        "sparse_num_index_heads": key("attention.indexer.head_count"),
                                        "sparse_index_dim": key("attention.indexer.key_length"),
                                        "sparse_topk_blocks": key("attention.indexer.top_k"),
                                        "sparse_block_size": key("attention.indexer.block_size"),
                                        "sparse_local_block": key("attention.indexer.local_blocks")})


def _hy_v4(cfg: dict, key, trunk: int) -> None:
    """HY-V4: conversion/hy_v4.py L102-L175 writes DeepseekV2Model's MLA keys, sigmoid gating, the hyper-connection
    keys and, where the checkpoint has DSA layers, the indexer's heads, key length, top-k and per-layer types (True:
    the layer owns an indexer, "full"; False: it reuses the previous one's top-k, "shared"). hy-v4.cpp#L24-L66
    reads them: an indexer only with top_k > 0, then layer 0 must own one and the key be longer than the rope
    (llama.cpp refuses the file otherwise); llama-model.cpp#L2494-L2535 caches the indexer key on the full layers."""
    cfg["hc_mult"] = key("hyper_connection.count")
    top_k = key("attention.indexer.top_k", 0)
    if not top_k:
        cfg["index_topk"] = None        # no indexer (HYV4Config's own default would give one: configs/shapes.py)
        return
    heads, width = key("attention.indexer.head_count", 0), key("attention.indexer.key_length", 0)
    full = [bool(t) for t in _per_layer(key("attention.indexer.types", 0), trunk)]
    if not heads or width <= cfg["qk_rope_head_dim"]:
        raise SourceError(f"GGUF hy_v4.attention.indexer.head_count is {heads} and key_length {width} (rope "
                          f"{cfg['qk_rope_head_dim']}): llama.cpp 0c1e57098 refuses it (\"hy_v4: bad indexer head "
                          "count / key length\", src/models/hy-v4.cpp#L54-L57)")
    if not full[0]:
        raise SourceError("GGUF hy_v4.attention.indexer.types does not give layer 0 an indexer: llama.cpp 0c1e57098 "
                          "refuses it (\"layer 0 must own an indexer\", src/models/hy-v4.cpp#L59-L62)")
    cfg.update(index_topk=top_k, index_n_heads=heads, index_head_dim=width,
               indexer_types=["full" if f else "shared" for f in full])


def _deepseek2_ocr(cfg: dict, key, trunk: int) -> None:
    """DeepSeek-OCR's decoder: conversion/deepseek.py DeepseekV2Model L319-L383 with is_ocr writes the base keys
    (head_count_kv num_key_value_heads; no MLA keys), the leading dense blocks, expert_feed_forward_length, the
    shared experts and a sliding window "for metadata, the decoder ignores it (full MHA)" (L376-L380):
    deepseek2ocr.cpp#L3-L21 reads no window and src/llama-model.cpp's loader none for it, so every layer is cached
    whole. configuration_deepseek_ocr2.py's text model (deepseek_ocr2_text) takes head_dim = hidden / heads
    (L246), as llama.cpp does without attention.key_length."""
    head = cfg["hidden_size"] // cfg["num_attention_heads"]
    for name in ("head_dim", "v_head_dim"):
        if cfg.get(name, head) != head:
            raise SourceError(f"GGUF deepseek2-ocr.attention.key_length / value_length is {cfg[name]}, not "
                              f"embedding_length / head_count ({head}): deepseek_ocr2_text's config takes its head "
                              "as hidden_size / num_attention_heads (configuration_deepseek_ocr2.py#L246)")
    for name in ("sliding_window", "layer_types", "head_dim", "v_head_dim"):
        cfg.pop(name, None)
    lead = key("leading_dense_block_count", 0)
    cfg.update(first_k_dense_replace=lead, n_shared_experts=key("expert_shared_count", 0),
               mlp_layer_types=["dense" if i < lead or not cfg.get("n_routed_experts") else "sparse"
                                for i in range(trunk)])


def _hrm_text(cfg: dict, key, trunk: int) -> None:
    """HRM-Text: conversion/hrm_text.py L18-L44 writes block_count as the expanded cache-slot count (the file holds 2 x
    layers_per_stack physical blocks, later passes aliasing them) and hrm.layers_per_stack / h_cycles / l_cycles;
    hrm-text.cpp#L6-L24 requires the three and asserts block_count = per stack x h x (l + 1). Each slot is a cache
    layer, as HrmTextConfig.__post_init__ rewrites num_hidden_layers (configuration_hrm_text.py#L109-L115)."""
    per_stack, h, low = key("hrm.layers_per_stack"), key("hrm.h_cycles"), key("hrm.l_cycles")
    if not per_stack or not h or not low or trunk != per_stack * h * (low + 1):
        raise SourceError(f"GGUF hrm_text.block_count is {trunk}, not hrm.layers_per_stack x h_cycles x (l_cycles + 1) "
                          f"({per_stack} x {h} x ({low} + 1)): llama.cpp 0c1e57098 aborts loading it "
                          "(src/models/hrm-text.cpp#L17-L24)")
    cfg.update(num_layers_per_stack=per_stack, H_cycles=h, L_cycles=low)

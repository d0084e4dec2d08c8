"""The layers vLLM builds for a model: its model files' own shapes where they differ from kvmem's
reading of the config (which follows transformers), the draft's layers, and the checks those files
make (heads divisible by tp, head_dim, sparse-attention indexers)."""

from __future__ import annotations

from dataclasses import replace

from ...configs.fields import Fields
from ...layer import CHUNKED, FULL, LINEAR, MLA, SLIDING, Layer, RecurrentState
from ...model import Model
from ...parallel import divides
from .inkling import INKLING_TYPES, inkling_layers
from .own_configs import OWN_CLASS_LAYERS, minimax_m3_sparse
from .states import config_int

__all__ = ["draft_layers", "check_indexers", "vllm_layers", "check_heads", "HIDDEN_HEAD_DIM_TYPES",
           "MINIMAX_M3_TYPES", "bailing_kda_layers"]


def draft_layers(model: Model, draft) -> tuple[Layer, ...]:
    """The draft's cache-holding layers: a Model's layers, or the model's MTP layers."""
    if draft is None:
        return ()
    if isinstance(draft, Model):
        return draft.layers
    if not model.mtp_layers:
        raise ValueError(f"draft='mtp' needs MTP layers, but {model.name} has none "
                         "(config num_nextn_predict_layers / mtp_num_hidden_layers)")
    # An MTP block is one decoder layer of the target's own attention (DeepSeek MLA, Qwen full).
    attention = [layer for layer in model.layers if layer.kind in (FULL, MLA)]
    if not attention:
        raise ValueError(f"draft='mtp': {model.name} has no full-attention or MLA layer to copy")
    layer = replace(attention[-1], state=None)
    indexed = [other.index_head_dim for other in attention if other.kind == MLA and other.index_head_dim]
    if layer.kind == MLA and indexed and not layer.index_head_dim:
        # an MTP layer always keeps its indexer (vllm@v0.33.0 vllm/model_executor/models/deepseek_v2.py#L1164-L1168)
        layer = replace(layer, index_head_dim=indexed[0])
    return (layer,) * model.mtp_layers


def check_indexers(model: Model, notes: list) -> None:
    """GLM-5: the layers that keep an indexer key as vLLM decides them.

    vllm@v0.33.0 vllm/models/deepseek_v32/attention.py#L166-L177 (and deepseek_v2.py): a layer skips its
    indexer where index_topk_pattern[i] == "S", else (no pattern) where max(i - offset + 1, 0) %
    index_topk_freq != 0 (offset index_skip_topk_offset, default 2; freq default 1); it does not read
    transformers' indexer_types, so a config whose indexer_types disagrees is refused.
    """
    if model.model_type != "glm_moe_dsa":
        return
    cfg = model.config
    pattern = cfg.get("index_topk_pattern")
    freq, offset = cfg.get("index_topk_freq", 1), cfg.get("index_skip_topk_offset", 2)
    ours = [bool(layer.index_head_dim) for layer in model.layers]
    if pattern is not None:
        theirs = [i >= len(pattern) or pattern[i] != "S" for i in range(len(ours))]
    elif isinstance(freq, int) and isinstance(offset, int) and freq > 0:
        theirs = [max(i - offset + 1, 0) % freq == 0 for i in range(len(ours))]
    else:
        raise ValueError(f"index_topk_freq {freq!r} / index_skip_topk_offset {offset!r}: not the integers vLLM "
                         "0.33.0's DSA attention reads")
    if ours != theirs:
        first = next(i for i, (a, b) in enumerate(zip(ours, theirs, strict=True)) if a != b)
        raise ValueError(f"layer {first}: the config's indexer_types say it {'keeps' if ours[first] else 'skips'} "
                         "an indexer key, but vLLM 0.33.0 reads index_topk_pattern / index_topk_freq / "
                         f"index_skip_topk_offset (not indexer_types) and {'keeps' if theirs[first] else 'skips'} it")
    notes.append("GLM-5 on Blackwell (SM10x): vLLM makes kv_cache_dtype 'auto' fp8_e4m3 "
                 "(vllm/model_executor/models/config.py GlmMoeDsaForCausalLM); pass kv_dtype='fp8' for that GPU")


MINIMAX_M3_TYPES = ("minimax_m3", "minimax_m3_text", "minimax_m3_vl_text")


def _check_minimax_m3(model: Model, draft) -> None:
    """MiniMax-M3: vLLM 0.33.0 keeps an index cache on the layers whose
    sparse_attention_config.sparse_attention_freq entry is not 0 (vllm/models/minimax_m3/nvidia/model.py
    #L99-L107 _sparse_attention_layer_ids; no list: none), of sparse_attention_config.sparse_index_dim
    (#L441); kvmem's reading (which also takes transformers' layer_types) must agree, else refused."""
    # the layers read vllm_config.model_config.hf_text_config: the VL shell's text_config
    # (minimax_m3/nvidia/model.py#L694, #L709)
    text = model.config.get("text_config") or model.config
    sparse = minimax_m3_sparse(model, text.get("sparse_attention_config")) or {}
    freq = sparse.get("sparse_attention_freq") if isinstance(sparse, dict) else None
    theirs = [bool(freq and i < len(freq) and freq[i] != 0) for i in range(len(model.layers))]
    ours = [bool(layer.index_head_dim) for layer in model.layers]
    if ours != theirs:
        first = next(i for i, (a, b) in enumerate(zip(ours, theirs, strict=True)) if a != b)
        raise ValueError(f"layer {first}: kvmem's reading {'keeps' if ours[first] else 'has'} "
                         f"{'an' if ours[first] else 'no'} index key there, but vLLM 0.33.0 decides the sparse "
                         "layers by sparse_attention_config.sparse_attention_freq alone (minimax_m3/nvidia/model.py "
                         "_sparse_attention_layer_ids), which says otherwise: refused")
    if any(ours) and sparse.get("sparse_index_dim") not in {layer.index_head_dim for layer in model.layers} - {0}:
        raise ValueError("vLLM 0.33.0's MiniMax-M3 sparse layers read sparse_attention_config['sparse_index_dim'] "
                         "(minimax_m3/nvidia/model.py#L441), which this config does not set to the index width")
    if draft is not None:
        raise ValueError("draft with MiniMax-M3: the layers of vLLM 0.33.0's MiniMaxM3MTP are not modelled")


def bailing_kda_layers(n_layers: int, group: int) -> list[bool]:
    """Which layers of Ling-3 (bailing_hybrid) vLLM 0.33.0 builds as KDA: all but the last of each whole
    group of layer_group_size; the layers after the last whole group are MLA (bailing_moe_v3.py
    _is_kda_layer #L131-L137)."""
    return [not ((i + 1) % group == 0 or i >= n_layers // group * group) for i in range(n_layers)]


def _bailing_layers(model: Model, draft) -> tuple[Layer, ...]:
    """Ling-3 (bailing_hybrid) as vLLM builds it (vllm@v0.33.0 vllm/model_executor/models/bailing_moe_v3.py#L1414-L1572
    BailingMoeV3ForCausalLM): KDA where
    bailing_kda_layers says so, with the state kda_state_shape(tp, num_attention_heads, config.head_dim,
    short_conv_kernel_size) (#L651-L660: conv 3 x heads x head_dim, recurrent heads x head_dim x head_dim, float32);
    MLA elsewhere, kv_lora_rank + qk_rope_head_dim in one latent head (model_arch_config_convertor.py#L294-L320
    counts bailing_hybrid as DeepSeek MLA). vLLM reads the transformers config object, whose
    BailingHybridConfig.__post_init__ sets head_dim to qk_rope_head_dim (configuration_bailing_hybrid.py)."""
    cfg = model.config
    arch = model.facts.architectures[0] if model.facts.architectures else None
    if arch != "BailingMoeV3ForCausalLM":
        # registry.py#L82 maps BailingMoeV3ForCausalLM to bailing_moe_v3.py; another class (transformers'
        # BailingHybridForCausalLM) goes to the Transformers backend, whose KDA layers do not dispatch through
        # the attention interface (transformers/base.py _create_attention_instances #L609-L640 raises)
        raise ValueError(f"vLLM 0.33.0 runs bailing_hybrid as BailingMoeV3ForCausalLM (registry.py, "
                         f"bailing_moe_v3.py); architectures {arch!r} goes to its Transformers backend, which raises "
                         "for the KDA layers: 'does not dispatch through the Transformers attention interface' "
                         "(model_executor/models/transformers/base.py _create_attention_instances)")
    if not cfg.get("no_kda_lora"):      # getattr(config, "no_kda_lora", False), truthiness
        raise ValueError("vLLM 0.33.0 cannot build this model: its BailingMoeV3 KDA layers raise 'BailingMoeV3 KDA "
                         "currently expects no_kda_lora=True' (bailing_moe_v3.py#L686-L687), and this config does "
                         "not set no_kda_lora true")
    heads, dim = config_int(model, "num_attention_heads"), config_int(model, "qk_rope_head_dim")
    for name, want in (("head_dim", dim), ("linear_head_dim", dim), ("linear_num_heads", heads)):
        if cfg.get(name) not in (None, want):
            raise ValueError(f"config field {name!r} is {cfg[name]!r}: vLLM 0.33.0's KDA layers are "
                             "num_attention_heads heads of config.head_dim (bailing_moe_v3.py#L674-L676), and "
                             f"transformers 5.24's BailingHybridConfig.__post_init__ sets head_dim to qk_rope_head_dim "
                             f"({dim}) while this file gives its KDA heads another shape: which one vLLM builds "
                             "depends on the transformers release that reads the file; refused")
    if draft is not None:
        raise ValueError("draft with bailing_hybrid: the layers of vLLM 0.33.0's bailing_hybrid_mtp draft "
                         "(bailing_moe_mtp.py) are not modelled")
    kinds = bailing_kda_layers(len(model.layers), config_int(model, "layer_group_size"))
    if not any(kinds):
        raise ValueError("layer_group_size leaves this bailing_hybrid config no KDA layer, but vLLM 0.33.0 still sizes "
                         "its attention blocks to hold a KDA state (BailingMoeV3ForCausalLM is a hybrid model: "
                         "platforms/interface.py _align_hybrid_block_size), which kvmem's layout of a model without "
                         "a state does not apply: refused")
    kernel = config_int(model, "short_conv_kernel_size")
    kda = Layer(LINEAR, state=RecurrentState(3 * heads * dim, kernel, heads * dim * dim, heads, "fp32"))
    mla = Layer(MLA, kv_lora_rank=config_int(model, "kv_lora_rank"), qk_rope_head_dim=dim)
    return tuple(kda if linear else mla for linear in kinds)


# vllm@v0.33.0 vllm/models/hy_v4/nvidia/attention.py#L51-L56: the layer types that run sparse attention
HY_V4_SPARSE_TYPES = ("sparse_attention", "sparse", "indexed_attention", "deepseek_sparse_attention")


def _hy_v4_layers(model: Model) -> tuple[Layer, ...]:
    """HY-V4: the MLA latent on every layer; an indexer key (DeepseekV32IndexerCache, 132 B) where vLLM builds one.

    vllm@v0.33.0 vllm/models/hy_v4/nvidia/attention.py#L322-L328: a layer is sparse when the file's layer_types names a
    sparse type (#L322-L328; vLLM's HYV4Config leaves layer_types unset, transformers' makes every layer
    indexed_attention); a sparse layer keeps its own indexer unless indexer_types says "shared"
    (compute_skip_topk_layers #L61-L113; vLLM's default: full on layer 0 and every (i - 1) % 4 == 0,
    transformers/configs/hy_v4.py __post_init__). Only files whose every layer is sparse are sized (a dense
    layer runs the dense MLA backend, whose fp8 format differs).
    """
    cfg, n = model.config, len(model.layers)
    types = cfg.get("layer_types")
    if not isinstance(types, list) or len(types) < n or any(t not in HY_V4_SPARSE_TYPES for t in types[:n]):
        raise ValueError("vLLM 0.33.0 runs an HY-V4 layer as sparse MLA only where the file's layer_types names a "
                         "sparse type (hy_v4/nvidia/attention.py#L322-L328); this file leaves some (or all) layers "
                         "dense, which kvmem does not size")
    shared = cfg.get("indexer_types")
    if shared is None:
        keeps = [i == 0 or (i - 1) % 4 == 0 for i in range(n)]
    elif isinstance(shared, list) and len(shared) == n and set(shared) <= {"full", "shared"}:
        keeps = [t == "full" for t in shared]
    else:
        raise ValueError("indexer_types must contain one entry per hidden layer, 'full' or 'shared' "
                         "(vLLM 0.33.0 hy_v4/nvidia/attention.py compute_skip_topk_layers)")
    width = next((layer.index_head_dim for layer in model.layers if layer.index_head_dim), 0) or \
        config_int(model, "index_head_dim")
    return tuple(replace(layer, index_head_dim=width if keep else 0) for layer, keep in zip(model.layers, keeps,
                                                                                          strict=True))


def _mimo_layers(model: Model, tp: int) -> tuple[Layer, ...]:
    """MiMo-V2-Flash's layers as vLLM builds their attention
    (vllm@v0.33.0 vllm/model_executor/models/mimo_v2.py#L382-L500 MiMoV2FlashDecoderLayer).

    Sliding layers (hybrid_layer_pattern 1): swa_num_key_value_heads x swa_head_dim K and
    swa_v_head_dim V (swa_head_dim when absent), a window of sliding_window_size itself (transformers
    holds sliding_window_size + 1); full layers: num_key_value_heads x head_dim, V v_head_dim. The
    swa_* fields and sliding_window_size are read from the file (no config-class default: vLLM fails
    without them, kvmem refuses).
    """
    swa_heads = config_int(model, "swa_num_attention_heads")
    if not divides(tp, swa_heads):
        raise ValueError(f"Total number of attention heads ({swa_heads}, the sliding layers' "
                         f"swa_num_attention_heads) must be divisible by tensor parallel size ({tp}).")
    k_dim = config_int(model, "swa_head_dim")
    sliding = dict(kv_heads=config_int(model, "swa_num_key_value_heads"), head_dim_k=k_dim,
                   head_dim_v=config_int(model, "swa_v_head_dim") if model.config.get("swa_v_head_dim") else k_dim,
                   window=config_int(model, "sliding_window_size"))
    return tuple(replace(layer, **sliding) if layer.kind == SLIDING else layer for layer in model.layers)


# Model files that pass sliding_window + 1 as the layer's window ("cohere swa layer sees [pos -
# sliding_window, pos]"; vllm@v0.33.0 vllm/model_executor/models/commandr.py#L237-L244, cohere2_moe.py#L256);
# the release it landed in is not pinned here, so earlier releases keep the config's window
WINDOW_PLUS_ONE = ("cohere2", "cohere2_moe")
WINDOW_PLUS_ONE_FROM = (0, 33)


def _laguna_layers(model: Model, tp: int) -> tuple[Layer, ...]:
    """Laguna: each layer's query heads from num_attention_heads_per_layer; its head_dim is the config's
    head_dim, else hidden_size // that layer's query heads
    (vllm@v0.33.0 vllm/model_executor/models/laguna.py#L248-L460 LagunaAttention)."""
    per_layer = model.config.get("num_attention_heads_per_layer")
    if per_layer is None:
        return model.layers
    if not isinstance(per_layer, list) or len(per_layer) != len(model.layers) or any(
            isinstance(h, bool) or not isinstance(h, int) or h < 1 for h in per_layer):
        raise ValueError(f"config field 'num_attention_heads_per_layer' must list one head count per layer "
                         f"({len(model.layers)}) as vLLM 0.33.0's laguna.py reads it")
    head_dim = Fields(model.config, model.model_type).get("head_dim", default=None)   # the config class's default
    out = []
    for layer, heads in zip(model.layers, per_layer, strict=True):
        if not divides(tp, heads):
            raise ValueError(f"Total number of attention heads ({heads}, a layer's num_attention_heads_per_layer) "
                             f"must be divisible by tensor parallel size ({tp}).")
        if layer.caches_tokens and not head_dim:
            layer = replace(layer, head_dim_k=model.hidden_size // heads, head_dim_v=model.hidden_size // heads)
        out.append(layer)
    return tuple(out)


# Model files' own shapes (each branch below and the checks above cite their file at v0.33.0):
#   Cohere2 and Cohere2-MoE: a sliding layer's window is sliding_window + 1 (WINDOW_PLUS_ONE). DBRX (dbrx.py):
#   head_dim = d_model // n_heads, KV heads attn_config.kv_n_heads; EXAONE 4, AFMoE: the config class's
#   layer_types and sliding_window. MiMo-V2-Flash: _mimo_layers (tp divides swa_num_attention_heads too; a file
#   without the swa fields is refused: vLLM reads them as given). Granite-4.0-H, LFM2, OLMo-Hybrid and DBRX
#   attention: head_dim = hidden_size // num_attention_heads whatever the config says (HIDDEN_HEAD_DIM_TYPES):
#   a contradicting head_dim is refused. Qwen2-VL / Qwen2.5-VL: the text model is Qwen2ForCausalLM
#   (qwen2_vl.py). MiniCPM3: per-head K and V, not the latent (blocks of 16). LongCat-Flash: two MLA attentions
#   per decoder layer; pp > 1 refused (kvmem.engines.vllm.layout). K-EXAONE (exaone_moe.py): a sliding layer's
#   window is sliding_windows[i] where listed. Laguna: _laguna_layers. Gemma-4-Unified (gemma4_unified.py): its
#   language model is gemma4.py's Gemma4ForCausalLM. Ernie-4.5-VL: full attention on every layer (a config
#   window is refused). Nemotron-NAS (nemotron_nas.py DeciLMDecoderLayer): num_attention_heads //
#   n_heads_in_group KV heads, no attention on a no_op block; replace_with_linear is not read by vLLM: refused.
#   DeepSeek-V4: kvmem.engines.vllm.compressed. MiniMax-M3 (vllm/models/minimax_m3): a bf16 one-head index key
#   of sparse_index_dim beside K/V on the sparse_attention_freq layers, blocks of 128 (layout.py). HY-V4:
#   _hy_v4_layers. Step-3.5/3.7: num_attention_groups KV heads (_check_step3p5). GPTBigCode, SmolLM3: the
#   Transformers backend (vllm/model_executor/models/transformers/base.py). GLM-5: check_indexers (on
#   Blackwell its kv "auto" is fp8_e4m3, vllm@v0.33.0 vllm/model_executor/models/config.py#L89-L116
#   GlmMoeDsaForCausalLM: kvmem sizes the kv_dtype asked and says so in a note, in fit too (the GPU known:
#   left open); an MTP layer always keeps an indexer).
def vllm_layers(model: Model, tp: int, release, draft=None) -> tuple[Layer, ...]:
    """The model's layers as vLLM's model file shapes their attention, where it differs from kvmem's
    reading of the config (which follows transformers)."""
    if model.model_type in MINIMAX_M3_TYPES:
        _check_minimax_m3(model, draft)
        return model.layers
    if model.model_type == "step3p5":
        _check_step3p5(model, tp)
        return model.layers
    if model.model_type == "bailing_hybrid":
        return _bailing_layers(model, draft)
    if model.model_type in INKLING_TYPES:
        return inkling_layers(model, tp, draft)
    if model.model_type == "hy_v4":
        return _hy_v4_layers(model)
    if model.model_type == "mimo_v2_flash":
        return _mimo_layers(model, tp)
    own_class = OWN_CLASS_LAYERS.get(model.model_type)
    if own_class is not None:   # a family vLLM reads with its own config class, which fills a file in otherwise
        return own_class(model)
    if model.model_type == "minicpm3":
        # vllm@v0.33.0 vllm/model_executor/models/minicpm3.py#L52-L183 MiniCPM3Attention: Attention(num_local_heads,
        # qk_head_dim, num_kv_heads=
        # num_local_heads): per-head K and V of qk_nope_head_dim + qk_rope_head_dim each, not the latent
        # (minicpm3 is not in model_arch_config_convertor.py is_deepseek_mla)
        qk = model.facts.qk_nope_head_dim
        if not qk:
            raise ValueError("vLLM 0.33.0's minicpm3 attention reads qk_nope_head_dim, which this config lacks")
        return tuple(Layer(FULL, kv_heads=model.num_attention_heads, head_dim_k=qk + layer.qk_rope_head_dim,
                           head_dim_v=qk + layer.qk_rope_head_dim) if layer.kind == MLA else layer
                     for layer in model.layers)
    if model.model_type == "ernie4_5_vl_moe_text" and any(layer.kind in (SLIDING, CHUNKED) for layer in model.layers):
        # vllm@v0.33.0 vllm/model_executor/models/ernie45_vl_moe.py#L91-L189 Ernie4_5_VLMoeAttention: no per-layer
        # window, every layer full attention
        raise ValueError("vLLM 0.33.0's ernie45_vl_moe.py gives every layer full attention, but this config sets a "
                         "sliding window or chunk (kvmem's reading follows transformers' generic rule): refused")
    if model.model_type == "nemotron-nas":
        # vllm@v0.33.0 vllm/model_executor/models/nemotron_nas.py#L123-L219 DeciLMDecoderLayer: attention
        # (num_attention_heads // n_heads_in_group KV heads)
        # unless block_configs[i].attention.no_op; it does not read replace_with_linear
        blocks = model.config.get("block_configs") or []
        linear = [i for i, block in enumerate(blocks) if isinstance(block, dict)
                  and (block.get("attention") or {}).get("replace_with_linear")
                  and not (block.get("attention") or {}).get("no_op")]
        if linear:
            raise ValueError(f"block_configs[{linear[0]}].attention.replace_with_linear: vLLM 0.33.0's nemotron_nas.py "
                             "does not read it and builds an attention layer there (needing n_heads_in_group); "
                             "kvmem does not size that")
        return model.layers
    if model.model_type == "laguna":
        return _laguna_layers(model, tp)
    if model.model_type in WINDOW_PLUS_ONE and release is not None and release >= WINDOW_PLUS_ONE_FROM:
        return tuple(replace(layer, window=layer.window + 1) if layer.kind == SLIDING else layer
                     for layer in model.layers)
    return model.layers


def _check_step3p5(model: Model, tp: int) -> None:
    """Step-3.5 / 3.7 (vllm@v0.33.0 vllm/model_executor/models/step3p5.py#L418-L455 Step3p5DecoderLayer):
    every layer K and V of num_attention_groups heads of head_dim, sliding layers (layer_types) with
    sliding_window -- kvmem's reading; a sliding layer's query heads are num_sliding_attention_heads
    (#L71-L84), which tp must divide (Step3p5Attention asserts it) and which, without head_dim, would set
    its head_dim (L220)."""
    heads = model.config.get("num_sliding_attention_heads")
    if heads and any(layer.kind == SLIDING for layer in model.layers):
        if not divides(tp, heads):
            raise ValueError(f"Total number of attention heads ({heads}, the sliding layers' "
                             f"num_sliding_attention_heads) must be divisible by tensor parallel size ({tp}).")
        if model.config.get("head_dim") is None and heads != model.num_attention_heads:
            raise ValueError("vLLM 0.33.0's step3p5.py takes a sliding layer's head_dim as hidden_size // "
                             "num_sliding_attention_heads when the config has no head_dim; kvmem does not size that")


def check_heads(model: Model, tp: int) -> None:
    # vllm@v0.33.0 vllm/config/model.py#L1557-L1564 verify_with_parallel_config: tp divides the attention heads
    # (a K/V head is replicated when tp > kv_heads: kvmem.parallel.kv_heads_per_rank, max(1, kv_heads // tp))
    heads = model.num_attention_heads
    if not divides(tp, heads):
        raise ValueError(f"Total number of attention heads ({heads}) must be divisible by tensor "
                         f"parallel size ({tp}).")
    if model.model_type in HIDDEN_HEAD_DIM_TYPES:
        dim = model.hidden_size // heads
        if any(layer.caches_tokens and (layer.head_dim_k, layer.head_dim_v) != (dim, dim) for layer in model.layers):
            raise ValueError(f"vLLM 0.33.0's {model.model_type} attention takes head_dim = hidden_size // "
                             f"num_attention_heads = {dim}, which this config's head_dim contradicts")


# Model files whose attention takes head_dim = hidden_size // num_attention_heads whatever the config
# says (vllm@v0.33.0 vllm/model_executor/models/granitemoehybrid.py#L240 GraniteMoeHybridAttention, lfm2.py#L103-L193
# Lfm2Attention, lfm2_moe.py#L174-L262, dbrx.py#L188-L270 DbrxAttention: d_model // n_heads, olmo_hybrid.py#L81-L191)
HIDDEN_HEAD_DIM_TYPES = ("granitemoehybrid", "lfm2", "lfm2_moe", "dbrx", "olmo_hybrid")

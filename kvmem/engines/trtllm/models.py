"""TensorRT-LLM's model-specific cache rules: DeepSeek sparse attention's indexer keys, the configs its
model classes refuse or lay out otherwise, and the recurrent state a layer keeps (cache.py applies them)."""

from __future__ import annotations

from ...dtypes import dtype
from ...layer import MLA, SLIDING
from ...model import Model
from ...parallel import state_share
from ...units import cdiv
from ..base import state_bytes
from . import minimax
from .families import check_architecture

__all__ = ["V2_FAMILIES", "check_v2", "gemma4_layout", "v2_window_blocks",
           "DSA_QUANT_BLOCK", "FORCED_DTYPE", "indexer_elements", "check_model", "dsa_notes",
           "state_bytes_of", "step3p5_text_config"]

DSA_QUANT_BLOCK = 128          # DSACacheManager quant_block_size
# Models whose TRT-LLM class sets the dtype the cache follows whatever the config says
# (trtllm@fbbc05dd tensorrt_llm/_torch/models/modeling_exaone4.py#L242-L253 Exaone4ForCausalLM.__init__:
# pretrained_config.torch_dtype = torch.bfloat16;
# EXAONE-4.5's language model is that class on its text config,
# trtllm@0050262c tensorrt_llm/_torch/models/modeling_exaone4_5.py#L225-L227)
FORCED_DTYPE = {"exaone4": "bf16", "exaone4_5_text": "bf16"}


def indexer_elements(model: Model) -> int:
    """DSA: the indexer key one token adds on every MLA layer, counted in the cache dtype.

    The C++ KVCacheManager keeps an indexer pool for every local layer (enable_indexer_k_cache handed to it:
    trtllm@001541ba tensorrt_llm/_torch/pyexecutor/resource_manager.py#L442-L445; DSACacheManager builds
    indexer_k_cache_pool_per_layer over range(num_local_layers)), of index_head_dim fp8 values and one
    float32 scale per 128 (quant_block_size); DSACacheManager.get_cache_bytes_per_token /
    get_cache_size_per_token count it as (index_head_dim + index_head_dim // 128 x 4) more elements of the
    cache dtype beside the latent
    (trtllm@eaab4c3a tensorrt_llm/_torch/attention_backend/sparse/dsa/cache_manager.py#L109-L161).
    """
    dims = {layer.index_head_dim for layer in model.layers if layer.kind == MLA and layer.index_head_dim}
    if not dims:
        return 0
    if len(dims) > 1:
        raise ValueError(f"TensorRT-LLM's DSACacheManager has one index_head_dim; layers have {sorted(dims)}")
    index = dims.pop()
    return index + index // DSA_QUANT_BLOCK * 4


def check_model(model: Model) -> None:
    """Configs TRT-LLM refuses, or whose cache it lays out otherwise than kvmem's reading, refused by name (a
    family's own check first, its message the more specific; then any architecture the registry lacks)."""
    if model.model_type == "kimi_linear":
        check_kimi(model)
    if model.model_type == "step3p5":
        check_step3p5(model)
    if model.model_type in V2_FAMILIES:
        check_gemma4(model)
    if minimax.is_m3(model):
        minimax.check_m3(model)
    if model.model_type == "nemotron-nas":
        # NemotronNASModel (trtllm@4d365368 tensorrt_llm/_torch/models/modeling_nemotron_nas.py#L189-L194; its attention
        # #L121-L129, #L66): a layer's KV heads are num_attention_heads // n_heads_in_group whenever n_heads_in_group is
        # set, no_op or replace_with_linear or not (0 only without it)
        for i, block in enumerate(model.config.get("block_configs") or []):
            attention = block.get("attention") if isinstance(block, dict) else None
            if isinstance(attention, dict) and attention.get("n_heads_in_group") and (
                    attention.get("no_op") or attention.get("replace_with_linear")):
                raise ValueError(f"block_configs[{i}].attention: TensorRT-LLM's NemotronNASModel gives this block "
                                 "KV heads in its cache (n_heads_in_group is set) though it has no attention; "
                                 "kvmem's reading gives it none, so it does not size this config")
    check_architecture(model)


def check_kimi(model: Model) -> None:
    # trtllm@cf328e85 tensorrt_llm/_torch/models/modeling_kimi_linear.py#L1079-L1082 (KimiLinearForCausalLM, written
    # for Kimi-K3; KimiK3MoERuntime.__init__): its MoE layer raises ValueError without the latent MoE ("Kimi K3
    # runtime expects the latent MoE (routed_expert_hidden_size)", "... expects latent_moe_use_norm=True") --
    # Kimi-Linear-48B-A3B's config has neither
    config = model.config
    if config.get("model_type") == "kimi_k3" and isinstance(config.get("text_config"), dict):
        config = config["text_config"]     # config_utils.py unwrap_kimi_text_config
    for field in ("routed_expert_hidden_size", "latent_moe_use_norm"):
        if not config.get(field):
            raise ValueError(f"TensorRT-LLM's KimiLinearForCausalLM builds Kimi-K3's latent MoE layer only, and its "
                             f"MoE layer raises for this model's config: no {field} (modeling_kimi_linear.py @ "
                             f"cf328e85: \"Kimi K3 runtime expects ...\")")


def step3p5_text_config(model: Model) -> dict:
    config = model.config
    text = config.get("text_config")
    return text if isinstance(text, dict) else config


def check_step3p5(model: Model) -> None:
    # _layer_kv_heads (trtllm@0c37d5ba tensorrt_llm/_torch/models/modeling_step3p7.py#L240-L247): a sliding layer's KV
    # heads are attention_other_setting.num_attention_groups when set; _mirror_step3p7_text_aliases hands the cache
    # manager num_attention_groups alone -- kvmem reads that one count for every layer
    config = step3p5_text_config(model)
    other = config.get("attention_other_setting")
    groups = other.get("num_attention_groups") if isinstance(other, dict) else None
    heads = {layer.kv_heads for layer in model.layers}
    if groups is not None and heads != {groups}:
        raise ValueError(f"attention_other_setting.num_attention_groups = {groups}: TensorRT-LLM's Step3p7Attention "
                         f"gives the sliding layers {groups} KV heads where the other layers have {sorted(heads)}; "
                         "kvmem's reading gives every layer the same heads, so it does not size this config")


def dsa_notes(model: Model) -> list[str]:
    """What TRT-LLM's DSA cache keeps that the config does not ask for."""
    if not indexer_elements(model):
        return []
    notes = []
    skipped = sum(layer.kind == MLA and not layer.index_head_dim for layer in model.layers)
    if skipped:
        notes.append(f"{skipped} layers the config gives no indexer key (indexer_types) keep one in TRT-LLM: its "
                     "indexer pool covers every layer")
    return notes


def state_bytes_of(model: Model, i: int, tp: int) -> int:
    state = model.layers[i].state
    if model.model_type == "kimi_linear":
        # trtllm@00679c66 tensorrt_llm/_torch/pyexecutor/config_utils.py#L534-L627 extract_mamba_kv_cache_params:
        # KDA on the Mamba pool (#L570-L585), 3 x heads x head_dim conv channels in the model dtype, the [heads,
        # head_dim, head_dim] recurrent state forced to fp32 (#L605-L613, "KDA recurrent state must be fp32"), both
        # split by tp (get_states_bytes_per_layer #L517-L531). kvmem keeps short_conv_kernel_size conv columns, the
        # layout trtllm@cf328e85 tensorrt_llm/_torch/models/modeling_kimi_linear.py#L21-L28 states ([3 x heads x
        # head_dim, W], "the full FLA ShortConvolution cache window") and an earlier stored copy of config_utils.py
        # builds (conv_kernel = short_conv_kernel_size + 1); at 00679c66 conv_kernel is short_conv_kernel_size
        # (#L581), one column fewer (#L527): which of the two 065ff9e9 runs is not known
        conv = state_share(state.conv_channels * state.conv_kernel, state.ssm_heads, tp)  # type: ignore[union-attr]  # a LINEAR layer's
        ssm = state_share(state.ssm_elements, state.ssm_heads, tp)  # type: ignore[union-attr]  # a LINEAR layer's
        return dtype(model.dtype).row_bytes(conv) + dtype("fp32").row_bytes(ssm)
    # the whole state in the model's dtype (a config's mamba_ssm_dtype is not checked against TRT-LLM)
    return state_bytes(state, model.dtype, tp, ssm_dtype=model.dtype)


# Gemma 4 (gemma4_text, gemma4_unified_text): the families TensorRT-LLM lays out with KVCacheManagerV2
V2_FAMILIES = ("gemma4_text", "gemma4_unified_text")


def gemma4_text_config(model: Model) -> dict:
    config = model.config
    text = config.get("text_config")
    return text if isinstance(text, dict) else config


def gemma4_layout(model: Model) -> list[tuple[int, int, int]]:
    """Gemma 4 under TensorRT-LLM: (kv_heads, head_dim, window) of every layer's own cache, window 0 = whole.

    trtllm@065ff9e9 tensorrt_llm/_torch/pyexecutor/_util.py#L2170-L2213 _create_kv_cache_manager, its
    is_gemma4_hybrid branch: per layer of layer_types a sliding layer takes num_key_value_heads x head_dim, a full
    layer global_head_dim with num_global_key_value_heads when attention_k_eq_v (else num_key_value_heads); K and V
    both cached (kv_factor 2: Gemma4Attention duplicates k_proj into v_proj for K=V layers,
    trtllm@00e7d103 tensorrt_llm/_torch/models/modeling_gemma4.py#L303-L305; its per-layer heads #L143-L158). Every
    one of num_hidden_layers gets its buffers, the KV-shared ones included ("No layer_mask exclusion needed": they read
    their source layer's slot through cache_layer_idx, #L276-L279, the last non-shared layer of their type,
    #L535-L549, and leave their own unused). With
    max_attention_window unset, the same branch sets it to sliding_window on sliding layers and max_seq_len on full
    ones, so V2 keeps a sliding layer's window only. Only a hybrid config (global_head_dim != head_dim,
    config_utils.is_gemma4_hybrid) takes V2 (_util.py#L92-L97 _non_hybrid_kv_cache_manager_cls); another is refused
    by check_gemma4. The multimodal wrappers hand the engine their text_config: Gemma4ForCausalLM on text_config,
    then post_config (trtllm@001a6a01 tensorrt_llm/_torch/models/modeling_gemma4mm.py#L658-L659, #L707;
    trtllm@1c0067ee tensorrt_llm/_torch/models/modeling_gemma4_unified.py#L274-L275, #L313-L315).
    """
    config = gemma4_text_config(model)
    kv_heads, head_dim = config.get("num_key_value_heads"), config.get("head_dim")
    global_heads = config.get("num_global_key_value_heads") or kv_heads
    k_eq_v, window = bool(config.get("attention_k_eq_v")), config.get("sliding_window") or 0
    layout = []
    for layer in model.layers:
        # config.layer_types as transformers' Gemma4TextConfig fills it (kvmem's reading); a KV-shared layer has
        # the type of the layer it reads
        kind = model.layers[layer.shared_with].kind if layer.shared_with is not None else layer.kind
        if kind == SLIDING:
            layout.append((kv_heads, head_dim, window))
        else:
            layout.append((global_heads if k_eq_v else kv_heads, config.get("global_head_dim"), 0))
    return layout  # type: ignore[return-value]  # the config's heads and dims are ints (check_gemma4)


def check_gemma4(model: Model) -> None:
    config = gemma4_text_config(model)
    global_head_dim, head_dim = config.get("global_head_dim"), config.get("head_dim")
    if global_head_dim is None or not isinstance(head_dim, int) or global_head_dim == head_dim:
        # trtllm@00679c66 tensorrt_llm/_torch/pyexecutor/config_utils.py#L127-L132 is_gemma4_hybrid is False:
        # _non_hybrid_kv_cache_manager_cls
        # (trtllm@065ff9e9 tensorrt_llm/_torch/pyexecutor/_util.py#L92-L97) picks the V1
        # KVCacheManager, one num_key_value_heads x head_dim for every layer, which Gemma4Attention's full layers
        # (global_head_dim, num_global_key_value_heads under attention_k_eq_v) do not match
        raise ValueError("Gemma 4 with global_head_dim equal to head_dim (or unset): TensorRT-LLM then gives every "
                         "layer one num_key_value_heads x head_dim cache (KVCacheManager, not V2) that its full "
                         "layers do not use as laid out; kvmem sizes only the hybrid configs Gemma 4 publishes")


def v2_window_blocks(tokens: int, window: int, tokens_per_block: int) -> int:
    """Blocks a sliding layer holds under KVCacheManagerV2 for a sequence of ``tokens`` cached tokens.

    trtllm@1548780d tensorrt_llm/runtime/kv_cache_manager_v2/_life_cycle_registry.py#L42-L55
    AttnLifeCycle.get_stale_range: with
    history_length h, blocks [0, (h + 1 - window) // tokens_per_block) are stale (freed); the live window keeps
    one in-flight token. kvmem takes h = tokens: held = ceil(tokens / tpb) - max(0, (tokens + 1 - window) // tpb).
    """
    total = cdiv(tokens, tokens_per_block)
    return total - min(total, max(0, (tokens + 1 - window) // tokens_per_block))


def check_v2(k_dtype_name: str, pp: int) -> None:
    """Options TensorRT-LLM refuses for Gemma 4, or that kvmem has not checked against KVCacheManagerV2."""
    if pp > 1:
        # trtllm@00e7d103 tensorrt_llm/_torch/models/modeling_gemma4.py#L921-L926 Gemma4ForCausalLM.__init__:
        # assert mapping.pp_size == 1
        raise ValueError("pp > 1: TensorRT-LLM's Gemma4ForCausalLM asserts pp_size == 1 (\"Gemma4 does not support "
                         "pipeline parallelism\", modeling_gemma4.py)")
    if k_dtype_name == "nvfp4":
        raise ValueError("kv_dtype nvfp4: KVCacheManagerV2 adds per-layer block-scale buffers (Role.KEY_BLOCK_SCALE) "
                         "whose size kvmem has not read for Gemma 4; pass bf16/fp16 or fp8")

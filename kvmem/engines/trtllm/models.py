"""TensorRT-LLM's model-specific cache rules: DeepSeek sparse attention's indexer keys, the configs its
model classes refuse or lay out otherwise, and the recurrent state a layer keeps (cache.py applies them)."""

from __future__ import annotations

from ...dtypes import dtype
from ...model import MLA, Model
from ..base import state_bytes
from ...parallel import state_share

__all__ = ["DSA_QUANT_BLOCK", "DSA_TOKENS_PER_BLOCK", "FORCED_DTYPE", "indexer_elements", "check_model", "dsa_notes",
           "state_bytes_of", "step3p5_text_config"]

DSA_QUANT_BLOCK = 128          # DSACacheManager quant_block_size
# DSACacheManager of early 2026 (attention_backend/sparse/dsa.py @ code-index id 126013056, the first with the
# indexer pool in the C++ KVCacheManager, enable_indexer_k_cache) asserted tokens_per_block == 64 ("must be set
# to 64 for DeepSeek v3.2"); sparse/dsa/cache_manager.py @ eaab4c3a dropped the assertion
DSA_TOKENS_PER_BLOCK = 64
# Models whose TRT-LLM class sets the dtype the cache follows whatever the config says
# (modeling_exaone4.py @ fbbc05dd Exaone4ForCausalLM.__init__: pretrained_config.torch_dtype = torch.bfloat16;
# EXAONE-4.5's language model is that class on its text config, modeling_exaone4_5.py @ 0050262c)
FORCED_DTYPE = {"exaone4": "bf16", "exaone4_5_text": "bf16"}


def indexer_elements(model: Model) -> int:
    """DSA: the indexer key one token adds on every MLA layer, counted in the cache dtype.

    The C++ KVCacheManager keeps an indexer pool for every local layer (resource_manager.py @ 001541ba
    KVCacheManager.__init__: enable_indexer_k_cache, get_indexer_k_cache_pool_data; DSACacheManager builds
    indexer_k_cache_pool_per_layer over range(num_local_layers)), of index_head_dim fp8 values and one
    float32 scale per 128 (quant_block_size); DSACacheManager.get_cache_bytes_per_token /
    get_cache_size_per_token count it as (index_head_dim + index_head_dim // 128 x 4) more elements of the
    cache dtype beside the latent (sparse/dsa/cache_manager.py @ eaab4c3a).
    """
    dims = {layer.index_head_dim for layer in model.layers if layer.kind == MLA and layer.index_head_dim}
    if not dims:
        return 0
    if len(dims) > 1:
        raise ValueError(f"TensorRT-LLM's DSACacheManager has one index_head_dim; layers have {sorted(dims)}")
    index = dims.pop()
    return index + index // DSA_QUANT_BLOCK * 4


def check_model(model: Model) -> None:
    """Configs TRT-LLM refuses, or whose cache it lays out otherwise than kvmem's reading, refused by name."""
    if model.model_type == "kimi_linear":
        check_kimi(model)
    if model.model_type == "step3p5":
        check_step3p5(model)
    if model.model_type == "nemotron-nas":
        # modeling_nemotron_nas.py @ 4d365368 NemotronNASModel: a layer's KV heads are num_attention_heads //
        # n_heads_in_group whenever n_heads_in_group is set, no_op or replace_with_linear or not (0 only without it)
        for i, block in enumerate(model.config.get("block_configs") or []):
            attention = block.get("attention") if isinstance(block, dict) else None
            if isinstance(attention, dict) and attention.get("n_heads_in_group") and (
                    attention.get("no_op") or attention.get("replace_with_linear")):
                raise ValueError(f"block_configs[{i}].attention: TensorRT-LLM's NemotronNASModel gives this block "
                                 "KV heads in its cache (n_heads_in_group is set) though it has no attention; "
                                 "kvmem's reading gives it none, so it does not size this config")


def check_kimi(model: Model) -> None:
    # modeling_kimi_linear.py @ cf328e85 (KimiLinearForCausalLM, written for Kimi-K3): its MoE layer raises
    # ValueError without the latent MoE ("Kimi K3 runtime expects the latent MoE (routed_expert_hidden_size)",
    # "... expects latent_moe_use_norm=True") -- Kimi-Linear-48B-A3B's config has neither
    config = model.config
    if config.get("model_type") == "kimi_k3" and isinstance(config.get("text_config"), dict):
        config = config["text_config"]     # config_utils.py unwrap_kimi_text_config
    for field in ("routed_expert_hidden_size", "latent_moe_use_norm"):
        if not config.get(field):
            raise ValueError(f"TensorRT-LLM's KimiLinearForCausalLM runs Kimi-K3's latent MoE only and raises for "
                             f"this config: no {field} (modeling_kimi_linear.py @ cf328e85: \"Kimi K3 runtime "
                             f"expects ...\")")


def step3p5_text_config(model: Model) -> dict:
    config = model.config
    text = config.get("text_config")
    return text if isinstance(text, dict) else config


def check_step3p5(model: Model) -> None:
    # modeling_step3p7.py @ 0c37d5ba _layer_kv_heads: a sliding layer's KV heads are
    # attention_other_setting.num_attention_groups when set; _mirror_step3p7_text_aliases hands the cache manager
    # num_attention_groups alone -- kvmem reads that one count for every layer
    config = step3p5_text_config(model)
    other = config.get("attention_other_setting")
    groups = other.get("num_attention_groups") if isinstance(other, dict) else None
    heads = {layer.kv_heads for layer in model.layers}
    if groups is not None and heads != {groups}:
        raise ValueError(f"attention_other_setting.num_attention_groups = {groups}: TensorRT-LLM's Step3p7Attention "
                         f"gives the sliding layers {groups} KV heads where the other layers have {sorted(heads)}; "
                         "kvmem's reading gives every layer the same heads, so it does not size this config")


def dsa_notes(model: Model, tokens_per_block: int) -> list[str]:
    if not indexer_elements(model):
        return []
    notes = []
    if tokens_per_block != DSA_TOKENS_PER_BLOCK:
        notes.append(f"DeepSeek sparse attention: TRT-LLM's DSACacheManager of early 2026 asserts tokens_per_block == "
                     f"{DSA_TOKENS_PER_BLOCK} (later main has no such check)")
    skipped = sum(layer.kind == MLA and not layer.index_head_dim for layer in model.layers)
    if skipped:
        notes.append(f"{skipped} layers the config gives no indexer key (indexer_types) keep one in TRT-LLM: its "
                     "indexer pool covers every layer")
    return notes


def state_bytes_of(model: Model, i: int, tp: int) -> int:
    state = model.layers[i].state
    if model.model_type == "kimi_linear":
        # config_utils.py (code-index id 57437625015) extract_mamba_kv_cache_params: KDA on the Mamba pool with
        # conv_kernel = short_conv_kernel_size + 1, so the conv slot keeps all short_conv_kernel_size columns of
        # 3 x heads x head_dim channels in the model dtype; the [heads, head_dim, head_dim] recurrent state is
        # forced to fp32 ("KDA recurrent state must be fp32"); both split by tp (get_states_bytes_per_layer)
        conv = state_share(state.conv_channels * state.conv_kernel, state.ssm_heads, tp)
        ssm = state_share(state.ssm_elements, state.ssm_heads, tp)
        return dtype(model.dtype).row_bytes(conv) + dtype("fp32").row_bytes(ssm)
    # the whole state in the model's dtype (a config's mamba_ssm_dtype is not checked against TRT-LLM)
    return state_bytes(state, model.dtype, tp, ssm_dtype=model.dtype)

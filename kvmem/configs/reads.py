"""Which config fields shape a cache, and which of them each layout reads: a config that sets one
its family's layout does not read (to anything but null, false, 0 or an empty value) is refused by
name. A llama config that carries ``block_configs`` (DeciLM) or ``kv_lora_rank`` is not a llama.
A new layout (kvmem.configs.kinds) lists here the fields it reads.
"""

from __future__ import annotations

from ..errors import ConfigError
from .families import Family

__all__ = ["LAYOUT_READS", "CACHE_FIELDS", "reads", "check_fields"]


# The fields every layout reads: the layer count, heads and head dims.
_COMMON = frozenset({"layer_types", "sliding_window", "attention_chunk_size", "head_dim", "v_head_dim",
                     "kv_channels", "multi_query_group_num", "num_key_value_heads", "num_kv_heads", "n_head_kv"})

_MAMBA2 = frozenset({"mamba_n_heads", "mamba_d_head", "mamba_n_groups", "mamba_d_state", "mamba_d_conv",
                     "mamba_expand", "mamba_chunk_size"})

# Fields each layout (and MLA) reads beyond _COMMON.
LAYOUT_READS = {
    "generic": frozenset(),
    "alternate": frozenset(),
    "pattern": frozenset({"sliding_window_pattern", "_sliding_window_pattern", "global_attn_every_n_layers"}),
    "cohere2_moe": frozenset({"sliding_window_pattern", "prefix_dense_sliding_window_pattern"}),
    "qwen2": frozenset({"use_sliding_window", "max_window_layers"}),
    "gemma3n": frozenset({"num_kv_shared_layers"}),
    "gemma4": frozenset({"num_kv_shared_layers", "per_layer_config", "global_head_dim",
                         "num_global_key_value_heads", "attention_k_eq_v", "use_bidirectional_attention"}),
    "llama4": frozenset({"no_rope_layers", "no_rope_layer_interval"}),
    "interval": frozenset({"full_attention_interval", "linear_num_key_heads", "linear_num_value_heads",
                           "linear_key_head_dim", "linear_value_head_dim", "linear_conv_kernel_dim",
                           "mamba_ssm_dtype"}),
    "jamba": frozenset({"attn_layer_period", "attn_layer_offset", "mamba_d_state", "mamba_d_conv",
                        "mamba_expand", "mamba_dt_rank"}),
    "nemotron_h": frozenset({"hybrid_override_pattern", "layers_block_type", "mamba_num_heads", "mamba_head_dim",
                             "ssm_state_size", "n_groups", "conv_kernel", "mamba_ssm_cache_dtype", "chunk_size",
                             "expand", "mtp_layers_block_type", "attention_head_dim"}),
    "falcon": frozenset({"new_decoder_architecture", "multi_query"}),
    "multi_query": frozenset({"multi_query"}),
    "dbrx": frozenset({"attn_config"}),
    "mimo": frozenset({"hybrid_layer_pattern", "swa_num_key_value_heads", "swa_head_dim", "swa_v_head_dim",
                       "sliding_window_size", "swa_num_attention_heads"}),
    "kimi_linear": frozenset({"linear_attn_config", "linear_num_heads", "linear_head_dim", "linear_conv_kernel_dim",
                              "kda_layers", "full_attn_layers"}),
    "minimax": frozenset({"attn_type_list"}),
    "lfm2": frozenset({"full_attn_idxs", "conv_L_cache"}),
    "decilm": frozenset({"block_configs"}),
    "decoder": frozenset({"is_decoder"}),
    "mpt": frozenset({"attn_config"}),
    "granite_hybrid": frozenset({"layers_block_type"}) | _MAMBA2,
    "bamba": frozenset({"layers_block_type", "attn_layer_indices"}) | _MAMBA2,
    "falcon_h1": frozenset({"mamba_d_ssm"}) | _MAMBA2,
    "mamba": frozenset({"state_size", "conv_kernel", "expand", "time_step_rank"}),
    "mamba2": frozenset({"state_size", "conv_kernel", "expand", "time_step_rank", "n_groups", "chunk_size"}),
    "modernbert": frozenset({"local_attention", "global_attn_every_n_layers"}),
    "listed": frozenset(),
    "step3p5": frozenset(),
    "smollm3": frozenset({"use_sliding_window", "no_rope_layers", "no_rope_layer_interval"}),
    "exaone_moe": frozenset({"sliding_window_pattern", "_sliding_window_pattern", "sliding_windows"}),
    # the indexer's heads, blocks and top-k choose keys; only its key width is cached
    "minimax_m3": frozenset({"sparse_attention_config", "index_head_dim", "index_n_heads", "index_block_size",
                             "index_topk_blocks", "index_local_blocks"}),
    "inkling": frozenset({"swa_num_attention_heads", "swa_num_key_value_heads", "swa_head_dim", "sliding_window_size",
                          "local_layer_ids", "conv_kernel_size", "sconv_kernel_size", "number_of_conv_states"}),
    "zaya": frozenset({"cca_time0", "cca_time1"}),
    "bailing": frozenset({"layer_group_size", "short_conv_kernel_size", "linear_head_dim", "linear_num_heads",
                          "linear_conv_kernel_dim"}),
    # no_rope_layers: which layers rotate the shared rope key, not what is cached
    "mistral_large4": frozenset({"kv_source_layers", "no_rope_layers", "no_rope_layer_interval"}),
    # kvmem.configs.compressed; the indexer's heads and top-k choose compressed rows, q_lora_rank is the
    # query's rank and qk_rope_head_dim the rotated part of each head_dim row: none shapes the cache
    "deepseek_v4": frozenset({"compress_ratios", "compress_rates", "compress_rate_csa", "compress_rate_hca",
                              "index_head_dim", "index_n_heads", "index_topk", "q_lora_rank", "qk_rope_head_dim"}),
}
LAYOUT_READS["inkling_loop"] = LAYOUT_READS["inkling"] | {"loop_layer_index_start", "loop_layer_index_end",
                                                         "loop_num_passes", "loop_config"}
_MLA_READS = frozenset({"kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "q_lora_rank",
                        "index_head_dim", "index_topk", "index_n_heads", "indexer_types", "index_topk_pattern",
                        "index_topk_freq", "index_skip_topk_offset"})

# Every config field that changes what a layer caches, in any family transformers 5.24 defines
# (gathered from its configuration_*.py classes). A family reads some of them; a config that
# sets one its family does not read is refused.
CACHE_FIELDS = frozenset().union(*LAYOUT_READS.values(), _MLA_READS, {
    # per-layer shapes and layer maps in other spellings
    "block_configs", "attn_config", "attn_type_list", "linear_attn_config", "hybrid_layer_pattern",
    "swa_head_dim", "swa_v_head_dim", "swa_num_key_value_heads", "swa_num_attention_heads", "sliding_window_size",
    "compress_rate_csa", "compress_rate_hca",
    "compress_ratios", "compress_rates", "kda_layers", "full_attn_layers", "full_attn_idxs", "conv_L_cache",
    "block_types", "attention_window_size", "attn_layer_indices", "hybrid_layer_ids", "kv_source_layers",
    "num_attention_heads_per_layer", "num_sliding_attention_heads", "local_layer_ids", "cross_attention_layers",
    "attention_layers", "attention_types", "window_size", "local_attention", "global_attn_every_n_layers",
    "prefix_dense_sliding_window_pattern", "loop_layer_index_start", "loop_layer_index_end",
    "number_of_conv_states", "recurrent_kv_cache_mode", "mem_len", "attn_type", "layer_group_size",
    "short_conv_kernel_size", "mtp_per_layer_config", "use_bidirectional_attention",
    # sparse-attention indexers and compressed caches
    "index_block_size", "index_local_blocks", "index_topk_blocks", "indexer_types", "index_kpool",
    "sparse_attention_config",
    "indexer_n_heads", "indexer_head_dim", "indexer_kv_heads", "indexer_compress_ratio", "indexer_budget",
    # linear attention, SSM and convolution states
    "linear_num_heads", "linear_head_dim", "state_size", "mamba_n_heads", "mamba_d_head", "mamba_n_groups",
    "mamba_headdim", "mamba_ngroups", "mamba_d_ssm", "n_mamba_heads", "num_mem_blocks", "attention_head_dim",
    "attention_hidden_size", "num_query_groups", "time_step_rank", "conv_kernel_size", "conv1d_width",
    "lru_width", "linear_attn_type",
}) - {"is_decoder"}   # read where it decides whether anything is cached (BERT-style encoders); a
                      # decoder's own config may say true without meaning more

def reads(family: Family) -> frozenset:
    """The cache fields ``family``'s layout reads (or knows to have no effect on the cache)."""
    return (_COMMON | LAYOUT_READS[family.layout] | (_MLA_READS if family.mla else frozenset())
            | family.ignored_fields)


def check_fields(cfg: dict, model_type: str, family: Family) -> None:
    """Refuse a config that sets a cache field its family does not read (named in the message)."""
    unread = sorted(name for name in CACHE_FIELDS - reads(family) if cfg.get(name) not in (None, False, 0, "", [], {}))
    if unread:
        raise ConfigError(f"config field{'s' if len(unread) > 1 else ''} {', '.join(map(repr, unread[:6]))} "
                          f"shape{'' if len(unread) > 1 else 's'} the cache, and kvmem's reading of model_type "
                          f"{model_type!r} does not use {'them' if len(unread) > 1 else 'it'}: refused rather than "
                          "sized without them")

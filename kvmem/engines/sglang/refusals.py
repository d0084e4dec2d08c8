"""The families SGLang 0.5.23 does not run, each with the reason its own code gives (EngineSpec.refusals;
kvmem.engines.check_family raises it). How SGLang picks a model class, and how kvmem checked each
answer: kvmem.engines.sglang.families and docs/research/families_sglang.md.
"""

from __future__ import annotations

_NOT_COMPATIBLE = ("SGLang 0.5.23 has no model file for {arch} (no EntryClass in python/sglang/srt/models/), and "
                   "its Transformers fallback refuses it: transformers' {arch} is not backend-compatible "
                   "(_supports_attention_backend False), so resolve_transformers_arch "
                   "(python/sglang/srt/model_loader/utils.py) raises ValueError")

_UNREADABLE = ("SGLang 0.5.23 cannot read this config: model_type {t} is neither a transformers model type nor one "
               "SGLang registers (_CONFIG_REGISTRY in python/sglang/srt/utils/hf_transformers/common.py has "
               "{registered}), and the config has no auto_map, so AutoConfig.from_pretrained "
               "(HfModelConfigParser.parse, python/sglang/srt/utils/hf_transformers/config.py) raises ValueError "
               "before any model is chosen; SGLang runs {runs}")

REFUSALS = {
    "minimax": ("SGLang 0.5.23 has no model file for MiniMax-Text-01 / MiniMax-M1 (no EntryClass for "
                "MiniMaxText01ForCausalLM, MiniMaxM1ForCausalLM or MiniMaxForCausalLM in python/sglang/srt/models/; "
                "only MiniMax-M2 and M3), and the checkpoints' architectures are not transformers classes and their "
                "auto_map has no AutoModel, so resolve_transformers_arch (python/sglang/srt/model_loader/utils.py) "
                "raises ValueError"),
    # sglang@v0.5.23 python/sglang/srt/models/transformers.py#L617 (_attn_implementation "sglang"); transformers 5.24
    # masking_utils.py#L830-L831 (no mask for an attention without a mask function), modeling_hy_v4_vl.py#L387-L395
    "hy_v4_vl_text": ("SGLang 0.5.23 has no model file for HYV4VLForConditionalGeneration (no EntryClass in "
                      "python/sglang/srt/models/; hunyuan_v4.py runs the text-only HYV4ForCausalLM), and its "
                      "Transformers backend cannot run transformers' class: with SGLang's attention implementation "
                      "transformers builds no attention mask (masking_utils.py), and HY-V4-VL's DSA indexer "
                      "subscripts it (modeling_hy_v4_vl.py: attention_mask[:, 0, :, :]), a TypeError on the first "
                      "forward; its MLA keys (qk_nope_head_dim + qk_rope_head_dim a head) do not fit the backend's "
                      "RadixAttention either (num_key_value_heads x head_dim, "
                      "python/sglang/srt/models/transformers.py)"),
    # likewise: transformers 5.24 modeling_mistral_large4.py#L452-L460 (the DSA indexer reads the mask)
    "mistral_large4_text": ("SGLang 0.5.23 has no model file for MistralLarge4ForConditionalGeneration (no EntryClass "
                            "in python/sglang/srt/models/; mistral_large_3.py's MistralLarge3ForCausalLM is "
                            "DeepSeek-V3 for Mistral-Large-3's native checkpoints), and its Transformers backend "
                            "cannot run transformers' class: with SGLang's attention implementation transformers "
                            "builds no attention mask (masking_utils.py), and Mistral-Large-4's DSA indexer "
                            "subscripts it (modeling_mistral_large4.py: attention_mask[:, 0, :, :]), a TypeError on "
                            "the first forward"),
    # sglang@v0.5.23 python/sglang/srt/models/transformers.py#L904-L956 (RadixAttention of num_key_value_heads x
    # head_dim), #L306-L323 (the attention function hands K and V on), layers/radix_attention.py#L124-L132 (views them
    # as (-1, heads, head_dim)); transformers 5.24 configuration_axk1.py#L121, configuration_youtu.py#L102 (head_dim
    # = qk_rope_head_dim), their rotary embeddings (the whole head_dim: a config.json head_dim of nope + rope fails
    # there, kvmem/oracles/sglang_families.py judges both), expand_kv (per-head K of nope + rope, V of v_head_dim)
    **{t: (f"SGLang 0.5.23 has no model file for {arch} (no EntryClass in python/sglang/srt/models/), and its "
           "Transformers backend cannot run transformers' class: the backend's RadixAttention (and ModelConfig's pool) "
           "holds num_key_value_heads x head_dim for K and V, while the MLA attention hands it per-head K of "
           "qk_nope_head_dim + qk_rope_head_dim and V of v_head_dim; RadixAttention.forward views them as (-1, heads, "
           "head_dim) (python/sglang/srt/layers/radix_attention.py), so K and V do not fit the pool's one row a token "
           f"unless head_dim is qk_nope_head_dim + qk_rope_head_dim, and transformers' {t} rotary embedding spans "
           f"the whole head_dim, which must then be qk_rope_head_dim (configuration_{t}.py sets it so)")
       for t, arch in (("axk1", "AXK1ForCausalLM"), ("youtu", "YoutuForCausalLM"))},
    # likewise: transformers 5.24 modeling_axk2.py#L615-L622 (the DSA indexer reads the mask)
    "axk2": ("SGLang 0.5.23 has no model file for AXK2ForCausalLM (no EntryClass in python/sglang/srt/models/), and "
             "its Transformers backend cannot run transformers' class: with SGLang's attention implementation "
             "transformers builds no attention mask (masking_utils.py), and A.X K2's DSA indexer subscripts it "
             "(modeling_axk2.py: attention_mask[:, 0, :, :]), a TypeError on the first forward; its MLA keys "
             "(qk_nope_head_dim + qk_rope_head_dim a head, head_dim being qk_rope_head_dim) do not fit the backend's "
             "RadixAttention either (num_key_value_heads x head_dim, python/sglang/srt/models/transformers.py)"),
    # sglang@v0.5.23 python/sglang/srt/models/transformers.py#L306-L323 (returns RadixAttention's flat output),
    # #L1020-L1030 (use_cache=False); transformers 5.24 modeling_lfm3.py#L281-L282 (the per-head gate),
    # modeling_lfm3.py Lfm3ShortConv.forward (its conv state only in transformers' cache)
    "lfm3": ("SGLang 0.5.23 has no model file for Lfm3ForCausalLM (no EntryClass in python/sglang/srt/models/; lfm2.py "
             "and lfm2_moe.py run LFM2 only), and its Transformers backend cannot run transformers' class: the "
             "backend's attention function returns RadixAttention's output flat (tokens, heads x head_dim), and "
             "LFM3's gated attention (use_attention_gate, on by default) multiplies it by a per-head gate of shape "
             "(batch, tokens, heads, 1) (modeling_lfm3.py), a RuntimeError on the first forward; and the backend runs "
             "the model with use_cache=False and allocates only RadixAttention's KV pool, so LFM3's short-convolution "
             "layers would keep no state between steps (python/sglang/srt/models/transformers.py)"),
    # sglang@v0.5.23 python/sglang/srt/utils/hf_transformers/config.py#L216-L233 (HfModelConfigParser.parse:
    # AutoConfig.from_pretrained), #L382-L389 (re-raised), utils/hf_transformers/common.py#L117-L192 (_CONFIG_REGISTRY:
    # minimax_m3_vl but no minimax_m3), #L223-L227 (deepseek_v4, deepseek_v32, the V4.1 types; no deepseek_ref);
    # transformers 5.24 has neither (configuration_auto.py CONFIG_MAPPING_NAMES)
    "deepseek_ref": _UNREADABLE.format(t="deepseek_ref", registered="deepseek_v4 and the V4.1 types",
                                       runs="DeepSeek-V4 from configs with model_type deepseek_v4"),
    **{t: _UNREADABLE.format(t=t, registered="minimax_m3_vl",
                             runs=("MiniMax-M3 from configs with model_type minimax_m3_vl, as "
                                   "MiniMaxM3SparseForConditionalGeneration (models/minimax_m3_vl.py); MiniMax's own "
                                   "architecture MiniMaxM3ForCausalLM has no EntryClass either (models/minimax_m3.py "
                                   "registers MiniMaxM3SparseForCausalLM)"))
       for t in ("minimax_m3", "minimax_m3_text")},
    # sglang@v0.5.23 python/sglang/srt/configs/zaya.py#L111-L115 (zaya_layers), #L231-L235 full_attention_layer_ids
    # (even ids without zaya_layers), #L306-L316 (registered over transformers' ZayaConfig); models/zaya.py
    # #L1414-L1420 _layer_class (even ids attention, odd MoE), #L1680-L1690 (unmatched checkpoint keys skipped with a
    # warning); no window in models/zaya.py. transformers 5.24 configuration_zaya.py#L79-L128 (layer_types)
    "zaya": ("SGLang 0.5.23 runs ZAYA1 only in Zyphra's Megatron-style layout, where attention and MoE are separate "
             "layers (zaya_layers; even layer ids attention, odd ones MoE: models/zaya.py _layer_class, weights "
             "model.layers.<2k+1>.zaya_block), and its ZayaConfig replaces transformers' for model_type zaya "
             "(python/sglang/srt/configs/zaya.py). A config in transformers' layout (one attention and one MoE per "
             "decoder layer, layer_types hybrid / hybrid_sliding), the one kvmem reads, is taken as that alternation: "
             "attention on the even layer ids only, no sliding window, and the checkpoint's keys that do not match "
             "are skipped with a warning (models/zaya.py load_weights), so SGLang does not serve that model; the "
             "Megatron-style config is refused by kvmem's reader (num_query_groups)"),
    **{t: _NOT_COMPATIBLE.format(arch=arch) for t, arch in (
        ("xglm", "XGLMForCausalLM"), ("mpt", "MptForCausalLM"), ("gpt_neo", "GPTNeoForCausalLM"),
        ("lara_mini", "LaraMiniForCausalLM"), ("olmo_hybrid", "OlmoHybridForCausalLM"),
        ("bamba", "BambaForCausalLM"), ("bailing_hybrid", "BailingHybridForCausalLM"),
        ("inkling2_text", "Inkling2ForCausalLM"), ("inkling2_loop_text", "Inkling2LoopForCausalLM"),
        # the BERT-style decoders whose attention does not go through transformers' attention interface
        ("big_bird", "BigBirdForCausalLM"), ("megatron-bert", "MegatronBertForCausalLM"),
        ("rembert", "RemBertForCausalLM"), ("roformer", "RoFormerForCausalLM"),
        # not opt-in, but SGLang 0.5.23 has no Jamba model file (no EntryClass names JambaForCausalLM) and
        # transformers' JambaForCausalLM is not backend-compatible (kvmem.engines.check_family honours any entry)
        ("jamba", "JambaForCausalLM"))},
}

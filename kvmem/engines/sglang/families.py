"""Which opt-in families (kvmem.configs.families, Family.opt_in) SGLang 0.5.23 runs, as its own code says.

SGLang picks a model class by the config's ``architectures`` (python/sglang/srt/models/registry.py: every
``EntryClass`` of python/sglang/srt/models/*.py). An architecture without one goes to the Transformers
backend (python/sglang/srt/model_loader/utils.py get_model_architecture -> resolve_transformers_arch), which
raises ValueError when transformers has no class of that name and the config's auto_map no AutoModel, or
when the class is not backend-compatible (``_supports_attention_backend`` False: "{arch} has no SGlang
implementation and the Transformers implementation is not compatible with SGLang.").

FAMILIES: the families whose layers kvmem.engines.sglang.pools lays out as SGLang's ModelConfig and pools
do, each checked with SGLang's own ModelConfig (kvmem/oracles/sglang_families.py) on the real configs in
tests/fixtures/configs/corpus where there is one, on the config class's defaults otherwise, and on seeded
variations (KV heads, latent widths, head_dim, tp): pool layer sets, bytes per token per layer and pool,
DSA indexer layers, a request's linear/Mamba state. docs/research/families_sglang.md has one row each.
"""

from __future__ import annotations

from ...configs.fields import Fields
from ...model import Model
from ...parallel import divides
from ..base import CheckedFamilies

# Families SGLang runs only through its Transformers backend whose transformers model (AutoModel) has no tensor-
# nor pipeline-parallel plan (no base_model_tp_plan / base_model_pp_plan), with that model's class name
NO_PLANS = {
    "bert": "BertModel", "bert-generation": "BertGenerationEncoder", "camembert": "CamembertModel",
    "data2vec-text": "Data2VecTextModel", "electra": "ElectraModel", "ernie": "ErnieModel",
    "roberta": "RobertaModel", "roberta-prelayernorm": "RobertaPreLayerNormModel", "roc_bert": "RoCBertModel",
    "xlm-roberta": "XLMRobertaModel", "xlm-roberta-xl": "XLMRobertaXLModel", "xmod": "XmodModel",
    "modernbert-decoder": "ModernBertDecoderModel",
    # Kosmos-2.5 (Kosmos2_5ForConditionalGeneration: TransformersMultiModalForCausalLM; its text layers write)
    "kosmos_2_5_text_model": "Kosmos2_5Model",
}

# MLA families SGLang 0.5.23 runs only through its Transformers backend (backend-compatible classes with tp and pp
# plans), with the class each checkpoint names and head_dim when the config does not set it (transformers 5.24
# configuration_mistral4.py#L130: qk_nope_head_dim + qk_rope_head_dim; a config.json's head_dim overrides it)
EXPANDED_MLA = {"mistral4": ("Mistral4ForCausalLM", "nope+rope")}

# Checked against SGLang 0.5.23's ModelConfig (kvmem/oracles/sglang_families.py); the model file each runs in:
FAMILIES = CheckedFamilies(frozenset({
    "glm_moe_dsa",        # glm4_moe.py GlmMoeDsaForCausalLM (DeepseekV2 MLA + DSA indexer; 12 GLM-5..5.3 configs)
    "gemma4_text",        # gemma4_causal.py / gemma4_mm.py: hybrid SWA, per-pool head_dim (3 Gemma-4 configs)
    "gemma4_unified_text",    # gemma4_unified.py Gemma4UnifiedForConditionalGeneration: likewise (hybrid SWA)
    "kimi_linear",        # kimi_linear.py / kimi_k3.py: MLA pool + KDA state (Kimi-Linear-48B, Kimi-K3)
    "mimo_v2_flash",      # mimo_v2.py: hybrid SWA, swa_num_key_value_heads / swa_head_dim (MiMo-V2-Flash)
    "lfm2",               # lfm2.py: attention layers + short-conv state, no SSM (LFM2.5-1.2B)
    "lfm2_moe",           # lfm2_moe.py: likewise (configs/lfm2_moe.py), conv channels hidden_size
    "exaone4",            # exaone4.py: not hybrid SWA, every layer at full length
    "exaone_moe",         # exaone_moe.py: likewise
    "laguna",             # laguna.py: hybrid SWA when sliding_window is set (Laguna-XS.2, Laguna-S-2.1)
    "nemotron-nas",       # nemotron_nas.py: one KV-head count, a buffer on every layer (no_op ones too)
    "cohere2_moe",        # cohere2_moe.py: not hybrid SWA, every layer at full length
    "afmoe",              # afmoe.py: likewise
    "granitemoehybrid",   # granitemoehybrid.py: Mamba2 state + attention layers
    "gpt_bigcode",        # gpt_bigcode.py: multi-query, one KV head
    "minicpm3",           # minicpm3.py: MLA pool (model_config.py sets AttentionArch.MLA)
    "sarvam_mla",         # sarvam_moe.py SarvamMLAForCausalLM: MLA pool
    "hy_v4",              # hunyuan_v4.py: MLA + DSA indexer on the layers that compute top-k
    "longcat_flash",      # longcat_flash.py: two MLA attentions per layer (num_attention_layers = 2 x layers)
    "qwen2_vl_text",      # qwen2_vl.py: Qwen2 text model
    "qwen2_5_vl_text",    # qwen2_5_vl.py: likewise
    "ernie4_5_vl_moe_text",   # ernie45_vl.py: every layer at full length
    "dbrx",               # dbrx.py: attn_config.kv_n_heads, head_dim d_model // n_heads (model_config.py)
    # deepseek_v4.py DeepseekV4ForCausalLM: DSV4PoolConfigurator + DeepSeekV4TokenToKVPool, sized by
    # kvmem.engines.sglang.dsv4 (judged by SGLang's own configurator and pool on the CPU,
    # tests/oracles/test_sglang_dsv4_oracle.py)
    "deepseek_v4",
    # mimo.py MiMoForCausalLM: MiMoModel(Qwen2Model), num_hidden_layers Qwen2 layers; the MTP layers run only as
    # the MiMoMTP draft (mimo_mtp.py) of speculative decoding, which kvmem does not model. ModelConfig needs the
    # checkpoint's own config code here, so this one is checked by source reading and tests/engines.
    "mimo",
    # mamba.py / falcon_mamba.py: pure SSM (PURE_SSM_ARCHITECTURES, model_config.py#L1334-L1345): a zero-byte KV
    # cell, a Mamba1 state per request (conv inner/tp x (kernel - 1), SSM inner/tp x d_state in float32)
    "mamba", "falcon_mamba",
    # mamba2.py Mamba2ForCausalLM: pure SSM too (PURE_SSM_ARCHITECTURES), a Mamba2 state per layer (conv
    # intermediate_size + 2 x n_groups x state_size channels, SSM num_heads x head_dim x state_size); SGLang's
    # Mamba2Config reads intermediate_size, which the config.json must carry (check below)
    "mamba2",
    # falcon_h1.py FalconH1ForCausalLM: attention and a Mamba2 mixer on every layer; configs/falcon_h1.py gives
    # full_attention_layer_ids and the state's layers as every layer: each layer is in the KV pool and has a state
    # (pools.make_layout: a layer with a state is a state layer whatever its kind)
    "falcon_h1",
    # no EntryClass: SGLang runs these through its Transformers backend (models/transformers.py, backend-compatible
    # classes with tp and pp plans), whose pool is ModelConfig's: one MHA pool, every layer at full length
    "smollm3", "dots1",
    # EXAONE-4.5 (Exaone4_5_ForConditionalGeneration, text model exaone4): no EntryClass either; transformers' class
    # is backend-compatible with tp and pp plans, so the multimodal Transformers backend runs it; ModelConfig's pool
    # is one MHA pool on every layer (the sliding ones at full length: not in is_hybrid_swa_model), and every text
    # layer writes that row (backend_writes). Judged with transformers 5.24; SGLang 0.5.23 pins 5.19.
    "exaone4_5_text",
    # step3p5.py Step3p5ForCausalLM / step3p7.py Step3p7ForConditionalGeneration: hybrid SWA, the sliding layers'
    # KV heads attention_other_setting.num_attention_groups (pools._step3p5_swa_kv_heads)
    "step3p5",
    # no EntryClass either: the BERT-style decoders (is_decoder true; their checkpoints' architectures are the
    # *ForCausalLM / *LMHeadModel / BertGenerationDecoder classes, which is_generation_model counts as generative)
    # and ModernBERT-Decoder, whose transformers classes are backend-compatible: the Transformers backend builds
    # AutoModel (BertModel, ...: every self-attention causal, so not "encoder-only") and gives every layer a
    # RadixAttention of num_attention_heads x hidden_size // num_attention_heads for K and V
    # (sglang@v0.5.23 python/sglang/srt/models/transformers.py#L904-L956), which the pool ModelConfig sizes holds:
    # one MHA pool, every layer at full length (ModernBERT-Decoder's sliding layers too: not in is_hybrid_swa_model).
    # Judged by running each AutoModel with SGLang's attention function (kvmem/oracles/sglang_families.py
    # backend_writes): every layer writes K and V of exactly the pool's row. No tp/pp plan: tp, pp > 1 refused below.
    # Kosmos-2.5 likewise, as a multimodal model (the text model's 24 layers; the vision encoder keeps no KV).
    *NO_PLANS,
    # no EntryClass either: MLA families SGLang runs through its Transformers backend, whose RadixAttention takes the
    # per-head K and V transformers' attention expands from the latent (expanded_mla_shape below): one MHA pool of
    # num_key_value_heads x head_dim for K and for V, every layer at full length (ModelConfig sees no MLA
    # architecture); judged by ModelConfig and backend_writes (kvmem/oracles/sglang_families.py)
    *EXPANDED_MLA,
    # minimax_m3_vl.py MiniMaxM3SparseForConditionalGeneration (minimax_m3.py MiniMaxM3SparseForCausalLM): one MHA
    # pool on every layer and, on the sparse layers, one-head indexer pools of sparse_index_dim in the model dtype,
    # K and V (K only where sparse_disable_index_value) (pools.make_layout, MiniMaxSparseKVPool); another
    # architecture runs through the Transformers backend: one MHA pool (backend_writes: the indexer keeps nothing)
    "minimax_m3_vl_text",
    # inkling.py InklingForConditionalGeneration (model_type inkling_mm_model, SGLang's own InklingMMConfig): hybrid
    # SWA on local_layer_ids plus a bfloat16 short-convolution state a request on every layer, sized by
    # kvmem.engines.sglang.inkling; judged by SGLang's ModelConfig, InklingConvCacheParams, _handle_max_mamba_cache,
    # HybridSWAPoolConfigurator and resolve_max_num_reqs on the CPU (kvmem/oracles/sglang_inkling.py)
    "inkling_text",
}))


# sglang@v0.5.23 python/sglang/srt/configs/model_config.py#L426-L431 is_minimax_sparse: MiniMax-M3's sparse pool
# (MiniMaxSparseKVPool) for these two architectures (architectures[0]); models/minimax_m3.py#L2274,
# minimax_m3_vl.py#L479
MINIMAX_SPARSE = ("MiniMaxM3SparseForCausalLM", "MiniMaxM3SparseForConditionalGeneration")


def minimax_sparse(model: Model) -> tuple[dict[int, bool], int] | None:
    """SGLang's MiniMax-M3 indexer pools: ({sparse layer: whether its index value is kept}, sparse_index_dim), or
    None where SGLang builds no MiniMaxSparseKVPool (architectures[0] not in MINIMAX_SPARSE)."""
    archs = model.config.get("architectures") or []
    if not archs or archs[0] not in MINIMAX_SPARSE:
        return None
    text = model.config.get("text_config")
    # sglang@v0.5.23 python/sglang/srt/configs/model_config.py#L446-L457 get_minimax_sparse_attention_config: the
    # text config's, else the top config's. SGLang's MiniMaxM3VLConfig keeps a text_config's fields as they are
    # (configs/minimax_vl.py), while a top-level minimax_m3_vl_text config is read by transformers'
    # MiniMaxM3VLTextConfig, which consumes sparse_attention_config into layer_types (configuration_minimax_m3_vl.py
    # __post_init__): SGLang then finds none
    sparse = ((text.get("sparse_attention_config") or model.config.get("sparse_attention_config"))
              if isinstance(text, dict) else None)
    if not isinstance(sparse, dict):
        raise ValueError("SGLang 0.5.23 raises ValueError \"Could not find sparse config. Is it MiniMax M3 Sparse "
                         "model?\" (python/sglang/srt/configs/model_config.py get_minimax_sparse_attention_config): "
                         f"{archs[0]} needs sparse_attention_config, which it reads from a minimax_m3_vl config's "
                         "text_config (transformers' MiniMaxM3VLTextConfig consumes it from a top-level text config)")
    fields = Fields(sparse, model.model_type)
    freq = sparse.get("sparse_attention_freq")
    if not isinstance(freq, list) or len(freq) != model.num_layers:
        raise ValueError(f"sparse_attention_config.sparse_attention_freq must list one flag per layer "
                         f"({model.num_layers}): SGLang 0.5.23 reads its sparse layers from it "
                         "(python/sglang/srt/configs/model_config.py get_minimax_sparse_layer_ids)")
    flags = sparse.get("sparse_disable_index_value") or [0] * len(freq)
    if not isinstance(flags, list) or len(flags) < len(freq):
        raise ValueError("sparse_attention_config.sparse_disable_index_value must list one flag per layer")
    # model_config.py#L460-L471 get_minimax_sparse_layer_ids (freq != 0), get_minimax_sparse_disable_value_layer_ids
    layers = {i: not flags[i] for i, f in enumerate(freq) if f}
    return layers, fields.int("sparse_index_dim")


# The architectures SGLang 0.5.23 registers for Step-3.5 / Step-3.7 (models/step3p5.py#L952, step3p7.py#L199)
_STEP_ARCHITECTURES = frozenset({"Step3p5ForCausalLM", "Step3p7ForConditionalGeneration"})

# The families SGLang runs through its Transformers backend with tensor-parallel plans
BACKEND_WITH_PLANS = frozenset({"smollm3", "dots1", "exaone4_5_text", *EXPANDED_MLA})


def _cannot_run(model_type: str, why: str) -> str:
    return (f"SGLang 0.5.23 has no model file for {EXPANDED_MLA[model_type][0]} (no EntryClass in python/sglang/srt/"
            f"models/), and its Transformers backend cannot run this config: {why}; RadixAttention.forward views K and "
            "V as (-1, heads, head_dim) (python/sglang/srt/layers/radix_attention.py), so they do not fit the pool's "
            "one row a token")


def expanded_mla_shape(model: Model) -> tuple[int, int]:
    """(KV heads, head_dim) of the MHA pool SGLang's Transformers backend gives an EXPANDED_MLA family, or the
    ValueError SGLang's run ends in. The backend makes every layer a RadixAttention of num_key_value_heads x
    head_dim for K and V (sglang@v0.5.23 python/sglang/srt/models/transformers.py#L904-L956) and views what the
    attention hands it as (-1, heads, head_dim) (layers/radix_attention.py#L124-L132); transformers' MLA attention
    hands it per-head K of qk_nope_head_dim + qk_rope_head_dim and V of v_head_dim (modeling_mistral4.py
    expand_kv, #L441-L500) for num_attention_heads heads, so the three widths must be head_dim and the KV heads the
    query heads."""
    cfg: dict = model.config.get("text_config") if isinstance(model.config.get("text_config"), dict) else \
        model.config     # type: ignore[assignment]  # a dict either way: the isinstance test
    t = model.model_type
    archs = model.config.get("architectures") or []
    if t == "mistral4" and "Mistral3ForConditionalGeneration" in archs:
        # sglang@v0.5.23 python/sglang/srt/models/llava.py#L661-L690 _get_sgl_model_cls, #L779-L781; models/registry.py
        # #L54-L66: Mistral4Config -> Mistral4ForCausalLM, which the registry does not have
        raise ValueError("SGLang 0.5.23 runs Mistral3ForConditionalGeneration as Llava (models/mistral.py), which "
                         "looks the text model up by its config class: Mistral4Config -> Mistral4ForCausalLM, not in "
                         "SGLang's model registry, so _get_sgl_model_cls raises ValueError (\"failed to load it from "
                         "SGLang ModelRegistry\", python/sglang/srt/models/llava.py); a config naming "
                         "Mistral4ForCausalLM runs through the Transformers backend")
    f = Fields(cfg, t)
    nope, rope, v = f.int("qk_nope_head_dim"), f.int("qk_rope_head_dim"), cfg.get("v_head_dim")
    head_dim = cfg.get("head_dim")   # transformers 5.24 configuration_mistral4.py#L130 when unset
    if head_dim is None:
        head_dim = nope + rope if EXPANDED_MLA[t][1] == "nope+rope" else rope
    if not (head_dim == nope + rope == v):
        raise ValueError(_cannot_run(t, f"the backend's RadixAttention (and ModelConfig's pool) holds "
                                        f"num_key_value_heads x head_dim ({head_dim}) for K and V, while the MLA "
                                        f"attention hands it per-head K of qk_nope_head_dim + qk_rope_head_dim "
                                        f"({nope + rope}) and V of v_head_dim ({v})"))
    heads = f.int("num_attention_heads")
    kv = heads if cfg.get("num_key_value_heads") is None else f.int("num_key_value_heads")
    if kv != heads:
        # the latent is expanded to num_attention_heads heads of K and V (kv_b_proj), the instance has kv
        raise ValueError(_cannot_run(t, f"transformers' MLA attention expands the latent to num_attention_heads "
                                        f"({heads}) heads of K and V, while the backend's RadixAttention (and "
                                        f"ModelConfig's pool) holds num_key_value_heads ({kv})"))
    return kv, head_dim


def check(model: Model, tp: int = 1, pp: int = 1) -> None:
    """What SGLang 0.5.23's own code refuses for a family it runs."""
    if model.model_type in EXPANDED_MLA:
        kv, _ = expanded_mla_shape(model)
        if not divides(tp, kv):
            # sglang@v0.5.23 python/sglang/srt/models/transformers.py#L943-L949 divide(num_kv_heads, tp)
            raise ValueError(f"SGLang 0.5.23 runs {model.model_type} through its Transformers backend, whose "
                             f"RadixAttention divides the {kv} KV heads by tp {tp} (divide() asserts divisibility, "
                             "python/sglang/srt/models/transformers.py): tp must divide them")
    if model.model_type in BACKEND_WITH_PLANS and tp > 1:
        # sglang@v0.5.23 python/sglang/srt/models/transformers.py#L943-L949: RadixAttention(num_heads=divide(
        # num_heads, tp), num_kv_heads=divide(num_kv_heads, tp)); distributed/utils.py#L75-L79 divide asserts it
        kv_counts = {layer.kv_heads for layer in model.layers if layer.kv_heads}
        bad = sorted(h for h in kv_counts if not divides(tp, h))
        if bad:
            raise ValueError(f"SGLang 0.5.23 runs {model.model_type} through its Transformers backend, whose "
                             f"RadixAttention divides the {bad[0]} KV heads by tp {tp} (divide() asserts "
                             "divisibility, python/sglang/srt/models/transformers.py): tp must divide them")
    base = NO_PLANS.get(model.model_type)
    if base and (tp > 1 or pp > 1):
        # sglang@v0.5.23 python/sglang/srt/models/transformers.py#L760-L767 recursive_replace (tp),
        # #L848-L856 pipeline_parallel (pp): no plan in the transformers model or its config
        what, n = ("tensor", tp) if tp > 1 else ("pipeline", pp)
        raise ValueError(f"SGLang 0.5.23 runs {model.model_type} only through its Transformers backend, which raises "
                         f"ValueError at {what[0]}p {n}: transformers' {base} has no {what}-parallel plan "
                         f"(\"{base} does not support {what} parallel yet!\", "
                         "python/sglang/srt/models/transformers.py)")
    if model.model_type == "minimax_m3_vl_text":
        quant = model.config.get("quantization_config") or {}
        if isinstance(quant, dict) and quant.get("quant_method") == "minimax_m3_nvfp4":
            # sglang@v0.5.23 python/sglang/srt/configs/model_config.py#L434-L443, kv_cache_configurator.py#L2573-L2576
            raise ValueError("quantization_config.quant_method minimax_m3_nvfp4: SGLang 0.5.23 picks MiniMax-M3's pool "
                             "for these checkpoints by the GPU (on Blackwell the packed MiniMaxM3Nvfp4KVPool, "
                             "elsewhere MiniMaxSparseKVPool), and an estimate names no GPU to choose by")
        if minimax_sparse(model) is None and tp > 1:
            # no EntryClass for the architecture: the Transformers backend, whose RadixAttention divides the KV
            # heads by tp (sglang@v0.5.23 python/sglang/srt/models/transformers.py#L943-L949)
            bad = sorted({layer.kv_heads for layer in model.layers if not divides(tp, layer.kv_heads)})
            if bad:
                raise ValueError(f"SGLang 0.5.23 runs this MiniMax-M3 architecture through its Transformers backend, "
                                 f"whose RadixAttention divides the {bad[0]} KV heads by tp {tp} (divide() asserts "
                                 "divisibility, python/sglang/srt/models/transformers.py): tp must divide them")
    if model.model_type == "step3p5":
        archs = model.config.get("architectures") or []
        if archs and not set(archs) & _STEP_ARCHITECTURES and not model.config.get("auto_map"):
            # sglang@v0.5.23 python/sglang/srt/model_loader/utils.py#L154-L160 resolve_transformers_arch
            raise ValueError(f"SGLang 0.5.23 has no model file for {archs[0]} (it runs Step3p5ForCausalLM and "
                             "Step3p7ForConditionalGeneration), transformers has no class of that name and the config "
                             "no auto_map, so resolve_transformers_arch raises ValueError (\"Cannot find model "
                             "module\", python/sglang/srt/model_loader/utils.py)")
    if model.model_type == "mamba2":
        inner = model.config.get("intermediate_size")
        if inner is None:
            # sglang@v0.5.23 python/sglang/srt/configs/mamba2.py#L41-L55 mamba2_cache_params (and models/mamba2.py
            # #L70-L78) read config.intermediate_size; transformers' Mamba2Config (4.x, 5.24) defines no such field
            raise ValueError("intermediate_size is not set: SGLang 0.5.23's Mamba2Config.mamba2_cache_params reads "
                             "config.intermediate_size (python/sglang/srt/configs/mamba2.py), which transformers' "
                             "Mamba2Config does not define, so SGLang raises AttributeError at startup")
        # SGLang's Mamba2Config subclasses transformers' (configs/mamba2.py#L17-L22): a left-out field takes its default
        f = Fields(model.config, "mamba2")
        heads, head_dim = f.get("num_heads"), f.get("head_dim")
        if inner != heads * head_dim:
            # sglang@v0.5.23 python/sglang/srt/layers/attention/mamba/mamba.py#L221-L224: the mixer shards
            # intermediate_size through num_heads, taking intermediate_size = num_heads x head_dim
            raise ValueError(f"intermediate_size {inner} is not num_heads x head_dim ({heads} x {head_dim}): SGLang "
                             "0.5.23's Mamba2 mixer takes them equal (layers/attention/mamba/mamba.py); kvmem does not "
                             "size a config whose conv and SSM widths disagree")
    if model.model_type == "xmod" and not model.config.get("default_language"):
        # SGLang's Transformers backend calls XmodModel with no lang_ids (models/transformers.py#L1000-L1034);
        # transformers 5.24 modeling_xmod.py#L731-L736 then needs the config's default_language
        raise ValueError("default_language is not set: SGLang 0.5.23's Transformers backend passes no lang_ids, and "
                         "transformers' XmodModel raises ValueError \"Input language unknown. Please call "
                         "`XmodPreTrainedModel.set_default_language()`\" (modeling_xmod.py)")
    if model.model_type == "nemotron-nas":
        blocks = [b.get("attention") or {} for b in (model.config.get("block_configs") or []) if isinstance(b, dict)]
        # sglang@v0.5.23 python/sglang/srt/configs/model_config.py#L1655-L1667 get_total_num_kv_heads
        linear = [i for i, a in enumerate(blocks) if a.get("replace_with_linear") and not a.get("no_op")]
        if linear:
            raise ValueError(f"block_configs[{linear[0]}].attention.replace_with_linear: SGLang 0.5.23 has no "
                             "linear-attention path for it (nemotron_nas.py) and model_config.py "
                             "get_total_num_kv_heads divides by its n_heads_in_group")
        groups = {a.get("n_heads_in_group") for a in blocks if not a.get("no_op")}
        if len(groups) > 1:
            raise ValueError("SGLang 0.5.23 raises ValueError: Variable GQA (VGQA) is not yet supported for "
                             "nemotron-nas in sglang (model_config.py get_total_num_kv_heads; n_heads_in_group "
                             f"{sorted(groups, key=str)})")

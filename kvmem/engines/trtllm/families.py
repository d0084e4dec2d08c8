"""Which opt-in families (kvmem.configs.families, Family.opt_in) TensorRT-LLM's PyTorch backend runs.

The judge is the backend's model registry: AutoModelForCausalLM.from_config looks the config's
``architectures[0]`` up in MODEL_CLASS_MAPPING, filled by the ``@register_auto_model`` decorators
of tensorrt_llm/_torch/models/modeling_*.py, and raises "Unknown architecture for
AutoModelForCausalLM" for any other (trtllm@5d4a661c tensorrt_llm/_torch/models/modeling_auto.py#L37-L41). The
registry is read off its static index, which a test of the project holds equal to those decorators:
trtllm@065ff9e9 tensorrt_llm/_torch/models/_arch_index.py#L36-L118 MODEL_ARCH_TO_MODULE (81 architectures).

REFUSALS: the families whose published architecture that index lacks (a family's architecture is
the one its config.json names: transformers 5.24's class for the model_type, a multimodal text config's
outer model class, or PUBLISHED's where the checkpoints name another), base families included (85 of 115,
among them GPT-2, GPT-NeoX, Falcon, Gemma and Gemma 2, DeepSeek-V2, OPT, Bloom, Phi-2, Granite, EXAONE 3.5:
kvmem's command is trtllm-serve --backend pytorch, whose loader is that registry, not the legacy TensorRT engine
builder's MODEL_MAP).
check_architecture: any config whose architectures[0] the index lacks, whatever its model_type.
FAMILIES: the families it runs whose cache kvmem's trtllm rules lay out as the model file and the
cache manager do, each with the file that shows it (docs/research/families_trtllm.md has the table).
"""

from __future__ import annotations

from ...configs.families import FAMILIES as READ_FAMILIES
from ...errors import EngineRefusal
from ..base import CheckedFamilies

__all__ = ["REGISTRY", "REGISTERED", "REFUSALS", "PUBLISHED", "FAMILIES", "check_architecture"]

# the registry as the refusals name it (trtllm@065ff9e9 tensorrt_llm/_torch/models/_arch_index.py#L36-L118)
REGISTRY = "trtllm@065ff9e9 tensorrt_llm/_torch/models/_arch_index.py#L36-L118"
_NO_ARCH = ("TensorRT-LLM's PyTorch backend registers no {arch} ({registry} MODEL_ARCH_TO_MODULE; "
            "modeling_auto.py AutoModelForCausalLM raises 'Unknown architecture')")
# MODEL_ARCH_TO_MODULE's 81 keys, one a line in its order
# (trtllm@065ff9e9 tensorrt_llm/_torch/models/_arch_index.py#L37-L117: "AfmoeForCausalLM" is #L37, REGISTERED[i] #L37+i)
REGISTERED = (
    "AfmoeForCausalLM", "BartForConditionalGeneration", "BertForSequenceClassification", "CLIPVisionModel",
    "Cohere2ForCausalLM", "Cosmos3ForConditionalGeneration", "DeciLMForCausalLM", "DeepseekV32ForCausalLM",
    "DeepseekV3ForCausalLM", "DeepseekV4ForCausalLM", "EAGLE3LlamaForCausalLM", "Eagle3DeepSeekV3ForCausalLM",
    "Exaone4ForCausalLM", "Exaone4_5_ForConditionalGeneration", "ExaoneMoEForCausalLM", "Gemma3ForCausalLM",
    "Gemma3ForConditionalGeneration", "Gemma4AssistantForCausalLM", "Gemma4ForCausalLM",
    "Gemma4ForConditionalGeneration", "Gemma4UnifiedForConditionalGeneration", "Glm4MoeForCausalLM",
    "GlmMoeDsaForCausalLM", "GptOssForCausalLM", "HCXVisionForCausalLM", "HCXVisionModel",
    "HunYuanDenseV1ForCausalLM", "HunYuanMoEV1ForCausalLM", "KimiK25ForConditionalGeneration",
    "KimiK3ForConditionalGeneration", "KimiLinearForCausalLM", "LagunaForCausalLM", "Llama4ForConditionalGeneration",
    "LlamaForCausalLM", "LlavaLlamaModel", "LlavaNextForConditionalGeneration", "MBartForConditionalGeneration",
    "MTPDraftModelForCausalLM", "MiniCPMV4_6ForConditionalGeneration", "MiniMaxM2ForCausalLM",
    "MiniMaxM3SparseForCausalLM", "MiniMaxM3SparseForConditionalGeneration", "Mistral3ForConditionalGeneration",
    "MistralForCausalLM", "MistralLarge3EagleForCausalLM", "MistralLarge3ForCausalLM", "MixtralForCausalLM",
    "MllamaForConditionalGeneration", "NemotronForCausalLM", "NemotronHForCausalLM", "NemotronHPuzzleForCausalLM",
    "NemotronH_Nano_Omni_Reasoning_V3", "NemotronH_Nano_VL_V2", "Phi3ForCausalLM", "Phi4MMForCausalLM",
    "PixtralForConditionalGeneration", "PixtralVisionModel", "Qwen2ForCausalLM", "Qwen2ForProcessRewardModel",
    "Qwen2ForRewardModel", "Qwen2MoeForCausalLM", "Qwen2VLForConditionalGeneration",
    "Qwen2_5_VLForConditionalGeneration", "Qwen3ForCausalLM", "Qwen3ForTextEmbedding", "Qwen3MoeForCausalLM",
    "Qwen3NextForCausalLM", "Qwen3VLForConditionalGeneration", "Qwen3VLMoeForConditionalGeneration",
    "Qwen3_5ForCausalLM", "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForCausalLM",
    "Qwen3_5MoeForConditionalGeneration", "QwenImageBenchForConditionalGeneration", "SeedOssForCausalLM",
    "SiglipVisionModel", "Starcoder2ForCausalLM", "Step3p5ForCausalLM", "Step3p7ForConditionalGeneration",
    "T5ForConditionalGeneration", "WhisperForConditionalGeneration",
)

# model_type -> the architecture its published config.json names
_UNREGISTERED = {
    "axk1": "AXK1ForCausalLM",
    "axk2": "AXK2ForCausalLM",
    "bailing_hybrid": "BailingHybridForCausalLM",
    "bamba": "BambaForCausalLM",
    "cohere2_moe": "Cohere2MoeForCausalLM (it has Cohere2ForCausalLM only)",
    "dbrx": "DbrxForCausalLM",
    "dots1": "Dots1ForCausalLM",
    "ernie4_5_vl_moe_text": "Ernie4_5_VLMoeForConditionalGeneration",
    "falcon_h1": "FalconH1ForCausalLM",
    "falcon_mamba": "FalconMambaForCausalLM",
    "glm4": "Glm4ForCausalLM (it has Glm4MoeForCausalLM only)",     # GLM-4-0414 / GLM-Z1-0414: not opt-in
    "gpt_bigcode": "GPTBigCodeForCausalLM",
    "gpt_neo": "GPTNeoForCausalLM",
    "granitemoehybrid": "GraniteMoeHybridForCausalLM",
    "hy_v4": "HYV4ForCausalLM (it has HunYuanDenseV1/HunYuanMoEV1 only)",
    "hy_v4_vl_text": "HYV4VLForConditionalGeneration",
    "inkling_text": "InklingForConditionalGeneration / InklingForCausalLM",
    "inkling2_text": "Inkling2ForConditionalGeneration / Inkling2ForCausalLM",
    "inkling2_loop_text": "Inkling2LoopForConditionalGeneration / Inkling2LoopForCausalLM",
    "kosmos_2_5_text_model": "Kosmos2_5ForConditionalGeneration",
    "lara_mini": "LaraMiniForCausalLM",
    "lfm2": "Lfm2ForCausalLM",
    "lfm2_moe": "Lfm2MoeForCausalLM",
    "lfm3": "Lfm3ForCausalLM",
    "longcat_flash": "LongcatFlashForCausalLM",
    "mamba": "MambaForCausalLM",
    "mamba2": "Mamba2ForCausalLM (its Mamba-2 layers run only inside NemotronH)",
    "mimo": "MiMoForCausalLM",
    "mimo_v2_flash": "MiMoV2FlashForCausalLM",
    "minicpm3": "MiniCPM3ForCausalLM",
    "minimax": "MiniMaxText01ForCausalLM / MiniMaxM1ForCausalLM (it has MiniMaxM2 and MiniMaxM3Sparse only)",
    "mistral4": "Mistral4ForCausalLM (its MistralLarge3ForCausalLM is another model)",
    "mistral_large4_text": "MistralLarge4ForConditionalGeneration (its MistralLarge3ForCausalLM is another model)",
    "modernbert-decoder": "ModernBertDecoderForCausalLM",
    "mpt": "MptForCausalLM / MPTForCausalLM",
    "olmo_hybrid": "OlmoHybridForCausalLM",
    "sarvam_mla": "SarvamMLAForCausalLM",
    "smollm3": "SmolLM3ForCausalLM",
    "xglm": "XGLMForCausalLM",
    "youtu": "YoutuForCausalLM",
    "zaya": "ZayaForCausalLM",
}
# Base families (read by every mode) whose checkpoints name an architecture the registry lacks (transformers 5.24's
# class for the model_type, MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, which save_pretrained writes; a test holds each to it).
# kvmem's launch command names --backend pytorch (launch.py), which builds the PyTorch LLM and so AutoModelForCausalLM
# over this registry; a legacy TensorRT engine (trtllm-build, then --backend tensorrt) is another loader: its MODEL_MAP
# maps GPT2LMHeadModel (trtllm@02267d3d tensorrt_llm/models/__init__.py#L144), OPTForCausalLM, BloomForCausalLM,
# FalconForCausalLM and RWForCausalLM, PhiForCausalLM (#L153-L157), PhiMoEForCausalLM (#L161), GPTNeoXForCausalLM and
# GPTJForCausalLM (#L164-L165), GraniteForCausalLM and GraniteMoeForCausalLM (#L183-L184), Gemma and Gemma 2
# (GEMMA_ARCHITECTURE, GEMMA2_ARCHITECTURE: #L192-L193), DeepseekV2ForCausalLM (#L214) and CohereForCausalLM (#L216),
# ExaoneForCausalLM (#L175),
# none of which the command kvmem prints builds
_LEGACY = ("; TensorRT-LLM's legacy TensorRT engine builder (trtllm-build, then trtllm-serve --backend tensorrt) "
           "has a class for it, and the command kvmem prints runs --backend pytorch")
_UNREGISTERED_BASE = {
    "gpt2": ("GPT2LMHeadModel", _LEGACY),
    "gpt_neox": ("GPTNeoXForCausalLM", _LEGACY),
    "falcon": ("FalconForCausalLM (nor the older RWForCausalLM)", _LEGACY),
    # modeling_gemma2.py registers Gemma2ForCausalLM at another main commit (trtllm@04d175ac
    # tensorrt_llm/_torch/models/modeling_gemma2.py#L265-L266, an eagerly imported zoo without the index): at the pin
    # the index, held equal to the decorators, has none, so this answer moves with the commit
    "gemma2": ("Gemma2ForCausalLM (its Gemma classes are Gemma 3's and Gemma 4's)", _LEGACY),
    "deepseek_v2": ("DeepseekV2ForCausalLM (it has DeepseekV3ForCausalLM and DeepseekV32ForCausalLM only)", _LEGACY),
    "gemma3n_text": ("Gemma3nForConditionalGeneration / Gemma3nForCausalLM", ""),
    "jamba": ("JambaForCausalLM", ""),
    "bloom": ("BloomForCausalLM", _LEGACY),
    "opt": ("OPTForCausalLM", _LEGACY),
    "phi": ("PhiForCausalLM (its Phi classes are Phi3ForCausalLM and Phi4MMForCausalLM)", _LEGACY),
    "phimoe": ("PhiMoEForCausalLM / PhimoeForCausalLM", _LEGACY),
    "gptj": ("GPTJForCausalLM", _LEGACY),
    "granite": ("GraniteForCausalLM", _LEGACY),
    "granitemoe": ("GraniteMoeForCausalLM", _LEGACY),
    "gemma": ("GemmaForCausalLM (its Gemma classes are Gemma 3's and Gemma 4's)", _LEGACY),
    "cohere": ("CohereForCausalLM (it has Cohere2ForCausalLM only)", _LEGACY),
    **{t: (arch, "") for t, arch in (
        ("arcee", "ArceeForCausalLM"), ("biogpt", "BioGptForCausalLM"), ("bitnet", "BitNetForCausalLM"),
        ("codegen", "CodeGenForCausalLM"), ("cpmant", "CpmAntForCausalLM"), ("ctrl", "CTRLLMHeadModel"),
        ("diffllama", "DiffLlamaForCausalLM"), ("ernie4_5", "Ernie4_5ForCausalLM"),
        ("ernie4_5_moe", "Ernie4_5_MoeForCausalLM"), ("flex_olmo", "FlexOlmoForCausalLM"),
        ("glm", "GlmForCausalLM (it has Glm4MoeForCausalLM and GlmMoeDsaForCausalLM only)"),
        ("glm4_moe_lite", "Glm4MoeLiteForCausalLM (it has Glm4MoeForCausalLM only)"),
        ("gpt_neox_japanese", "GPTNeoXJapaneseForCausalLM"), ("granitemoeshared", "GraniteMoeSharedForCausalLM"),
        ("helium", "HeliumForCausalLM"), ("jetmoe", "JetMoeForCausalLM"), ("olmo", "OlmoForCausalLM"),
        ("olmo2", "Olmo2ForCausalLM"), ("olmo3", "Olmo3ForCausalLM"), ("olmoe", "OlmoeForCausalLM"),
        ("openai-gpt", "OpenAIGPTLMHeadModel"), ("persimmon", "PersimmonForCausalLM"),
        ("stablelm", "StableLmForCausalLM"), ("vaultgemma", "VaultGemmaForCausalLM"),
        # transformers 5.24's class for the model_type (MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)
        ("apertus", "ApertusForCausalLM"), ("apertus1p5_text", "Apertus1p5TextForCausalLM"),
        ("aria_text", "AriaTextForCausalLM"), ("beam", "BeamForCausalLM"),
        ("cohere_compass_text", "CohereCompassForCausalLM"), ("cwm", "CwmForCausalLM"), ("doge", "DogeForCausalLM"),
        ("flint", "FlintForCausalLM"), ("git", "GitForCausalLM"), ("granite_swa", "GraniteSWAForCausalLM"),
        ("granitemoe_swa", "GraniteMoeSWAForCausalLM"), ("hrm_text", "HrmTextForCausalLM"),
        ("hy_v3", "HYV3ForCausalLM (it has HunYuanDenseV1/HunYuanMoEV1 only)"),
        ("hyperclovax", "HyperCLOVAXForCausalLM (its HyperCLOVAX classes are the HCXVision models)"),
        ("jais2", "Jais2ForCausalLM"), ("kolibri1", "Kolibri1ForCausalLM"), ("mellum", "MellumForCausalLM"),
        ("ministral", "MinistralForCausalLM"), ("moshi", "MoshiForCausalLM"), ("nanochat", "NanoChatForCausalLM"),
        ("phi4_multimodal", "Phi4MultimodalForCausalLM (its Phi4MMForCausalLM reads Microsoft's own phi4mm files)"),
        ("solar_open", "SolarOpenForCausalLM"),
        # text configs of multimodal models: the checkpoints name the model's class, transformers 5.24's
        # MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES entry for the outer model_type
        ("blip_text_model", "BlipForConditionalGeneration"), ("chameleon", "ChameleonForConditionalGeneration"),
        ("cosmos3_edge_text", "Cosmos3EdgeForConditionalGeneration (it has Cosmos3ForConditionalGeneration only)"),
        ("deepseek_ocr2_text", "DeepseekOcr2ForConditionalGeneration"),
        ("emu3_text_model", "Emu3ForConditionalGeneration"), ("evolla", "EvollaForProteinText2Text"),
        ("glm4v_text", "Glm4vForConditionalGeneration"), ("glm_ocr_text", "GlmOcrForConditionalGeneration"),
        ("granite4_vision_text", "Granite4VisionForConditionalGeneration"),
        ("granite_docling_text", "GraniteDoclingForConditionalGeneration"),
        ("hunyuan_vl_text", "HunYuanVLForConditionalGeneration"), ("idefics", "IdeficsForVisionText2Text"),
        ("molmo2_text", "Molmo2ForConditionalGeneration"), ("muse_glimmer_text", "MuseGlimmerForConditionalGeneration"),
        ("muse_spark_text", "MuseSparkForConditionalGeneration"),
        ("paddleocr_vl_text", "PaddleOCRVLForConditionalGeneration"),
        ("pix2struct_text_model", "Pix2StructForConditionalGeneration"), ("udop", "UdopForConditionalGeneration"),
        # transformers reads these as LlamaForCausalLM / Glm4MoeForCausalLM, but the published checkpoints name
        # their own class (PUBLISHED below)
        ("internlm3", "InternLM3ForCausalLM"), ("iquestcoder", "IQuestCoderForCausalLM"),
        ("sarvam_moe", "SarvamMoEForCausalLM"))},
    # EXAONE 3.0 / 3.5's checkpoints name ExaoneForCausalLM (3.0's: tests/fixtures/hub/LGAI-EXAONE--EXAONE-3.0-7.8B-
    # Instruct.json) where transformers reads the model_type as LlamaForCausalLM; the legacy MODEL_MAP has it
    # (trtllm@02267d3d tensorrt_llm/models/__init__.py#L175)
    "exaone": ("ExaoneForCausalLM", _LEGACY),
}
# Families whose published checkpoints name another class than transformers 5.24's for the model_type (None: kvmem's
# own, naming none); the base ones' class is refused above where the registry lacks it. The SGLang EntryClass names are
# the checkpoints' own (sglang@v0.5.23 python/sglang/srt/models/llama.py#L960-L965 InternLM3ForCausalLM,
# IQuestCoderForCausalLM; sarvam_moe.py#L1407 SarvamMoEForCausalLM)
PUBLISHED = {
    "exaone": "ExaoneForCausalLM", "internlm3": "InternLM3ForCausalLM", "iquestcoder": "IQuestCoderForCausalLM",
    "sarvam_moe": "SarvamMoEForCausalLM",
    # Ministral 3 is published as Mistral3ForConditionalGeneration over a ministral3 text config
    # (transformers 5.24 models/ministral3/configuration_ministral3.py#L26-L48, mistralai/Ministral-3-8B-Base-2512)
    "ministral3": "Mistral3ForConditionalGeneration",
    # Llama 4 is published as Llama4ForConditionalGeneration over a llama4_text text config
    # (tests/fixtures/configs/corpus/meta-llama--Llama-4-Scout-17B-16E-Instruct.json)
    "llama4_text": "Llama4ForConditionalGeneration",
    # kvmem's own configs (kvmem.configs.custom_config) name no architecture: left to the family rules
    "custom": None, "custom_mla": None,
    # opt-in families FAMILIES sizes, published under a registered class other than transformers' (its line below):
    # K-EXAONE names ExaoneMoEForCausalLM where transformers writes ExaoneMoeForCausalLM (vLLM maps both:
    # vllm@v0.33.0 vllm/model_executor/models/registry.py#L106-L107)
    "exaone_moe": "ExaoneMoEForCausalLM", "nemotron-nas": "DeciLMForCausalLM", "step3p5": "Step3p5ForCausalLM",
    "gemma4_unified_text": "Gemma4UnifiedForConditionalGeneration", "minimax_m3": "MiniMaxM3SparseForCausalLM",
    "minimax_m3_text": "MiniMaxM3SparseForCausalLM", "minimax_m3_vl_text": "MiniMaxM3SparseForConditionalGeneration",
}

# BERT-style encoders run as decoders (is_decoder): the registry's only BERT is an encoder
# (trtllm@065ff9e9 tensorrt_llm/_torch/models/_arch_index.py#L39 BertForSequenceClassification)
_ENCODERS = ("bert", "bert-generation", "big_bird", "camembert", "data2vec-text", "electra", "ernie", "megatron-bert",
             "rembert", "roberta", "roberta-prelayernorm", "roc_bert", "roformer", "xlm-roberta", "xlm-roberta-xl",
             "xmod")
_ENCODER = ("TensorRT-LLM's PyTorch backend has no decoder (is_decoder) architecture for it: the only BERT-style "
            "model in its registry is BertForSequenceClassification, an encoder with no KV cache ({registry})")

# Families whose architecture is registered but whose config.json the backend cannot load
_NO_CONFIG = {
    # trtllm@00679c66 tensorrt_llm/_torch/pyexecutor/config_utils.py#L802-L951 load_pretrained_config: a
    # model_type outside its _CONFIG_REGISTRY (#L790-L799) goes to transformers.AutoConfig.from_pretrained
    # (#L949-L951); configs/__init__.py adds deepseek_v4 (DeepseekV4Config) to CONFIG_MAPPING, not deepseek_ref
    # (trtllm@00b6d5a2 tensorrt_llm/_torch/configs/__init__.py#L49-L77, deepseek_v4 #L56)
    "deepseek_ref": ("TensorRT-LLM's PyTorch backend cannot load this config: load_pretrained_config "
                     "(tensorrt_llm/_torch/pyexecutor/config_utils.py) hands model_type 'deepseek_ref' to "
                     "transformers' AutoConfig, and neither transformers nor TensorRT-LLM registers a config class "
                     "for it (trtllm@00b6d5a2 tensorrt_llm/_torch/configs/__init__.py#L49-L77 registers deepseek_v4, "
                     "not deepseek_ref) and the "
                     "file has no auto_map; DeepseekV4ForCausalLM ({registry}) loads model_type deepseek_v4"),
}

# (only the families kvmem's reader knows: "mimo" is listed ahead of the reader's MiMo-7B family)
_ALL = {**{t: _NO_ARCH.format(arch=arch, registry=REGISTRY) for t, arch in _UNREGISTERED.items()},
        **{t: _NO_ARCH.format(arch=arch, registry=REGISTRY) + legacy
           for t, (arch, legacy) in _UNREGISTERED_BASE.items()},
        **{t: _ENCODER.format(registry=REGISTRY) for t in _ENCODERS},
        **{t: why.format(registry=REGISTRY) for t, why in _NO_CONFIG.items()}}
REFUSALS = {t: why for t, why in _ALL.items() if t in READ_FAMILIES}

# Each family below: its architecture in the registry (REGISTRY; its line in trtllm@065ff9e9
# tensorrt_llm/_torch/models/_arch_index.py#L36-L118 is named per family), the model file that builds its attention, and
# what that file hands the KV cache manager (_util.py KvCacheCreator: num_key_value_heads and head_dim of the (text)
# config, one KVCacheManager; windows only through KvCacheConfig.max_attention_window).
FAMILIES = CheckedFamilies(frozenset({
    # Exaone4ForCausalLM (_arch_index.py#L49); Exaone4Attention
    # (trtllm@fbbc05dd tensorrt_llm/_torch/models/modeling_exaone4.py#L52-L115): num_key_value_heads on
    # every layer; sliding layers pass attention_window_size to the kernel only; Exaone4ForCausalLM forces bf16
    # (cache.FORCED_DTYPE)
    "exaone4",
    # Exaone4_5_ForConditionalGeneration -> modeling_exaone4_5 (_arch_index.py#L50): text_config's model_type
    # exaone4_5_text is renamed exaone4 (trtllm@0050262c tensorrt_llm/_torch/models/modeling_exaone4_5.py#L97-L103,
    # Exaone4_5Config where transformers has none), self.llm = AutoModelForCausalLM on text_config (#L182-L227)
    # (its architectures: Exaone4ForCausalLM, bf16 forced as for exaone4); post_config, inherited from Qwen2VLModelBase
    # (trtllm@c666e7ea tensorrt_llm/_torch/models/modeling_qwen2vl.py#L933-L936), hands that text config to the
    # engine, KV cache included
    "exaone4_5_text",
    # ExaoneMoEForCausalLM (_arch_index.py#L51); ExaoneMoeAttention
    # (trtllm@d2c804bc tensorrt_llm/_torch/models/modeling_exaone_moe.py#L72-L134):
    # num_key_value_heads on every layer, window config.sliding_window on layer_types' sliding layers, through the
    # kernel only
    "exaone_moe",
    # Step3p5ForCausalLM -> modeling_step3p7, Step3p7ForConditionalGeneration -> modeling_step3p7vl (#L114-L115):
    # Step3p7Attention takes num_key_value_heads (else num_attention_groups;
    # trtllm@0c37d5ba tensorrt_llm/_torch/models/modeling_step3p7.py#L240-L247 _layer_kv_heads) x head_dim on every
    # layer, the window goes to the kernel only; _mirror_step3p7_text_aliases (#L180-L212, which the wrapper imports:
    # trtllm@047098b7 tensorrt_llm/_torch/models/modeling_step3p7vl.py#L66-L71) mirrors num_attention_groups up as
    # the config's num_key_value_heads (#L195-L202), the one count KVCacheManager gives every layer
    # (KVCacheManagerV2 only for a Gemma 4 hybrid config or use_kv_cache_manager_v2: trtllm@065ff9e9
    # tensorrt_llm/_torch/pyexecutor/_util.py#L92-L97 _non_hybrid_kv_cache_manager_cls); sliding layers with other
    # KV heads (attention_other_setting) refused (models.check_step3p5)
    "step3p5",
    # AfmoeForCausalLM (_arch_index.py#L37); AfmoeAttention (trtllm@3c4acdc9
    # tensorrt_llm/_torch/models/modeling_afmoe.py#L229-L270; window #L248): num_key_value_heads, head_dim on every
    # layer; sliding layers (layer_types) pass config.sliding_window to the kernel only
    "afmoe",
    # LagunaForCausalLM (_arch_index.py#L68); LagunaAttention (trtllm@9289d069
    # tensorrt_llm/_torch/models/modeling_laguna.py#L215-L268): per-layer query heads (num_attention_heads_per_layer),
    # num_key_value_heads on every layer; sliding layers (layer_types) pass config.sliding_window to the kernel
    "laguna",
    # DeciLMForCausalLM (_arch_index.py#L43); NemotronNASModel (trtllm@4d365368
    # tensorrt_llm/_torch/models/modeling_nemotron_nas.py#L189-L194): num_key_value_heads becomes the per-layer list
    # num_attention_heads // n_heads_in_group (0 without attention), which KVCacheManager takes per layer
    # (trtllm@001541ba tensorrt_llm/_torch/pyexecutor/resource_manager.py#L242-L263); the pool estimate averages it
    # (cache._static_bytes_per_token)
    "nemotron-nas",
    # Qwen2VL / Qwen2_5_VLForConditionalGeneration (_arch_index.py#L98-L99); Qwen2VLModelBase
    # (trtllm@c666e7ea tensorrt_llm/_torch/models/modeling_qwen2vl.py#L897-L901): the language model is
    # Qwen2ForCausalLM on config.text_config, and post_config (#L933-L936) hands that config to the engine (KV cache
    # included)
    "qwen2_vl_text", "qwen2_5_vl_text",
    # GlmMoeDsaForCausalLM -> modeling_deepseekv3 (_arch_index.py#L59): MLA latent (kv_lora_rank + qk_rope_head_dim, one
    # head, SELFKONLY) and DSACacheManager's indexer key on every layer (models.indexer_elements)
    "glm_moe_dsa",
    # KimiLinearForCausalLM -> modeling_kimi_linear (_arch_index.py#L67; Kimi-K3): MLA layers 576 SELFKONLY, KDA layers
    # a per-sequence state on the Mamba side (models.state_bytes_of); configs without K3's latent MoE refused
    # (models.check_kimi)
    "kimi_linear",
    # Gemma4ForCausalLM -> modeling_gemma4, Gemma4ForConditionalGeneration -> modeling_gemma4mm (#L55-L57; the wrapper
    # builds Gemma4ForCausalLM on text_config and post_config hands that config to the engine:
    # trtllm@001a6a01 tensorrt_llm/_torch/models/modeling_gemma4mm.py#L552-L580, #L658-L659, #L707): a hybrid
    # config (global_head_dim != head_dim) takes KVCacheManagerV2 with per-layer heads / head_dim, the sliding layers
    # windowed by default, KV-shared layers keeping their own buffers (models.gemma4_layout); capacity refused.
    # Gemma4UnifiedForConditionalGeneration -> modeling_gemma4_unified (REGISTRY): the same Gemma4ForCausalLM on
    # text_config (trtllm@1c0067ee tensorrt_llm/_torch/models/modeling_gemma4_unified.py#L274-L275), post_config
    # surfacing it "so KV-cache sizing + is_gemma4_hybrid ... read the text geometry" (#L313-L315)
    "gemma4_text", "gemma4_unified_text",
    # DeepseekV4ForCausalLM -> modeling_deepseekv4 (_arch_index.py#L46): the checkpoint's compress_ratios and window
    # build DeepseekV4CacheManager (trtllm@008e0af8 tensorrt_llm/_torch/model_config.py#L1081-L1173; trtllm@015279e0
    # tensorrt_llm/_torch/attention_backend/sparse/deepseek_v4/cache_manager.py#L126-L341): SWA, compressed,
    # compressor-state and indexer buffers per layer (dsv4.buffers); tokens_per_block other
    # than 128/256 refused (asserted), the indexer dtype refused unless given (its default is the GPU's)
    "deepseek_v4",
    # MiniMaxM3SparseForCausalLM / MiniMaxM3SparseForConditionalGeneration -> modeling_minimaxm3 (#L77-L78): its
    # sparse attention config selects MiniMaxM3KVCacheManagerV2, K/V on every layer and a bf16 one-head index key of
    # 128 on layers 3..N-1 (minimax.py); another architecture, other sparse layers or index width refused by name
    # (minimax.check_m3), capacity refused (one V2 quota)
    "minimax_m3", "minimax_m3_text", "minimax_m3_vl_text",
}))


def check_architecture(model) -> None:
    """Refuse a config whose architectures[0] the registry lacks, whatever its model_type. The name looked up is
    the one AutoModelForCausalLM._resolve_class makes of it, the rewrite the pinned index names
    (trtllm@065ff9e9 tensorrt_llm/_torch/models/_arch_index.py#L34-L35): only for a config with draft_vocab_size
    (an EAGLE3 draft) "Eagle3" is dropped and "EAGLE3" put in front; any other name is looked up as written, so
    Eagle3DeepSeekV3ForCausalLM (_arch_index.py#L48) is reached by a config without draft_vocab_size
    (trtllm@01bffee1 tensorrt_llm/_torch/models/modeling_auto.py#L31-L36, the stored copy that has _resolve_class;
    the older 5d4a661c #L30-L33 dropped "Eagle3" from every name). from_config raises "Unknown architecture" where
    the registry has no class (01bffee1 #L51-L55). A config naming no architecture is left to the family rules."""
    config = model.config if isinstance(model.config, dict) else {}
    archs = config.get("architectures") or []
    if not archs or not isinstance(archs[0], str):
        return
    arch = archs[0]
    if "draft_vocab_size" in config:   # trtllm@01bffee1 tensorrt_llm/_torch/models/modeling_auto.py#L31-L34
        arch = "EAGLE3" + arch.replace("Eagle3", "")
    if arch in REGISTERED:
        return
    from .. import ENGINES  # the engine registry (complete once a model is sized)
    from . import PINNED
    why = _NO_ARCH.format(arch=arch, registry=REGISTRY)
    family = READ_FAMILIES.get(model.model_type)
    opt_in = family is not None and family.opt_in
    others = (name for name, spec in ENGINES.items() if name != "trtllm" and model.model_type not in spec.refusals
              and (not opt_in or spec.families.sizes(model.model_type)))
    way_out = "engines that size it: " + ", ".join(others)
    raise EngineRefusal(f"engine 'trtllm' ({PINNED}) does not size architectures[0] {archs[0]!r} (model_type "
                        f"{model.model_type!r}): {why}; {way_out}",
                        engine="trtllm", release=PINNED, reason=why, way_out=way_out)

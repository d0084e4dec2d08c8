"""Which opt-in families (kvmem.configs.families, Family.opt_in) TensorRT-LLM's PyTorch backend runs.

The judge is the backend's model registry: AutoModelForCausalLM.from_config looks the config's
``architectures[0]`` up in MODEL_CLASS_MAPPING, filled by the ``@register_auto_model`` decorators
of tensorrt_llm/_torch/models/modeling_*.py, and raises "Unknown architecture for
AutoModelForCausalLM" for any other (modeling_auto.py @ 5d4a661c). The registry is read off its
static index, which a test of the project holds equal to those decorators:
tensorrt_llm/_torch/models/_arch_index.py @ 065ff9e9 MODEL_ARCH_TO_MODULE (85 architectures).

REFUSALS: the families whose published architecture that index lacks (a family's architecture is
the one its config.json names; transformers 5.24's class where the checkpoints use it).
FAMILIES: the families it runs whose cache kvmem's trtllm rules lay out as the model file and the
cache manager do, each with the file that shows it (docs/research/families_trtllm.md has the table).
"""

from __future__ import annotations

from ..base import CheckedFamilies

__all__ = ["REGISTRY", "REFUSALS", "FAMILIES"]

REGISTRY = "tensorrt_llm/_torch/models/_arch_index.py @ 065ff9e9"
_NO_ARCH = ("TensorRT-LLM's PyTorch backend registers no {arch} ({registry} MODEL_ARCH_TO_MODULE; "
            "modeling_auto.py AutoModelForCausalLM raises 'Unknown architecture')")

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
    "gpt_bigcode": "GPTBigCodeForCausalLM",
    "gpt_neo": "GPTNeoForCausalLM",
    "granitemoehybrid": "GraniteMoeHybridForCausalLM",
    "hy_v4": "HYV4ForCausalLM (it has HunYuanDenseV1/HunYuanMoEV1 only)",
    "hy_v4_vl_text": "HYV4VLForConditionalGeneration",
    "inkling_text": "InklingForCausalLM",
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
# BERT-style encoders run as decoders (is_decoder): the registry's only BERT is an encoder
_ENCODERS = ("bert", "bert-generation", "big_bird", "camembert", "data2vec-text", "electra", "ernie", "megatron-bert",
             "rembert", "roberta", "roberta-prelayernorm", "roc_bert", "roformer", "xlm-roberta", "xlm-roberta-xl",
             "xmod")
_ENCODER = ("TensorRT-LLM's PyTorch backend has no decoder (is_decoder) architecture for it: the only BERT-style "
            "model in its registry is BertForSequenceClassification, an encoder with no KV cache ({registry})")

REFUSALS = {**{t: _NO_ARCH.format(arch=arch, registry=REGISTRY) for t, arch in _UNREGISTERED.items()},
            **{t: _ENCODER.format(registry=REGISTRY) for t in _ENCODERS}}

FAMILIES = CheckedFamilies(frozenset())

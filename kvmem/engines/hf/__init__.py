"""Hugging Face transformers caches: DynamicCache, StaticCache and QuantizedCache.

Rules read from the installed transformers 5.24.0 (src/transformers/cache_utils.py unless another
file is named), hqq 0.2.8.post1 and optimum-quanto 0.2.7, and checked against the real cache objects
by ``kvmem.measure`` / ``kvmem validate`` (tests/test_measure.py). Each rule sits beside the code it
governs with its pin (DynamicCache: transformers@v5.24.0 src/transformers/cache_utils.py#L2009-L2102):

  slots      what each decoder layer hands to ``cache.update``: attention, MLA (and DeepSeek-V3.2's
             indexer key), linear/SSM states, hybrids, shared/none layers, DeepSeek-V4's compressed rows
  growth     the workload (a prefill of ``prompt_tokens``, then one token per decode step, every
             layer in order) and ``.peak_bytes``; hf-dynamic (DynamicLayer, DynamicSlidingWindowLayer)
             and hf-static (StaticLayer, StaticSlidingWindowLayer) step by step
  quantized  hf-quantized (QuantizedCache: quanto, hqq, fp8; full-attention models only): storage,
             the quantisers' working sets (torch 2.13 CPU), the settings it accepts, its growth
  entry      the three estimate_* and their details Records; tp and pp must be 1
  sizing     what kvmem.sizing asks: the budget of one device, prefix sharing
"""

from ..base import CheckedFamilies, EngineSpec
from ..declared import Option
from ..positions import PastPositions
from .entry import (
                    DEFAULTS,
                    HfDetails,
                    HfQuantizedDetails,
                    HfStaticDetails,
                    estimate_dynamic,
                    estimate_quantized,
                    estimate_static,
                    prompt_tokens_of,
)
from .growth import DynamicGrowth, StaticGrowth
from .quantized import QuantizedGrowth, quantized_bytes
from .sizing import HF_WEIGHT_FORMATS, NON_TORCH_BYTES, SIZING, SIZING_OPTIONS, hf_activation_bytes, prefix_sharing
from .slots import Slot, slots

__all__ = ["Slot", "slots", "DEFAULTS", "quantized_bytes", "DynamicGrowth", "prompt_tokens_of", "StaticGrowth",
           "QuantizedGrowth", "estimate_dynamic", "estimate_static", "estimate_quantized", "HfDetails",
           "HfStaticDetails", "HfQuantizedDetails", "hf_activation_bytes", "NON_TORCH_BYTES", "SIZING_OPTIONS",
           "HF_WEIGHT_FORMATS", "SIZING", "POSITIONS", "SPECS"]

POSITIONS = PastPositions("transformers does not check it")   # the caches take any length
# Families transformers 5.24.0 itself has no model for: Nemotron-NAS (model_type "nemotron-nas", the
# DeciLMForCausalLM checkpoints) is in neither models/auto/auto_mappings.py CONFIG_MAPPING_NAMES nor
# models/auto/modeling_auto.py MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, and there is no models/ folder for it:
# its checkpoints run only as their own remote code (kvmem reads it as vLLM's nemotron_nas.py builds it)
NO_CLASS = {"nemotron-nas": "transformers 5.24.0 has no model class for it: 'nemotron-nas' is in neither "
                            "models/auto/auto_mappings.py CONFIG_MAPPING_NAMES nor modeling_auto.py "
                            "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES (its DeciLMForCausalLM checkpoints run only as "
                            "trust_remote_code)",
            # MiMo-7B (XiaomiMiMo's MiMoForCausalLM) and MiniMax-M3's text-only types: transformers 5.24.0 has no
            # config class for them either (MiniMax-M3 runs as minimax_m3_vl / minimax_m3_vl_text, which kvmem sizes)
            **{t: f"transformers 5.24.0 has no model class for it: {t!r} is in neither models/auto/auto_mappings.py "
                  "CONFIG_MAPPING_NAMES nor modeling_auto.py MODEL_FOR_CAUSAL_LM_MAPPING_NAMES (its checkpoints run "
                  "only as trust_remote_code)"
               for t in ("mimo", "minimax_m3", "minimax_m3_text")},
            # sgl-project's DeepSeek-V4 reference-format files: no auto_map, so AutoConfig.from_pretrained raises
            # for the unknown model_type (configuration_auto.py); renamed deepseek_v4 they are DeepSeek-V4
            "deepseek_ref": "transformers 5.24.0 cannot load this config: 'deepseek_ref' is not in "
                            "models/auto/auto_mappings.py CONFIG_MAPPING_NAMES and the file has no auto_map, so "
                            "AutoConfig.from_pretrained raises; with model_type deepseek_v4 it is DeepSeek-V4 "
                            "(size it as that)"}
# StaticCache(config) builds STATIC_LAYER_TYPE_MAPPING[layer_type] for each layer (cache_utils.py);
# modeling_deepseek_v4.py registers its compressed layer types as dynamic layers only
STATIC_REFUSALS = {**NO_CLASS,
                   "deepseek_v4": "transformers' StaticCache has no layer class for compressed_sparse_attention or "
                                  "heavily_compressed_attention (modeling_deepseek_v4.py registers only "
                                  "DynamicCache layers for them)"}
# The opt-in families (kvmem.configs.families) transformers' modes size: each read from transformers'
# own config class and modeling code, and checked against it (tests/oracles/test_transformers_oracle.py).
# Nemotron-NAS is not one (NO_CLASS); StaticCache refuses DeepSeek-V4 (STATIC_REFUSALS). QuantizedCache
# (cache_utils.py QuantizedCache.__init__) builds one QuantizedLayer per layer of any model whose layer types
# (get_layer_types_and_kwargs, DynamicCache's own mapping) are all full_attention, and raises for any other:
# its storage rule does not depend on the family, and each family's K/V shapes are hf-dynamic's (checked by
# the transformers oracle); a family with other layer types gets transformers' own ValueError (check_quantized).
DYNAMIC_FAMILIES = CheckedFamilies(frozenset(NO_CLASS), all_but=True)
STATIC_FAMILIES = CheckedFamilies(frozenset(STATIC_REFUSALS), all_but=True)
QUANTIZED_FAMILIES = DYNAMIC_FAMILIES
SPECS = (
    EngineSpec("hf-dynamic", {"prompt_tokens": DEFAULTS["prompt_tokens"]}, estimate_dynamic, None, SIZING,
               prefix_sharing, POSITIONS, pinned="transformers 5.24.0", refusals=NO_CLASS, families=DYNAMIC_FAMILIES),
    EngineSpec("hf-static", {"max_cache_len": DEFAULTS["max_cache_len"], "prompt_tokens": DEFAULTS["prompt_tokens"]},
               estimate_static, None, SIZING, prefix_sharing, POSITIONS, pinned="transformers 5.24.0",
               refusals=STATIC_REFUSALS, families=STATIC_FAMILIES),
    EngineSpec("hf-quantized", {name: DEFAULTS[name] for name in
                                ("backend", "nbits", "q_group_size", "residual_length", "prompt_tokens")},
               estimate_quantized, None, SIZING, prefix_sharing, POSITIONS, pinned="transformers 5.24.0",
               refusals=NO_CLASS, families=QUANTIZED_FAMILIES,
               declared=(Option("backend", choices=("quanto", "hqq", "fp8"), help="QuantizedCache backend"),
                         Option("nbits", choices=(1, 2, 3, 4, 8), help="bits per quantised element"))),
)

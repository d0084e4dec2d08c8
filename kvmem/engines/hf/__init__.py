"""Hugging Face transformers caches: DynamicCache, StaticCache and QuantizedCache.

Rules read from the installed transformers 5.24.0 (``transformers/cache_utils.py`` unless
another file is named), hqq 0.2.8.post1 and optimum-quanto 0.2.7, and checked against the
real cache objects by ``kvmem.measure`` / ``kvmem validate`` (tests/test_measure.py).

Workload: ``batch`` sequences get one prefill of ``prompt_tokens`` tokens (default: all
``tokens``), then one token per decode step until they hold ``tokens``; every layer is
updated in order, as a forward pass does. What each layer hands to ``cache.update``:

    attention   K [batch, kv_heads, seq, head_dim_k], V [batch, kv_heads, seq, head_dim_v]
                Falcon with new_decoder_architecture broadcasts K/V to all query heads before
                caching: kv_heads = num_attention_heads (modeling_falcon.py, FalconAttention.forward)
    MLA         K slot: the normed latent [batch, 1, seq, kv_lora_rank]; V slot: the rope key
                [batch, 1, seq, qk_rope_head_dim] (modeling_deepseek_v3.py, DeepseekV3Attention);
                DeepSeek-V3.2 also an indexer key [batch, seq, index_head_dim] (update_indexer)
    linear/SSM  conv state [batch, conv_channels, conv_kernel] in the compute dtype (the whole
                kernel, not kernel - 1) and a recurrent state in fp32 (the torch paths compute it
                in fp32): gated DeltaNet [batch, v_heads, k_dim, v_dim], Mamba [batch, inner,
                d_state], Mamba2 [batch, heads, head_dim, d_state], Kimi's KDA [batch, heads,
                head_dim, head_dim] (LinearAttentionLayer); MiniMax's lightning attention keeps
                [batch, heads, head_dim, head_dim] in the compute dtype and no conv state
                (modeling_minimax.py); LFM2's short convolution a conv state only
    hybrid      Falcon-H1: attention and a Mamba2 mixer in one layer, both cached
                (LinearAttentionAndFullAttentionLayer); Inkling: attention (full or sliding)
                beside four short convolutions whose state is fp32 (modeling_inkling.py runs
                them in fp32); ZAYA: attention beside a conv state of kernel - 1 columns (its
                receptive field less one, as ZayaCCAProjection pads it) and the last token's
                delayed value in the compute dtype (modeling_zaya.py)
    shared/none DummyLayer: nothing (Gemma-3n kv-sharing consumers, Nemotron-H MLP blocks)
    compressed  DeepSeek-V4 (modeling_deepseek_v4.py): every layer one K=V row [batch, 1, seq,
                head_dim]; a sliding_attention layer hands it as K and as V to a
                DynamicSlidingWindowLayer (two copies), DeepseekV4HCACache / CSACache keep one
                (values = keys) beside the compressor's compressed rows, buffers and overlap state
                (kvmem.model.Compressor; the buffers pin their last projection, growth.py)

hf-dynamic (DynamicCache(config=...)):
    DynamicLayer             keys = cat([keys, new]): the old K is freed before V is concatenated
    DynamicSlidingWindowLayer (sliding and chunked layers, window = sliding_window or
                             attention_chunk_size): both cats first, then keeps the view
                             full[:, :, -window + 1:] -- the view pins the whole buffer: P tokens
                             right after a prefill of P, min(tokens, window) once decoding
hf-static (StaticCache(config, max_cache_len)):
    StaticLayer              zeros [batch, heads, max_cache_len, dim] at the first update; writes
                             by index_copy_ with positions arange(s) + cumulative_length (int64)
    StaticSlidingWindowLayer min(window, max_cache_len) tokens; once full each decode step
                             rolls: a transient copy of the layer's K and of its V
hf-quantized (QuantizedCache(backend, config, ...); full-attention models only):
    prefill                  K and V quantised whole, residual empty
    decode                   dequantise all, cat(dequantised, residual, new) is returned; when
                             residual + new >= residual_length everything is re-quantised and
                             the residual emptied, else the new token joins the residual
    quanto                   groups of q_group_size along axis 0: uint8 packed
                             ceil(groups / (8 / nbits)) x q_group_size bytes, scale + shift per
                             group in the compute dtype (optimum/quanto/tensor/weights/qbits.py)
    hqq                      [q_group_size, groups] packed along the group: 8/4/2/1 bit in uint8
                             rows of q_group_size x nbits / 8, 3 bit in ceil(q_group_size / 10)
                             int32 rows; scale + zero per group cast to the compute dtype
                             (hqq/core/quantize.py, bitpack.py). Neither backend keeps fp32
                             scales on CPU in these versions: bf16 K/V get bf16 scales.
    fp8                      float8_e4m3fn, one fp32 scale per tensor frozen at the prefill,
                             new tokens appended by cat, no residual (Fp8QuantizedLayer)

``.peak_bytes`` replays the allocations each update makes (a tensor allocated is +bytes, one
freed is -bytes) and reports the highest running total: cache storage, recurrent state,
int64 position tensors, and copies made inside ``update`` (cat results, dequantised copies,
the quantiser's working set). The incoming K/V of the step are the model's activations and
are not counted. The quantisers' working sets are counts of what their code allocates on
torch 2.13 CPU (table below); on CUDA hqq optimises in fp16 and quanto may use other
kernels, so treat quantised peaks there as approximate.

transformers keeps these caches on the device of each layer; kvmem models one device, so
tp and pp must be 1 (with a device_map split every GPU holds the ``per_layer`` bytes of
its own layers).

Modules: slots (each layer's cache class and shapes), growth (DynamicCache and StaticCache step
by step), quantized (QuantizedCache: storage, the working-set table, the settings it accepts, its
growth), entry (the three estimate_* and their details Records), sizing (what kvmem.sizing asks:
the budget of one device, prefix sharing).
"""

from ..base import CheckedFamilies, EngineSpec, Option, PastPositions
from .entry import (DEFAULTS, HfDetails, HfQuantizedDetails, HfStaticDetails, estimate_dynamic, estimate_quantized,
                    estimate_static, prompt_tokens_of)
from .growth import DynamicGrowth, StaticGrowth
from .quantized import QuantizedGrowth, quantized_bytes
from .sizing import (HF_WEIGHT_FORMATS, NON_TORCH_BYTES, SIZING, SIZING_OPTIONS, hf_activation_bytes,
                     prefix_sharing)
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

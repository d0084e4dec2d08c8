"""vLLM's paged KV cache: pages per layer, groups of layers, blocks, and the numbers its logs print.

kvmem follows vLLM 0.33.0 (``version`` picks an older release's rules; what changed when is in
docs/research/engines_serving_rules.md, where each rule was checked against real logs). Each rule sits
beside the code it governs with its pin, read in the installed 0.33.0 (the default block size:
vllm@v0.33.0 vllm/config/cache.py#L185):

  options    the options and their defaults; block size 16 and what each MLA backend forces; the
             --kv-cache-dtype formats ("auto" = the model dtype, float32 served as bfloat16); the
             release table (from which release each rule holds); DeepSeek-V3.2's indexer key
  pages      a layer's page (full, sliding, chunked, MLA, fp8_ds_mla, nvfp4, per-token-head scales,
             Mamba); a request's worst case per kind; the blocks a sequence really holds
  models     the layers vLLM's model files build where they differ from the config's reading, the
             heads tp must divide, indexers (GLM-5, HY-V4), the families' own shapes
  states     Mamba / linear-attention state shapes per family and their dtypes
  compressed DeepSeek-V4's compressed caches and packed groups
  layout     model -> specs -> groups: hybrid block alignment, the hybrid manager off, page
             unification and padding, the 1.5x bucket rule, stride split, padding layers
  pool       pages per pipeline stage, in-flight tokens, a request's worst case, the null block,
             "Maximum concurrency", the longest request that fits
  entry      estimate (blocks allocated for a batch) and capacity ("GPU KV cache size" by release)
  v0         the v0 engine's blocks and log lines
  admission  what vLLM admits at once (SizingRules.pools_refuse)
  budget     what kvmem.sizing asks: the memory budget, activations, batch defaults by device
  offload    the CPU offload tier
  launch, logs  the `vllm serve` command (LAUNCHER) and the startup log's reader (READER)
REFUSALS below: families vLLM 0.33.0 cannot load, each with why. Unverified rules say so where used.
"""

from ..base import CheckedFamilies, EngineSpec
from ..declared import Option
from ..positions import PastPositions
from .budget import SIZING, batch_defaults, prefix_sharing, rope_cache_bytes, vllm_activation_bytes
from .entry import capacity, estimate
from .launch import LAUNCHER
from .logs import READER
from .options import OPTIONS
from .parallel import DCP_DEFAULT, dcp_capacity, dcp_estimate

__all__ = ["estimate", "capacity", "OPTIONS", "SPECS", "vllm_activation_bytes", "batch_defaults",
           "rope_cache_bytes"]

# vllm@v0.33.0 vllm/config/model.py#L2545-L2684 _get_and_verify_max_len: a ValueError unless the variable is set
POSITIONS = PastPositions("vLLM refuses a max_model_len above it", "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1")
# Families kvmem reads that vLLM 0.33.0 cannot load: their architectures are in
# vllm@v0.33.0 vllm/model_executor/models/registry.py#L841-L895 _PREVIOUSLY_SUPPORTED_MODELS (the last release that
# had them: MiniMax-Text-01/M1 and Bamba after 0.23.0, ...), those its registry never had (XGLM, LFM3, ZAYA, ...),
# and BERT-style encoders run as decoders.
_REMOVED = "vLLM 0.33.0 has no {arch} (registry.py _PREVIOUSLY_SUPPORTED_MODELS: last in {last})"
_BACKEND_FAILS = ("vLLM 0.33.0 has no model file for {arch} (vllm/model_executor/models/registry.py), so it runs "
                  "transformers' class with its Transformers backend (registry.py _try_resolve_transformers), and "
                  "that raises on the first forward, which vLLM runs at startup to profile memory "
                  "(vllm/v1/worker/gpu_worker.py determine_available_memory): {why}")
_NO_ATTN = ("the backend attaches a vLLM Attention only to attention modules that carry a layer_idx "
            "(vllm/model_executor/models/transformers/base.py _create_attention_instances), but {cls}'s block "
            "attention residuals, in every decoder layer, call the same attention interface without one, and "
            "vllm_attention_forward (transformers/__init__.py) raises AttributeError: "
            "'{cls}BlockAttentionResidual' object has no attribute 'attn'")
REFUSALS = {
    "minimax": _REMOVED.format(arch="MiniMaxText01ForCausalLM / MiniMaxM1ForCausalLM", last="0.23.0"),
    "bamba": _REMOVED.format(arch="BambaForCausalLM", last="0.23.0"),
    "dots1": _REMOVED.format(arch="Dots1ForCausalLM", last="0.23.0"),
    "mpt": _REMOVED.format(arch="MPTForCausalLM", last="0.28.0"),
    # Families transformers 5.24 defines whose architecture vLLM 0.33.0's registry (registry.py) lacks
    **{t: "vLLM 0.33.0's model registry (vllm/model_executor/models/registry.py) has no architecture for it"
       for t in ("xglm", "lfm3", "lara_mini", "youtu", "axk2", "kosmos_2_5_text_model", "modernbert-decoder", "zaya",
                 "mistral4", "mistral_large4_text")},
    # vllm@v0.33.0 vllm/transformers_utils/config.py#L879-L1008 get_config: a model_type in neither vLLM's
    # _CONFIG_REGISTRY nor
    # transformers' goes to AutoConfig.from_pretrained (#L443-L449), which raises for it
    "deepseek_ref": "vLLM 0.33.0 cannot load this config: model_type 'deepseek_ref' is in neither its config registry "
                    "nor transformers' CONFIG_MAPPING, and get_config hands it to AutoConfig.from_pretrained "
                    "(vllm/transformers_utils/config.py#L443-L449), which raises; started with --hf-overrides "
                    "'{\"model_type\": \"deepseek_v4\"}' it is DeepSeek-V4 (size it as model_type deepseek_v4)",
    # registry.py has no GPTNeoForCausalLM, and _try_resolve_transformers (vllm@v0.33.0
    # vllm/model_executor/models/registry.py#L1266-L1339) returns None for a
    # transformers class that is neither is_backend_compatible() nor _can_set_attn_implementation() (#L1327-L1333)
    "gpt_neo": "vLLM 0.33.0 has no architecture for GPTNeoForCausalLM: its registry (vllm/model_executor/models/"
               "registry.py) lacks it and its Transformers-backend fallback (_try_resolve_transformers) turns down "
               "transformers' GPTNeoForCausalLM, which neither supports the attention backend interface nor can "
               "set its attention implementation",
    # No model file, and the Transformers backend cannot run transformers' class (judged by building it through
    # vLLM's own backend and running one forward: kvmem/oracles/vllm_transformers.py):
    # vllm@v0.33.0 vllm/model_executor/models/registry.py#L1266-L1339 _try_resolve_transformers: a class that
    #   supports the attention backend or can set its attention implementation goes to the backend class
    #   (vllm/config/model.py#L1129-L1157: TransformersMultiModalMoEForCausalLM for these wrappers)
    # vllm@v0.33.0 vllm/v1/worker/gpu_worker.py#L656-L700 determine_available_memory: profile_run (a forward)
    #   runs at every start, kv_cache_memory_bytes or not, before the KV cache is allocated
    **{t: _BACKEND_FAILS.format(arch=arch, why=why) for t, arch, why in (
        # vllm@v0.33.0 vllm/model_executor/models/transformers/base.py#L515-L530, #L641-L708: one vLLM Attention
        # per layer index, set as `attn` on the module whose layer_idx it is (fusers/attention.py#L133-L136);
        # transformers/__init__.py#L68-L77 vllm_attention_forward reads module.attn; transformers 5.24
        # modeling_inkling2.py#L833-L858 (#L868, #L912: every layer's mlp_input), modeling_inkling2_loop.py#L828-L850
        ("inkling2_text", "Inkling2ForConditionalGeneration / Inkling2ForCausalLM", _NO_ATTN.format(cls="Inkling2")),
        ("inkling2_loop_text", "Inkling2LoopForConditionalGeneration / Inkling2LoopForCausalLM",
         _NO_ATTN.format(cls="Inkling2Loop")),
        # transformers 5.24 masking_utils.py#L830-L831: no mask for an implementation without a mask function
        # (vLLM registers "vllm" and "vllm_mla" as attention functions only, transformers/__init__.py#L125-L126);
        # modeling_hy_v4_vl.py#L387-L395: the DSA indexer subscripts the mask
        ("hy_v4_vl_text", "HYV4VLForConditionalGeneration",
         "transformers builds no attention mask for vLLM's attention implementation (masking_utils.py), and "
         "HY-V4-VL's DSA indexer subscripts it (modeling_hy_v4_vl.py HYV4VLAttention: attention_mask[:, 0, :, :]): "
         "TypeError: 'NoneType' object is not subscriptable"))},
    # BERT-style encoders run as decoders (is_decoder): vLLM has no decoder class for them
    **{t: "vLLM 0.33.0 has no decoder (is_decoder) architecture for it; where it has the family at all, it "
          "runs it as an encoder or pooling model, with no KV cache"
       for t in ("bert", "bert-generation", "big_bird", "camembert", "data2vec-text", "electra", "ernie",
                 "megatron-bert", "rembert", "roberta", "roberta-prelayernorm", "roc_bert", "roformer", "xlm-roberta",
                 "xlm-roberta-xl", "xmod")},
}
# The opt-in families (kvmem.configs.families) whose layers kvmem lays out as vLLM 0.33.0's model files
# build them (kvmem.engines.vllm.models: MiMo, Laguna, MiniCPM3, Ernie-VL, Nemotron-NAS, Cohere2; the
# state shapes above), checked against vLLM's own code (kvmem/oracles/vllm.py, vllm_states.py). Gemma 4:
# gemma4.py takes each layer's head_dim and KV heads from per_layer_config as kvmem does
# (vllm@v0.33.0 vllm/model_executor/models/gemma4.py#L578).
FAMILIES = CheckedFamilies(frozenset({
    "afmoe", "cohere2_moe", "dbrx", "ernie4_5_vl_moe_text", "exaone4", "exaone_moe", "falcon_h1", "falcon_mamba",
    "gemma4_text", "gemma4_unified_text", "glm_moe_dsa", "granitemoehybrid", "kimi_linear", "laguna", "lfm2",
    "lfm2_moe", "longcat_flash", "mamba", "mamba2", "mimo_v2_flash", "minicpm3", "nemotron-nas", "olmo_hybrid",
    "deepseek_v4", "exaone4_5_text", "step3p5", "mimo", "minimax_m3", "minimax_m3_text", "minimax_m3_vl_text",
    "hy_v4", "axk1", "sarvam_mla", "gpt_bigcode", "smollm3",
    "qwen2_5_vl_text", "qwen2_vl_text", "bailing_hybrid", "inkling_text"}))
DECLARED = (Option("mamba_cache_mode", choices=("none", "align", "all"), help="--mamba-cache-mode"),
            Option("enable_prefix_caching", choices=(True, False),
                   help="--[no-]enable-prefix-caching; unset: vLLM's choice for the model (on for hybrids)"),
            Option("gdn_prefill_backend", choices=("flashinfer", "triton", "cutedsl", "aiter_flydsl", "sycl"),
                   help="--gdn-prefill-backend; unset: vLLM's pick on the fit's GPU (Hopper without one)"),
            Option("draft", model=True,
                   help="a draft model for speculative decoding: a preset or an HF id (the API also takes 'mtp')"),
            Option("decode_context_parallel_size", DCP_DEFAULT,
                   help="--decode-context-parallel-size: each of N tp ranks keeps every Nth token (full attention "
                        "and MLA models; GQA up to tp // KV heads)"))
# decode context parallelism wraps the pool functions (kvmem.engines.vllm.parallel)
SPECS = (EngineSpec("vllm", {**OPTIONS, "decode_context_parallel_size": DCP_DEFAULT}, dcp_estimate, dcp_capacity,
                    SIZING, prefix_sharing, POSITIONS, pinned="vLLM 0.33.0",
                    refusals=REFUSALS, declared=DECLARED, families=FAMILIES, launch=LAUNCHER, log_reader=READER),)

"""vLLM's paged KV cache: pages per layer, groups of layers, blocks, and the numbers its logs print.

Rules read in vllm-project/vllm (commit named where the index held one; release differences
are in docs/research/engines_serving_rules.md, where each rule was checked against real logs):

Page = one block of one layer (vllm/v1/kv_cache_interface.py @ 001cabc1)
    full      block_size x kv_heads_per_rank x (head_size + head_size_v) x dtype_bytes
    sliding, chunked (AttentionSpec base)   block_size x kv_heads_per_rank x (head_size + head_size_v) x
              dtype_bytes (head_size_v = head_size but for MiMo-V2-Flash's sliding layers, vllm@v0.33.0)
    mla       block_size x (kv_lora_rank + qk_rope_head_dim) x dtype_bytes: one "head", no x2, the
              same on every tensor-parallel rank; kv_cache_dtype fp8_ds_mla: block_size x 656
    indexer   DeepSeek-V3.2's lightning-indexer key, its own MLAAttentionSpec of 1 head x
              (index_head_dim + index_head_dim // 128 x 4) uint8 = 132 B per token
              (DeepseekV32IndexerCache, vllm/model_executor/models/deepseek_v2.py), keyed on index_topk;
              GLM-5 (glm_moe_dsa, vllm/models/deepseek_v32/attention.py) keeps it where
              index_topk_pattern[i] != "S", else where max(i - index_skip_topk_offset + 1, 0) %
              index_topk_freq == 0 (transformers' indexer_types is not read: a config it contradicts is
              refused); an MTP layer always keeps one. On Blackwell GLM-5's kv "auto" is fp8_e4m3
              (models/config.py GlmMoeDsaForCausalLM): kvmem assumes Hopper and says so in a note.
    mamba     sum of its state tensors, padded up to the attention page in a hybrid model
    kv_cache_dtype "auto" = the model dtype, float32 checkpoints downcast to bfloat16 (the CUDA
    platform's first supported dtype, vllm/config/model.py _resolve_auto_dtype);
    kv_cache_dtype fp8 / fp8_e4m3 / fp8_e5m2 / fp8_inc: 1 byte, per-tensor scales take no page space;
    int8/fp8_per_token_head add 2 x block_size x heads x 4 B of scales per page; nvfp4 (full
    layers only) stores head_size // 2 + head_size // 16 bytes per head; "auto" = the model dtype.
Heads per rank: max(1, kv_heads // tp), a head replicated when tp > kv_heads; tp must divide the
    attention heads ("Total number of attention heads (H) must be divisible by tensor parallel
    size (T)." vllm/config/model.py verify_with_parallel_config). pp: a rank holds its stage's
    layers (vllm/distributed/utils.py get_pp_indices, kvmem.engines.base.pp_stages).
Block size: 16 (vllm/config/cache.py DEFAULT_BLOCK_SIZE). MLA backends force their own
    (vllm/platforms/cuda.py check_and_update_config): FLASHMLA 64 (the Hopper default),
    CUTLASS_MLA 128 (the Blackwell default), FLASHINFER_MLA 64 unless 32 or a multiple of 64,
    FLASHMLA_SPARSE 64 (DeepSeek-V3.2); TRITON_MLA and FLASH_ATTN_MLA keep the block size.
Cohere2 and Cohere2-MoE (commandr.py, cohere2_moe.py): a sliding layer's window is sliding_window + 1
    ("cohere swa layer sees [pos - sliding_window, pos]"), from 0.33 (the release it landed in is not
    pinned; earlier releases keep sliding_window). DBRX (dbrx.py): head_dim = d_model // n_heads, KV
    heads attn_config.kv_n_heads; EXAONE 4, AFMoE: the config class's layer_types and sliding_window.
MiMo-V2-Flash (mimo_v2.py MiMoV2DecoderLayer): sliding layers (hybrid_layer_pattern 1) take
    swa_num_key_value_heads x swa_head_dim K and swa_v_head_dim V (else swa_head_dim) and a window of
    sliding_window_size (one token less than transformers' sliding_window); tp must divide
    swa_num_attention_heads too; a file without these fields is refused (vLLM reads them as given).
Hybrid Mamba/linear-attention models (vllm/platforms/interface.py _align_hybrid_block_size):
    align = max(16 or the MLA block, block_size), at least 128 when the attention is MLA
    (Kimi-Linear: "make the manager block size a multiple of 128", vllm@v0.33.0);  attention block =
    align x cdiv(mamba_page, align x attention_page_of_one_token)  (mamba_cache_mode none/align;
    "all": lcm(mamba chunk, align) x cdiv(cdiv(mamba_page, page_1), that)); the Mamba page is
    padded to block x attention_page_of_one_token.
State shapes (vllm/model_executor/layers/mamba/mamba_utils.py MambaStateShapeCalculator):
    gated DeltaNet (Qwen3-Next, Qwen3.5, OLMo-Hybrid olmo_hybrid.py)
                         conv (conv_dim/tp, kernel-1+num_spec), ssm (v_heads/tp, v_dim, k_dim)
    mamba2 (Nemotron-H, Granite-4.0-H granitemoehybrid.py, Falcon-H1 falcon_h1.py, Mamba2 mamba2.py)
                         conv ((inner + 2 n_groups' d_state)/tp, kernel-1+num_spec), ssm (heads/tp, head_dim,
                          d_state); n_groups' = n_groups, or tp when tp does not divide it; inner =
                          mamba_expand x hidden (Falcon-H1: mamba_d_ssm when set), n_groups and d_state from
                          mamba_n_groups / mamba_d_state (n_groups / state_size for mamba2), the config
                          class's default where the file omits them
    mamba1 (Jamba, Mamba, Falcon-Mamba mamba.py)  conv (inner/tp, kernel-1), ssm (inner/tp, d_state)
    short conv (LFM2 lfm2.py, LFM2-MoE lfm2_moe.py)  conv (conv_dim/tp, conv_L_cache-1), no ssm; LFM2 reads
                         config.conv_dim (without it vLLM raises AttributeError: refused, lfm2.py#L356; LFM2-VL
                         the same, lfm2_vl.py#L713-L718), LFM2-MoE hidden_size; with speculative
                         tokens the layers keep num_spec more columns than the block alignment sizes
                         (short_conv.py get_state_shape): refused
    Granite-4.0-H, LFM2, OLMo-Hybrid and DBRX attention: head_dim = hidden_size // num_attention_heads
    whatever the config says (granitemoehybrid.py, lfm2.py, olmo_hybrid.py, dbrx.py): a contradicting
    head_dim is refused. Qwen2-VL / Qwen2.5-VL: the text model is Qwen2ForCausalLM (qwen2_vl.py).
    MiniCPM3 (minicpm3.py): per-head K and V of qk_nope_head_dim + qk_rope_head_dim on every head, not
    the latent (it is not in model_arch_config_convertor.py is_deepseek_mla: blocks of 16).
    LongCat-Flash (longcat_flash.py): two MLA attentions per decoder layer; pp > 1 refused (vLLM stages
    decoder layers, kvmem's pp_stages attentions). K-EXAONE (exaone_moe.py): a sliding layer's window
    is sliding_windows[i] where listed. Laguna (laguna.py): tp divides each layer's
    num_attention_heads_per_layer; head_dim the config's, else hidden_size // that layer's heads.
    Gemma-4-Unified (gemma4_unified.py): its language model is gemma4.py's Gemma4ForCausalLM.
    Ernie-4.5-VL (ernie45_vl_moe.py): full attention on every layer (a config window is refused).
    Nemotron-NAS (nemotron_nas.py DeciLMDecoderLayer): num_attention_heads // n_heads_in_group KV heads,
    no attention on a no_op block; replace_with_linear is not read by vLLM: refused.
    DeepSeek-V4 (vllm/models/deepseek_v4; kvmem/engines/vllm/compressed.py): per layer a sliding K=V cache
    (blocks of 64), on CSA/HCA layers compressed rows (tokens_per_state 4/128, blocks of 256), the fp32
    compressor state, on CSA an indexer key and its compressor state, fp8_ds_mla pages padded to 576 B;
    block-outermost packed groups, a block = the widest group (kv_cache_planning.py
    _get_packed_kv_cache_groups). MiniMax-M3 (vllm/models/minimax_m3): a bf16 one-head index key of
    sparse_index_dim beside K/V on the sparse_attention_freq layers, blocks of 128. HY-V4 (vllm/models/
    hy_v4): the V3.2 indexer key on sparse layers not "shared". Step-3.5/3.7 (step3p5.py):
    num_attention_groups KV heads. GPTBigCode, SmolLM3: the Transformers backend (transformers/base.py).
    With the hybrid manager off, sliding layers of different windows make vLLM 0.33 refuse
    (_promote_local_kv_cache_specs keeps each window; FullAttentionSpec.merge_window_sizes).
    KDA (Kimi-Linear)    conv (3 x heads x head_dim/tp, kernel-1+num_spec), ssm (heads/tp, head_dim, head_dim)
                         from linear_attn_config (vllm/models/kimi_k3/nvidia/model.py
                         KimiLinearForCausalLM.get_mamba_state_shape_from_config, mamba_utils.py
                         kda_state_shape); its MLA layers cache kv_lora_rank + qk_rope_head_dim, one head
    conv dtype = mamba_cache_dtype ("auto": model dtype); ssm dtype = mamba_ssm_cache_dtype, whose
    "auto" is the conv dtype except where a model hook sets it (vllm/model_executor/models/config.py):
    Qwen3.5 takes the config's mamba_ssm_dtype (float32 in the published checkpoints), Nemotron-H
    defaults to float32; KDA's "auto" is float32 (kda_state_dtype), and its layers keep float32
    whatever the option says (kimi_gdn_linear_attn.py get_state_dtype), so kvmem refuses another.
Families refused by name (REFUSALS): those whose architecture vLLM 0.33.0 no longer has
    (registry.py _PREVIOUSLY_SUPPORTED_MODELS: MiniMax-Text-01/M1 and Bamba after 0.23.0, ...), those
    its registry never had (XGLM, LFM3, ZAYA, ...), and BERT-style encoders run as decoders.
Groups (vllm/v1/core/kv_cache_utils.py get_kv_cache_groups @ 001cabc1):
    hybrid_kv_cache_manager=False turns sliding/chunked layers into full ones when full layers
    exist; one group when every layer has the same spec, or when all have one type (full+MLA, one
    window, mamba) and block size (UniformTypeKVCacheSpecs: num_blocks = memory // sum of pages);
    otherwise smaller pages get larger blocks until all pages are equal (0.33: a non-MLA attention
    page that does not divide the largest is padded to it instead, kv_cache_planning.py
    unify_kv_cache_spec_page_size; earlier releases refuse), layers are bucketed by
    spec, group size = the smallest bucket (the largest when largest < 1.5 x smallest, from
    v0.12, PR #29303), buckets split with stride layers[i::n] (contiguous slices before v0.12),
    the last group of a bucket padded; num_blocks = memory // page // group_size. Ranks (tp, pp)
    take the minimum; a pp rank projects the groups onto its own layers.
Per-request worst case (max_memory_usage_bytes / page) with L = max_model_len,
    T = in-flight tokens:  full, mla cdiv(L, bs);  sliding cdiv(min(window - 1 + T, L), bs) + 1;
    chunked cdiv(min(chunk + T, L), bs);  from v0.26 T = VllmConfig.max_in_flight_tokens =
    max_concurrent_batches x max_num_batched_tokens, max_concurrent_batches = pp + 1 with async
    scheduling (the default; model runner V2, the CUDA default), pp without (vllm/config/vllm.py;
    PR #47728, vllm#49878 saw the jump from v0.25.1 to v0.26); before v0.26 T = max_num_batched_tokens;
    mamba 1 + spec blocks ("none"), 2 + spec blocks ("align",
    the mode prefix caching selects), cdiv(L, bs) ("all").
    "Maximum concurrency for L tokens per request: X x" = num_blocks / sum over groups of those
    (UniformType: the largest per layer). The longest request that fits is vLLM's binary search
    over that worst case (_estimate_max_model_len_from_groups), padding layers included.
The null block: BlockPool holds one block back for good, so auto-fit, the refusal ("To serve at
    least one request ...") and the longest request that fits are checked against
    available - bytes_per_block (one block of every layer of the rank, padding included); the
    pool itself still gets available // bytes_per_block blocks (get_kv_cache_configs and
    check_enough_kv_cache_memory, vllm/v1/core/kv_cache_planning.py in 0.33.0; PR #47272, merged
    2026-08-20, taken as from v0.28: the first release after it is not pinned here).
"GPU KV cache size: N tokens" by release (see `version`):
    v0 engine   "# GPU blocks: N, # CPU blocks: M", block = bs x sum(heads x head_size x 2 [MLA x1])
                x dtype over the stage's attention layers, CPU blocks = swap_space // block
                (vllm/worker/worker.py determine_num_available_blocks); concurrency
                num_blocks x bs / L
    < 0.8       "# GPU blocks: N", concurrency num_blocks x bs / L (early V1: sliding/chunked layers
                beside full ones are cached as full, PR #14097)
    0.8         N = num_blocks x bs, concurrency N / L (PR #13596)
    0.9 - 0.20  N = num_blocks // number_of_groups x smallest block size, concurrency as above; groups
                from the hybrid allocator (PR #17996, June 2025; kvmem applies it from 0.9, though
                0.9.0 itself may predate it)
    >= 0.21     N = int(concurrency x L). PRs #38364/#40694 proposed it after vllm#40691 (v0.19);
                the release it landed in is not pinned: v0.21 is where vllm#43308 saw Gemma-4's
                count jump ~10x at equal memory, and v0.24 logs print this form.
estimate(tokens, batch) = the blocks really allocated for `batch` sequences of `tokens` tokens
    (kv_cache_manager.allocate_slots; single_type_kv_cache_manager.py get_num_skipped_tokens):
    full cdiv(t + k, bs); sliding the same minus max(0, t - window) // bs freed blocks; chunked
    minus ((t - 1) // chunk x chunk) // bs; mamba as its worst case; k = num_speculative_tokens
    lookahead slots. Padding-layer slots of those blocks are reported in details, not per layer;
    draft layers follow the model's own in per_layer.

Unverified here, stated where used: the release that moved the token formula to
int(concurrency x L); the default of mamba_cache_mode "align" vs "none" (kvmem follows
enable_prefix_caching, default off: the v0.19 Qwen3.5 log reproduces with "none");
Mamba "align" blocks held in a running decode (kvmem counts the worst case, 2); releases
around v0.11 aligned hybrid blocks to the Mamba chunk whenever prefix caching was on
(mamba_cache_mode="all" models that); DeepSeek-V3.2 with kv "auto" is bf16 now, but older
releases (models/config.py @ 0144dd5b) mapped it to fp8_ds_mla too (pass kv_dtype="fp8_ds_mla");
draft layers with pp > 1 are refused (where vLLM puts them is not modelled).

Modules: options (options, releases, KV formats), pages (a layer's page spec), layout
(model -> specs -> groups), pool (pages per stage, a request's worst case, held pages), entry
(estimate, capacity), v0 (the v0 engine), budget (what kvmem.sizing asks: the memory budget,
activations, batch defaults by device).
"""

from .budget import SIZING, batch_defaults, prefix_sharing, rope_cache_bytes, vllm_activation_bytes
from .entry import capacity, estimate
from .launch import LAUNCHER
from .logs import READER
from .options import OPTIONS
from ..base import CheckedFamilies, EngineSpec, Option, PastPositions

__all__ = ["estimate", "capacity", "OPTIONS", "SPECS", "vllm_activation_bytes", "batch_defaults",
           "rope_cache_bytes"]

# vllm/config/model.py _get_and_verify_max_len: a ValueError unless the variable is set
POSITIONS = PastPositions("vLLM refuses a max_model_len above it", "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1")
# Families kvmem reads that vLLM 0.33.0 cannot load: their architectures are in
# vllm/model_executor/models/registry.py _PREVIOUSLY_SUPPORTED_MODELS (last release that had them).
_REMOVED = "vLLM 0.33.0 has no {arch} (registry.py _PREVIOUSLY_SUPPORTED_MODELS: last in {last})"
REFUSALS = {
    "minimax": _REMOVED.format(arch="MiniMaxText01ForCausalLM / MiniMaxM1ForCausalLM", last="0.23.0"),
    "bamba": _REMOVED.format(arch="BambaForCausalLM", last="0.23.0"),
    "dots1": _REMOVED.format(arch="Dots1ForCausalLM", last="0.23.0"),
    "mpt": _REMOVED.format(arch="MPTForCausalLM", last="0.28.0"),
    # Families transformers 5.24 defines whose architecture vLLM 0.33.0's registry (registry.py) lacks
    **{t: "vLLM 0.33.0's model registry (vllm/model_executor/models/registry.py) has no architecture for it"
       for t in ("xglm", "lfm3", "lara_mini", "youtu", "axk2", "kosmos_2_5_text_model", "modernbert-decoder", "zaya",
                 "mistral4", "mistral_large4_text")},
    # vllm/transformers_utils/config.py get_config: a model_type in neither vLLM's _CONFIG_REGISTRY nor
    # transformers' goes to AutoConfig.from_pretrained (#L443-L449), which raises for it
    "deepseek_ref": "vLLM 0.33.0 cannot load this config: model_type 'deepseek_ref' is in neither its config registry "
                    "nor transformers' CONFIG_MAPPING, and get_config hands it to AutoConfig.from_pretrained "
                    "(vllm/transformers_utils/config.py#L443-L449), which raises; started with --hf-overrides "
                    "'{\"model_type\": \"deepseek_v4\"}' it is DeepSeek-V4 (size it as model_type deepseek_v4)",
    # registry.py has no GPTNeoForCausalLM, and _try_resolve_transformers (#L1266-L1337) returns None for a
    # transformers class that is neither is_backend_compatible() nor _can_set_attn_implementation() (#L1327-L1333)
    "gpt_neo": "vLLM 0.33.0 has no architecture for GPTNeoForCausalLM: its registry (vllm/model_executor/models/"
               "registry.py) lacks it and its Transformers-backend fallback (_try_resolve_transformers) turns down "
               "transformers' GPTNeoForCausalLM, which neither supports the attention backend interface nor can "
               "set its attention implementation",
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
# gemma4.py takes each layer's head_dim and KV heads from per_layer_config as kvmem does.
FAMILIES = CheckedFamilies(frozenset({
    "afmoe", "cohere2_moe", "dbrx", "ernie4_5_vl_moe_text", "exaone4", "exaone_moe", "falcon_h1", "falcon_mamba",
    "gemma4_text", "gemma4_unified_text", "glm_moe_dsa", "granitemoehybrid", "kimi_linear", "laguna", "lfm2",
    "lfm2_moe", "longcat_flash", "mamba", "mamba2", "mimo_v2_flash", "minicpm3", "nemotron-nas", "olmo_hybrid",
    "deepseek_v4", "exaone4_5_text", "step3p5", "mimo", "minimax_m3", "minimax_m3_text", "minimax_m3_vl_text",
    "hy_v4", "axk1", "sarvam_mla", "gpt_bigcode", "smollm3",
    "qwen2_5_vl_text", "qwen2_vl_text", "bailing_hybrid"}))
DECLARED = (Option("mamba_cache_mode", choices=("none", "align", "all"), help="--mamba-cache-mode"),
            Option("draft", model=True,
                   help="a draft model for speculative decoding: a preset or an HF id (the API also takes 'mtp')"))
SPECS = (EngineSpec("vllm", OPTIONS, estimate, capacity, SIZING, prefix_sharing, POSITIONS, pinned="vLLM 0.33.0",
                    refusals=REFUSALS, declared=DECLARED, families=FAMILIES, launch=LAUNCHER, log_reader=READER),)

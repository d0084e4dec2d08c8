"""SGLang: the token pool it allocates, and how it sizes that pool from free memory.

Read in sgl-project/sglang (2025-2026 main; files named as in the repository):

1. Heads per rank. ``ModelConfig.get_num_kv_heads`` (srt/configs/model_config.py) is
   ``max(1, kv_heads // attn_tp)``: heads split by tensor parallelism, one replicated head
   when tp > kv_heads. The attention layers require tp to divide the heads (or the heads
   to divide tp), so other tp are refused (kvmem.engines.base.kv_heads_per_rank). The MLA
   latent has no heads: every rank holds all of it.
2. Buffers, per layer (srt/mem_cache/memory_pool.py; fp8 is stored as uint8, 1 byte):
       MHA   K (size + page_size, heads, head_dim)  V (size + page_size, heads, v_head_dim)
             -- MHATokenToKVPool._create_buffers; the extra page is slot 0, written by padded
             tokens. fp4_e2m1 (kvmem "nvfp4"): K and V (size + page, heads, head_dim // 2) plus
             one uint8 scale per 16 values, (size + page, heads * head_dim // 16) each
             (MHATokenToKVPoolFP4; V uses head_dim too).
       MLA   one buffer (size + page_size, 1, kv_lora_rank + qk_rope_head_dim)  (MLATokenToKVPool);
             fp4: (size + page, 1, dim // 2) + (size + page, dim // 16)  (MLATokenToKVPoolFP4).
       NSA   DeepSeek-V3.2 (NSATokenToKVPool): the latent with fp8 takes kv_lora_rank +
             kv_lora_rank // 128 * 4 + qk_rope_head_dim * 2 = 656 B (fp8 latent, fp32 scales,
             bf16 rope; ModelRunnerKVCacheMixin.calculate_mla_kv_cache_dim), otherwise
             (rank + rope) elements; plus an indexer buffer of ((size + page + 1) // page)
             pages x page x (index_head_dim + index_head_dim // 128 * 4) bytes. SGLang forces
             page_size 64 for these models (server_args.py "Setting page size to 64 for
             DeepSeek NSA."); kvmem does the same and says so in the notes.
   Log (KVCache._finalize_allocation_log): "KV Cache is allocated. dtype: {torch dtype}, #tokens:
   {size}, K size: {k/GB:.2f} GB, V size: {v/GB:.2f} GB" with GB = 2**30 (from 0.5.13; earlier releases,
   ``version``, have no dtype field), or "..., KV size: X GB" for MLA/NSA
   (one buffer; NSA includes the indexer). Builds before about Feb 2025 print
   "KV Cache is allocated. K size: X GB, V size: Y GB." (no #tokens). ``pools()`` returns
   these sizes for a given #tokens and ``Pool.log_line()`` prints the line.
3. Which layers have buffers. Every decoder layer of the pipeline stage
   (``num_effective_layers = end_layer - start_layer``): the sliding-window layers of
   Gemma-2/3, Mistral-7B-v0.1, Phi-3 and every other model outside the list below are cached
   at full length. Hybrid-SWA architectures (``is_hybrid_swa_model``: Llama4ForConditionalGeneration,
   GptOssForCausalLM, MiMoV2Flash, Step3p5, Gemma4) get two pools (srt/mem_cache/swa_memory_pool.py
   SWAKVPool): full layers in one, sliding/chunked layers in another, unless
   ``disable_hybrid_swa_memory``. Linear/Mamba hybrids (Qwen3-Next, Qwen3.5, Jamba,
   Nemotron-H) cache tokens only in their attention layers (HybridLinearKVPool) and keep a
   per-request state (MambaPool): conv ``(conv_dim / tp, conv_kernel - 1)`` in the model dtype
   and the recurrent state in ``mamba_ssm_dtype`` (float32 by default; srt/configs/mamba_utils.py).
4. Capacity (ModelRunnerKVCacheMixin.profile_max_num_token / init_memory):
       cell_size  = kv_heads_per_rank x (head_dim + v_head_dim) x layers x dtype_bytes  (MHA)
                  = (kv_lora_rank + qk_rope_head_dim) x layers x dtype_bytes (+ 132 x layers, NSA)
                  fp4: cell // 2 + one byte per 16 values (K only, x2 for MHA)
                  hybrid SWA: (F x n_full + S x n_swa) x dtype_bytes
       max_total_num_tokens = rest_bytes // cell_size, floored to a multiple of page_size
   where ``rest`` (kvmem's ``kv_memory``) is what the sizing step left for the cache:
   ``available_after_weights - free_before_weights x (1 - mem_fraction_static)``. Ranks of a
   pipeline take the minimum. Linear hybrids first give the Mamba pool its slots from
   ``rest x r / (1 + r)`` (r = mamba_full_memory_ratio, 0.9) less one padding slot, or from
   --max-mamba-cache-size / --max-running-requests, and cap the requests at slots // 3 (+2 with the
   extra buffer and overlap scheduling); the cells get the remainder (module mamba, 0.5.23).
   Hybrid SWA then splits the tokens (set_num_tokens_hybrid_swa): full = int(T x (F n_f + S n_s)
   / (F n_f + r S n_s)), swa = int(full x r), both floored to page_size, r =
   swa_full_tokens_ratio (0.8). SGLang does these splits in float (GiB and ratios), and so
   does kvmem, so the printed counts come out the same; bytes stay exact integers.
   The DSA (NSA) profile counts the latent as its buffer holds it (656 B in fp8, 0.5.23) and the
   indexer only on the layers that keep one (GLM-5.2's shared-top-k layers hold none).
5. estimate(tokens, batch): the pool rows this workload occupies: each sequence takes
   whole pages (cdiv(tokens, page_size)), plus the one padding page per layer. In hybrid-SWA
   pools a sliding layer holds its window rounded up to whole pages: SGLang frees
   out-of-window tokens lazily (``_evict_swa``, page-aligned, between steps), so the real
   occupancy runs up to about a window and a page above this. Recurrent state is
   ``batch`` x the per-request state (the pool's own extra slot is not counted).
   Not modelled: speculative-decoding draft pools, host (HiCache) tiers (data-parallel attention: module parallel).

6. Opt-in families (module families): those SGLang 0.5.23 runs and kvmem lays out as its ModelConfig does
   (FAMILIES, checked with kvmem/oracles/sglang_families.py), and those it does not run (REFUSALS, with
   the reason in its code; base families too, e.g. Jamba). Families with no EntryClass run through its
   Transformers backend (models/transformers.py): one MHA pool on every layer, no tp/pp without the
   model's plans, tp dividing the KV heads. A layer with a Mamba2 state beside its attention (Falcon-H1)
   is in both the KV pool and the state pool.

Modules: families (which opt-in families it runs), pools (the layout of the layers and the pools'
bytes), mamba (a hybrid's state pool and
request cap), entry (estimate, capacity),
budget (what kvmem.sizing asks: mem_fraction_static and its default by GPU), parallel (data-parallel
attention and expert parallelism: the pool per attention group, the weights per GPU).
"""

from ..base import EngineSpec, PastPositions
from .families import FAMILIES, REFUSALS
from .budget import SIZING, prefix_sharing, sglang_mem_fraction_static
from .parallel import DECLARED, PARALLEL_DEFAULTS, capacity, estimate
from .launch import LAUNCHER
from .logs import READER
from .pools import DEFAULTS, GB, Pool, cell_size, is_hybrid_swa, pools

__all__ = ["DEFAULTS", "GB", "Pool", "pools", "cell_size", "is_hybrid_swa", "estimate", "capacity", "SPECS",
           "sglang_mem_fraction_static"]

# python/sglang/srt/configs/model_config.py: a ValueError unless the variable is set
POSITIONS = PastPositions("SGLang refuses a context_length above it", "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1")
QUERY_HEADS = ("SGLang asserts total_num_heads % attn_tp_size == 0 (python/sglang/srt/models/llama.py and the "
               "other model files)")
SPECS = (EngineSpec("sglang", {**DEFAULTS, **PARALLEL_DEFAULTS}, estimate, capacity, SIZING, prefix_sharing,
                    POSITIONS, QUERY_HEADS,
                    pinned="SGLang 0.5.23", refusals=REFUSALS, families=FAMILIES, launch=LAUNCHER, log_reader=READER,
                    declared=DECLARED),)

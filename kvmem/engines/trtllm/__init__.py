"""TensorRT-LLM: the paged KV cache of its KVCacheManager, in blocks of tokens_per_block.

Read in NVIDIA/TensorRT-LLM (tensorrt_llm/_torch/pyexecutor/resource_manager.py at
001541ba and a 2026 main; cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp; 2025 copies):

1. Bytes per token, as allocated (KVCacheManager.__init__ / get_cache_bytes_per_token):
       kv_factor x sum over the rank's layers of kv_heads_per_layer x head_dim, in the cache dtype
   with kv_heads_per_layer = ceil(kv_heads / tp) (``(num_kv_heads + tp - 1) // tp``: one
   replicated head when tp > kv_heads; tp is 1 under attention data parallelism), kv_factor 2
   (K and V), and one head_dim for both K and V. MLA (DeepSeek, Kimi) caches K only
   (CacheType SELFKONLY, kv_factor 1) with one "head" of kv_lora_rank + qk_rope_head_dim, not
   split by tp. NVFP4 adds one fp8 scale per 16 values: ceil(x/2) + ceil(x/16) bytes
   (kvmem.dtype("nvfp4")). Layers without attention (Mamba, MLP-only) hold no blocks.
   DeepSeek sparse attention (DeepSeek-V3.2, GLM-5: DSACacheManager) adds an indexer key on every
   layer, counted per token as index_head_dim + index_head_dim // 128 x 4 more elements in the
   cache dtype (sparse/dsa/cache_manager.py @ eaab4c3a; the pool itself holds them as fp8 values
   and float32 scales, 1 byte each, in the C++ KVCacheManager's indexer pool) -- TRT-LLM's own
   accounting. Releases of early 2026 asserted tokens_per_block == 64 for it (kvmem notes another).
2. The pool size comes from a cheaper estimate (get_cache_size_per_token, used by
   _util.py KvCacheCreator to turn memory into ``max_tokens``): MLA as above; otherwise
   2 x layers x (head_dim x kv_heads // tp) x dtype bytes -- the product is floored, so when
   tp > kv_heads it counts a fraction of a head and sizes the pool for fewer bytes than
   rule 1 then allocates (kvmem notes it). fp8 1 byte, fp4 ceil(x/2) + ceil(x/16), any other
   dtype 2 bytes. Layers: this rank's share of the attention layers, the first
   ``n % pp`` ranks taking one more (Mapping.pp_layers: torch.tensor_split).
3. Capacity. ``kv_memory`` is the memory TRT-LLM gives the cache on one rank: the PyTorch
   backend prints it as "available KV cache memory when calculating max tokens" =
   (device total - profiling peak + temporary KV) x free_gpu_memory_fraction (0.9); the
   older C++ runtime as "available" x free_gpu_memory_fraction. Then
       max_tokens = kv_memory // bytes_per_token (rule 2)        "kv size is N" prints the divisor
       blocks     = ceil(max_tokens / tokens_per_block)          (block_rounding="ceil")
   The C++ BaseKVCacheManager::calculateMaxNumBlocks and the Python calculate_max_num_blocks
   of TRT-LLM <= 1.1 round up (observed: 0.13 engine logs, 1.1.0rc3 PyTorch logs); the
   Python path on 2026 main floors (``int(max_tokens // tokens_per_block)``):
   block_rounding="floor". Allocated: blocks x tokens_per_block tokens x rule-1 bytes
   ("[MemUsageChange] Allocated X GiB for max tokens in paged KV cache (N)"). The longest
   request that fits is blocks x tokens_per_block ("Attention window size W exceeds upper
   bound U for available blocks").
4. Windows. TRT-LLM caches every layer for the whole sequence unless
   KvCacheConfig.max_attention_window is set: the default is [max_seq_len]
   (KVCacheManager.__init__), so gpt-oss's sliding layers cost as much as its full ones
   (1.1.0rc3 logs "kv size is 73728" = 36 layers x 2 x 8 x 64 x 2). ``max_attention_window``
   takes that list (repeated over the layers as a pattern, each entry clamped to
   max_seq_len) or "model" for the model's own sliding windows. A layer then holds
   cdiv(min(tokens, window), tokens_per_block) blocks per sequence
   (KVCacheManager::calculateMaxBlockRequirementsPerBeam). With several distinct windows
   (VSWA) each window has its own pool: the memory is shared in proportion to
   window x bytes-per-token of that window's layers (BlockManager::calculateWindowSizeToShare),
   max_tokens_w = kv_memory x share_w / bytes_w, rounded to blocks as above. Which memory
   the PyTorch backend hands to this split was not verified; kvmem gives it ``kv_memory``.
   The share is computed in float32 there and exactly here: a count may differ by one.
5. estimate(tokens, batch): every layer holds whole blocks per sequence (rule 4) of rule-1
   bytes; Mamba/linear state is batch x the per-sequence state in the model dtype
   (MambaHybridCacheManager; its dtype option was not verified), Kimi-K3's KDA state its whole
   conv window in the model dtype and its recurrent state in fp32 (config_utils.py
   extract_mamba_kv_cache_params; models.state_bytes_of). ``details`` keys block
   counts by window, 0 standing for the whole sequence. Beam search, sink tokens and the
   secondary (host) pool are not modelled.

Families (families.py): the opt-in families the PyTorch backend's registry lacks are refused with
its reason (tensorrt_llm/_torch/models/_arch_index.py @ 065ff9e9); those it runs and kvmem lays out
as its model files do are declared, each with its file; docs/research/families_trtllm.md is the table.

Modules: cache (rules 1-5: bytes per token, blocks, capacity), sizing (the memory budget),
families (which opt-in families it sizes or refuses).
"""

from __future__ import annotations

from ..base import EngineSpec, Option
from .cache import DEFAULTS, TrtllmCapacityDetails, TrtllmDetails, bytes_per_token, capacity, estimate, pp_layers
from .families import FAMILIES, REFUSALS
from .launch import LAUNCHER
from .logs import READER
from .sizing import SIZING, prefix_sharing

__all__ = ["DEFAULTS", "bytes_per_token", "pp_layers", "estimate", "capacity", "SPECS", "TrtllmDetails",
           "TrtllmCapacityDetails"]

# What was read: the cache manager at one main commit, the model registry and model files at later main
# commits (each cited where used); the repository's history is not at hand to tie them to a release tag.
PINNED = "TensorRT-LLM main (resource_manager.py @ 001541ba, model registry @ 065ff9e9)"
QUERY_HEADS = "TensorRT-LLM asserts num_heads % tp_size == 0 (tensorrt_llm/_torch/modules/attention.py)"
SPECS = (EngineSpec("trtllm", dict(DEFAULTS), estimate, capacity, SIZING, prefix_sharing, query_heads_rule=QUERY_HEADS,
                    pinned=PINNED, refusals=REFUSALS, families=FAMILIES, launch=LAUNCHER, log_reader=READER,
                    declared=(Option("block_rounding", choices=("ceil", "floor"),
                                     help="how tokens round to whole blocks"),)),)

"""TensorRT-LLM: the paged KV cache of its KVCacheManager, in blocks of tokens_per_block.

Read in NVIDIA/TensorRT-LLM through the code index (the repository is past the fetch limit): PINNED below names
its two commits (the cache manager, the registry and KvCacheCreator), READ_AT the commits other files are stored
at. Each rule sits beside its pin, trtllm@<commit> <path>#L<a>-L<b> (tests/test_pins.py counts them and the older
citations still without lines).

  cache      1. bytes per token as allocated (_layers: kv_heads_per_layer = ceil(kv_heads / tp),
             MLA's one K-only "head", NVFP4 scales, DSA's indexer key); 2. the cheaper estimate that
             sizes the pool (_static_bytes_per_token: floored heads, pp layer shares); 3. capacity
             (capacity, _to_blocks: max_tokens, blocks rounded by release); 4. windows and VSWA
             pools (_windows, capacity); 5. estimate (whole blocks per sequence, Mamba/KDA states)
  models     what its model files build where they differ from the config's reading; Gemma 4's
             KVCacheManagerV2 layout (gemma4_layout: per-layer heads, windows by default, v2_window_blocks)
  minimax    MiniMax-M3's MiniMaxM3KVCacheManagerV2: K/V on every layer, a bf16 index key on layers 3..N-1
  families   the families (opt-in and base: GPT-2, Falcon, Gemma 2, ...) the PyTorch backend's registry lacks are
             refused with its reason (trtllm@065ff9e9 tensorrt_llm/_torch/models/_arch_index.py#L36-L118), and
             any config whose architectures[0] it lacks (check_architecture: trtllm-serve --backend pytorch, the
             command LAUNCHER prints, loads through it); those it runs, each with its file;
             docs/research/families_trtllm.md is the table
  dsv4       DeepSeek-V4's DeepseekV4CacheManager (KVCacheManagerV2): SWA, compressed, compressor-state and
             indexer buffers per layer, each with its rows per block and window; capacity refused
  draft      a speculative draft's KV cache (MTP layers or a draft model) and the budget it shares
  sizing     the memory budget (the multimodal encoder cache reserve, a draft model's weights)
  launch, logs  the trtllm-serve command (LAUNCHER) and the startup log's reader (READER)
Not modelled: beam search, sink tokens and the secondary (host) pool.
"""

from __future__ import annotations

from ..base import EngineSpec
from ..declared import Option
from . import dsv4
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
# The other commits a rule's pin names (trtllm@<commit> <path>#L<a>-L<b>): files the code index stores at a commit other
# than the two above, each read at the one version stored (docs/research/families_trtllm.md lists them)
READ_AT = {
    "0462117e": "tensorrt_llm/_torch/attention_backend/sparse/minimax_m3/cache_manager.py",
    "fbbc05dd": "tensorrt_llm/_torch/models/modeling_exaone4.py",
    "d2c804bc": "tensorrt_llm/_torch/models/modeling_exaone_moe.py",
    "4d365368": "tensorrt_llm/_torch/models/modeling_nemotron_nas.py",
    "0c37d5ba": "tensorrt_llm/_torch/models/modeling_step3p7.py",
    "1548780d": "tensorrt_llm/runtime/kv_cache_manager_v2/_life_cycle_registry.py",
    "eaab4c3a": "tensorrt_llm/_torch/attention_backend/sparse/dsa/cache_manager.py",
    "3c4acdc9": "tensorrt_llm/_torch/models/modeling_afmoe.py",
    "9289d069": "tensorrt_llm/_torch/models/modeling_laguna.py",
    "5d4a661c": "tensorrt_llm/_torch/models/modeling_auto.py",
    "01bffee1": "tensorrt_llm/_torch/models/modeling_auto.py",
    "0050262c": "tensorrt_llm/_torch/models/modeling_exaone4_5.py",
    "1c0067ee": "tensorrt_llm/_torch/models/modeling_gemma4_unified.py",
    "001a6a01": "tensorrt_llm/_torch/models/modeling_gemma4mm.py",
    "00e7d103": "tensorrt_llm/_torch/models/modeling_gemma4.py",
    "00f6bd61": "tensorrt_llm/runtime/kv_cache_manager_v2/_storage_manager.py",
    "00b6d5a2": "tensorrt_llm/_torch/configs/__init__.py",
    "015279e0": "tensorrt_llm/_torch/attention_backend/sparse/deepseek_v4/cache_manager.py",
    "03c233a7": "tensorrt_llm/_torch/attention_backend/sparse/deepseek_v4/deepseek_v4.py",
    "00679c66": "tensorrt_llm/_torch/pyexecutor/config_utils.py",
    "1a0dc5f7": "tensorrt_llm/_torch/model_config.py",
    "008e0af8": "tensorrt_llm/_torch/model_config.py",
    "cf328e85": "tensorrt_llm/_torch/models/modeling_kimi_linear.py",
    "10ce7685": "tensorrt_llm/_torch/attention_backend/sparse/deepseek_v4/cache_manager.py",
    "c666e7ea": "tensorrt_llm/_torch/models/modeling_qwen2vl.py",
    "047098b7": "tensorrt_llm/_torch/models/modeling_step3p7vl.py",
    "00be09f7": "tensorrt_llm/_torch/pyexecutor/kv_cache_manager_v2.py",
    "28295084": "tensorrt_llm/_torch/pyexecutor/kv_cache/mamba_cache_manager/common.py",
    "00043967": "tensorrt_llm/llmapi/llm_args.py",
    "02267d3d": "tensorrt_llm/models/__init__.py",
    "04d175ac": "tensorrt_llm/_torch/models/modeling_gemma2.py",
}
QUERY_HEADS = "TensorRT-LLM asserts num_heads % tp_size == 0 (tensorrt_llm/_torch/modules/attention.py)"
SPECS = (EngineSpec("trtllm", dict(DEFAULTS), estimate, capacity, SIZING, prefix_sharing, query_heads_rule=QUERY_HEADS,
                    pinned=PINNED, refusals=REFUSALS, families=FAMILIES, launch=LAUNCHER, log_reader=READER,
                    declared=(Option("block_rounding", choices=("ceil", "floor"),
                                     help="how the pool's tokens round to whole blocks: floor at the pinned main "
                                          "(the default); ceil for the C++ runtime (0.x TRT engines) and 1.1.0rc3"),
                              Option("draft", model=True,
                                     help="speculative decoding: a draft model (a preset or an HF id; the API also "
                                          "takes 'mtp', the model's MTP layers) whose KV cache shares the budget"),
                              Option("indexer_k_dtype", choices=dsv4.INDEXER_K_DTYPES,
                                     help="DeepSeek-V4's indexer key cache (sparse_attention_config.indexer_k_dtype; "
                                          "TensorRT-LLM's default is fp4 on Blackwell, fp8 below)"))),)

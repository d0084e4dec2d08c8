"""SGLang: the token pool it allocates, and how it sizes that pool from free memory.

kvmem follows SGLang 0.5.23 (``version`` picks an older release's log line). Each rule sits beside
the code it governs with its pin, read in the installed 0.5.23 (the pool's log line:
sglang@v0.5.23 python/sglang/srt/mem_cache/memory_pool.py#L2073-L2099):

  pools      which layers hold buffers (every layer of the stage, hybrid-SWA's two pools, linear
             hybrids' attention layers), heads per rank, each buffer's shape (MHA, MLA, NSA/DSA,
             fp4), the "KV Cache is allocated" line, the profile's cell size
  entry      estimate (the pool rows a workload occupies: whole pages, the padding page, a
             window's pages) and capacity (max_total_num_tokens from ``rest``, the hybrid-SWA
             split, pipeline stages)
  mamba      a linear hybrid's state pool and its request cap
  dsv4       DeepSeek-V4: DSV4PoolConfigurator's SWA / c4 / c128 / state pools and their log lines
  admission  what SGLang admits at once (SizingRules.pools_refuse)
  families   the opt-in families it runs (its registry or its Transformers backend) and those it
             refuses, each with the reason in its code
  budget     what kvmem.sizing asks: mem_fraction_static and its default by GPU
  parallel   data-parallel attention and expert parallelism: the pool per attention group, the
             weights per GPU
  hicache    the host (HiCache) tier
  launch, logs  the launch_server command (LAUNCHER) and the startup log's reader (READER)
  draft      a speculative (EAGLE / NEXTN / STANDALONE) draft's pool beside the target's
"""

from ..base import EngineSpec
from ..positions import PastPositions
from .budget import SIZING, prefix_sharing, sglang_mem_fraction_static
from .draft import DECLARED as DRAFT_DECLARED
from .draft import DRAFT_DEFAULTS
from .families import FAMILIES
from .launch import LAUNCHER
from .logs import READER
from .parallel import DECLARED, PARALLEL_DEFAULTS, capacity, estimate
from .pools import DEFAULTS, GB, POOL_DECLARED, Pool, cell_size, is_hybrid_swa, pools
from .refusals import REFUSALS

__all__ = ["DEFAULTS", "GB", "Pool", "pools", "cell_size", "is_hybrid_swa", "estimate", "capacity", "SPECS",
           "sglang_mem_fraction_static"]

# sglang@v0.5.23 python/sglang/srt/configs/model_config.py#L1296-L1318: a ValueError unless the variable is set
POSITIONS = PastPositions("SGLang refuses a context_length above it", "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1")
QUERY_HEADS = ("SGLang asserts total_num_heads % attn_tp_size == 0 (python/sglang/srt/models/llama.py and the "
               "other model files)")
SPECS = (EngineSpec("sglang", {**DEFAULTS, **PARALLEL_DEFAULTS, **DRAFT_DEFAULTS}, estimate, capacity, SIZING,
                    prefix_sharing, POSITIONS, QUERY_HEADS,
                    pinned="SGLang 0.5.23", refusals=REFUSALS, families=FAMILIES, launch=LAUNCHER, log_reader=READER,
                    declared=DECLARED + DRAFT_DECLARED + POOL_DECLARED),)

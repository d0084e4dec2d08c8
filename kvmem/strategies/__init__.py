"""What-if strategies: the seed's memory-reduction families, counted in exact bytes.

The seed notebook ("KV Caching", section Memory Tradeoff) names four families. Each is
applied here on top of the Estimate an engine mode returns, so it works for every engine:

Eviction (token dropping) — ``kvmem.Eviction``; each layer keeps a capped number of tokens:
    streaming  sink + window tokens: the first ``sink`` (attention sinks) and the most recent
               ``window`` (StreamingLLM, Xiao et al. 2024, arXiv:2309.17453; 4 sink tokens
               "suffice", §3.1, hence the default sink=4)
    h2o        ``budget`` tokens: heavy hitters by accumulated attention + the ``recent`` most
               recent (H2O, Zhang et al. 2023, arXiv:2306.14048; its h2o_hf scripts split the
               budget half and half, hence the default recent = budget // 2)
    snapkv     the prompt is compressed once, after prefill, to ``budget`` tokens per layer (the
               ``observation_window`` last prompt tokens included, default 32 as in SnapKV,
               Li et al. 2024, arXiv:2404.14469, §5.3); the ``new_tokens`` decoded afterwards are
               all kept: held = min(prompt, budget) + new_tokens, prompt = tokens - new_tokens
    The cap C is uniform over layers, so the engine's own estimate is re-run with tokens=C:
    full and MLA layers hold C, sliding/chunked layers min(own window, C), linear/SSM state is
    unchanged, and the engine's blocks, pads and pre-allocations apply to what is held. An
    engine that pre-allocates (hf-static max_cache_len, llama.cpp n_ctx given) therefore
    saves nothing, which is what it would do. A window or budget of at least ``tokens``
    holds every token (no error): the cache is bounded, it just is not reached yet.

Shared prefix (copy-on-write) — ``shared_prefix=P``: the batch's sequences start with the same
    P tokens, stored once. Paged engines share whole blocks only: S = floor(P / block) x block
    tokens (vLLM hashes full blocks only, docs.vllm.ai/en/latest/design/prefix_caching/, and
    shares them through prefix caching; SGLang pages of ``page_size`` and TensorRT-LLM blocks of
    ``tokens_per_block`` by the same page-granular reasoning, not checked against their source
    here); others share every token (S = P). llama.cpp shares cells only in a unified cache
    (``kv_unified``): with one stream per sequence nothing is shared. With E(t, b) the
    engine's estimate:
        shared = E(T - S, B) + E(T, 1) - E(T - S, 1)
    i.e. B private suffixes plus one copy of what the prefix adds to a sequence. Fixed
    per-sequence state and per-layer pads cancel in the difference; for a sliding layer the
    difference is exactly the part of the prefix still inside its window. Requires S < T
    (each sequence owns at least one token) and cannot be combined with eviction (evicted
    caches differ per sequence). Transformers caches keep one row per sequence and share
    nothing: for hf-* engines this is a what-if, and the Estimate says so.

Offload — ``offload=f``: the fraction f of the KV lives in host memory. On the device K and V
    each shrink by floor(bytes x f) (f read as its decimal value); recurrent state stays.
    ``Estimate.offload.host_kv_bytes`` holds what moved; ``per_layer`` spreads it over the caching
    layers in proportion to their bytes (whole bytes, largest remainder; a layer holding both
    KV and a recurrent state counts its state in that weight). Every decode step attends to all tokens,
    so the host part crosses the host link once per step: ``offload_transfer_seconds``
    (PCIe per direction, NVLink half its aggregate bidirectional figure, kvmem/data/gpus.json).

Quantisation — ``quantized_estimate``/``quantization_options``: every format of kvmem.dtypes,
    scales and zero points included, K and V chosen separately, with an optional full-precision
    residual of the most recent tokens (KIVI keeps 128; transformers QuantizedCache
    ``residual_length``). Counted the ideal way (every element once).

Paged vs contiguous — ``preallocation_waste``, ``simulate_admission``, ``allocation_sweep``:
    reserved vs used bytes for request-length distributions (fixed, uniform, the cited
    ShareGPT/Alpaca means of kvmem/data/request_lengths.json, or a log-normal from a mean and
    a median) under pre-allocation to max_model_len and under blocks of several sizes.

Architecture variants — ``architecture_variants``: the same model's cache as MHA, GQA with g
    groups, MQA, MLA with a latent rank, and cross-layer sharing every k layers; for a model
    with windows or a hybrid, the same without its sliding windows or its linear/SSM layers
    (what those save). All need (re)training; each row cites its own source.

``compare_strategies`` puts one row per strategy side by side with its saving and its cost,
quoting the measured quality deltas of kvmem/data/quality.json where they exist.

Modules: eviction (the policies), apply (kvmem.estimate and the rules above applied to an
Estimate), records (what each did, attached to the Estimate: ``.eviction``, ``.shared_prefix``,
``.offload``), rows (the records compare, variants and allocation return), quantisation,
quality (the cited data), variants, allocation (paged vs contiguous), compare. They are built
on kvmem.engines and name no engine: what an engine shares of a prefix is its own rule
(EngineSpec.prefix).
"""

from .allocation import (
                         REQUEST_DISTRIBUTIONS,
                         allocation_sweep,
                         preallocation_waste,
                         request_lengths,
                         simulate_admission,
)
from .compare import compare_strategies
from .estimate import apply_strategies, estimate, offload_transfer_seconds
from .eviction import EVICTION_POLICIES, Eviction, EvictionPolicies, eviction_policies
from .quality import quality_results
from .quantisation import KIVI, quantization_options, quantized_estimate
from .records import EvictionApplied, Offloaded, PrefixShared
from .rows import Admission, Admitted, AllocationRow, AllocationWaste, QuantRow, Reservation, StrategyRow, VariantRow
from .variants import architecture_variants

__all__ = ["estimate", "Eviction", "EVICTION_POLICIES", "apply_strategies", "offload_transfer_seconds",
           "quantized_estimate", "quantization_options", "architecture_variants",
           "preallocation_waste", "simulate_admission", "allocation_sweep", "request_lengths",
           "compare_strategies", "quality_results", "REQUEST_DISTRIBUTIONS", "eviction_policies", "KIVI",
           "EvictionApplied", "PrefixShared", "Offloaded", "StrategyRow", "VariantRow", "AllocationWaste",
           "Reservation", "Admitted", "Admission", "AllocationRow", "QuantRow", "EvictionPolicies"]

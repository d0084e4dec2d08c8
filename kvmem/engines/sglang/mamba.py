"""SGLang's state pool for linear/Mamba hybrids (Qwen3-Next, Qwen3.5, Jamba, Nemotron-H) and the
request cap it sets, as SGLang 0.5.23 sizes them (python/sglang/srt/mem_cache/kv_cache_configurator.py).

Slots (``max_mamba_cache_size``, _handle_max_mamba_cache), per_request = one request's conv + SSM
state on this rank:
    --max-mamba-cache-size N                         N
    --disable-radix-cache and --max-running-requests R   R
    otherwise (the default)      budget = rest x r / (1 + r)   (r = mamba_full_memory_ratio, 0.9)
                                 slots  = int((budget - per_request) // per_request)
    The pool allocates slots + 1 entries (a padding slot, memory_pool.py MambaPool), and the KV
    cells get rest - (slots + 1) x per_request ("+1 accounts for each pool's padding slot").
    The joint solve with the padding slot is why SGLang prints one slot fewer than
    int(budget // per_request): the held-out Qwen3.5-9B TP2 log (Apr 2026 build) prints 186 where
    the plain ratio split gives 187.
Requests (resolve_max_num_reqs): R = --max-running-requests, else int(tokens / context_len x 512)
    clamped to [2048, 4096]; then min(R, tokens // 2) and, for a hybrid, min(R, slots // ratio) with
    ratio (_calculate_mamba_ratio) = 1 with --disable-radix-cache, else 3 (MAMBA_CACHE_SIZE_MAX_RUNNING_
    REQUESTS_RATIO) plus the extra buffer's ping-pong slots: 2 with overlap scheduling (the default),
    1 without (get_mamba_tracking_slots, srt/mem_cache/allocation_sizing.py). 186 slots // 3 = 62,
    the log's max_running_requests.
Log (MambaPool): "Mamba Cache is allocated. max_mamba_cache_size: N, conv_state size: X GB, ssm_state
    size: Y GB " with the slots + 1 entries' bytes in GB = 2**30.
"""

from __future__ import annotations

from dataclasses import dataclass

GB = 1 << 30
BASE_RATIO = 3                 # MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO
EXTRA_BUFFER_OVERLAP = 2       # ping-pong tracking slots with overlap scheduling
EXTRA_BUFFER_NO_OVERLAP = 1
ESTIMATE_PER_CONTEXT = 512     # resolve_max_num_reqs: int(tokens / context_len x 512)
REQUESTS_FLOOR, REQUESTS_CEILING = 2048, 4096


@dataclass(frozen=True)
class StatePool:
    """The state pool one rank allocates: its slots, the bytes it takes, and the rest left for KV."""

    slots: int                 # max_mamba_cache_size as printed
    conv_bytes: int            # (slots + 1) x conv state
    ssm_bytes: int             # (slots + 1) x SSM state
    rest_bytes: int            # what the KV cells get
    per_request: int           # one request's conv + SSM state (mamba_cache_per_req)
    intermediate_bytes: int = 0    # speculative decoding's verify states (D x per_request x requests + 1)

    def log_line(self) -> str:
        return (f"Mamba Cache is allocated. max_mamba_cache_size: {self.slots}, conv_state size: "
                f"{self.conv_bytes / GB:.2f}GB, ssm_state size: {self.ssm_bytes / GB:.2f}GB ")


def too_small(kv_memory: int, state: StatePool) -> str:
    """SGLang's error when the budget leaves no state slot (max_mamba_cache_size <= 0)."""
    # sglang@v0.5.23 python/sglang/srt/mem_cache/kv_cache_configurator.py#L3389-L3403 _handle_max_mamba_cache
    return (f"SGLang raises RuntimeError: Not enough GPU memory for hybrid (mamba/linear-attention) state cache. "
            f"Computed max_mamba_cache_size={state.slots} (total_rest_memory={kv_memory / GB:.2f} GB, "
            f"mamba_cache_per_req={state.per_request / (1 << 20):.2f} MB): one request's state does not fit in "
            f"mamba_full_memory_ratio's share of the budget")


# sglang@v0.5.23 python/sglang/srt/arg_groups/overrides.py#L369-L398 _MAMBA_RADIX_CACHE_ARCHS: the hybrids whose
# --mamba-radix-cache-strategy "auto" is resolved (GraniteMoeHybrid only with a mamba layer, #L461-L466)
RADIX_CACHE_ARCHITECTURES = frozenset({
    "KimiLinearForCausalLM", "KimiK3ForConditionalGeneration", "BailingMoeV2_5ForCausalLM", "BailingMoeV3ForCausalLM",
    "BailingMoeV3VLForConditionalGeneration", "Qwen3NextForCausalLM", "Qwen3_5MoeForConditionalGeneration",
    "InternS2PreviewForConditionalGeneration", "InternS2MobiusForConditionalGeneration",
    "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForCausalLM", "Qwen3_5ForCausalLM",
    "Qwen4ExpForConditionalGeneration",
    "MiniCPMV4_6ForConditionalGeneration", "MiniCPMV4_7ForConditionalGeneration", "NemotronHForCausalLM",
    "NemotronHPuzzleForCausalLM", "NemotronH_Omni_Reasoning_V3", "FalconH1ForCausalLM", "JetNemotronForCausalLM",
    "JetVLMForConditionalGeneration", "Lfm2ForCausalLM", "Lfm2MoeForCausalLM", "ZayaForCausalLM",
    "Glm5NextForConditionalGeneration", "GraniteMoeHybridForCausalLM"})
# #L401-L434 _MAMBA_EXTRA_BUFFER_ARCHS: those that support the extra_buffer strategy (with the default linear-attention
# backend, triton: #L438-L450 supports_mamba_cache_extra_buffer)
EXTRA_BUFFER_ARCHITECTURES = frozenset({
    "KimiLinearForCausalLM", "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration",
    "Qwen3_5MoeForCausalLM", "Qwen3_5ForCausalLM", "Qwen3NextForCausalLM", "Qwen4ExpForConditionalGeneration",
    "InternS2PreviewForConditionalGeneration", "MiniCPMV4_6ForConditionalGeneration",
    "MiniCPMV4_7ForConditionalGeneration", "BailingMoeV2_5ForCausalLM", "BailingMoeV3ForCausalLM",
    "BailingMoeV3VLForConditionalGeneration", "FalconH1ForCausalLM", "GraniteMoeHybridForCausalLM",
    "Glm5NextForConditionalGeneration", "NemotronHForCausalLM", "NemotronHPuzzleForCausalLM",
    "NemotronH_Omni_Reasoning_V3", "KimiK3ForConditionalGeneration", "InklingForConditionalGeneration",
    "InklingForConditionalGenerationMTP"})


def resolve_extra_buffer(architectures, options: dict) -> dict:
    """The options with mamba_extra_buffer resolved where it is None (not given: SGLang's "auto"), as SGLang 0.5.23
    resolves --mamba-radix-cache-strategy on a CUDA device
    (sglang@v0.5.23 python/sglang/srt/arg_groups/overrides.py#L453-L487 _mamba_radix_cache_resolution):
    for a hybrid of RADIX_CACHE_ARCHITECTURES with the radix cache on,
    extra_buffer when overlap scheduling is on (or pages are longer than a token) and the architecture supports it,
    else no_buffer with overlap scheduling turned off; any other model keeps no extra buffer."""
    if options.get("mamba_extra_buffer") is not None:
        return options
    arch = architectures[0] if architectures else None
    out = dict(options, mamba_extra_buffer=False)
    if arch not in RADIX_CACHE_ARCHITECTURES or options.get("disable_radix_cache"):
        return out
    wants = not options.get("disable_overlap_schedule") or (options.get("page_size") or 1) > 1
    if wants and arch in EXTRA_BUFFER_ARCHITECTURES:
        out["mamba_extra_buffer"] = True
    else:
        out["disable_overlap_schedule"] = True
    return out


def serves_none(slots: int, slot_ratio: int, requests: int) -> str:
    """SGLang's error when the state slots admit no request (slots // ratio is 0)."""
    # sglang@v0.5.23 python/sglang/srt/mem_cache/kv_cache_configurator.py#L3136-L3162 resolve_max_num_reqs
    return (f"SGLang raises RuntimeError: Hybrid (mamba/linear-attention) state cache is too small to serve any "
            f"requests. max_mamba_cache_size={slots}, mamba_ratio={slot_ratio}, resulting max_num_reqs={requests}: "
            "each running request holds that many state slots")


def ratio(*, disable_radix_cache: bool, mamba_extra_buffer: bool | None, disable_overlap_schedule: bool) -> int:
    """State slots one running request may hold (_calculate_mamba_ratio)."""
    if disable_radix_cache:
        return 1
    if not mamba_extra_buffer:
        return BASE_RATIO
    return BASE_RATIO + (EXTRA_BUFFER_NO_OVERLAP if disable_overlap_schedule else EXTRA_BUFFER_OVERLAP)


def state_pool(kv_memory: int, conv_per_request: int, ssm_per_request: int, *, memory_ratio,
               max_mamba_cache_size: int | None, max_running_requests: int | None,
               disable_radix_cache: bool, draft_tokens: int | None = None, slot_ratio: int = BASE_RATIO) -> StatePool:
    """The slots and the rest for KV (_handle_max_mamba_cache), in float GiB as SGLang does. ``draft_tokens``:
    speculative decoding's verify width D, whose per-step states SGLang reserves beside the slots
    (sglang@v0.5.23 python/sglang/srt/mem_cache/kv_cache_configurator.py#L3294-L3385: D x a request's state for
    each of min(max_running_requests, slots // ratio) + 1 requests, solved jointly with the slots)."""
    per_request = conv_per_request + ssm_per_request
    rest_gib = kv_memory / GB
    spec = draft_tokens or 0
    if max_mamba_cache_size is not None:
        slots = max_mamba_cache_size
        reserved = min(max(1, max_running_requests or 1), slots // slot_ratio) + 1 if spec else 0
    elif disable_radix_cache and max_running_requests is not None:
        slots = max_running_requests
        reserved = slots + 1 if spec else 0
    else:
        budget_bytes = rest_gib * memory_ratio / (1 + memory_ratio) * GB
        if spec:
            # #L3359-L3378: the joint solve of the slots and their verify states
            slots = int((budget_bytes - per_request * (1 + spec)) // (per_request * (1 + spec / slot_ratio)))
            reserved = min(max(1, max_running_requests or 1), slots // slot_ratio) + 1
        else:
            slots = int((budget_bytes - per_request) // per_request)
            reserved = 0
    intermediate = per_request * reserved * spec
    if intermediate:
        rest_gib = rest_gib - intermediate / GB
    entries = slots + 1
    rest = int((rest_gib - entries * per_request / GB) * GB)
    return StatePool(slots=slots, conv_bytes=entries * conv_per_request, ssm_bytes=entries * ssm_per_request,
                     rest_bytes=rest, per_request=per_request, intermediate_bytes=intermediate)


def max_running_requests(tokens: int, context_len: int, slots: int | None, slot_ratio: int,
                         requested: int | None) -> int:
    """resolve_max_num_reqs: the requests SGLang admits at once."""
    if requested is not None:
        cap = min(max(1, requested), tokens // 2)
    else:
        estimated = int(tokens / context_len * ESTIMATE_PER_CONTEXT)
        cap = min(max(min(estimated, REQUESTS_CEILING), REQUESTS_FLOOR), tokens // 2)
    if slots is not None:
        cap = min(cap, slots // slot_ratio)
    return cap

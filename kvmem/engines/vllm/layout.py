"""Model -> page specs -> groups: the hybrid layout of vLLM's KV cache manager."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ...layer import CHUNKED, FULL, MLA, SLIDING, Layer
from ...model import Model
from ...parallel import kv_heads_per_rank, pp_stages
from ...units import cdiv
from .compressed import DSV4_BLOCK, deepseek_v4_units, packed_groups
from .formats import KVFormat, kv_format
from .inkling import INKLING_TYPES, sconv_spec
from .mla import INDEXER_QUANT_BLOCK, MLA_BACKENDS, mla_block
from .models import check_heads, check_indexers, draft_layers, vllm_layers
from .options import BALANCED_GROUPS, HYBRID_GROUPS, VllmOptions, checkpoint_grid, exports_checkpoints
from .pages import PageSpec
from .states import state_dtype_bytes, state_elements


def _attention_spec(layer: Layer, fmt: KVFormat, tp: int, block: int) -> list[PageSpec]:
    if layer.kind == MLA:
        if fmt.mode in ("nvfp4", "per_token_head"):
            raise ValueError(f"kv_dtype {fmt.name} is not modelled for MLA layers")
        main = PageSpec("mla", block, 1, layer.kv_lora_rank + layer.qk_rope_head_dim,
                     layer.kv_lora_rank + layer.qk_rope_head_dim, fmt.nbytes, fmt.mode)
        if not layer.index_head_dim:
            return [main]
        width = layer.index_head_dim + layer.index_head_dim // INDEXER_QUANT_BLOCK * 4
        return [main, PageSpec("mla", block, 1, width, width, 1)]
    heads = kv_heads_per_rank(layer.kv_heads, tp)
    if layer.kind == FULL and layer.index_head_dim:
        # MiniMax-M3's sparse layers: K and V (FullAttentionSpec) and a key-only index cache of one head of
        # sparse_index_dim in bf16, its indexer_kv_dtype default
        # (vllm@v0.33.0 vllm/models/minimax_m3/nvidia/model.py#L562-L571, #L507-L509; common/indexer.py#L145-L153)
        return [PageSpec("full", block, heads, layer.head_dim_k, layer.head_dim_v, fmt.nbytes, fmt.mode),
                PageSpec("mla", block, 1, layer.index_head_dim, layer.index_head_dim, 2)]
    if layer.kind == FULL:
        return [PageSpec("full", block, heads, layer.head_dim_k, layer.head_dim_v, fmt.nbytes, fmt.mode)]
    if fmt.mode == "nvfp4":
        raise ValueError("kv_dtype nvfp4 is modelled for full-attention layers only "
                         "(vLLM's FullAttentionSpec); this model has sliding/chunked layers")
    if layer.kind not in (SLIDING, CHUNKED):
        raise ValueError(f"kvmem's vllm mode has no page spec for a {layer.kind!r} layer outside its family")
    kind = "sliding" if layer.kind == SLIDING else "chunked"
    return [PageSpec(kind, block, heads, layer.head_dim_k, layer.head_dim_v, fmt.nbytes, fmt.mode,
                  layer.window)]


@dataclass(frozen=True)
class Plan:
    """How vLLM lays one model out: its specs per layer, groups, block size and notes. Shared
    between estimates (kvmem.engines.vllm.entry.make_plan): no caller changes its lists."""

    units: list                # (owner layer index, PageSpec)
    groups: list               # lists of unit indices
    uniform_type: bool         # one UniformTypeKVCacheSpecs group (per-layer pages)
    n_layers: int              # target + draft layers (pp staging)
    block_size: int
    fmt: KVFormat
    notes: list
    padding_layers: int = 0
    packed: bool = False       # block-outermost packed groups (DeepSeek-V4): a block holds the widest group


def make_plan(model: Model, kv_dtype, tp: int, pp: int, opts: VllmOptions) -> Plan:
    release = opts.release
    check_heads(model, tp)
    if model.model_type == "deepseek_v4":
        return _deepseek_v4_plan(model, kv_dtype, pp, opts)
    if any(layer.kind == "compressed" for layer in model.layers):
        # vLLM 0.33.0 builds compressed attention's caches in its DeepSeek-V4 model only
        # (vllm@v0.33.0 vllm/models/deepseek_v4/attention.py#L201-L473 DeepseekV4Attention.__init__)
        raise ValueError(f"vLLM 0.33.0 builds compressed-attention caches only in its DeepSeek-V4 model "
                         f"(vllm/models/deepseek_v4/); model_type {model.model_type!r} has compressed layers")
    fmt = kv_format(model, kv_dtype)
    draft = draft_layers(model, opts.draft)
    if draft and isinstance(opts.draft, Model):
        check_heads(opts.draft, tp)
    if draft and pp > 1:
        raise ValueError("draft with pp > 1: kvmem does not model on which pipeline stage vLLM "
                         "places the draft layers")
    layers = vllm_layers(model, tp, release, opts.draft) + draft
    if model.model_type == "longcat_flash" and pp > 1:
        # vllm@v0.33.0 vllm/model_executor/models/longcat_flash.py#L249-L370 FlashDecoderLayer: two MLA attentions
        # per decoder layer; vLLM splits the decoder layers across
        # stages (get_pp_indices over num_layers), kvmem's pp_stages the attentions
        raise ValueError("pp > 1 with longcat_flash: vLLM stages its decoder layers (two attentions each), "
                         "which kvmem does not model")
    pp_stages(len(model.layers), pp)
    notes: list[str] = []
    check_indexers(model, notes)
    mla = any(layer.kind == MLA for layer in layers)
    sparse = any(layer.kind == MLA and layer.index_head_dim for layer in layers)

    block = opts.block_size or 16
    backend = opts.attention_backend
    kernel_align = 16
    if backend in MLA_BACKENDS and not mla:
        raise ValueError(f"attention_backend {backend!r} is an MLA backend; {model.name} has no MLA layers")
    if mla:
        if backend is not None and backend not in MLA_BACKENDS:
            raise ValueError(f"attention_backend {backend!r} is not an MLA backend; MLA models run on "
                             f"{', '.join(MLA_BACKENDS)}")
        if sparse:
            if backend not in (None, "FLASHMLA_SPARSE"):
                notes.append(f"DeepSeek-V3.2's sparse MLA runs on FLASHMLA_SPARSE, not {backend}")
            backend = "FLASHMLA_SPARSE"
        backend = backend or "FLASHMLA"
        forced = mla_block(backend, block)
        if forced != block and opts.block_size is not None:
            notes.append(f"block size {forced}: the {backend} backend forces it (asked {block})")
        elif forced != block:
            notes.append(f"block size {forced}, the {backend} backend's")
        block = forced
        kernel_align = MLA_BACKENDS[backend] or 16

    if any(layer.kind == FULL and layer.index_head_dim for layer in layers):
        # MiniMax-M3's sparse attention and indexer backends take only blocks of 128 (common/sparse_attention.py
        # #L165-L167, common/indexer.py#L94-L95); update_block_size_for_backend picks the smallest size every
        # backend accepts (platforms/interface.py _preferred_block_size_for_backends)
        if opts.block_size not in (None, MINIMAX_M3_BLOCK):
            raise ValueError(f"block_size {opts.block_size}: vLLM 0.33.0's MiniMax-M3 sparse attention takes only "
                             f"blocks of {MINIMAX_M3_BLOCK} (common/sparse_attention.py "
                             "get_supported_kernel_block_sizes)")
        if block != MINIMAX_M3_BLOCK:
            notes.append(f"block size {MINIMAX_M3_BLOCK}: MiniMax-M3's sparse attention backends take only that")
        block = MINIMAX_M3_BLOCK
    stateful = [layer for layer in layers if layer.state is not None]
    attention = [layer for layer in layers if layer.caches_tokens]
    if release is not None and release < HYBRID_GROUPS and stateful:
        raise ValueError(f"vLLM {_show(release)}'s V1 engine has no Mamba/linear-attention layers; "
                         "use version='v0' or a release from 0.9")
    mamba_page = 0
    spec_tokens = opts.num_speculative_tokens
    if stateful:
        conv_bytes, ssm_bytes = state_dtype_bytes(model, opts, notes)
        sizes = set()
        for layer in stateful:
            conv, ssm = state_elements(model, layer, tp, spec_tokens)
            sizes.add(conv * conv_bytes + ssm * ssm_bytes)
        if len(sizes) > 1:
            raise ValueError("layers with different recurrent-state sizes are not supported")
        mamba_page = sizes.pop()
    mamba_padded = 0
    if stateful and attention and release is not None:
        block, mamba_padded = _align_hybrid(model, attention[0], fmt, tp, block, kernel_align,
                                            mamba_page, opts, notes)

    units, ck = [], int(exports_checkpoints(model, opts))
    for index, layer in enumerate(layers):
        if layer.caches_tokens:
            for spec in _attention_spec(layer, fmt, tp, block):
                units.append((index, spec))
        if layer.state is not None:
            units.append((index, PageSpec("mamba", block, state_bytes=mamba_page, padded=mamba_padded,
                                          checkpoint_blocks=ck)))
        if model.model_type in INKLING_TYPES:   # its conv state, a sliding spec beside the attention (inkling.py)
            units.append((index, sconv_spec(model, layer, tp)))
    if not units:
        raise ValueError(f"{model.name} has no layer that vLLM gives a KV cache")
    if release is None and mla:
        notes.append("v0 with MLA: the latent cache of v0.7.1 and later; earlier v0 releases cached "
                     "per-head K and V for DeepSeek models")
    if any(layer.kind == CHUNKED for layer in layers) and opts.hybrid_kv_cache_manager and release:
        notes.append("chunked-local layers in their own groups; releases that default "
                     "VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE to 0 (v0.12 did) cache them as "
                     "full attention unless it is set: pass hybrid_kv_cache_manager=False for those")
    if release is None:
        return Plan(units, [list(range(len(units)))], False, len(layers), block, fmt, notes)
    if not opts.hybrid_kv_cache_manager or release < HYBRID_GROUPS:
        units = _unify_hybrid(units, notes, opts.hybrid_kv_cache_manager, release)
    units, groups, uniform_type, padding = _group(units, release, notes)
    block = min(units[group[0]][1].block_size for group in groups)
    return Plan(units, groups, uniform_type, len(layers), block, fmt, notes, padding)


def _deepseek_v4_plan(model: Model, kv_dtype, pp: int, opts: VllmOptions) -> Plan:
    """DeepSeek-V4's caches in vLLM 0.33.0's packed groups (kvmem.engines.vllm.compressed)."""
    asked = {f"version {opts.version!r} (only 0.33.0's DeepSeek-V4 is read here)": opts.release != (0, 33),
             "pp > 1": pp > 1, "draft": opts.draft is not None,
             "num_speculative_tokens": bool(opts.num_speculative_tokens),
             "hybrid_kv_cache_manager=False": not opts.hybrid_kv_cache_manager,
             f"block_size {opts.block_size}": opts.block_size not in (None, DSV4_BLOCK),
             "attention_backend": opts.attention_backend not in (None, "FLASHMLA_SPARSE_DSV4")}
    unsupported = [name for name, on in asked.items() if on]
    if unsupported:
        raise ValueError(f"deepseek_v4 under vLLM: kvmem models vLLM 0.33.0's CUDA default (FLASHMLA_SPARSE_DSV4, "
                         f"fp8_ds_mla, block 256, hybrid manager on, one stage, no draft); not {unsupported[0]}")
    units = deepseek_v4_units(model, kv_dtype)
    notes = ["DeepSeek-V4: every layer's last sliding_window rows (blocks of 64), the compressed rows of CSA/HCA "
             "layers (one per 4 / 128 tokens, blocks of 256 tokens), CSA's indexer keys and each compressor's "
             "fp32 state, all fp8_ds_mla pages padded to 576 B multiples, packed in groups as vLLM 0.33.0 plans "
             "them (vllm/models/deepseek_v4/attention.py, compressor.py; kv_cache_planning.py)"]
    fmt = KVFormat("fp8_ds_mla", 1, "fp8_ds_mla")
    return Plan(units, packed_groups(units), False, len(model.layers), DSV4_BLOCK, fmt, notes, packed=True)


def _show(release) -> str:
    return f"{release[0]}.{release[1]}"


def _align_hybrid(model: Model, layer: Layer, fmt: KVFormat, tp: int, block: int, kernel_align: int,
                  mamba_page: int, opts: VllmOptions, notes: list) -> tuple[int, int]:
    """(attention block size, padded Mamba page) of a hybrid Mamba/linear-attention model (vllm@v0.33.0
    vllm/platforms/interface.py#L939-L1137 _align_hybrid_block_size): align = max(16 or the MLA block,
    block_size), at least 128 when the attention is MLA; attention block = align x cdiv(mamba_page, align x
    attention_page_of_one_token) (mamba_cache_mode none/align; "all": lcm(mamba chunk, align) x
    cdiv(cdiv(mamba_page, page_1), that)); the Mamba page is padded to block x attention_page_of_one_token.
    Releases around v0.11 aligned hybrid blocks to the Mamba chunk whenever prefix caching was on
    (mamba_cache_mode="all" models that)."""
    if layer.kind == MLA:
        one = _attention_spec(layer, fmt, tp, 1)[0]
    else:   # FullAttentionSpec(head_size) of the model's attention shape: head_size_v = head_size
        one = PageSpec("full", 1, kv_heads_per_rank(layer.kv_heads, tp), layer.head_dim_k, layer.head_dim_k,
                    fmt.nbytes, "" if fmt.mode == "nvfp4" else fmt.mode)
    page_1 = one.page_bytes
    align = max(kernel_align, block)
    if layer.kind == MLA:
        # vllm@v0.33.0 vllm/platforms/interface.py#L1083-L1088 _align_hybrid_block_size: "For hybrid MLA/Mamba
        # models, make the manager block size a multiple of 128" (TRTLLM/FlashInfer MLA decode)
        align = max(align, 128)
    align = checkpoint_grid(model, opts, align, notes)   # vllm@v0.33.0 vllm/platforms/interface.py#L1089-L1094
    if opts.mamba_cache_mode == "all":
        chunk = model.facts.ssm.chunk_size if model.facts.ssm else 0
        if chunk < 1:
            raise ValueError("mamba_cache_mode 'all' needs the model's mamba chunk size (config "
                             "'mamba_chunk_size' or 'chunk_size'), which this config lacks")
        step = math.lcm(chunk, align)
        needed = step * cdiv(cdiv(mamba_page, page_1), step)
    else:
        needed = align * cdiv(mamba_page, align * page_1)
    if block < needed:
        notes.append(f"attention block size {needed} tokens so that one attention page "
                     f"({needed} x {page_1:,} B) holds a Mamba state of {mamba_page:,} B")
        block = needed
    attention_page = block * page_1
    if attention_page == mamba_page:
        return block, 0
    notes.append(f"Mamba page padded from {mamba_page:,} B to {attention_page:,} B")
    return block, attention_page


def _unify_hybrid(units: list, notes: list, asked: bool, release=None) -> list:
    """hybrid_kv_cache_manager=False: sliding/chunked layers become full ones beside full layers (vllm@v0.33.0
    vllm/v1/core/kv_cache_planning.py#L853-L876), and different windows are refused (see below)."""
    kinds = {spec.kind for _, spec in units}
    windows = {spec.window for _, spec in units if spec.kind in ("sliding", "chunked")}
    if len(windows) > 1 and release is not None and release >= PADDED_ATTENTION_PAGES:
        # vllm@v0.33.0 vllm/v1/core/kv_cache_planning.py#L744-L816 _promote_local_kv_cache_specs keeps each
        # promoted spec's window, and FullAttentionSpec.merge_window_sizes refuses more than one
        # (vllm@v0.33.0 vllm/v1/kv_cache_interface.py#L650-L660)
        raise ValueError("All attention layers in the same KV cache group must have the same window size. "
                         f"(vLLM 0.33.0 with the hybrid KV cache manager off, windows {sorted(windows)})")
    if kinds & {"full", "mla"} and kinds & {"sliding", "chunked"}:
        why = "hybrid_kv_cache_manager=False" if not asked else "this release has no hybrid groups"
        notes.append(f"sliding/chunked layers are cached as full attention ({why})")
        units = [(owner, replace(spec, kind="full", window=0) if spec.kind in ("sliding", "chunked") else spec)
                 for owner, spec in units]
    specs = [spec for _, spec in units]
    if not (len(set(specs)) == 1 or _uniform_type(specs)):
        raise ValueError("Hybrid KV cache manager is disabled but failed to convert the KV cache "
                         "specs to one unified type.")
    return units


MINIMAX_M3_BLOCK = 128


# The release whose unify_kv_cache_spec_page_size pads non-dividing attention pages (0.33.0 does; the
# release it landed in is not pinned here, so earlier releases keep the refusal)
PADDED_ATTENTION_PAGES = (0, 33)


def _uniform_type(specs: list) -> bool:
    return len({s.block_size for s in specs}) == 1 and len({s.family for s in specs}) == 1


def _group(units: list, release, notes: list) -> tuple[list, list, bool, int]:
    """The KV cache groups (vllm@v0.33.0 vllm/v1/core/kv_cache_planning.py#L1113-L1200 get_kv_cache_groups).

    One group when every layer has the same spec (#L314-L327), or when all have one type (full+MLA, one
    window, mamba) and block size (#L330-L343; UniformTypeKVCacheSpecs, vllm/v1/kv_cache_interface.py#L1347-L1361:
    num_blocks = memory // sum of pages); otherwise smaller pages get larger blocks until all pages are
    equal (0.33: a non-MLA attention page that does not divide the largest is padded to it instead,
    #L346-L408 unify_kv_cache_spec_page_size; earlier releases refuse), layers are bucketed by spec,
    group size = the smallest bucket (the largest when largest < 1.5 x smallest, from v0.12, PR #29303:
    #L524-L529), buckets split with stride layers[i::n] (contiguous slices before v0.12), the last group of
    a bucket padded (#L416-L556 _get_kv_cache_groups_uniform_page_size); num_blocks = memory // page //
    group_size. Ranks (tp, pp) take the minimum; a pp rank projects the groups onto its own layers
    (#L1413-L1458 _project_kv_cache_groups_to_worker).
    """
    specs = [spec for _, spec in units]
    everything = [list(range(len(units)))]
    if len(set(specs)) == 1:
        return units, everything, False, 0
    if _uniform_type(specs):
        return units, everything, True, 0
    largest = max(s.page_bytes for s in specs)
    unified, padded = [], set()
    for owner, spec in units:
        page = spec.page_bytes
        if largest % page and spec.kind in ("full", "sliding", "chunked") and release >= PADDED_ATTENTION_PAGES:
            # vllm@v0.33.0 vllm/v1/core/kv_cache_planning.py#L346-L408 unify_kv_cache_spec_page_size: a non-MLA page
            # that does not divide the largest is padded to it (its block size kept)
            padded.add((page, largest))
            unified.append((owner, replace(spec, padded=largest)))
            continue
        if largest % page:
            raise ValueError(f"vLLM cannot unify page sizes {page:,} B and {largest:,} B: The page size "
                             "of the layer is not divisible by the maximum page size.")
        if page != largest:
            if spec.kind == "mamba":
                raise ValueError(f"vLLM cannot grow a Mamba page of {page:,} B to the {largest:,} B "
                                 "attention page (its page does not depend on the block size)")
            ratio = largest // page
            spec = replace(spec, block_size=spec.block_size * ratio)
        unified.append((owner, spec))
    for page, largest_page in sorted(padded):
        notes.append(f"attention pages of {page:,} B padded to {largest_page:,} B: they do not divide it")
    units = unified
    buckets: dict = {}
    for index, (_, spec) in enumerate(units):
        buckets.setdefault(spec, []).append(index)
    counts = [len(b) for b in buckets.values()]
    size = min(counts)
    if release >= BALANCED_GROUPS and max(counts) < 1.5 * size:
        size = max(counts)
    groups, padding = [], 0
    for members in buckets.values():
        n = cdiv(len(members), size)
        padding += n * size - len(members)
        if release >= BALANCED_GROUPS:
            groups.extend(members[i::n] for i in range(n))
        else:
            groups.extend(members[i * size:(i + 1) * size] for i in range(n))
    if padding:
        notes.append(f"{padding} padding layer(s) make every group {size} layers: their page slots are "
                     "reserved but hold nothing")
    return units, groups, False, padding

"""The caches llama.cpp builds: cells per stream, the SWA cache, per-layer widths, devices.

Over 300 lines by design: each cache rule sits beside its llama.cpp source lines (the pins).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

from ...dtypes import dtype
from ...layer import FULL, MLA
from ...model import Model
from ...parallel import check_pp_layers
from ...units import cdiv, pad
from .arch_builds import check_arch_build
from .arch_fields import ARCHS
from .dsv4 import DSV4_TYPES, dsv4_caches
from .families import ZERO_WIDTH_LAYERS, check_family, config_window, window_ignored
from .indexers import MSA_FAMILIES, dsa_cached_nextn, indexer_widths, msa_indexer
from .nextn import gguf_nextn_layers
from .settings import (
    ALWAYS_ISWA,
    CURRENT,
    MLA_MODES,
    PER_HEAD_MLA,
    PR_12801,
    PR_13194,
    PR_14363,
    PR_17046,
    PR_19067,
    PR_19460,
    PR_22673,
    PR_23346,
    PR_24770,
    SWA_FULL_WARNING,
    WINDOW_IGNORED,
    Settings,
    as_f32,
    glm_dsa_indexer_ignored,
    kvmem_dtype,
    printed_mib,
    resolve_settings,
)
from .streams import check_streams
from .tensors_kimi import check_kimi_cache


@dataclass(frozen=True)
class Plan:
    """The caches llama.cpp builds for these settings: cells, streams, per-layer rows and devices."""

    n_ctx: int
    n_ctx_seq: int
    n_stream: int
    unified: bool
    mla: str | None
    n_swa: int | None
    swa_cells: int | None
    caches: list            # the llama_kv_cache / llama_memory_recurrent buffers, as details show them
    rows: list              # per layer (K, V, state) bytes
    devices: list           # per layer, the device (-sm layer) that holds it
    notes: list
    windowed: set


# ---- cells ----------------------------------------------------------------------------------

def cells_of(s: Settings) -> tuple[int, int, int, bool, list[str]]:
    """(n_ctx, n_ctx_seq, n_stream, unified, notes) after llama.cpp's padding and split.

    A cell holds one token of one layer. n_ctx (-c) is padded, then split into streams: one stream for a
    unified cache (kv_unified, -kvu), else one per sequence (n_seq, -np); the log's cells are per stream,
    the bytes cover all streams. From 2025-11-07 (PR #17046): n_ctx = pad256(n_ctx); unified: n_ctx_seq =
    n_ctx; else n_ctx_seq = pad256(n_ctx // n_seq), n_ctx = n_ctx_seq x n_seq, with the warning "n_ctx is not
    divisible by n_seq_max - rounding down to N" even when N went up (llama.cpp@0c1e57098
    src/llama-context.cpp#L290-L305). 2025-07-16 (PR #14363, per-sequence streams) to 2025-11-07: unified
    pad(n_ctx, n_pad), else pad(ceil(n_ctx / n_seq), n_pad) per stream; this window's rounding order is
    UNVERIFIED upstream (read from a downstream copy of llama_model::create_memory of that period). Before
    PR #14363: one buffer of pad(n_ctx, n_pad) cells shared by every sequence."""
    requested, n_seq, build, n_pad = s.n_ctx_requested, s.n_seq, s.build, s.n_pad
    notes = []
    if build < PR_14363:
        if not s.kv_unified and n_seq > 1:
            notes.append("builds before PR #14363 (2025-07-16) keep one buffer shared by all sequences")
        n_ctx = pad(requested, n_pad)
        return n_ctx, n_ctx, 1, True, notes
    if s.kv_unified:
        n_ctx = pad(requested, n_pad)
        return n_ctx, n_ctx, 1, True, notes
    if build >= PR_17046:
        n_ctx = pad(requested, 256)
        n_ctx_seq = pad(n_ctx // n_seq, 256)  # never 0: n_seq <= LLAMA_MAX_SEQ = 256 <= n_ctx
    else:
        n_ctx = requested
        n_ctx_seq = pad(cdiv(requested, n_seq), n_pad)
    if n_ctx_seq * n_seq != n_ctx:
        n_ctx = n_ctx_seq * n_seq
        if build >= PR_17046:
            notes.append(f"n_ctx is not divisible by n_seq_max - rounding down to {n_ctx}")
    return n_ctx, n_ctx_seq, n_seq, False, notes


def _swa_cells(s: Settings, n_ctx_seq: int, n_swa: int, unified: bool) -> int:
    """Cells per stream of the sliding-window cache (llama_kv_cache_iswa constructor): from PR #17046
    pad256(min(n_ctx_seq, n_swa x (unified ? n_seq : 1) + n_ubatch)) (llama.cpp@0c1e57098
    src/llama-kv-cache-iswa.cpp#L73-L80); from PR #14363 min(n_ctx_seq, pad(n_swa x (unified ? n_seq : 1) +
    n_ubatch, n_pad)); from 2025-05-20 (PR #13194, PR #13833's form) min(n_ctx, pad(n_swa x n_seq + n_ubatch,
    n_pad)); before, no SWA cache (windowed layers hold n_ctx cells). n_ubatch is the effective one,
    min(n_ctx, n_batch, n_ubatch) (src/llama-context.cpp#L248); swa_full: n_ctx_seq cells."""
    if s.swa_full:
        return n_ctx_seq
    n_seq, n_ubatch, build = s.n_seq, s.n_ubatch, s.build
    if build >= PR_17046:
        return pad(min(n_ctx_seq, n_swa * (n_seq if unified else 1) + n_ubatch), 256)
    if build >= PR_14363:
        return min(n_ctx_seq, pad(n_swa * (n_seq if unified else 1) + n_ubatch, s.n_pad))
    return min(n_ctx_seq, pad(n_swa * n_seq + n_ubatch, s.n_pad))


# ---- layers ---------------------------------------------------------------------------------

# MLA (DeepSeek-V2/V3, Kimi): "latent": one row of kv_lora_rank + rope (576) per token as K and no V tensor (builds
# from 2026-01-25, PR #19067, print "V (f16): 0.00 MiB"); "latent+v": K 576 and V kv_lora_rank (512) (MLA GGUFs from
# April 2025, PR #12801, until PR #19067); "none": per-head K = n_head x (qk_nope + qk_rope) and V = n_head x
# v_head_dim (GGUFs converted before PR #12801, on any build). The default is the build's mode for an MLA GGUF
# (llama.cpp@0c1e57098 src/llama-hparams.cpp#L298-L318 is_mla, n_embd_head_k/v).
def _mla_mode(model: Model, s: Settings) -> str | None:
    if not model.count(MLA):
        if s.mla is not None:
            raise ValueError(f"mla applies to MLA models (DeepSeek-V2/V3, Kimi); {model.name} has no MLA layers")
        return None
    build, mode = s.build, s.mla
    if model.model_type in PER_HEAD_MLA:
        if mode is not None:
            raise ValueError(f"mla={mode!r}: llama.cpp's {model.model_type} GGUF has no MLA split cache (its converter "
                             "writes per-head K/V lengths); leave mla unset")
        return "per_head"
    if any(layer.index_head_dim for layer in model.layers):
        _dsa_build(model, build)
        if mode not in (None, "latent"):
            raise ValueError(f"mla={mode!r}: a DeepSeek sparse-attention GGUF (deepseek32, glm-dsa) caches the latent "
                             "alone (llama_kv_cache_dsa over an MLA GGUF); use mla='latent'")
    if mode is None:
        return "none" if build < PR_12801 else "latent+v" if build < PR_19067 else "latent"
    if mode not in MLA_MODES:
        raise ValueError(f"mla must be one of {', '.join(MLA_MODES)}, got {mode!r}")
    if mode != "none" and build < PR_12801:
        raise ValueError(f"mla={mode!r}: MLA GGUFs need a build from April 2025 on (PR #12801); build {build} "
                         "caches per-head K/V (mla='none')")
    if mode == "latent" and build < PR_19067:
        raise ValueError(f"mla='latent' (no V tensor) needs a build from {PR_19067} on (PR #19067); "
                         f"build {build} keeps V = kv_lora_rank (mla='latent+v')")
    if mode == "latent+v" and build >= PR_19067:
        raise ValueError(f"mla='latent+v': builds from {PR_19067} on (PR #19067) keep no V tensor for MLA GGUFs; "
                         "use mla='latent'")
    return mode


# llama.cpp's architectures for DeepSeek sparse attention (src/llama-arch.cpp LLM_ARCH_GLM_DSA "glm-dsa",
# LLM_ARCH_DEEPSEEK32 "deepseek32"), by the config's model_type
_DSA_ARCH = {"glm_moe_dsa": "glm-dsa", "deepseek_v32": "deepseek32"}


def _dsa_build(model: Model, build) -> None:
    """Refuse a build that cannot load a DSA model's GGUF (settings.PR_19460 .. PR_27176 give the pull requests, their
    commits and dates). Every other build is laid out: the caches by plan (llama_kv_cache_dsa; glm-dsa without its
    indexer until PR #25407, settings.glm_dsa_indexer_ignored; the MTP block's cache layer, indexers.dsa_cached_nextn;
    the indexer layers, indexers.indexer_widths) and the graph by graphs_dsa.dsa_build_shape."""
    arch = _DSA_ARCH.get(model.model_type)
    if arch == "deepseek32":
        # PR #23346 added LLM_ARCH_DEEPSEEK32 with llama_kv_cache_dsa; before it llama_model_loader has no
        # "deepseek32" architecture and the GGUF fails to load (unknown model architecture)
        if build < PR_23346:
            raise ValueError(f"{model.name}: llama.cpp builds before 2026-05-29 (PR #23346, LLM_ARCH_DEEPSEEK32) "
                             f"have no deepseek32 architecture; build {build} cannot load its GGUF")
    elif arch == "glm-dsa":
        if build < PR_19460:
            raise ValueError(f"{model.name}: llama.cpp builds before 2026-02-13 (PR #19460, LLM_ARCH_GLM_DSA) have "
                             f"no glm-dsa architecture; build {build} cannot load its GGUF")
        # PR #19460's glm-dsa: the indexer weights loaded into their layer's buffer and never read, deepseek2's graph
        # over a plain MLA llama_kv_cache, no indexer cache (PR #24770's description: "GLM_DSA uses
        # llama_model_deepseek2::graph (plain MLA) and never references the indexer tensors ... loaded-but-unused";
        # PR #25407 adds `case LLM_ARCH_GLM_DSA` to create_memory's llama_kv_cache_dsa); the MTP block TENSOR_SKIP,
        # its exp_probs_b.bias loaded, as at the vendored build without load_mtp (glm-dsa.cpp of 2026-06-20, commit
        # 06e514f61 in the code index, lines 111-117 and 150; ik_llama.cpp PR #1268, 2026-02-14: "As in the mainline
        # PR (#19460) no DSA and no MTP ... reuses the DeepSeek2 arch"). Until PR #24770 (796f41bed, 2026-06-20) its
        # load_tensors requires the five indexer tensors in every trunk layer: convert_hf_to_gguf writes those the
        # checkpoint has, none in GLM-5.2's "shared" layers; a GGUF that carries them in every layer (Unsloth's
        # GLM-5.2: ik_llama.cpp PR #2017) loads
        types = (model.config or {}).get("indexer_types") or ()
        names = {t.name for t in getattr(model.checkpoint, "tensors", None) or ()}
        shared = [i for i, t in enumerate(types) if t == "shared" and f"blk.{i}.indexer.k_norm.weight" not in names]
        if shared and build < PR_24770:
            raise ValueError(f"{model.name}: llama.cpp build {build} requires the indexer tensors in every layer "
                             f"(PR #19460's glm-dsa load_tensors, until PR #24770 of 2026-06-20 made them "
                             f"optional); a GGUF converted from its config has none in its {len(shared)} 'shared' "
                             f"layers and fails to load (missing tensor 'blk.{shared[0]}.indexer.k_norm.weight')")
    elif build != CURRENT:
        raise ValueError(f"{model.name}: a sparse-attention MLA model of type {model.model_type!r} is laid out at "
                         f"the vendored build 0c1e57098 only (llama_kv_cache_dsa); build {build} is refused")


def _widths(model: Model, layer, mode: str | None) -> tuple[int, int | None]:
    """(n_embd_k_gqa, n_embd_v_gqa) of a layer's cache row; V None when there is no V tensor."""
    if layer.kind != MLA:
        return layer.kv_heads * layer.head_dim_k, layer.kv_heads * layer.head_dim_v
    if mode == "per_head":
        # MiniCPM3 (settings.PER_HEAD_MLA): num_key_value_heads x (qk_nope + qk_rope) and x n_embd / n_head
        heads = (model.config or {}).get("num_key_value_heads") or model.num_attention_heads
        return (heads * (model.facts.qk_nope_head_dim + layer.qk_rope_head_dim),
                heads * (model.hidden_size // model.num_attention_heads))
    if mode == "latent":
        return layer.kv_lora_rank + layer.qk_rope_head_dim, None
    if mode == "latent+v":
        return layer.kv_lora_rank + layer.qk_rope_head_dim, layer.kv_lora_rank
    nope, v_dim = model.facts.qk_nope_head_dim, model.facts.v_head_dim
    if not nope or not v_dim:
        raise ValueError(f"mla='none' needs qk_nope_head_dim and v_head_dim in {model.name}'s config")
    heads = model.num_attention_heads
    return heads * (nope + layer.qk_rope_head_dim), heads * v_dim


def _windowed_split(model: Model, s: Settings, notes: list) -> int | None:
    """n_swa when llama.cpp builds a separate sliding-window cache for this model, else None."""
    windowed = [layer for layer in model.layers if layer.kind.windowed]
    if not windowed:
        return None
    full = [layer for layer in model.layers if layer.kind in (FULL, MLA)]
    windows = sorted({layer.window for layer in windowed})
    ignored = model.model_type in WINDOW_IGNORED or window_ignored(model)
    if ignored or (not full and model.model_type not in ALWAYS_ISWA):
        notes.append(f"llama.cpp does not use the sliding window of {model.name}: every layer holds n_ctx cells")
        return None
    if s.build < PR_13194:
        notes.append("builds before PR #13194 (2025-05-20) have no SWA cache: windowed layers hold n_ctx cells")
        return None
    if config_window(model) is not None:
        return config_window(model)
    if len(windows) > 1 or len({layer.kind for layer in windowed}) > 1:
        raise ValueError(f"{model.name} has windows {windows}; llama.cpp has one n_swa per model")
    return windows[0]


# ---- the plan: caches, per-layer bytes, devices ----------------------------------------------

# Recurrent-only architectures (llm_arch_is_recurrent, llama.cpp@0c1e57098 src/llama-arch.cpp#L1071-L1083):
# llama_memory_recurrent
# alone. Every other family with recurrent layers is hybrid (llm_arch_is_hybrid): llama_memory_hybrid[_iswa],
# whose attention cache exists even where no layer attends.
RECURRENT_ONLY = {"mamba", "falcon_mamba", "mamba2"}


def _hybrid(model: Model) -> bool:
    return model.model_type not in RECURRENT_ONLY and any(layer.state is not None for layer in model.layers)


def _layer_devices(n_layer: int, pp: int, n_nextn: int = 0, cached_nextn: int = 0) -> list[int]:
    """GPU of each layer under --split-mode layer, equal --tensor-split, all layers offloaded (pp = the GPUs):
    layer il goes to the GPU whose split interval holds il / (n_layer_all + 1), an upper_bound over the normalised
    splits in float32 (llama.cpp@0c1e57098 src/llama-model.cpp#L1579-L1614 llama_model::load_tensors), n_layer_all
    counting the file's ``n_nextn`` MTP blocks (arch_tensors.gguf_nextn_layers), of which ``cached_nextn`` hold a
    cache layer (listed after the trunk's). The reported device is the one holding the most bytes."""
    check_pp_layers(pp, n_layer)
    splits = [as_f32(as_f32(float(d + 1)) / as_f32(float(pp))) for d in range(pp)]
    act = n_layer + n_nextn + 1  # act_gpu_layers = min(n_gpu_layers, n_layer_all + 1): the output layer counts
    return [min(sum(split <= as_f32(il / act) for split in splits), pp - 1) for il in range(n_layer + cached_nextn)]


def _plan(model: Model, s: Settings, pp: int) -> Plan:
    """The plan of ``model`` under ``s``, remembered (Model and Settings are frozen): the placement
    searches lay out the same context many times."""
    try:
        plan = _plan_cached(model, s, pp)
    except TypeError:       # a setting that does not hash
        return _plan_of(model, s, pp)
    # the caller's own lists: what it does with them never reaches the remembered plan
    return replace(plan, caches=[dict(c) for c in plan.caches], rows=list(plan.rows), devices=list(plan.devices),
                   notes=list(plan.notes), windowed=set(plan.windowed))


@functools.lru_cache(maxsize=256)
def _plan_cached(model: Model, s: Settings, pp: int) -> Plan:
    return _plan_of(model, s, pp)


def _check_mtp_build(model: Model, s: Settings) -> None:
    """Qwen3.5 / Qwen3.6 at a build before PR #22673 (settings.PR_22673), which has no MTP for them: qwen35 /
    qwen35moe load_hparams read no nextn_predict_layers and load_arch_tensors build n_layer = block_count trunk blocks
    (llama.cpp@b81c2cdd7 src/models/qwen35.cpp#L4-L30, #L55-L80, src/models/qwen35moe.cpp#L4-L33, #L60-L79;
    b81c2cdd7 is the PR's parent), and llama-server has no draft-mtp speculative type (b81c2cdd7
    common/common.h#L158-L168; COMMON_SPECULATIVE_TYPE_DRAFT_MTP comes with the PR, 255582687
    common/common.h#L163). Refused there: nextn=True, and a GGUF that carries MTP blocks (written from the PR on),
    which such a build loads as trunk blocks and fails."""
    arch = ARCHS.get(model.model_type)
    if arch not in ("qwen35", "qwen35moe") or s.build >= PR_22673:
        return
    before = (f"llama.cpp before PR #22673 (255582687, {PR_22673.isoformat()}, 'llama + spec: MTP Support') has no "
              f"MTP for the {arch} architecture (src/models/{arch}.cpp reads no nextn_predict_layers")
    if s.nextn:
        raise ValueError(f"nextn=True at build {s.build.isoformat()}: {before}, and --spec-type has no draft-mtp) and "
                         f"its converter wrote no MTP block: nextn=False, or a build from {PR_22673.isoformat()} on")
    blocks = model.mtp_layers if getattr(model.checkpoint, "format", None) == "gguf" else 0
    if blocks:
        n = model.num_layers
        full = [i for i, layer in enumerate(model.layers) if layer.state is None]
        interval = full[0] + 1 if full else 0
        # recurrent_layer_arr[i] = (i + 1) % full_attention_interval != 0 over block_count (qwen35.cpp#L15-L22): an
        # MTP block (full attention, no ssm_* tensors: 255582687 qwen35.cpp#L99-L122) taken as a Gated DeltaNet layer
        # misses its ssm_conv1d; taken as an attention layer, its nextn.* tensors are left over
        delta = [j for j in range(n, n + blocks) if not interval or (j + 1) % interval]
        fails = (f"blk.{delta[0]} is a Gated DeltaNet layer at that build, and the block has no ssm_conv1d: "
                 f"\"missing tensor 'blk.{delta[0]}.ssm_conv1d.weight'\" (src/llama-model-loader.cpp#L1078-L1083)"
                 if delta else "the blocks' nextn.* tensors are left unclaimed: 'wrong number of tensors' "
                 "(src/llama-model-loader.cpp#L1314-L1317)")
        raise ValueError(f"{model.name}: the GGUF carries {blocks} MTP block{'s' * (blocks > 1)} "
                         f"(nextn_predict_layers {blocks}, block_count {n + blocks}; llama.cpp's converter writes them "
                         f"from PR #22673 on); at build {s.build.isoformat()} {before}): it loads all {n + blocks} "
                         f"blocks as trunk layers and fails, {fails}. A build from {PR_22673.isoformat()} on, or the "
                         "file converted with --no-mtp (convert_hf_to_gguf.py#L125 at 255582687)")


def _short_for_snapshots(s: Settings) -> list[str]:
    """A context shorter than n_rs_seq + 2 cells caps -ub below it (src/llama-context.cpp#L246-L248; rs_seq)."""
    if s.n_rs_seq and s.n_ubatch <= s.n_rs_seq + 1:
        return [f"n_ubatch = n_ctx = {s.n_ubatch} <= n_rs_seq + 1: llama.cpp builds this context, then its first "
                "decode aborts (GGML_ASSERT(n_ubatch > n_keep_tail), src/llama-batch.cpp)"]
    return []


def _plan_of(model: Model, s: Settings, pp: int) -> Plan:
    check_family(model)
    check_kimi_cache(model, s.type_v, s.flash_attn)      # n_embd_head_v of every layer (tensors_kimi)
    check_arch_build(model, s.build)        # a build before the architecture's PR: refused (arch_builds)
    _check_mtp_build(model, s)
    notes = []
    n_ctx, n_ctx_seq, n_stream, unified, cell_notes = cells_of(s)
    check_streams(model, s.n_seq, unified, min(n_ctx, s.n_ubatch))     # llama.cpp's abort (kimi-linear, minimax-01)
    notes += cell_notes
    notes += _short_for_snapshots(s)
    swa_cells: int | None      # None without windowed layers
    if model.model_type in DSV4_TYPES:     # llama_kv_cache_dsv4 (kvmem.engines.llamacpp.dsv4)
        caches, rows, swa_cells = dsv4_caches(model, s, n_ctx_seq)
        return Plan(n_ctx=n_ctx, n_ctx_seq=n_ctx_seq, n_stream=n_stream, unified=unified, mla=None,
                    n_swa=model.layers[0].window, swa_cells=swa_cells, caches=caches, rows=rows,
                    devices=_layer_devices(model.num_layers, pp, gguf_nextn_layers(model, s.build)), notes=notes,
                    windowed=set(range(model.num_layers)))
    mode = _mla_mode(model, s)
    if mode not in (None, "per_head") and s.mla is None:
        notes.append(f"mla={mode!r}: the cache of an MLA GGUF on this build; GGUFs converted before "
                     "PR #12801 (April 2025) cache per-head K/V (mla='none')")
    n_swa = _windowed_split(model, s, notes)
    swa_cells = _swa_cells(s, n_ctx_seq, n_swa, unified) if n_swa is not None else None
    if n_swa is not None and s.swa_full:
        notes.append(SWA_FULL_WARNING)
    k_type, v_type = kvmem_dtype(s.type_k), kvmem_dtype(s.type_v)

    # per layer that owns a cache, K = ggml_row_size(type_k, n_embd_k_gqa) x cells x streams, V likewise with type_v
    # (llama.cpp@0c1e57098 src/llama-kv-cache.cpp#L233-L234); layers without a cache of their own (Gemma-3n
    # KV-sharing layers, MLP-only blocks) hold none and are not counted
    owners = [i for i, layer in enumerate(model.layers) if layer.caches_tokens]
    widths = {i: _widths(model, model.layers[i], mode) for i in owners}
    if model.model_type in ZERO_WIDTH_LAYERS:
        # DeciLM: every block gets its K and V tensors (hparams.has_kv), 0 wide where head_count_kv is 0
        # (conversion/deci.py L55-L62: no-op and linear-replaced attention), padded with the rest below
        owners = list(range(model.num_layers))
        widths = {i: widths.get(i, (0, 0)) for i in owners}
    v_max = max((v for _, v in widths.values() if v is not None), default=0)
    # without flash attention V is stored transposed, and when V widths differ across layers every V row is padded
    # to the widest (llama.cpp@0c1e57098 src/llama-kv-cache.cpp#L157-L161, #L210 [TAG_V_CACHE_VARIABLE])
    if not s.flash_attn and len({v for _, v in widths.values() if v is not None}) > 1:
        notes.append("the V embeddings have different sizes across layers and FA is not enabled - "
                     f"padding V cache to {v_max}")
        widths = {i: (k, v_max if v is not None else None) for i, (k, v) in widths.items()}

    caches = []

    def add_cache(name, layer_ids, cells):
        k = sum(k_type.row_bytes(widths[i][0]) for i in layer_ids) * cells * n_stream
        v = sum(v_type.row_bytes(widths[i][1]) for i in layer_ids if widths[i][1] is not None) * cells * n_stream
        caches.append(dict(cache=name, cells=cells, streams=n_stream, cells_total=cells * n_stream,
                           layers=len(layer_ids), seqs=s.n_seq, k_type=s.type_k, v_type=s.type_v,
                           k_bytes=k, v_bytes=v, size_mib=printed_mib(k + v), k_mib=printed_mib(k),
                           v_mib=printed_mib(v)))

    # the GGUF's MTP blocks a DSA build also caches, each with a trunk layer's widths (indexers.dsa_cached_nextn)
    nextn_ids = list(range(model.num_layers, model.num_layers + dsa_cached_nextn(
        model, gguf_nextn_layers(model, s.build), s.build))) if mode is not None and owners else []
    widths.update({i: widths[owners[-1]] for i in nextn_ids})
    windowed = {i for i in owners if n_swa is not None and model.layers[i].kind.windowed}
    base_ids = [i for i in owners if i not in windowed] + nextn_ids
    # no indexer cache where the build runs glm-dsa without its indexer (settings.glm_dsa_indexer_ignored)
    index = indexer_widths(model, s.build) if mode is not None and not glm_dsa_indexer_ignored(
        model.model_type, s.build) else {}
    if index:
        index.update({i: max(index.values()) for i in nextn_ids})
    index_v, index_cache = {}, "dsa"
    if model.model_type in MSA_FAMILIES:
        if s.build != CURRENT:
            raise ValueError(f"{model.name}: llama_kv_cache_msa is modelled at the vendored build 0c1e57098 only; the "
                             f"build that added it is not pinned here, so build {s.build} is refused")
        index, index_v, index_cache = msa_indexer(model), msa_indexer(model, value=True), "msa"
    if owners or _hybrid(model):
        # a hybrid's llama_memory_hybrid builds its attention cache even with no attention layer: "0 layers"
        add_cache("kv", base_ids, n_ctx_seq)
    if windowed:
        add_cache("kv_swa", sorted(windowed), swa_cells)
    if index:
        # llama_kv_cache_dsa / _msa: a second llama_kv_cache with the same cells, streams and types, one K head
        # of indexer_head_size per indexer layer; no V under DSA (the MLA hparams), one V head under MSA
        # (llama.cpp@0c1e57098 src/llama-kv-cache-dsa.cpp#L30-L53, src/llama-kv-cache-msa.cpp#L13-L50)
        k = sum(k_type.row_bytes(w) for w in index.values()) * n_ctx_seq * n_stream
        v = sum(v_type.row_bytes(w) for w in index_v.values()) * n_ctx_seq * n_stream
        caches.append(dict(cache="kv_idx", cells=n_ctx_seq, streams=n_stream, cells_total=n_ctx_seq * n_stream,
                           layers=len(index), seqs=s.n_seq, k_type=s.type_k, v_type=s.type_v, k_bytes=k, v_bytes=v,
                           size_mib=printed_mib(k + v), k_mib=printed_mib(k), v_mib=printed_mib(v),
                           wrapper=index_cache))

    recurrent_ids = [i for i, layer in enumerate(model.layers) if layer.state is not None]
    rows_per_layer = {}
    if recurrent_ids:
        # per sequence one cell of R = (d_conv - 1) x conv channels and S = the SSM state, both f32, in
        # max(1, n_seq) x (1 + n_rs_seq) rows (llama.cpp@0c1e57098 src/llama-model.cpp#L2485,
        # src/llama-memory-recurrent.cpp#L101-L103; n_rs_seq, 2026 builds: rollback snapshots, 0 where the architecture
        # has none: llama.cpp@0c1e57098 src/llama-context.cpp#L105-L110, rs_seq.kept_rs_seq); the log's layers
        # is hparams.n_layer (with nextn the MTP layers)
        cells = max(1, s.n_seq)
        rs_rows = cells * (1 + (s.n_rs_seq or 0))
        f32 = dtype("fp32")
        for i in recurrent_ids:
            state = model.layers[i].state
            rows_per_layer[i] = (rs_rows * f32.row_bytes(state.conv_channels * max(state.conv_kernel - 1, 0)),  # type: ignore[union-attr]  # not None
                                 rs_rows * f32.row_bytes(state.ssm_elements))  # type: ignore[union-attr]  # not None
        r = sum(r for r, _ in rows_per_layer.values())
        s_bytes = sum(x for _, x in rows_per_layer.values())
        layers = model.num_layers + (model.mtp_layers if s.nextn else 0)
        caches.append(dict(cache="recurrent", cells=cells, layers=layers,
                           seqs=s.n_seq, rs_seq=s.n_rs_seq, r_type="f32", s_type="f32", r_bytes=r,
                           s_bytes=s_bytes, size_mib=printed_mib(r + s_bytes), r_mib=printed_mib(r),
                           s_mib=printed_mib(s_bytes)))

    rows = []
    for i in range(model.num_layers + len(nextn_ids)):
        k = v = 0
        if i in widths:
            cells = swa_cells if i in windowed else n_ctx_seq  # type: ignore[assignment]  # set where windowed
            k = k_type.row_bytes(widths[i][0]) * cells * n_stream
            v = v_type.row_bytes(widths[i][1]) * cells * n_stream if widths[i][1] is not None else 0
            if i in index:
                k += k_type.row_bytes(index[i]) * n_ctx_seq * n_stream
                v += v_type.row_bytes(index_v[i]) * n_ctx_seq * n_stream if i in index_v else 0
        rows.append((k, v, sum(rows_per_layer.get(i, (0, 0)))))

    devices = _layer_devices(model.num_layers, pp, gguf_nextn_layers(model, s.build), len(nextn_ids))
    return Plan(n_ctx=n_ctx, n_ctx_seq=n_ctx_seq, n_stream=n_stream, unified=unified, mla=mode, n_swa=n_swa,
                swa_cells=swa_cells, caches=caches, rows=rows, devices=devices, notes=notes, windowed=windowed)


def _device_table(plan: Plan, pp: int) -> list[dict]:
    table = []
    for d in range(pp):
        ids = [i for i, dev in enumerate(plan.devices) if dev == d]
        buffers: dict[str, int] = {}
        for i in ids:
            k, v, state = plan.rows[i]
            name = "kv_swa" if i in plan.windowed else "kv"
            if k or v:
                buffers[name] = buffers.get(name, 0) + k + v
            if state:
                buffers["recurrent"] = buffers.get("recurrent", 0) + state
        table.append(dict(device=d, layers=ids, kv_bytes=sum(plan.rows[i][0] + plan.rows[i][1] for i in ids),
                          state_bytes=sum(plan.rows[i][2] for i in ids), buffer_bytes=buffers,
                          buffer_mib={name: float(f"{b / 1048576.0:.2f}") for name, b in buffers.items()}))
    return table


def run_plan(model: Model, *, tokens: int, batch: int, kv_dtype, tp: int, pp: int, options: dict):
    s, plan = settled_plan(model, tokens=tokens, batch=batch, kv_dtype=kv_dtype, tp=tp, pp=pp, options=options)
    return s, plan, _device_table(plan, pp)


def settled_plan(model: Model, *, tokens: int, batch: int, kv_dtype, tp: int, pp: int, options: dict):
    """run_plan's settings and plan without its per-device table (layouts.layout reads the rows alone)."""
    s = resolve_settings(model, tokens=tokens, batch=batch, kv_dtype=kv_dtype, tp=tp, options=options)
    return s, _plan(model, s, pp)

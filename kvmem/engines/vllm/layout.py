"""Model -> page specs -> groups: the hybrid layout of vLLM's KV cache manager."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from ...configs.fields import Fields
from ...errors import ConfigError
from ...model import CHUNKED, FULL, Layer, MLA, Model, SLIDING
from ...parallel import cdiv, divides, kv_heads_per_rank, pp_stages, require_divides
from .options import (BALANCED_GROUPS, HYBRID_GROUPS, INDEXER_QUANT_BLOCK, KVFormat, MLA_BACKENDS, MODEL_DTYPE_BYTES,
                      QWEN35_TYPES, STATE_DTYPES, VllmOptions, kv_format)
from .pages import PageSpec


def draft_layers(model: Model, draft) -> tuple[Layer, ...]:
    """The draft's cache-holding layers: a Model's layers, or the model's MTP layers."""
    if draft is None:
        return ()
    if isinstance(draft, Model):
        return draft.layers
    if not model.mtp_layers:
        raise ValueError(f"draft='mtp' needs MTP layers, but {model.name} has none "
                         "(config num_nextn_predict_layers / mtp_num_hidden_layers)")
    # An MTP block is one decoder layer of the target's own attention (DeepSeek MLA, Qwen full).
    attention = [layer for layer in model.layers if layer.kind in (FULL, MLA)]
    if not attention:
        raise ValueError(f"draft='mtp': {model.name} has no full-attention or MLA layer to copy")
    layer = replace(attention[-1], state=None)
    indexed = [other.index_head_dim for other in attention if other.kind == MLA and other.index_head_dim]
    if layer.kind == MLA and indexed and not layer.index_head_dim:
        # deepseek_v2.py DeepseekV2MLAAttention: an MTP layer always keeps its indexer (is_mtp_layer)
        layer = replace(layer, index_head_dim=indexed[0])
    return (layer,) * model.mtp_layers


def _check_indexers(model: Model, notes: list) -> None:
    """GLM-5: the layers that keep an indexer key as vLLM decides them.

    vllm@v0.33.0 vllm/models/deepseek_v32/attention.py (and deepseek_v2.py): a layer skips its
    indexer where index_topk_pattern[i] == "S", else (no pattern) where max(i - offset + 1, 0) %
    index_topk_freq != 0 (offset index_skip_topk_offset, default 2; freq default 1); it does not read
    transformers' indexer_types, so a config whose indexer_types disagrees is refused.
    """
    if model.model_type != "glm_moe_dsa":
        return
    cfg = model.config
    pattern = cfg.get("index_topk_pattern")
    freq, offset = cfg.get("index_topk_freq", 1), cfg.get("index_skip_topk_offset", 2)
    ours = [bool(layer.index_head_dim) for layer in model.layers]
    if pattern is not None:
        theirs = [i >= len(pattern) or pattern[i] != "S" for i in range(len(ours))]
    elif isinstance(freq, int) and isinstance(offset, int) and freq > 0:
        theirs = [max(i - offset + 1, 0) % freq == 0 for i in range(len(ours))]
    else:
        raise ValueError(f"index_topk_freq {freq!r} / index_skip_topk_offset {offset!r}: not the integers vLLM "
                         "0.33.0's DSA attention reads")
    if ours != theirs:
        first = next(i for i, (a, b) in enumerate(zip(ours, theirs, strict=True)) if a != b)
        raise ValueError(f"layer {first}: the config's indexer_types say it {'keeps' if ours[first] else 'skips'} "
                         "an indexer key, but vLLM 0.33.0 reads index_topk_pattern / index_topk_freq / "
                         f"index_skip_topk_offset (not indexer_types) and {'keeps' if theirs[first] else 'skips'} it")
    notes.append("GLM-5 on Blackwell (SM10x): vLLM makes kv_cache_dtype 'auto' fp8_e4m3 "
                 "(vllm/model_executor/models/config.py GlmMoeDsaForCausalLM); pass kv_dtype='fp8' for that GPU")


def _mimo_layers(model: Model, tp: int) -> tuple[Layer, ...]:
    """MiMo-V2-Flash's layers as vLLM builds their attention (vllm@v0.33.0 mimo_v2.py MiMoV2DecoderLayer).

    Sliding layers (hybrid_layer_pattern 1): swa_num_key_value_heads x swa_head_dim K and
    swa_v_head_dim V (swa_head_dim when absent), a window of sliding_window_size itself (transformers
    holds sliding_window_size + 1); full layers: num_key_value_heads x head_dim, V v_head_dim. The
    swa_* fields and sliding_window_size are read from the file (no config-class default: vLLM fails
    without them, kvmem refuses).
    """
    swa_heads = _config_int(model, "swa_num_attention_heads")
    if not divides(tp, swa_heads):
        raise ValueError(f"Total number of attention heads ({swa_heads}, the sliding layers' "
                         f"swa_num_attention_heads) must be divisible by tensor parallel size ({tp}).")
    k_dim = _config_int(model, "swa_head_dim")
    sliding = dict(kv_heads=_config_int(model, "swa_num_key_value_heads"), head_dim_k=k_dim,
                   head_dim_v=_config_int(model, "swa_v_head_dim") if model.config.get("swa_v_head_dim") else k_dim,
                   window=_config_int(model, "sliding_window_size"))
    return tuple(replace(layer, **sliding) if layer.kind == SLIDING else layer for layer in model.layers)


# Model files that pass sliding_window + 1 as the layer's window ("cohere swa layer sees [pos -
# sliding_window, pos]"; vllm@v0.33.0 commandr.py CohereAttention, cohere2_moe.py); the release it
# landed in is not pinned here, so earlier releases keep the config's window
WINDOW_PLUS_ONE = ("cohere2", "cohere2_moe")
WINDOW_PLUS_ONE_FROM = (0, 33)


def _laguna_layers(model: Model, tp: int) -> tuple[Layer, ...]:
    """Laguna: each layer's query heads from num_attention_heads_per_layer; its head_dim is the config's
    head_dim, else hidden_size // that layer's query heads (vllm@v0.33.0 laguna.py LagunaAttention)."""
    per_layer = model.config.get("num_attention_heads_per_layer")
    if per_layer is None:
        return model.layers
    if not isinstance(per_layer, list) or len(per_layer) != len(model.layers) or any(
            isinstance(h, bool) or not isinstance(h, int) or h < 1 for h in per_layer):
        raise ValueError(f"config field 'num_attention_heads_per_layer' must list one head count per layer "
                         f"({len(model.layers)}) as vLLM 0.33.0's laguna.py reads it")
    head_dim = Fields(model.config, model.model_type).get("head_dim", default=None)   # the config class's default
    out = []
    for layer, heads in zip(model.layers, per_layer, strict=True):
        if not divides(tp, heads):
            raise ValueError(f"Total number of attention heads ({heads}, a layer's num_attention_heads_per_layer) "
                             f"must be divisible by tensor parallel size ({tp}).")
        if layer.caches_tokens and not head_dim:
            layer = replace(layer, head_dim_k=model.hidden_size // heads, head_dim_v=model.hidden_size // heads)
        out.append(layer)
    return tuple(out)


def _vllm_layers(model: Model, tp: int, release) -> tuple[Layer, ...]:
    """The model's layers as vLLM's model file shapes their attention, where it differs from kvmem's
    reading of the config (which follows transformers)."""
    if model.model_type == "mimo_v2_flash":
        return _mimo_layers(model, tp)
    if model.model_type == "minicpm3":
        # minicpm3.py MiniCPM3Attention: Attention(num_local_heads, qk_head_dim, num_kv_heads=
        # num_local_heads): per-head K and V of qk_nope_head_dim + qk_rope_head_dim each, not the latent
        # (minicpm3 is not in model_arch_config_convertor.py is_deepseek_mla)
        qk = model.facts.qk_nope_head_dim
        if not qk:
            raise ValueError("vLLM 0.33.0's minicpm3 attention reads qk_nope_head_dim, which this config lacks")
        return tuple(Layer(FULL, kv_heads=model.num_attention_heads, head_dim_k=qk + layer.qk_rope_head_dim,
                           head_dim_v=qk + layer.qk_rope_head_dim) if layer.kind == MLA else layer
                     for layer in model.layers)
    if model.model_type == "ernie4_5_vl_moe_text" and any(layer.kind in (SLIDING, CHUNKED) for layer in model.layers):
        # ernie45_vl_moe.py Ernie4_5_VLMoeAttention: no per-layer window, every layer full attention
        raise ValueError("vLLM 0.33.0's ernie45_vl_moe.py gives every layer full attention, but this config sets a "
                         "sliding window or chunk (kvmem's reading follows transformers' generic rule): refused")
    if model.model_type == "nemotron-nas":
        # nemotron_nas.py DeciLMDecoderLayer: attention (num_attention_heads // n_heads_in_group KV heads)
        # unless block_configs[i].attention.no_op; it does not read replace_with_linear
        blocks = model.config.get("block_configs") or []
        linear = [i for i, block in enumerate(blocks) if isinstance(block, dict)
                  and (block.get("attention") or {}).get("replace_with_linear")
                  and not (block.get("attention") or {}).get("no_op")]
        if linear:
            raise ValueError(f"block_configs[{linear[0]}].attention.replace_with_linear: vLLM 0.33.0's nemotron_nas.py "
                             "does not read it and builds an attention layer there (needing n_heads_in_group); "
                             "kvmem does not size that")
        return model.layers
    if model.model_type == "laguna":
        return _laguna_layers(model, tp)
    if model.model_type in WINDOW_PLUS_ONE and release is not None and release >= WINDOW_PLUS_ONE_FROM:
        return tuple(replace(layer, window=layer.window + 1) if layer.kind == SLIDING else layer
                     for layer in model.layers)
    return model.layers


def _check_heads(model: Model, tp: int) -> None:
    heads = model.num_attention_heads
    if not divides(tp, heads):
        raise ValueError(f"Total number of attention heads ({heads}) must be divisible by tensor "
                         f"parallel size ({tp}).")
    if model.model_type in HIDDEN_HEAD_DIM_TYPES:
        dim = model.hidden_size // heads
        if any(layer.caches_tokens and (layer.head_dim_k, layer.head_dim_v) != (dim, dim) for layer in model.layers):
            raise ValueError(f"vLLM 0.33.0's {model.model_type} attention takes head_dim = hidden_size // "
                             f"num_attention_heads = {dim}, which this config's head_dim contradicts")


# Model files whose attention takes head_dim = hidden_size // num_attention_heads whatever the config
# says (vllm@v0.33.0 granitemoehybrid.py GraniteMoeHybridAttention, lfm2.py Lfm2Attention, lfm2_moe.py,
# dbrx.py DbrxAttention: d_model // n_heads, olmo_hybrid.py OlmoHybridAttention)
HIDDEN_HEAD_DIM_TYPES = ("granitemoehybrid", "lfm2", "lfm2_moe", "dbrx", "olmo_hybrid")


def _state_dtype_bytes(model: Model, opts: VllmOptions, notes: list) -> tuple[int, int]:
    """(conv state bytes, ssm state bytes) per element, with vLLM's per-model hooks."""
    model_bytes = MODEL_DTYPE_BYTES.get(model.dtype, 2)
    conv = model_bytes if opts.mamba_cache_dtype == "auto" else STATE_DTYPES[opts.mamba_cache_dtype]
    ssm_option = opts.mamba_ssm_cache_dtype
    if model.model_type == "kimi_linear" and ssm_option not in ("auto", "float32", "fp32"):
        # kimi_gdn_linear_attn.py KimiGatedDeltaNetAttention.get_state_dtype passes no
        # mamba_ssm_cache_dtype (its layers keep float32) while the block alignment reads it
        raise ValueError(f"mamba_ssm_cache_dtype {ssm_option!r} for kimi_linear: vLLM 0.33.0's KDA layers keep "
                         "their recurrent state in float32 whatever it says, while its block alignment "
                         "(get_mamba_state_dtype_from_config) takes it; kvmem sizes only 'auto' or 'float32'")
    if ssm_option != "auto":
        return conv, STATE_DTYPES[ssm_option]
    ssm_dtype = model.facts.ssm.ssm_dtype if model.facts.ssm else None
    if model.model_type in QWEN35_TYPES:
        # Qwen3_5ForConditionalGenerationConfig: "auto" takes the config's mamba_ssm_dtype.
        name = ssm_dtype
        if name is None:
            notes.append("ssm state in float32: the published Qwen3.5 configs set mamba_ssm_dtype "
                         "float32 and this config does not say")
            name = "float32"
        return conv, _state_bytes_named("mamba_ssm_dtype", name)
    if model.model_type == "nemotron_h":
        # NemotronHForCausalLMConfig.DEFAULT_MAMBA_SSM_CACHE_DTYPE = "float32".
        return conv, _state_bytes_named("mamba_ssm_cache_dtype", ssm_dtype or "float32")
    if model.model_type == "kimi_linear":
        # vllm@v0.33.0 mamba_utils.py MambaStateDtypeCalculator.kda_state_dtype: "auto" = float32
        return conv, STATE_DTYPES["float32"]
    return conv, conv


def _state_bytes_named(field: str, name) -> int:
    key = str(name).lower().removeprefix("torch.")
    if key not in STATE_DTYPES:
        raise ValueError(f"config {field} {name!r} is not float32, float16 or bfloat16")
    return STATE_DTYPES[key]


# vllm@v0.33.0 mamba_utils.py MambaStateShapeCalculator: which shape rule each family's model file calls
MAMBA1_TYPES = ("jamba", "mamba", "falcon_mamba")          # mamba1_state_shape (jamba.py, mamba.py)
# mamba2_state_shape (nemotron_h.py, granitemoehybrid.py, falcon_h1.py, mamba2.py): the config fields
# holding (n_groups, d_state) as each model file reads them
MAMBA2_TYPES = {"nemotron_h": ("n_groups", "ssm_state_size"), "granitemoehybrid": ("mamba_n_groups", "mamba_d_state"),
                "falcon_h1": ("mamba_n_groups", "mamba_d_state"), "mamba2": ("n_groups", "state_size")}
SHORT_CONV_TYPES = ("lfm2", "lfm2_moe")                     # short_conv_state_shape (lfm2.py, lfm2_moe.py)


def _config_int(model: Model, name: str) -> int:
    """A config field as vLLM's model file reads it from the transformers config object: the file's
    value, else the config class's default (kvmem.configs.fields)."""
    try:
        return Fields(model.config, model.model_type).int(name)
    except ConfigError as error:
        raise ValueError(f"vLLM 0.33.0's {model.model_type} model reads config field {name!r}: {error}") from None


def _mamba2_groups(model: Model) -> tuple[int, int]:
    """(n_groups, d_state) of a Mamba2 mixer, from the config fields its vLLM model file reads."""
    if model.model_type == "nemotron_h":   # read as before: the facts kvmem.configs gathered
        ssm = model.facts.ssm
        return (ssm.n_groups, ssm.state_size) if ssm and ssm.n_groups and ssm.state_size else (0, 0)
    groups, d_state = MAMBA2_TYPES[model.model_type]
    return _config_int(model, groups), _config_int(model, d_state)


def _short_conv_dim(model: Model) -> int:
    """The short convolution's channels: lfm2.py Lfm2ForCausalLM.get_mamba_state_shape_from_config
    reads config.conv_dim (the published LFM2 files set it to hidden_size; transformers' Lfm2Config
    has no default for it), lfm2_moe.py reads hidden_size."""
    if model.model_type == "lfm2":
        return _config_int(model, "conv_dim")
    return model.hidden_size


def _divide(what: str, value: int, tp: int) -> int:
    require_divides(tp, value, what)
    return value // tp


def state_elements(model: Model, layer: Layer, tp: int, num_spec: int) -> tuple[int, int]:
    """(conv elements, ssm elements) of one sequence's state on one tensor-parallel rank."""
    state = layer.state
    kind = model.model_type
    if kind in MAMBA1_TYPES:   # mamba1_state_shape: no speculative conv columns
        inner = _divide("mamba inner channels", state.conv_channels, tp)
        return inner * (state.conv_kernel - 1), _divide("mamba ssm elements", state.ssm_elements, tp)
    channels = state.conv_channels
    if kind in MAMBA2_TYPES:
        groups, d_state = _mamba2_groups(model)
        if not divides(tp, groups):
            channels += 2 * (tp - groups) * d_state   # extra_groups_for_head_shards
    if kind in SHORT_CONV_TYPES:   # short_conv_state_shape: one conv tensor, no recurrent state
        if num_spec:
            raise ValueError(f"num_speculative_tokens with {kind}: vLLM 0.33.0's short-conv layers keep "
                             "kernel - 1 + num_spec conv columns (short_conv.py get_state_shape) but its block "
                             "alignment sizes the state without them (get_mamba_state_shape_from_config); "
                             "kvmem does not size that mismatch")
        return _divide("conv channels", _short_conv_dim(model), tp) * (state.conv_kernel - 1), 0
    conv = _divide("conv channels", channels, tp) * (state.conv_kernel - 1 + num_spec)
    _divide("recurrent-state heads", state.ssm_heads, tp)
    return conv, state.ssm_elements // tp


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
    if layer.kind == FULL:
        return [PageSpec("full", block, heads, layer.head_dim_k, layer.head_dim_v, fmt.nbytes, fmt.mode)]
    if fmt.mode == "nvfp4":
        raise ValueError("kv_dtype nvfp4 is modelled for full-attention layers only "
                         "(vLLM's FullAttentionSpec); this model has sliding/chunked layers")
    kind = "sliding" if layer.kind == SLIDING else "chunked"
    return [PageSpec(kind, block, heads, layer.head_dim_k, layer.head_dim_v, fmt.nbytes, fmt.mode,
                  layer.window)]


@dataclass
class Plan:
    """How vLLM lays one model out: its specs per layer, groups, block size and notes."""

    units: list                # (owner layer index, PageSpec)
    groups: list               # lists of unit indices
    uniform_type: bool         # one UniformTypeKVCacheSpecs group (per-layer pages)
    n_layers: int              # target + draft layers (pp staging)
    block_size: int
    fmt: KVFormat
    notes: list
    padding_layers: int = 0
    # what kvmem.engines.vllm.pool derives from the layout alone (stages, group sizes), kept with it
    memo: dict = field(default_factory=dict, repr=False, compare=False)


def make_plan(model: Model, kv_dtype, tp: int, pp: int, opts: VllmOptions) -> Plan:
    release = opts.release
    _check_heads(model, tp)
    fmt = kv_format(model, kv_dtype)
    draft = draft_layers(model, opts.draft)
    if draft and isinstance(opts.draft, Model):
        _check_heads(opts.draft, tp)
    if draft and pp > 1:
        raise ValueError("draft with pp > 1: kvmem does not model on which pipeline stage vLLM "
                         "places the draft layers")
    layers = _vllm_layers(model, tp, release) + draft
    if model.model_type == "longcat_flash" and pp > 1:
        # longcat_flash.py: two MLA attentions per decoder layer; vLLM splits the decoder layers across
        # stages (get_pp_indices over num_layers), kvmem's pp_stages the attentions
        raise ValueError("pp > 1 with longcat_flash: vLLM stages its decoder layers (two attentions each), "
                         "which kvmem does not model")
    pp_stages(len(model.layers), pp)
    notes: list[str] = []
    _check_indexers(model, notes)
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
        forced = _mla_block(backend, block)
        if forced != block and opts.block_size is not None:
            notes.append(f"block size {forced}: the {backend} backend forces it (asked {block})")
        elif forced != block:
            notes.append(f"block size {forced}, the {backend} backend's")
        block = forced
        kernel_align = MLA_BACKENDS[backend] or 16

    stateful = [layer for layer in layers if layer.state is not None]
    attention = [layer for layer in layers if layer.caches_tokens]
    if release is not None and release < HYBRID_GROUPS and stateful:
        raise ValueError(f"vLLM {_show(release)}'s V1 engine has no Mamba/linear-attention layers; "
                         "use version='v0' or a release from 0.9")
    mamba_page = 0
    spec_tokens = opts.num_speculative_tokens
    if stateful:
        conv_bytes, ssm_bytes = _state_dtype_bytes(model, opts, notes)
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

    units = []
    for index, layer in enumerate(layers):
        if layer.caches_tokens:
            for spec in _attention_spec(layer, fmt, tp, block):
                units.append((index, spec))
        if layer.state is not None:
            units.append((index, PageSpec("mamba", block, state_bytes=mamba_page, padded=mamba_padded)))
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


def _show(release) -> str:
    return f"{release[0]}.{release[1]}"


def _mla_block(backend: str, block: int) -> int:
    """The block size an MLA backend runs with (vllm/platforms/cuda.py check_and_update_config)."""
    if backend == "FLASHMLA":
        return block if block % 64 == 0 else 64
    if backend == "CUTLASS_MLA":
        return block if block % 128 == 0 else 128
    if backend == "FLASHINFER_MLA":
        return block if block == 32 or block % 64 == 0 else 64
    if backend == "FLASHMLA_SPARSE":
        return 64
    return block


def _align_hybrid(model: Model, layer: Layer, fmt: KVFormat, tp: int, block: int, kernel_align: int,
                  mamba_page: int, opts: VllmOptions, notes: list) -> tuple[int, int]:
    """(attention block size, padded Mamba page) of a hybrid model (_align_hybrid_block_size)."""
    if layer.kind == MLA:
        one = _attention_spec(layer, fmt, tp, 1)[0]
    else:   # FullAttentionSpec(head_size) of the model's attention shape: head_size_v = head_size
        one = PageSpec("full", 1, kv_heads_per_rank(layer.kv_heads, tp), layer.head_dim_k, layer.head_dim_k,
                    fmt.nbytes, "" if fmt.mode == "nvfp4" else fmt.mode)
    page_1 = one.page_bytes
    align = max(kernel_align, block)
    if layer.kind == MLA:
        # vllm@v0.33.0 vllm/platforms/interface.py _align_hybrid_block_size: "For hybrid MLA/Mamba
        # models, make the manager block size a multiple of 128" (TRTLLM/FlashInfer MLA decode)
        align = max(align, 128)
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
    """unify_hybrid_kv_cache_specs: sliding/chunked layers become full ones beside full layers."""
    kinds = {spec.kind for _, spec in units}
    windows = {spec.window for _, spec in units if spec.kind in ("sliding", "chunked")}
    if len(windows) > 1 and release is not None and release >= PADDED_ATTENTION_PAGES:
        # vllm@v0.33.0 kv_cache_planning.py _promote_local_kv_cache_specs keeps each promoted spec's window,
        # and FullAttentionSpec.merge_window_sizes refuses more than one (kv_cache_interface.py)
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


# The release whose unify_kv_cache_spec_page_size pads non-dividing attention pages (0.33.0 does; the
# release it landed in is not pinned here, so earlier releases keep the refusal)
PADDED_ATTENTION_PAGES = (0, 33)


def _uniform_type(specs: list) -> bool:
    return len({s.block_size for s in specs}) == 1 and len({s.family for s in specs}) == 1


def _group(units: list, release, notes: list) -> tuple[list, list, bool, int]:
    """get_kv_cache_groups: one group, one UniformType group, or equal-size groups per spec."""
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
            # vllm@v0.33.0 kv_cache_planning.py unify_kv_cache_spec_page_size: a non-MLA attention page
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

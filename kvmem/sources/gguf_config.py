"""llama.cpp GGUF metadata -> a config.json-shaped dict (Hugging Face field names), read by
kvmem.configs like any config.json.

Metadata mapping (llama.cpp src/llama-model.cpp ``load_hparams`` and convert_hf_to_gguf.py):

    <arch>.block_count                      num_hidden_layers
    <arch>.embedding_length                 hidden_size
    <arch>.attention.head_count             num_attention_heads
    <arch>.attention.head_count_kv          num_key_value_heads (an array: one value per layer)
    <arch>.attention.key_length / value_length   head_dim / v_head_dim
    <arch>.attention.sliding_window         sliding_window
    <arch>.attention.sliding_window_pattern layer_types (an int n: layer i slides unless
                                            (i + 1) % n == 0; a bool array: per layer);
                                            absent: llama.cpp's set_swa_pattern per arch:
                                            gemma2 2, gemma3 6, cohere2 4, gpt-oss 2
    <arch>.attention.kv_lora_rank, q_lora_rank, rope.dimension_count (qk_rope_head_dim),
    key_length_mla / value_length_mla       DeepSeek-2/3 MLA (GGUFs converted before llama.cpp
                                            PR #12801 have key_length = nope + rope instead)
    <arch>.expert_count / expert_used_count / expert_feed_forward_length   MoE shape
    <arch>.context_length                   max_position_embeddings
    <arch>.vocab_size, else the tokenizer.ggml.tokens count, else token_embd.weight's dims
                                            vocab_size; no output.weight = tied embeddings

    <arch>.full_attention_interval, ssm.*   Qwen3-Next gated DeltaNet layers (see _gated_deltanet)
    head_count_kv[i] == 0, ssm.*            Jamba / Nemotron-H Mamba layers (see _mamba_hybrid)

    <arch>.nextn_predict_layers             MTP layers, counted in block_count: num_hidden_layers is
                                            block_count - nextn (llama.cpp's n_layer())

Architectures mapped: llama (Llama, Mistral), qwen2, qwen2moe, qwen3, qwen3moe, qwen3next,
gemma, gemma2, gemma3, cohere2, deepseek2, gpt-oss, phi3, falcon, jamba, nemotron_h, and (their
keys in kvmem/sources/gguf_arches.py) glm4moe (GLM-4.5/4.6/4.7), glm-dsa (GLM-5, 5.1, 5.2),
deepseek32 (DeepSeek-V3.2), minimax-m2 (MiniMax-M2.x), qwen35 and qwen35moe (Qwen3.5 / 3.6), gemma4, and
(kvmem/sources/gguf_more.py, its docstring the index) deepseek4, gemma3n, llama4, mamba, lfm2, nemotron_h_moe, ...
Others are refused by name (gguf_more.UNMAPPED says why) with a message saying to use the model's config.json.
"""

from __future__ import annotations

from . import SourceError
from .gguf_arches import ARCH_MODEL_TYPES, arch_fields, gemma4_kv_heads, recurrent_layers
from .gguf_layered import PER_LAYER_HEADS, PER_LAYER_KV, layer_array
from .gguf_more import MORE_MODEL_TYPES, MORE_SWA_PATTERN, UNMAPPED, ZERO_KV_ARCHES, more_fields

__all__ = ["config_from_header", "MAPPED_ARCHITECTURES"]

# llama.cpp arch -> the Hugging Face model_type whose rules kvmem.configs applies.
_MODEL_TYPES = {"llama": "llama", "qwen2": "qwen2", "qwen2moe": "qwen2_moe", "qwen3": "qwen3",
                "qwen3moe": "qwen3_moe", "gemma": "gemma", "gemma2": "gemma2", "gemma3": "gemma3_text",
                "cohere2": "cohere2", "deepseek2": "deepseek_v3", "gpt-oss": "gpt_oss", "phi3": "phi3",
                "falcon": "falcon", "qwen3next": "qwen3_next", "jamba": "jamba", "nemotron_h": "nemotron_h",
                **ARCH_MODEL_TYPES, **MORE_MODEL_TYPES}
_MLA = ("deepseek2", "glm-dsa", "deepseek32", "mistral4", "hy_v4")   # the deepseek2 MLA keys (gguf_config._deepseek)
_DELTANET = ("qwen3next", "qwen35", "qwen35moe")          # the gated DeltaNet ssm.* keys
# Hybrids whose attention layers are the ones with head_count_kv > 0 (llama.cpp: recurrent_layer_arr[il]
# = n_head_kv(il) == 0), the rest Mamba (and, for nemotron_h, MLP-only where feed_forward_length > 0).
_HYBRIDS = ("jamba", "nemotron_h", "nemotron_h_moe")
MAPPED_ARCHITECTURES = tuple(sorted(_MODEL_TYPES))
# llama.cpp load_hparams: hparams.set_swa_pattern(n) per arch when the GGUF carries no pattern.
_SWA_PATTERN = {"gemma2": 2, "gemma3": 6, "cohere2": 4, "gpt-oss": 2, **MORE_SWA_PATTERN}
_FILE_TYPE_DTYPES = {0: "float32", 1: "float16", 32: "bfloat16"}   # LlamaFileType ALL_F32, MOSTLY_F16/BF16
MAX_LAYERS = 1024       # kvmem.configs refuses deeper models (8x the deepest real one); checked before lists


def _quote(value) -> str:
    text = repr(value)
    return text if len(text) <= 100 else text[:100] + "..."


def _counts(value, key: str):
    """A numeric GGUF field as kvmem reads it: a whole number >= 0, or a per-layer array of them
    (bools for a sliding-window pattern) of at most MAX_LAYERS entries; text, floats and longer
    arrays are refused by name."""
    items = value if isinstance(value, list) else [value]
    if (not isinstance(value, (list, int)) or len(items) > MAX_LAYERS
            or not all(isinstance(v, int) and v >= 0 for v in items)):
        raise SourceError(f"GGUF metadata {key!r} is {_quote(value)}; expected a whole number >= 0 "
                          f"(or one per layer, at most {MAX_LAYERS:,})")
    return value


def _positive(value, key: str) -> int:
    """A GGUF field kvmem divides by: at least 1."""
    if isinstance(value, list) or value < 1:
        raise SourceError(f"GGUF metadata {key!r} is {_quote(value)}; it must be at least 1")
    return value


def _per_layer(value, key: str) -> int:
    """A per-layer array with one value for every layer as that value (else an error)."""
    if not isinstance(value, list):
        return value
    if len(set(value)) != 1:
        raise SourceError(f"GGUF {key} differs per layer ({sorted(set(value))}); kvmem maps one value per model")
    return value[0]


def config_from_header(header) -> dict:
    """A config.json-shaped dict (Hugging Face field names) from the GGUF metadata."""
    arch, meta = header.arch, header.metadata
    if arch not in _MODEL_TYPES:
        why = f" ({UNMAPPED[arch]})" if arch in UNMAPPED else ""
        raise SourceError(f"GGUF architecture {arch!r} is not mapped to a kvmem model{why}; mapped: "
                          f"{', '.join(sorted(_MODEL_TYPES))}. Use the model's config.json instead")

    depth: list[int] = []       # block_count and the trunk, once read: per-layer arrays are checked against them

    def key(name, default=SourceError):
        full = f"{arch}.{name}"
        if full in meta:
            return layer_array(arch, name, _counts(meta[full], full), *depth) if depth else _counts(meta[full], full)
        if default is SourceError:
            raise SourceError(f"GGUF metadata {full!r} is missing (architecture {arch})")
        return default

    n_layers = key("block_count")
    if isinstance(n_layers, list) or not 1 <= n_layers <= MAX_LAYERS:
        raise SourceError(f"GGUF {arch}.block_count is {_quote(n_layers)}; kvmem reads 1 to {MAX_LAYERS:,} layers")
    # MTP layers count in block_count: llama.cpp's trunk is n_layer_all - n_layer_nextn
    # (llama.cpp@0c1e57098 src/llama-model.cpp#L1326-L1329, src/llama-hparams.cpp#L348-L350)
    nextn = key("nextn_predict_layers", 0)
    if isinstance(nextn, list) or nextn >= n_layers:
        raise SourceError(f"GGUF {arch}.nextn_predict_layers is {_quote(nextn)}; it must be below block_count "
                          f"({n_layers}), the MTP layers being counted in it")
    trunk = n_layers - nextn
    depth[:] = n_layers, trunk
    heads_raw = key("attention.head_count")
    # Laguna's and DeciLM's query heads differ per layer (gguf_more._laguna, gguf_layered keep the lists)
    heads = (max(heads_raw) if arch in PER_LAYER_HEADS and isinstance(heads_raw, list) and heads_raw
             else _per_layer(heads_raw, f"{arch}.attention.head_count"))
    kv_raw = key("attention.head_count_kv", heads)
    if arch in _HYBRIDS or arch in ZERO_KV_ARCHES:
        kv_raw = kv_raw if isinstance(kv_raw, list) else [kv_raw] * n_layers
        kv_heads = _per_layer([kv for kv in kv_raw if kv] or [heads], f"{arch}.attention.head_count_kv")
    elif arch in PER_LAYER_KV and isinstance(kv_raw, list):
        kv_heads = max(kv_raw) or heads         # per layer in gguf_layered
    elif arch == "gemma4" and isinstance(kv_raw, list):
        kv_heads = gemma4_kv_heads(kv_raw, key("attention.sliding_window_pattern"))
    else:
        kv_heads = _per_layer(kv_raw, f"{arch}.attention.head_count_kv")
    names = {t.name: t for t in header.tensors}
    embed = names.get("token_embd.weight")
    cfg = {"model_type": _MODEL_TYPES[arch], "architectures": [f"gguf:{arch}"],
           "num_hidden_layers": trunk, "hidden_size": key("embedding_length"),
           "num_attention_heads": heads, "num_key_value_heads": kv_heads,
           "tie_word_embeddings": "output.weight" not in names}
    for gguf_name, hf_name in (("context_length", "max_position_embeddings"),
                               ("feed_forward_length", "intermediate_size")):
        value = key(gguf_name, None)
        if isinstance(value, list) and (arch in _HYBRIDS or arch in ZERO_KV_ARCHES or arch in PER_LAYER_KV):
            value = max(value)
        if value is not None:
            cfg[hf_name] = _per_layer(value, f"{arch}.{gguf_name}")
    tokens = meta.get("tokenizer.ggml.tokens")
    vocab = key("vocab_size", None) or (len(tokens) if hasattr(tokens, "__len__") and not isinstance(tokens, str)
                                        else None)
    if vocab is None and embed is not None and len(embed.shape) == 2:
        vocab = embed.shape[1]
    if vocab is not None:
        cfg["vocab_size"] = vocab
    if isinstance(meta.get("general.file_type"), int) and meta["general.file_type"] in _FILE_TYPE_DTYPES:
        cfg["torch_dtype"] = _FILE_TYPE_DTYPES[meta["general.file_type"]]
    # the norms' epsilons, as the config fields the converter wrote them from (llama.cpp@0c1e57098
    # conversion/base.py#L1511-L1515): they shape no cache, but a family laid out from a config asks for them
    for gguf_key, field_name in (("attention.layer_norm_epsilon", "layer_norm_epsilon"),
                                 ("attention.layer_norm_rms_epsilon", "rms_norm_eps")):
        eps = meta.get(f"{arch}.{gguf_key}")
        if isinstance(eps, float) and eps > 0:
            cfg[field_name] = eps
    key_length, value_length = key("attention.key_length", None), key("attention.value_length", None)
    if arch in _MLA:
        _deepseek(cfg, key, key_length, value_length, heads, arch)
        # the routed experts' score-correction bias is an optional tensor, present for sigmoid routers
        # (llama.cpp@0c1e57098 src/models/deepseek2.cpp#L132, deepseek32.cpp#L121, glm-dsa.cpp#L155)
        if any(name.endswith(".exp_probs_b.bias") for name in names):
            cfg["scoring_func"] = "sigmoid"
    elif key_length is not None:
        cfg["head_dim"] = key_length
        if value_length is not None and value_length != key_length:
            cfg["v_head_dim"] = value_length
    if arch in _DELTANET:
        _gated_deltanet(cfg, key, arch)
        recurrent_layers(cfg, key, arch, trunk)
    if arch in _HYBRIDS:
        _mamba_hybrid(cfg, key, arch, kv_raw, n_layers)
    if arch == "falcon":
        cfg.update(new_decoder_architecture=kv_heads != 1, multi_query=kv_heads == 1, num_kv_heads=kv_heads)
    if arch == "gptneox":   # read as required (llama.cpp@0c1e57098 src/models/gptneox.cpp#L5): the graph's residuals
        cfg["use_parallel_residual"] = bool(key("use_parallel_residual"))
    if nextn:
        cfg["num_nextn_predict_layers"] = nextn
    experts = key("expert_count", 0)
    if experts:
        cfg.update(num_experts=experts, num_local_experts=experts, n_routed_experts=experts,
                   num_experts_per_tok=key("expert_used_count"))
        ffn_exp = key("expert_feed_forward_length", None)
        if ffn_exp is not None:
            cfg["moe_intermediate_size"] = ffn_exp
            if arch == "gpt-oss":
                cfg["intermediate_size"] = ffn_exp
    window = key("attention.sliding_window", None)
    if window:
        cfg["sliding_window"] = window
        pattern = key("attention.sliding_window_pattern", _SWA_PATTERN.get(arch))
        if isinstance(pattern, list):
            swa = [bool(p) for p in pattern]
        elif pattern:
            swa = [(i + 1) % pattern != 0 for i in range(n_layers)]
        else:
            swa = None
        if swa is not None:
            # one per layer, or one per trunk layer (conversion/exaone.py ExaoneMoEModel writes the config's
            # layer_types beside the MTP layers in block_count; the loader's get_arr leaves the rest unset)
            if len(swa) not in (n_layers, trunk):
                raise SourceError(f"GGUF {arch}.attention.sliding_window_pattern has {len(swa)} entries, "
                                  f"block_count is {n_layers}")
            cfg["layer_types"] = ["sliding_attention" if s else "full_attention" for s in swa[:trunk]]
    if arch in ARCH_MODEL_TYPES:
        arch_fields(arch, cfg, key, trunk, names)
    if arch in MORE_MODEL_TYPES:
        more_fields(arch, cfg, key, trunk, meta)
    return cfg


def _mamba_hybrid(cfg: dict, key, arch: str, kv_per_layer: list, n_layers: int) -> None:
    """Jamba / Nemotron-H: which layers attend, and the Mamba state (ssm.conv_kernel, state_size,
    inner_size, time_step_rank, group_count), as their config.json fields."""
    if len(kv_per_layer) != n_layers:
        raise SourceError(f"GGUF {arch}.attention.head_count_kv has {len(kv_per_layer)} entries, "
                          f"block_count is {n_layers}")
    inner, conv, state = key("ssm.inner_size"), key("ssm.conv_kernel"), key("ssm.state_size")
    if arch == "jamba":
        hidden = _positive(cfg["hidden_size"], f"{arch}.embedding_length")
        if inner % hidden:
            raise SourceError(f"GGUF jamba.ssm.inner_size ({inner}) is not a multiple of embedding_length ({hidden})")
        cfg.update(layer_types=["attention" if kv else "mamba" for kv in kv_per_layer], mamba_expand=inner // hidden,
                   mamba_d_conv=conv, mamba_d_state=state, mamba_dt_rank=key("ssm.time_step_rank"))
        return
    ffn = key("feed_forward_length", 0)
    ffn = ffn if isinstance(ffn, list) else [ffn] * n_layers
    heads = _positive(key("ssm.time_step_rank"), f"{arch}.ssm.time_step_rank")
    pattern = "".join("*" if kv else "-" if f else "M" for kv, f in zip(kv_per_layer, ffn, strict=True))
    cfg.update(hybrid_override_pattern=pattern,
               mamba_num_heads=heads, mamba_head_dim=inner // heads, ssm_state_size=state,
               n_groups=key("ssm.group_count"), conv_kernel=conv)


def _gated_deltanet(cfg: dict, key, arch: str) -> None:
    """Qwen3-Next's linear-attention layers (llama.cpp load_hparams for LLM_ARCH_QWEN3NEXT):
    ssm.group_count = key heads, ssm.time_step_rank = value heads, ssm.state_size = key head dim,
    ssm.inner_size = value heads x value head dim, ssm.conv_kernel; every full_attention_interval-th
    layer is full attention, 4 when the key is absent (llama.cpp@0c1e57098 src/models/qwen3next.cpp L15-L16,
    qwen35.cpp L15-L16)."""
    v_heads, inner = _positive(key("ssm.time_step_rank"), f"{arch}.ssm.time_step_rank"), key("ssm.inner_size")
    if inner % v_heads:
        raise SourceError(f"GGUF ssm.inner_size ({inner}) is not a multiple of ssm.time_step_rank ({v_heads})")
    interval = key("full_attention_interval", 4)
    cfg.update(full_attention_interval=_positive(interval, f"{arch}.full_attention_interval"),
               linear_num_key_heads=key("ssm.group_count"),
               linear_num_value_heads=v_heads, linear_key_head_dim=key("ssm.state_size"),
               linear_value_head_dim=inner // v_heads, linear_conv_kernel_dim=key("ssm.conv_kernel"))


def _deepseek(cfg: dict, key, key_length, value_length, heads: int, arch: str) -> None:
    """DeepSeek-2/3 MLA fields; new MLA GGUFs (PR #12801) write head_count_kv 1 and the
    per-head sizes as key_length_mla / value_length_mla."""
    rope = key("rope.dimension_count")
    nope_plus_rope = key("attention.key_length_mla", None) or key_length
    if not isinstance(nope_plus_rope, int) or isinstance(rope, list) or nope_plus_rope < rope:
        raise SourceError(f"GGUF {arch}.attention.key_length(_mla) is {_quote(nope_plus_rope)}; expected the "
                          f"per-head key size, at least rope.dimension_count ({_quote(rope)})")
    cfg.update(num_key_value_heads=heads, kv_lora_rank=key("attention.kv_lora_rank"),
               q_lora_rank=key("attention.q_lora_rank", None), qk_rope_head_dim=rope,
               qk_nope_head_dim=nope_plus_rope - rope,
               v_head_dim=key("attention.value_length_mla", None) or value_length,
               first_k_dense_replace=key("leading_dense_block_count", 0),
               n_shared_experts=key("expert_shared_count", 0))
    gating = key("expert_gating_func", None)
    if gating == 1 and arch == "deepseek2":      # LLAMA_EXPERT_GATING_FUNC_TYPE_SOFTMAX: DeepSeek-V2
        cfg["model_type"] = "deepseek_v2"

"""GGUF metadata -> config.json fields for the llama.cpp architectures kvmem's llama.cpp mode lays out
(kvmem.engines.llamacpp.arch_tensors.ARCHS) beyond the first set in gguf_config.py: glm4moe (GLM-4.5 /
4.6 / 4.7), glm-dsa (GLM-5, 5.1, 5.2), deepseek32 (DeepSeek-V3.2), minimax-m2 (MiniMax-M2.x), qwen35 and
qwen35moe (Qwen3.5 / 3.6), gemma4 (Gemma 4). Every key is read as llama.cpp 0c1e57098 (vendored by
llama-cpp-python 0.3.36) reads it in src/models/<arch>.cpp load_arch_hparams, and written as its converter
writes it:

    glm4moe     (glm4-moe.cpp L1-L24; conversion/glm.py Glm4MoeModel L151-L183)
        leading_dense_block_count   first_k_dense_replace
        expert_shared_count         n_shared_experts
        expert_feed_forward_length  moe_intermediate_size
        rope.dimension_count        partial_rotary_factor = rope dims / key_length (glm.py L157-L158)
    glm-dsa, deepseek32  (glm-dsa.cpp L35-L77, deepseek32.cpp L1-L39; conversion/glm.py L365-L382,
                conversion/deepseek.py DeepseekV2Model / DeepseekV32Model): the deepseek2 MLA keys
                (gguf_config._deepseek) and the DSA indexer's
        attention.indexer.head_count   index_n_heads
        attention.indexer.key_length   index_head_dim
        attention.indexer.top_k        index_topk
        attention.indexer.types        indexer_types (glm-dsa: a bool per trunk layer, true = "full" with
                                       its own indexer, false = "shared": GLM-5.2, glm.py L380-L382);
                                       absent: every layer full when context_length < 1,048,576 (GLM-5,
                                       5.1), else llama.cpp's built-in GLM-5.2 table (glm-dsa.cpp L6-L27,
                                       L66-L72: full for layers 0, 1 and every 4th from 2, shared past 78)
    minimax-m2  (minimax-m2.cpp; conversion/minimax.py MiniMaxM2Model L128-L132)
        expert_feed_forward_length  intermediate_size (the config's per-expert width)
        rope.dimension_count        rotary_dim
    qwen35, qwen35moe  (qwen35.cpp L1-L28, qwen35moe.cpp L1-L31; conversion/qwen.py L373-L392)
        ssm.* (the gated DeltaNet, as qwen3next: gguf_config._gated_deltanet)
        attention.recurrent_layers  which layers are linear (a bool per layer, MTP layers false); absent:
                                    full_attention_interval (default 4): linear unless (i + 1) % n == 0
        expert_shared_feed_forward_length  shared_expert_intermediate_size
        rope.dimension_count        partial_rotary_factor = rope dims / key_length (qwen.py L392)

    gemma4      (gemma4.cpp L1-L33; conversion/gemma.py Gemma4Model L671-L732)
        attention.sliding_window_pattern   layer_types (required: get_arr)
        attention.head_count_kv     per layer: the sliding layers' value num_key_value_heads, the full
                                    layers' num_global_key_value_heads (gemma.py L715-L726)
        attention.key_length / key_length_swa   global_head_dim / head_dim (gemma.py L696-L701)
        attention.shared_kv_layers  num_kv_shared_layers; embedding_length_per_layer_input
                                    hidden_size_per_layer_input (required)
        expert_count > 0            enable_moe_block, top_k_experts = expert_used_count
        no blk.N.attn_v.weight in a full layer   attention_k_eq_v (gemma4.cpp L84: wv TENSOR_NOT_REQUIRED)

MTP layers: every converter here counts them in block_count and writes nextn_predict_layers
(glm.py L119-L122 and L330-L333, deepseek.py L474-L477, qwen.py L298-L305 and L353-L354); llama.cpp's
trunk is block_count - nextn_predict_layers (src/llama-hparams.cpp n_layer() L348-L350), which
gguf_config maps to num_hidden_layers for every architecture.
"""

from __future__ import annotations

from . import SourceError

__all__ = ["ARCH_MODEL_TYPES", "arch_fields", "gemma4_kv_heads", "recurrent_layers", "GLM_5_2_CONTEXT"]

# llama.cpp arch (src/llama-arch.cpp LLM_ARCH_NAMES) -> the Hugging Face model_type kvmem.configs reads
ARCH_MODEL_TYPES = {"glm4moe": "glm4_moe", "glm-dsa": "glm_moe_dsa", "deepseek32": "deepseek_v32",
                    "minimax-m2": "minimax_m2", "qwen35": "qwen3_5_text", "qwen35moe": "qwen3_5_moe_text",
                    "gemma4": "gemma4_text"}
# llama.cpp@0c1e57098 src/models/glm-dsa.cpp#L62: is_pre_5_2 = n_ctx_train < 1048576
GLM_5_2_CONTEXT = 1_048_576
_GLM_5_2_TABLE_LAYERS = 78      # glm-dsa.cpp L6-L27: 78 entries, the rest of LLAMA_MAX_LAYERS zero


def _glm_5_2_default(n: int) -> list[bool]:
    """llama.cpp's GLM_5_2_DEFAULT_INDEXER_TYPES (glm-dsa.cpp L6-L27) for the first n layers."""
    return [i < _GLM_5_2_TABLE_LAYERS and (i < 2 or (i - 2) % 4 == 0) for i in range(n)]


def _rotary_fraction(cfg: dict, key, arch: str) -> None:
    """partial_rotary_factor from rope.dimension_count over the head size, where it is not the whole head."""
    rope, head = key("rope.dimension_count", None), cfg.get("head_dim")
    if isinstance(rope, int) and isinstance(head, int) and head and rope != head:
        if rope > head:
            raise SourceError(f"GGUF {arch}.rope.dimension_count ({rope}) exceeds attention.key_length ({head})")
        cfg["partial_rotary_factor"] = rope / head


def arch_fields(arch: str, cfg: dict, key, trunk: int, names) -> None:
    """Add the fields of ``arch`` (one of ARCH_MODEL_TYPES) to ``cfg``; ``trunk`` is llama.cpp's n_layer(),
    ``names`` the file's tensor names."""
    if arch == "glm4moe":
        # Q/K norms and the Q/K/V biases are optional tensors (llama.cpp@0c1e57098 src/models/glm4-moe.cpp#L61-L68:
        # create_tensor_qkv, attn_q_norm TENSOR_NOT_REQUIRED): the file's tensors say which it has
        cfg.update(first_k_dense_replace=key("leading_dense_block_count", 0),
                   n_shared_experts=key("expert_shared_count", 0),
                   use_qk_norm="blk.0.attn_q_norm.weight" in names, attention_bias="blk.0.attn_q.bias" in names)
        _rotary_fraction(cfg, key, arch)
    elif arch in ("glm-dsa", "deepseek32"):
        cfg.update(index_n_heads=key("attention.indexer.head_count"),
                   index_head_dim=key("attention.indexer.key_length"), index_topk=key("attention.indexer.top_k"))
        if arch == "glm-dsa":
            _indexer_types(cfg, key, trunk)
    elif arch == "minimax-m2":
        ffn = key("expert_feed_forward_length", None)
        if ffn is not None:
            cfg["intermediate_size"] = ffn
        rope = key("rope.dimension_count", None)
        if rope is not None:
            cfg["rotary_dim"] = rope
    elif arch == "gemma4":
        _gemma4(cfg, key, trunk, names)
    elif arch in ("qwen35", "qwen35moe"):
        shared = key("expert_shared_feed_forward_length", None)
        if shared is not None:
            cfg["shared_expert_intermediate_size"] = shared
        _rotary_fraction(cfg, key, arch)


def _indexer_types(cfg: dict, key, trunk: int) -> None:
    # glm-dsa.cpp L66-L72: get_key_or_arr(LLM_KV_ATTENTION_INDEXER_TYPES, is_indexer_full, n_layer(), optional)
    types = key("attention.indexer.types", None)
    if types is None:
        context = cfg.get("max_position_embeddings", 0)
        full = [True] * trunk if context < GLM_5_2_CONTEXT else _glm_5_2_default(trunk)
    elif isinstance(types, list):       # one per trunk layer (gguf_layered.layer_array refuses another length)
        full = [bool(t) for t in types]
    else:
        full = [bool(types)] * trunk
    if all(full):
        return      # every layer keeps its own indexer: the config without indexer_types
    cfg["indexer_types"] = ["full" if f else "shared" for f in full]


def recurrent_layers(cfg: dict, key, arch: str, trunk: int) -> None:
    """kvmem reads Qwen3-Next's and Qwen3.5's layers by full_attention_interval (configs/layouts.py
    'interval'); a GGUF whose recurrent_layers list (llama.cpp@0c1e57098 src/models/qwen3next.cpp L14-L19,
    qwen35.cpp L14-L20) is another pattern is refused, never sized as the interval."""
    listed = key("attention.recurrent_layers", None)
    interval = cfg["full_attention_interval"]
    if listed is None:
        return
    listed = listed if isinstance(listed, list) else [listed] * trunk
    ours = [(i + 1) % interval != 0 for i in range(trunk)]
    if [bool(x) for x in listed[:trunk]] != ours or any(listed[trunk:]):
        raise SourceError(f"GGUF {arch}.attention.recurrent_layers is not every {interval}th layer full "
                          f"(full_attention_interval {interval}); kvmem sizes {arch} by the interval alone")


def gemma4_kv_heads(per_layer: list, pattern) -> int:
    """Gemma 4's sliding layers' KV heads from the per-layer head_count_kv (the full layers' are
    num_global_key_value_heads, set by _gemma4)."""
    if not isinstance(pattern, list) or len(pattern) != len(per_layer):
        raise SourceError(f"GGUF gemma4.attention.sliding_window_pattern has {_count(pattern)} entries, "
                          f"head_count_kv {len(per_layer)}; llama.cpp reads one of each per layer")
    sliding = {kv for kv, swa in zip(per_layer, pattern, strict=True) if swa}
    if len(sliding) > 1:
        raise SourceError(f"GGUF gemma4.attention.head_count_kv differs between sliding layers ({sorted(sliding)}); "
                          "kvmem maps one value for them")
    return sliding.pop() if sliding else per_layer[0]


def _count(value) -> str:
    return str(len(value)) if isinstance(value, list) else "no"


def _gemma4(cfg: dict, key, trunk: int, names) -> None:
    pattern = key("attention.sliding_window_pattern")
    if not isinstance(pattern, list):
        raise SourceError("GGUF gemma4.attention.sliding_window_pattern must list one bool per layer")
    kv_raw = key("attention.head_count_kv", cfg["num_key_value_heads"])
    per_layer = kv_raw if isinstance(kv_raw, list) else [kv_raw] * len(pattern)
    full = sorted({kv for kv, swa in zip(per_layer, pattern, strict=True) if not swa}) or [cfg["num_key_value_heads"]]
    if len(full) > 1:
        raise SourceError(f"GGUF gemma4.attention.head_count_kv differs between full layers ({full}); kvmem maps one "
                          "value for them")
    k_eq_v = any(not swa and f"blk.{i}.attn_v.weight" not in names for i, swa in enumerate(pattern[:trunk]))
    cfg.update(head_dim=key("attention.key_length_swa"), global_head_dim=key("attention.key_length"),
               num_kv_shared_layers=key("attention.shared_kv_layers", 0),
               hidden_size_per_layer_input=key("embedding_length_per_layer_input"), attention_k_eq_v=k_eq_v,
               enable_moe_block=bool(cfg.get("num_experts")))
    cfg.pop("v_head_dim", None)
    if cfg.get("num_experts"):
        cfg["top_k_experts"] = cfg["num_experts_per_tok"]
    if full[0] != cfg["num_key_value_heads"]:
        if not k_eq_v:
            # configuration_gemma4.py reads num_global_key_value_heads only under attention_k_eq_v
            # (kvmem.configs.shapes.gemma4_shapes): the full layers' own count goes per layer
            cfg["per_layer_config"] = {str(i): {"num_key_value_heads": full[0], "head_dim": cfg["global_head_dim"]}
                                       for i, swa in enumerate(pattern[:trunk]) if not swa}
        else:
            cfg["num_global_key_value_heads"] = full[0]

"""The config fields llama.cpp's converter reads for the architectures kvmem lays out itself (arch_tensors,
nextn, the graphs_* modules): which llama.cpp architecture a model_type converts to, and a field read where a
config nests it (text_config)."""

from __future__ import annotations

from ...model import Model

__all__ = ["ARCHS", "field", "need", "uniform_full"]

# kvmem model_type -> llama.cpp architecture (llama-arch.cpp LLM_ARCH_NAMES)
ARCHS = {"gpt_oss": "gpt-oss", "glm4_moe": "glm4moe", "deepseek_v2": "deepseek2", "deepseek_v3": "deepseek2",
         "kimi_k2": "deepseek2", "qwen3_5": "qwen35", "qwen3_5_text": "qwen35", "qwen3_5_moe": "qwen35moe",
         "qwen3_5_moe_text": "qwen35moe", "glm_moe_dsa": "glm-dsa", "minimax_m2": "minimax-m2",
         "deepseek_v32": "deepseek32", "qwen3_next": "qwen3next", "gemma4": "gemma4", "gemma4_text": "gemma4",
         "glm4": "glm4", "llama4": "llama4", "llama4_text": "llama4", "jamba": "jamba", "nemotron_h": "nemotron_h"}
ARCHS.update({"deepseek_v4": "deepseek4", "minimax": "minimax-01"})     # graphs_dsv4, graphs_minimax01
ARCHS.update(dict.fromkeys(("minimax_m3", "minimax_m3_text", "minimax_m3_vl_text"), "minimax-m3"))   # graphs_minimax01
ARCHS["kimi_linear"] = "kimi-linear"     # tensors_kimi (kimi-k3 by its config: tensors_kimi.kimi_arch)
ARCHS.update({"falcon": "falcon", "gpt2": "gpt2", "gpt_neox": "gptneox"})     # graphs_classic.CLASSIC
ARCHS.update({"gemma3n": "gemma3n", "gemma3n_text": "gemma3n"})     # graphs_gemma3n.GEMMA3N


def field(model: Model, name: str, default=None):
    """A config field, from text_config where the config nests it (Qwen3.5's)."""
    cfg = model.config or {}
    text = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else {}
    value = text.get(name, cfg.get(name))  # type: ignore[union-attr]  # text is a dict: the isinstance above
    return default if value is None else value


def need(model: Model, name: str) -> int:
    value = field(model, name)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{model.name}: config field {name!r} is {value!r}; llama.cpp's "
                         f"{ARCHS[model.model_type]} tensors need it as a positive integer")
    return value


def uniform_full(layers) -> bool:
    """Every layer full attention without a window, with the first layer's KV heads and head size (K as wide as V): the
    one cache and attention the graphs_* modules that ask this build for every layer."""
    first = layers[0]
    return not any(str(layer.kind) != "full" or layer.window or (layer.kv_heads, layer.head_dim_k, layer.head_dim_v)
                   != (first.kv_heads, first.head_dim_k, first.head_dim_k) for layer in layers)

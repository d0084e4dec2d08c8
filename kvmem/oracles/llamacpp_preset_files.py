"""The presets' GGUF files for the llama.cpp presets oracle (kvmem.oracles.llamacpp_presets), built
here because their real files cannot be downloaded: for a preset whose llama.cpp tensors kvmem lays
out (kvmem.engines.llamacpp.tensors.synthesised_tensors), a sparse GGUF with the preset's real
shapes (hidden size, layers, heads, head dims, FFN and expert widths, vocabulary) and the metadata
convert_hf_to_gguf.py writes for the architecture (conversion/*.py set_gguf_parameters; the keys
the architecture's load_arch_hparams reads, src/models/<arch>.cpp), all-zero data (the file is
truncated to its size: nothing is written). ``preset_cases`` says which presets and formats run.
"""

from __future__ import annotations

from ..catalog import get_model, list_models
from ..model import Model
from .llamacpp_buffers import write_sparse

__all__ = ["ARCH", "FTYPES", "preset_cases", "write_gguf"]

# kvmem model_type -> llama.cpp architecture (llama-arch.cpp LLM_ARCH_NAMES); convert_hf_to_gguf.py
# writes Mistral (MistralForCausalLM) and Mixtral as "llama" (conversion/llama.py LlamaModel)
ARCH = {"llama": "llama", "mistral": "llama", "mixtral": "llama", "qwen2": "qwen2", "qwen3": "qwen3",
        "qwen3_moe": "qwen3moe", "gemma2": "gemma2", "gemma3": "gemma3", "gemma3_text": "gemma3", "phi3": "phi3"}
# include/llama.h llama_ftype
FTYPES = {"q4_k_m": 15, "q5_k_m": 17, "q6_k": 18, "q8_0": 7, "q4_0": 2}


def preset_cases() -> tuple[list[tuple[str, str]], dict[str, str]]:
    """([(preset, weight format)], {preset: why skipped}): q4_k_m for every preset kvmem lays out for
    an architecture written here, q8_0 as well for the smaller ones of each family, q5_k_m / q6_k /
    q4_0 for a few (the quantiser's other mixes). Skipped: what
    synthesised_tensors refuses (MLA, linear/SSM, shared-KV and chunked layers, no FFN width, and
    gpt_neox / gpt_oss / glm4_moe, whose llama-style layout llama.cpp's loader refused here)."""
    from ..engines.llamacpp.tensors import synthesised_tensors
    cases, skipped = [], {}
    q8 = {"llama-3.2-1b", "qwen2.5-0.5b", "qwen3-0.6b", "gemma-3-1b", "gemma-2-2b", "phi-3-mini-4k", "mixtral-8x7b",
          "qwen3-30b-a3b"}
    more = {"llama-3.1-8b": ("q5_k_m", "q6_k", "q4_0"), "llama-3.3-70b": ("q5_k_m",), "mixtral-8x7b": ("q5_k_m",),
            "qwen3-30b-a3b": ("q5_k_m",), "gemma-3-27b": ("q5_k_m", "q4_0"), "qwen2.5-72b": ("q5_k_m",),
            "phi-4": ("q5_k_m",)}
    for name in list_models():
        model = get_model(name)
        try:
            synthesised_tensors(model, "q4_k_m")
        except ValueError as error:
            skipped[name] = f"kvmem refuses: {error}"
            continue
        if model.model_type not in ARCH:
            skipped[name] = f"no llama.cpp GGUF writer here for model_type {model.model_type!r}"
            continue
        cases.append((name, "q4_k_m"))
        if name in q8:
            cases.append((name, "q8_0"))
        cases.extend((name, fmt) for fmt in more.get(name, ()))
    return cases, skipped


def _field(model: Model, name: str, default=None):
    cfg = model.config or {}
    text = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else {}
    value = cfg.get(name, text.get(name))
    return default if value is None else value


def _source_type(name: str, ne: tuple) -> str:
    """The type convert_hf_to_gguf.py writes a tensor in with --outtype f16: F32 for 1-D tensors and
    norms, and for the router (FFN_GATE_INP is in the "always in float32" list); F16 otherwise."""
    if len(ne) == 1 or name.endswith("_norm.weight") or ".ffn_gate_inp." in name:
        return "F32"
    return "F16"


def write_gguf(model: Model, weight_format: str, path: str, *, source: bool = False) -> list:
    """Write ``model``'s GGUF in ``weight_format`` (kvmem's tensor list and types; ``source``: the
    F16/F32 file convert_hf_to_gguf.py writes, for the quantiser) to ``path``; returns the tensors."""
    import gguf

    from ..engines.llamacpp.tensors import synthesised_tensors

    arch = ARCH[model.model_type]
    tensors = synthesised_tensors(model, weight_format)
    first = model.layers[0]
    facts = model.facts
    moe = facts.moe
    w = gguf.GGUFWriter(path, arch)
    w.add_context_length(model.max_position_embeddings or 4096)
    w.add_embedding_length(model.hidden_size)
    w.add_block_count(model.num_layers)
    w.add_feed_forward_length(facts.intermediate_size or (moe.intermediate_size if moe else 0))
    w.add_head_count(model.num_attention_heads)
    w.add_head_count_kv(first.kv_heads)
    w.add_key_length(first.head_dim_k)
    w.add_value_length(first.head_dim_v)
    w.add_rope_dimension_count(first.head_dim_k)
    w.add_rope_freq_base(float(_field(model, "rope_theta", 10000.0)))
    w.add_layer_norm_rms_eps(float(_field(model, "rms_norm_eps", 1e-6)))
    w.add_vocab_size(facts.vocab_size)
    w.add_tokenizer_model("none")
    w.add_file_type(1 if source else FTYPES.get(weight_format, 1))
    if moe is not None:
        w.add_expert_count(moe.experts)
        w.add_expert_used_count(moe.top_k)
        if arch in ("qwen3moe", "gpt-oss", "glm4moe"):
            w.add_expert_feed_forward_length(moe.intermediate_size)
        if arch == "glm4moe":             # conversion/glm.py Glm4MoeModel
            w.add_expert_shared_count(int(_field(model, "n_shared_experts", 1)))
            w.add_leading_dense_block_count(int(_field(model, "first_k_dense_replace", 1)))
    if arch == "gptneox":                 # conversion/gptneox.py
        w.add_layer_norm_eps(float(_field(model, "layer_norm_eps", 1e-5)))
        w.add_parallel_residual(bool(_field(model, "use_parallel_residual", True)))
    windows = {layer.window for layer in model.layers if layer.window}
    if arch in ("gemma2", "gemma3", "gpt-oss") and windows:
        w.add_sliding_window(windows.pop())       # conversion/gemma.py: add_sliding_window
    if arch == "phi3" and _field(model, "sliding_window"):
        w.add_sliding_window(_field(model, "sliding_window"))   # conversion/phi.py; llama.cpp disables it
    if arch == "gemma2":
        w.add_attn_logit_softcapping(float(_field(model, "attn_logit_softcapping", 50.0)))
        w.add_final_logit_softcapping(float(_field(model, "final_logit_softcapping", 30.0)))
    write_sparse(w, [(t.name, t.shape, _source_type(t.name, t.shape) if source else t.dtype) for t in tensors])
    return list(tensors)

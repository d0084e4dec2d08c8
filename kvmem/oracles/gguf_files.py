"""Tiny GGUF files with a model's real attention shapes, for llama.cpp to load with no_alloc.

Written with the ``gguf`` package (gguf-py, the writer llama.cpp's own converter uses): the
hyper-parameters llama.cpp reads for the architecture (llama-arch.cpp LLM_KV names), every
tensor its loader requires (llama-model.cpp load_tensors) with the true attention shapes, a
tiny vocabulary and FFN, and a sparse data section (the file is truncated to its size, so
nothing is written: llama.cpp with no_alloc reads only the header).
"""

from __future__ import annotations

from ..layer import SLIDING
from ..model import Model
from ..units import pad

__all__ = ["ARCHES", "write_gguf"]

# kvmem model_type -> llama.cpp architecture name (llama-arch.cpp LLM_ARCH_NAMES)
ARCHES = {"llama": "llama", "mistral": "llama", "qwen2": "qwen2", "qwen3": "qwen3", "gemma2": "gemma2",
          "gemma3_text": "gemma3", "gemma3": "gemma3", "deepseek_v2": "deepseek2", "deepseek_v3": "deepseek2",
          "deepseek_v32": "deepseek32", "mamba": "mamba", "falcon_mamba": "mamba", "glm_moe_dsa": "glm-dsa",
          "lfm2": "lfm2", "minimax": "minimax-01", "granitemoehybrid": "granitehybrid", "bamba": "granitehybrid"}
_N_VOCAB = 32
_N_FF = 32


def _field(model: Model, name: str, default=None):
    cfg = model.config or {}
    text = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else {}
    return cfg.get(name, text.get(name, default))  # type: ignore[union-attr]  # text: a dict (isinstance above)


def write_gguf(model: Model, path: str) -> str:
    """Write ``model``'s llama.cpp GGUF (architecture from ARCHES) to ``path``; returns the arch."""
    import gguf
    import numpy as np

    arch = ARCHES.get(model.model_type)
    if arch is None:
        raise ValueError(f"no llama.cpp architecture for model_type {model.model_type!r}; known: "
                         f"{', '.join(sorted(ARCHES))}")
    layers = model.layers
    n_layer, n_embd = len(layers), model.hidden_size
    n_head = model.num_attention_heads
    writer = gguf.GGUFWriter(path, arch)
    w = writer
    w.add_context_length(model.max_position_embeddings or 4096)
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(_N_FF)
    w.add_head_count(n_head)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_vocab_size(_N_VOCAB)
    w.add_tokenizer_model("none")
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)

    tensors = []   # (name, ggml ne) ; F32 for 1-D, F16 otherwise

    def t(name, *ne):
        tensors.append((name, ne))

    t("token_embd.weight", n_embd, _N_VOCAB)
    # LFM2's final norm is named token_embd_norm (llama-arch.cpp LLM_TENSOR_OUTPUT_NORM_LFM2)
    t("token_embd_norm.weight" if arch == "lfm2" else "output_norm.weight", n_embd)
    if arch != "gemma2":   # gemma2 ties its output to token_embd and loads no output.weight
        t("output.weight", n_embd, _N_VOCAB)
    if arch == "lfm2":
        # conversion/lfm2.py: head_count_kv per layer, 0 on the short-convolution layers (src/models/lfm2.cpp
        # load_arch_hparams: is_recr where n_head_kv == 0); attention n_embd wide, head_dim n_embd / n_head
        conv = [layer.state is not None for layer in layers]
        kv = [0 if c else layer.kv_heads for c, layer in zip(conv, layers, strict=True)]
        dk = n_embd // n_head
        w.add_head_count_kv(kv)
        w.add_uint32(f"{arch}.shortconv.l_cache", next(layer.state.conv_kernel for layer in layers if layer.state))
        for i in range(n_layer):
            b = f"blk.{i}."
            t(b + "attn_norm.weight", n_embd)
            if conv[i]:
                t(b + "shortconv.conv.weight", next(x.state.conv_kernel for x in layers if x.state), n_embd)
                t(b + "shortconv.in_proj.weight", n_embd, 3 * n_embd)
                t(b + "shortconv.out_proj.weight", n_embd, n_embd)
            else:
                t(b + "attn_q_norm.weight", dk)
                t(b + "attn_k_norm.weight", dk)
                t(b + "attn_q.weight", n_embd, n_embd)
                t(b + "attn_k.weight", n_embd, kv[i] * dk)
                t(b + "attn_v.weight", n_embd, kv[i] * dk)
                t(b + "attn_output.weight", n_embd, n_embd)
            _ffn(t, b, n_embd)
    elif arch == "granitehybrid":
        # conversion/granite.py GraniteHybridModel and src/models/granite-hybrid.cpp load_arch_tensors: Mamba2 layers
        # where head_count_kv is 0, d_inner = 2 x n_embd (asserted), dt rank = the Mamba heads
        d_inner, d_conv = 2 * n_embd, _field(model, "mamba_d_conv")
        d_state, n_group, n_ssm = _field(model, "mamba_d_state"), _field(model, "mamba_n_groups"), _field(model,
                                                                                                         "mamba_n_heads")
        attn = [layer for layer in layers if layer.caches_tokens]
        dk = attn[0].head_dim_k if attn else n_embd // n_head
        kv = [0 if layer.state is not None else layer.kv_heads for layer in layers]
        w.add_head_count_kv(kv)
        w.add_key_length(dk)
        w.add_value_length(dk)
        w.add_rope_dimension_count(dk)
        w.add_ssm_conv_kernel(d_conv)
        w.add_ssm_inner_size(d_inner)
        w.add_ssm_state_size(d_state)
        w.add_ssm_time_step_rank(n_ssm)
        w.add_ssm_group_count(n_group)
        for i in range(n_layer):
            b = f"blk.{i}."
            t(b + "attn_norm.weight", n_embd)
            if kv[i] == 0:
                t(b + "ssm_in.weight", n_embd, 2 * d_inner + 2 * n_group * d_state + n_ssm)
                t(b + "ssm_conv1d.weight", d_conv, d_inner + 2 * n_group * d_state)
                t(b + "ssm_conv1d.bias", d_inner + 2 * n_group * d_state)
                t(b + "ssm_dt.bias", n_ssm)
                t(b + "ssm_a", 1, n_ssm)
                t(b + "ssm_d", 1, n_ssm)
                t(b + "ssm_norm.weight", d_inner // n_group, n_group)
                t(b + "ssm_out.weight", d_inner, n_embd)
            else:
                t(b + "attn_q.weight", n_embd, n_head * dk)
                t(b + "attn_k.weight", n_embd, kv[i] * dk)
                t(b + "attn_v.weight", n_embd, kv[i] * dk)
                t(b + "attn_output.weight", n_head * dk, n_embd)
            _ffn(t, b, n_embd)
    elif arch == "minimax-01":
        # src/models/minimax-01.cpp: lightning layers ((il + 1) % 8 != 0, no layer list in the GGUF) hold a fused
        # attn_qkv, attn_norm_2 and attn_gate; the full layers Q/K/V; every layer two experts
        dk = _field(model, "head_dim") or n_embd // n_head   # key_length: the lightning layers' head size too
        kv_max = max((layer.kv_heads for layer in layers if layer.caches_tokens), default=1)
        w.add_head_count_kv(kv_max)
        w.add_key_length(dk)
        w.add_value_length(dk)
        w.add_rope_dimension_count(dk)
        w.add_residual_scale(1.0)
        w.add_expert_count(2)
        w.add_expert_used_count(1)
        for i in range(n_layer):
            b = f"blk.{i}."
            t(b + "attn_norm.weight", n_embd)
            if layers[i].state is not None:
                t(b + "attn_norm_2.weight", dk * n_head)
                t(b + "attn_qkv.weight", n_embd, 3 * dk * n_head)
                t(b + "attn_gate.weight", n_embd, dk * n_head)
            else:
                t(b + "attn_q.weight", n_embd, dk * n_head)
                t(b + "attn_k.weight", n_embd, kv_max * dk)
                t(b + "attn_v.weight", n_embd, kv_max * dk)
            t(b + "attn_output.weight", dk * n_head, n_embd)
            t(b + "ffn_norm.weight", n_embd)
            t(b + "ffn_gate_inp.weight", n_embd, 2)
            t(b + "ffn_gate_exps.weight", n_embd, _N_FF, 2)
            t(b + "ffn_down_exps.weight", _N_FF, n_embd, 2)
            t(b + "ffn_up_exps.weight", n_embd, _N_FF, 2)
    elif arch == "mamba":
        # conversion/mamba.py set_gguf_parameters and src/models/mamba.cpp load_arch_tensors (d_inner = 2 x n_embd)
        state = layers[0].state
        d_inner, d_conv, d_state = state.conv_channels, state.conv_kernel, state.ssm_elements // state.conv_channels  # type: ignore[union-attr]  # mamba: every layer a state
        dt_rank = -(n_embd // -16)
        w.add_ssm_conv_kernel(d_conv)
        w.add_ssm_inner_size(d_inner)
        w.add_ssm_state_size(d_state)
        w.add_ssm_time_step_rank(dt_rank)
        w.add_ssm_dt_b_c_rms(model.model_type == "falcon_mamba")
        for i in range(n_layer):
            b = f"blk.{i}."
            t(b + "attn_norm.weight", n_embd)
            t(b + "ssm_in.weight", n_embd, 2 * d_inner)
            t(b + "ssm_conv1d.weight", d_conv, d_inner)
            t(b + "ssm_conv1d.bias", d_inner)
            t(b + "ssm_x.weight", d_inner, dt_rank + 2 * d_state)
            t(b + "ssm_dt.weight", dt_rank, d_inner)
            t(b + "ssm_dt.bias", d_inner)
            t(b + "ssm_a", d_state, d_inner)
            t(b + "ssm_d", d_inner)
            t(b + "ssm_out.weight", d_inner, n_embd)
    elif arch in ("deepseek2", "deepseek32", "glm-dsa"):
        first = layers[0]
        nope, rope = _field(model, "qk_nope_head_dim"), first.qk_rope_head_dim
        v_dim, rank = _field(model, "v_head_dim"), first.kv_lora_rank
        w.add_head_count_kv(1)
        w.add_key_length(rank + rope)            # the MLA split cache: K = latent + rope
        w.add_value_length(rank)
        w.add_key_length_mla(nope + rope)
        w.add_value_length_mla(v_dim)
        w.add_kv_lora_rank(rank)
        w.add_rope_dimension_count(rope)
        w.add_leading_dense_block_count(n_layer)
        w.add_expert_count(4)
        w.add_expert_used_count(2)
        w.add_expert_shared_count(1)
        w.add_expert_feed_forward_length(_N_FF)
        w.add_expert_weights_scale(1.0)
        # llama-model.cpp: 26- and 27-layer deepseek2 GGUFs are "lite" (a plain attn_q); the others
        # read q_lora_rank and its three tensors (the query path holds no cache: 32 when absent)
        lite = n_layer in (26, 27) and arch == "deepseek2"
        q_lora = _field(model, "q_lora_rank") or 32
        if not lite:
            w.add_q_lora_rank(q_lora)
        index_dim = max(layer.index_head_dim for layer in layers)
        index_heads = _field(model, "index_n_heads") or 1
        full = [True] * n_layer
        if arch in ("deepseek32", "glm-dsa"):   # deepseek32.cpp / glm-dsa.cpp load_arch_hparams: the DSA keys
            w.add_indexer_head_count(index_heads)
            w.add_indexer_key_length(index_dim)
            w.add_indexer_top_k(_field(model, "index_topk") or 64)
            w.add_expert_gating_func(gguf.ExpertGatingFuncType.SIGMOID)
            types = _field(model, "indexer_types")
            if arch == "glm-dsa" and isinstance(types, list):   # conversion/glm.py L380-L382
                full = [kind == "full" for kind in types]
                w.add_array(f"{arch}.attention.indexer.types", full)
        for i in range(n_layer):
            b = f"blk.{i}."
            t(b + "attn_norm.weight", n_embd)
            if lite:
                t(b + "attn_q.weight", n_embd, n_head * (nope + rope))
            else:
                t(b + "attn_q_a.weight", n_embd, q_lora)
                t(b + "attn_q_a_norm.weight", q_lora)
                t(b + "attn_q_b.weight", q_lora, n_head * (nope + rope))
            t(b + "attn_kv_a_mqa.weight", n_embd, rank + rope)
            t(b + "attn_kv_a_norm.weight", rank)
            t(b + "attn_k_b.weight", nope, rank, n_head)
            t(b + "attn_v_b.weight", rank, v_dim, n_head)
            t(b + "attn_output.weight", n_head * v_dim, n_embd)
            if arch == "deepseek32" or (arch == "glm-dsa" and full[i]):   # the DSA indexer's tensors
                t(b + "indexer.k_norm.weight", index_dim)
                t(b + "indexer.k_norm.bias", index_dim)
                t(b + "indexer.proj.weight", n_embd, index_heads)
                t(b + "indexer.attn_k.weight", n_embd, index_dim)
                t(b + "indexer.attn_q_b.weight", q_lora, index_heads * index_dim)
            _ffn(t, b, n_embd)
    else:
        kv_sizes = {layer.kv_heads for layer in layers}
        head_k = {layer.head_dim_k for layer in layers}
        head_v = {layer.head_dim_v for layer in layers}
        if len(kv_sizes) != 1 or len(head_k) != 1 or len(head_v) != 1:
            raise ValueError(f"{model.name}: per-layer KV heads or head dims differ; the GGUF writer here "
                             "takes one value per model")
        n_head_kv, dk, dv = kv_sizes.pop(), head_k.pop(), head_v.pop()
        w.add_head_count_kv(n_head_kv)
        w.add_key_length(dk)
        w.add_value_length(dv)
        w.add_rope_dimension_count(dk)
        windows = {layer.window for layer in layers if layer.kind == SLIDING}
        if arch in ("gemma2", "gemma3") and windows:
            w.add_sliding_window(windows.pop())
        if arch == "gemma3":
            pattern = _field(model, "sliding_window_pattern", 6)
            w.add_sliding_window_pattern(pattern)
        if arch == "gemma2":
            w.add_attn_logit_softcapping(50.0)
            w.add_final_logit_softcapping(30.0)
        for i in range(n_layer):
            b = f"blk.{i}."
            t(b + "attn_norm.weight", n_embd)
            t(b + "attn_q.weight", n_embd, n_head * dk)
            t(b + "attn_k.weight", n_embd, n_head_kv * dk)
            t(b + "attn_v.weight", n_embd, n_head_kv * dv)
            t(b + "attn_output.weight", n_head * dv, n_embd)
            if arch == "qwen2":
                t(b + "attn_q.bias", n_head * dk)
                t(b + "attn_k.bias", n_head_kv * dk)
                t(b + "attn_v.bias", n_head_kv * dv)
            if arch in ("qwen3", "gemma3"):
                t(b + "attn_q_norm.weight", dk)
                t(b + "attn_k_norm.weight", dk)
            if arch in ("gemma2", "gemma3"):
                t(b + "post_attention_norm.weight", n_embd)
                t(b + "post_ffw_norm.weight", n_embd)
            _ffn(t, b, n_embd)
    for name, ne in tensors:
        shape = tuple(reversed(ne))
        if len(ne) == 1:
            w.add_tensor_info(name, shape, np.dtype(np.float32), 4 * ne[0])
        else:
            count = 1
            for x in ne:
                count *= x
            w.add_tensor_info(name, shape, np.dtype(np.float16), 2 * count)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    fout = w.fout[0]  # type: ignore[index]  # write_header_to_file opened it
    fout.flush()
    start = pad(fout.tell(), w.data_alignment)
    size = sum(pad(ti.nbytes, w.data_alignment) for ti in w.tensors[0].values())
    fout.truncate(start + size)   # sparse: llama.cpp checks the size, no_alloc never reads the data
    w.close()
    return arch


def _ffn(t, b: str, n_embd: int) -> None:
    t(b + "ffn_norm.weight", n_embd)
    t(b + "ffn_gate.weight", n_embd, _N_FF)
    t(b + "ffn_up.weight", n_embd, _N_FF)
    t(b + "ffn_down.weight", _N_FF, n_embd)

"""The GGUF convert_hf_to_gguf would write for a family laid out by kvmem.engines.llamacpp.arch_tensors
(gpt-oss, glm4moe, deepseek2 with MLA, glm-dsa, deepseek32, minimax-m2, qwen35/qwen35moe/qwen3next, gemma4,
qwen2moe): the metadata its set_gguf_parameters writes and load_arch_hparams reads, and kvmem's tensors,
sparse on disk. Used by tests/oracles/test_llamacpp_layout_families_oracle.py (the layouts) and
kvmem.oracles.llamacpp_graphs (the compute buffers of the deepseek2 and gpt-oss graphs).
"""

from __future__ import annotations

import re

from ..engines.llamacpp.arch_fields import ARCHS, field
from ..engines.llamacpp.quant_mix import FTYPES
from ..engines.llamacpp.tensors import GGUF_ARCH, GPT_OSS_EXPERTS, source_type, synthesised_tensors
from ..model import Model
from .llamacpp_buffers import write_sparse

__all__ = ["write_metadata", "write_family", "mtp_layers"]


def mtp_layers(model: Model, arch: str) -> int:
    """The MTP layers convert_hf_to_gguf adds to block_count without --no-mtp: num_nextn_predict_layers for
    deepseek32 (conversion/deepseek.py L472-L476), glm-dsa (conversion/glm.py L328-L333) and glm4moe
    (L117-L122), mtp_num_hidden_layers for qwen35/qwen35moe/qwen3next (conversion/qwen.py L296-L306, _QwenMtpMixin);
    none for deepseek2 (DeepseekV2Model keeps num_hidden_layers) and the others."""
    if arch in ("deepseek32", "glm-dsa", "glm4moe"):
        return field(model, "num_nextn_predict_layers", 0) or 0
    if arch in ("qwen35", "qwen35moe", "qwen3next"):
        return field(model, "mtp_num_hidden_layers", 0) or 0
    return 0


def write_metadata(w, model: Model, arch: str, fmt: str, *, mtp: bool = False) -> None:  # noqa: C901
    """The keys convert_hf_to_gguf writes for ``arch`` (conversion/{gpt_oss,glm,deepseek,qwen}.py
    set_gguf_parameters) that load_arch_hparams reads. ``mtp``: the MTP layers count in block_count and
    nextn_predict_layers is written, as the converter writes them by default; without it, as its --no-mtp writes
    (the default here: tests/sources/test_gguf_arches.py adds them through its own writer proxy). kvmem's tensors
    are the trunk's either way: llama.cpp loads deepseek32/glm-dsa/glm4moe files without the MTP tensors as
    trunk only; qwen35's loader asks for them, so a qwen35 file with ``mtp`` does not load."""
    moe, first = model.facts.moe, model.layers[-1]
    n_mtp = mtp_layers(model, arch) if mtp else 0
    w.add_context_length(model.max_position_embeddings or 4096)
    w.add_embedding_length(model.hidden_size)
    w.add_block_count(model.num_layers + n_mtp)
    if n_mtp:
        w.add_nextn_predict_layers(n_mtp)
    w.add_feed_forward_length(field(model, "intermediate_size", 0) or (moe.intermediate_size if moe else 0))
    w.add_head_count(model.num_attention_heads)
    if arch == "gemma4":     # conversion/gemma.py Gemma4Model: per-layer KV heads and head dims
        w.add_head_count_kv([layer.kv_heads for layer in model.layers])
    elif arch in ("deepseek2", "glm-dsa", "deepseek32"):
        # conversion/deepseek.py DeepseekV2Model.set_gguf_parameters L325-L326: MLA is written as MQA (one KV
        # head); with the config's num_key_value_heads the cache is n_head x wider than the absorbed K that
        # build_attn stores, and context creation aborts (ggml.c L4014 ggml_set_rows a->ne[0] == b->ne[0])
        w.add_head_count_kv(1)
    else:
        w.add_head_count_kv(field(model, "num_key_value_heads", model.num_attention_heads))
    w.add_layer_norm_rms_eps(float(field(model, "rms_norm_eps", 1e-6)))
    w.add_rope_freq_base(10000.0)
    w.add_vocab_size(model.facts.vocab_size)
    w.add_tokenizer_model("none")
    w.add_file_type(FTYPES[fmt][0])
    scoring = field(model, "scoring_func")     # conversion/base.py L1530-L1539, every TextModel
    if scoring is not None:
        # src/llama-hparams.h L17-L21 LLAMA_EXPERT_GATING_FUNC_TYPE_*: the installed gguf-py may predate SQRTSOFTPLUS
        gating = {"softmax": 1, "sigmoid": 2, "sqrtsoftplus": 4}
        if scoring not in gating:
            raise ValueError(f"scoring_func {scoring!r}: convert_hf_to_gguf raises \"Unsupported expert score "
                             "gating function value\" (conversion/base.py L1538-L1539)")
        w.add_uint32(f"{arch}.expert_gating_func", gating[scoring])
    if moe is not None:
        w.add_expert_count(moe.experts)
        w.add_expert_used_count(field(model, "top_k_experts", moe.top_k))
        w.add_expert_feed_forward_length(moe.intermediate_size)
    if arch in ("deepseek2", "glm-dsa", "deepseek32"):
        kv_lora, rope = field(model, "kv_lora_rank"), field(model, "qk_rope_head_dim")
        w.add_leading_dense_block_count(field(model, "first_k_dense_replace", 0))
        if field(model, "q_lora_rank"):
            w.add_q_lora_rank(field(model, "q_lora_rank"))
        w.add_kv_lora_rank(kv_lora)
        w.add_key_length(kv_lora + rope)
        w.add_value_length(kv_lora)
        w.add_key_length_mla(field(model, "qk_nope_head_dim") + rope)
        w.add_value_length_mla(field(model, "v_head_dim"))
        w.add_rope_dimension_count(rope)
        w.add_expert_shared_count(field(model, "n_shared_experts", 0))
        w.add_expert_weights_scale(float(field(model, "routed_scaling_factor", 1.0)))
        if field(model, "norm_topk_prob"):      # conversion/deepseek.py L370-L371
            w.add_expert_weights_norm(True)
        if field(model, "n_group") is not None:     # conversion/base.py L1523-L1527
            w.add_expert_group_count(field(model, "n_group"))
        if field(model, "topk_group") is not None:
            w.add_expert_group_used_count(field(model, "topk_group"))
        if arch in ("glm-dsa", "deepseek32"):
            w.add_indexer_head_count(field(model, "index_n_heads"))
            w.add_indexer_key_length(field(model, "index_head_dim"))
            w.add_indexer_top_k(field(model, "index_topk"))
            types = field(model, "indexer_types")
            if arch == "glm-dsa" and types is not None:    # conversion/glm.py L380-L382 (gguf-py: add_indexer_types)
                w.add_array(f"{arch}.attention.indexer.types", [t == "full" for t in types])
        return
    if arch == "gemma4":
        # conversion/gemma.py Gemma4Model.set_gguf_parameters L696-L701, L729-L733: key/value_length the full
        # layers' head dim (global_head_dim), *_swa head_dim (whichever layer comes last), rope dims the full head
        # dim and head_dim x rope_parameters' top-level partial_rotary_factor (absent in the published configs,
        # whose factors sit under full_attention: 1.0)
        full_hd = next(layer.head_dim_k for layer in model.layers if layer.window == 0)
        swa = [layer.window > 0 for layer in model.layers]
        w.add_key_length(full_hd)
        w.add_value_length(full_hd)
        w.add_sliding_window_pattern(swa)
        w.add_sliding_window(field(model, "sliding_window"))
        w.add_key_length_swa(field(model, "head_dim"))
        w.add_value_length_swa(field(model, "head_dim"))
        w.add_embedding_length_per_layer_input(0)
        w.add_shared_kv_layers(0)
        w.add_rope_dimension_count(full_hd)
        w.add_rope_dimension_count_swa(field(model, "head_dim"))
        return
    w.add_key_length(first.head_dim_k)
    w.add_value_length(first.head_dim_v)
    w.add_rope_dimension_count(field(model, "rotary_dim", first.head_dim_k))
    if arch == "gpt-oss":
        w.add_sliding_window(field(model, "sliding_window", 128))     # conversion/gpt_oss.py L130
    if arch == "glm4moe":
        w.add_expert_shared_count(field(model, "n_shared_experts", 1))
        w.add_leading_dense_block_count(field(model, "first_k_dense_replace", 1))
        if field(model, "routed_scaling_factor") is not None:    # conversion/glm.py L174-L180
            w.add_expert_weights_scale(float(field(model, "routed_scaling_factor")))
        if field(model, "norm_topk_prob") is not None:
            w.add_expert_weights_norm(bool(field(model, "norm_topk_prob")))
        if field(model, "n_group") is not None:     # conversion/base.py L1523-L1527, every TextModel
            w.add_expert_group_count(field(model, "n_group"))
        if field(model, "topk_group") is not None:
            w.add_expert_group_used_count(field(model, "topk_group"))
    if arch == "qwen2moe" and moe is not None:
        w.add_expert_shared_feed_forward_length(moe.shared_intermediate_size)
    if arch in ("qwen35", "qwen35moe", "qwen3next"):
        d_state, v_heads = field(model, "linear_key_head_dim"), field(model, "linear_num_value_heads")
        w.add_ssm_conv_kernel(field(model, "linear_conv_kernel_dim"))
        w.add_ssm_inner_size(field(model, "linear_value_head_dim") * v_heads)     # conversion/qwen.py L381
        w.add_ssm_state_size(d_state)
        w.add_ssm_time_step_rank(v_heads)
        w.add_ssm_group_count(field(model, "linear_num_key_heads"))
        w.add_full_attention_interval(field(model, "full_attention_interval", 4))
        w.add_rope_dimension_sections([11, 11, 10, 0])
        if moe is not None:
            w.add_expert_shared_feed_forward_length(moe.shared_intermediate_size)


def write_family(model: Model, fmt: str, path: str, *, source: bool, per_head_mla: bool = False) -> list:
    """``per_head_mla``: a deepseek2 GGUF as converters wrote it before the MLA split (llama.cpp PR #12801): one
    attn_kv_b [kv_lora_rank, n_head x (nope + v_head_dim)] for attn_k_b and attn_v_b, no key/value_length_mla,
    key_length nope + rope, value_length v_head_dim, one KV head per head (deepseek2.cpp L114-L120 reads it)."""
    import gguf
    arch = ARCHS.get(model.model_type) or GGUF_ARCH.get(model.model_type, model.model_type)
    tensors = synthesised_tensors(model, fmt)
    rows = [(t.name, t.shape, _converted(arch, t) if source else t.dtype) for t in tensors]
    writer = gguf.GGUFWriter(path, arch)
    w = _PerHead(writer, model) if per_head_mla else writer
    if per_head_mla:
        n_head, nope, v_dim = model.num_attention_heads, field(model, "qk_nope_head_dim"), field(model, "v_head_dim")
        out = []
        for name, shape, dtype in rows:
            if name.endswith(".attn_v_b.weight"):
                continue
            if name.endswith(".attn_k_b.weight"):
                name, shape = name.replace("attn_k_b", "attn_kv_b"), (field(model, "kv_lora_rank"),
                                                                      n_head * (nope + v_dim))
                dtype = "F16" if dtype in ("F32", "BF16") else dtype
            out.append((name, shape, dtype))
        rows = out
    # a list with MTP-block tensors (arch_tensors._mtp_loaded: glm-dsa/deepseek32) is the default converter's file:
    # the block counted in block_count (llama.cpp loads it trunk-only: no nextn.eh_proj)
    write_metadata(w, model, arch, fmt, mtp=any(t.name.startswith(f"blk.{model.num_layers}.") for t in tensors))
    write_sparse(writer, rows)
    return list(tensors)


class _PerHead:
    """A GGUFWriter whose MLA keys are those of a GGUF before the MLA split: per-head K and V lengths, no
    key/value_length_mla, head_count_kv = head_count."""

    def __init__(self, writer, model: Model):
        self.writer, self.model = writer, model

    def add_key_length_mla(self, _n):
        pass

    def add_value_length_mla(self, _n):
        pass

    def add_key_length(self, _n):
        self.writer.add_key_length(field(self.model, "qk_nope_head_dim") + field(self.model, "qk_rope_head_dim"))

    def add_value_length(self, _n):
        self.writer.add_value_length(field(self.model, "v_head_dim"))

    def add_head_count_kv(self, _n):
        self.writer.add_head_count_kv(self.model.num_attention_heads)

    def __getattr__(self, name):
        return getattr(self.writer, name)


def _converted(arch: str, t) -> str:
    """The type convert_hf_to_gguf --outtype f16 writes: gpt-oss's experts in the checkpoint's MXFP4."""
    if any(re.search(pattern, t.name) for pattern, _ in (GPT_OSS_EXPERTS if arch == "gpt-oss" else ())):
        return "MXFP4"
    return source_type(t.name, t.shape, "f16")

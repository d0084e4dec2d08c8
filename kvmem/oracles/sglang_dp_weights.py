"""SGLang 0.5.23's own attention, embedding, LM-head and dense-MLP layers, built on the meta device, as the judge of
the weights kvmem.engines.sglang.parallel puts on a GPU under attn_dp_size, --enable-dp-lm-head, --moe-dense-tp-size."""

from __future__ import annotations

from unittest import mock

from .report import Check
from .sglang_runtime import config_dir
from .sglang_runtime import load as _load_sglang

__all__ = ["ATTENTION_CLASSES", "QWEN2_MOE_CONFIG", "WEIGHT_MODELS", "MLP_CLASSES", "sglang_rank_bytes",
           "weights_case", "sglang_head_and_dense_bytes", "head_and_dense_case"]


# ---- the weights: SGLang's own attention layers and input embedding, built on the meta device ----------------
# For each architecture kvmem sizes under attn_dp_size with grouped-query attention, the model file's attention
# class and the VocabParallelEmbedding its model builds (use_attn_tp_group under DP attention), built for one rank
# with get_parallel().override(tp_size, attn_tp_size) on the meta device: the parameters one rank holds. What
# attn_dp_size adds to a GPU is the layers' attention and the embedding at attn_tp less the same at tp (the MLPs,
# experts and lm_head stay over tp: DP_ATTENTION in kvmem/engines/sglang/parallel.py cites where).
ATTENTION_CLASSES = {"Qwen3MoeForCausalLM": ("qwen3_moe", "Qwen3MoeAttention"),
                     "Qwen3ForCausalLM": ("qwen3", "Qwen3Attention"),
                     "Glm4MoeForCausalLM": ("glm4_moe", "Glm4MoeAttention"),
                     "GptOssForCausalLM": ("gpt_oss", "GptOssAttention"),
                     "Qwen2MoeForCausalLM": ("qwen2_moe", "Qwen2MoeAttention")}
# no preset has Qwen2MoeForCausalLM: Qwen1.5-MoE-A2.7B's published config.json (Qwen/Qwen1.5-MoE-A2.7B)
QWEN2_MOE_CONFIG = {
    "architectures": ["Qwen2MoeForCausalLM"], "model_type": "qwen2_moe", "hidden_size": 2048,
    "intermediate_size": 5632, "moe_intermediate_size": 1408, "shared_expert_intermediate_size": 5632,
    "num_experts": 60, "num_experts_per_tok": 4, "num_attention_heads": 16, "num_key_value_heads": 16,
    "num_hidden_layers": 24, "vocab_size": 151936, "max_position_embeddings": 8192, "rms_norm_eps": 1e-06,
    "rope_theta": 1000000.0, "tie_word_embeddings": False, "torch_dtype": "bfloat16", "decoder_sparse_step": 1,
    "norm_topk_prob": False, "hidden_act": "silu", "sliding_window": 32768, "use_sliding_window": False}
WEIGHT_MODELS = ("qwen3-235b-a22b", "qwen3-30b-a3b", "qwen3-32b", "qwen3-8b", "glm-4.5-air", "glm-4.7",
                 "gpt-oss-120b", "gpt-oss-20b")


class _Off:
    """get_exec() stand-in: every kernel switch off (the layers' parameters do not depend on them)."""

    def __getattr__(self, _name):
        return _Off()

    def __bool__(self):
        return False

    def __call__(self, *_a, **_k):
        return _Off()


def sglang_rank_bytes(cfg: dict, *, tp: int, attn_tp: int) -> tuple[int, int]:
    """(one attention layer's parameter bytes on a rank, the input embedding's bytes on a rank): SGLang's classes."""
    import importlib
    _load_sglang()
    import torch
    from sglang.srt.configs.model_config import ModelConfig
    from sglang.srt.layers.vocab_parallel_embedding import VocabParallelEmbedding
    from sglang.srt.runtime_context import get_parallel
    hf = ModelConfig(config_dir(cfg), trust_remote_code=False).hf_config
    module_name, class_name = ATTENTION_CLASSES[cfg["architectures"][0]]
    module = importlib.import_module(f"sglang.srt.models.{module_name}")
    kwargs = dict(hidden_size=hf.hidden_size, num_heads=hf.num_attention_heads, num_kv_heads=hf.num_key_value_heads,
                  layer_id=0)
    if class_name == "Qwen2MoeAttention":   # qwen2_moe.py Qwen2MoeDecoderLayer: getattr(config, "qkv_bias", True)
        kwargs.update(qkv_bias=getattr(hf, "qkv_bias", True))
    else:
        kwargs.update(head_dim=getattr(hf, "head_dim", None), attention_bias=getattr(hf, "attention_bias", False))
    if class_name == "Qwen3MoeAttention":
        kwargs.update(config=hf)
    if class_name == "GptOssAttention":
        kwargs.update(layer_type="full_attention")   # the sliding layers hold the same parameters
    if class_name == "Glm4MoeAttention":
        kwargs.update(use_qk_norm=getattr(hf, "use_qk_norm", False),
                      partial_rotary_factor=getattr(hf, "partial_rotary_factor", 0.5))
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)   # as SGLang's loader builds a bf16 model (set_default_torch_dtype)
    try:
        with get_parallel().override(tp_size=tp, attn_tp_size=attn_tp, attn_cp_size=1, tp_rank=0, attn_tp_rank=0,
                                     enable_cp_tp_group_sharing=False), torch.device("meta"), \
                mock.patch.object(module, "get_exec", lambda: _Off()):
            attention = getattr(module, class_name)(**kwargs)
            embedding = VocabParallelEmbedding(hf.vocab_size, hf.hidden_size, use_attn_tp_group=True)
    finally:
        torch.set_default_dtype(default)

    def size(layer):
        return sum(p.numel() * p.element_size() for p in layer.parameters())
    return size(attention), size(embedding)


def weights_case(model: str, *, tp: int, attn_dp: int, cfg: dict | None = None) -> Check:
    """What attn_dp_size adds to one GPU's weights: kvmem's rule beside SGLang's own layers (bf16 attention);
    ``cfg``: a config.json for a model no preset has (``model`` then only names it)."""
    from kvmem.catalog import get_model, preset
    from kvmem.engines.sglang.dp_weights import weights_per_device
    from kvmem.model import Model
    from kvmem.sizing.setup import model_weights
    m = Model.from_hf_config(cfg, name=model) if cfg is not None else get_model(model)
    cfg = cfg if cfg is not None else preset(model)["config"]
    w = model_weights(m, "auto" if m.checkpoint is None and m.params_total else "bf16")
    ours = (weights_per_device(w, m, tp=tp, pp=1, options={"attn_dp_size": attn_dp})[0]
            - weights_per_device(w, m, tp=tp, pp=1, options={})[0])
    wide, narrow = sglang_rank_bytes(cfg, tp=tp, attn_tp=tp // attn_dp), sglang_rank_bytes(cfg, tp=tp, attn_tp=tp)
    layers = sum(1 for layer in m.layers if layer.kind.per_head)
    theirs = layers * (wide[0] - narrow[0]) + wide[1] - narrow[1]
    return Check(f"{model} tp{tp} attn_dp{attn_dp}", "attn_dp_weight_bytes", ours, theirs)


MLP_CLASSES = {"DeepseekV3ForCausalLM": ("deepseek_v2", "DeepseekV2MLP"),
               "DeepseekV2ForCausalLM": ("deepseek_v2", "DeepseekV2MLP"),
               "Glm4MoeForCausalLM": ("glm4_moe", "Glm4MoeMLP")}


def sglang_head_and_dense_bytes(cfg: dict, *, tp: int, attn_tp: int, dp_head: bool, dense_replicated: bool) -> int:
    """One rank's bytes of the ParallelLMHead (use_attn_tp_group=dp_head) and of the first_k_dense_replace dense
    MLP layers (parallel_group "replicated" or "tp"), SGLang's own classes on the meta device in bf16."""
    import importlib
    _load_sglang()
    import torch
    from sglang.srt.configs.model_config import ModelConfig
    from sglang.srt.layers.vocab_parallel_embedding import ParallelLMHead
    from sglang.srt.runtime_context import get_parallel
    hf = ModelConfig(config_dir(cfg), trust_remote_code=False).hf_config
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with get_parallel().override(tp_size=tp, attn_tp_size=attn_tp, attn_cp_size=1, tp_rank=0, attn_tp_rank=0,
                                     enable_cp_tp_group_sharing=False), torch.device("meta"):
            head = ParallelLMHead(hf.vocab_size, hf.hidden_size, use_attn_tp_group=dp_head)
            total = sum(p.numel() * p.element_size() for p in head.parameters())
            if cfg["architectures"][0] in MLP_CLASSES:
                module_name, class_name = MLP_CLASSES[cfg["architectures"][0]]
                module = importlib.import_module(f"sglang.srt.models.{module_name}")
                mlp = getattr(module, class_name)(hidden_size=hf.hidden_size, intermediate_size=hf.intermediate_size,
                                                  hidden_act=hf.hidden_act, reduce_results=False,
                                                  parallel_group="replicated" if dense_replicated else "tp")
                total += hf.first_k_dense_replace * sum(p.numel() * p.element_size() for p in mlp.parameters())
    finally:
        torch.set_default_dtype(default)
    return total


def head_and_dense_case(model: str, *, tp: int, attn_dp: int) -> Check:
    """What --enable-dp-lm-head and --moe-dense-tp-size 1 add to one GPU beside attn_dp_size alone: kvmem's rule
    (bf16 weights) beside SGLang's own ParallelLMHead and dense MLP classes."""
    from kvmem.catalog import get_model, preset
    from kvmem.engines.sglang.dp_weights import weights_per_device
    from kvmem.sizing.setup import model_weights
    cfg = preset(model)["config"]
    m = get_model(model)
    w = model_weights(m, "bf16")
    options = {"attn_dp_size": attn_dp}
    ours = (weights_per_device(w, m, tp=tp, pp=1, options={**options, "enable_dp_lm_head": True,
                                                             "moe_dense_tp_size": 1})[0]
            - weights_per_device(w, m, tp=tp, pp=1, options=options)[0])
    attn_tp = tp // attn_dp
    theirs = (sglang_head_and_dense_bytes(cfg, tp=tp, attn_tp=attn_tp, dp_head=True, dense_replicated=True)
              - sglang_head_and_dense_bytes(cfg, tp=tp, attn_tp=attn_tp, dp_head=False, dense_replicated=False))
    return Check(f"{model} tp{tp} attn_dp{attn_dp}", "dp_lm_head_dense_tp1_bytes", ours, theirs)

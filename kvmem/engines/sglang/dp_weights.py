"""The weight bytes on one SGLang GPU under the parallel options of kvmem.engines.sglang.parallel (its docstring)."""

from __future__ import annotations

from fractions import Fraction

from ...facts import MoeShape
from ...layer import MLA
from ...model import Model
from ...parallel import attention_tp, expert_share, replicated_excess
from ...units import require_positive_int
from .parallel import MOE_DENSE_TP_ARCHITECTURES, check, head_and_dense

__all__ = ["weights_per_device"]


def _dense_mlp_params(model: Model) -> int:
    """The dense MLP layers' params (DeepseekV2MLP / Glm4MoeMLP: gate_up hidden x 2 x intermediate and down
    intermediate x hidden, no bias) over the first_k_dense_replace layers."""
    first_k = model.config.get("first_k_dense_replace")
    inter = model.facts.intermediate_size
    if first_k is None or not inter:
        raise ValueError(f"{model.name}: moe_dense_tp_size 1 replicates the dense MLP layers; its config gives no "
                         "first_k_dense_replace / intermediate_size to size them")
    return first_k * 3 * model.hidden_size * inter


def _mla_attention_params(model: Model) -> tuple[int, int]:
    """(attention params, of which replicated down-projections) over the MLA layers: q_a, q_b (or q),
    kv_a_proj_with_mqa, kv_b, o and the two latent norms (deepseek_v2.py DeepseekV2AttentionMLA)."""
    f, hidden, heads = model.facts, model.hidden_size, model.num_attention_heads
    total = replicated = 0
    for layer in model.layers:
        if layer.kind != MLA:
            continue
        rank, rope = layer.kv_lora_rank, layer.qk_rope_head_dim
        nope, v_dim, q_rank = f.qk_nope_head_dim, f.v_head_dim, f.q_lora_rank
        q = hidden * q_rank + q_rank + q_rank * heads * (nope + rope) if q_rank else hidden * heads * (nope + rope)
        total += q + hidden * (rank + rope) + rank + rank * heads * (nope + v_dim) + heads * v_dim * hidden
        replicated += hidden * q_rank + hidden * (rank + rope)
    return total, replicated


# Biases SGLang builds on the q/k/v projections (split with them) as each file reads the config: (the field, its
# default in the transformers config class when the file leaves it out), and GPT-OSS's per-head sinks. The o_proj
# bias of a RowParallelLinear is whole on every rank, whatever the width.
# sglang@v0.5.23 python/sglang/srt/models/qwen3_moe.py#L818-L818, qwen3.py#L399, glm4_moe.py#L709, gpt_oss.py#L538
# read config.attention_bias; qwen2_moe.py#L1002 getattr(config, "qkv_bias", True)
_QKV_BIAS = {
    "Qwen3MoeForCausalLM": ("attention_bias", False),
    "Qwen3ForCausalLM": ("attention_bias", False),
    "Glm4MoeForCausalLM": ("attention_bias", False),
    "GptOssForCausalLM": ("attention_bias", True),
    "Qwen2MoeForCausalLM": ("qkv_bias", True),
}
_SINKS = ("GptOssForCausalLM",)   # sglang@v0.5.23 python/sglang/srt/models/gpt_oss.py#L429-L431 sinks (num_heads,)


def _gqa_attention_params(model: Model) -> tuple[int, tuple[tuple[int, int], ...]]:
    """(attention params over the per-head layers, per layer (K/V params per KV head, KV heads)) as SGLang splits
    them over attn_tp: q hidden x heads x head_dim, k and v hidden x kv_heads x head_dim, o heads x v_head_dim x
    hidden, the q/k/v biases where the file builds them and GPT-OSS's sinks (a head each). Norms are whole on every
    rank whatever the width."""
    hidden, heads = model.hidden_size, model.num_attention_heads
    arch = model.facts.architectures[0] if model.facts.architectures else ""
    field_name, default = _QKV_BIAS.get(arch, ("attention_bias", False))
    bias = 1 if model.config.get(field_name, default) else 0
    sinks = 1 if arch in _SINKS else 0
    total, kv = 0, []
    for layer in model.layers:
        if not layer.kind.per_head:
            continue
        kv_pph = (hidden + bias) * (layer.head_dim_k + layer.head_dim_v)
        total += ((hidden + bias) * heads * layer.head_dim_k + kv_pph * layer.kv_heads
                  + heads * layer.head_dim_v * hidden + sinks * heads)
        kv.append((kv_pph, layer.kv_heads))
    return total, tuple(kv)


def _attention_widening(weights, model: Model, tp: int, attn_tp: int) -> Fraction:
    """Bytes one rank holds above its tp share when attention and the input embedding split over attn_tp < tp."""
    widen = Fraction(1, attn_tp) - Fraction(1, tp)
    if any(layer.kind == MLA for layer in model.layers):
        attn, replicated = _mla_attention_params(model)
        kv: tuple[tuple[int, int], ...] = ()
    else:
        attn, kv = _gqa_attention_params(model)
        replicated = 0
    dense_params = weights.layout.dense_params
    if not dense_params or attn > dense_params:
        raise ValueError(f"{model.name}: the weights' dense group ({dense_params} params) does not hold its "
                         f"{attn} attention params; give weights_bytes")
    # the attention's share of the dense group's bytes (scales included), split over attn_tp not tp; MLA's
    # down-projections are whole on every rank either way
    extra = (Fraction(weights.dense_bytes * (attn - replicated), dense_params) + weights.embedding_bytes) * widen
    # K/V heads replicated past attn_tp rather than past tp: whole heads a rank, as Weights.per_device adds them
    for kv_pph, kv_heads in kv:
        extra += weights.layout.dense_rate * kv_pph * (replicated_excess(kv_heads, attn_tp)
                                                       - replicated_excess(kv_heads, tp))
    return extra


def weights_per_device(weights, model: Model, *, tp: int, pp: int, dp: int = 1,
                       options: dict) -> tuple[int, tuple[str, ...]]:
    """Weight bytes on one GPU with the parallel options (module docstring); tp alone: Weights.per_device.
    ``dp``: SGLang's --dp-size replicas are whole model copies (python/sglang/srt/managers/
    data_parallel_controller.py launches one tp group each), so it changes no weight; with attn_dp_size
    SGLang refuses them."""
    attn_dp, _ep, redundant = check(model, tp, pp, options)
    nnodes = require_positive_int("nnodes", options.get("nnodes", 1))
    if (tp * pp * dp) % nnodes:
        raise ValueError(f"nnodes={nnodes} must divide the {tp * pp * dp} GPUs (--nnodes: the same GPUs on each node)")
    if dp > 1 and attn_dp > 1:
        # sglang@v0.5.23 python/sglang/srt/arg_groups/parallel_hook.py#L287-L292
        raise ValueError(f"SGLang 0.5.23 refuses --dp-size {dp} with --attn-dp-size {attn_dp}: data-parallel "
                         "replicas combined with attention data parallelism are not supported (give num_gpus = tp)")
    base = weights.per_device(tp=tp, pp=pp, replicated=True)
    dp_head, dense = head_and_dense(options, tp)
    arch = model.facts.architectures[0] if model.facts.architectures else model.model_type
    dense = dense and arch in MOE_DENSE_TP_ARCHITECTURES
    dp_head = dp_head and attn_dp > 1 and bool(weights.lm_head_bytes)   # tied: the head is the embedding, over attn_tp
    if attn_dp == 1 and not redundant and not dense:
        return base, ()
    extra, notes = Fraction(0), []
    if attn_dp > 1:
        attn_tp = attention_tp(tp, attn_dp)
        extra += _attention_widening(weights, model, tp, attn_tp)
        notes.append(f"attention data-parallel: {attn_dp} groups of attn_tp {attn_tp}; attention and the input "
                     f"embedding split over {attn_tp} rank{'s' * (attn_tp != 1)}, experts, dense MLPs and lm_head "
                     f"over tp {tp}")
    if dp_head:
        # the untied lm_head over attn_tp: ParallelLMHead(use_attn_tp_group=enable_dp_lm_head) (DP_ATTENTION files)
        extra += weights.lm_head_bytes * (Fraction(1, attention_tp(tp, attn_dp)) - Fraction(1, tp))
        notes.append(f"--enable-dp-lm-head: lm_head split over attn_tp {attention_tp(tp, attn_dp)}")
    if dense:
        mlp = _dense_mlp_params(model)
        if mlp > weights.layout.dense_params:
            raise ValueError(f"{model.name}: the weights' dense group does not hold its {mlp} dense MLP params")
        extra += Fraction(weights.dense_bytes * mlp, weights.layout.dense_params) * Fraction(tp - 1, tp)
        notes.append(f"--moe-dense-tp-size 1: the {model.config['first_k_dense_replace']} dense MLP layers whole on "
                     "every GPU")
    if redundant:
        moe: MoeShape = model.facts.moe     # type: ignore[assignment]  # redundant experts: check() found a MoE
        extra += weights.expert_bytes * (expert_share(tp, moe.experts, redundant) - Fraction(1, tp))
        notes.append(f"{redundant} redundant experts: {moe.experts + redundant} physical experts")
    return base + int(extra), tuple(notes)

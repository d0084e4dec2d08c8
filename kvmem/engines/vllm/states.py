"""One sequence's recurrent state as vLLM sizes it: the element counts of its conv and SSM tensors
per tensor-parallel rank (mamba_utils.py MambaStateShapeCalculator, by family) and their dtypes
(mamba_cache_dtype, mamba_ssm_cache_dtype and each model's own hooks)."""

from __future__ import annotations

from ...configs.fields import Fields
from ...errors import ConfigError
from ...layer import Layer, RecurrentState
from ...model import Model
from ...parallel import divides, require_divides
from .formats import MODEL_DTYPE_BYTES, STATE_DTYPES
from .options import QWEN35_TYPES, VllmOptions

__all__ = ["state_dtype_bytes", "state_elements", "config_int"]


# conv dtype = mamba_cache_dtype ("auto": model dtype); ssm dtype = mamba_ssm_cache_dtype, whose "auto" is the conv
# dtype except where a model hook sets it (vllm@v0.33.0 vllm/model_executor/models/config.py#L812-L839
# NemotronHForCausalLMConfig: float32 by default; #L953-L977 Qwen3_5ForConditionalGenerationConfig: the config's
# mamba_ssm_dtype, float32 in the published checkpoints); KDA's "auto" is float32 (kda_state_dtype), and its
# layers keep float32 whatever the option says (vllm@v0.33.0
# vllm/model_executor/layers/mamba/gdn/kimi_gdn_linear_attn.py#L157-L164 get_state_dtype), so kvmem refuses another
def state_dtype_bytes(model: Model, opts: VllmOptions, notes: list) -> tuple[int, int]:
    """(conv state bytes, ssm state bytes) per element, with vLLM's per-model hooks."""
    model_bytes = MODEL_DTYPE_BYTES.get(model.dtype, 2)
    # MODEL_DTYPE_BYTES and STATE_DTYPES hold float names only, whose bytes float_bytes never leaves None
    conv: int = model_bytes if opts.mamba_cache_dtype == "auto" else STATE_DTYPES[opts.mamba_cache_dtype]  # type: ignore[assignment]
    ssm_option = opts.mamba_ssm_cache_dtype
    if model.model_type == "kimi_linear" and ssm_option not in ("auto", "float32", "fp32"):
        # kimi_gdn_linear_attn.py KimiGatedDeltaNetAttention.get_state_dtype passes no
        # mamba_ssm_cache_dtype (its layers keep float32) while the block alignment reads it
        raise ValueError(f"mamba_ssm_cache_dtype {ssm_option!r} for kimi_linear: vLLM 0.33.0's KDA layers keep "
                         "their recurrent state in float32 whatever it says, while its block alignment "
                         "(get_mamba_state_dtype_from_config) takes it; kvmem sizes only 'auto' or 'float32'")
    if model.model_type == "bailing_hybrid":
        # vllm@v0.33.0 vllm/model_executor/models/bailing_moe_v3.py#L642-L649, #L1483-L1489:
        # kda_state_dtype(model dtype, mamba_cache_dtype) without mamba_ssm_cache_dtype, whose "auto" is float32:
        # the recurrent state is float32 whatever it says
        if ssm_option not in ("auto", "float32", "fp32"):
            notes.append(f"mamba_ssm_cache_dtype {ssm_option!r} not read: vLLM 0.33.0's BailingMoeV3 KDA layers keep "
                         "their recurrent state in float32")
        return conv, STATE_DTYPES["float32"]
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
        # vllm@v0.33.0 vllm/model_executor/layers/mamba/mamba_utils.py#L132-L149 kda_state_dtype: "auto" = float32
        return conv, STATE_DTYPES["float32"]
    return conv, conv


def _state_bytes_named(field: str, name) -> int:
    key = str(name).lower().removeprefix("torch.")
    if key not in STATE_DTYPES:
        raise ValueError(f"config {field} {name!r} is not float32, float16 or bfloat16")
    return STATE_DTYPES[key]


# vllm@v0.33.0 vllm/model_executor/layers/mamba/mamba_utils.py#L152-L319 MambaStateShapeCalculator: which shape
# rule each family's model file calls, per tensor-parallel rank:
#   gated DeltaNet (Qwen3-Next, Qwen3.5, OLMo-Hybrid olmo_hybrid.py; #L271-L293)
#       conv (conv_dim/tp, kernel-1+num_spec), ssm (v_heads/tp, v_dim, k_dim)
#   mamba2 (Nemotron-H, Granite-4.0-H granitemoehybrid.py, Falcon-H1 falcon_h1.py, Mamba2 mamba2.py; #L185-L211)
#       conv ((inner + 2 n_groups' d_state)/tp, kernel-1+num_spec), ssm (heads/tp, head_dim, d_state);
#       n_groups' = n_groups, or tp when tp does not divide it (#L260-L269); inner = mamba_expand x hidden
#       (Falcon-H1: mamba_d_ssm when set), n_groups and d_state from mamba_n_groups / mamba_d_state (n_groups /
#       state_size for mamba2), the config class's default where the file omits them
#   mamba1 (Jamba, Mamba, Falcon-Mamba mamba.py; #L170-L183)  conv (inner/tp, kernel-1), ssm (inner/tp, d_state)
#   short conv (LFM2 lfm2.py, LFM2-MoE lfm2_moe.py; #L248-L258)  conv (conv_dim/tp, conv_L_cache-1), no ssm;
#       LFM2 reads config.conv_dim (without it vLLM raises AttributeError: refused, lfm2.py#L356; LFM2-VL the
#       same, lfm2_vl.py#L713-L718), LFM2-MoE hidden_size; with speculative tokens the layers keep num_spec
#       more columns than the block alignment sizes (short_conv.py get_state_shape): refused
#   KDA (Kimi-Linear; #L295-L319)  conv (3 x heads x head_dim/tp, kernel-1+num_spec), ssm (heads/tp, head_dim,
#       head_dim) from linear_attn_config (vllm/models/kimi_k3/nvidia/model.py
#       KimiLinearForCausalLM.get_mamba_state_shape_from_config); its MLA layers cache kv_lora_rank +
#       qk_rope_head_dim, one head
MAMBA1_TYPES = ("jamba", "mamba", "falcon_mamba")          # mamba1_state_shape (jamba.py, mamba.py)
# mamba2_state_shape (nemotron_h.py, granitemoehybrid.py, falcon_h1.py, mamba2.py): the config fields
# holding (n_groups, d_state) as each model file reads them
MAMBA2_TYPES = {"nemotron_h": ("n_groups", "ssm_state_size"), "granitemoehybrid": ("mamba_n_groups", "mamba_d_state"),
                "falcon_h1": ("mamba_n_groups", "mamba_d_state"), "mamba2": ("n_groups", "state_size")}
SHORT_CONV_TYPES = ("lfm2", "lfm2_moe")                     # short_conv_state_shape (lfm2.py, lfm2_moe.py)


def config_int(model: Model, name: str) -> int:
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
    return config_int(model, groups), config_int(model, d_state)


def _short_conv_dim(model: Model) -> int:
    """The short convolution's channels: lfm2.py Lfm2ForCausalLM.get_mamba_state_shape_from_config
    reads config.conv_dim (the published LFM2 files set it to hidden_size; transformers' Lfm2Config
    has no default for it), lfm2_moe.py reads hidden_size."""
    if model.model_type == "lfm2":
        if "conv_dim" not in model.config:
            # vllm@v0.33.0 vllm/model_executor/models/lfm2.py#L356 Lfm2ShortConvDecoderLayer passes
            # config.conv_dim, which transformers' Lfm2Config does not define (it is an extra key of the
            # published files); LFM2-VL builds the same Lfm2ForCausalLM on text_config (lfm2_vl.py#L713-L718)
            raise ValueError("vLLM 0.33.0 cannot build this model: its LFM2 short-conv layers read config.conv_dim "
                             "(vllm/model_executor/models/lfm2.py#L356, Lfm2ShortConvDecoderLayer; LFM2-VL's "
                             "language model is the same class, lfm2_vl.py#L713-L718), which this config does not "
                             "set and transformers' Lfm2Config does not define, so vLLM raises AttributeError")
        return config_int(model, "conv_dim")
    return model.hidden_size


def _divide(what: str, value: int, tp: int) -> int:
    require_divides(tp, value, what)
    return value // tp


def state_elements(model: Model, layer: Layer, tp: int, num_spec: int) -> tuple[int, int]:
    """(conv elements, ssm elements) of one sequence's state on one tensor-parallel rank."""
    state: RecurrentState = layer.state  # type: ignore[assignment]  # callers pass stateful layers only
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

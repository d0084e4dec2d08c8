"""vLLM's own model code as the judge of kvmem's ``vllm`` mode on Mamba / linear-attention families.

For each case, the real vLLM 0.33.0 model class of the family (vllm/model_executor/models/*.py,
vllm/models/kimi_k3) is asked, through its classmethods get_mamba_state_shape_from_config and
get_mamba_state_dtype_from_config, for the state shapes and dtypes of one sequence under a real
VllmConfig (CPU device; model_config a stand-in holding the family's config object, built by
vLLM's own config class where it has one, else by transformers', and the model dtype); the
state page is vLLM's MambaSpec(...).page_size_bytes. Then vLLM's
Platform._align_hybrid_block_size (vllm/platforms/interface.py) is run on that VllmConfig for a
hybrid model, with a stand-in attention backend of the kernel block size kvmem assumes, and its
block size and padded Mamba page are compared with kvmem's; the attention page is vLLM's
FullAttentionSpec / MLAAttentionSpec at that block size. Compared per case: the state bytes of
one sequence on one rank, the attention block size, the padded Mamba page and the attention page.
"""

from __future__ import annotations

import functools
import os
import random
import types

from ..engines.vllm.layout import make_plan
from ..engines.vllm.options import check_options
from ..model import Model
from .report import Check

__all__ = ["CLASSES", "run_case", "random_config"]

# model_type -> (module, class) of vLLM 0.33.0's model (registry.py _TEXT_GENERATION_MODELS)
_MODELS = "vllm.model_executor.models."
CLASSES = {"kimi_linear": ("vllm.models.kimi_k3", "KimiLinearForCausalLM"),
           "granitemoehybrid": (_MODELS + "granitemoehybrid", "GraniteMoeHybridForCausalLM"),
           "falcon_h1": (_MODELS + "falcon_h1", "FalconH1ForCausalLM"),
           "mamba": (_MODELS + "mamba", "MambaForCausalLM"),
           "falcon_mamba": (_MODELS + "mamba", "MambaForCausalLM"),
           "mamba2": (_MODELS + "mamba2", "Mamba2ForCausalLM"),
           "lfm2": (_MODELS + "lfm2", "Lfm2ForCausalLM"),
           "lfm2_moe": (_MODELS + "lfm2_moe", "Lfm2MoeForCausalLM"),
           "olmo_hybrid": (_MODELS + "olmo_hybrid", "OlmoHybridForCausalLM"),
           "bailing_hybrid": (_MODELS + "bailing_moe_v3", "BailingMoeV3ForCausalLM")}

# the kernel block of the backend kvmem assumes (the smallest get_supported_kernel_block_sizes)
_KERNEL_BLOCK = {"mla": 64, "full": 16}


@functools.cache
def _vllm():
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    import torch  # noqa: F401
    from vllm.config import CacheConfig, DeviceConfig, ParallelConfig, VllmConfig  # noqa: F401
    from vllm.platforms.interface import Platform  # noqa: F401
    from vllm.v1.kv_cache_interface import FullAttentionSpec, MambaSpec, MLAAttentionSpec  # noqa: F401
    return types.SimpleNamespace(**locals())


@functools.cache
def _model_class(model_type: str):
    import importlib
    module, name = CLASSES[model_type]
    return getattr(importlib.import_module(module), name)


def _hf_config(model: Model):
    """The config object vLLM's model code reads: vLLM's own config class where it has one."""
    cfg = {k: v for k, v in model.config.items() if k not in ("architectures", "auto_map", "quantization_config")}
    if model.model_type == "kimi_linear":
        from vllm.transformers_utils.configs.kimi_linear import KimiLinearConfig
        return KimiLinearConfig(**cfg)
    from transformers import AutoConfig
    return AutoConfig.for_model(**cfg)


class _Backend:
    """A stand-in attention backend: the kernel block size and the spec as they are."""

    def __init__(self, kernel_block: int):
        self.kernel_block = kernel_block

    def get_supported_kernel_block_sizes(self):
        return [self.kernel_block]

    @staticmethod
    def customize_spec(spec):
        return spec


def _dtype(v, model: Model):
    """The model dtype vLLM runs (float32 checkpoints as bfloat16, as kvmem's vllm mode assumes)."""
    return v.torch.float16 if model.dtype == "fp16" else v.torch.bfloat16


def _attention_shape(model: Model, hf_config, tp: int) -> tuple[bool, int, int]:
    """(MLA, head size, KV heads per rank) as the family's vLLM attention takes them from its config."""
    if model.model_type in ("kimi_linear", "bailing_hybrid"):    # kimi_k3/nvidia/mla.py, bailing_moe_v3.py: one
        return True, hf_config.kv_lora_rank + hf_config.qk_rope_head_dim, 1     # latent head
    heads = getattr(hf_config, "num_attention_heads", 0)
    if not heads or model.model_type in ("mamba", "falcon_mamba", "mamba2"):
        return False, 0, 0
    if model.model_type == "falcon_h1":      # falcon_h1.py FalconH1AttentionDecoderLayer
        dim = getattr(hf_config, "head_dim", None) or hf_config.hidden_size // heads
    else:                                    # granitemoehybrid.py, lfm2.py, lfm2_moe.py, olmo_hybrid.py
        dim = hf_config.hidden_size // heads
    return False, dim, max(1, hf_config.num_key_value_heads // tp)


def _vllm_config(v, model: Model, hf_config, *, tp: int, block_size: int, num_spec: int):
    config = v.VllmConfig(device_config=v.DeviceConfig(device="cpu"),
                          cache_config=v.CacheConfig(block_size=block_size),
                          parallel_config=v.ParallelConfig(tensor_parallel_size=tp))
    mla, head_size, kv_heads = _attention_shape(model, hf_config, tp)
    attention = next((layer for layer in model.layers if layer.caches_tokens), None)
    stand_in = types.SimpleNamespace(
        hf_config=hf_config, hf_text_config=hf_config, dtype=_dtype(v, model), use_mla=mla,
        architecture=model.config["architectures"][0], architectures=model.config["architectures"],
        max_model_len=4096, is_hybrid=attention is not None, model_impl="auto", convert_type="none",
        get_num_kv_heads=lambda _parallel_config: kv_heads, get_head_size=lambda: head_size)
    object.__setattr__(config, "model_config", stand_in)
    if num_spec:
        object.__setattr__(config, "speculative_config", types.SimpleNamespace(num_speculative_tokens=num_spec))
    return config


def run_case(name: str, model: Model, tp: int, num_spec: int = 0) -> list[Check]:
    """kvmem's vllm layout of ``model`` at ``tp`` (``num_spec`` speculative tokens) beside vLLM's
    model code and block alignment."""
    v = _vllm()
    cls = _model_class(model.model_type)
    opts = check_options({"num_speculative_tokens": num_spec}, model)
    plan = make_plan(model, "auto", tp, 1, opts)
    ours_state = {spec.state_bytes for _, spec in plan.units if spec.kind == "mamba"}
    hf_config = _hf_config(model)
    mla, head_size, kv_heads = _attention_shape(model, hf_config, tp)
    first = 64 if mla else 16
    config = _vllm_config(v, model, hf_config, tp=tp, block_size=first, num_spec=num_spec)
    # the Mamba cache mode `vllm serve` runs with no prefix-caching flag, which the block alignment reads
    served = served_cache_modes(model, config)
    checks_modes = [Check(name, "enable_prefix_caching, mamba_cache_mode",
                          [opts.enable_prefix_caching, opts.mamba_cache_mode], list(served))]
    shapes = cls.get_mamba_state_shape_from_config(config)
    dtypes = cls.get_mamba_state_dtype_from_config(config)
    state = v.MambaSpec(shapes=tuple(shapes), dtypes=tuple(dtypes), block_size=-1).page_size_bytes
    checks = [*checks_modes, Check(name, "state bytes of one sequence", sorted(ours_state), [state])]
    attention = [spec for _, spec in plan.units if spec.kind != "mamba"]
    if not attention:
        return checks
    backend = _Backend(_KERNEL_BLOCK["mla" if mla else "full"])
    v.Platform._align_hybrid_block_size(config, backend)
    block = config.cache_config.block_size
    padded = config.cache_config.mamba_page_size_padded or state
    checks.append(Check(name, "attention block size", plan.block_size, block))
    ours_padded = {spec.page_bytes for _, spec in plan.units if spec.kind == "mamba"}
    checks.append(Check(name, "padded Mamba page", sorted(ours_padded), [padded]))
    spec = v.MLAAttentionSpec if mla else v.FullAttentionSpec
    page = spec(block_size=block, num_kv_heads=kv_heads, dtype=_dtype(v, model), head_size=head_size).page_size_bytes
    checks.append(Check(name, "attention page", sorted({spec.page_bytes for spec in attention}), [page]))
    return checks


def random_config(model_type: str, seed: int) -> Model:
    """A seeded random config of ``model_type``: the cache-shaping fields drawn, tp 1, 2 and 4 valid."""
    rng = random.Random(f"{model_type}-{seed}")
    n_layers = rng.randint(2, 10)
    heads = rng.choice((8, 16, 32))
    hidden = heads * rng.choice((32, 64, 128))
    attention = dict(num_attention_heads=heads, num_key_value_heads=rng.choice((1, 2, 4, 8)), hidden_size=hidden,
                     num_hidden_layers=n_layers, intermediate_size=128, vocab_size=512,
                     torch_dtype=rng.choice(("bfloat16", "float16")))
    both = [rng.choice((0, 1)) for _ in range(n_layers)]
    both[rng.randrange(n_layers)], both[rng.randrange(n_layers)] = 0, 1    # at least one of each, mostly
    mamba2 = dict(mamba_n_heads=rng.choice((8, 16, 32)), mamba_n_groups=rng.choice((1, 2, 4, 8)),
                  mamba_d_state=rng.choice((16, 64, 128)), mamba_d_conv=rng.choice((2, 4)), mamba_expand=2)
    if model_type == "kimi_linear":
        full = sorted(rng.sample(range(1, n_layers + 1), rng.randint(1, n_layers - 1)))
        cfg = dict(attention, architectures=["KimiLinearForCausalLM"], num_key_value_heads=heads,
                   kv_lora_rank=rng.choice((128, 256, 512)), qk_rope_head_dim=rng.choice((32, 64)),
                   qk_nope_head_dim=128, v_head_dim=128, mla_use_nope=True,
                   linear_attn_config=dict(num_heads=heads, head_dim=rng.choice((64, 128)),
                                           short_conv_kernel_size=rng.choice((2, 3, 4)), full_attn_layers=full,
                                           kda_layers=[i for i in range(1, n_layers + 1) if i not in full]))
    elif model_type == "bailing_hybrid":
        # vLLM's KDA width is qk_rope_head_dim (transformers' BailingHybridConfig sets head_dim to it): the file
        # names the same head_dim, as kvmem sizes only then
        rope, group = rng.choice((32, 64, 128)), rng.choice((2, 3, 4, 6))
        cfg = dict(attention, architectures=["BailingMoeV3ForCausalLM"], num_key_value_heads=heads, no_kda_lora=True,
                   num_hidden_layers=rng.randint(group, 14), layer_group_size=group,
                   kv_lora_rank=rng.choice((128, 256, 512)), qk_rope_head_dim=rope, head_dim=rope,
                   short_conv_kernel_size=rng.choice((2, 3, 4)))
    elif model_type == "granitemoehybrid":
        cfg = dict(attention, **mamba2, architectures=["GraniteMoeHybridForCausalLM"],
                   layer_types=["attention" if b else "mamba" for b in both])
    elif model_type == "falcon_h1":
        cfg = dict(attention, **mamba2, architectures=["FalconH1ForCausalLM"],
                   head_dim=rng.choice((None, 64, 128)), mamba_d_ssm=rng.choice((None, hidden, 2 * hidden)))
        cfg = {k: v for k, v in cfg.items() if v is not None or k == "mamba_d_ssm"}
    elif model_type in ("mamba", "falcon_mamba"):
        arch = "FalconMambaForCausalLM" if model_type == "falcon_mamba" else "MambaForCausalLM"
        cfg = dict(hidden_size=hidden, num_hidden_layers=n_layers, vocab_size=512, architectures=[arch],
                   expand=2, state_size=rng.choice((8, 16)), conv_kernel=rng.choice((2, 4)),
                   torch_dtype=attention["torch_dtype"])
    elif model_type == "mamba2":
        head_dim = rng.choice((32, 64))
        cfg = dict(hidden_size=hidden, num_hidden_layers=n_layers, vocab_size=512, architectures=["Mamba2ForCausalLM"],
                   expand=2, num_heads=2 * hidden // head_dim, head_dim=head_dim, n_groups=rng.choice((1, 2, 8)),
                   state_size=rng.choice((16, 64, 128)), conv_kernel=rng.choice((2, 4)),
                   torch_dtype=attention["torch_dtype"])
    elif model_type in ("lfm2", "lfm2_moe"):
        arch = "Lfm2MoeForCausalLM" if model_type == "lfm2_moe" else "Lfm2ForCausalLM"
        cfg = dict(attention, architectures=[arch], conv_L_cache=rng.choice((2, 3, 4)),
                   layer_types=["full_attention" if b else "conv" for b in both])
        if model_type == "lfm2":
            cfg["conv_dim"] = hidden                 # the published LFM2 files set it to hidden_size
        else:
            cfg.update(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=64, num_dense_layers=1)
    elif model_type == "olmo_hybrid":
        k_heads = rng.choice((4, 8, 16))
        cfg = dict(attention, architectures=["OlmoHybridForCausalLM"], linear_num_key_heads=k_heads,
                   linear_num_value_heads=k_heads * rng.choice((1, 2)), linear_key_head_dim=rng.choice((64, 128)),
                   linear_value_head_dim=rng.choice((64, 128)), linear_conv_kernel_dim=rng.choice((2, 4)),
                   layer_types=["full_attention" if b else "linear_attention" for b in both])
    else:
        raise ValueError(f"no random configs for {model_type!r}")
    return Model.from_hf_config({**cfg, "model_type": model_type}, name=f"random-{model_type}-{seed}")


def served_cache_modes(model: Model, config) -> tuple[bool, str]:
    """enable_prefix_caching and mamba_cache_mode as ``vllm serve <model>`` leaves them with no prefix-caching
    flag, by vLLM 0.33.0's own defaulting, written into ``config`` (a VllmConfig): ModelConfig.is_hybrid /
    attn_type / is_prefix_caching_supported / is_chunked_prefill_supported (vllm/config/model.py) over a stand-in
    holding the registry's _ModelInfo of the family's class and its config, then
    EngineArgs._set_default_chunked_prefill_and_prefix_caching_args (vllm/engine/arg_utils.py) on an EngineArgs
    with neither flag given, then MambaModelConfig.verify_and_update_config (model_executor/models/config.py)."""
    from vllm.config import ModelConfig
    from vllm.engine.arg_utils import EngineArgs
    from vllm.model_executor.models.config import MambaModelConfig
    from vllm.model_executor.models.registry import _ModelInfo
    cls = _model_class(model.model_type) if model.model_type in CLASSES else _hybrid_class(model.model_type)
    stand_in = types.SimpleNamespace(pooler_config=None, runner_type="generate", is_encoder_decoder=False,
                                     _model_info=_ModelInfo.from_model_cls(cls), hf_config=_hf_config(model),
                                     architecture=model.config["architectures"][0])
    for name in ("is_hybrid", "is_attention_free", "attn_type", "is_prefix_caching_supported",
                 "is_chunked_prefill_supported"):
        setattr(stand_in, name, getattr(ModelConfig, name).fget(stand_in))
    args = EngineArgs()
    assert args.enable_prefix_caching is None        # neither --enable- nor --no-enable-prefix-caching
    args._set_default_chunked_prefill_and_prefix_caching_args(stand_in)
    config.cache_config.enable_prefix_caching = args.enable_prefix_caching
    config.scheduler_config.enable_chunked_prefill = args.enable_chunked_prefill
    if stand_in.is_hybrid or stand_in.is_attention_free:
        saved = config.model_config
        object.__setattr__(config, "model_config", types.SimpleNamespace(
            architecture=stand_in.architecture, max_model_len=getattr(saved, "max_model_len", 4096)))
        try:
            MambaModelConfig.verify_and_update_config(config)
        finally:
            object.__setattr__(config, "model_config", saved)
    return config.cache_config.enable_prefix_caching, config.cache_config.mamba_cache_mode


def _hybrid_class(model_type: str):
    """vLLM 0.33.0's class of a hybrid outside CLASSES (registry.py: Qwen3NextForCausalLM, NemotronHForCausalLM;
    Qwen3.5's ForConditionalGeneration classes import the vision stack, which this environment lacks)."""
    if model_type == "qwen3_next":
        from vllm.model_executor.models.qwen3_next import Qwen3NextForCausalLM
        return Qwen3NextForCausalLM
    if model_type == "nemotron_h":
        from vllm.model_executor.models.nemotron_h import NemotronHForCausalLM
        return NemotronHForCausalLM
    raise ValueError(f"no vLLM class for {model_type!r} here")


def install_gdn_layers(config, names, hopper: bool = True) -> list:
    """Stand-ins of vLLM 0.33.0's QwenGatedDeltaNetAttention layers (uninitialised instances of the real class),
    registered in ``config``'s static forward context under ``names`` as a built model registers its layers:
    Platform._align_hybrid_block_size reads their prefill checkpoint alignment from there
    (get_mamba_prefill_checkpoint_alignment). Each holds what the layer's __init__ sets
    (qwen_gdn_linear_attn.py#L689-L696): FLASHINFER_GDN_CHECKPOINT_ALIGNMENT in "align" mode when its own
    _resolve_gdn_prefill_backend, run on a platform reporting CUDA capability 9.0 (``hopper``) or none of its
    FlashInfer ones, picks FlashInfer; else None."""
    from unittest import mock

    from vllm.model_executor.layers.mamba.gdn import qwen_gdn_linear_attn as gdn
    from vllm.v1.attention.backends.gdn_attn import FLASHINFER_GDN_CHECKPOINT_ALIGNMENT
    platform = type(gdn.current_platform)
    with mock.patch.multiple(platform, is_cuda=lambda *_: True, is_rocm=lambda *_: False, is_xpu=lambda *_: False,
                             is_device_capability=classmethod(lambda _c, cap, _d=0: hopper and cap == 90),
                             is_device_capability_family=classmethod(lambda _c, _fam, _d=0: False)):
        _, backend = gdn._resolve_gdn_prefill_backend(config)
    alignment = None
    if config.cache_config.mamba_cache_mode == "align" and backend == "flashinfer":
        alignment = FLASHINFER_GDN_CHECKPOINT_ALIGNMENT
    layers = []
    for name in names:
        layer = gdn.QwenGatedDeltaNetAttention.__new__(gdn.QwenGatedDeltaNetAttention)
        object.__setattr__(layer, "_checkpoint_alignment", alignment)
        object.__setattr__(layer, "vllm_config", config)
        config.compilation_config.static_forward_context[name] = layer
        layers.append(layer)
    return layers

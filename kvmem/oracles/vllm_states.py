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

from ..catalog import get_model
from ..configs import model_from_config
from ..engines.vllm.layout import make_plan
from ..engines.vllm.options import check_options
from ..model import MLA, Model
from .report import Check

__all__ = ["CLASSES", "run_case", "random_config"]

# model_type -> (module, class) of vLLM 0.33.0's model (registry.py _TEXT_GENERATION_MODELS)
CLASSES = {"kimi_linear": ("vllm.models.kimi_k3", "KimiLinearForCausalLM")}

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


def _vllm_config(v, model: Model, hf_config, *, tp: int, block_size: int, num_spec: int):
    config = v.VllmConfig(device_config=v.DeviceConfig(device="cpu"),
                          cache_config=v.CacheConfig(block_size=block_size),
                          parallel_config=v.ParallelConfig(tensor_parallel_size=tp))
    mla = any(layer.kind == MLA for layer in model.layers)
    attention = next((layer for layer in model.layers if layer.caches_tokens), None)
    head_size = (attention.kv_lora_rank + attention.qk_rope_head_dim if mla else attention.head_dim_k) \
        if attention else 0
    kv_heads = 1 if mla else max(1, attention.kv_heads // tp) if attention else 0
    stand_in = types.SimpleNamespace(
        hf_config=hf_config, hf_text_config=hf_config, dtype=v.torch.bfloat16, use_mla=mla,
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
    plan = make_plan(model, "auto", tp, 1, check_options({"num_speculative_tokens": num_spec}))
    ours_state = {spec.state_bytes for _, spec in plan.units if spec.kind == "mamba"}
    mla = any(layer.kind == MLA for layer in model.layers)
    first = 64 if mla else 16
    hf_config = _hf_config(model)
    config = _vllm_config(v, model, hf_config, tp=tp, block_size=first, num_spec=num_spec)
    shapes = cls.get_mamba_state_shape_from_config(config)
    dtypes = cls.get_mamba_state_dtype_from_config(config)
    state = v.MambaSpec(shapes=tuple(shapes), dtypes=tuple(dtypes), block_size=-1).page_size_bytes
    checks = [Check(name, "state bytes of one sequence", sorted(ours_state), [state])]
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
    layer = next(layer for layer in model.layers if layer.caches_tokens)
    if mla:
        page = v.MLAAttentionSpec(block_size=block, num_kv_heads=1, dtype=v.torch.bfloat16,
                                  head_size=layer.kv_lora_rank + layer.qk_rope_head_dim).page_size_bytes
    else:
        page = v.FullAttentionSpec(block_size=block, num_kv_heads=max(1, layer.kv_heads // tp), dtype=v.torch.bfloat16,
                                   head_size=layer.head_dim_k, head_size_v=layer.head_dim_v).page_size_bytes
    checks.append(Check(name, "attention page", sorted({spec.page_bytes for spec in attention}), [page]))
    return checks


def preset(name: str) -> Model:
    return get_model(name)


def random_config(model_type: str, seed: int) -> Model:
    """A seeded random config of ``model_type`` (shapes only; MoE and vocabulary kept small)."""
    rng = random.Random(f"{model_type}-{seed}")
    if model_type == "kimi_linear":
        n_layers = rng.randint(2, 12)
        full = sorted(rng.sample(range(1, n_layers + 1), rng.randint(1, n_layers - 1)))
        heads = rng.choice((4, 8, 16, 32))
        cfg = dict(architectures=["KimiLinearForCausalLM"], model_type="kimi_linear", hidden_size=heads * 64,
                   num_attention_heads=heads, num_key_value_heads=heads, num_hidden_layers=n_layers,
                   intermediate_size=256, vocab_size=1024, kv_lora_rank=rng.choice((128, 256, 512)),
                   qk_rope_head_dim=rng.choice((32, 64)), qk_nope_head_dim=128, v_head_dim=128, mla_use_nope=True,
                   linear_attn_config=dict(num_heads=heads, head_dim=rng.choice((64, 128)),
                                           short_conv_kernel_size=rng.choice((2, 3, 4)),
                                           full_attn_layers=full,
                                           kda_layers=[i for i in range(1, n_layers + 1) if i not in full]),
                   torch_dtype="bfloat16")
        return model_from_config(cfg, name=f"random-kimi-{seed}")
    raise ValueError(f"no random configs for {model_type!r}")

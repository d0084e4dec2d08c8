"""vLLM 0.33.0's planning classes as the vLLM oracles load them, the layer specs kvmem's Model implies and the
VllmConfig they plan under (shared by kvmem.oracles.vllm and kvmem.oracles.vllm_dp_dcp)."""

from __future__ import annotations

import functools
import os
import types

from ..layer import CHUNKED, FULL, MLA, NONE, SLIDING
from ..model import Model
from ..parallel import kv_heads_per_rank

__all__ = ["supported", "load_vllm", "kv_layouts", "layer_specs", "planning_config"]

_KINDS = {FULL, SLIDING, CHUNKED, MLA}


def supported(model: Model) -> bool:
    """Every layer one vLLM's attention specs here build: full, sliding, chunked or MLA (an indexer on MLA only)."""
    return all(layer.kind in _KINDS and (layer.kind == MLA or not layer.index_head_dim) for layer in model.layers)


@functools.cache
def load_vllm():
    """vLLM's planning classes and functions (and torch) in one namespace, loaded once, set up as on CUDA."""
    os.environ.setdefault("VLLM_USE_V2_MODEL_RUNNER", "1")
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    # imported here (vLLM is heavy and optional) and handed over as one namespace: used through v.*
    import torch  # noqa: F401
    from vllm.config import CacheConfig, DeviceConfig, ParallelConfig, SchedulerConfig, VllmConfig  # noqa: F401
    from vllm.v1.attention.backends.utils import get_supported_kv_cache_layouts, resolve_kv_cache_layout  # noqa: F401
    from vllm.v1.core.kv_cache_planning import get_global_kv_cache_groups, get_kv_cache_configs  # noqa: F401
    from vllm.v1.core.kv_cache_utils import get_kv_cache_capacity  # noqa: F401
    from vllm.v1.kv_cache_interface import (  # noqa: F401
        ChunkedLocalAttentionSpec,
        FullAttentionSpec,
        MLAAttentionSpec,
        SlidingWindowSpec,
        SparseCacheRole,
    )
    return types.SimpleNamespace(**locals())


def _mimo_specs(v, cfg: dict, block_size: int, tp: int) -> dict:
    """MiMo-V2-Flash's specs read from its config as vLLM's mimo_v2.py MiMoV2DecoderLayer /
    MiMoV2Attention and Attention.get_kv_cache_spec build them (sliding layers at the primary block
    size: the backends' MultipleOf(16) kernel blocks fit it, _largest_kernel_block_within)."""
    specs = {}
    for i, sliding in enumerate(cfg["hybrid_layer_pattern"]):
        name = f"model.layers.{i}.self_attn.attn"
        if sliding:
            k_dim = cfg["swa_head_dim"]
            specs[name] = v.SlidingWindowSpec(block_size=block_size, dtype=v.torch.bfloat16,
                                              num_kv_heads=max(1, cfg["swa_num_key_value_heads"] // tp),
                                              head_size=k_dim, head_size_v=cfg.get("swa_v_head_dim") or k_dim,
                                              sliding_window=cfg["sliding_window_size"])
        else:
            specs[name] = v.FullAttentionSpec(block_size=block_size, dtype=v.torch.bfloat16,
                                              num_kv_heads=max(1, cfg["num_key_value_heads"] // tp),
                                              head_size=cfg["head_dim"],
                                              head_size_v=cfg.get("v_head_dim") or cfg["head_dim"])
    return specs


def _listed_specs(v, cfg: dict, block_size: int, tp: int) -> dict:
    """Laguna's and K-EXAONE's specs read from the config as laguna.py LagunaDecoderLayer /
    exaone_moe.py ExaoneMoeAttention build them: config.layer_types; a sliding layer's window
    sliding_windows[i] (K-EXAONE) or sliding_window; head_dim the config's, else hidden_size // the
    layer's query heads (num_attention_heads_per_layer[i], Laguna)."""
    from transformers import AutoConfig
    hf_config = AutoConfig.for_model(**{k: v for k, v in cfg.items() if k != "architectures"})
    specs = {}
    per_layer = cfg.get("num_attention_heads_per_layer") or [cfg["num_attention_heads"]] * cfg["num_hidden_layers"]
    for i, kind in enumerate(cfg["layer_types"]):
        dim = getattr(hf_config, "head_dim", None) or cfg["hidden_size"] // per_layer[i]
        common = dict(block_size=block_size, num_kv_heads=max(1, cfg["num_key_value_heads"] // tp),
                      head_size=dim, dtype=v.torch.bfloat16)
        name = f"model.layers.{i}.self_attn.attn"
        if kind == "sliding_attention":
            window = (cfg.get("sliding_windows") or [cfg["sliding_window"]] * len(per_layer))[i]
            specs[name] = v.SlidingWindowSpec(sliding_window=window, **common)
        else:
            specs[name] = v.FullAttentionSpec(**common)
    return specs


def _dsv4_specs(v, cfg: dict) -> dict:
    """DeepSeek-V4's specs under the CUDA default (fp8_ds_mla), built as vLLM 0.33.0's get_kv_cache_spec
    methods build them: DeepseekV4SWACache (sparse_swa.py), DeepseekV4Attention and DeepseekV4IndexerCache
    (models/deepseek_v4/attention.py), CompressorStateCache (compressor.py); the layer's compress ratio
    from the config class's layer_types and compress_rates, as attention.py reads them."""
    from transformers import AutoConfig
    from vllm.v1.kv_cache_interface import SlidingWindowMLASpec, get_kv_quant_mode
    hf = AutoConfig.for_model(**{k: val for k, val in cfg.items() if k != "architectures"})
    torch, mode = v.torch, get_kv_quant_mode("fp8_ds_mla")
    ihd = hf.index_head_dim
    specs = {}
    for i in range(hf.num_hidden_layers):
        ratio = max(1, hf.compress_rates.get(hf.layer_types[i], 0))
        name = f"model.layers.{i}.self_attn"
        specs[f"{name}.swa_cache"] = SlidingWindowMLASpec(
            block_size=64, num_kv_heads=1, max_tp_shards=1, head_size=hf.head_dim, dtype=torch.uint8,
            sliding_window=hf.sliding_window, cache_dtype_str="fp8_ds_mla", state_content_bytes=584, alignment=576,
            model_version="deepseek_v4", kv_quant_mode=mode)
        if ratio <= 1:
            continue
        specs[name] = v.MLAAttentionSpec(
            block_size=256, num_kv_heads=1, max_tp_shards=1, head_size=hf.head_dim, dtype=torch.uint8,
            tokens_per_state=ratio, cache_dtype_str="fp8_ds_mla", alignment=576, model_version="deepseek_v4",
            kv_quant_mode=mode, state_content_bytes=584)
        coff = 1 + (ratio == 4)
        specs[f"{name}.compressor.state_cache"] = SlidingWindowMLASpec(
            block_size=4 if ratio == 4 else 8, num_kv_heads=1, max_tp_shards=1, head_size=2 * coff * hf.head_dim,
            dtype=torch.float32, sliding_window=coff * ratio, alignment=576)
        if ratio == 4:
            specs[f"{name}.indexer.k_cache"] = v.MLAAttentionSpec(
                block_size=256, num_kv_heads=1, max_tp_shards=1, head_size=ihd + ihd // 128 * 4, dtype=torch.uint8,
                tokens_per_state=4, alignment=576)
            specs[f"{name}.indexer.compressor.state_cache"] = SlidingWindowMLASpec(
                block_size=4, num_kv_heads=1, max_tp_shards=1, head_size=2 * 2 * ihd, dtype=torch.float32,
                sliding_window=8, alignment=576)
    return specs


def _hy_v4_specs(v, cfg: dict, block_size: int) -> dict:
    """HY-V4's specs from vLLM's own HYV4Config and compute_skip_topk_layers (vllm/models/hy_v4/nvidia/
    attention.py): every layer's MLA latent, and DeepseekV32IndexerCache's key on the sparse layers that do
    not share another's top-k."""
    from vllm.models.hy_v4.nvidia.attention import _SPARSE_LAYER_TYPES, compute_skip_topk_layers
    from vllm.transformers_utils.configs.hy_v4 import HYV4Config
    hf = HYV4Config(**{k: val for k, val in cfg.items() if k not in ("architectures", "model_type")})
    skip = compute_skip_topk_layers(hf)
    specs = {}
    for i in range(hf.num_hidden_layers):
        name = f"model.layers.{i}.self_attn"
        specs[f"{name}.attn"] = v.MLAAttentionSpec(block_size=block_size, num_kv_heads=1, dtype=v.torch.bfloat16,
                                                   head_size=hf.kv_lora_rank + hf.qk_rope_head_dim)
        if hf.layer_types[i] in _SPARSE_LAYER_TYPES and i not in skip:
            specs[f"{name}.indexer.k_cache"] = v.MLAAttentionSpec(
                block_size=block_size, num_kv_heads=1, max_tp_shards=1, dtype=v.torch.uint8,
                head_size=hf.index_head_dim + hf.index_head_dim // 128 * 4, cache_role=v.SparseCacheRole.INDEXER)
    return specs


def _inkling_specs(v, cfg: dict, block_size: int, tp: int) -> dict:
    """Inkling's specs from vLLM's own InklingMMConfig (vllm/models/inkling/configs.py) and InklingConvState
    (nvidia/sconv_swa_attn.py, built here under the case's VllmConfig and tp): per layer its conv-state spec,
    then its attention's as InklingAttention.get_kv_cache_spec makes it (nvidia/attention.py#L183-L199)."""
    from vllm.config import set_current_vllm_config
    from vllm.models.inkling.configs import InklingMMConfig
    from vllm.models.inkling.nvidia import sconv_swa_attn
    text = InklingMMConfig(text_config=dict(cfg["text_config"])).text_config
    config = v.VllmConfig(device_config=v.DeviceConfig(device="cpu"))
    object.__setattr__(config, "model_config", types.SimpleNamespace(dtype=v.torch.bfloat16))
    world = sconv_swa_attn.get_tensor_model_parallel_world_size
    sconv_swa_attn.get_tensor_model_parallel_world_size = lambda: tp
    specs, local = {}, set(text.local_layer_ids)
    try:
        with set_current_vllm_config(config):
            for i in range(text.num_hidden_layers):
                swa = i in local
                kv = text.swa_num_key_value_heads if swa else text.num_key_value_heads
                head = text.swa_head_dim if swa else text.head_dim
                state = sconv_swa_attn.InklingConvState(num_kv_heads=kv, head_dim=head, hidden_size=text.hidden_size,
                                                        kernel_size=text.sconv_kernel_size,
                                                        prefix=f"model.layers.{i}.conv_state")
                specs[f"model.layers.{i}.conv_state"] = state.get_kv_cache_spec(config)
                common = dict(block_size=block_size, num_kv_heads=max(1, kv // tp), head_size=head,
                              dtype=v.torch.bfloat16)
                specs[f"model.layers.{i}.attn"] = (
                    v.SlidingWindowSpec(sliding_window=text.sliding_window_size, **common) if swa
                    else v.FullAttentionSpec(**common))
    finally:
        sconv_swa_attn.get_tensor_model_parallel_world_size = world
    return specs


def _transformers_backend_specs(v, cfg: dict, block_size: int, tp: int) -> dict:
    """Specs of a model vLLM runs with its Transformers backend (GPTBigCode, SmolLM3: registry.py
    _TRANSFORMERS_BACKEND_MODELS), as transformers/base.py _create_attention_instances builds them from
    transformers' own config object: every layer num_kv_heads = the config's first of vLLM's
    total_num_kv_heads aliases (else the attention heads), head_size = head_dim or hidden // heads, a
    per_layer_sliding_window of sliding_window where layer_types[i] is "sliding_attention"."""
    from transformers import AutoConfig
    from vllm.transformers_utils.config import CONFIG_FIELD_ALIASES
    hf = AutoConfig.for_model(**{k: val for k, val in cfg.items() if k != "architectures"})
    heads = hf.num_attention_heads
    kv = next((getattr(hf, name) for name in CONFIG_FIELD_ALIASES["total_num_kv_heads"]
               if getattr(hf, name, None) is not None), heads)
    head = getattr(hf, "head_dim", None) or hf.hidden_size // heads
    types = getattr(hf, "layer_types", None)
    specs = {}
    for i in range(hf.num_hidden_layers):
        common = dict(block_size=block_size, num_kv_heads=max(1, kv // tp), head_size=head, dtype=v.torch.bfloat16)
        name = f"model.layers.{i}.self_attn.attn"
        if types and types[i] == "sliding_attention":
            specs[name] = v.SlidingWindowSpec(sliding_window=hf.sliding_window, **common)
        else:
            specs[name] = v.FullAttentionSpec(**common)
    return specs


def kv_layouts(v, model: Model) -> list:
    """The KV cache layouts the model's attention backends support (get_supported_kv_cache_layouts):
    DeepSeek-V4's indexer backend takes only the block-outermost BLHNC / BLNHC (indexer.py)."""
    backends = []
    if model.model_type == "deepseek_v4":
        from vllm.v1.attention.backends.mla.indexer import DeepseekV4IndexerBackend
        backends = [DeepseekV4IndexerBackend]
    return [layout.name for layout in v.get_supported_kv_cache_layouts(backends)]


def layer_specs(v, model: Model, block_size: int, tp: int) -> dict:
    """{layer name: KVCacheSpec} as vLLM's attention layers build them (bf16 cache)."""
    if model.model_type == "deepseek_v4":
        return _dsv4_specs(v, model.config)
    if model.model_type == "hy_v4":
        return _hy_v4_specs(v, model.config, block_size)
    if model.model_type in ("gpt_bigcode", "smollm3"):
        return _transformers_backend_specs(v, model.config, block_size, tp)
    if model.model_type == "inkling_text":
        return _inkling_specs(v, model.config, block_size, tp)
    if model.model_type == "mimo_v2_flash":
        return _mimo_specs(v, model.config, block_size, tp)
    if model.model_type in ("laguna", "exaone_moe"):
        return _listed_specs(v, model.config, block_size, tp)
    if model.model_type == "minicpm3":   # minicpm3.py: Attention(local heads, qk_head_dim), per-head K and V
        cfg = model.config
        return {f"model.layers.{i}.self_attn.attn": v.FullAttentionSpec(
                    block_size=block_size, num_kv_heads=cfg["num_attention_heads"] // tp, dtype=v.torch.bfloat16,
                    head_size=cfg["qk_nope_head_dim"] + cfg["qk_rope_head_dim"])
                for i in range(cfg["num_hidden_layers"])}
    specs = {}
    dtype = v.torch.bfloat16
    for i, layer in enumerate(model.layers):
        name = f"model.layers.{i}.self_attn.attn"
        if layer.kind == NONE:   # no attention module, no spec (nemotron_nas.py no_op blocks)
            continue
        if layer.kind == MLA:
            specs[name] = v.MLAAttentionSpec(block_size=block_size, num_kv_heads=1, dtype=dtype,
                                             head_size=layer.kv_lora_rank + layer.qk_rope_head_dim)
            if layer.index_head_dim:   # deepseek_v2.py DeepseekV32IndexerCache.get_kv_cache_spec
                specs[f"model.layers.{i}.self_attn.indexer.k_cache"] = v.MLAAttentionSpec(
                    block_size=block_size, num_kv_heads=1, max_tp_shards=1, dtype=v.torch.uint8,
                    head_size=layer.index_head_dim + layer.index_head_dim // 128 * 4,
                    cache_role=v.SparseCacheRole.INDEXER)
            continue
        common = dict(block_size=block_size, num_kv_heads=kv_heads_per_rank(layer.kv_heads, tp),
                      head_size=layer.head_dim_k, dtype=dtype)
        if layer.kind == FULL:
            specs[name] = v.FullAttentionSpec(head_size_v=layer.head_dim_v, **common)
            if layer.index_head_dim:   # minimax_m3 common/indexer.py MiniMaxM3IndexerCache.get_kv_cache_spec (bf16)
                specs[f"{name}.indexer.k_cache"] = v.MLAAttentionSpec(
                    block_size=block_size, num_kv_heads=1, head_size=layer.index_head_dim, dtype=dtype,
                    cache_role=v.SparseCacheRole.INDEXER)
        elif layer.kind == SLIDING:
            # commandr.py / cohere2_moe.py pass sliding_window + 1 (vLLM's window, not transformers')
            window = layer.window + (model.model_type in ("cohere2", "cohere2_moe"))
            specs[name] = v.SlidingWindowSpec(sliding_window=window, head_size_v=layer.head_dim_v, **common)
        else:
            specs[name] = v.ChunkedLocalAttentionSpec(attention_chunk_size=layer.window, **common)
    return specs


def planning_config(v, *, max_model_len: int, auto: bool, batched: int, block_size: int, hybrid: bool, tp: int):
    """A VllmConfig on the CPU device with the model_config stand-in kvmem.oracles.vllm describes."""
    config = v.VllmConfig(
        device_config=v.DeviceConfig(device="cpu"),
        scheduler_config=v.SchedulerConfig(max_num_batched_tokens=batched, max_model_len=max_model_len,
                                           is_encoder_decoder=False),
        cache_config=v.CacheConfig(block_size=block_size),
        parallel_config=v.ParallelConfig(tensor_parallel_size=tp))
    config.scheduler_config.disable_hybrid_kv_cache_manager = not hybrid
    stand_in = types.SimpleNamespace(max_model_len=max_model_len, supports_kv_cache_grouping=False,
                                     original_max_model_len=-1 if auto else max_model_len)
    object.__setattr__(config, "model_config", stand_in)
    return config

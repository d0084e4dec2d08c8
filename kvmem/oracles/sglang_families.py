"""SGLang 0.5.23's own reading of a config as the judge of kvmem's ``sglang`` layout, family by family.

For a config.json (a real checkpoint's, or a seeded variation of one) this builds SGLang's
``ModelConfig`` (python/sglang/srt/configs/model_config.py) from a temporary directory on the CPU
and reads off what its pools are made from:
    which layers a pool holds   is_hybrid_swa / swa_attention_layer_ids / full_attention_layer_ids
                                (get_hybrid_layer_ids), or a linear hybrid's mambaish_config
                                (configs/hybrid_arch.py): full_attention_layer_ids and the state layers
    bytes per token per layer   MHA: get_num_kv_heads(tp) x (head_dim + v_head_dim), SWA layers
                                get_swa_num_kv_heads(tp) x (swa_head_dim + swa_v_head_dim) (the
                                pools' shapes, kv_cache_configurator.py / swa_memory_pool.py);
                                MLA: kv_lora_rank + qk_rope_head_dim, one head
    DSA indexer                 index_head_dim on every layer but dsa_layer_skips_topk's
    a request's state           mamba2_cache_params.mamba_cache_per_req (configs/mamba_utils.py)
and compares each with kvmem.engines.sglang.pools.make_layout for the model kvmem reads from the same
config. The KV dtype is bf16 (2 B), tp 1 unless a case says otherwise.

SGLang's conv state dtype is bfloat16 (SGLANG_MAMBA_CONV_DTYPE's default) and its SSM dtype the
config's mamba_ssm_dtype, else float32 (mamba2_state_dtype); kvmem's default options agree for a
bf16 checkpoint whose config names float32 or nothing.
"""

from __future__ import annotations

import json
import os
import random
import tempfile

from ..engines.sglang.pools import DEFAULTS, make_layout, state_parts_of
from ..model import Model
from .report import Check
from .sglang import _sglang

__all__ = ["sglang_view", "kvmem_view", "run_config", "variations"]

KV_BYTES = 2   # bf16


def _model_config(cfg: dict):
    _sglang()   # the torchvision stand-in, before SGLang's config package is imported
    import logging
    import warnings
    from sglang.srt.configs.model_config import ModelConfig
    warnings.filterwarnings("ignore")
    logging.getLogger("sglang").setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory() as path:
        with open(os.path.join(path, "config.json"), "w") as f:
            json.dump(cfg, f)
        return ModelConfig(path, trust_remote_code=False)


def sglang_view(cfg: dict, tp: int = 1) -> dict:
    """What SGLang's ModelConfig says the pools hold (see the module docstring)."""
    from sglang.srt.runtime_context import get_parallel
    # the widths a launched server publishes (runtime_context.py): one attention-TP group of tp ranks
    with get_parallel().override(tp_size=tp, attn_tp_size=tp, enable_cp_tp_group_sharing=False):
        return _view(cfg, tp)


def _view(cfg: dict, tp: int) -> dict:
    from sglang.srt.configs.hybrid_arch import mambaish_config
    from sglang.srt.configs.model_config import AttentionArch, dsa_layer_skips_topk, is_deepseek_dsa
    mc = _model_config(cfg)
    layers = mc.num_hidden_layers
    mamba = mambaish_config(mc)
    swa, linear, state = [], [], 0
    if mamba is not None:
        full = list(mamba.full_attention_layer_ids)
        params = mamba.mamba2_cache_params
        linear, state = list(params.layers), int(params.mamba_cache_per_req)
    elif mc.is_hybrid_swa:
        full, swa = list(mc.full_attention_layer_ids), list(mc.swa_attention_layer_ids)
    else:
        full = list(range(layers))
    rows, index = {}, {}
    if mc.attention_arch == AttentionArch.MLA:
        rows["full"] = (mc.kv_lora_rank + mc.qk_rope_head_dim) * KV_BYTES
        if getattr(mc, "index_head_dim", None) and is_deepseek_dsa(mc.hf_config):
            index = {i: not dsa_layer_skips_topk(mc.hf_config, i) for i in full}
    else:
        rows["full"] = mc.get_num_kv_heads(tp) * (mc.head_dim + mc.v_head_dim) * KV_BYTES
        if swa:
            rows["swa"] = mc.get_swa_num_kv_heads(tp) * (mc.swa_head_dim + mc.swa_v_head_dim) * KV_BYTES
    return {"arch": "mla" if mc.attention_arch == AttentionArch.MLA else "mha", "full": sorted(full),
            "swa": sorted(swa), "linear": sorted(linear), "rows": rows, "indexer": index, "state": state}


def kvmem_view(cfg: dict, tp: int = 1) -> dict:
    """The same quantities from kvmem's model and its SGLang layout."""
    model = Model.from_hf_config(cfg)
    options = {k: v for k, v in DEFAULTS.items() if k not in ("version",)}
    layout = make_layout(model, kv_dtype="bf16", tp=tp, **options)
    rows = {role: layout.k_row[role] + layout.v_row[role] for role in layout.k_row}
    index = {}
    if layout.kind == "nsa":
        index = {i: bool(model.layers[i].index_head_dim) for i in layout.full}
    state = sum(sum(state_parts_of(model, layout, i, tp)) for i in layout.linear)
    return {"arch": "mha" if layout.kind == "mha" else "mla", "full": list(layout.full), "swa": list(layout.swa),
            "linear": list(layout.linear), "rows": rows, "indexer": index, "state": state}


def run_config(name: str, cfg: dict, tp: int = 1) -> list[Check]:
    """kvmem's layout of ``cfg`` beside SGLang's ModelConfig, quantity by quantity."""
    ours, theirs = kvmem_view(cfg, tp), sglang_view(cfg, tp)
    return [Check(name, key, ours[key], theirs[key]) for key in theirs]


def variations(cfg: dict, n: int, seed: int, fields: dict) -> list[tuple[str, dict]]:
    """``n`` seeded variations of ``cfg``: each field in ``fields`` (name -> candidate values) drawn anew."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        varied = dict(cfg)
        for key, values in fields.items():
            varied[key] = rng.choice(values) if not callable(values) else values(rng, varied)
        out.append((f"{cfg.get('model_type')}-{seed}-{i}", varied))
    return out

"""SGLang 0.5.23's own DefaultPoolConfigurator as the judge of kvmem.engines.sglang.draft.

The configurator is built with an EAGLE speculative algorithm and ``eagle_draft_num_layers`` draft layers
on a stand-in ``kvc`` (the attributes __init__ and _compute_cell_size read: SGLang's ModelConfig from the
config.json, bf16 KV, layers, no fused or unified pool, no page sharding), its server-context reads patched
to SGLang's defaults for the call; its cell (target + draft) and calculate_pool_sizes' tokens are compared.
"""

from __future__ import annotations

import types
from typing import Any
from unittest import mock

from ..engines.sglang.draft import draft_pool
from .report import Check
from .sglang_pool_sizing import model_config


def sglang_pool(model, *, kv_memory: int, draft_layers: int, tp: int = 1, page_size: int = 1) -> tuple[int, int]:
    """(SGLang's cell with the draft, its max_total_num_tokens)."""
    from .sglang_runtime import load
    sg = load()
    from sglang.srt.model_executor import pool_configurator as pc
    mc = model_config(model.name, model.config)
    layers = mc.num_hidden_layers
    spec = types.SimpleNamespace(is_eagle=lambda: True, is_standalone=lambda: False,
                                 is_dflash_family=lambda: False, is_none=lambda: False, is_dspark=lambda: False)
    kvc = types.SimpleNamespace(
        kv_cache_dtype_str="auto", model_config=mc, kv_cache_dtype=sg.torch.bfloat16, page_size=page_size,
        layer_info=types.SimpleNamespace(num_effective_layers=layers, start_layer=0, end_layer=layers),
        spec_algorithm=spec, is_draft_worker=False, fused_entry_bytes=lambda _kind: None, pp_size=1,
        spec_aux_config=types.SimpleNamespace(eagle_draft_num_layers=draft_layers),
        server_args=types.SimpleNamespace(enable_hisparse=False), use_mla_backend=mc.attention_arch.name == "MLA",
        attn_dp_size=1, mambaish_config=None)
    from sglang.srt.runtime_context import get_parallel
    parallel = types.SimpleNamespace(attn_tp_size=tp, attn_dcp_size=1, tp_size=tp)
    with get_parallel().override(tp_size=tp, attn_tp_size=tp, enable_dsa_cache_layer_split=False), \
            mock.patch.object(pc, "get_parallel", lambda: parallel), \
            mock.patch.object(pc, "get_schedule", lambda: types.SimpleNamespace(max_total_tokens=None)), \
            mock.patch.object(pc, "get_memory",
                              lambda: types.SimpleNamespace(enable_hisparse=False, enable_unified_memory=False)), \
            mock.patch.object(pc, "compute_page_shard_scratch_bytes", lambda *_a, **_k: 0):
        configurator = pc.DefaultPoolConfigurator(kvc)
        config = configurator.calculate_pool_sizes(kv_memory, page_size)
    return configurator._cell_size, config.max_total_num_tokens


def run_case(name: str, model, *, kv_memory: int, draft_layers: int, tp: int = 1) -> list[Check]:
    ours = draft_pool(model, kv_memory=kv_memory, draft_layers=draft_layers, tp=tp)
    cell, tokens = sglang_pool(model, kv_memory=kv_memory, draft_layers=draft_layers, tp=tp)
    return [Check(name, "cell with the draft", ours.cell_bytes + ours.draft_cell_bytes, cell),
            Check(name, "max_total_num_tokens", ours.target_tokens, tokens)]


def directed_cases() -> list[dict]:
    from ..catalog import get_model
    return [dict(name=f"{preset} tp{tp} {d} draft layer(s)", model=get_model(preset), kv_memory=20 << 30,
                 draft_layers=d, tp=tp)
            for preset, tp in (("llama-3.1-8b", 1), ("llama-3.1-70b", 4), ("deepseek-v2-lite", 1), ("qwen3-8b", 2))
            for d in (1, 3)]


def run_capacity_case(name: str, model, *, kv_memory: int, tp: int = 1, **spec) -> list[Check]:
    """kvmem.capacity with the speculative options (the draft's layers resolved by kvmem.engines.sglang.draft)
    against SGLang's configurator for those layers: the cell with the draft and max_total_num_tokens."""
    from ..engines import capacity
    from ..engines.sglang.draft import draft_layers
    layers = draft_layers(model, spec).layers
    cap = capacity(model, engine="sglang", kv_memory=kv_memory, kv_dtype="auto", tp=tp, max_model_len=None, **spec)
    cell, tokens = sglang_pool(model, kv_memory=kv_memory, draft_layers=layers, tp=tp)
    return [Check(name, "cell with the draft", cap.details.cell_bytes_per_token, cell),
            Check(name, "max_total_num_tokens", cap.tokens, tokens)]


# An EAGLE head for Llama 3.1 8B as its published config has it (one LlamaDecoderLayer: num_hidden_layers 1,
# 8 KV heads of 128; yuhuili/EAGLE-LLaMA3.1-Instruct-8B config.json): kvmem reads its layers as SGLang does.
EAGLE_HEAD = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
              "intermediate_size": 14336, "num_attention_heads": 32, "num_key_value_heads": 8,
              "num_hidden_layers": 1, "vocab_size": 128256, "max_position_embeddings": 8192,
              "rms_norm_eps": 1e-5, "rope_theta": 500000.0, "torch_dtype": "bfloat16"}


def capacity_cases() -> list[dict]:
    from ..catalog import get_model
    return [dict(name="llama-3.1-8b EAGLE head", model=get_model("llama-3.1-8b"), kv_memory=20 << 30,
                 speculative_algorithm="EAGLE", speculative_draft_model_path=EAGLE_HEAD),
            dict(name="llama-3.1-70b tp4 EAGLE3 head", model=get_model("llama-3.1-70b"), kv_memory=30 << 30, tp=4,
                 speculative_algorithm="EAGLE3", speculative_draft_model_path=EAGLE_HEAD),
            dict(name="deepseek-v3 tp8 NEXTN", model=get_model("deepseek-v3"), kv_memory=20 << 30, tp=8,
                 speculative_algorithm="NEXTN", speculative_num_steps=3, speculative_eagle_topk=1,
                 speculative_num_draft_tokens=4)]


def resolved_speculative(model_name: str, *, gpu_mib: int, tp: int, **spec) -> dict:
    """SGLang's resolved server arguments (ServerArgs.resolve_once on the CPU) with the speculative flags."""
    from unittest import mock as _mock

    from ..catalog import preset
    from .sglang_runtime import config_dir, load
    load()
    import sglang.srt.arg_groups.memory_hook as memory_hook
    from sglang.srt.server_args import ServerArgs
    with _mock.patch.object(memory_hook, "get_device_memory_capacity", lambda *_a: float(gpu_mib)):
        server_args = ServerArgs(model_path=config_dir(preset(model_name)["config"]), tp_size=tp, device="cuda",
                                 **spec)
        server_args.resolve_once()
    return server_args.resolved_dict()


def sglang_swa_pools(model, *, kv_memory: int, draft_layers: int, draft_swa_layers: int | None,
                     page_size: int = 1, ratio: float = 0.8) -> tuple[int, int]:
    """(full_layer_tokens, swa_layer_tokens) of SGLang's HybridSWAPoolConfigurator with an EAGLE draft of
    ``draft_layers`` layers, ``draft_swa_layers`` of them sliding (spec_aux_config.eagle_draft_swa_num_layers)."""
    from .sglang_runtime import load
    sg = load()
    from sglang.srt.model_executor import pool_configurator as pc
    mc = model_config(model.name, model.config)
    spec = types.SimpleNamespace(is_eagle=lambda: True, is_standalone=lambda: False,
                                 is_dflash_family=lambda: False, is_none=lambda: False, is_dspark=lambda: False)
    kvc = types.SimpleNamespace(
        kv_cache_dtype_str="auto", model_config=mc, kv_cache_dtype=sg.torch.bfloat16,
        layer_info=types.SimpleNamespace(full_attention_layer_ids=list(mc.full_attention_layer_ids),
                                         swa_attention_layer_ids=list(mc.swa_attention_layer_ids)),
        sliding_window_size=mc.sliding_window_size, page_size=page_size, spec_algorithm=spec,
        is_draft_worker=False, fused_entry_bytes=lambda _kind: None, attn_dp_size=1,
        spec_aux_config=types.SimpleNamespace(eagle_draft_num_layers=draft_layers,
                                              eagle_draft_swa_num_layers=draft_swa_layers,
                                              dflash_draft_num_layers=None, dspark_num_stages=None))
    with mock.patch.object(pc, "get_parallel", lambda: types.SimpleNamespace(attn_tp_size=1, attn_dcp_size=1)), \
            mock.patch.object(pc, "get_schedule", lambda: types.SimpleNamespace(swa_full_tokens_ratio=ratio)), \
            mock.patch.object(pc, "get_memory", lambda: types.SimpleNamespace(enable_unified_memory=False)):
        config = pc.HybridSWAPoolConfigurator(kvc).calculate_pool_sizes(kv_memory, page_size)
    return config.full_max_total_num_tokens, config.swa_max_total_num_tokens


def sglang_draft_worker_pools(draft, *, full: int, swa: int, tp: int = 1) -> tuple[int, list[str]]:
    """The draft worker's pools beside a hybrid-SWA target, built on the CPU as _build_token_to_kv_pool would for the
    draft's own ModelConfig (kv_cache_configurator.py): a hybrid-SWA draft's SWA and full MHATokenToKVPool (as
    SWAKVPool holds them: the SWA layers at ``swa`` tokens, the full layers at ``full``), any other draft one
    MHATokenToKVPool of its layers at max_total_num_tokens (``full``); bf16. (their bytes, their log lines)"""
    from sglang.srt.runtime_context import get_parallel

    from .sglang_runtime import load
    sg = load()
    mc = model_config(draft.name, draft.config)
    common = dict(page_size=1, dtype=sg.torch.bfloat16, device="cpu", enable_memory_saver=False)
    with get_parallel().override(tp_size=tp, attn_tp_size=tp, attn_dcp_size=1):
        if mc.is_hybrid_swa:
            shapes = [(swa, mc.get_swa_num_kv_heads(tp), mc.swa_head_dim, mc.swa_v_head_dim,
                       len(mc.swa_attention_layer_ids)),
                      (full, mc.get_num_kv_heads(tp), mc.head_dim, mc.v_head_dim, len(mc.full_attention_layer_ids))]
        else:
            shapes = [(full, mc.get_num_kv_heads(tp), mc.head_dim, mc.v_head_dim, mc.num_hidden_layers)]
        total = 0
        del sg.lines[:]
        for size, heads, head_dim, v_head_dim, layers in shapes:
            pool = sg.pool.MHATokenToKVPool(size=size, head_num=heads, head_dim=head_dim, v_head_dim=v_head_dim,
                                            layer_num=layers, start_layer=0, end_layer=layers, **common)
            total += sum(int(x) for x in pool.get_kv_size_bytes())
            del pool
    return total, [line for line in sg.lines if line.startswith("KV Cache is allocated")]


def run_swa_capacity_case(name: str, model, *, kv_memory: int, **spec) -> list[Check]:
    """kvmem.capacity's full and SWA tokens with the speculative options against HybridSWAPoolConfigurator's, and
    the draft worker's own pools (sglang_draft_worker_pools) at those tokens."""
    from ..engines import capacity
    from ..engines.sglang.draft import draft_layers
    drafting = draft_layers(model, spec)
    cap = capacity(model, engine="sglang", kv_memory=kv_memory, kv_dtype="auto", max_model_len=None, **spec)
    full, swa = sglang_swa_pools(model, kv_memory=kv_memory, draft_layers=drafting.layers,
                                 draft_swa_layers=drafting.swa_layers or None)
    checks = [Check(name, "full_layer_tokens", cap.details.full_layer_tokens, full),
              Check(name, "swa_layer_tokens", cap.details.swa_layer_tokens, swa)]
    if drafting.draft is not None:
        draft_bytes, lines = sglang_draft_worker_pools(drafting.draft, full=full, swa=swa)
        details: Any = cap.details
        checks += [Check(name, "draft worker's pool bytes", details.draft_pool_bytes, draft_bytes),
                   Check(name, "draft worker's log lines", list(cap.log_lines[-len(lines):]), lines)]
    return checks


# gpt-oss's EAGLE3 head as a one-layer Llama (full attention, 8 KV heads of 64)
GPT_OSS_EAGLE3 = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 2880,
                  "intermediate_size": 17280, "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64,
                  "num_hidden_layers": 1, "vocab_size": 201088, "max_position_embeddings": 131072,
                  "torch_dtype": "bfloat16"}


def swa_capacity_cases() -> list[dict]:
    from ..catalog import get_model
    return [dict(name="gpt-oss-20b EAGLE3 head", model=get_model("gpt-oss-20b"), kv_memory=20 << 30,
                 speculative_algorithm="EAGLE3", speculative_draft_model_path=GPT_OSS_EAGLE3),
            dict(name="gpt-oss-120b STANDALONE gpt-oss-20b", model=get_model("gpt-oss-120b"), kv_memory=30 << 30,
                 speculative_algorithm="STANDALONE", speculative_draft_model_path="gpt-oss-20b")]


def sglang_dsa(model, *, kv_memory: int, draft_layers: int, tp: int = 1, page_size: int = 64) -> dict:
    """A DSA target (DeepSeek-V3.2, GLM-5) with ``draft_layers`` MTP layers: SGLang's DefaultPoolConfigurator cell and
    tokens (fp8 KV, a backend with the scaled 656-byte latent: flashmla_sparse / flashmla_kv, no HiSparse, no PD),
    and the draft worker's DSATokenToKVPool of ``draft_layers`` layers at those tokens: its bytes and log line."""
    from .sglang_runtime import load
    sg = load()
    import torch
    from sglang.srt.mem_cache import kv_cache_configurator as kc
    from sglang.srt.model_executor import pool_configurator as pc
    from sglang.srt.runtime_context import get_parallel
    mc = model_config(model.name, model.config)
    layers = mc.num_hidden_layers
    spec = types.SimpleNamespace(is_eagle=lambda: True, is_standalone=lambda: False, is_dflash_family=lambda: False,
                                 is_none=lambda: False, is_dspark=lambda: False)
    kvc = types.SimpleNamespace(
        kv_cache_dtype_str="fp8_e4m3", model_config=mc, kv_cache_dtype=torch.float8_e4m3fn, page_size=page_size,
        layer_info=types.SimpleNamespace(num_effective_layers=layers, start_layer=0, end_layer=layers),
        spec_algorithm=spec, is_draft_worker=False, fused_entry_bytes=lambda _kind: None, pp_size=1,
        spec_aux_config=types.SimpleNamespace(eagle_draft_num_layers=draft_layers),
        server_args=types.SimpleNamespace(enable_hisparse=False), use_mla_backend=True, attn_dp_size=1,
        mambaish_config=None)
    parallel = types.SimpleNamespace(attn_tp_size=tp, attn_dcp_size=1, tp_size=tp, enable_dsa_cache_layer_split=False)
    kernel = types.SimpleNamespace(kernel=types.SimpleNamespace(dsa_prefill_backend="flashmla_sparse",
                                                                dsa_decode_backend="flashmla_kv"))
    memory = types.SimpleNamespace(enable_hisparse=False, enable_unified_memory=False, enable_hierarchical_cache=False,
                                   enable_unified_cache_external_linker=False)
    with get_parallel().override(tp_size=tp, attn_tp_size=tp, enable_dsa_cache_layer_split=False, attn_dcp_size=1), \
            mock.patch.object(pc, "get_parallel", lambda: parallel), \
            mock.patch.object(pc, "get_schedule", lambda: types.SimpleNamespace(max_total_tokens=None)), \
            mock.patch.object(pc, "get_memory", lambda: memory), mock.patch.object(kc, "get_memory", lambda: memory), \
            mock.patch.object(kc, "get_disagg", lambda: types.SimpleNamespace(disaggregation_mode="null")), \
            mock.patch.object(kc, "get_exec", lambda: kernel), \
            mock.patch.object(pc, "compute_page_shard_scratch_bytes", lambda *_a, **_k: 0):
        configurator = pc.DefaultPoolConfigurator(kvc)
        tokens = configurator.calculate_pool_sizes(kv_memory, page_size).max_total_num_tokens
        dim = kc.calculate_mla_kv_cache_dim(model_config=mc, kv_cache_dtype=torch.float8_e4m3fn)
        del sg.lines[:]
        pool = sg.pool.DSATokenToKVPool(size=tokens, page_size=page_size, kv_lora_rank=mc.kv_lora_rank,
                                        dtype=torch.float8_e4m3fn, qk_rope_head_dim=mc.qk_rope_head_dim,
                                        layer_num=draft_layers, device="cpu", index_head_dim=mc.index_head_dim,
                                        enable_memory_saver=False, kv_cache_dim=dim, start_layer=0,
                                        end_layer=draft_layers)
        draft = int(pool.get_kv_size_bytes())
        del pool
    line = next((text for text in sg.lines if text.startswith("KV Cache is allocated")), None)
    return {"cell": configurator._cell_size, "tokens": tokens, "draft_pool_bytes": draft, "draft_log": line}


def run_dsa_case(name: str, model, *, kv_memory: int, tp: int = 1, **spec) -> list[Check]:
    """kvmem.capacity with the speculative options beside sglang_dsa for the draft layers kvmem resolves."""
    from ..engines import capacity
    from ..engines.sglang.draft import draft_layers
    layers = draft_layers(model, spec).layers
    cap = capacity(model, engine="sglang", kv_memory=kv_memory, kv_dtype="fp8_e4m3", tp=tp, max_model_len=None,
                   page_size=64, **spec)
    theirs = sglang_dsa(model, kv_memory=kv_memory, draft_layers=layers, tp=tp)
    details: Any = cap.details
    ours = {"cell": details.cell_bytes_per_token, "tokens": cap.tokens,
            "draft_pool_bytes": details.draft_pool_bytes, "draft_log": cap.log_lines[-1]}
    return [Check(name, key, ours[key], theirs[key]) for key in theirs]


def dsa_cases() -> list[dict]:
    from ..catalog import get_model
    return [dict(name=f"{preset} tp{tp} NEXTN {gib} GiB", model=get_model(preset), kv_memory=gib << 30, tp=tp,
                 speculative_algorithm="NEXTN")
            for preset, tp, gib in (("deepseek-v3.2", 8, 20), ("glm-5", 8, 20), ("glm-5.2", 8, 40), ("glm-5", 4, 7))]

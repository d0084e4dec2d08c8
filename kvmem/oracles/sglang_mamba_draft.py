"""SGLang 0.5.23's own sizing of a Mamba hybrid target with its own MTP head as the draft (EAGLE / NEXTN without a
draft model), run on the CPU, as the judge of kvmem.engines.sglang.draft.mamba_draft and mamba.state_pool.

For a config.json, a KV budget (SGLang's ``rest``) and the speculative flags:
    ServerArgs                     SGLang's resolution of the flags: the verify width (speculative_num_draft_tokens),
                                   max_running_requests (48 under speculative decoding), the radix-cache strategy
    _resolve_eagle_aux_hidden_state  eagle_draft_num_layers, the draft's share of the cell (spec_aux_hidden_state.py:
                                   a path-less draft reads the target's num_nextn_predict_layers)
    _handle_max_mamba_cache        the state slots with the verify states reserved (kv_cache_configurator.py)
    DefaultPoolConfigurator        the cell with the draft's share and max_total_num_tokens (pool_configurator.py)
    resolve_max_num_reqs           the requests admitted
    MHATokenToKVPool               the draft worker's pool: one attention layer (full_attention_layer_ids [0] of a
                                   draft's HybridLinearKVPool) at the target's #tokens, its K and V bytes
Server context is patched for the call only, with the resolved settings in the stand-ins; SGLang's code is not
edited.
"""

from __future__ import annotations

import functools
import types
from unittest import mock

from .report import Check
from .sglang_pool_sizing import Context, model_config, resolved_defaults
from .sglang_runtime import config_dir
from .sglang_runtime import load as _load_sglang

__all__ = ["sglang_sizes", "kvmem_sizes", "run_case", "cases"]

GB = 1 << 30


def _spec(algorithm: str):
    eagle = algorithm in ("EAGLE", "EAGLE3", "NEXTN")
    return types.SimpleNamespace(is_eagle=lambda: eagle, is_standalone=lambda: algorithm == "STANDALONE",
                                 is_eagle3=lambda: algorithm == "EAGLE3", is_dflash_family=lambda: False,
                                 is_none=lambda: False, is_dspark=lambda: False)


def sglang_sizes(cfg: dict, *, kv_memory: int, tp: int = 1, page_size: int = 1, **flags) -> dict:
    """SGLang's numbers for ``cfg`` on ``kv_memory`` bytes with the speculative ``flags`` (module docstring)."""
    s = _load_sglang()
    from sglang.srt.configs.hybrid_arch import mambaish_config
    from sglang.srt.mem_cache import kv_cache_configurator as kc
    from sglang.srt.model_executor import pool_configurator as pc
    from sglang.srt.model_executor.model_runner_components import spec_aux_hidden_state as aux
    from sglang.srt.runtime_context import get_parallel
    d = resolved_defaults(cfg, tp=tp, page_size=page_size, **flags)
    algorithm = d["speculative_algorithm"]
    spec_bag = types.SimpleNamespace(speculative_num_draft_tokens=d["speculative_num_draft_tokens"],
                                     speculative_draft_model_path=d["speculative_draft_model_path"],
                                     speculative_draft_model_revision=None)
    # eagle_draft_num_layers as SGLang resolves it (ModelConfig.from_server_args builds the draft-mode config)
    from sglang.srt.server_args import ServerArgs
    server_args = ServerArgs(model_path=config_dir(cfg), tp_size=tp, device="cuda")
    mc = model_config("target", cfg)
    config = types.SimpleNamespace(draft_kv_num_layers=None, draft_model_config=None, eagle_draft_num_layers=None,
                                   eagle_draft_swa_num_layers=None, eagle_use_aux_hidden_state=False,
                                   eagle_aux_hidden_state_layer_ids=None)
    with mock.patch.object(aux, "get_spec", lambda: spec_bag):
        aux._resolve_eagle_aux_hidden_state(config=config, server_args=server_args, model_config=mc,
                                            spec_algorithm=_spec(algorithm), is_draft_worker=False)
    schedule = types.SimpleNamespace(max_mamba_cache_size=None, mamba_full_memory_ratio=d["mamba_full_memory_ratio"],
                                     max_running_requests=d["max_running_requests"],
                                     disable_overlap_schedule=d["disable_overlap_schedule"], max_total_tokens=None,
                                     page_size=page_size)
    memory = types.SimpleNamespace(disable_radix_cache=d["disable_radix_cache"], enable_unified_memory=False,
                                   enable_hisparse=False)
    exec_ = types.SimpleNamespace(mamba=types.SimpleNamespace(
        enable_linear_replayssm_spec=d["enable_linear_replayssm_spec"],
        enable_mamba_extra_buffer=d["mamba_radix_cache_strategy"] == "extra_buffer",
        enable_mamba_extra_buffer_lazy=False))
    out = {"draft_cell_layers": config.eagle_draft_num_layers or 0, "verify_width": d["speculative_num_draft_tokens"]}
    with get_parallel().override(tp_size=tp, attn_tp_size=tp, enable_cp_tp_group_sharing=False,
                                 enable_dsa_cache_layer_split=False), \
            mock.patch.object(kc, "get_schedule", lambda: schedule), \
            mock.patch.object(kc, "get_memory", lambda: memory), \
            mock.patch.object(kc, "get_exec", lambda: exec_), mock.patch.object(kc, "get_spec", lambda: spec_bag), \
            mock.patch.object(kc, "get_context", lambda: Context(schedule)), \
            mock.patch.object(kc, "_pd_prefill_skips_mamba_spec_state", lambda: False), \
            mock.patch.object(pc, "get_parallel", lambda: types.SimpleNamespace(attn_tp_size=tp, attn_dcp_size=1)), \
            mock.patch.object(pc, "get_schedule", lambda: schedule), \
            mock.patch.object(pc, "get_memory", lambda: memory), \
            mock.patch.object(pc, "compute_page_shard_scratch_bytes", lambda *_a, **_k: 0):
        mamba = mambaish_config(mc)
        n = mc.num_hidden_layers
        kvc = types.SimpleNamespace(
            mambaish_config=mamba, pp_size=1, fused_entry_bytes=lambda _kind: None, spec_algorithm=_spec(algorithm),
            hybrid_gdn_config=None, hybrid_kda_config=None, extra_mamba_cache_bytes_per_req=0, attn_dp_size=1,
            model_config=mc, kv_cache_dtype_str="auto", kv_cache_dtype=s.torch.bfloat16, page_size=page_size,
            layer_info=types.SimpleNamespace(num_effective_layers=n, start_layer=0, end_layer=n),
            is_draft_worker=False, spec_aux_config=config, use_mla_backend=False,
            server_args=types.SimpleNamespace(enable_hisparse=False))
        kvc._calculate_mamba_ratio = functools.partial(kc.KVCacheConfigurator._calculate_mamba_ratio, kvc)
        try:
            rest = int(kc.KVCacheConfigurator._handle_max_mamba_cache(kvc, kv_memory / GB) * GB)
            out["slots"] = schedule.max_mamba_cache_size
            configurator = pc.DefaultPoolConfigurator(kvc)
            tokens = configurator.calculate_pool_sizes(rest, page_size).max_total_num_tokens
            out.update(cell=configurator._cell_size, tokens=tokens,
                       max_running_requests=kc.KVCacheConfigurator.resolve_max_num_reqs(kvc, tokens), error=None)
        except (ValueError, RuntimeError) as error:
            out.update(slots=schedule.max_mamba_cache_size, error=str(error).split(".")[0])
            return out
        heads = mc.get_num_kv_heads(tp)
    pool = s.pool.MHATokenToKVPool(size=tokens, page_size=page_size, dtype=s.torch.bfloat16, head_num=heads,
                                   head_dim=mc.head_dim, v_head_dim=mc.v_head_dim, layer_num=1, device="cpu",
                                   enable_memory_saver=False, start_layer=0, end_layer=1)
    out["draft_pool_bytes"] = sum(int(x) for x in pool.get_kv_size_bytes())
    del pool
    return out


def kvmem_sizes(cfg: dict, *, kv_memory: int, tp: int = 1, page_size: int = 1, **flags) -> dict:
    """The same from kvmem's SGLang mode."""
    import kvmem

    from ..engines.sglang.draft import mamba_draft
    model = kvmem.Model.from_hf_config(cfg)
    drafting = mamba_draft(model, flags)
    cap = kvmem.capacity(model, engine="sglang", kv_memory=kv_memory, kv_dtype="bf16", tp=tp, page_size=page_size,
                         max_model_len=None, **flags)
    d = cap.details
    out = {"draft_cell_layers": drafting.layers, "verify_width": drafting.draft_tokens,
           "slots": d.max_mamba_cache_size}
    if cap.refusal is not None:
        out["error"] = cap.refusal.reason.removeprefix("SGLang raises RuntimeError: ").split(".")[0]
        return out
    out.update(cell=d.cell_bytes_per_token, tokens=cap.tokens, max_running_requests=d.max_running_requests,
               error=None, draft_pool_bytes=d.draft_pool_bytes)
    return out


def run_case(name: str, cfg: dict, **setting) -> list[Check]:
    ours, theirs = kvmem_sizes(cfg, **setting), sglang_sizes(cfg, **setting)
    return [Check(name, key, ours.get(key), theirs.get(key)) for key in theirs]


def _with(name: str, **text) -> dict:
    """A preset's config.json with fields set on its text config (the one ModelConfig reads)."""
    import copy

    from ..catalog import preset
    cfg = copy.deepcopy(preset(name)["config"])
    (cfg["text_config"] if isinstance(cfg.get("text_config"), dict) else cfg).update(text)
    return cfg


def cases() -> list[tuple[str, dict, dict]]:
    """(name, config.json, setting): the published configs (no num_nextn_predict_layers: no share of the cell),
    and with num_nextn_predict_layers set (a share over the attention layers)."""
    return [
        ("qwen3-next tp2 NEXTN 30 GiB", _with("qwen3-next-80b-a3b"),
         dict(kv_memory=30 * GB, tp=2, speculative_algorithm="NEXTN")),
        ("qwen3-next tp4 EAGLE 5 steps 20 GiB", _with("qwen3-next-80b-a3b"),
         dict(kv_memory=20 * GB, tp=4, speculative_algorithm="EAGLE", speculative_num_steps=5,
              speculative_eagle_topk=1, speculative_num_draft_tokens=6)),
        ("qwen3-next num_nextn_predict_layers 1, tp2 NEXTN 30 GiB",
         _with("qwen3-next-80b-a3b", num_nextn_predict_layers=1),
         dict(kv_memory=30 * GB, tp=2, speculative_algorithm="NEXTN")),
        ("qwen3.5-27b NEXTN 12 GiB", _with("qwen3.5-27b"), dict(kv_memory=12 * GB, speculative_algorithm="NEXTN")),
        ("qwen3.5-27b num_nextn_predict_layers 2, NEXTN 40 GiB max_running_requests 16",
         _with("qwen3.5-27b", num_nextn_predict_layers=2),
         dict(kv_memory=40 * GB, speculative_algorithm="NEXTN", max_running_requests=16)),
        ("qwen3.5-27b NEXTN 1 GiB max_running_requests 8", _with("qwen3.5-27b"),
         dict(kv_memory=GB, speculative_algorithm="NEXTN", max_running_requests=8)),
        ("nemotron-h-8b NEXTN 8 GiB page 16", _with("nemotron-h-8b"),
         dict(kv_memory=8 * GB, page_size=16, speculative_algorithm="NEXTN")),
    ]

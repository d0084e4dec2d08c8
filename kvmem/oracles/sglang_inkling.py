"""SGLang 0.5.23's own sizing of an Inkling checkpoint, run on the CPU, as the judge of kvmem.engines.sglang.inkling.

For a config.json (model_type inkling_mm_model) and a KV budget (SGLang's ``rest``, kvmem's ``kv_memory``):
    ModelConfig                   SGLang's own, read from the file (its InklingMMConfig): the full and SWA layer
                                  ids, get_num_kv_heads / get_swa_num_kv_heads(tp) x (head_dim + v_head_dim) rows
    InklingConvCacheParams        mambaish_config(...).mamba2_cache_params.mamba_cache_per_req: a request's conv
                                  state (configs/inkling.py; --enable-scattered-sconv off, SGLang's default)
    _handle_max_mamba_cache       the state slots and the bytes left (mem_cache/kv_cache_configurator.py)
    HybridSWAPoolConfigurator     the full/SWA split of those bytes (model_executor/pool_configurator.py), with the
                                  window InklingForConditionalGeneration.get_attention_sliding_window_size gives
    resolve_max_num_reqs          the requests admitted (the state slots // 5 under the extra-buffer strategy)
with the server settings SGLang resolves for Inkling (``resolved_defaults``: its ServerArgs pipeline, the model
override's ratios and strategy) held in the stand-ins (server_args defaults otherwise: radix cache and overlap
scheduling on, no speculative decoding). SGLang's code is not edited; get_exec / get_schedule / get_memory /
get_parallel / get_context are patched for the call only, as kvmem/oracles/sglang_pool_sizing.py does.
"""

from __future__ import annotations

import functools
import random
import types
from typing import Any
from unittest import mock

from ..model import Model
from .report import Check
from .sglang_pool_sizing import Context, no_speculation, resolved_defaults
from .sglang_pool_sizing import model_config as _model_config
from .sglang_runtime import load as _load_sglang

__all__ = ["resolved_defaults", "sglang_sizes", "kvmem_sizes", "run_case", "random_case", "wrap", "REAL_SHAPES"]

GB = 1 << 30
_EXEC = types.SimpleNamespace(comm=types.SimpleNamespace(enable_scattered_sconv=False), mamba=types.SimpleNamespace(
    enable_linear_replayssm_spec=False, enable_mamba_extra_buffer=True, enable_mamba_extra_buffer_lazy=False))


@functools.cache
def _settings(cfg_json: str) -> tuple:
    import json
    d = resolved_defaults(json.loads(cfg_json))
    return (d["swa_full_tokens_ratio"], d["mamba_full_memory_ratio"], d["mamba_radix_cache_strategy"],
            d["disable_radix_cache"], d["disable_overlap_schedule"])


def _sliding_window_size(text_config) -> int:
    """InklingForConditionalGeneration.get_attention_sliding_window_size, the method's own code compiled from the
    installed models/inkling.py (the module imports CUDA-only kernels, cutlass, so it cannot be imported here)."""
    import ast
    import os

    from sglang.srt.configs import inkling as inkling_config  # a regular module beside the models/ folder
    path = os.path.join(os.path.dirname(os.path.dirname(inkling_config.__file__)), "models", "inkling.py")
    tree = ast.parse(open(path).read())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "InklingForConditionalGeneration")
    name = "get_attention_sliding_window_size"
    method = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == name)
    method.returns = None
    scope: dict = {}
    exec(compile(ast.Module(body=[method], type_ignores=[]), path, "exec"), scope)
    return scope[method.name](types.SimpleNamespace(text_config=text_config))


def sglang_sizes(cfg: dict, *, kv_memory: int, tp: int = 1, page_size: int = 1, context: int | None = None) -> dict:
    """SGLang's pools for ``cfg`` on ``kv_memory`` bytes (bf16 KV): the module docstring's steps."""
    import json
    _load_sglang()
    from sglang.srt.configs import inkling as inkling_config
    from sglang.srt.configs.hybrid_arch import mambaish_config
    from sglang.srt.mem_cache import kv_cache_configurator as kc
    from sglang.srt.model_executor import pool_configurator as pc
    from sglang.srt.runtime_context import get_parallel
    swa_ratio, mamba_ratio, strategy, no_radix, no_overlap = _settings(json.dumps(cfg, sort_keys=True))
    assert strategy == "extra_buffer" and not no_radix
    mc = _model_config("inkling", cfg)
    if context is not None:
        mc.context_len = context   # --context-length
    schedule = types.SimpleNamespace(max_mamba_cache_size=None, mamba_full_memory_ratio=mamba_ratio,
                                     max_running_requests=None, disable_overlap_schedule=no_overlap,
                                     max_total_tokens=None, page_size=page_size, swa_full_tokens_ratio=swa_ratio)
    memory = types.SimpleNamespace(disable_radix_cache=False, enable_unified_memory=False)
    window = _sliding_window_size(mc.hf_config.text_config)
    out: dict[str, Any] = {"full_ids": list(mc.full_attention_layer_ids), "swa_ids": list(mc.swa_attention_layer_ids)}
    with get_parallel().override(tp_size=tp, attn_tp_size=tp, enable_cp_tp_group_sharing=False, attn_dcp_size=1), \
            mock.patch.object(inkling_config, "get_exec", lambda: _EXEC), \
            mock.patch.object(kc, "get_schedule", lambda: schedule), \
            mock.patch.object(kc, "get_memory", lambda: memory), \
            mock.patch.object(kc, "get_exec", lambda: _EXEC), \
            mock.patch.object(kc, "get_context", lambda: Context(schedule)), \
            mock.patch.object(pc, "get_schedule", lambda: schedule), \
            mock.patch.object(pc, "get_memory", lambda: memory):
        out["rows"] = {"full": mc.get_num_kv_heads(tp) * (mc.head_dim + mc.v_head_dim) * 2,
                       "swa": mc.get_swa_num_kv_heads(tp) * (mc.swa_head_dim + mc.swa_v_head_dim) * 2}
        mamba = mambaish_config(mc)
        out["state_per_request"] = int(mamba.mamba2_cache_params.mamba_cache_per_req)
        out["state_layers"] = list(mamba.mamba2_cache_params.layers)
        kvc = types.SimpleNamespace(
            mambaish_config=mamba, pp_size=1, fused_entry_bytes=lambda _kind: None, spec_algorithm=no_speculation(),
            hybrid_gdn_config=None, hybrid_kda_config=None, extra_mamba_cache_bytes_per_req=0, attn_dp_size=1,
            model_config=mc, kv_cache_dtype_str="auto", kv_cache_dtype=_load_sglang().torch.bfloat16,
            layer_info=types.SimpleNamespace(full_attention_layer_ids=out["full_ids"],
                                             swa_attention_layer_ids=out["swa_ids"]),
            sliding_window_size=window, page_size=page_size, is_draft_worker=False)
        kvc._calculate_mamba_ratio = functools.partial(kc.KVCacheConfigurator._calculate_mamba_ratio, kvc)
        try:
            rest = int(kc.KVCacheConfigurator._handle_max_mamba_cache(kvc, kv_memory / GB) * GB)
            out["slots"] = schedule.max_mamba_cache_size
            config = pc.HybridSWAPoolConfigurator(kvc).calculate_pool_sizes(rest, page_size)
            # max_total_num_tokens: the full pool's, or with every layer sliding the SWA pool's (no full pool)
            requests = kc.KVCacheConfigurator.resolve_max_num_reqs(kvc, config.max_total_num_tokens)
            out.update(max_total_num_tokens=config.max_total_num_tokens, swa=config.swa_max_total_num_tokens,
                       max_running_requests=requests, error=None)
        except (ValueError, RuntimeError) as error:
            out["slots"] = schedule.max_mamba_cache_size
            out["error"] = str(error).split(".")[0]
    return out


def kvmem_sizes(cfg: dict, *, kv_memory: int, tp: int = 1, page_size: int = 1, context: int | None = None) -> dict:
    """The same from kvmem's SGLang mode (capacity, and the layout it sizes from)."""
    import kvmem

    from ..engines.sglang.pools import DEFAULTS, make_layout, state_bytes_of
    model = Model.from_hf_config(cfg)
    options: dict[str, Any] = {k: v for k, v in DEFAULTS.items() if k != "version"}
    layout = make_layout(model, kv_dtype="bf16", tp=tp, **{**options, "page_size": page_size})
    out: dict[str, Any] = {"full_ids": list(layout.full), "swa_ids": list(layout.swa),
           "rows": {role: layout.k_row[role] + layout.v_row[role] for role in ("full", "swa")},
           "state_per_request": sum(state_bytes_of(model, layout, i, tp) for i in layout.linear),
           "state_layers": list(layout.linear)}
    cap = kvmem.capacity(model, engine="sglang", kv_memory=kv_memory, kv_dtype="bf16", tp=tp, page_size=page_size,
                         max_model_len=context)
    d = cap.details
    if cap.refusal is not None:
        out["error"] = cap.refusal.reason.removeprefix("SGLang raises ValueError: ").removeprefix(
            "SGLang raises RuntimeError: ").split(".")[0]
        out["slots"] = d.max_mamba_cache_size
        return out
    out.update(slots=d.max_mamba_cache_size, max_total_num_tokens=cap.tokens, swa=d.swa_layer_tokens,
               max_running_requests=d.max_running_requests, error=None)
    return out


def run_case(name: str, cfg: dict, **setting) -> list[Check]:
    ours, theirs = kvmem_sizes(cfg, **setting), sglang_sizes(cfg, **setting)
    return [Check(name, key, ours.get(key), theirs.get(key)) for key in theirs]


# The shapes published for Inkling's text model, as transformers 5.24 configuration_inkling.py's defaults give the
# flagship (66 layers, 5 of every 6 sliding) and vLLM's InklingModelConfig the small one (vllm/models/inkling/
# configs.py defaults): kvmem keeps no checkpoint config of Inkling, so these are the directed cases
REAL_SHAPES = {
    "inkling (transformers' InklingTextConfig defaults)": dict(
        hidden_size=6144, num_hidden_layers=66, num_attention_heads=64, num_key_value_heads=8, head_dim=128,
        swa_num_attention_heads=64, swa_num_key_value_heads=16, swa_head_dim=128, sliding_window_size=512,
        local_layer_ids=[i for i in range(66) if (i + 1) % 6], sconv_kernel_size=4, max_position_embeddings=131072),
    "inkling-small (SGLang's InklingModelConfig defaults, every other layer sliding)": dict(
        hidden_size=1536, num_hidden_layers=16, num_attention_heads=12, num_key_value_heads=4,
        sliding_window_size=512, local_layer_ids=list(range(0, 16, 2)), max_position_embeddings=32768),
}


def wrap(text: dict) -> dict:
    """An Inkling checkpoint's config.json around a text config (InklingMMConfig)."""
    return dict(model_type="inkling_mm_model", architectures=["InklingForConditionalGeneration"],
                torch_dtype="bfloat16", text_config=dict(model_type="inkling_text", vocab_size=512, **text))


def random_case(seed: int) -> tuple[str, dict, dict]:
    """A seeded Inkling checkpoint and setting: heads, KV heads, head dims (v_head_dim sometimes apart), window,
    local layers (at least one), kernel, hidden size, context; tp dividing every layer's heads; budget, page."""
    rng = random.Random(f"sglang-inkling-{seed}")
    n = rng.randint(2, 12)
    heads, swa_heads = rng.choice((4, 8, 16)), rng.choice((4, 8, 16))
    kv, swa_kv = min(rng.choice((1, 2, 4, 8)), heads), min(rng.choice((1, 2, 4, 8, 16)), swa_heads)
    text = dict(hidden_size=rng.choice((512, 1024, 2048)), num_hidden_layers=n, num_attention_heads=heads,
                num_key_value_heads=kv, head_dim=rng.choice((64, 128)), swa_num_attention_heads=swa_heads,
                swa_num_key_value_heads=swa_kv, swa_head_dim=rng.choice((64, 128)),
                sliding_window_size=rng.choice((64, 256, 512, 4096)),
                local_layer_ids=sorted(rng.sample(range(n), rng.randint(1, n))),
                sconv_kernel_size=rng.choice((2, 3, 4)), max_position_embeddings=rng.choice((32768, 131072)))
    # kvmem's reader takes transformers' conv_kernel_size default (4) beside a file's sconv_kernel_size and refuses
    # the two disagreeing (kvmem/configs/states.py hybrid_state): both written, as one name for one setting
    text["conv_kernel_size"] = text["sconv_kernel_size"]
    if rng.random() < 0.3:      # no swa_* field: SGLang takes the full layers'
        for key in ("swa_num_attention_heads", "swa_num_key_value_heads", "swa_head_dim"):
            del text[key]
        swa_heads, swa_kv = heads, kv
    if rng.random() < 0.2:
        text["v_head_dim"] = rng.choice((64, 128))
    tp = rng.choice([t for t in (1, 2, 4) if heads % t == 0 and swa_heads % t == 0
                     and all(k % t == 0 or t % k == 0 for k in (kv, swa_kv))])
    setting = dict(kv_memory=rng.randint(1, 64) * GB // rng.choice((1, 8, 64)), tp=tp,
                   page_size=rng.choice((1, 16, 64)), context=rng.choice((None, 4096, 32768)))
    return f"random-inkling-{seed}", wrap(text), setting

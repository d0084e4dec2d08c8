"""Issue 33: kvmem's SGLang admission verdict (SizingRules.pools_refuse, which kvmem.fit uses) against SGLang
0.5.23's own pool sizing (kvmem/oracles/sglang_pool_sizing.py runs pool_configurator.py's
HybridSWAPoolConfigurator and kv_cache_configurator.py's Mamba sizing on the budget).

SGLang serves ``batch`` requests of ``context`` tokens when it starts (no ValueError/RuntimeError), its full
pool holds batch x ceil_page(context) tokens, its SWA pool batch x ceil_page(min(context, window)), and (Mamba)
batch <= max_running_requests. The verdicts must agree, and kvmem's pool details must equal SGLang's.
"""

from __future__ import annotations

import math
import random

import pytest

pytest.importorskip("sglang")

from kvmem.catalog import get_model, preset  # noqa: E402
from kvmem.engines.sglang.admission import pools_refuse  # noqa: E402
from kvmem.engines.sglang.entry import capacity  # noqa: E402
from kvmem.engines.sglang.pools import DEFAULTS  # noqa: E402
from kvmem.oracles.sglang_pool_sizing import mamba_pools, model_config, swa_pools  # noqa: E402

SWA_PRESETS = ("gpt-oss-120b", "gpt-oss-20b", "gemma-4-26b-a4b")
MAMBA_PRESETS = ("qwen3-next-80b-a3b", "qwen3.5-27b", "qwen3.5-397b-a17b")
CASES_PER_PRESET = 40


def _workloads(seed: int, n: int):
    rng = random.Random(seed)
    for _ in range(n):
        kv_memory = int(math.exp(rng.uniform(math.log(20e6), math.log(60e9))))
        context = int(math.exp(rng.uniform(0, math.log(262_144))))
        yield kv_memory, context, rng.choice((1, 1, 2, 3, 8, 32, 200))


def _ceil_page(tokens: int, page: int) -> int:
    return -(-tokens // page) * page


def _kvmem(name: str, kv_memory: int, context: int, batch: int, page: int):
    options = {**DEFAULTS, "page_size": page}
    why = pools_refuse(get_model(name), kv_memory=kv_memory, tokens=context, batch=batch, kv_dtype="bf16",
                       tp=1, pp=1, **options)
    cap = capacity(get_model(name), kv_memory=kv_memory, kv_dtype="bf16", tp=1, pp=1, max_model_len=context,
                   **options)
    return why, cap


def _swa_case(name: str, kv_memory: int, context: int, batch: int, page: int):
    theirs = swa_pools(model_config(name, preset(name)["config"]), kv_memory=kv_memory, page_size=page)
    why, cap = _kvmem(name, kv_memory, context, batch, page)
    if theirs["error"] is None:
        serves = (theirs["full"] >= batch * _ceil_page(context, page)
                  and theirs["swa"] >= batch * _ceil_page(min(context, theirs["window"]), page))
        assert (cap.details.full_layer_tokens, cap.details.swa_layer_tokens) == (theirs["full"], theirs["swa"])
    else:
        serves = False
        assert cap.refusal is not None, theirs["error"]
    assert (why is None) == serves, (name, kv_memory, context, batch, page, theirs, why)
    return serves


@pytest.mark.parametrize("name", SWA_PRESETS)
def test_hybrid_swa_verdict_is_sglangs(name):
    seed = sum(map(ord, name))
    verdicts = [_swa_case(name, kv, ctx, b, page)
                for (kv, ctx, b), page in zip(_workloads(seed, CASES_PER_PRESET),
                                                  [1, 64] * (CASES_PER_PRESET // 2), strict=True)]
    assert any(verdicts) and not all(verdicts)   # both verdicts drawn


def test_gpt_oss_120b_at_128k_on_one_h100_is_refused():
    # the case: kvmem.fit's KV budget for gpt-oss-120b on one H100-80GB at 128k, 5,329,522,837 B; its
    # full-attention pool holds fewer than one 131,072-token request, though full + SWA bytes exceed it.
    # A cell: 18 full layers x 8 KV heads x (64 + 64) x 2 B = 36,864 B, and 0.8 x the same for the SWA layers: 66,355.2 B a full token
    kv = 5_329_522_837   # // 66,355.2 = 80,318 full tokens, 64,254 SWA
    assert swa_pools(model_config("gpt-oss-120b", preset("gpt-oss-120b")["config"]), kv_memory=kv)["full"] == 80_318
    assert _swa_case("gpt-oss-120b", kv, 131_072, 1, 1) is False
    assert _swa_case("gpt-oss-120b", kv, 65_536, 1, 1) is True


def test_swa_pool_below_the_window_is_sglangs_startup_error():
    # gemma-4-26b-a4b on 50 MB: SGLang's pools would be 270 full / 216 SWA tokens, but validate_swa_pool_size
    # raises (216 <= 1,024 + 1), so even a 100-token request is not served; kvmem gave 'fits' before the fix
    assert swa_pools(model_config("gemma-4-26b-a4b", preset("gemma-4-26b-a4b")["config"]),
                     kv_memory=50_000_000)["error"].startswith("SWA pool (216 tokens)")
    assert _swa_case("gemma-4-26b-a4b", 50_000_000, 100, 1, 1) is False


def test_one_token_the_float_split_keeps():
    # gpt-oss-120b on 10 GiB: SGLang int(10 GiB // (36,864 + 0.8 x 36,864)) = 161,817 full tokens,
    # 129,453 SWA; kvmem floored to whole (full + SWA) cells first and had 161,816 / 129,452
    assert int(10 * 2**30 // (36_864 + 0.8 * 36_864)) == 161_817
    assert _swa_case("gpt-oss-120b", 10 * 2**30, 161_817, 1, 1) is True


@pytest.mark.parametrize("name", MAMBA_PRESETS)
def test_mamba_hybrid_verdict_is_sglangs(name):
    mc = model_config(name, preset(name)["config"])
    verdicts = []
    for kv_memory, context, batch in _workloads(sum(map(ord, name)), CASES_PER_PRESET):
        theirs = mamba_pools(mc, kv_memory=kv_memory, context=context)
        why, cap = _kvmem(name, kv_memory, context, batch, 1)
        serves = (theirs["error"] is None and theirs["tokens"] >= batch * context
                  and batch <= theirs["max_running_requests"])
        if theirs["slots"] is not None and theirs["slots"] > 0:
            assert cap.details.max_mamba_cache_size == theirs["slots"]
        if theirs["error"] is None:
            assert (cap.tokens, cap.details.max_running_requests) == (theirs["tokens"],
                                                                       theirs["max_running_requests"])
        assert (why is None) == serves, (name, kv_memory, context, batch, theirs, why)
        verdicts.append(serves)
    assert any(verdicts) and not all(verdicts)


# ----------------------------------------------------------------------------- vLLM
# kvmem.fit's max_batch B for a context is what vLLM 0.33's own "Maximum concurrency" admits: floor(concurrency)
# >= B on the KV budget at B sequences (fit's kv_memory_bytes: activations sized at --max-num-seqs B, as plan
# pins it), and < B + 1 on the budget at B + 1 (gpt-oss-120b, 350 tokens, H100: 325; 326.07x on 325's budget,
# fewer than 326 on 326's, whose activation peak is larger), from vLLM's planning code
# (get_kv_cache_configs / get_kv_cache_capacity, as kvmem/oracles/vllm.py runs it). vLLM admits a request
# only when its whole length's blocks are free in every group (kvmem/engines/vllm/admission.py).

VLLM_HYBRIDS = ("gemma-3-27b", "gpt-oss-120b", "gpt-oss-20b")
VLLM_GPUS = ("h100-sxm-80gb", "a100-80gb", "l40s-48gb", "h200-sxm-141gb", "rtx-4090-24gb")


def _vllm_concurrency(model, memory: int, length: int, block: int) -> float | None:
    """vLLM's Maximum concurrency for ``length``-token requests on ``memory`` bytes (None: it refuses to start)."""
    from kvmem.oracles import vllm_lib as vl
    v = vl.load_vllm()
    config = vl.planning_config(v, max_model_len=length, auto=False, batched=8192, block_size=block, hybrid=True, tp=1)
    specs = vl.layer_specs(v, model, block, 1)
    v.resolve_kv_cache_layout(config, [vl.kv_layouts(v, model)], specs.values())
    try:
        groups = v.get_global_kv_cache_groups(config, [specs])
        kv_config = v.get_kv_cache_configs(config, [specs], [memory], groups)[0]
    except ValueError:
        return None
    return v.get_kv_cache_capacity(config, kv_config)[1]


def _vllm_mamba_concurrency(model, memory: int, length: int, hopper: bool = True) -> tuple[int, float | None]:
    """(block size, Maximum concurrency) of a Qwen3-Next or Nemotron-H hybrid in vLLM as `vllm serve` runs it with no
    prefix-caching flag: enable_prefix_caching and mamba_cache_mode from vLLM's own defaulting
    (vllm_states.served_cache_modes: on, "align"), the GDN layers' prefill checkpoint alignment from their own
    backend choice on Hopper (vllm_states.install_gdn_layers), Nemotron-H's float32 SSM state from its own config
    hook (NemotronHForCausalLMConfig), the state shapes and dtypes from its model class
    (get_mamba_state_shape_from_config), the block size and padded state page from
    Platform._align_hybrid_block_size (with the attention's own head size and KV heads), each GDN spec's
    checkpoint block from the layer's own _exports_checkpoints, then vLLM's planning."""
    from vllm.model_executor.models.config import NemotronHForCausalLMConfig
    from vllm.v1.attention.backends.registry import MambaAttentionBackendEnum
    from vllm.v1.kv_cache_interface import MambaSpec

    from kvmem.layer import FULL
    from kvmem.oracles import vllm_lib as vl
    from kvmem.oracles import vllm_states as vs
    v, w = vl.load_vllm(), vs._vllm()
    attention = next(layer for layer in model.layers if layer.kind == FULL)
    config = vs._vllm_config(w, model, vs._hf_config(model), tp=1, block_size=16, num_spec=0)
    config.model_config.get_head_size = lambda: attention.head_dim_k
    config.model_config.get_num_kv_heads = lambda _parallel: attention.kv_heads
    config.model_config.max_model_len = length
    prefix_caching, mode = vs.served_cache_modes(model, config)
    assert (prefix_caching, mode) == (True, "align")
    names = [f"model.layers.{i}.linear_attn" for i, layer in enumerate(model.layers) if layer.state is not None]
    cls, kind = vs._hybrid_class(model.model_type), MambaAttentionBackendEnum.GDN_ATTN
    if model.model_type == "nemotron_h":
        NemotronHForCausalLMConfig.update_mamba_ssm_cache_dtype(cache_config=config.cache_config,
                                                               hf_config=config.model_config.hf_config)
        kind = MambaAttentionBackendEnum.MAMBA2
    gdn = vs.install_gdn_layers(config, names, hopper) if model.model_type == "qwen3_next" else []
    shapes = cls.get_mamba_state_shape_from_config(config)
    dtypes = cls.get_mamba_state_dtype_from_config(config)
    w.Platform._align_hybrid_block_size(config, vs._Backend(16))
    block, padded = config.cache_config.block_size, config.cache_config.mamba_page_size_padded
    checkpoint_blocks = int(gdn[0]._exports_checkpoints) if gdn else 0
    specs = {}
    for i, layer in enumerate(model.layers):
        if layer.kind == FULL:
            specs[f"model.layers.{i}.attn"] = v.FullAttentionSpec(
                block_size=block, num_kv_heads=layer.kv_heads, head_size=layer.head_dim_k,
                head_size_v=layer.head_dim_v, dtype=v.torch.bfloat16)
        elif layer.state is not None:
            specs[f"model.layers.{i}.linear_attn"] = MambaSpec(
                shapes=tuple(shapes), dtypes=tuple(dtypes), block_size=block, page_size_padded=padded,
                mamba_type=kind, mamba_cache_mode=mode,
                num_prefill_checkpoint_blocks=checkpoint_blocks)
    planning = vl.planning_config(v, max_model_len=length, auto=False, batched=8192, block_size=block, hybrid=True, tp=1)
    planning.cache_config.mamba_cache_mode = mode
    planning.cache_config.enable_prefix_caching = prefix_caching
    v.resolve_kv_cache_layout(planning, [vl.kv_layouts(v, model)], specs.values())
    try:
        groups = v.get_global_kv_cache_groups(planning, [specs])
        kv_config = v.get_kv_cache_configs(planning, [specs], [memory], groups)[0]
    except ValueError:
        return block, None
    return block, v.get_kv_cache_capacity(planning, kv_config)[1]


def _vllm_admits(name: str, gpu: str, context: int, batch: int | None, **given) -> tuple[int, int | None]:
    """(kvmem.fit's max_batch, floor of vLLM's concurrency on fit's KV budget for ``batch``: the budget
    a server pinned to that many sequences gets; None where fit leaves no KV budget)."""
    import kvmem
    found = kvmem.fit(name, gpu=gpu, context=context, engine="vllm", batch=batch, **given)
    if found.kv_memory_bytes <= 0:
        return found.max_batch, None
    model = get_model(name)
    if model.model_type in ("qwen3_next", "nemotron_h"):
        block, concurrency = _vllm_mamba_concurrency(model, found.kv_memory_bytes, context)
        assert block == found.capacity.block_size
    else:
        concurrency = _vllm_concurrency(model, found.kv_memory_bytes, context, found.capacity.block_size)
    return found.max_batch, 0 if concurrency is None else math.floor(concurrency)


def _vllm_case(name: str, gpu: str, context: int, **given) -> int:
    """kvmem's max batch B: vLLM admits B at B's budget (activations at --max-num-seqs B), not B + 1 at B + 1's."""
    most, admitted = _vllm_admits(name, gpu, context, None, **given)
    if admitted is None:
        return 0
    assert admitted >= most, (name, gpu, context, most, admitted)
    _, admitted_next = _vllm_admits(name, gpu, context, most + 1, **given)
    assert admitted_next is None or admitted_next < most + 1, (name, gpu, context, most, admitted_next)
    return most


@pytest.mark.parametrize("name", VLLM_HYBRIDS)
def test_vllm_hybrid_max_batch_is_the_floor_of_vllms_concurrency(name):
    pytest.importorskip("vllm")
    rng = random.Random(sum(map(ord, name)) + 1)
    positions = get_model(name).max_position_embeddings
    admitted = [_vllm_case(name, rng.choice(VLLM_GPUS), int(math.exp(rng.uniform(math.log(256),
                                                                                 math.log(positions)))))
                for _ in range(8)]
    assert any(admitted)


def test_gemma_3_27b_at_8920_tokens_on_an_a100_runs_4_not_17():
    # vLLM's 4.17x: each request reserves min(1,023 + 8,192, 8,920) tokens in its 52 sliding layers too, so
    # the pool admits 4 at once; the bytes of their steady state (sliding layers at 1,024) held 17
    pytest.importorskip("vllm")
    assert _vllm_case("gemma-3-27b", "a100-80gb", 8920) == 4


def test_vllm_qwen3_next_max_batch_is_the_floor_of_vllms_concurrency():
    # fp8 weights, so the 80B model leaves one GPU a KV budget; KV stays bf16. On an H200 at 32,768 tokens, as
    # `vllm serve` runs it (prefix caching on, mamba_cache_mode "align", FlashInfer GDN prefill): block 576 (the
    # GDN state page aligned to 64-token checkpoints), 3 state blocks per GDN group per request, vLLM 56.91x,
    # kvmem 56 (62.14x / 62 with block 544 in mode "none", --no-enable-prefix-caching)
    pytest.importorskip("vllm")
    assert _vllm_case("qwen3-next-80b-a3b", "h200-sxm-141gb", 32_768, weight_dtype="fp8") == 56
    rng = random.Random(33)
    admitted = [_vllm_case("qwen3-next-80b-a3b", rng.choice(("h200-sxm-141gb", "b200-180gb")),
                           int(math.exp(rng.uniform(math.log(256), math.log(262_144)))), weight_dtype="fp8")
                for _ in range(4)]
    assert any(admitted)


def test_vllm_nemotron_h_max_batch_is_the_floor_of_vllms_concurrency():
    # Nemotron-H-8B on an H100 at 32,768 tokens as `vllm serve` runs it (prefix caching on, "align"): block 1040
    # (the float32 Mamba2 state page aligned), 2 state blocks per Mamba group per request: vLLM 77.73x, kvmem 77
    # (90.00x / 90 with --no-enable-prefix-caching, 1 state block)
    pytest.importorskip("vllm")
    assert _vllm_case("nemotron-h-8b", "h100-sxm-80gb", 32_768) == 77
    rng = random.Random(34)
    admitted = [_vllm_case("nemotron-h-8b", rng.choice(VLLM_GPUS), int(math.exp(rng.uniform(math.log(256),
                                                                                           math.log(65_536)))))
                for _ in range(3)]
    assert any(admitted)


def test_vllm_qwen3_next_on_ampere_has_no_checkpoint_grid():
    # off Hopper vLLM's own _resolve_gdn_prefill_backend picks Triton: no 64-token grid, no checkpoint block;
    # kvmem with gdn_prefill_backend="triton" (the flag plan writes) gives vLLM's block and concurrency
    pytest.importorskip("vllm")
    from kvmem.engines.vllm.entry import capacity
    model = get_model("qwen3-next-80b-a3b")
    ours = capacity(model, kv_memory=20 * 2**30, kv_dtype="auto", tp=1, pp=1, max_model_len=32_768,
                    gdn_prefill_backend="triton")
    block, concurrency = _vllm_mamba_concurrency(model, 20 * 2**30, 32_768, hopper=False)
    assert (ours.block_size, ours.max_concurrency) == (block, concurrency) and block == 544

"""kvmem's SGLang sizing of Inkling against SGLang 0.5.23's own code on the CPU (kvmem/oracles/sglang_inkling.py):
its ServerArgs resolution, ModelConfig, InklingConvCacheParams, _handle_max_mamba_cache, HybridSWAPoolConfigurator
and resolve_max_num_reqs; the published shapes, then seeded variations."""

import pytest

from tests.oracles.conftest import require

require("sglang")

from kvmem.oracles import sglang_inkling as oracle  # noqa: E402

GIB = 1 << 30
FLAGSHIP, SMALL = (oracle.wrap(text) for text in oracle.REAL_SHAPES.values())
# a wide stream beside small KV rows: a 20 MiB budget keeps 3 state slots, fewer than one request's 5
WIDE = oracle.wrap(dict(hidden_size=4096, num_hidden_layers=8, num_attention_heads=8, num_key_value_heads=1,
                        head_dim=64, sliding_window_size=64, local_layer_ids=list(range(7)), sconv_kernel_size=4,
                        conv_kernel_size=4, max_position_embeddings=32768))
DIRECTED = [
    ("flagship 20 GiB", FLAGSHIP, dict(kv_memory=20 * GIB)),
    ("flagship 60 GiB tp 4 page 64 ctx 32k", FLAGSHIP, dict(kv_memory=60 * GIB, tp=4, page_size=64, context=32768)),
    ("flagship 300 MiB (SWA pool below the window)", FLAGSHIP, dict(kv_memory=300 << 20)),
    ("small 2 GiB tp 2", SMALL, dict(kv_memory=2 * GIB, tp=2)),
    ("wide 20 MiB (slots serve no request)", WIDE, dict(kv_memory=20 << 20)),
]


def _assert(name, cfg, setting):
    bad = [c for c in oracle.run_case(name, cfg, **setting) if not c.matches]
    assert not bad, "\n".join(f"{c.case}: {c.quantity}: kvmem {c.kvmem!r}, SGLang {c.engine!r}" for c in bad)


def test_sglang_resolves_inklings_own_defaults():
    d = oracle.resolved_defaults(FLAGSHIP)
    assert (d["swa_full_tokens_ratio"], d["mamba_full_memory_ratio"], d["mamba_radix_cache_strategy"]) == \
        (0.1, 0.1, "extra_buffer")
    assert d["disable_radix_cache"] is False and d["disable_overlap_schedule"] is False


@pytest.mark.parametrize("name, cfg, setting", DIRECTED, ids=[case[0] for case in DIRECTED])
def test_published_shapes(name, cfg, setting):
    _assert(name, cfg, setting)


def test_the_directed_cases_reach_each_outcome():
    errors = [oracle.sglang_sizes(cfg, **setting)["error"] for _, cfg, setting in DIRECTED]
    assert errors[:2] == [None, None] and errors[3] is None
    assert errors[2].startswith("SWA pool") and errors[4].startswith("Hybrid (mamba/linear-attention) state cache")


def test_seeded_variations():
    for seed in range(24):
        _assert(*oracle.random_case(seed))


@pytest.mark.parametrize("gpu_mib, tp", [(24564, 1), (46068, 4), (81559, 1), (81559, 4), (143771, 1), (183359, 4)])
def test_the_default_mem_fraction_static_has_inklings_prefill_graph(gpu_mib, tp):
    # SGLang's ServerArgs resolution for the checkpoint (the prefill graph on: 8 MiB a capture size, 58 sizes at
    # chunked_prefill_size 8192) against kvmem's default for the model (kvmem.engines.sglang.budget)
    from kvmem.engines.sglang.budget import prefill_graph_mib, sglang_mem_fraction_static
    theirs = oracle.resolved_defaults(FLAGSHIP, gpu_mib=gpu_mib, tp=tp)
    extra = prefill_graph_mib(["InklingForConditionalGeneration"], gpu_mib << 20)
    ours = sglang_mem_fraction_static(gpu_mib << 20, tp=tp, prefill_graph_reserve_mib=extra)
    assert float(ours) == theirs["mem_fraction_static"]
    assert len(theirs["cuda_graph_config"]["prefill"]["bs"]) * 8 == extra

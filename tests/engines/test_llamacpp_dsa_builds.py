"""llama.cpp DeepSeek sparse attention (glm-dsa, deepseek32) by build date (plan._dsa_build).

The dates (settings.PR_19460 .. DSA_GLM_FROM): glm-dsa loads from PR #19460 (2026-02-13) with its indexer
ignored; deepseek32 and llama_kv_cache_dsa come with PR #23346 (2026-05-29); glm-dsa takes llama_kv_cache_dsa
with PR #25407 and its "full"-layer indexer cache with PR #26474, both merged between 2026-07-24 and the
build 10505 runs of 2026-08-19.
"""

import pytest

from kvmem import estimate

MiB = 2**20


def llama(model, **kw):
    kw.setdefault("tokens", 4096)
    return estimate(model, engine="llama.cpp", **kw)


def test_deepseek32_is_laid_out_from_pr_23346_and_refused_before():
    # from 2026-05-29 llama_kv_cache_dsa as at the vendored build: 61 x 576 x 2 B x 4096 = 287,834,112 B and the
    # indexer 61 x 128 x 2 B x 4096 = 63,963,136 B
    for build in ("2026-05-29", "2026-08-19", None):
        caches = llama("deepseek-v3.2", build=build).details.caches
        assert [(c["cache"], c["k_bytes"], c["v_bytes"]) for c in caches] == [
            ("kv", 287_834_112, 0), ("kv_idx", 63_963_136, 0)]
    with pytest.raises(ValueError, match="builds before 2026-05-29 .PR #23346, LLM_ARCH_DEEPSEEK32. have no "
                                         "deepseek32 architecture; build 2026-05-28"):
        llama("deepseek-v3.2", build="2026-05-28")


def test_glm_dsa_before_pr_19460_has_no_architecture():
    with pytest.raises(ValueError, match="builds before 2026-02-13 .PR #19460, LLM_ARCH_GLM_DSA. have no glm-dsa "
                                         "architecture; build 2026-02-12"):
        llama("glm-5.2", build="2026-02-12")


def test_glm_dsa_without_its_indexer_and_the_unpinned_merge_window_are_refused_with_the_reason():
    with pytest.raises(ValueError, match="runs glm-dsa without its indexer .PR #19460: deepseek2's graph over a "
                                         "plain MLA llama_kv_cache, no indexer cache. until PR #25407"):
        llama("glm-5.2", build="2026-02-13")
    with pytest.raises(ValueError, match="runs glm-dsa without its indexer"):
        llama("glm-5.1", build="2026-07-23")
    for build in ("2026-07-24", "2026-08-18"):
        with pytest.raises(ValueError, match="between 2026-07-24 and 2026-08-19, where PR #25407"):
            llama("glm-5.2", build=build)


def test_glm_dsa_from_build_10505_on_is_the_vendored_layout():
    # GLM-5.2 at 4096 cells: 78 layers x 576 x 2 B x 4096 = 368,050,176 B (351.00 MiB); the indexer in the 21
    # "full" layers (PR #26474) x 128 x 2 B x 4096 = 22,020,096 B (21.00 MiB), as build 10505's log prints
    # 21 layers
    logged = llama("glm-5.2", build="2026-08-19")
    assert [(c["layers"], c["k_bytes"]) for c in logged.details.caches] == [(78, 368_050_176), (21, 22_020_096)]
    assert logged.kv_bytes == llama("glm-5.2").kv_bytes == 351 * MiB + 21 * MiB

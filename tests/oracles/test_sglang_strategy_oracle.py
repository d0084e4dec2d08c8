"""kvmem's resolution of SGLang's --mamba-radix-cache-strategy "auto" (kvmem.engines.sglang.mamba.resolve_extra_buffer:
the state slots a request holds, so the requests a hybrid admits) against SGLang 0.5.23's own ServerArgs pipeline on
the CPU (a CUDA platform's extra-buffer support granted: kvmem/oracles/sglang_pool_sizing.py resolved_defaults), on real
checkpoints' configs."""

import pytest

from tests.oracles.conftest import require

require("sglang")

from kvmem.catalog import preset  # noqa: E402
from kvmem.engines.sglang.mamba import resolve_extra_buffer  # noqa: E402
from kvmem.model import Model  # noqa: E402
from kvmem.oracles.sglang_pool_sizing import resolved_defaults  # noqa: E402

# Qwen3-Next, Qwen3.5, Nemotron-H, Kimi-Linear: extra_buffer by default; Jamba: not a radix-cache hybrid (auto stays)
CASES = ["qwen3-next-80b-a3b", "qwen3.5-27b", "nemotron-h-8b", "kimi-linear-48b-a3b", "jamba-1.5-mini"]


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("options", [{}, {"disable_overlap_schedule": True}, {"disable_radix_cache": True}],
                         ids=["default", "no-overlap", "no-radix"])
def test_the_strategy_sglang_resolves(name, options):
    cfg = preset(name)["config"]
    theirs = resolved_defaults(cfg, **options)
    ours = resolve_extra_buffer(Model.from_hf_config(cfg).facts.architectures,
                                {"mamba_extra_buffer": None, "page_size": 1, **options})
    assert ours["mamba_extra_buffer"] == (theirs["mamba_radix_cache_strategy"] == "extra_buffer"), theirs[
        "mamba_radix_cache_strategy"]
    assert bool(ours.get("disable_overlap_schedule")) == theirs["disable_overlap_schedule"]

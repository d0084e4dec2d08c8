"""kvmem's DeepSeek-V4 compute buffer (kvmem/engines/llamacpp/graphs_dsv4_fwd.py, graphs_dsv4_comp.py) against
llama.cpp 0c1e57098 itself: seeded small deepseek4 GGUFs (random layers of compress ratio 0 / 4 / 128, widths, window,
top-k, hash layers) under random context settings, and DeepSeek-V4-Flash's own config at full shape (a sparse q4_k_m
GGUF: about 30 s of file I/O), the printed CPU compute buffer to four decimals (kvmem/oracles/llamacpp_dsv4_compute.py;
the other Flash settings are pinned in tests/engines/test_llamacpp_graphs_dsv4.py)."""

import pytest

from tests.oracles.conftest import require

require("llama_cpp")

from kvmem.oracles.llamacpp_dsv4_compute import (  # noqa: E402
    flash_compute_case,
    random_compute_case,
    run_compute_case,
)


@pytest.mark.parametrize("seed", range(24))
def test_seeded_random_configs(seed):
    name, model, setting = random_compute_case(seed)
    result = run_compute_case(model, setting)
    assert result["kvmem"] == result["llama.cpp"], (name, setting, result)
    assert result["exact"] is True


def test_flash_at_32k():
    _, model, setting = flash_compute_case(32768)
    result = run_compute_case(model, setting, "q4_k_m")
    assert result == {"llama.cpp": "300.5098", "kvmem": "300.5098", "exact": True}

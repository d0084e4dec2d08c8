"""kvmem's Gemma 3 mmproj compute buffer (kvmem/engines/llamacpp/graphs_mmproj.py) against llama.cpp 0c1e57098's
libmtmd (llama-cpp-python 0.3.36, CPU): random SigLIP towers and Gemma-3-27B's own (its preset's vision_config),
flash attention on and off; the "reserve_compute_meta: CPU compute buffer size" line mtmd prints must equal
kvmem's bytes printed the same way (kvmem.oracles.llamacpp_mmproj). About 15 s."""

from tests.oracles.conftest import require

require("llama_cpp")

import pytest  # noqa: E402

import kvmem  # noqa: E402
from kvmem.engines.llamacpp.graphs_mmproj import MmprojShape, mmproj_compute_bytes, mmproj_shape  # noqa: E402
from kvmem.oracles.llamacpp_mmproj import printed_mmproj_mib, random_mmproj_shape  # noqa: E402


def _case(shape, flash_attn, tmp_path):
    printed = printed_mmproj_mib(shape, flash_attn, str(tmp_path / "mmproj.gguf"), str(tmp_path / "text.gguf"))
    assert f"{mmproj_compute_bytes(shape, flash_attn=flash_attn) / 1048576.0:.2f}" == printed


@pytest.mark.parametrize("seed", range(16))
def test_random_gemma3_mmproj_compute_buffer_equals_mtmd(seed, tmp_path):
    _case(random_mmproj_shape(seed), seed % 2 == 0, tmp_path)


@pytest.mark.parametrize("flash_attn", [True, False])
def test_gemma3_27b_mmproj_compute_buffer_equals_mtmd(flash_attn, tmp_path):
    _case(mmproj_shape(kvmem.get_model("gemma-3-27b")), flash_attn, tmp_path)


@pytest.mark.parametrize("flash_attn", [True, False])
def test_siglip_base_sized_mmproj_compute_buffer_equals_mtmd(flash_attn, tmp_path):
    # a SigLIP-B/16-sized tower at 448 px (784 patches, 12 layers) under a 2048-wide text model
    _case(MmprojShape(448, 16, 768, 3072, 12, 12, 2048, 4, "bf16"), flash_attn, tmp_path)

"""Gemma 3's mmproj compute buffer (kvmem/engines/llamacpp/graphs_mmproj.py): the "reserve_compute_meta: CPU
compute buffer size" lines llama.cpp 0c1e57098's libmtmd printed for sparse mmproj GGUFs
(tests/oracles/test_llamacpp_mmproj_oracle.py), pinned so they hold without llama.cpp."""

import pytest

import kvmem
from kvmem.engines.llamacpp.graphs_mmproj import MmprojShape, mmproj_compute_bytes, mmproj_shape
from kvmem.oracles.llamacpp_mmproj import random_mmproj_shape


def _mib(shape, flash_attn):
    return f"{mmproj_compute_bytes(shape, flash_attn=flash_attn) / 1048576.0:.2f}"


def test_gemma3_27b_mmproj_is_mtmds():
    # vision_config: SigLIP 896 px, patch 14 (4,096 patches), 1152 wide, 27 layers, 16 heads, FFN 4304; 256 image
    # tokens (a 4 x 4 pool); text 5376 wide. mtmd printed 121.25 MiB with flash attention (the CPU's AUTO), 1132.00
    # without (the 16 x 4096 x 4096 f32 attention scores alone are 1024 MiB)
    shape = mmproj_shape(kvmem.get_model("gemma-3-27b"))
    assert shape == MmprojShape(896, 14, 1152, 4304, 27, 16, 5376, 4)
    assert (_mib(shape, True), _mib(shape, False)) == ("121.25", "1132.00")


def test_presets_without_a_vision_config_have_no_mmproj_shape():
    assert mmproj_shape(kvmem.get_model("gemma-3-4b")) is None          # the preset's config has no vision_config
    assert mmproj_shape(kvmem.get_model("llama-3-8b")) is None


@pytest.mark.parametrize("seed, fa, no_fa", [(4, "0.33", "0.39"), (5, "0.71", "1.06"), (6, "1.05", "1.58"),
                                             (7, "0.97", "1.27")])
def test_random_mmproj_cases_are_mtmds(seed, fa, no_fa):
    shape = random_mmproj_shape(seed)
    assert (_mib(shape, True), _mib(shape, False)) == (fa, no_fa)


def test_siglip_base_sized_mmproj_is_mtmds():
    # 448 px / 16 = 784 patches, 768 wide, 12 layers of 12 heads, a BF16 patch kernel (im2col in F32)
    assert (_mib(MmprojShape(448, 16, 768, 3072, 12, 12, 2048, 4, "bf16"), True),
            _mib(MmprojShape(448, 16, 768, 3072, 12, 12, 2048, 4, "bf16"), False)) == ("23.67", "42.62")

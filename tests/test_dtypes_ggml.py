"""The one table of ggml's types (kvmem.dtypes.GGML_TYPES) and the views llama.cpp's modules take of it."""

import pytest

from kvmem.dtypes import GGML_TYPES, dtype, ggml_type
from kvmem.engines.llamacpp.ggml_graph import TYPES
from kvmem.engines.llamacpp.placement import GGML_TYPES as PLACED


@pytest.mark.parametrize("name,block,size", [
    # ggml-common.h block structs, by hand:
    ("q4_K", 256, 144),     # 2 fp16 (d, dmin) + 12 B of 6-bit scales + 128 B of nibbles
    ("q6_K", 256, 210),     # 128 B low 4 bits + 64 B high 2 bits + 16 int8 scales + fp16 d
    ("iq4_xs", 256, 136),   # fp16 d + u16 scales_h + 4 B scales_l + 128 B of nibbles
    ("iq1_s", 256, 50),     # fp16 d + 32 B qs + 16 B qh (1.5625 bits)
    ("iq1_m", 256, 56),     # 32 B qs + 16 B qh + 8 B scales (1.75 bits)
    ("iq2_xxs", 256, 66),   # fp16 d + 64 B qs
    ("iq2_xs", 256, 74),    # fp16 d + 64 B qs + 8 B scales
    ("iq2_s", 256, 82),     # fp16 d + 64 B qs + 8 B qh + 8 B scales
    ("iq3_xxs", 256, 98),   # fp16 d + 96 B qs (3.0625 bits)
    ("iq3_s", 256, 110),    # fp16 d + 64 B qs + 8 B qh + 32 B signs + 4 B scales
    ("iq4_nl", 32, 18),     # fp16 d + 16 B
    ("tq1_0", 256, 54),     # 48 B qs (base 3) + 4 B qh + fp16 d (1.6875 bits)
    ("tq2_0", 256, 66),     # 64 B of 2-bit values + fp16 d
    ("mxfp4", 32, 17),      # e8m0 scale + 16 B of e2m1 pairs (4.25 bits)
])
def test_block_sizes(name, block, size):
    t = ggml_type(name)
    assert (t.block, t.size) == (block, size)
    assert t.is_quantized


def test_lookup_is_case_blind_and_refuses_by_name():
    assert ggml_type("Q4_K") is ggml_type("q4_k") is GGML_TYPES["q4_K"]
    assert ggml_type("IQ2_XXS").id == 16
    with pytest.raises(ValueError, match="unknown ggml type 'q4_k_m'"):
        ggml_type("q4_k_m")        # a file type (a mix), not a tensor type


def test_the_other_tables_are_views_of_this_one():
    assert PLACED == {t.name.upper(): (t.block, t.size) for t in GGML_TYPES.values()}
    assert all(TYPES[name] == (GGML_TYPES[name].block, GGML_TYPES[name].size) for name in TYPES)
    for name in ("q8_0", "q5_1", "q5_0", "q4_1", "q4_0", "iq4_nl"):
        assert (dtype(name).block_elements, dtype(name).block_bytes) == (GGML_TYPES[name].block, GGML_TYPES[name].size)


def test_ids_are_unique():
    assert len({t.id for t in GGML_TYPES.values()}) == len(GGML_TYPES) == 35


def test_the_gguf_reader_sizes_tensors_from_this_table():
    """kvmem.sources.gguf sizes a tensor info's type id from GGML_TYPES: Q8_1 is 2 fp16 (d, s) + 32 int8 = 36 B
    (ggml-common.h block_q8_1; gguf-py's GGML_QUANT_SIZES says 40), Q2_0 (id 42) is known."""
    from kvmem.sources.gguf import _quant_sizes
    sizes = _quant_sizes()
    assert sizes[9] == ("Q8_1", (32, 36)) and sizes[42] == ("Q2_0", (64, 18)) and sizes[12] == ("Q4_K", (256, 144))
    assert len(sizes) == len(GGML_TYPES)

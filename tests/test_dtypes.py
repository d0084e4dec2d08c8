import pytest

from kvmem import dtype
from kvmem.dtypes import dtype_names


@pytest.mark.parametrize("name, n, expected", [
    ("fp32", 128, 512), ("float32", 128, 512), ("f32", 1, 4),
    ("fp16", 128, 256), ("F16", 128, 256), ("bfloat16", 128, 256),
    ("fp8", 128, 128), ("fp8_e5m2", 128, 128), ("int8", 128, 128),
    ("int4", 128, 64), ("int4", 3, 2), ("int2", 128, 32), ("int2", 5, 2),
    # ggml blocks of 32 values (ggml-common.h): bytes include the fp16 scale (and min)
    ("q8_0", 128, 4 * 34), ("q5_1", 128, 4 * 24), ("q5_0", 128, 4 * 22),
    ("q4_1", 128, 4 * 20), ("q4_0", 128, 4 * 18), ("iq4_nl", 128, 4 * 18),
    # nvfp4: 16 e2m1 values + one fp8 scale = 9 bytes; TRT-LLM ceil(x/2) + ceil(x/16)
    ("nvfp4", 128, 128 // 2 + 128 // 16), ("nvfp4", 100, 50 + 7),
    # mxfp4: 32 values in 16 bytes + one e8m0 scale
    ("mxfp4", 128, 4 * 17),
])
def test_row_bytes(name, n, expected):
    assert dtype(name).row_bytes(n) == expected


@pytest.mark.parametrize("name, bits", [
    ("fp32", 32), ("bf16", 16), ("fp8", 8), ("int4", 4), ("q8_0", 8.5), ("q4_0", 4.5),
    ("q4_1", 5.0), ("q5_0", 5.5), ("q5_1", 6.0), ("nvfp4", 4.5), ("mxfp4", 4.25),
])
def test_bits(name, bits):
    assert dtype(name).bits == bits


def test_group_wise_layout():
    # HF QuantizedCache-style: 4-bit values, fp32 scale and zero point per group of 64
    q = dtype("int4", group_size=64, scale_dtype="fp32", zero_point=True)
    assert q.row_bytes(128) == 64 + 2 * (4 + 4)
    assert q.bits == 4 + 8 * 8 / 64
    assert dtype("int2", group_size=32, scale_dtype="fp16").row_bytes(64) == 16 + 2 * 2


def test_ggml_rows_must_be_whole_blocks():
    with pytest.raises(ValueError, match="blocks of 32"):
        dtype("q4_0").row_bytes(48)


def test_auto_is_model_dtype_or_bf16():
    assert dtype("auto").name == "bf16"
    assert dtype("auto", model_dtype="float32").name == "fp32"
    assert dtype("AUTO", model_dtype="fp16").name == "fp16"


def test_unknown_dtype_lists_valid_names():
    with pytest.raises(ValueError, match="unknown dtype 'fp12'; valid names: bf16, .*q4_0.*, auto"):
        dtype("fp12")


def test_group_size_only_for_integer_formats():
    with pytest.raises(ValueError, match="group_size applies to"):
        dtype("bf16", group_size=64)
    with pytest.raises(ValueError, match="group_size must be a positive integer"):
        dtype("int4", group_size=0.5)


def test_every_listed_name_resolves():
    for name in dtype_names():
        assert dtype(name).row_bytes(64) > 0


@pytest.mark.parametrize("text, pair", [("bf16", ("bf16", "bf16")), ("q8_0/f16", ("q8_0", "f16")),
                                        ("K int4 / V int2", ("int4", "int2")), ("fp8", ("fp8", "fp8"))])
def test_one_parser_reads_both_spellings_of_a_kv_pair(text, pair):
    """issue 24: the composite KV dtypes results carry, read in one place (the app and textbook.py ask it)."""
    from kvmem.dtypes import kv_pair
    assert kv_pair(text) == pair

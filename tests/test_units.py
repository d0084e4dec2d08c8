import pytest

from kvmem import format_bytes, parse_bytes, parse_tokens
from kvmem.units import format_tokens


@pytest.mark.parametrize("text, tokens", [
    ("128k", 131072), ("32K", 32768), ("4096", 4096), ("1M", 1048576), ("1.5k", 1536),
    (" 8k ", 8192), ("100_000", 100000), ("128,000", 128000), (4096, 4096), (2048.0, 2048),
])
def test_parse_tokens(text, tokens):
    assert parse_tokens(text) == tokens


@pytest.mark.parametrize("bad, message", [
    (0, "tokens must be a positive integer, got 0"),
    (-3, "tokens must be a positive integer, got -3"),
    ("-3", "tokens must be positive, got '-3'"),
    ("1,5k", "tokens: cannot read '1,5k'"),  # a decimal comma is not a thousands separator (not 15k)
    ("9" * 5000, "tokens: a 5,000-character value is too long"),
    (2**41, "tokens must be at most 1,099,511,627,776"),
    (float("nan"), "tokens must be a finite number"),
    (1.5, "tokens must be a whole number, got 1.5"),
    ("1.0001k", "not a whole number"),
    ("lots", "tokens: cannot read 'lots'"),
    ("12q", "tokens: cannot read '12q'"),
    (None, "tokens must be a positive integer or a string"),
    (True, "tokens must be a positive integer or a string"),
])
def test_parse_tokens_rejects(bad, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_tokens(bad)


@pytest.mark.parametrize("text, n", [
    ("80GB", 80_000_000_000), ("80GiB", 80 * 2**30), ("512MiB", 512 * 2**20), ("1.5 TB", 1_500_000_000_000),
    (12345, 12345), ("79.19GiB".replace("79.19", "79.25"), int(79.25 * 2**30)), ("4kib", 4096), ("7B", 7),
])
def test_parse_bytes(text, n):
    assert parse_bytes(text) == n


def test_parse_bytes_rejects_fractional_bytes():
    with pytest.raises(ValueError, match="not a whole number"):
        parse_bytes("0.3B")


def test_format_bytes_seed_example():
    assert format_bytes(8_388_608_000) == "7.81 GiB"
    assert format_bytes(8_388_608_000, binary=False) == "8.39 GB"
    assert format_bytes(512) == "512 B"
    assert format_bytes(1536) == "1.50 KiB"
    assert format_bytes(262_144_000) == "250.00 MiB"


def test_parse_bytes_reads_commas_only_as_thousands():
    assert parse_bytes("1,500GB") == 1_500_000_000_000
    with pytest.raises(ValueError, match="commas only as thousands separators"):
        parse_bytes("1,5GB")  # not 15 GB


def test_parse_bytes_refuses_negative_and_absurd():
    with pytest.raises(ValueError, match="bytes must be positive, got '-1GiB'"):
        parse_bytes("-1GiB")
    with pytest.raises(ValueError, match="bytes must be at most"):
        parse_bytes(10**31)


def test_format_bytes_refuses_nan_and_inf_and_reads_huge_ints_exactly():
    for bad in (float("nan"), float("inf"), float("-inf")):
        with pytest.raises(ValueError, match="bytes must be a finite number"):
            format_bytes(bad)
    assert format_bytes(10**400) == "8.88e+384 PiB"  # 10**400 / 1024**5 = 8.88e384, no float overflow
    assert format_bytes(2**60) == "1024.00 PiB"


@pytest.mark.parametrize("tokens, text", [(131072, "128k"), (1048576, "1M"), (40960, "40k"), (2**30, "1G"),
                                          (1536, "1536"), (1000, "1000"), (256, "256")])
def test_format_tokens_is_parse_tokens_inverse(tokens, text):
    assert format_tokens(tokens) == text
    assert parse_tokens(text) == tokens


def test_format_tokens_refuses_non_counts():
    for bad in (0, -4, 1.5, True):
        with pytest.raises(ValueError, match="tokens must be a positive integer"):
            format_tokens(bad)

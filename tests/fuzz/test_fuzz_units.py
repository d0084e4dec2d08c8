"""Fuzz: units and the textbook formula, with hostile numbers and text (issue 13)."""

from fractions import Fraction

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import kvmem

from .harness import call, check_positive_int, check_text

HOSTILE_NUMBERS = st.one_of(
    st.integers(min_value=-(10**40), max_value=10**40),
    st.sampled_from([0, 1, -1, 2**40, 2**40 + 1, 10**30, 10**30 + 1, 10**400, -(10**400), 2**63]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.fractions(max_denominator=7),
    st.booleans(), st.none(),
)
NUMBER_TEXT = st.one_of(
    st.from_regex(r"\A\s?-?[0-9,_.]{0,12}\s?(k|K|M|G|GB|GiB|MiB|TB|B|kib|q|)\s?\Z", fullmatch=True),
    st.text(max_size=20),
    st.sampled_from(["1,5k", "1,5GB", "128,000", "1,024", "-5", "-1GiB", "9" * 5000, "1e400", "nan", "inf",
                     "0x10", "½k", "١٢٣", "1.0001k", "3.98GiB", "  8k  ", "1_000"]),
)
SETTINGS = settings(max_examples=3000, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(value=st.one_of(HOSTILE_NUMBERS, NUMBER_TEXT))
@example(value="1,5k")          # issue 13: was 15,360 tokens
@example(value="9" * 5000)      # issue 13: OverflowError / int_max_str_digits
@example(value=10**400)
@example(value=float("nan"))
def test_parse_tokens_and_bytes(value):
    call(f"parse_tokens({value!r:.40})", lambda: kvmem.parse_tokens(value), names=["tokens"],
         check=check_positive_int)
    call(f"parse_bytes({value!r:.40})", lambda: kvmem.parse_bytes(value), names=["bytes"],
         check=check_positive_int)


@SETTINGS
@given(value=HOSTILE_NUMBERS, binary=st.booleans())
@example(value=float("nan"), binary=True)   # issue 13: "nan B"
@example(value=float("inf"), binary=True)   # issue 13: "inf PiB"
@example(value=10**400, binary=False)       # issue 13: OverflowError
def test_format_bytes(value, binary):
    call(f"format_bytes({value!r:.40})", lambda: kvmem.format_bytes(value, binary=binary), names=["bytes"],
         check=check_text)


FORMULA_FIELDS = ("bytes_per_element", "batch", "layers", "kv_heads", "head_dim", "tokens")


@settings(max_examples=1500, suppress_health_check=[HealthCheck.too_slow])
@given(field=st.sampled_from(FORMULA_FIELDS), value=HOSTILE_NUMBERS)
@example(field="bytes_per_element", value=float("nan"))  # issue 13: returned nan
@example(field="bytes_per_element", value=float("inf"))  # issue 13: returned inf
@example(field="tokens", value=Fraction(1, 3))
def test_formula(field, value):
    args = dict(bytes_per_element=2, batch=1, layers=32, kv_heads=8, head_dim=128, tokens=1024)
    args[field] = value

    def sane(result):
        if isinstance(result, bool) or not isinstance(result, (int, float, Fraction)):
            return f"{type(result).__name__} result"
        if result != result or result in (float("inf"), float("-inf")) or result < 0:
            return f"result {result!r}"
        return None

    call(f"formula({field}={value!r:.40})", lambda: kvmem.formula(**args), names=[field], check=sane)

import pytest

from kvmem import formula


def test_seed_worked_example():
    # The seed's LLaMA-2-7B example: 2 x 2 B x 32 batch x 32 layers x 32 heads x 128 x 500 tokens
    assert formula(bytes_per_element=2, batch=32, layers=32, kv_heads=32, head_dim=128, tokens=500) == 8_388_608_000
    assert formula(bytes_per_element=2, batch=1, layers=32, kv_heads=32, head_dim=128, tokens=500) == 262_144_000


def test_fractional_element_size():
    assert formula(bytes_per_element=0.5, batch=1, layers=1, kv_heads=1, head_dim=128, tokens=2) == 256


def test_huge_values_stay_exact():
    n = formula(bytes_per_element=2, batch=10**6, layers=10**3, kv_heads=10**3, head_dim=10**3, tokens=10**7)
    assert n == 2 * 2 * 10**22 and isinstance(n, int)


@pytest.mark.parametrize("field", ["batch", "layers", "kv_heads", "head_dim", "tokens"])
def test_rejects_negative_and_fractional(field):
    args = dict(bytes_per_element=2, batch=1, layers=1, kv_heads=1, head_dim=1, tokens=1)
    with pytest.raises(ValueError, match=f"{field} must be a non-negative number"):
        formula(**{**args, field: -1})
    with pytest.raises(ValueError, match=f"{field} must be a whole number"):
        formula(**{**args, field: 1.5})


def test_seed_terms_read_naively():
    import kvmem
    from kvmem.textbook import seed_terms

    terms = seed_terms(kvmem.get_model("llama-3.1-8b"), tokens=8192, batch=1)
    assert terms.to_dict() == dict(bytes_per_element=2, batch=1, layers=32, kv_heads=8, head_dim=128, tokens=8192,
                         head_dim_k=128, head_dim_v=128, dtype="bf16", bytes=1_073_741_824)
    # Gemma-3-27B: the naive count treats all 62 layers as full -> far above the real cache at 128k
    gemma = kvmem.get_model("gemma-3-27b")
    assert seed_terms(gemma, tokens=131072, batch=1).formula_bytes > 5 * kvmem.estimate(gemma, tokens=131072).kv_bytes


def test_seed_terms_read_mla_per_head():
    # issue 23 item 2: DeepSeek-V3 read naively is 128 KV heads x (K 128 + 64, V 128), not one 576-wide head:
    # 61 layers x 128 x (192 + 128) x 2 B = 4,997,120 B per token, 71x the 70,272-byte latent
    import kvmem
    from kvmem.textbook import seed_terms

    terms = seed_terms(kvmem.get_model("deepseek-v3"), tokens=1, batch=1)
    assert (terms.kv_heads, terms.head_dim_k, terms.head_dim_v, terms.head_dim) == (128, 192, 128, 160)
    assert terms.formula_bytes == 4_997_120
    assert terms.formula_bytes // kvmem.estimate("deepseek-v3", tokens=1).kv_bytes == 71


@pytest.mark.parametrize("bad, message", [(float("nan"), "must be a non-negative number, got nan"),
                                          (float("inf"), "must be a finite number, got inf")])
def test_rejects_nan_and_inf(bad, message):
    # issue 13: formula(bytes_per_element=nan) returned nan, and inf returned inf
    args = dict(bytes_per_element=2, batch=1, layers=1, kv_heads=1, head_dim=1, tokens=1)
    for field in args:
        with pytest.raises(ValueError, match=f"{field} {message}"):
            formula(**{**args, field: bad})


def test_seed_terms_take_an_estimates_k_v_pair():
    # llama.cpp with type_k=q8_0, type_v=f16 reports kv_dtype "q8_0/f16": p = (8.5 + 16) / 2 / 8 B = 1.53125 B
    import kvmem
    from kvmem.textbook import seed_terms

    gemma = kvmem.get_model("gemma-3-27b")
    terms = seed_terms(gemma, tokens=32768, batch=1, kv_dtype="q8_0/f16")
    assert terms.bytes_per_element == 1.53125 and terms.dtype == "q8_0/fp16"
    # 2 x 1.53125 x 62 layers x 16 heads x 128 x 32,768 = 12,742,295,552
    assert terms.formula_bytes == 12_742_295_552
    assert seed_terms(gemma, tokens=32768, batch=1, kv_dtype="q8_0").formula_bytes == 8_841_592_832


def test_seed_terms_are_a_frozen_record():
    import kvmem
    from kvmem.textbook import SeedTerms, seed_terms

    terms = seed_terms(kvmem.get_model("llama-3.1-8b"), tokens=8, batch=1)
    assert type(terms) is SeedTerms and terms.formula_bytes == terms.to_dict()["bytes"] == 8 * 131_072
    assert list(terms.to_dict())[-1] == "bytes"

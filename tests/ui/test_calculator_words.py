"""The calculator's headline words (issue 33 finding 8): the per-token figure is exact or said to be a mean,
and the seed's formula names the KV heads it multiplies."""

from tests.ui.apptest import load


def _page(params):
    at = load("ui/calculator.py")
    at.query_params.update(params)
    return at.run()


def test_per_token_is_exact_or_a_mean():
    # Gemma-3-27B at 30,000 tokens, ideal: 2,893,807,616 B / 30,000 = 96,460.25... B (its sliding layers hold
    # 1,024 tokens): a mean, said so (was "96,460 B" beside "Bytes are exact integers")
    at = _page({"model": "gemma-3-27b", "tokens": "30000", "engine": "ideal"})
    assert not at.exception
    assert {m.label: m.value for m in at.metric}["Per token"] == "≈ 96,460.3 B, the mean"
    # Llama-3.1-8B: 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 B = 131,072 B for every token
    at = _page({"model": "llama-3.1-8b", "tokens": "8192", "engine": "ideal"})
    assert {m.label: m.value for m in at.metric}["Per token"] == "131,072 B"


def test_the_formula_labels_kv_heads():
    at = _page({"model": "llama-3.1-8b", "tokens": "8192", "engine": "ideal"})
    latex = at.get("latex")[0].proto.body
    assert r"n_{kv\_heads}" in latex and "n_{heads}" not in latex
    assert r"\times 8 \times 128" in latex                   # 8 KV heads of Llama-3.1-8B, not its 32 query heads

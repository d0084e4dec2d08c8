"""kvmem's SGLang EAGLE/MTP draft pool against SGLang 0.5.23's own DefaultPoolConfigurator
(kvmem/oracles/sglang_draft.py)."""

from tests.oracles.conftest import require

require("sglang")

from kvmem.oracles import sglang_draft as oracle  # noqa: E402


def test_draft_cells_and_tokens_equal_sglangs():
    cases = oracle.directed_cases()
    assert {c["model"].name for c in cases} >= {"llama-3.1-8b", "deepseek-v2-lite"}
    bad = [f"{c.case}: {c.quantity}: kvmem {c.kvmem!r}, SGLang {c.engine!r}"
           for case in cases for c in oracle.run_case(**case) if not c.matches]
    assert not bad, "\n".join(bad)

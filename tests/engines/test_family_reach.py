"""Issue 31's test: every family kvmem's reader knows (kvmem.configs.FAMILIES) and every config of the
corpus of published checkpoints (tests/fixtures/configs/corpus) through every engine mode. A refusal
must be the engine's own (a plain ValueError stating the engine's reason); kvmem's own gaps --
kvmem.engines.FamilyNotChecked ("kvmem has not checked this family against <release>'s code") and
the reader's refusals of corpus files -- are held as a ratchet: the lists below are asserted EQUAL
to what the run finds, so the test fails when a new gap appears and when a gap closes without its
entry being removed here. Both lists are to reach zero (issue 31: zero "not yet")."""

import pathlib
import re

import kvmem
from kvmem.catalog import preset
from kvmem.engines import ENGINES
from kvmem.reach import NOT_YET, REFUSED, SIZED, families_markdown, family_reach, reach, reach_config

ROOT = pathlib.Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "fixtures" / "configs" / "corpus"

# engine mode -> the families it refuses as "not yet" (FamilyNotChecked), sorted
NOT_YET_BY_ENGINE: dict[str, str] = {}     # every family is sized or refused with the engine's own reason
NOT_YET_PAIRS = sorted((engine, model_type) for engine, types in NOT_YET_BY_ENGINE.items() for model_type in types.split())

# corpus files the reader refuses (a family it does not read yet, or a field it does not understand)
READER_REFUSES: list[str] = []      # every corpus config is read (RedHatAI's DeepSeek-V4 qk_nope_head_dim: judged)

_GAP_WORDS = re.compile(r"kvmem (does|has) not|not modell?ed|\byet\b")


def _diff(found, expected) -> str:
    found, expected = set(found), set(expected)
    return (f"new gaps (fix them, or add them here with why): {sorted(found - expected)}; "
            f"closed gaps (remove them from the list): {sorted(expected - found)}")


def test_every_family_in_every_mode_is_sized_refused_by_the_engine_or_listed_here():
    table = family_reach()
    assert set(table) == set(kvmem.configs.FAMILIES) and all(set(row) == set(ENGINES) for row in table.values())
    found = _family_gaps(table)
    assert found <= set(NOT_YET_PAIRS), _diff(found, set(NOT_YET_PAIRS) & found)
    for t, row in table.items():
        for engine, (status, reason) in row.items():
            if status == REFUSED:       # the engine's own reason, as its module states it
                assert reason == ENGINES[engine].refusals[t] and not _GAP_WORDS.search(reason), (engine, t, reason)


def test_the_list_is_sorted_and_names_real_families_and_engines():
    for engine, types in NOT_YET_BY_ENGINE.items():
        assert engine in ENGINES and types.split() == sorted(types.split()), engine
        assert set(types.split()) <= set(kvmem.configs.FAMILIES), engine
    assert READER_REFUSES == sorted(READER_REFUSES)


def test_every_corpus_config_in_every_mode():
    report = reach(CORPUS, pattern="*.json")
    assert len(report.entries) >= 100
    refused = sorted(entry.path for entry in report.entries if entry.refusal is not None)
    assert refused == READER_REFUSES, _diff(refused, READER_REFUSES)
    gaps = _corpus_gaps(report)
    assert gaps <= set(NOT_YET_PAIRS), _diff(gaps, set(NOT_YET_PAIRS) & gaps)


def test_the_gaps_found_are_exactly_the_list():
    # the declarations' gaps, and the corpus's (compressed layers in a mode with no rule for them)
    found = sorted(_family_gaps(family_reach()) | _corpus_gaps(reach(CORPUS, pattern="*.json")))
    assert found == NOT_YET_PAIRS, _diff(found, NOT_YET_PAIRS)


def _family_gaps(table) -> set:
    return {(engine, t) for t, row in table.items() for engine, (status, _) in row.items() if status == NOT_YET}


def _corpus_gaps(report) -> set:
    gaps = set()
    for entry in report.entries:
        if entry.refusal is not None:
            continue
        for engine, result in entry.engines.items():
            if result["status"] == NOT_YET:
                gaps.add((engine, entry.model_type))
            elif result["status"] == REFUSED:
                assert not _GAP_WORDS.search(result["reason"]), (entry.path, engine, result["reason"])
            else:
                assert result["status"] == SIZED and result["total_bytes"] >= 0, (entry.path, engine)
    return gaps


def test_every_preset_in_every_mode():
    for name in kvmem.list_models():
        entry = reach_config(preset(name)["config"], path=name, name=name)
        assert entry.refusal is None, name
        for engine, result in entry.engines.items():
            if result["status"] == NOT_YET:
                assert (engine, entry.model_type) in NOT_YET_PAIRS, (name, engine)
            elif result["status"] == REFUSED:
                assert not _GAP_WORDS.search(result["reason"]), (name, engine, result["reason"])


def test_docs_families_md_is_what_the_declarations_generate():
    committed = (ROOT / "docs" / "families.md").read_text()
    assert committed == families_markdown(), "regenerate it: python -m kvmem.reach > docs/families.md"
    assert "`glm_moe_dsa`" in committed          # sized by every engine mode


# issue 31's flagship presets: each one's config is its corpus file's, value for value
FLAGSHIPS = {
    "glm-5": ("zai-org--GLM-5", 78 * ((512 + 64) * 2 + 128 * 2)),              # latent + rope + indexer key: 109,824
    "glm-5.1": ("zai-org--GLM-5.1", 78 * ((512 + 64) * 2 + 128 * 2)),          # 109,824
    "glm-5.2": ("zai-org--GLM-5.2", 78 * (512 + 64) * 2 + 21 * 128 * 2),       # 21 'full' indexer layers: 95,232
    "deepseek-v4-pro": ("deepseek-ai--DeepSeek-V4-Pro", 61 * 512 * 2),         # one K=V row a layer: 62,464
    "kimi-k3": ("moonshotai--Kimi-K3", 24 * (512 + 64) * 2),                   # 24 MLA of 93 layers: 27,648
    "gemma-4-26b-a4b": ("google--gemma-4-26B-A4B", 25 * 8 * 256 * 2 * 2 + 5 * 2 * 512 * 2 * 2),  # 225,280
}


def test_the_flagship_presets_are_their_published_configs():
    import json
    for name, (stem, bytes_per_token) in FLAGSHIPS.items():
        data = preset(name)
        assert data["config"] == json.loads((CORPUS / f"{stem}.json").read_text()), name
        assert data["hf_id"] == stem.replace("--", "/", 1) and f"corpus/{stem}.json" in data["source"], name
        # the first token, bf16, ideal count (every window holds it)
        assert kvmem.estimate(name, tokens=1).kv_bytes == bytes_per_token, name

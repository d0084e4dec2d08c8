"""Builds that predate an architecture (kvmem/engines/llamacpp/arch_builds.py): llama.cpp before the PR that added
an architecture's LLM_ARCH_NAMES entry throws "unknown model architecture" on its GGUF, so kvmem refuses such a build
where one is given (-o build=, a log's build line) and takes a log dated only by its line formats (approximately) at
the architecture's first day. Each PR's commit, date and first build: kvmem/data/llamacpp_prs.json
(tools/llamacpp_builds.py over master); its line: `git show <commit>:src/llama-arch.cpp`."""

from __future__ import annotations

import datetime

import pytest

import kvmem
from kvmem.datafiles import read_json
from kvmem.engines.llamacpp.arch_builds import ADDED, first_build
from kvmem.engines.llamacpp.arch_fields import ARCHS
from kvmem.engines.llamacpp.log_lines import log_lines
from kvmem.logcheck import check_log

PRS = read_json("llamacpp_prs.json")["prs"]

# a preset of each architecture -> (the PR's squash-merge day, PR): `git log -S'{ LLM_ARCH_<X>,' master`
PRESETS = {"deepseek-v2-lite": ("2024-05-28", 7519), "llama-4-scout-17b-16e": ("2025-04-07", 12791),
           "glm-4-9b-0414": ("2025-04-11", 12867), "glm-4.5-air": ("2025-08-04", 14939),
           "gpt-oss-20b": ("2025-08-05", 15091), "minimax-m2.5": ("2025-10-31", 16831),
           "qwen3-next-80b-a3b": ("2025-11-28", 16095), "qwen3.5-9b": ("2026-02-10", 19468),
           "qwen3.5-35b-a3b": ("2026-02-10", 19468), "gemma-4-26b-a4b": ("2026-04-02", 21309)}
PRESETS["minimax-m1"] = ("2026-08-15", 27018)     # minimax-01: graphs_minimax01
PRESETS.update({"falcon-7b": ("2023-08-23", 2717), "gpt2": ("2023-12-28", 4555),
                "gpt-neox-20b": ("2024-05-23", 7461)})     # graphs_classic (gpt2, gptneox: arch_builds.TYPE_ADDED)
PRESETS.update({"gemma-3n-e2b": ("2025-06-26", 14400), "gemma-3n-e4b": ("2025-06-26", 14400)})     # graphs_gemma3n
PRESETS.update({"jamba-1.5-mini": ("2025-07-09", 7531), "nemotron-h-8b": ("2025-08-28", 15507),
                "nemotron-3-nano-30b-a3b": ("2025-12-16", 18058)})     # nemotron_h_moe: tensors_ssm.nemotron_arch
PRESETS.update({"kimi-linear-48b-a3b": ("2026-02-06", 18755), "kimi-k3": ("2026-08-15", 26185)})     # tensors_kimi


def test_every_architecture_kvmem_lays_out_is_dated():
    # arch_tensors.ARCHS: each architecture's first build here, or plan._dsa_build's (glm-dsa, deepseek32)
    # deepseek4, minimax-m3: dsv4._check and plan refuse every build but the vendored 0c1e57098 (their caches,
    # llama_kv_cache_dsv4 and llama_kv_cache_msa, are modelled there only)
    assert set(ARCHS.values()) - set(ADDED) == {"glm-dsa", "deepseek32", "deepseek4", "minimax-m3"}
    assert {first_build(kvmem.get_model(p))[1] for p in PRESETS} == {pr for pr, _ in ADDED.values()}
    for arch, (pr, _where) in ADDED.items():
        assert PRS[str(pr)][0] is not None, arch          # on master: a first build


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_a_build_before_the_architecture_is_refused_and_its_day_laid_out(preset):
    day, pr = PRESETS[preset]
    date = datetime.date.fromisoformat(day)
    model = kvmem.get_model(preset)
    assert first_build(model)[:2] == (date, pr)
    before = (date - datetime.timedelta(days=1)).isoformat()
    arch = first_build(model)[2].split()[2]     # "have no <arch> architecture" (nemotron_h_moe: by its config)
    with pytest.raises(ValueError, match=rf"builds before {day} \(PR #{pr}\) have no {arch} architecture .*"
                                         rf"at {PRS[str(pr)][2]}\); build {before} cannot load"):
        kvmem.estimate(model, engine="llama.cpp", tokens=4096, build=before)
    assert kvmem.estimate(model, engine="llama.cpp", tokens=4096, build=day).total_bytes > 0


def test_gpt_oss_before_pr_15091_is_refused_in_its_message():
    with pytest.raises(ValueError) as error:
        kvmem.estimate("gpt-oss-20b", engine="llama.cpp", tokens=4096, build="2025-08-04")
    assert str(error.value) == (
        "gpt-oss-20b: llama.cpp builds before 2025-08-05 (PR #15091) have no gpt-oss architecture (its LLM_ARCH_NAMES "
        "entry, src/llama-arch.cpp#L91 at fd1234cb4); build 2025-08-04 cannot load its GGUF (\"unknown model "
        "architecture: 'gpt-oss'\")")


@pytest.mark.parametrize("preset, day, pr, tokenizer", [
    ("deepseek-v3", "2025-01-04", 11049, "deepseek-v3"), ("deepseek-r1", "2025-01-04", 11049, "deepseek-v3"),
    ("kimi-k2-instruct", "2025-07-15", 14654, "kimi-k2")])
def test_deepseek_v3_and_kimi_k2_gguf_need_their_pre_tokenizer(preset, day, pr, tokenizer):
    # deepseek2 exists from 2024-05-28, but these GGUFs carry a pre-tokenizer (convert_hf_to_gguf.py at 9394bbd48
    # #L692 / at 4a4f42694 #L845) that builds before their PR throw on: "unknown pre-tokenizer type" (src/llama-model.cpp
    # #L1355 at 9394bbd48's parent, src/llama-vocab.cpp#L1958 at 4a4f42694's parent). Kimi K2's config is read as
    # deepseek_v3 (configs ALIASES): its own model_type decides
    before = (datetime.date.fromisoformat(day) - datetime.timedelta(days=1)).isoformat()
    with pytest.raises(ValueError, match=rf"builds before {day} \(PR #{pr}\) do not read the pre-tokenizer "
                                         rf"'{tokenizer}' .* at {PRS[str(pr)][2]}\); build {before} cannot load its "
                                         rf"GGUF \(\"unknown pre-tokenizer type: '{tokenizer}'\"\)"):
        kvmem.estimate(preset, engine="llama.cpp", tokens=4096, build=before)
    assert kvmem.estimate(preset, engine="llama.cpp", tokens=4096, build=day).total_bytes > 0


# a llama4 log of llama.cpp's "llama_context: KV self size" era (PR #12181, 2025-03-13, to PR #12799, 2025-05-02),
# which logs.py dates 2025-04-01 without a build line: before llama4 existed (PR #12791, 2025-04-07, build 5074)
_KV = log_lines(kvmem.estimate("llama-4-scout-17b-16e", engine="llama.cpp", tokens=8192, build="2025-04-07"))
LOG = "llama_context: n_seq_max     = 1\nllama_context: n_ctx         = 8192\n" + "\n".join(_KV) + "\n"


def test_a_log_dated_by_its_format_alone_is_taken_at_the_architectures_first_day():
    assert _KV[0].startswith("llama_context: KV self size  = 1536.00 MiB")
    result = check_log(LOG, "llama-4-scout-17b-16e", engine="llama.cpp")
    assert [c.matches for c in result.checks] == [True]
    assert result.settings["build"] == "2025-04-07"
    assert ("no build line: the log's line formats date its build about 2025-04-01 (approximate); it ran "
            "llama-4-scout-17b-16e, which builds before 2025-04-07 cannot load (PR #12791): taken as 2025-04-07"
            ) in result.notes


def test_a_log_whose_build_line_predates_the_architecture_is_refused():
    # master's build 5073 (8297...) is of 2025-04-07 but lacks PR #12791 (build 5074, 1466621e): dated 2025-04-06
    with pytest.raises(ValueError, match=r"builds before 2025-04-07 \(PR #12791\) have no llama4 architecture"):
        check_log("build: 5073 (8297aaaa) with cc for x86_64-linux-gnu\n" + LOG, "llama-4-scout-17b-16e",
                  engine="llama.cpp")
    result = check_log("build: 5074 (1466621e) with cc for x86_64-linux-gnu\n" + LOG, "llama-4-scout-17b-16e",
                       engine="llama.cpp")
    assert result.settings["build"] == "2025-04-07" and [c.matches for c in result.checks] == [True]
    assert not [n for n in result.notes if "approximate" in n]

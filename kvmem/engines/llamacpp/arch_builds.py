"""The builds that have each architecture kvmem lays out (arch_tensors.ARCHS): a build dated before the pull request
that added the architecture's LLM_ARCH_NAMES entry cannot load its GGUF (llama_model_loader: "unknown model
architecture"), so such a build is refused by name (plan._plan_of), where the build is given (-o build=, or a log's
build line). A log dated only by its line formats is taken at the architecture's first day instead
(logs.check: those dates are approximate, and the log ran the model). glm-dsa and deepseek32: plan._dsa_build."""

from __future__ import annotations

import datetime

from ...datafiles import read_json
from ...model import Model
from .arch_tensors import ARCHS
from .settings import PR_DATES

# llama.cpp architecture -> (PR, the file and line of its LLM_ARCH_NAMES entry at the PR's squash-merge commit on
# master, which the commit's parent lacks: `git log -S'{ LLM_ARCH_<X>,' master`; the commits and dates are
# kvmem/data/llamacpp_prs.json's rows). Before PR #10902 (2025-01-03) the names sat in the top-level llama.cpp.
# PR #21309's squash subject ("model, mtmd: fix gguf conversion for audio/vision mmproj") is a sub-commit's: the
# merge adds LLM_ARCH_GEMMA4 and src/models/gemma4-iswa.cpp.
ADDED = {"deepseek2": (7519, "llama.cpp#L263"), "llama4": (12791, "src/llama-arch.cpp#L9"),
         "glm4": (12867, "src/llama-arch.cpp#L57"), "glm4moe": (14939, "src/llama-arch.cpp#L65"),
         "gpt-oss": (15091, "src/llama-arch.cpp#L91"), "minimax-m2": (16831, "src/llama-arch.cpp#L108"),
         "qwen3next": (16095, "src/llama-arch.cpp#L35"), "qwen35": (19468, "src/llama-arch.cpp#L40"),
         "qwen35moe": (19468, "src/llama-arch.cpp#L41"), "gemma4": (21309, "src/llama-arch.cpp#L59")}

_COMMITS = {int(n): row[2] for n, row in read_json("llamacpp_prs.json")["prs"].items()}     # read once


def first_build(model: Model) -> tuple[datetime.date, int, str] | None:
    """(the first build date that has ``model``'s llama.cpp architecture, its PR, the line that says so), or None
    where kvmem dates no such architecture."""
    arch = ARCHS.get(model.model_type)
    if arch not in ADDED:
        return None
    pr, where = ADDED[arch]
    return PR_DATES[pr], pr, f"its LLM_ARCH_NAMES entry, {where} at {_COMMITS[pr]}"


def check_arch_build(model: Model, build: datetime.date) -> None:
    """Refuse a build dated before ``model``'s llama.cpp architecture existed: llama_model_loader throws "unknown
    model architecture: '<arch>'" (src/llama-model.cpp#L438 at fd1234cb4's parent)."""
    first = first_build(model)
    if first is not None and build < first[0]:
        arch = ARCHS[model.model_type]
        raise ValueError(f"{model.name}: llama.cpp builds before {first[0]} (PR #{first[1]}) have no {arch} "
                         f"architecture ({first[2]}); build {build} cannot load its GGUF "
                         f"(\"unknown model architecture: '{arch}'\")")

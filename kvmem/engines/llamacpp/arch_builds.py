"""The builds that have each architecture kvmem lays out (arch_tensors.ARCHS): a build dated before the pull request
that added the architecture's LLM_ARCH_NAMES entry cannot load its GGUF (llama_model_loader: "unknown model
architecture"; DeepSeek-V3 and Kimi K2 on deepseek2: "unknown pre-tokenizer type", TYPE_ADDED), so such a build is
refused by name (plan._plan_of), where the build is given (-o build=, or a log's build line). A log dated only by
its line formats is taken at the architecture's first day instead (logs.check: those dates are approximate, and the
log ran the model). glm-dsa and deepseek32: plan._dsa_build."""

from __future__ import annotations

import datetime

from ...model import Model
from .arch_fields import ARCHS
from .settings import PR_DATES, PR_ROWS
from .tensors_kimi import kimi_arch
from .tensors_ssm import nemotron_arch

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
ADDED["minimax-01"] = (27018, "src/llama-arch.cpp#L131")     # graphs_minimax01
ADDED["gemma3n"] = (14400, "src/llama-arch.cpp#L45")     # graphs_gemma3n ("model : gemma3n text-only", 8846aace4)
ADDED.update(jamba=(7531, "src/llama-arch.cpp#L49"), nemotron_h=(15507, "src/llama-arch.cpp#L72"),
             nemotron_h_moe=(18058, "src/llama-arch.cpp#L78"))     # tensors_ssm (nemotron_h_moe: nemotron_arch)
ADDED.update({"kimi-linear": (18755, "src/llama-arch.cpp#L123"), "kimi-k3": (26185, "src/llama-arch.cpp#L147")})

# model types (the config's own, before kvmem's aliases) whose GGUF their architecture loads only from a later PR,
# each for the pre-tokenizer its converter writes; before it llama_model_loader throws "unknown pre-tokenizer type":
# DeepSeek-V3 / R1 on deepseek2 from PR #11049 (2025-01-04; convert_hf_to_gguf.py#L692 "deepseek-v3", #L3855
# DeepseekV3ForCausalLM at 9394bbd48; the throw at src/llama-model.cpp#L1355 of its parent); Kimi K2 from PR #14654
# (2025-07-15; convert_hf_to_gguf.py#L845 "kimi-k2" at 4a4f42694; the throw at src/llama-vocab.cpp#L1958 of its parent)
TYPE_ADDED = {"deepseek_v3": (11049, "do not read the pre-tokenizer 'deepseek-v3' its converter writes",
                              "src/llama-model.cpp#L1280", "unknown pre-tokenizer type: 'deepseek-v3'"),
              "kimi_k2": (14654, "do not read the pre-tokenizer 'kimi-k2' its converter writes",
                          "src/llama-vocab.cpp#L1965", "unknown pre-tokenizer type: 'kimi-k2'")}


def first_build(model: Model) -> tuple[datetime.date, int, str, str, str] | None:
    """(the first build date that loads ``model``'s GGUF, its PR, what builds before it lack, the line the PR added
    at its commit, llama.cpp's error before it), or None where kvmem dates no such architecture."""
    arch, own = ARCHS.get(model.model_type), (model.config or {}).get("model_type") or model.model_type
    arch = nemotron_arch(model) if arch == "nemotron_h" else arch     # Nemotron 3's MoE: its own architecture
    arch = kimi_arch(model) if arch == "kimi-linear" else arch         # Kimi-K3: its own architecture
    if arch is not None and own in TYPE_ADDED:
        pr, lack, where, error = TYPE_ADDED[own]
    elif arch in ADDED:
        pr, where = ADDED[arch]
        lack, error = f"have no {arch} architecture", f"unknown model architecture: '{arch}'"
        where = f"its LLM_ARCH_NAMES entry, {where}"
    else:
        return None
    return PR_DATES[pr], pr, lack, f"{where} at {PR_ROWS[pr][2]}", error


def check_arch_build(model: Model, build: datetime.date) -> None:
    """Refuse a build dated before ``model``'s GGUF loads: llama_model_loader throws "unknown model architecture:
    '<arch>'" (src/llama-model.cpp#L438 at fd1234cb4's parent) or, for TYPE_ADDED, the error named there."""
    first = first_build(model)
    if first is not None and build < first[0]:
        date, pr, lack, where, error = first
        raise ValueError(f"{model.name}: llama.cpp builds before {date} (PR #{pr}) {lack} ({where}); build {build} "
                         f"cannot load its GGUF (\"{error}\")")
# graphs_classic: falcon's name came with its loader; gpt2's and gptneox's names are older than their loaders (PR #4555,
# PR #7461: the line is the loader's case, TYPE_ADDED says it)
ADDED.update(falcon=(2717, "llama.cpp#L164"), gpt2=(4555, "llama.cpp#L3741"), gptneox=(7461, "llama.cpp#L6097"))
# gpt2, gpt_neox: before PR #4555 / #7461 llm_load_tensors had no case for the architecture it names
# (llama.cpp#L3714 at ea5497df5's parent, #L6037 at 9b82476ee's parent: throw "unknown architecture")
TYPE_ADDED.update({t: (pr, f"have no {arch} architecture in llm_load_tensors, which names it", f"its case there, {at}",
                       "unknown architecture")
                   for t, arch, pr, at in (("gpt2", "gpt2", 4555, "llama.cpp#L3741"),
                                           ("gpt_neox", "gptneox", 7461, "llama.cpp#L6097"))})

"""The NextN/MTP blocks of a llama.cpp GGUF: how many convert_hf_to_gguf writes after the trunk (counted in
block_count, written as nextn_predict_layers), dated by build where a converter of the day skipped them, and which
of their tensors llama.cpp creates without load_mtp (arch_tensors' module doc)."""

from __future__ import annotations

import re

from ...model import Model
from .arch_fields import ARCHS, field
from .settings import PR_22673, build_date
from .tensors_ssm import nemotron_mtp

__all__ = ["gguf_nextn_layers", "nextn_loaded", "mtp_loaded"]



# llama.cpp architecture -> the config field convert_hf_to_gguf adds to block_count without --no-mtp (and writes as
# nextn_predict_layers): llama.cpp@0c1e57098 conversion/glm.py#L117-L122 (glm4moe), #L328-L333 (glm-dsa),
# conversion/deepseek.py#L472-L476 (deepseek32), conversion/qwen.py#L296-L306 (qwen35, qwen35moe, qwen3next:
# _QwenMtpMixin). deepseek2 writes none (DeepseekV2Model skip_mtp, conversion/deepseek.py#L240, #L398-L402); nor do
# gpt-oss, minimax-m2 (conversion/minimax.py) and gemma4, nor the llama-like types.
_NEXTN_FIELD = {"glm4moe": "num_nextn_predict_layers", "glm-dsa": "num_nextn_predict_layers",
                "deepseek32": "num_nextn_predict_layers", "qwen35": "mtp_num_hidden_layers",
                "qwen35moe": "mtp_num_hidden_layers", "qwen3next": "mtp_num_hidden_layers"}


def gguf_nextn_layers(model: Model, build=None) -> int:
    """The NextN/MTP blocks a llama.cpp GGUF of ``model`` carries after its trunk (block_count - n_layer): a model
    read from a GGUF, its nextn_predict_layers (kvmem.sources.gguf_config: Model.mtp_layers); from a config, what
    convert_hf_to_gguf writes by default (_NEXTN_FIELD). Qwen3-Next's config names no count: its converter counts
    the checkpoint's (model.)mtp.layers.N tensors (conversion/qwen.py#L301-L305, #L316-L337), read here from a
    safetensors checkpoint when one is attached, else 0 (the published Qwen3-Next GGUFs predate _QwenMtpMixin).
    ``build`` (the llama.cpp build's date, None: current): a build before PR #22673 (settings.PR_22673) loads a
    qwen35 / qwen35moe file written without the MTP block (the converter of its day skipped mtp.*): 0 there."""
    checkpoint = model.checkpoint
    if getattr(checkpoint, "format", None) == "gguf":
        return model.mtp_layers
    arch = ARCHS.get(model.model_type, "")
    if arch == "nemotron_h":        # the MoE converter's one MTP block, by build (tensors_ssm.nemotron_mtp)
        return nemotron_mtp(model, build)
    name = _NEXTN_FIELD.get(arch)
    if name is None or (arch in ("qwen35", "qwen35moe") and build is not None and build_date(build) < PR_22673):
        return 0
    count = field(model, name, 0) or 0
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise ValueError(f"{model.name}: config field {name!r} is {count!r}; convert_hf_to_gguf adds it to "
                         "block_count as a whole number of MTP layers")
    if count == 0 and name == "mtp_num_hidden_layers" and getattr(checkpoint, "format", None) == "safetensors":
        found = {int(m.group(1)) for t in getattr(checkpoint, "tensors", ())
                 if (m := _MTP_TENSOR.match(t.name))}
        count = max(found) + 1 if found else 0
    return count


def nextn_loaded(model: Model) -> tuple:
    """Name endings of the MTP block's tensors llama.cpp creates with TENSOR_NOT_REQUIRED alone, so loads without
    load_mtp: glm-dsa's and deepseek32's exp_probs_b.bias (llama.cpp@0c1e57098 src/models/glm-dsa.cpp#L155,
    deepseek32.cpp#L121); step35's block but attn_norm, Q/K/V/output, ffn_norm, eh_proj/enorm/hnorm (step35.cpp
    #L115-L171). Not listed: cohere2moe's and hy-v3's nextn tensors (cohere2moe.cpp#L102, hy-v3.cpp#L91-L95)."""
    if model.model_type == "step3p5":
        return (".exp_probs_b.bias", *(f".{n}.weight" for n in "attn_q_norm attn_k_norm attn_gate ffn_gate ffn_down "
                "ffn_up ffn_gate_inp ffn_gate_exps ffn_down_exps ffn_up_exps ffn_gate_shexp ffn_up_shexp "
                "ffn_down_shexp nextn.embed_tokens nextn.shared_head_head nextn.shared_head_norm".split()))
    return (".exp_probs_b.bias",) if ARCHS.get(model.model_type) in ("glm-dsa", "deepseek32") else ()


_MTP_TENSOR = re.compile(r"^(?:model\.)?mtp\.layers\.(\d+)\.")    # conversion/qwen.py#L322-L337


def mtp_loaded(model: Model, arch: str) -> list:
    """The MTP blocks' tensors llama.cpp loads without load_mtp (nextn_loaded), after the trunk: glm-dsa's and
    deepseek32's exp_probs_b.bias [n_expert], which the converter writes from each block's e_score_correction_bias
    (scoring_func sigmoid). The blocks' other tensors are skipped at load and not listed."""
    moe = model.facts.moe
    if arch not in ("glm-dsa", "deepseek32") or moe is None or field(model, "scoring_func") != "sigmoid":
        return []
    n, e = model.num_layers, moe.experts
    return [(f"blk.{n + j}.exp_probs_b.bias", (e,)) for j in range(gguf_nextn_layers(model))]

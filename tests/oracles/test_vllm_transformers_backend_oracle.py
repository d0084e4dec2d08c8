"""kvmem's vllm refusals of Inkling-2, Inkling-2-Loop and HY-V4-VL against vLLM 0.33.0 itself: each config (the
config classes' defaults shrunk, 2 seeded variations a family, and Inkling-2's text configs alone as text-only
checkpoints) is resolved by vLLM's registry, built by its Transformers backend and run one forward
(kvmem/oracles/vllm_transformers.py, one child interpreter, ~35 s). The refusal must end with the error vLLM
raised and name the class that raised it."""

import functools

import pytest

from tests.oracles.conftest import require

require("vllm")

from kvmem.oracles import vllm_transformers as oracle  # noqa: E402

CASES = ([(t, None) for t in sorted(oracle.WRAPPERS)] + [(t, seed) for t in sorted(oracle.WRAPPERS) for seed in (0, 1)]
         + [(t, "text only") for t in sorted(oracle.TEXT_ONLY)])


def _config(model_type, seed):
    if seed == "text only":
        return oracle.text_only(oracle.base_config(model_type))
    return oracle.base_config(model_type) if seed is None else oracle.random_config(model_type, seed)


@functools.cache
def _verdicts() -> dict:
    return dict(zip(CASES, oracle.judge([_config(*case) for case in CASES]), strict=True))


@pytest.mark.parametrize("model_type, seed", CASES)
def test_vllm_builds_it_with_the_transformers_backend_and_its_first_forward_raises_what_kvmem_says(model_type,
                                                                                                    seed):
    cfg = _config(model_type, seed)
    verdict = _verdicts()[(model_type, seed)]
    # the registry's fallback: the backend class for a (multimodal) MoE model (config/model.py
    # _get_transformers_backend_cls), and an attention layer for every decoder layer (the build succeeded)
    text = cfg.get("text_config", cfg)
    wrapped = text is not cfg
    assert verdict["architecture"] == ("TransformersMultiModalMoEForCausalLM" if wrapped else "TransformersMoEForCausalLM")
    assert len(verdict["specs"]) == text["num_hidden_layers"]
    # a text-only Inkling-2 is taken for an encoder (its block residuals say is_causal = False, transformers/base.py
    # _get_attn_cls): EncoderOnlyAttention, no KV cache; a wrapper gets decoder Attention with a cache spec
    kinds = {spec[0] for spec in verdict["specs"].values()}
    assert kinds == ({"Attention"} if wrapped else {"EncoderOnlyAttention"}), kinds
    assert verdict["error"] is not None, "vLLM ran the forward: the refusal is no longer true"
    reason = oracle.kvmem_refusal(cfg)
    assert reason.endswith(verdict["error"]), (reason, verdict["error"])
    raising_class = verdict["raised_in"].split()[1].split(".")[0]     # 'modeling_x.py Class.forward'
    assert raising_class in reason, (raising_class, reason)

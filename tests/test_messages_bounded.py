"""Issue 32 (Low): a refusal quotes at most 100 characters of any input (docs/sources.md), never a
100,000-character engine, kv_dtype, gpu, weight_dtype, torch_dtype or engine option whole."""

import re

import pytest

import kvmem
from kvmem.catalog import preset
from kvmem.engines import ENGINES, engine_spec

BIG = "x" * 100_000
QUOTED = re.compile(r"'x{99}\.\.\. \(100,002 characters\)|a 100,000-character value is too long")


def _config(**changes):
    return {**preset("llama-3.1-8b")["config"], **changes}


@pytest.mark.parametrize("call", [
    lambda: kvmem.estimate("llama-3.1-8b", engine=BIG, tokens=1),
    lambda: kvmem.sweep(["llama-3.1-8b"], ["h100-sxm-80gb"], engines=[BIG], contexts=[16]),
    lambda: kvmem.estimate("llama-3.1-8b", kv_dtype=BIG, tokens=1),
    lambda: kvmem.estimate("llama-3.1-8b", engine="vllm", kv_dtype=BIG, tokens=1),
    lambda: kvmem.estimate("llama-3.1-8b", engine="llama.cpp", kv_dtype=BIG, tokens=1),
    lambda: kvmem.fit("llama-3.1-8b", gpu=BIG, context=1),
    lambda: kvmem.fit("llama-3.1-8b", gpu="h100-sxm-80gb", context=1, weight_dtype=BIG),
    lambda: kvmem.Model.from_hf_config(_config(torch_dtype=BIG)),
    lambda: kvmem.fit("llama-3.1-8b", gpu="h100-sxm-80gb", context=1, **{BIG: 1}),
], ids=["engine", "sweep engine", "kv_dtype", "vllm kv_dtype", "llama.cpp type_k", "gpu", "weight_dtype",
        "torch_dtype", "option name"])
def test_a_long_input_is_quoted_at_most_100_characters(call):
    with pytest.raises(ValueError) as refused:
        call()
    message = str(refused.value)
    assert len(message) < 1_000 and QUOTED.search(message), message[:300]


@pytest.mark.parametrize("engine", list(ENGINES))
def test_every_engine_option_of_fit_and_estimate_is_bounded(engine):
    for name in ["kv_dtype", *(option.name for option in engine_spec(engine).option_specs())]:
        for fn, args in ((kvmem.estimate, dict(tokens=16)), (kvmem.fit, dict(gpu="h100-sxm-80gb", context=16))):
            with pytest.raises(ValueError) as refused:
                fn("llama-3.1-8b", engine=engine, **args, **{name: BIG})
            assert len(str(refused.value)) < 1_000, (engine, name, fn.__name__, str(refused.value)[:200])

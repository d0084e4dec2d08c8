"""The oracle package without any engine: its report, its input checks and the CLI route."""

import json

import pytest

import kvmem
from kvmem.cli import main
from kvmem.oracles import Check, OracleReport, validate_engine
from kvmem.oracles.architectures import FAMILIES, random_config


def test_report_lists_each_mismatch_with_both_sides():
    checks = (Check("a", "num_blocks", 10, 10), Check("b", "KV cache size tokens", 160, 176))
    report = OracleReport(engine="vllm", version="0.33.0", seed=7, directed_cases=1, random_cases=1,
                          checks=checks)
    assert not report.passed and report.mismatches == (checks[1],)
    assert report.lines()[0].startswith("kvmem against vllm 0.33.0")
    assert report.lines()[1] == "MISMATCH b: KV cache size tokens: kvmem 160, vllm 176"
    data = json.loads(json.dumps(report.to_dict()))
    assert data["mismatches"] == [{"case": "b", "quantity": "KV cache size tokens", "kvmem": 160,
                                   "engine": 176, "matches": False}]


def test_bad_inputs_name_the_field():
    with pytest.raises(ValueError, match="engine must be one of llama.cpp, vllm, sglang, transformers, got 'trt'"):
        validate_engine("trt")
    with pytest.raises(ValueError, match="cases must be a non-negative integer, got -1"):
        validate_engine("vllm", cases=-1)
    assert kvmem.validate_engine is validate_engine


def test_random_architectures_are_real_configs_and_repeat_for_a_seed():
    import random
    for family in FAMILIES:
        a = random_config(family, random.Random(3))
        assert a == random_config(family, random.Random(3))
        assert kvmem.Model.from_hf_config(a).num_layers == a["num_hidden_layers"]


def test_cli_without_the_engine_says_how_to_get_it(capsys):
    import importlib.util
    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vLLM is installed here")
    assert main(["validate", "--engine", "vllm", "--cases", "1"]) == 2
    assert "run `make oracles`" in capsys.readouterr().err

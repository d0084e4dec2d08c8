"""docs/api.md, the public contract, against the code: every name, keyword and attribute it lists."""

import inspect
import pathlib
import re

import pytest

import kvmem

API = (pathlib.Path(__file__).resolve().parents[1] / "docs" / "api.md").read_text()

# Signatures as the contract writes them (``kvmem.name(a, *, b=1, **kw) -> Result``): name -> keywords.
SIGNATURES = {
    name: [part.split("=")[0].strip() for part in args.split(",")
           if part.split("=")[0].strip().isidentifier()]
    for name, args in re.findall(r"^kvmem\.(\w+)\(([^()]*)\) ->", API, flags=re.M)
}


def test_every_kvmem_name_in_the_contract_exists():
    names = set(re.findall(r"kvmem\.([A-Za-z_]\w*)", API))
    assert {"estimate", "capacity", "fit", "measure", "formula", "Model", "Eviction"} <= names
    assert sorted(n for n in names if not hasattr(kvmem, n)) == []


def test_signatures_take_the_contract_keywords():
    assert {"formula", "estimate", "capacity", "fit", "measure", "compare_strategies"} <= set(SIGNATURES)
    for name, keywords in SIGNATURES.items():
        params = inspect.signature(getattr(kvmem, name)).parameters
        missing = [k for k in keywords if k not in params]
        assert missing == [], f"kvmem.{name} lacks {missing}"
    strategies = re.search(r"kvmem\.estimate\(model, \.\.\., (.*?)\)", API).group(1)
    assert {"eviction", "shared_prefix", "offload"} <= set(inspect.signature(kvmem.estimate).parameters)
    assert strategies == "eviction=None, shared_prefix=0, offload=0.0"


def test_result_attributes_of_the_contract_exist():
    estimate = kvmem.estimate("llama-3.1-8b", tokens=16)
    for attr in ("kv_bytes", "kv_bytes_all_devices", "k_bytes", "v_bytes", "state_bytes", "per_layer",
                 "peak_bytes", "to_dict", "kv_dtype", "k_dtype", "v_dtype", "refusal", "engine_refuses",
                 "engine_allows_with", "details", "eviction", "shared_prefix", "offload"):
        assert hasattr(estimate, attr), attr
    cap = kvmem.capacity("llama-3.1-8b", engine="vllm", kv_memory="1GiB", max_model_len=4096)
    for attr in ("blocks", "tokens", "max_concurrency", "longest_request_tokens", "refusal", "k_dtype", "v_dtype"):
        assert hasattr(cap, attr), attr
    assert not hasattr(cap, "max_model_len")          # one spelling: the alias it had is gone
    # 1 GiB / (16 tokens x 131,072 B) = 512 blocks, less vLLM's null block: 511 x 16 = 8,176 tokens
    assert cap.to_dict()["max_model_len"] == cap.longest_request_tokens == 8_176
    fit = kvmem.fit("llama-3.1-8b", gpu="h100-sxm-80gb", context=4096)
    for attr in ("fits", "max_batch", "max_context", "min_gpus", "breakdown", "decode_tokens_per_s", "refusal",
                 "to_dict"):
        assert hasattr(fit, attr), attr
    for attr in ("predicted_bytes", "tensor_bytes", "allocated_bytes", "peak_bytes", "reserved_bytes", "device",
                 "matches", "to_dict"):
        assert attr in {f.name for f in kvmem.Measurement.__dataclass_fields__.values()} | set(dir(kvmem.Measurement)), attr


def test_cli_subcommands_of_the_contract():
    from kvmem.cli import build_parser
    commands = set(re.search(r"sub-commands (.*?);", API, flags=re.S).group(1).replace("`", "").replace(",", " ").split())
    parser_help = build_parser().format_help()
    assert {"models", "estimate", "capacity", "fit", "validate", "gpus"} <= commands
    assert all(c in parser_help for c in commands)


def test_results_the_contract_gives_as_dicts_are_dicts():
    # docs/api.md: compare_strategies -> list[dict], preallocation_waste -> dict. They are frozen records
    # (issue 24 item 2) that are also read-only dicts, so a sizing script's json.dumps keeps working
    import json
    rows = kvmem.compare_strategies("llama-3.1-8b", tokens="8k")
    assert all(isinstance(row, dict) for row in rows)
    assert json.loads(json.dumps(rows)) == [row.to_dict() for row in rows]
    assert rows[0]["bytes"] == rows[0].total_bytes == 8192 * 131072
    waste = kvmem.preallocation_waste("llama-3.1-8b", lengths=[100, 2000], max_model_len=4096, kv_memory="1GiB")
    assert isinstance(waste, dict) and isinstance(waste["paged"], dict)
    assert json.loads(json.dumps(waste)) == waste.to_dict()
    with pytest.raises(TypeError, match="read-only"):
        waste["used"] = 0

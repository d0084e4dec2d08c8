"""kvmem's vllm mode on Mamba / linear-attention families against vLLM 0.33.0's own model code
(kvmem/oracles/vllm_states.py): each family's get_mamba_state_shape_from_config /
get_mamba_state_dtype_from_config and the platform's _align_hybrid_block_size."""

import pytest

from tests.oracles.conftest import require

require("vllm")

from pathlib import Path  # noqa: E402

from kvmem.catalog import get_model  # noqa: E402
from kvmem.model import Model  # noqa: E402
from kvmem.oracles import vllm_states as oracle  # noqa: E402

FIXTURES = Path(__file__).parent.parent / "fixtures" / "configs" / "new"
# presets, and verbatim published configs (tests/fixtures/configs/new/SOURCES.md)
PRESETS = {"kimi-linear-48b-a3b": lambda: get_model("kimi-linear-48b-a3b"),
           "lfm2.5-1.2b": lambda: Model.from_hf_config(FIXTURES / "lfm2.5-1.2b-finetune.json")}
FAMILIES = ("kimi_linear", "granitemoehybrid", "falcon_h1", "mamba", "falcon_mamba", "mamba2", "lfm2", "lfm2_moe",
            "olmo_hybrid", "bailing_hybrid")
SEEDS = range(6)


def assert_agrees(name, model, tp, num_spec=0):
    checks = oracle.run_case(name, model, tp, num_spec)
    bad = [c for c in checks if not c.matches]
    assert not bad, "\n".join(f"{c.case}: {c.quantity}: kvmem {c.kvmem!r}, vLLM {c.engine!r}" for c in bad)
    return checks


@pytest.mark.parametrize("tp", (1, 2, 4))
@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets(name, tp):
    checks = assert_agrees(name, PRESETS[name](), tp)
    assert {c.quantity for c in checks} == {"enable_prefix_caching, mamba_cache_mode", "state bytes of one sequence",
                                            "attention block size", "padded Mamba page", "attention page"}
    # vLLM's defaulting with no prefix-caching flag: these hybrids run with prefix caching, mode "align"
    assert [c.engine for c in checks if c.quantity.startswith("enable")] == [[True, "align"]]


def test_kimi_linear_preset_numbers_and_speculative_columns():
    checks = {c.quantity: c.engine for c in assert_agrees("kimi", get_model("kimi-linear-48b-a3b"), 1)}
    assert checks["state bytes of one sequence"] == [2_170_880]
    assert checks["attention block size"] == 1920
    checks = {c.quantity: c.engine for c in assert_agrees("kimi", get_model("kimi-linear-48b-a3b"), 1, 2)}
    assert checks["attention block size"] == 2048


def test_lfm2_preset_numbers():
    # conv_dim 2,048 / tp x (conv_L_cache 3 - 1) x 2 B (float16) = 8,192 B; attention 8 heads x 64 x 2 x 2 B
    # = 2,048 B per token: block 16 x cdiv(8,192, 16 x 2,048) = 16, page 32,768 B
    checks = {c.quantity: c.engine for c in assert_agrees("lfm2", PRESETS["lfm2.5-1.2b"](), 1)}
    assert checks["state bytes of one sequence"] == [8_192]
    assert checks["attention page"] == [32_768]


@pytest.mark.parametrize("model_type", FAMILIES)
def test_seeded_random_configs(model_type):
    for seed in SEEDS:
        model = oracle.random_config(model_type, seed)
        for tp in (1, 2, 4):
            # lfm2's short convs with speculative tokens are refused (tests/engines/test_vllm_states.py)
            spec = 0 if model_type.startswith("lfm2") else seed % 3
            assert_agrees(f"{model_type}-{seed}-tp{tp}", model, tp, num_spec=spec)


def test_bailing_hybrid_kda_layers_are_vllms():
    # bailing_moe_v3.py _is_kda_layer itself, over every layer count and group size up to 30 / 8
    from vllm.model_executor.models.bailing_moe_v3 import _is_kda_layer

    from kvmem.engines.vllm.models import bailing_kda_layers
    for n in range(1, 31):
        for group in range(1, 9):
            assert bailing_kda_layers(n, group) == [_is_kda_layer(i, group, n) for i in range(n)], (n, group)


def test_bailing_hybrid_numbers():
    # 32 heads x 64: conv 3 x 2,048 x (4 - 1) x 2 B = 36,864, recurrent 32 x 64 x 64 x 4 B = 524,288: 561,152 B;
    # MLA 576 x 2 B = 1,152 B a token, block 128 x cdiv(561,152, 128 x 1,152) = 512
    model = Model.from_hf_config({"model_type": "bailing_hybrid", "architectures": ["BailingMoeV3ForCausalLM"],
                               "num_hidden_layers": 20, "layer_group_size": 6, "num_attention_heads": 32,
                               "head_dim": 64, "qk_rope_head_dim": 64, "kv_lora_rank": 512, "hidden_size": 2048,
                               "short_conv_kernel_size": 4, "no_kda_lora": True, "torch_dtype": "bfloat16"})
    checks = {c.quantity: c.engine for c in assert_agrees("ling", model, 1)}
    assert checks["state bytes of one sequence"] == [561_152] and checks["attention block size"] == 512
    assert checks["attention page"] == [589_824]


@pytest.mark.parametrize("model_type, served", [("mamba", [False, "none"]), ("falcon_mamba", [False, "none"]),
                                                ("mamba2", [False, "none"]), ("granitemoehybrid", [True, "align"]),
                                                ("falcon_h1", [True, "align"]), ("olmo_hybrid", [True, "align"])])
def test_prefix_caching_default_is_vllms(model_type, served):
    # `vllm serve` with neither --enable- nor --no-enable-prefix-caching: vLLM's own defaulting (attn_type
    # "attention_free" off, "hybrid" on, then MambaModelConfig's mode) gives these, and kvmem the same
    checks = assert_agrees(model_type, oracle.random_config(model_type, 0), 1)
    assert [c.engine for c in checks if c.quantity.startswith("enable")] == [served]


SERVE_DEFAULTS = """
import json, os, sys, tempfile
from vllm.engine.arg_utils import EngineArgs
from kvmem.catalog import preset
folder = tempfile.mkdtemp()
with open(os.path.join(folder, "config.json"), "w") as f:
    json.dump(preset(sys.argv[1])["config"], f)
config = EngineArgs(model=folder, skip_tokenizer_init=True, max_model_len=4096).create_engine_config()
print(json.dumps([config.model_config.attn_type, config.cache_config.enable_prefix_caching,
                  config.cache_config.mamba_cache_mode]))
"""


def test_vllm_serve_with_no_prefix_caching_flag_runs_a_hybrid_in_align_mode():
    # end to end: EngineArgs.create_engine_config, as `vllm serve <folder>` builds its config from the preset's
    # config.json with neither --enable- nor --no-enable-prefix-caching (its own interpreter: VLLM_TARGET_DEVICE=cpu
    # fixes the platform, which the other oracles leave unresolved; 10 to 45 s, most of it vLLM's registry
    # inspecting the class in a subprocess). kvmem's resolution of the same default agrees.
    import json
    import os
    import subprocess
    import sys

    import kvmem
    from kvmem.engines.vllm.options import check_options
    env = {**os.environ, "VLLM_TARGET_DEVICE": "cpu", "VLLM_LOGGING_LEVEL": "ERROR"}
    done = subprocess.run([sys.executable, "-c", SERVE_DEFAULTS, "qwen3-next-80b-a3b"], env=env, capture_output=True,
                          text=True, timeout=300, cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == ["hybrid", True, "align"]
    ours = check_options({}, kvmem.get_model("qwen3-next-80b-a3b"))
    assert (ours.enable_prefix_caching, ours.mamba_cache_mode) == (True, "align")

"""kvmem's routed-expert share per GPU under --data-parallel-size / --enable-expert-parallel against vLLM 0.33.0's
own FusedMoEParallelConfig.make and determine_expert_map on the CPU (kvmem/oracles/vllm_dp.py)."""

from tests.oracles.conftest import require

require("vllm")

from fractions import Fraction  # noqa: E402

import pytest  # noqa: E402

from kvmem.oracles import vllm_dp as oracle  # noqa: E402


def assert_agrees(name, setting):
    checks = oracle.run_case(name, setting)
    bad = [c for c in checks if not c.matches]
    assert not bad, "\n".join(f"{c.case}: {c.quantity}: kvmem {c.kvmem!r}, vLLM {c.engine!r}" for c in bad)
    return checks[0].kvmem


def test_uneven_expert_parallel_takes_the_fuller_rank():
    # qwen3-30b-a3b on 3 replicas of tp 1 with EP: 128 experts over 3 ranks -> 43, 43, 42; the first holds 43/128
    assert oracle.vllm_share(tp=1, dp=3, experts=128, redundant=0, expert_parallel=True) == Fraction(43, 128)
    assert_agrees(*oracle.cases()[3])


@pytest.mark.parametrize("case", oracle.cases(), ids=lambda case: case[0])
def test_directed(case):
    assert_agrees(*case)


@pytest.mark.parametrize("index", range(12))
def test_seeded_random_settings(index):
    assert_agrees(*oracle.random_case(0, index))


def check_vllm_expert_command():
    """Run in its own interpreter (as tests/oracles/test_plan_roundtrip.py does: vLLM's parser needs a device type)."""
    from vllm.engine.arg_utils import EngineArgs
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    import kvmem
    parser = FlexibleArgumentParser()
    EngineArgs.add_cli_args(parser)
    plan = kvmem.plan("deepseek-v3", engine="vllm", gpu="h200-sxm-141gb", num_gpus=16, tp=8, context=32768,
                      batch=16, enable_expert_parallel=True, num_redundant_experts=32)
    argv = plan.argv
    args = EngineArgs.from_cli_args(parser.parse_args(["--model", argv[2], *argv[3:]]))
    assert (args.tensor_parallel_size, args.data_parallel_size) == (8, 2)
    assert args.enable_expert_parallel and args.enable_eplb
    assert args.eplb_config.num_redundant_experts == 32
    assert args.max_num_seqs == 8
    print("vLLM expert-parallel command parsed")


def test_vllm_parses_the_expert_parallel_command():
    import os
    import subprocess
    import sys
    from pathlib import Path
    env = {**os.environ, "VLLM_TARGET_DEVICE": "cpu", "VLLM_LOGGING_LEVEL": "ERROR"}
    code = "from tests.oracles.test_vllm_dp_oracle import check_vllm_expert_command; check_vllm_expert_command()"
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=Path(__file__).resolve().parents[2],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "vLLM expert-parallel command parsed" in done.stdout

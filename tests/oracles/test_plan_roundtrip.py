"""kvmem.plan's commands parsed by the engines' own argument parsers (issue #21 item 6).

For 50 seeded random fits per engine, the `vllm serve` command goes through vLLM 0.33.0's own
parser (EngineArgs.add_cli_args, EngineArgs.from_cli_args, CacheConfig validating the cache dtype)
and the `sglang.launch_server` command through SGLang 0.5.23's (ServerArgs.add_cli_args): each
must give back the settings kvmem sized with (parallel layout, context, memory fraction, KV dtype,
sequences, batched tokens, block/page size, chunk). Fits that do not fit are refused, not parsed.
"""

import argparse
import os
import random
import subprocess
import sys
from pathlib import Path

from tests.oracles.conftest import require

require("vllm")
require("sglang")

import kvmem  # noqa: E402
from kvmem import PlanRefused  # noqa: E402
from kvmem.engines.sglang.mamba import resolve_extra_buffer  # noqa: E402
from kvmem.weights.formats import resolve_weight_dtype  # noqa: E402

CASES = 50
ROOT = Path(__file__).resolve().parent.parent.parent
MODELS = ["llama-3.1-8b", "llama-3.3-70b", "qwen3-8b", "qwen2.5-7b", "mistral-7b", "gemma-3-27b", "qwen3.5-27b",
          "qwen3-0.6b", "qwen3-30b-a3b", "gpt-oss-20b"]
GPUS = ["h100-sxm-80gb", "a100-sxm-80gb", "l40s-48gb", "rtx-4090-24gb", "h200-141gb"]
CONTEXTS = [2048, 4096, 8192, 32768, 131072]


def random_plans(engine: str, kv_dtypes: list, seed: int):
    """(plan, kwargs) for CASES seeded random workloads that fit; the refusals are counted."""
    rng = random.Random(seed)
    names = [m for m in MODELS if m in kvmem.list_models()]
    gpus = [g for g in GPUS if g in kvmem.list_gpus()]
    plans, refused = [], 0
    while len(plans) < CASES:
        kwargs = dict(gpu=rng.choice(gpus), num_gpus=rng.choice([1, 1, 2, 4, 8]), context=rng.choice(CONTEXTS),
                      batch=rng.choice([1, 2, 4, 16, 64]), kv_dtype=rng.choice(kv_dtypes), engine=engine,
                      target=rng.choice(["workload", "max_batch", "max_context"]), tp=rng.choice([None, None, 1]),
                      weight_dtype=rng.choice(["auto", "auto", "fp8", "fp16"]))
        if engine == "vllm" and rng.random() < 0.3:
            kwargs["block_size"] = rng.choice([16, 32])
        if engine == "vllm":
            kwargs["gpu_memory_utilization"] = rng.choice([0.85, 0.9, 0.95])
        model = rng.choice(names)
        try:
            plans.append((kvmem.plan(model, **kwargs), kwargs))
        except (PlanRefused, ValueError):
            refused += 1
            assert refused < 20 * CASES, "almost every random workload was refused"
    return plans


def assert_weights(dtype, quantization, fit):
    """--dtype / --quantization as the weight format kvmem sized (the checkpoint's own: neither)."""
    model = kvmem.get_model(fit.model)
    # the checkpoint's own format: its dtype, or the format it is published in (gpt-oss MXFP4, DeepSeek-V3 block FP8)
    if fit.weight_dtype in (model.dtype, resolve_weight_dtype(model, "auto")[0]):
        assert (dtype, quantization) == ("auto", None)
    elif fit.weight_dtype == "fp8":
        assert (dtype, quantization) == ("auto", "fp8")
    else:
        assert (dtype, quantization) == ({"fp16": "float16", "bf16": "bfloat16"}[fit.weight_dtype], None)


def check_vllm_commands():
    """The vLLM half, run in its own interpreter (test below): vLLM's parser needs a device type, and
    VLLM_TARGET_DEVICE=cpu would fix the platform of this whole process to vLLM's CpuPlatform, whose
    layout rules then differ from the ones the vLLM oracles judge (they leave the platform unresolved)."""
    from vllm.config import CacheConfig
    from vllm.engine.arg_utils import EngineArgs
    from vllm.utils.argparse_utils import FlexibleArgumentParser
    parser = FlexibleArgumentParser()
    EngineArgs.add_cli_args(parser)
    for plan, kwargs in random_plans("vllm", ["auto", "fp8", "fp8_e5m2", "bf16"], seed=21):
        argv = plan.argv
        assert argv[:2] == ["vllm", "serve"]
        args = EngineArgs.from_cli_args(parser.parse_args(["--model", argv[2], *argv[3:]]))
        fit = plan.fit
        assert (args.tensor_parallel_size, args.pipeline_parallel_size) == (fit.tp, fit.pp), plan.command
        assert args.data_parallel_size == fit.replicas
        assert args.max_model_len == plan.context == fit.context
        assert args.gpu_memory_utilization == kwargs["gpu_memory_utilization"]
        assert args.max_num_seqs == -(-plan.batch // fit.replicas)
        in_force = kvmem.sizing.engine_defaults("vllm", kwargs["gpu"], context=plan.context, tp=fit.tp, pp=fit.pp,
                                                max_num_seqs=args.max_num_seqs)
        assert args.max_num_batched_tokens == in_force.values["max_num_batched_tokens"]
        assert args.block_size == kwargs.get("block_size")
        assert_weights(args.dtype, args.quantization, fit)
        cache = CacheConfig(block_size=args.block_size or 16, gpu_memory_utilization=args.gpu_memory_utilization,
                            cache_dtype=args.kv_cache_dtype)   # vLLM's own check of the dtype's name
        expected = "auto" if fit.kv_dtype == kvmem.get_model(fit.model).dtype else fit.kv_dtype
        assert cache.cache_dtype == {"bf16": "bfloat16", "fp16": "float16"}.get(expected, expected)
    check_lmcache_command(parser)
    print(f"{CASES} vLLM commands parsed into the planned settings")


def check_lmcache_command(parser):
    """LMCache's local CPU tier as plan writes it: vLLM parses the connector, and LMCache's own config,
    given its extra-config keys the way its vLLM adapter applies them (vllm_v1_adapter._apply_extra_config,
    validate_and_set_config_value), holds the tier fit sized."""
    from lmcache.v1.config import LMCacheEngineConfig
    from lmcache.v1.config_base import validate_and_set_config_value
    from vllm.engine.arg_utils import EngineArgs
    plan = kvmem.plan("llama-3.1-8b", gpu="h100-sxm-80gb", num_gpus=2, tp=2, context=32768, engine="vllm",
                      lmcache_max_local_cpu_size=20, host_memory_bytes="128GiB")
    argv = plan.argv
    args = EngineArgs.from_cli_args(parser.parse_args(["--model", argv[2], *argv[3:]]))
    transfer = args.kv_transfer_config
    assert (transfer.kv_connector, transfer.kv_role) == ("LMCacheConnectorV1", "kv_both"), plan.command
    config = LMCacheEngineConfig.from_defaults()
    for key, value in transfer.kv_connector_extra_config.items():
        assert key.startswith("lmcache.") and validate_and_set_config_value(config, key[len("lmcache."):], value)
    assert (config.chunk_size, config.local_cpu, config.max_local_cpu_size) == (256, True, 20.0)
    # the tier fit reported: LMCache's chunks for llama-3.1-8b at tp 2 (16,777,216 B a rank's chunk) in 20 GiB
    tier = next(t for t in plan.fit.host["terms"] if t["name"].startswith("LMCache local CPU"))
    assert tier["tokens"] == (20 * 2**30 // 16_777_216) * 256 == 327_680
    assert tier["bytes_per_rank"] == int(config.max_local_cpu_size * 2**30)


def test_vllm_parses_every_command_into_the_planned_settings():
    env = {**os.environ, "VLLM_TARGET_DEVICE": "cpu", "VLLM_LOGGING_LEVEL": "ERROR"}
    code = "from tests.oracles.test_plan_roundtrip import check_vllm_commands; check_vllm_commands()"
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"{CASES} vLLM commands parsed" in done.stdout


def test_sglang_parses_every_command_into_the_planned_settings():
    from sglang.srt.server_args import ServerArgs
    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    for plan, kwargs in random_plans("sglang", ["auto", "fp8_e4m3", "fp8_e5m2"], seed=23):
        argv = plan.argv
        assert argv[:3] == ["python", "-m", "sglang.launch_server"]
        ns = parser.parse_args(argv[3:])   # an unknown flag or a value outside its choices exits here
        fit = plan.fit
        assert ns.model_path == kvmem.get_model(fit.model).hf_id
        assert (ns.tp_size, ns.pp_size) == (fit.tp, fit.pp), plan.command
        assert ns.context_length == plan.context
        # the model's own default (a vision tower lowers it: kvmem.engines.sglang.encoder), written exactly
        defaults = kvmem.sizing.engine_defaults("sglang", kwargs["gpu"], context=plan.context, tp=fit.tp, pp=fit.pp,
                                                model=fit.model)
        assert ns.mem_fraction_static == float(defaults.values["mem_fraction_static"]), plan.command
        assert ns.max_running_requests == -(-plan.batch // fit.replicas)
        assert ns.dp_size == fit.replicas
        assert ns.page_size == 1
        assert_weights(ns.dtype, ns.quantization, fit)
        assert ns.kv_cache_dtype == ("auto" if fit.kv_dtype == kvmem.get_model(fit.model).dtype else fit.kv_dtype)
        if fit.capacity and getattr(fit.capacity.details, "max_mamba_cache_size", None) is not None:
            # the strategy SGLang resolves for "auto" on CUDA (judged on ServerArgs in test_sglang_strategy_oracle)
            resolved = resolve_extra_buffer(kvmem.get_model(fit.model).facts.architectures, {})
            assert ns.mamba_radix_cache_strategy == ("extra_buffer" if resolved["mamba_extra_buffer"] else "no_buffer")
            assert fit.capacity.details.max_running_requests >= ns.max_running_requests


# Issue 32 M6: model names that read as options. A name from a folder, a file or a config's
# _name_or_path starting with "-" must reach each engine's own parser as the model, never as a flag.
HOSTILE_NAMES = ["--trust-remote-code", "-h", "--model-path=/etc", "--served-model-name", "-"]


def _named(name: str):
    from kvmem.catalog import preset
    return kvmem.Model.from_hf_config(preset("llama-3.1-8b")["config"], name=name)


def check_vllm_hostile_names():
    """`vllm serve <model> ...` through vLLM 0.33.0's own serve parser: the `vllm` CLI's
    FlexibleArgumentParser (which rewrites `serve ... --model X` into the positional) with the serve
    subparser as ServeSubcommand.subparser_init builds it (vllm/entrypoints/cli/serve.py#L161-L174:
    make_arg_parser, vllm/entrypoints/common/cli_args.py#L431, whose positional is model_tag).
    serve.py itself imports the API server (uvicorn), which .venv-oracles does not install."""
    from vllm.entrypoints.common.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser
    parser = FlexibleArgumentParser()
    make_arg_parser(parser.add_subparsers(dest="subparser").add_parser("serve"))
    old = parser.parse_args(["serve", "--trust-remote-code", "--max-model-len", "4096"])
    assert old.model_tag is None and old.trust_remote_code     # the bare name: an option, as the issue found
    for name in HOSTILE_NAMES:
        plan = kvmem.plan(_named(name), gpu="h100-sxm-80gb", context=4096, engine="vllm")
        ns = parser.parse_args(plan.argv[1:])
        assert ns.model_tag == "./" + name and not ns.trust_remote_code, plan.command
        assert ns.max_model_len == 4096 and ns.tensor_parallel_size == 1
    print(f"{len(HOSTILE_NAMES)} hostile names parsed by vLLM as the model")


def test_vllm_takes_a_name_that_reads_as_a_flag_as_the_model():
    env = {**os.environ, "VLLM_TARGET_DEVICE": "cpu", "VLLM_LOGGING_LEVEL": "ERROR"}
    code = "from tests.oracles.test_plan_roundtrip import check_vllm_hostile_names; check_vllm_hostile_names()"
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"{len(HOSTILE_NAMES)} hostile names parsed by vLLM" in done.stdout


def test_sglang_takes_a_name_that_reads_as_a_flag_as_the_model():
    from sglang.srt.server_args import ServerArgs
    parser = argparse.ArgumentParser(exit_on_error=False)
    ServerArgs.add_cli_args(parser)
    for name in HOSTILE_NAMES:
        plan = kvmem.plan(_named(name), gpu="h100-sxm-80gb", context=4096, engine="sglang")
        ns = parser.parse_args(plan.argv[3:])      # the old `--model-path --trust-remote-code`: SystemExit here
        assert ns.model_path == "./" + name and not ns.trust_remote_code, plan.command
        assert ns.context_length == 4096


def test_llama_cpp_takes_a_name_that_reads_as_a_flag_as_the_model():
    """llama-server's -m through the reading of common/arg.cpp that test_plan_llamacpp checks against
    llama.cpp itself (a flag's value is the next argument; kvmem's never starts with "-")."""
    from tests.oracles.test_plan_llamacpp import setting_of
    for name in HOSTILE_NAMES:
        plan = kvmem.plan(_named(name), gpu="h100-sxm-80gb", context=4096, engine="llama.cpp")
        assert plan.argv[1:3] == ["-m", f"./{name}.gguf"], plan.command
        assert setting_of(plan.argv)["n_ctx"] == 4096

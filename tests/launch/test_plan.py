"""kvmem.plan and `kvmem plan`: the launch command of each engine's pinned release (issue #21 item 1)."""

import json
import subprocess
import sys

import pytest

import kvmem
from kvmem import PlanRefused


def flags_of(p) -> dict:
    return {f.flag: f.value for f in p.flags}


def test_vllm_largest_batch_for_the_issues_example():
    # Llama-3.3-70B on 2 x H100, fp8 weights and KV, 32k: 14 sequences fit (kvmem.fit, its activations sized at
    # max_num_seqs 14 as the command sets it), so --max-num-seqs 14.
    p = kvmem.plan("llama-3.3-70b", gpu="h100-sxm-80gb", num_gpus=2, context="32k", kv_dtype="fp8",
                   weight_dtype="fp8", target="max_batch")
    assert p.argv[:3] == ["vllm", "serve", "meta-llama/Llama-3.3-70B-Instruct"]
    f = flags_of(p)
    assert f == {"": "meta-llama/Llama-3.3-70B-Instruct", "--tensor-parallel-size": "2",
                 "--pipeline-parallel-size": "1", "--max-model-len": "32768", "--gpu-memory-utilization": "0.9",
                 "--kv-cache-dtype": "fp8", "--max-num-seqs": "14", "--max-num-batched-tokens": "8192",
                 "--quantization": "fp8"}
    assert all(flag.reason for flag in p.flags)
    # vLLM will print 465,664 tokens (14.21x), what kvmem.fit says for the same workload
    fit = kvmem.fit("llama-3.3-70b", gpu="h100-sxm-80gb", num_gpus=2, context="32k", kv_dtype="fp8", weight_dtype="fp8")
    assert (fit.max_batch, fit.engine_numbers.lines) == (14, p.fit.engine_numbers.lines)
    assert p.fit.engine_numbers.lines[1:] == (
        "GPU KV cache size: 465,664 tokens, Maximum concurrency for 32,768 tokens per request: 14.21x",)
    assert p.to_dict()["argv"] == p.argv and p.batch == 14


def test_largest_context_and_the_exact_workload():
    p = kvmem.plan("llama-3.1-8b", gpu="h100-sxm-80gb", context="32k", batch=8, target="max_context")
    fit = kvmem.fit("llama-3.1-8b", gpu="h100-sxm-80gb", context="32k", batch=8, max_num_seqs=8)
    assert flags_of(p)["--max-model-len"] == str(p.context) and p.context == fit.max_context == 56_016
    q = kvmem.plan("llama-3.1-8b", gpu="h100-sxm-80gb", context="32k", batch=4, block_size=32,
                   enable_prefix_caching=True)
    assert flags_of(q)["--block-size"] == "32" and "--enable-prefix-caching" in q.argv
    assert flags_of(q)["--max-num-seqs"] == "4"


def test_sglang_llamacpp_and_trtllm_commands():
    s = kvmem.plan("llama-3.1-8b", gpu="h100-sxm-80gb", context="32k", engine="sglang", batch=4, kv_dtype="fp8")
    assert s.argv[:3] == ["python", "-m", "sglang.launch_server"]
    assert flags_of(s) == {"--model-path": "meta-llama/Llama-3.1-8B-Instruct", "--tp-size": "1", "--pp-size": "1",
                           "--context-length": "32768", "--mem-fraction-static": "0.835",
                           "--kv-cache-dtype": "fp8_e4m3", "--max-running-requests": "4", "--page-size": "1",
                           "--chunked-prefill-size": "8192"}
    c = kvmem.plan("llama-3.1-8b", gpu="rtx-4090-24gb", context="16k", engine="llama.cpp", batch=2)
    assert c.command == ("llama-server -m llama-3.1-8b.gguf -c 32768 -np 2 -ngl 999 -fa on -ctk f16 -ctv f16 "
                         "-ub 512")
    t = kvmem.plan("llama-3.1-8b", gpu="h100-sxm-80gb", context="32k", engine="trtllm", batch=4, kv_dtype="fp8")
    assert flags_of(t)["--max_batch_size"] == "4" and flags_of(t)["--max_seq_len"] == "32768"
    assert t.files == {"kvmem-extra-llm-api-options.yaml": "kv_cache_config:\n  dtype: fp8\n"}


@pytest.mark.parametrize("kwargs, message", [
    (dict(num_gpus=2, model="llama-3.3-70b"), "no command: llama-3.3-70b does not fit"),
    (dict(engine="hf-dynamic"), "engine 'hf-dynamic' has no server command"),
    (dict(engine="sglang", kv_dtype="fp16"), "sglang: --kv-cache-dtype has no 'fp16'"),
    (dict(engine="vllm", num_speculative_tokens=2), "kvmem does not write --speculative-config"),
    (dict(engine="vllm", weight_dtype="awq"), "vllm: weights planned as 'awq' need a checkpoint already in that format"),
    (dict(engine="trtllm", tokens_per_block=64), "trtllm: kvmem writes no flag for tokens_per_block=64"),
])
def test_refusals_name_why(kwargs, message):
    args = dict(model="llama-3.1-8b", gpu="h100-sxm-80gb", context="32k") | kwargs
    with pytest.raises(PlanRefused, match=message.replace("(", r"\(").replace("[", r"\[")):
        kvmem.plan(args.pop("model"), **args)


def test_cli_plan_text_json_and_refusal():
    run = [sys.executable, "-m", "kvmem", "plan", "llama-3.3-70b", "--gpu", "h100-sxm-80gb", "--num-gpus", "2",
           "--context", "32k", "--engine", "vllm"]
    out = subprocess.run(run + ["--kv-dtype", "fp8", "--weight-dtype", "fp8", "--target", "max_batch", "--json"],
                         capture_output=True, text=True)
    data = json.loads(out.stdout)
    assert out.returncode == 0 and data["argv"][:2] == ["vllm", "serve"] and "--max-num-seqs" in data["argv"]
    assert data["engine_numbers"]["tokens"] == 465_664
    text = subprocess.run(run + ["--kv-dtype", "fp8", "--weight-dtype", "fp8", "--batch", "4"],
                          capture_output=True, text=True).stdout
    assert "--max-num-seqs 4" in text and "# 4 sequences per replica" in text
    refused = subprocess.run(run, capture_output=True, text=True)
    assert refused.returncode == 1 and "kvmem plan: refused: no command:" in refused.stderr


def test_weights_in_another_16_bit_format_are_a_dtype_flag():
    # bf16 checkpoint served in fp16: --dtype float16 (vLLM and SGLang); fp8: --quantization fp8 (online)
    for engine in ("vllm", "sglang"):
        p = kvmem.plan("llama-3.1-8b", gpu="h100-sxm-80gb", context="8k", weight_dtype="fp16", engine=engine)
        assert flags_of(p)["--dtype"] == "float16" and "--quantization" not in p.argv
        q = kvmem.plan("llama-3.1-8b", gpu="h100-sxm-80gb", context="8k", weight_dtype="fp8", engine=engine)
        assert flags_of(q)["--quantization"] == "fp8" and "--dtype" not in q.argv


ENGINES = ("vllm", "sglang", "trtllm", "llama.cpp")


def _llama_named(name: str) -> kvmem.Model:
    from kvmem.catalog import preset
    return kvmem.Model.from_hf_config(preset("llama-3.1-8b")["config"], name=name)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_model_named_like_a_flag_is_written_as_a_path_never_an_option(engine):
    """Issue 32 M6: `kvmem plan ./--trust-remote-code` printed `vllm serve --trust-remote-code ...`."""
    p = kvmem.plan(_llama_named("--trust-remote-code"), gpu="h100-sxm-80gb", context=4096, engine=engine)
    value = "./--trust-remote-code.gguf" if engine == "llama.cpp" else "./--trust-remote-code"
    assert value in p.argv and not any(a.startswith("--trust") for a in p.argv)
    # an argparse parser like the engines' (a positional model, a --model-path value, a --trust-remote-code
    # switch) takes it as the model; the engines' own parsers: tests/oracles/test_plan_roundtrip.py
    import argparse
    parser = argparse.ArgumentParser(exit_on_error=False)
    where = {"vllm": "model", "trtllm": "model", "sglang": "--model-path", "llama.cpp": "-m"}[engine]
    parser.add_argument(where, **({"nargs": "?"} if where == "model" else {}))
    parser.add_argument("--trust-remote-code", action="store_true")
    args, _ = parser.parse_known_args(p.argv[len(p.program):])
    assert vars(args)[where.lstrip("-").replace("-", "_")] == value and not args.trust_remote_code


def test_a_name_with_a_newline_never_prints_raw_and_the_shell_gives_it_back(tmp_path):
    import shutil
    name = "evil\nname \x1b[31m 'quoted' \\ \u2028"
    p = kvmem.plan(_llama_named(name), gpu="h100-sxm-80gb", context=4096, engine="sglang")
    assert name in p.argv and p.command.isprintable()
    assert "--model-path $'evil\\x0aname \\x1b[31m \\'quoted\\' \\\\ \\u2028'" in p.command
    if shutil.which("bash"):                           # bash reads the word back into the same bytes
        word = p.command.split(" --model-path ", 1)[1].split(" --tp-size", 1)[0]
        back = subprocess.run(["bash", "-c", f"printf %s {word}"], capture_output=True).stdout
        assert back == name.encode()
    config = json.loads(json.dumps(_llama_named(name).config))
    (tmp_path / "config.json").write_text(json.dumps({**config, "_name_or_path": name}))
    out = subprocess.run([sys.executable, "-m", "kvmem", "plan", str(tmp_path / "config.json"), "--gpu",
                          "h100-sxm-80gb", "--context", "4k", "--engine", "vllm"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.split("\n")
    assert all(line.isprintable() for line in lines)
    assert any(line.startswith("  $'evil\\x0aname ") for line in lines)     # the explanation line quotes it


def test_the_offload_commands_are_safe_to_paste_too():
    """kvmem.llamacpp_offload's two llama-server commands joined the model's name raw: a name such as
    "x; touch pwned" ran a second command when pasted, "--x" read as a flag."""
    import shlex

    from kvmem.engines.llamacpp.offload import llamacpp_offload
    for name, path in (("x; touch pwned $(id)", "x; touch pwned $(id)-bf16.gguf"), ("--x", "./--x-bf16.gguf")):
        p = llamacpp_offload(_llama_named(name), gpus="l4-24gb", context="8k")
        for command in (p.command_best, p.command_fit):
            argv = shlex.split(command)
            assert argv[:3] == ["llama-server", "-m", path], command


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_a_checkpoint_published_in_block_fp8_needs_no_weight_flag(engine):
    # deepseek-ai/DeepSeek-V3 is published in block FP8 (weights/formats.py _NATIVE): the engine reads the
    # format from the checkpoint, so the plan of the preset writes no --dtype/--quantization
    p = kvmem.plan("deepseek-v3", gpu="h200-sxm-141gb", num_gpus=8, context="32k", engine=engine)
    assert p.fit.weight_dtype == "fp8-block"
    assert not {"--dtype", "--quantization"} & set(flags_of(p))

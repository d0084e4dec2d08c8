import json
import subprocess
import sys

import pytest

import kvmem
from kvmem.cli import main
from tests.fixtures import ABRIDGED


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_estimate_json_matches_library(capsys):
    code, out, _ = run(capsys, "estimate", "llama-3.1-8b", "--tokens", "128k", "--batch", "4", "--json")
    data = json.loads(out)
    assert code == 0
    assert data["kv_bytes"] == kvmem.estimate("llama-3.1-8b", tokens="128k", batch=4).kv_bytes == 68_719_476_736


def test_estimate_text_states_units(capsys):
    code, out, _ = run(capsys, "estimate", "llama-3.1-8b", "--tokens", "128k", "--batch", "4")
    assert code == 0 and "68,719,476,736 B = 64.00 GiB (68.72 GB)" in out


def test_estimate_from_a_config_file(capsys, tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(kvmem.catalog.preset("qwen3-0.6b")["config"]))
    code, out, _ = run(capsys, "estimate", str(path), "--tokens", "1", "--engine", "ideal", "--json")
    assert code == 0 and json.loads(out)["kv_bytes"] == 114_688


def test_estimate_says_how_the_config_was_read_and_refuses_an_unknown_family(capsys, tmp_path):
    code, out, _ = run(capsys, "estimate", "gemma-3-27b", "--tokens", "32k")
    assert code == 0
    assert "model: gemma-3-27b: 62 layers — 10 full (16 KV heads, head_dim 128); 52 sliding" in out
    assert "config: Read as gemma3_text (configuration_gemma3.py: sliding if (i + 1) % sliding_window_pattern)" in out
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "kimi_k9", "num_hidden_layers": 4, "num_attention_heads": 8,
                                "hidden_size": 512}))
    code, out, err = run(capsys, "estimate", str(path), "--tokens", "1k")
    assert code == 2 and out == ""
    assert "model_type 'kimi_k9' is not a family kvmem reads" in err and "Traceback" not in err


def test_models_lists_presets(capsys):
    code, out, _ = run(capsys, "models", "--json")
    assert code == 0 and {row["name"] for row in json.loads(out)} == set(kvmem.list_models())


def test_capacity(capsys):
    code, out, _ = run(capsys, "capacity", "llama-3.1-8b", "--engine", "ideal", "--kv-memory", "16GiB", "--json")
    assert code == 0 and json.loads(out)["tokens"] == 16 * 2**30 // 131_072


@pytest.mark.parametrize("argv, message", [
    (["estimate", "llama-3.1-8b", "--tokens", "0"], "tokens must be a positive integer, got 0"),
    (["estimate", "llama-3.1-8b", "--tokens", "8k", "--engine", "nope"], "unknown engine 'nope'"),
    (["estimate", "no-such-model", "--tokens", "8k"], "unknown model 'no-such-model'"),
    (["estimate", "llama-3.1-8b", "--tokens", "8k", "-o", "bogus"], "--option takes NAME=VALUE"),
])
def test_errors_are_messages_not_tracebacks(capsys, argv, message):
    code, _, err = run(capsys, *argv)
    assert code == 2 and message in err and "Traceback" not in err


def test_python_dash_m_entry_point():
    proc = subprocess.run([sys.executable, "-m", "kvmem", "estimate", "qwen3-0.6b", "--tokens", "1", "--engine", "ideal",
                           "--json"], capture_output=True, text=True, check=True)
    assert json.loads(proc.stdout)["kv_bytes"] == 114_688


def test_core_imports_no_third_party_modules():
    code = ("import sys, kvmem; kvmem.estimate('llama-3.1-8b', tokens=8); "
            "bad = [m for m in ('torch', 'pandas', 'plotly', 'streamlit', 'numpy', 'transformers') if m in sys.modules]; "
            "print(bad)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "[]"


def test_engine_options_on_the_command_line(capsys):
    # vLLM with a draft model sharing the pool: Llama-3.2-1B's 16 layers x 8 heads x 64 x 2 x 2 B = 32,768 B
    # per token join the target's 131,072
    code, out, _ = run(capsys, "estimate", "llama-3.1-8b", "--tokens", "32k", "--engine", "vllm",
                       "-o", "draft=llama-3.2-1b", "--json")
    expected = kvmem.estimate("llama-3.1-8b", engine="vllm", tokens="32k", draft=kvmem.get_model("llama-3.2-1b"))
    assert code == 0 and json.loads(out)["kv_bytes"] == expected.kv_bytes == (131_072 + 32_768) * 32_768
    code, out, _ = run(capsys, "estimate", "gemma-3-27b", "--tokens", "32k", "--engine", "llama.cpp",
                       "-o", "type_v=q8_0", "-o", "flash_attn=false")
    assert code == 2
    code, _, err = run(capsys, "capacity", "llama-3.1-8b", "--engine", "vllm", "--kv-memory", "20GiB", "-o",
                       "page_size=16")
    assert code == 2 and "engine 'vllm' has no option 'page_size'; its options:" in err


def test_engine_log_lines_are_printed(capsys):
    # llama.cpp's own cache lines for Gemma-3-27B at 32k, q8_0: 10 global layers of 32,768 cells and
    # 52 SWA layers of pad256(1024 + 512) = 1,536 cells; 16 KV heads x 128 = 2,048 values = 64 q8_0 blocks
    code, out, _ = run(capsys, "estimate", "gemma-3-27b", "--tokens", "32k", "--engine", "llama.cpp",
                       "-o", "type_k=q8_0", "-o", "type_v=q8_0", "-o", "flash_attn=true")
    assert code == 0 and "llama.cpp would log:" in out
    assert ("llama_kv_cache: size = 1360.00 MiB ( 32768 cells,  10 layers,  1/1 seqs), "
            "K (q8_0):  680.00 MiB, V (q8_0):  680.00 MiB") in out
    assert "(  1536 cells,  52 layers,  1/1 seqs)" in out
    code, out, _ = run(capsys, "capacity", "llama-3.1-8b", "--engine", "vllm", "--kv-memory", "20GiB",
                       "--max-model-len", "32k")
    assert "GPU KV cache size: 163,840 tokens" in out and "Maximum concurrency for 32,768 tokens per request: 5.00x" in out


# issue 13 item 8 and issue 14 items 4, 6, 15, 16: the CLI under its environment
def _kvmem(*argv, env=None, **kw):
    import os
    return subprocess.run([sys.executable, "-m", "kvmem", *argv], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, **kw)


def test_ctrl_c_exits_130_quietly(capsys, monkeypatch):
    def interrupted(args):
        raise KeyboardInterrupt
    monkeypatch.setattr("kvmem.cli.lists.cmd_models", interrupted)
    code, out, err = run(capsys, "models")
    assert code == 130 and out == "" and err == ""


def test_an_unexpected_exception_is_one_line_not_a_traceback(capsys, monkeypatch):
    def broken(args):
        raise AttributeError("boom")
    monkeypatch.setattr("kvmem.cli.lists.cmd_models", broken)
    code, out, err = run(capsys, "models", "--json")
    assert code == 70 and "internal error: AttributeError: boom" in err and "Traceback" not in err
    assert json.loads(out) == {"error": "AttributeError: boom (a bug in kvmem; KVMEM_DEBUG=1 shows the traceback)",
                               "type": "AttributeError", "command": "models", "exit_code": 70}


def test_json_errors_are_json_on_stdout(capsys):
    code, out, err = run(capsys, "estimate", "llama-3.1-8b", "--tokens", "-5", "--json")
    assert code == 2 and "tokens must be positive, got '-5'" in err
    assert json.loads(out)["error"] == "tokens must be positive, got '-5'"


def test_a_closed_pipe_ends_quietly():
    import os
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first line (as `| head` after its lines)
    proc = subprocess.run([sys.executable, "-m", "kvmem", "models"], stdout=write, stderr=subprocess.PIPE,
                          text=True)
    os.close(write)
    assert proc.returncode == 141 and "Traceback" not in proc.stderr and proc.stderr == ""


def test_ascii_terminal_gets_ascii_standins():
    proc = _kvmem("estimate", "llama-3.1-8b", "--tokens", "8k", env={"PYTHONIOENCODING": "ascii"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("llama-3.1-8b - vllm - 8,192 tokens x batch 1 - KV bf16")


@pytest.mark.parametrize("value, message", [
    ("20", "--kv-memory 20 has no unit: write 20GiB, 20GB or 20B (bytes)"),
    ("-1GiB", "bytes must be positive, got '-1GiB'"),
])
def test_kv_memory_needs_a_unit_and_a_positive_value(capsys, value, message):
    code, _, err = run(capsys, "capacity", "llama-3.1-8b", "--engine", "ideal", "--kv-memory", value)
    assert code == 2 and message in err and "usage:" not in err


def test_kv_memory_with_fractional_bytes_is_rounded_down_and_said(capsys):
    # 3.98 GiB = 4,273,492,459.52 B, as kvmem itself prints such figures
    code, out, err = run(capsys, "capacity", "llama-3.1-8b", "--engine", "ideal", "--kv-memory", "3.98GiB",
                         "--json")
    assert code == 0 and json.loads(out)["kv_memory"] == 4_273_492_459
    assert "rounded down to 4,273,492,459 B" in err


def test_engine_refusal_exits_non_zero_unless_overridden():
    # 10M tokens on llama-3.1-8b's 131,072 positions: vLLM refuses without VLLM_ALLOW_LONG_MAX_MODEL_LEN=1
    refused = _kvmem("estimate", "llama-3.1-8b", "--tokens", "10M", "--engine", "vllm",
                     env={"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "0"})
    assert refused.returncode == 1 and "the engine would refuse this" in refused.stderr
    assert "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1" in refused.stdout
    allowed = _kvmem("estimate", "llama-3.1-8b", "--tokens", "10M", "--engine", "vllm",
                     env={"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"})
    assert allowed.returncode == 0
    # "vLLM refuses to start" (one 131,072-token request needs 16 GiB): no override exists
    code = main(["capacity", "llama-3.1-8b", "--engine", "vllm", "--kv-memory", "1GiB"])
    assert code == 1


def test_fit_without_batch_labels_the_breakdown(capsys):
    code, out, _ = run(capsys, "fit", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--context", "16k")
    result = kvmem.fit("llama-3.1-8b", gpu="h100-sxm-80gb", context="16k")
    assert code == 0
    assert f"fits: yes — 16,384 tokens, up to {result.max_batch:,} sequences (no --batch given)" in out
    assert f"per device, for {result.breakdown_batch:,} x 16,384 tokens:" in out
    code, out, _ = run(capsys, "fit", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--context", "16k", "--json")
    assert json.loads(out)["breakdown_batch"] == result.max_batch


def test_fit_option_of_the_wrong_type_is_named(capsys):
    code, _, err = run(capsys, "fit", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--context", "16k",
                       "-o", "max_num_batched_tokens=abc")
    assert code == 2 and "max_num_batched_tokens must be a positive integer, got 'abc'" in err


def test_config_in_a_folder_named_configs_is_named_by_name_or_path(capsys, tmp_path):
    folder = tmp_path / "configs"
    folder.mkdir()
    cfg = dict(kvmem.catalog.preset("qwen3-0.6b")["config"], _name_or_path="Qwen/Qwen3-0.6B")
    (folder / "config.json").write_text(json.dumps(cfg))
    code, out, _ = run(capsys, "estimate", str(folder / "config.json"), "--tokens", "1", "--json")
    assert code == 0 and json.loads(out)["model"] == "Qwen/Qwen3-0.6B"


def test_models_shows_each_source(capsys):
    code, out, _ = run(capsys, "models")
    lines = out.splitlines()
    assert code == 0 and len([line for line in lines if line.startswith("    source: ")]) == len(kvmem.list_models())


@pytest.mark.parametrize("name, content", [
    ("utf16.json", '{"model_type": "llama"}'.encode("utf-16")),
    ("deep.json", b'{"a": ' + b"[" * 10000 + b"]" * 10000 + b"}"),
    ("long.json", b'{"model_type": "llama", "num_hidden_layers": ' + b"9" * 5000 + b"}"),
    ("list_type.json", b'{"model_type": ["llama"], "num_hidden_layers": 2}'),
])
def test_hostile_config_files_are_messages(capsys, tmp_path, name, content):
    path = tmp_path / name
    path.write_bytes(content)
    code, _, err = run(capsys, "estimate", str(path), "--tokens", "8")
    assert code == 2 and "error: config" in err and "Traceback" not in err


def test_json_usage_errors_are_json_too(capsys):
    with pytest.raises(SystemExit) as info:
        main(["estimate", "llama-3.1-8b", "--json"])
    out, err = capsys.readouterr()
    assert info.value.code == 2 and "the following arguments are required: --tokens" in err
    assert json.loads(out)["error"] == "kvmem estimate: the following arguments are required: --tokens"


def test_cli_and_app_share_one_default_engine_and_kv_dtype():
    # issue 23 item 16: the seed's workload gave 7.81 GiB in the CLI (ideal) and 8.00 GiB in the app (vLLM);
    # both now start from kvmem.defaults: vLLM holds 32 blocks of 16 = 512 tokens per 500-token sequence,
    # 2 x 2 B x 32 layers x 32 heads x 128 x 512 x 32 sequences = 8,589,934,592 B
    from kvmem import defaults

    proc = subprocess.run([sys.executable, "-m", "kvmem", "estimate", "llama-2-7b", "--tokens", "500", "--batch", "32"],
                          capture_output=True, text=True, check=True)
    assert (defaults.ENGINE, defaults.KV_DTYPE) == ("vllm", "auto")
    assert proc.stdout.startswith("llama-2-7b · vllm · 500 tokens × batch 32 · KV fp16")
    assert "8,589,934,592 B = 8.00 GiB" in proc.stdout


def test_a_bare_config_file_is_named_after_itself_and_its_defaults_are_said(tmp_path):
    # issue 23 item 14: models/sparse.json was named "models"; a config.json keeps its folder's name
    folder = tmp_path / "models"
    folder.mkdir()
    (folder / "sparse.json").write_text('{"model_type": "llama", "hidden_size": 4096}')
    proc = _kvmem("estimate", str(folder / "sparse.json"), "--tokens", "1k", "--engine", "ideal")
    assert proc.stdout.startswith("sparse · ideal · 1,024 tokens")
    assert "taken from transformers' defaults for this family: num_hidden_layers = 32" in proc.stdout
    (folder / "config.json").write_text('{"model_type": "llama", "hidden_size": 4096}')
    assert _kvmem("estimate", str(folder / "config.json"), "--tokens", "1k").stdout.startswith("models · vllm")


def test_a_command_imports_only_what_it_uses():
    # issue 23 item 22: `import kvmem` imported every engine, sizing, measurement and the oracles (~9x a bare
    # python's start); now estimate with vLLM loads vLLM's rules alone (bench/cli_startup.py times it)
    code = ("import contextlib, io, sys\n"
            "from kvmem.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    main(['estimate', 'llama-3.1-8b', '--tokens', '8k', '--engine', 'vllm'])\n"
            "print(sorted(m for m in sys.modules if m.startswith('kvmem.') and m.count('.') <= 2\n"
            "             or m in STDLIB))").replace("STDLIB", repr(_STDLIB_NOT_NEEDED))
    loaded = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                       check=True).stdout.replace("'", '"'))
    assert "kvmem.engines.vllm" in loaded and "kvmem.cli.workload" in loaded
    for unused in ("kvmem.engines.sglang", "kvmem.engines.llamacpp", "kvmem.engines.hf", "kvmem.engines.trtllm",
                   "kvmem.sizing", "kvmem.measurement", "kvmem.oracles", "kvmem.strategies", "kvmem.weights",
                   # the other commands' modules: a run builds only its own command's arguments
                   "kvmem.cli.fit", "kvmem.cli.plan", "kvmem.cli.sweep", "kvmem.cli.checklog", "kvmem.cli.validate"):
        assert unused not in loaded
    # standard-library modules an estimate does not need: data files are read by path (kvmem.datafiles),
    # "did you mean" suggestions import difflib when they are made, the terminal width is asked of os
    assert not set(_STDLIB_NOT_NEEDED) & set(loaded)


_STDLIB_NOT_NEEDED = ("importlib.resources", "zipfile", "tempfile", "shutil", "pkgutil", "difflib", "typing")


def test_the_package_keeps_every_public_name():
    import kvmem as package

    for name in package.__all__:
        assert getattr(package, name) is not None
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        package.no_such_name  # noqa: B018


def test_estimate_all_devices_counts_the_recurrent_state_the_app_counts(capsys):
    # issue 33 item 4: "All devices" left out the recurrent state that the app's total includes.
    # Qwen3.5-27B at tp 2: 48 linear layers' state split over the ranks, KV 1.00 GiB each. vLLM 0.33.0's default
    # mamba_cache_mode "align" (prefix caching on for a hybrid) with the FlashInfer GDN prefill: block 64 x
    # cdiv(1,603,584, 64 x 2,048) = 832, page 1,703,936 B, 2 + 1 checkpoint pages a layer: 48 x 3 x 1,703,936 B
    # = 234.00 MiB each (73.50 MiB, one 784-token page a layer, with --no-enable-prefix-caching)
    est = kvmem.engines.engine_estimate("qwen3.5-27b", engine="vllm", tokens="32k", tp=2)
    assert est.state_bytes_all_devices == 2 * est.state_bytes == 2 * 48 * 3 * 1_703_936 == 468 * 2**20
    off = kvmem.engines.engine_estimate("qwen3.5-27b", engine="vllm", tokens="32k", tp=2, enable_prefix_caching=False)
    assert off.state_bytes_all_devices == 147 * 2**20
    assert est.total_bytes_all_devices == est.kv_bytes_all_devices + 468 * 2**20 == 2 * est.total_bytes
    # KV: 16 full layers x cdiv(32,768, 832) = 40 pages x 1,703,936 B = 1,090,519,040 B a device
    assert est.kv_bytes_all_devices == 2 * 16 * 40 * 1_703_936
    assert main(["estimate", "qwen3.5-27b", "--tokens", "32k", "--tp", "2"]) == 0
    out = capsys.readouterr().out
    assert "Total per device: 1,335,885,824 B = 1.24 GiB (KV + recurrent state)" in out
    assert "All 2 devices: 2.49 GiB (KV 2.03 GiB + recurrent state 468.00 MiB)" in out


def test_fit_takes_weights_for_a_model_without_a_parameter_count(capsys):
    # issue 33 item 6: the refusal named only the Python call; --weights is the flag it names now
    assert main(["fit", ABRIDGED, "--gpu", "h100", "--context", "8k"]) == 2
    assert "kvmem fit --weights 62GB" in capsys.readouterr().err
    assert main(["fit", ABRIDGED, "--gpu", "h100", "--context", "8k", "--weights", "4GB", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["breakdown"]["weights"] == 4_000_000_000 and data["weights_source"] == "given"
    assert main(["fit", ABRIDGED, "--gpu", "h100", "--context", "8k", "--weights", "4GB",
                 "-o", "weights_bytes=5GB"]) == 2
    assert "give the weights once" in capsys.readouterr().err


def test_a_llamacpp_yes_that_rests_on_host_ram_says_so(capsys):
    # qwen3-30b-a3b q4_k_m on one RTX 3060 at 32k fits with 9.07 GiB of experts in host RAM: kvmem cannot know
    # the host's memory, so the yes names that condition; given host_memory_bytes, it is checked instead
    argv = ["fit", "qwen3-30b-a3b", "--gpu", "rtx-3060-12gb", "--context", "32k", "--engine", "llama.cpp",
            "--weight-dtype", "q4_k_m"]
    assert main(argv) == 0
    assert "fits: yes, if the host has 9.07 GiB of free RAM for it (not checked" in capsys.readouterr().out
    assert main(argv + ["-o", "host_memory_bytes=64GiB"]) == 0
    assert "fits: yes — 32,768 tokens" in capsys.readouterr().out
    assert main(argv + ["-o", "host_memory_bytes=8GiB"]) == 1
    assert "fits: no" in capsys.readouterr().out

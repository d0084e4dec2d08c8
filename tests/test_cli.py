import json
import subprocess
import sys

import pytest

import kvmem
from kvmem.cli import main


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
    code, out, _ = run(capsys, "estimate", str(path), "--tokens", "1", "--json")
    assert code == 0 and json.loads(out)["kv_bytes"] == 114_688


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
    proc = subprocess.run([sys.executable, "-m", "kvmem", "estimate", "qwen3-0.6b", "--tokens", "1", "--json"],
                          capture_output=True, text=True, check=True)
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

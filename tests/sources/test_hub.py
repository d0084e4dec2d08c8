"""Models by Hugging Face id: preset, then the HF cache, then the Hub (loopback look-alike)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import kvmem
from kvmem.cli import main
from kvmem.sources import SourceError
from kvmem.sources import hub as hub_source

from .conftest import TOKEN, hub_configs

CONFIGS = hub_configs()


def _ideal_bytes(cfg: dict, tokens: int) -> int:
    """The ideal KV bytes of a dense config at bf16, by hand from its fields:
    2 (K and V) x 2 B x layers x kv_heads x head_dim x tokens held, where a layer with a sliding
    window holds min(tokens, window) (Mistral/Phi-3 put every layer in the window; Qwen2 only with
    use_sliding_window). kv_heads defaults to the query heads (MHA), head_dim to hidden / heads."""
    layers = cfg.get("num_hidden_layers") or cfg.get("num_layers") or cfg["n_layer"]
    heads = cfg.get("num_attention_heads") or cfg["n_head"]
    kv_heads = cfg.get("num_key_value_heads") or cfg.get("n_head_kv") or heads
    head_dim = cfg.get("head_dim") or (cfg.get("hidden_size") or cfg["n_embd"]) // heads
    window = cfg.get("sliding_window")
    windowed = window and cfg["model_type"] in ("mistral", "phi3") or (window and cfg.get("use_sliding_window"))
    held = min(tokens, window) if windowed else tokens
    return 2 * 2 * layers * kv_heads * head_dim * held


# The arithmetic for each fixture, per token at 8,192 tokens held (2 for K and V, 2 B for bf16):
EXPECTED_PER_TOKEN = {
    "Qwen/Qwen2.5-14B": 2 * 2 * 48 * 8 * 128,                 # 196,608 B
    "Qwen/Qwen2.5-32B": 2 * 2 * 64 * 8 * 128,                 # 262,144 B
    "Qwen/Qwen2.5-3B": 2 * 2 * 36 * 2 * 128,                  # 36,864 B (head_dim 2048 / 16)
    "Qwen/Qwen3-14B": 2 * 2 * 40 * 8 * 128,                   # 163,840 B
    "Qwen/Qwen3-4B": 2 * 2 * 36 * 8 * 128,                    # 147,456 B (head_dim 128 given, not 2560 / 32)
    "allenai/OLMo-2-1124-13B": 2 * 2 * 40 * 40 * 128,         # 819,200 B (MHA)
    "allenai/OLMo-2-1124-13B-Instruct": 2 * 2 * 40 * 40 * 128,
    "google/gemma-7b": 2 * 2 * 28 * 16 * 256,                 # 458,752 B (head_dim 256 given)
    "Qwen/QwQ-32B-Preview": 2 * 2 * 64 * 8 * 128,             # 262,144 B
    "nvidia/Llama-3.1-Nemotron-70B-Instruct-HF": 2 * 2 * 80 * 8 * 128,   # 327,680 B
    "EleutherAI/pythia-6.9b-deduped": 2 * 2 * 32 * 32 * 128,  # 524,288 B (no num_key_value_heads: MHA)
    "EleutherAI/pythia-12b-deduped": 2 * 2 * 36 * 40 * 128,   # 737,280 B
    "Qwen/Qwen2-7B-Instruct": 2 * 2 * 28 * 4 * 128,           # 57,344 B
    "LGAI-EXAONE/EXAONE-3.0-7.8B-Instruct": 2 * 2 * 32 * 8 * 128,  # 131,072 B (num_layers)
    "Qwen/Qwen2-0.5B": 2 * 2 * 24 * 2 * 64,                   # 12,288 B (sliding_window set, use_sliding_window false)
    "microsoft/Phi-3.5-mini-instruct": 2 * 2 * 32 * 32 * 96,  # 393,216 B (window 262,144 > 8,192 tokens)
    "Qwen/Qwen2.5-1.5B-Instruct": 2 * 2 * 28 * 2 * 128,       # 28,672 B (layer_types all full)
    "TinyLlama/TinyLlama-1.1B-Chat-v1.0": 2 * 2 * 22 * 4 * 64,  # 22,528 B
    "microsoft/phi-2": 2 * 2 * 32 * 32 * 80,                  # 327,680 B (n_layer, n_head, n_embd 2560 / 32)
}
TOKENS = 8192


def _estimate_json(capsys, *args) -> tuple[int, dict | None, str]:
    code = main(["estimate", *args, "--engine", "ideal", "--tokens", str(TOKENS), "--kv-dtype", "bf16", "--json"])
    out = capsys.readouterr()
    return code, (json.loads(out.out) if code == 0 else None), out.err


# fixtures that became presets (issue 34, from the same LLM-Prof file): an id finds the preset before the Hub
PRESETS = {"Qwen/Qwen2.5-32B": "qwen2.5-32b", "Qwen/Qwen3-14B": "qwen3-14b", "Qwen/Qwen3-4B": "qwen3-4b"}


def test_twenty_real_configs_fixtures_are_not_presets_but_three():
    assert len(CONFIGS) == 20
    for repo_id in CONFIGS:
        if repo_id in PRESETS:
            assert kvmem.catalog.preset(repo_id)["config"] == CONFIGS[repo_id]
            assert kvmem.catalog.preset(repo_id)["name"] == PRESETS[repo_id]
            continue
        with pytest.raises(ValueError):
            kvmem.catalog.preset(repo_id)


@pytest.mark.parametrize("repo_id", sorted(set(CONFIGS) - set(PRESETS)))
def test_estimate_by_id_from_the_hub_then_offline_from_the_cache(repo_id, hub, capsys, monkeypatch):
    cfg = CONFIGS[repo_id]
    hub.add(repo_id, {"config.json": cfg, "README.md": "# model card"})
    expected = _ideal_bytes(cfg, TOKENS)
    if repo_id in EXPECTED_PER_TOKEN:
        assert expected == EXPECTED_PER_TOKEN[repo_id] * TOKENS
    else:  # zephyr: Mistral, every layer in the 4,096-token window
        assert repo_id == "HuggingFaceH4/zephyr-7b-beta"
        assert expected == 2 * 2 * 32 * 8 * 128 * 4096      # 536,870,912 B: 131,072 B/token x 4,096 held

    code, data, err = _estimate_json(capsys, repo_id)
    assert code == 0, err
    assert data["kv_bytes"] == expected and data["model"] == repo_id
    # one GET, read through its byte budget: config.json and nothing else
    assert [(c["method"], c["path"].split("/resolve/")[1]) for c in hub.calls("/resolve/")] == [
        ("GET", "main/config.json")]

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    before = len(hub.requests)
    code, data, err = _estimate_json(capsys, repo_id)
    assert code == 0, err
    assert data["kv_bytes"] == expected
    assert len(hub.requests) == before                       # nothing asked of the Hub offline


def test_cli_in_a_fresh_process_reads_the_environment(hub, tmp_path):
    """The real `python -m kvmem` with HF_ENDPOINT / HF_HOME / HF_HUB_OFFLINE in its environment."""
    repo_id = "Qwen/Qwen2.5-14B"
    hub.add(repo_id, {"config.json": CONFIGS[repo_id]})
    env = {**os.environ}
    cmd = [sys.executable, "-m", "kvmem", "estimate", repo_id, "--tokens", "8192", "--kv-dtype", "bf16", "--json"]
    online = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    assert online.returncode == 0, online.stderr
    assert json.loads(online.stdout)["kv_bytes"] == 196_608 * 8192   # 48 x 8 x 128 x 2 x 2 B per token
    offline = subprocess.run(cmd, capture_output=True, text=True, env={**env, "HF_HUB_OFFLINE": "1"}, timeout=120)
    assert offline.returncode == 0, offline.stderr
    assert json.loads(offline.stdout)["kv_bytes"] == 196_608 * 8192


def test_unknown_id_exits_nonzero_with_one_line(hub, capsys):
    code, _, err = _estimate_json(capsys, "nobody/no-such-model")
    assert code != 0
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "nobody/no-such-model was not found on" in err and hub.url in err


def test_unknown_id_in_a_fresh_process_has_no_traceback(hub):
    proc = subprocess.run([sys.executable, "-m", "kvmem", "estimate", "nobody/no-such-model", "--tokens", "8"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "Traceback" not in proc.stderr
    assert "not found" in proc.stderr


def test_gated_repository_without_then_with_a_token(hub, monkeypatch):
    repo_id = "meta-llama/Llama-3.3-8B-Gated"
    hub.add(repo_id, {"config.json": CONFIGS["TinyLlama/TinyLlama-1.1B-Chat-v1.0"]}, gated=True)
    with pytest.raises(SourceError, match=r"is gated: accept its licence at .* then set HF_TOKEN"):
        kvmem.get_model(repo_id)
    monkeypatch.setenv("HF_TOKEN", "hf_someone_without_access")
    with pytest.raises(SourceError, match=r"token \(HF_TOKEN, or hf auth login's\) has no access"):
        kvmem.get_model(repo_id)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    model = kvmem.get_model(repo_id)
    assert model.name == repo_id and model.num_layers == 22
    assert hub.requests[-1]["status"] == 200 and hub.requests[-1]["path"].endswith("/config.json")


def test_the_token_hf_auth_login_stored_opens_a_gated_repository(hub, monkeypatch, tmp_path):
    # issue 33 item 9: only HF_TOKEN was read; `hf auth login` writes HF_HOME/token (or HF_TOKEN_PATH)
    repo_id = "meta-llama/Llama-3.3-8B-Gated"
    hub.add(repo_id, {"config.json": CONFIGS["TinyLlama/TinyLlama-1.1B-Chat-v1.0"]}, gated=True)
    home = os.environ["HF_HOME"]
    os.makedirs(home, exist_ok=True)
    with open(os.path.join(home, "token"), "w") as handle:
        handle.write(TOKEN + "\n")
    monkeypatch.setenv("HF_HUB_DISABLE_IMPLICIT_TOKEN", "1")         # huggingface_hub's switch: not sent
    with pytest.raises(SourceError, match="is gated: accept its licence"):
        kvmem.get_model(repo_id)
    monkeypatch.delenv("HF_HUB_DISABLE_IMPLICIT_TOKEN")
    hub_source._FAILED.clear()
    assert kvmem.get_model(repo_id).num_layers == 22
    elsewhere = tmp_path / "tokens" / "mine"
    elsewhere.parent.mkdir()
    elsewhere.write_text("two tokens\n")
    monkeypatch.setenv("HF_TOKEN_PATH", str(elsewhere))
    with pytest.raises(SourceError, match=r"token file .*mine' \(hf auth login\) does not hold one token"):
        hub_source.settings()
    os.remove(elsewhere)
    os.mkfifo(elsewhere)                                            # a FIFO is named, never waited on
    with pytest.raises(SourceError, match="is a FIFO"):
        hub_source.settings()


def test_missing_repository_and_missing_config(hub):
    with pytest.raises(SourceError, match="nobody/nothing was not found on"):
        kvmem.get_model("nobody/nothing")
    hub.add("TheBloke/Only-GGUF", {"README.md": "# quantised", "model.Q4_K_M.gguf": b"GGUF"})
    with pytest.raises(SourceError, match=r"has no config.json; it holds GGUF files: pass one as "
                                          r"TheBloke/Only-GGUF/model.Q4_K_M.gguf"):
        kvmem.get_model("TheBloke/Only-GGUF")
    hub.add("someone/empty", {"README.md": "nothing"})
    with pytest.raises(SourceError, match="has no config.json: kvmem needs a config.json, or a GGUF file"):
        kvmem.get_model("someone/empty")


def test_offline_and_not_cached(hub, monkeypatch):
    hub.add("Qwen/Qwen2.5-14B", {"config.json": CONFIGS["Qwen/Qwen2.5-14B"]})
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(SourceError, match="not in the Hugging Face cache .* HF_HUB_OFFLINE is set: unset it"):
        kvmem.get_model("Qwen/Qwen2.5-14B")
    assert hub.requests == []


def test_the_cache_answers_before_the_hub(hub):
    """A model fetched once resolves from the cache even when the Hub is gone (no HF_HUB_OFFLINE)."""
    hub.add("Qwen/Qwen2-7B-Instruct", {"config.json": CONFIGS["Qwen/Qwen2-7B-Instruct"]})
    first = kvmem.get_model("Qwen/Qwen2-7B-Instruct")
    hub.repos.clear()
    before = len(hub.requests)
    again = kvmem.get_model("Qwen/Qwen2-7B-Instruct")
    assert again.layers == first.layers and len(hub.requests) == before


def test_a_preset_never_asks_the_hub(hub):
    model = kvmem.get_model("meta-llama/Llama-3.1-8B-Instruct")
    assert model.name == "llama-3.1-8b" and hub.requests == []


def test_revision_picks_the_config_of_that_revision(hub, capsys):
    old = dict(CONFIGS["Qwen/Qwen3-4B"], num_hidden_layers=30)
    hub.add("Qwen/Qwen3-4B", {"config.json": CONFIGS["Qwen/Qwen3-4B"]}, revisions={"v0.1": {"config.json": old}})
    assert kvmem.get_model("Qwen/Qwen3-4B", revision="v0.1").num_layers == 30
    assert kvmem.get_model("Qwen/Qwen3-4B").num_layers == 36
    code = main(["estimate", "Qwen/Qwen3-4B", "--revision", "v0.1", "--engine", "ideal", "--tokens", "1", "--kv-dtype",
                 "bf16", "--json"])
    assert code == 0 and json.loads(capsys.readouterr().out)["kv_bytes"] == 2 * 2 * 30 * 8 * 128
    with pytest.raises(SourceError, match="has no revision 'v9'"):
        kvmem.get_model("Qwen/Qwen3-4B", revision="v9")


def test_a_fetched_config_goes_through_the_one_reader(hub):
    """The same Model as reading the file directly, named by its id, with where it came from."""
    cfg = CONFIGS["HuggingFaceH4/zephyr-7b-beta"]
    hub.add("HuggingFaceH4/zephyr-7b-beta", {"config.json": cfg})
    fetched = kvmem.get_model("HuggingFaceH4/zephyr-7b-beta")
    direct = kvmem.Model.from_hf_config(cfg)
    assert fetched.layers == direct.layers and fetched.kinds == {"sliding": 32}
    assert fetched.name == fetched.hf_id == "HuggingFaceH4/zephyr-7b-beta"
    assert fetched.source.startswith(f"{hub.url}/HuggingFaceH4/zephyr-7b-beta/blob/")


def test_importing_the_sources_package_loads_no_third_party_module():
    code = ("import sys, kvmem, kvmem.sources, kvmem.sources.hub, kvmem.sources.safetensors; "
            "print([m for m in ('huggingface_hub', 'gguf', 'numpy', 'safetensors', 'httpx') if m in sys.modules])")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "[]"


def test_an_oversized_config_is_refused(hub):
    hub.add("someone/huge", {"config.json": b'{"pad": "' + b"a" * 10_000_001 + b'"}'})   # 9 + 10,000,001 + 2 B
    with pytest.raises(SourceError, match="config.json is 10,000,012 bytes, over the 10,000,000"):
        kvmem.get_model("someone/huge")
    assert [c["method"] for c in hub.calls("/resolve/")] == ["GET"]      # refused on its Content-Length

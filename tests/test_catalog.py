"""The preset catalog: real configs with sources, exact bytes per token, parameter counts."""

import pytest

import kvmem
from kvmem.catalog import preset, presets


def test_at_least_forty_presets_each_with_a_source():
    names = kvmem.list_models()
    assert len(names) >= 40
    for name in names:
        data = preset(name)
        assert data["hf_id"] and "/" in data["hf_id"], name
        assert data["source"], name
        assert isinstance(data["config"], dict) and data["config"].get("model_type"), name


@pytest.mark.parametrize("name", sorted(presets()))
def test_every_preset_loads_and_describes(name):
    model = kvmem.get_model(name)
    assert model.name == name and model.num_layers >= 1
    assert name in model.describe()
    assert kvmem.estimate(model, tokens=1024).total_bytes > 0


FAMILIES = ["llama-2-7b", "llama-3-8b", "llama-3.1-8b", "llama-3.2-1b", "llama-3.3-70b", "llama-4-scout-17b-16e",
            "mistral-7b-v0.1", "mixtral-8x7b", "qwen2.5-7b", "qwen3-8b", "qwen3-30b-a3b", "qwen3-next-80b-a3b",
            "qwen3.5-27b", "gemma-2-9b", "gemma-3-27b", "gemma-3n-e4b", "phi-3-mini-4k", "phi-4", "deepseek-v2-lite",
            "deepseek-v2", "deepseek-v3", "deepseek-r1", "deepseek-v3.2", "kimi-k2-instruct", "gpt-oss-20b",
            "gpt-oss-120b", "glm-4.5-air", "falcon-7b", "falcon-40b", "gpt2", "gpt-neox-20b", "jamba-1.5-mini",
            "nemotron-h-8b"]


def test_catalog_covers_the_families():
    assert set(FAMILIES) <= set(kvmem.list_models())


# Bytes per token of one sequence at the model's own dtype (bf16 unless noted): ideal count, 1 token.
BYTES_PER_TOKEN = {
    "llama-3.1-8b": 32 * 8 * 128 * 2 * 2,          # 32 layers x 8 KV heads x 128 x (K,V) x 2 B = 131,072
    "llama-2-7b": 32 * 32 * 128 * 2 * 2,           # MHA: 524,288 (the seed's model)
    "llama-3.1-70b": 80 * 8 * 128 * 2 * 2,         # 327,680
    "llama-3.2-1b": 16 * 8 * 64 * 2 * 2,           # head_dim 64: 32,768
    "qwen3-0.6b": 28 * 8 * 128 * 2 * 2,            # head_dim 128, not 1024/16: 114,688
    "qwen3-32b": 64 * 8 * 128 * 2 * 2,             # head_dim 128, not 5120/64: 262,144
    "qwen2.5-7b": 28 * 4 * 128 * 2 * 2,            # no head_dim field: 3584/28 = 128 -> 57,344
    "mistral-nemo-12b": 40 * 8 * 128 * 2 * 2,      # head_dim 128, not 5120/32: 163,840
    "deepseek-v3": 61 * (512 + 64) * 2,            # MLA latent + rope key, one per layer: 70,272
    "deepseek-v2-lite": 27 * (512 + 64) * 2,       # 31,104
    "kimi-k2-instruct": 61 * 576 * 2,              # 70,272
    "deepseek-v3.2": 61 * (576 + 128) * 2,         # + the indexer key: 85,888
    "falcon-7b": 32 * 1 * 64 * 2 * 2,              # MQA (multi_query): 8,192
    "falcon-40b": 60 * 8 * 64 * 2 * 2,             # new_decoder_architecture, 8 KV heads: 122,880
    "gpt2": 12 * 12 * 64 * 2 * 2,                  # MHA; no torch_dtype in the config -> bf16: 36,864
    "gemma-3-27b": 62 * 16 * 128 * 2 * 2,          # 507,904 for the first token (every layer holds it)
    "gemma-3-4b": 34 * 4 * 256 * 2 * 2,            # text_config without heads: defaults 4 KV x 256 -> 139,264
    "gemma-3n-e4b": 20 * 2 * 256 * 2 * 2,          # last 15 of 35 layers share KV: 40,960
    "qwen3-next-80b-a3b": 12 * 2 * 256 * 2 * 2,    # only 12 of 48 layers are attention: 24,576
    "gpt-oss-120b": 36 * 8 * 64 * 2 * 2,           # 73,728
    "jamba-1.5-mini": 4 * 8 * 128 * 2 * 2,         # 4 attention layers of 32: 16,384
}


@pytest.mark.parametrize("name, expected", sorted(BYTES_PER_TOKEN.items()))
def test_bytes_per_token(name, expected):
    assert kvmem.estimate(name, tokens=1, kv_dtype="auto").kv_bytes == expected


def test_dtype_comes_from_the_config_and_is_bf16_when_absent():
    assert "torch_dtype" not in preset("gpt2")["config"] and kvmem.get_model("gpt2").dtype == "bf16"
    assert kvmem.get_model("phi-3-mini-4k").dtype == preset("phi-3-mini-4k")["config"]["torch_dtype"].replace(
        "bfloat16", "bf16")


def test_sliding_and_linear_layers_at_long_context():
    # Gemma-3-27B at 128k: 10 global layers hold 131,072 tokens, 52 local layers hold 1,024.
    result = kvmem.estimate("gemma-3-27b", tokens="128k")
    assert result.kv_bytes == (10 * 131072 + 52 * 1024) * 16 * 128 * 2 * 2
    # Qwen3-Next: 36 gated-DeltaNet layers each keep conv (3 x 8192) + 32 x 128 x 128 state, bf16
    assert kvmem.estimate("qwen3-next-80b-a3b", tokens=1).state_bytes == 36 * (3 * 8192 + 32 * 128 * 128) * 2


# Total parameters against the publisher's own count, within 1%.
PUBLISHED_TOTAL = ["llama-2-7b", "llama-2-13b", "llama-2-70b", "llama-3-8b", "llama-3.1-8b", "llama-3.1-70b",
                   "llama-3.2-1b", "llama-3.2-3b", "mistral-7b-v0.1", "mixtral-8x7b", "qwen2.5-0.5b", "qwen2.5-72b",
                   "qwen3-0.6b", "qwen3-8b", "qwen3-32b", "qwen3-30b-a3b", "qwen3-235b-a22b", "phi-3-mini-4k",
                   "gemma-3-1b", "gpt2", "deepseek-v3", "deepseek-v2", "gpt-oss-20b", "gpt-oss-120b", "glm-4.5-air",
                   "jamba-1.5-mini", "llama-4-maverick-17b-128e", "qwen3-next-80b-a3b"]


@pytest.mark.parametrize("name", PUBLISHED_TOTAL)
def test_total_parameters_within_one_percent(name):
    published = preset(name)["published"]["params_total"]
    assert kvmem.get_model(name).params_total == pytest.approx(published, rel=0.01)


# Active parameters, where the publisher counts as kvmem does (weights read per token; the input
# embedding table is a lookup): DeepSeek-V3 36.6B (README_WEIGHTS), gpt-oss 5.1B / 3.6B, Kimi K2 32B.
@pytest.mark.parametrize("name", ["deepseek-v3", "gpt-oss-120b", "gpt-oss-20b", "kimi-k2-instruct"])
def test_active_parameters_within_one_percent(name):
    published = preset(name)["published"]["params_active"]
    assert kvmem.get_model(name).params_active == pytest.approx(published, rel=0.01)


def test_lookup_by_hf_id_alias_and_case():
    assert kvmem.get_model("meta-llama/Llama-3.1-8B-Instruct").name == "llama-3.1-8b"
    assert kvmem.get_model("LLAMA-3.1-8B").name == "llama-3.1-8b"
    assert kvmem.get_model("Llama-3.1-8B-Instruct").name == "llama-3.1-8b"


def test_a_preset_file_is_named_after_its_lower_case_name():
    # a preset's own name is looked up by its file (catalog._preset_key), without reading all 58
    from kvmem.datafiles import json_names, read_json
    for stem in json_names("models"):
        assert read_json(f"models/{stem}.json")["name"] == stem == stem.lower()


def test_a_preset_name_reads_one_file_and_no_path_escapes(monkeypatch):
    from kvmem import catalog
    read = []
    monkeypatch.setattr(catalog, "read_json", lambda name: read.append(name) or {"name": "x"})
    catalog._preset_file.cache_clear()
    try:
        assert catalog._preset_key(" Gemma-3-27B ") == "gemma-3-27b"
        catalog.preset("gemma-3-27b")
        assert read == ["models/gemma-3-27b.json"]
    finally:
        catalog._preset_file.cache_clear()
    # names that could lead out of the folder are not file names: they go to the index, and miss
    for name in ("../gpus", "./llama-3.1-8b", "models/llama-3.1-8b", "a" * 5000, "x\x00y"):
        assert catalog._preset_key(name) is None


def test_unknown_model_suggests():
    with pytest.raises(ValueError, match="unknown model 'llama-3.1-9b'; did you mean llama-3.1-8b"):
        kvmem.get_model("llama-3.1-9b")
    with pytest.raises(ValueError, match="model name must be a non-empty string"):
        kvmem.get_model("")


def test_a_config_outside_the_catalog():
    # SmolLM2-135M (tests/fixtures/configs): 30 layers x 3 KV heads x 64 x (K,V) x 2 B = 23,040 B per token
    import pathlib

    path = pathlib.Path(__file__).parent / "fixtures" / "configs" / "smollm2-135m.json"
    model = kvmem.Model.from_hf_config(path)
    assert kvmem.estimate(model, tokens=1).kv_bytes == 23_040
    assert kvmem.estimate(model, engine="vllm", tokens=2048, batch=3).kv_bytes == 3 * 2048 * 23_040
    # published as "135M": 49,152 x 576 tied embeddings + 30 layers of attention and SwiGLU
    assert model.params_total == pytest.approx(135e6, rel=0.01)

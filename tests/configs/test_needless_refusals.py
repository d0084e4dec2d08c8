"""Fields that shape no cache, in published files of families kvmem reads: sized, and Model.reading
says which fields it let pass and why (issue 31: gemma-2-9b-it, MiniMax-M2.5/M2.7, Nemotron-H,
olmOCR-2 / Qwen2.5-VL). Files are verbatim (tests/fixtures/configs/new/SOURCES.md)."""

import json
from pathlib import Path

import pytest

import kvmem
from kvmem import ConfigError, Model

NEW = Path(__file__).parent.parent / "fixtures" / "configs" / "new"


def load(name):
    return json.loads((NEW / name).read_text())


def kv_per_token(model):
    return kvmem.estimate(model, tokens=1, kv_dtype="bf16").kv_bytes


def test_gemma_2_9b_it_legacy_sliding_window_size_is_read_as_a_duplicate():
    # google/gemma-2-9b-it sets sliding_window and sliding_window_size, both 4096; Gemma2Config has only
    # the first. 42 layers x 8 heads x (256 + 256) x 2 B = 344,064 B/token; every odd layer slides
    model = Model.from_hf_config(load("gemma-2-9b-it.json"))
    assert kv_per_token(model) == 344_064
    assert [layer.window for layer in model.layers[:4]] == [4096, 0, 4096, 0]
    assert [name for name, _ in model.reading.ignored] == ["sliding_window_size"]
    assert any("sliding_window_size (a legacy duplicate" in line for line in model.reading.lines())


def test_minimax_m2_7_attn_type_list_of_ones_is_all_full_attention():
    # MiniMax-M2.7: 62 entries of 1; MiniMaxM2Config has no attn_type_list, every layer is full attention.
    # 62 x 8 x (128 + 128) x 2 B = 253,952 B/token
    cfg = load("minimax-m2.7.json")
    assert cfg["attn_type_list"] == [1] * 62
    model = Model.from_hf_config(cfg)
    assert kv_per_token(model) == 253_952
    assert {layer.window for layer in model.layers} == {0}
    assert [name for name, _ in model.reading.ignored] == ["attn_type_list"]


def test_minimax_m1_still_reads_attn_type_list():
    # the same field in minimax (M1) chooses lightning (linear) layers: read there, not ignored
    model = Model.from_hf_config(load("minimax-m1.json"))
    assert model.reading.ignored == ()
    assert len([layer for layer in model.layers if layer.kind == "linear"]) == 70


def test_nemotron_h_time_step_rank_shapes_no_state():
    # Nemotron-H-56B-Base-8K's file carries time_step_rank (Mamba-1's dt rank); NemotronHConfig has no
    # such field. The Nemotron-3-Nano file with it added: 6 attention layers x 2 heads x 128 x 2 x 2 B
    # = 6,144 B/token, and the same Mamba-2 state as without it
    cfg = load("nemotron-3-nano-30b-a3b.json")
    plain = kvmem.estimate(Model.from_hf_config(cfg), tokens=1, kv_dtype="bf16")
    model = Model.from_hf_config({**cfg, "time_step_rank": 256})
    e = kvmem.estimate(model, tokens=1, kv_dtype="bf16")
    assert (e.kv_bytes, e.state_bytes) == (6_144, plain.state_bytes)
    assert [name for name, _ in model.reading.ignored] == ["time_step_rank"]


def test_qwen2_5_vl_saved_with_text_config_and_top_level_fields_reads_the_text_config():
    # Qwen2.5-VL-7B as transformers 4.53 saves it (olmOCR-2-7B's shape): text fields at the top and in
    # text_config; transformers reads text_config alone. 28 x 4 x (128 + 128) x 2 B = 57,344 B/token
    cfg = load("qwen2.5-vl-7b-transformers-4.53.json")
    model = Model.from_hf_config(cfg)
    assert model.model_type == "qwen2_5_vl_text"
    assert kv_per_token(model) == 57_344
    # text_config's own fields win: its num_key_value_heads, not a different top-level one
    cfg_other_top = {**cfg, "num_key_value_heads": 28}
    assert kv_per_token(Model.from_hf_config(cfg_other_top)) == 57_344


def test_qwen2_5_vl_flat_legacy_file_reads_as_its_text_model():
    # transformers <= 4.49 saved Qwen2.5-VL flat; Qwen2_5_VLConfig.__post_init__ builds the text config
    # from the top-level fields. use_sliding_window false: sliding_window 32768 slides nothing
    cfg = {k: v for k, v in load("qwen2.5-vl-7b-transformers-4.53.json").items() if k != "text_config"}
    model = Model.from_hf_config(cfg)
    assert (model.model_type, kv_per_token(model)) == ("qwen2_5_vl_text", 57_344)
    assert {layer.window for layer in model.layers} == {0}


@pytest.mark.parametrize("wrapper, text_type", [("llava", "llama"), ("paligemma", "gemma"), ("mistral3", "mistral"),
                                               ("internvl", "qwen2")])
def test_a_wrapper_without_a_text_model_type_reads_its_transformers_default(wrapper, text_type):
    # transformers 5.24's wrapper default text config (LlavaConfig builds LlamaConfig, ...):
    # 2 layers x 2 heads x (64 + 64) x 2 B = 1,024 B/token
    text = {"num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
            "hidden_size": 256}
    model = Model.from_hf_config({"model_type": wrapper, "text_config": text})
    assert (model.model_type, kv_per_token(model)) == (text_type, 1_024)


def test_a_wrapper_around_a_family_kvmem_does_not_read_is_refused_by_the_text_type():
    with pytest.raises(ConfigError, match="model_type 'glm5_next_text' is not a family kvmem reads"):
        Model.from_hf_config({"model_type": "glm5_next", "text_config": {"num_hidden_layers": 2}})


def test_deepseek_v4_saved_by_a_transformers_dev_build_keeps_qk_nope_head_dim():
    # RedHatAI/DeepSeek-V4-Flash-NVFP4-FP8 (transformers 5.7.0.dev0) carries qk_nope_head_dim 448 = head_dim 512
    # less qk_rope_head_dim 64; DeepseekV4Config has no such field, and the judge saw no byte change with it
    # changed. It sizes as deepseek-ai's own file: 907,411,456 B at 128k
    model = Model.from_hf_config(load("redhat-deepseek-v4-flash-nvfp4-fp8.json"))
    assert [name for name, _ in model.reading.ignored] == ["qk_nope_head_dim"]
    assert kvmem.estimate(model, tokens=131_072, kv_dtype="bf16").kv_bytes == 907_411_456

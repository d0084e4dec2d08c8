"""The 2026 families issue 31 names, read right: hand-derived bytes, bf16, batch 1, ideal mode.

Fixtures are aiconfigurator's copies of the checkpoints' config.json (tests/fixtures/configs/new/
SOURCES.md); each family's rule and its source are in docs/research/new_families_c.md.
"""

import json
from pathlib import Path

import pytest

import kvmem
from kvmem import ConfigError, Model
from kvmem.configs import FAMILIES

NEW = Path(__file__).parent.parent / "fixtures" / "configs" / "new"


def load(name):
    return json.loads((NEW / name).read_text())


def kv(model, tokens):
    return kvmem.estimate(model, tokens=tokens, kv_dtype="bf16").kv_bytes


@pytest.mark.parametrize("model_type", ["exaone4_5_text", "step3p5", "minimax_m3", "minimax_m3_text", "mimo",
                                        "deepseek_ref"])
def test_the_new_families_are_opt_in(model_type):
    assert FAMILIES[model_type].opt_in


def test_step_3_7_flash_slides_three_of_four_layers_in_a_512_window():
    # 45 layers, layer_types full every 4th (12 full, 33 sliding, window 512), 8 KV heads x 128:
    # one layer 8 x (128 + 128) x 2 B = 4,096 B/token; at 32k: 12 x 4,096 x 32,768 + 33 x 4,096 x 512
    model = Model.from_hf_config(load("step-3.7-flash.json"))
    assert model.model_type == "step3p5" and model.mtp_layers == 3
    assert kv(model, 32_768) == 12 * 4_096 * 32_768 + 33 * 4_096 * 512 == 1_679_818_752
    assert [layer.window for layer in model.layers[:5]] == [0, 512, 512, 512, 0]


def test_step3p5_layer_types_padded_with_the_mtp_layers_is_cut():
    # Step3p7TextConfig.__post_init__: 4 layers + 2 MTP entries -> the first 4
    text = {"model_type": "step3p5", "num_hidden_layers": 4, "num_attention_heads": 8, "num_attention_groups": 2,
            "head_dim": 64, "hidden_size": 512, "sliding_window": 16, "num_nextn_predict_layers": 2,
            "layer_types": ["full_attention", "sliding_attention"] * 3, "num_sliding_attention_heads": 16}
    model = Model.from_hf_config({"model_type": "step3p7", "text_config": text})
    assert [layer.window for layer in model.layers] == [0, 16, 0, 16]
    assert kv(model, 1) == 4 * 2 * (64 + 64) * 2    # 2,048 B/token: num_attention_groups are the KV heads
    assert [name for name, _ in model.reading.ignored] == ["num_sliding_attention_heads"]
    with pytest.raises(ConfigError, match="num_attention_groups"):
        Model.from_hf_config({**text, "num_key_value_heads": 4})


def test_exaone_4_5_reads_its_text_model_as_exaone4():
    # EXAONE-4.5-33B's text_config (exaone4_5_text) as published: 64 layers, 8 KV heads, head_dim 5120 / 40 = 128,
    # LLLG layer_types, window 4096: 16 full + 48 sliding. At 8k: 16 x 4,096 x 8,192 + 48 x 4,096 x 4,096
    text = {"model_type": "exaone4_5_text", "hidden_size": 5120, "num_hidden_layers": 64, "num_attention_heads": 40,
            "num_key_value_heads": 8, "sliding_window": 4096, "sliding_window_pattern": "LLLG",
            "layer_types": (["sliding_attention"] * 3 + ["full_attention"]) * 16, "vocab_size": 153600,
            "intermediate_size": 27392}
    model = Model.from_hf_config({"model_type": "exaone4_5", "architectures": ["Exaone4_5_ForConditionalGeneration"],
                                  "text_config": text})
    assert model.model_type == "exaone4_5_text"
    assert kv(model, 8_192) == 16 * 4_096 * 8_192 + 48 * 4_096 * 4_096 == 1_342_177_280


def test_minimax_m3_keeps_an_index_key_on_its_sparse_layers():
    # 60 layers of 4 KV heads x (128 + 128) x 2 B = 2,048 B; sparse_attention_freq marks 57 sparse layers that
    # also keep one index key of sparse_index_dim 128 x 2 B = 256 B: 122,880 + 14,592 = 137,472 B/token
    model = Model.from_hf_config(load("minimax-m3.json"))
    assert model.model_type == "minimax_m3"
    assert kv(model, 1) == 60 * 2_048 + 57 * 256 == 137_472


def test_minimax_m3_vl_wrapping_vllms_text_type():
    cfg = load("minimax-m3.json")
    model = Model.from_hf_config({"model_type": "minimax_m3_vl", "text_config": {**cfg, "model_type": "minimax_m3_text"}})
    assert (model.model_type, kv(model, 1)) == ("minimax_m3_text", 137_472)


def test_mimo_7b_is_qwen2_with_one_mtp_layer():
    # 36 layers x 8 KV heads x (128 + 128) x 2 B = 147,456 B/token; use_sliding_window false
    model = Model.from_hf_config(load("mimo-7b-base.json"))
    assert (model.model_type, model.mtp_layers, kv(model, 1)) == ("mimo", 1, 147_456)
    assert {layer.window for layer in model.layers} == {0}


def test_deepseek_ref_sizes_as_deepseek_v4():
    # sgl-project's reference-format DeepSeek-V4-Flash: the fields of deepseek-ai's deepseek_v4 file
    ref = Model.from_hf_config(load("sgl-deepseek-v4-flash-fp8.json"))
    hf = Model.from_hf_config(load("deepseek-v4-flash.json"))
    assert ref.model_type == "deepseek_ref" and ref.layers == hf.layers
    for tokens in (1, 1_024, 131_072):
        a, b = (kvmem.estimate(m, tokens=tokens, kv_dtype="bf16") for m in (ref, hf))
        assert (a.kv_bytes, a.state_bytes) == (b.kv_bytes, b.state_bytes)
    assert kv(ref, 131_072) == 907_411_456


def test_glm_5_2_legacy_deepseek_sparse_attention_layer_type():
    # nvidia/GLM-5.2-NVFP4 lists 78 x "deepseek_sparse_attention" (transformers remaps it to indexed_attention):
    # 78 MLA layers x (512 + 64) x 2 B = 89,856 B, and the indexer keys (128 x 2 B) of its 21 "full" indexer layers
    cfg = load("glm-5.2-nvfp4.json")
    assert set(cfg["layer_types"]) == {"deepseek_sparse_attention"}
    model = Model.from_hf_config(cfg)
    assert kv(model, 1) == 78 * 576 * 2 + 21 * 128 * 2 == 95_232
    assert kv(model, 1) == kv(Model.from_hf_config({k: v for k, v in cfg.items() if k != "layer_types"}), 1)


def test_nemotron_h_56b_base_8k_as_published():
    # the file's own time_step_rank 512 is let pass; 10 attention layers ("*") x 8 x (128 + 128) x 2 B = 40,960 B/token
    model = Model.from_hf_config(load("nemotron-h-56b-base-8k.json"))
    assert kv(model, 1) == 40_960
    assert [name for name, _ in model.reading.ignored] == ["time_step_rank"]

"""vllm mode on issue 31's new families (kvmem/configs/families.py; docs/research/new_families_c.md):
MiniMax-M3, Step-3.7-Flash, MiMo-7B, EXAONE-4.5's text model, and the refusal of deepseek_ref. Every
layout here is also checked against vLLM 0.33.0's planning code by tests/oracles/
test_vllm_attention_families_oracle.py."""

import json
import pathlib

import pytest

import kvmem
from kvmem.engines import engine_estimate

NEW = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "configs" / "new"


def _file(name):
    return kvmem.Model.from_hf_config(json.loads((NEW / name).read_text()))


def test_minimax_m3_keeps_bf16_index_keys_on_its_sparse_layers_in_blocks_of_128():
    # minimax_m3/nvidia/model.py: every layer K and V, 4 heads x 128 -> a 128-token page of
    # 128 x 4 x 256 x 2 B = 262,144 B; the 57 sparse layers also one bf16 index key of 128: 128 x 128 x 2 B =
    # 32,768 B a page (common/indexer.py MLAAttentionSpec). 1,024 tokens = 8 blocks:
    # 60 x 8 x 262,144 + 57 x 8 x 32,768 = 125,829,120 + 14,942,208
    m3 = _file("minimax-m3.json")
    e = engine_estimate(m3, engine="vllm", tokens=1024)
    assert e.total_bytes == 140_771_328 and e.details.block_size == 128
    # one group (full and MLA-type pages are one type): 20 GiB // (60 x 262,144 + 57 x 32,768) = 1,220 blocks
    c = kvmem.capacity(m3, engine="vllm", kv_memory=20 << 30, max_model_len=32768)
    assert c.blocks == (20 << 30) // (60 * 262_144 + 57 * 32_768) == 1_220
    with pytest.raises(ValueError, match="takes only blocks of 128"):
        engine_estimate(m3, engine="vllm", tokens=1024, block_size=16)
    with pytest.raises(ValueError, match="MiniMaxM3MTP are not modelled"):
        engine_estimate(m3, engine="vllm", tokens=1024, draft="mtp")


def test_minimax_m3_sparse_layers_are_vllms_sparse_attention_freq():
    cfg = json.loads((NEW / "minimax-m3.json").read_text())
    text = cfg.get("text_config", cfg)
    freq = text["sparse_attention_config"]["sparse_attention_freq"]
    model = _file("minimax-m3.json")
    assert [bool(layer.index_head_dim) for layer in model.layers] == [f != 0 for f in freq]


def test_step_3_7_flash_sliding_and_full_layers():
    # step3p5.py Step3p5DecoderLayer: 8 KV heads (num_attention_groups) x 128 on every layer, a page of
    # 16 x 8 x 256 x 2 B = 65,536 B; 12 full layers hold cdiv(1,024, 16) = 64 pages, the 33 sliding ones
    # (window 512) 64 - (1,024 - 512) // 16 = 32; 3 padding layers make the sliding groups 3 x 12 (their
    # 32 pages a sequence are reserved too): (12 x 64 + 36 x 32) x 65,536 = 125,829,120 B
    step = _file("step-3.7-flash.json")
    assert step.model_type == "step3p5"
    e = engine_estimate(step, engine="vllm", tokens=1024)
    assert sum(e.per_layer) == (12 * 64 + 33 * 32) * 65_536
    assert e.total_bytes == (12 * 64 + 36 * 32) * 65_536 == 125_829_120


def test_step3p5_sliding_query_heads_must_divide_by_tp():
    cfg = {"model_type": "step3p5", "num_hidden_layers": 2, "hidden_size": 1024, "num_attention_heads": 16,
           "num_attention_groups": 4, "head_dim": 64, "layer_types": ["sliding_attention", "full_attention"],
           "sliding_window": 128, "num_sliding_attention_heads": 6, "vocab_size": 100, "torch_dtype": "bfloat16"}
    with pytest.raises(ValueError, match=r"\(6, the sliding layers' num_sliding_attention_heads\)"):
        engine_estimate(kvmem.Model.from_hf_config(cfg), engine="vllm", tokens=64, tp=4)


def test_mimo_7b_is_qwen2_with_its_mtp_layer_as_draft():
    # mimo.py MiMoForCausalLM(Qwen2ForCausalLM): 36 layers x 8 KV heads x 128, pages of 16 x 8 x 256 x 2 B =
    # 65,536 B; 1,024 tokens = 64 pages a layer; mimo_mtp.py: num_nextn_predict_layers (1) Qwen2 layer more
    mimo = _file("mimo-7b-base.json")
    assert engine_estimate(mimo, engine="vllm", tokens=1024).total_bytes == 36 * 64 * 65_536
    assert engine_estimate(mimo, engine="vllm", tokens=1024, draft="mtp").total_bytes == 37 * 64 * 65_536


def test_exaone4_5_text_is_sized_as_exaone4():
    # exaone4_5.py builds Exaone4ForCausalLM on the text config: the same pages as model_type exaone4
    cfg = {"num_hidden_layers": 8, "hidden_size": 1024, "num_attention_heads": 16, "num_key_value_heads": 4,
           "head_dim": 128, "sliding_window": 512, "sliding_window_pattern": 4, "vocab_size": 100,
           "torch_dtype": "bfloat16"}
    ours = kvmem.Model.from_hf_config({**cfg, "model_type": "exaone4_5_text"})
    theirs = kvmem.Model.from_hf_config({**cfg, "model_type": "exaone4"})
    for tokens in (100, 4096):
        assert engine_estimate(ours, engine="vllm", tokens=tokens).total_bytes == \
            engine_estimate(theirs, engine="vllm", tokens=tokens).total_bytes


def test_deepseek_ref_is_refused_with_vllms_own_reason():
    ref = _file("sgl-deepseek-v4-flash-fp8.json")
    with pytest.raises(ValueError, match=r"vLLM 0.33.0 cannot load this config: model_type 'deepseek_ref'"):
        engine_estimate(ref, engine="vllm", tokens=1024)


HY_V4 = {"model_type": "hy_v4", "architectures": ["HYV4ForCausalLM"], "num_hidden_layers": 6, "hidden_size": 1024,
         "num_attention_heads": 16, "num_key_value_heads": 16, "q_lora_rank": 256, "kv_lora_rank": 512,
         "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "index_topk": 64, "index_head_dim": 128,
         "index_n_heads": 8, "layer_types": ["indexed_attention"] * 6, "vocab_size": 100, "torch_dtype": "bfloat16"}


def test_hy_v4_keeps_indexer_keys_where_vllm_builds_them():
    # hy_v4/nvidia/attention.py: every layer sparse MLA (FLASHMLA_SPARSE, blocks of 64): 64 x (512 + 64) x 2 B =
    # 73,728 B a page; vLLM's HYV4Config.indexer_types default: own indexer on layers 0 and (i - 1) % 4 == 0 =
    # 0, 1, 5, each a DeepseekV32IndexerCache page of 64 x (128 + 4) = 8,448 B. 1,024 tokens = 16 blocks:
    # 16 x (6 x 73,728 + 3 x 8,448) = 7,483,392 B
    model = kvmem.Model.from_hf_config(HY_V4)
    e = engine_estimate(model, engine="vllm", tokens=1024)
    assert e.total_bytes == 16 * (6 * 73_728 + 3 * 8_448) == 7_483_392
    # indexer_types in the file: its "full" layers
    shared = kvmem.Model.from_hf_config({**HY_V4, "indexer_types": ["full", "shared"] * 3})
    assert engine_estimate(shared, engine="vllm", tokens=1024).total_bytes == 16 * (6 * 73_728 + 3 * 8_448)
    # a file without layer_types: vLLM runs dense MLA, which kvmem does not size
    dense = kvmem.Model.from_hf_config({k: val for k, val in HY_V4.items() if k != "layer_types"})
    with pytest.raises(ValueError, match="layer_types names a sparse type"):
        engine_estimate(dense, engine="vllm", tokens=1024)


def test_axk1_is_deepseek_mla():
    # AXK1.py AXK1MLAAttention (axk1 is in is_deepseek_mla): one latent row, FLASHMLA's blocks of 64:
    # 4 layers x 16 blocks x 64 x 576 x 2 B for 1,024 tokens
    cfg = {**{k: val for k, val in HY_V4.items() if not k.startswith("index") and k != "layer_types"},
           "model_type": "axk1", "architectures": ["AXK1ForCausalLM"], "num_hidden_layers": 4}
    assert engine_estimate(kvmem.Model.from_hf_config(cfg), engine="vllm", tokens=1024).total_bytes == \
        4 * 16 * 64 * 576 * 2

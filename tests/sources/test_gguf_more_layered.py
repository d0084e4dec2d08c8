"""GGUF headers of the architectures kvmem/sources/gguf_layered.py maps (attention shapes per layer), judged by
round trip (kvmem.sources.gguf_converted writes what convert_hf_to_gguf writes for a config, Model.from_gguf reads
it back: same layers, same llama.cpp KV bytes) and by hand; tests/oracles/test_gguf_arches_layered_oracle.py has
llama.cpp itself build the same headers."""

from __future__ import annotations

import copy
import json

import pytest

import kvmem
from kvmem.sources import SourceError
from kvmem.sources.gguf_config import config_from_header
from kvmem.sources.gguf_converted import converted_metadata
from tests.sources.test_gguf_more import round_trip, same_kv, small_config, write_header

NEMOTRON_SUPER = "tests/fixtures/configs/corpus/nvidia--Llama-3_3-Nemotron-Super-49B-v1.json"


def _block(group, *, linear=False, ffn_mult=2.625):
    return {"attention": {"n_heads_in_group": group, "no_op": group is None and not linear,
                          "replace_with_linear": linear},
            "ffn": {"ffn_mult": ffn_mult, "no_op": ffn_mult is None, "replace_with_linear": False}}


# 8 blocks of 4 query heads (head 64): K/V heads 2, 1, none (no-op), none (linear), 2, 2 (no FFN), 1, 2
SMALL_NAS = {"model_type": "nemotron-nas", "architectures": ["DeciLMForCausalLM"], "num_hidden_layers": 8,
             "hidden_size": 256, "num_attention_heads": 4, "num_key_value_heads": None, "intermediate_size": None,
             "vocab_size": 1000, "max_position_embeddings": 8192, "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
             "tie_word_embeddings": False,
             "block_configs": [_block(2), _block(4), _block(None), _block(None, linear=True), _block(2),
                               _block(2, ffn_mult=None), _block(4), _block(2)]}


def test_nemotron_super_round_trip(tmp_path):
    # Llama-3.3-Nemotron-Super-49B's published config: 80 blocks, 49 with attention (8 K/V heads of 128)
    with open(NEMOTRON_SUPER) as f:
        cfg = json.load(f)
    model, back = round_trip(cfg, tmp_path / "m.gguf")
    same_kv(model, back)
    assert back.model_type == "nemotron-nas"
    assert [b["attention"]["no_op"] for b in back.config["block_configs"]] == [
        b["attention"]["n_heads_in_group"] is None for b in cfg["block_configs"]]


def test_small_nas_by_hand(tmp_path):
    model, back = round_trip(SMALL_NAS, tmp_path / "m.gguf")
    same_kv(model, back)
    assert [layer.kv_heads if layer.caches_tokens else 0 for layer in back.layers] == [2, 1, 0, 0, 2, 2, 1, 2]
    # llama.cpp gives every block K and V (0 wide without K/V heads), V padded to the widest without flash attention:
    # K (2+1+0+0+2+2+1+2) x 64 = 640, V 8 x 128 = 1,024; x 2 B (f16) = 3,328 B per token; with it V = K: 2,560 B
    off = kvmem.estimate(back, engine="llama.cpp", tokens=4096, kv_dtype="f16", flash_attn="off")
    on = kvmem.estimate(back, engine="llama.cpp", tokens=4096, kv_dtype="f16", flash_attn="on")
    assert (off.kv_bytes, on.kv_bytes) == (3328 * 4096, 2560 * 4096)


def _deci_header(**meta):
    base = {"deci.block_count": 4, "deci.embedding_length": 256, "deci.attention.head_count": 4,
            "deci.attention.head_count_kv": [4, 2, 1, 2], "deci.feed_forward_length": 512,
            "deci.attention.key_length": 64, "deci.attention.value_length": 64}
    return type("H", (), {"arch": "deci", "tensors": [], "metadata": {**base, **meta}})()


def test_decilm_7b_shape_by_hand():
    # DeciLM-7B writes head_count once and num_key_value_heads_per_layer (conversion/deci.py L114-L119): groups
    # 4 // 4, 4 // 2, 4 // 1, 4 // 2
    cfg = config_from_header(_deci_header())
    assert [b["attention"]["n_heads_in_group"] for b in cfg["block_configs"]] == [1, 2, 4, 2]
    assert [b["ffn"] for b in cfg["block_configs"]] == [{"intermediate_size": 512, "no_op": False}] * 4
    model = kvmem.Model.from_hf_config(cfg, name="decilm")
    # K = V = (4 + 2 + 1 + 2) x 64 = 576 per token; f16 with flash attention: 2,304 B x 4,096 cells
    assert kvmem.estimate(model, engine="llama.cpp", tokens=4096, kv_dtype="f16", flash_attn="on").kv_bytes == 2304 * 4096


def test_deci_kv_heads_that_do_not_divide_are_refused():
    with pytest.raises(SourceError, match=r"head_count_kv\[1\] is 3, which does not divide head_count\[1\] \(4\)"):
        config_from_header(_deci_header(**{"deci.attention.head_count_kv": [4, 3, 1, 2]}))


def test_deci_converted_keys():
    # conversion/deci.py: Nemotron-Super's first blocks, ffn_mult 2.625 and 5.25 of 8,192: int(2 x 2.625 x 8192 / 3)
    # = 14,336 (a multiple of 256), int(2 x 5.25 x 8192 / 3) = 28,672; block 6 is a no-op attention
    with open(NEMOTRON_SUPER) as f:
        arch, meta = converted_metadata(json.load(f))
    assert arch == "deci"
    assert meta["deci.feed_forward_length"][:2] == [14336, 28672]
    assert meta["deci.attention.head_count_kv"][5:8] == [8, 0, 0] and meta["deci.attention.head_count"][6] == 0


def test_small_nas_header_written(tmp_path):
    arch, meta = converted_metadata(SMALL_NAS)
    write_header(tmp_path / "m.gguf", arch, meta)
    assert kvmem.Model.from_gguf(tmp_path / "m.gguf").config["block_configs"][3]["attention"] == {
        "n_heads_in_group": None, "no_op": False, "replace_with_linear": True}


# Step-3.5-Flash's config.json fields (model_type step3p5) at a small shape: 8 layers, full then 3 sliding (window
# 512), 4 query heads on full layers and 8 on sliding ones (attention_other_setting), 2 K/V heads of 64 everywhere
SMALL_STEP35 = {"model_type": "step3p5", "architectures": ["Step3p5ForCausalLM"], "num_hidden_layers": 8,
                "hidden_size": 256, "num_attention_heads": 4, "num_attention_groups": 2, "head_dim": 64,
                "intermediate_size": 512, "vocab_size": 1000, "max_position_embeddings": 8192, "rms_norm_eps": 1e-5,
                "rope_theta": 10000.0, "sliding_window": 512,
                "layer_types": ["full_attention", "sliding_attention", "sliding_attention", "sliding_attention"] * 2,
                "partial_rotary_factors": [0.5, 1.0, 1.0, 1.0] * 2,
                "attention_other_setting": {"attention_type": "sliding_attention", "num_attention_heads": 8,
                                            "num_attention_groups": 2, "head_dim": 64, "true_head_dim": 64},
                "moe_num_experts": 4, "moe_top_k": 2, "moe_intermediate_size": 128, "share_expert_dim": 128,
                "moe_layers_enum": "1,2,3,4,5,6,7", "tie_word_embeddings": False}


def test_step35_small_by_hand(tmp_path):
    model, back = round_trip(SMALL_STEP35, tmp_path / "m.gguf")
    same_kv(model, back)
    assert (back.config["num_attention_heads"], back.config["attention_other_setting"]["num_attention_heads"]) == (4, 8)
    assert [layer.kind.windowed for layer in back.layers] == [False, True, True, True] * 2
    # llama.cpp at 4,096 cells (f16): 2 full layers x 4,096 cells x 2 heads x 64 x 2 (K, V) x 2 B = 4 MiB; 6 sliding
    # layers of 1,024 cells (the window 512 + n_ubatch 512, llama_kv_cache_iswa) x 2 x 64 x 2 x 2 = 3 MiB
    est = kvmem.estimate(back, engine="llama.cpp", tokens=4096, kv_dtype="f16", flash_attn="on")
    assert est.kv_bytes == 2 * 4096 * 512 + 6 * 1024 * 512


def test_step35_with_mtp_round_trip(tmp_path):
    # the converter counts the MTP layer in block_count (conversion/step3.py L114-L123) and pads layer_types with a
    # full layer; llama.cpp's trunk is block_count - nextn_predict_layers
    cfg = {**SMALL_STEP35, "num_nextn_predict_layers": 1}
    arch, meta = converted_metadata(cfg)
    assert (meta["step35.block_count"], meta["step35.nextn_predict_layers"]) == (9, 1)
    assert meta["step35.attention.head_count"] == [4, 8, 8, 8] * 2 + [4]
    model, back = round_trip(cfg, tmp_path / "m.gguf")
    same_kv(model, back)


def test_step35_sliding_kv_heads_of_their_own_are_refused(tmp_path):
    cfg = {**SMALL_STEP35, "attention_other_setting": {"num_attention_heads": 8, "num_attention_groups": 4}}
    arch, meta = converted_metadata(cfg)
    write_header(tmp_path / "m.gguf", arch, meta)
    with pytest.raises(SourceError, match="keeps 4 K/V heads in its sliding layers and 2 in its full ones"):
        kvmem.Model.from_gguf(tmp_path / "m.gguf")


MIMO_V2_FLASH = "tests/fixtures/configs/corpus/XiaomiMiMo--MiMo-V2-Flash.json"
# MiMo-V2-Flash's fields at a small shape: 8 layers (full at 0 and 5), 4 K/V heads on full layers and 8 on
# sliding ones (window 128), K 192 and V 128 wide
SMALL_MIMO2 = {"model_type": "mimo_v2_flash", "architectures": ["MiMoV2FlashForCausalLM"], "num_hidden_layers": 8,
               "hidden_size": 256, "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 192,
               "v_head_dim": 128, "intermediate_size": 512, "vocab_size": 1000, "max_position_embeddings": 8192,
               "rope_theta": 5e6, "swa_rope_theta": 1e4, "partial_rotary_factor": 0.334, "sliding_window": 128,
               "swa_num_attention_heads": 8, "swa_num_key_value_heads": 8, "swa_head_dim": 192, "swa_v_head_dim": 128,
               "hybrid_layer_pattern": [0, 1, 1, 1, 1, 0, 1, 1], "moe_layer_freq": [0] + [1] * 7,
               "moe_intermediate_size": 128, "n_routed_experts": 4, "num_experts_per_tok": 2, "norm_topk_prob": True,
               "scoring_func": "sigmoid", "n_group": 1, "topk_group": 1, "topk_method": "noaux_tc",
               "layernorm_epsilon": 1e-5, "attention_value_scale": 0.707, "add_swa_attention_sink_bias": True,
               "add_full_attention_sink_bias": False, "tie_word_embeddings": False}


def test_mimo_v2_flash_round_trip(tmp_path):
    # the published config: 48 layers, 39 sliding (8 K/V heads), 9 full (4); the converter adds 3 MTP layers
    with open(MIMO_V2_FLASH) as f:
        cfg = json.load(f)
    arch, meta = converted_metadata(cfg)
    assert (arch, meta["mimo2.block_count"], meta["mimo2.nextn_predict_layers"]) == ("mimo2", 51, 3)
    assert meta["mimo2.rope.dimension_count"] == 64      # int(192 x 0.334)
    model, back = round_trip(cfg, tmp_path / "m.gguf")
    same_kv(model, back)
    assert back.config["hybrid_layer_pattern"] == cfg["hybrid_layer_pattern"]


def test_mimo2_small_by_hand(tmp_path):
    model, back = round_trip(SMALL_MIMO2, tmp_path / "m.gguf")
    same_kv(model, back)
    assert [(layer.kv_heads, layer.head_dim_k, layer.head_dim_v) for layer in back.layers[:2]] == [(4, 192, 128),
                                                                                                 (8, 192, 128)]
    # llama.cpp at 4,096 cells (f16, flash attention): 2 full layers x 4,096 x 4 x (192 + 128) x 2 B = 20 MiB; 6
    # sliding of 768 cells (128 + 512 ubatch, padded to 256) x 8 x 320 x 2 B = 22.5 MiB
    est = kvmem.estimate(back, engine="llama.cpp", tokens=4096, kv_dtype="f16", flash_attn="on")
    assert est.kv_bytes == 2 * 4096 * 4 * 320 * 2 + 6 * 768 * 8 * 320 * 2


MINIMAX_M3 = "tests/fixtures/configs/new/minimax-m3.json"
# MiniMax-M3's fields at a small shape: 4 layers, the first dense (no indexer), 2 K/V heads of 64, an indexer key of 64
SMALL_MINIMAX_M3 = {"model_type": "minimax_m3", "architectures": ["MiniMaxM3ForCausalLM"], "num_hidden_layers": 4,
                    "hidden_size": 256, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
                    "intermediate_size": 128, "dense_intermediate_size": 512, "moe_intermediate_size": 128,
                    "shared_intermediate_size": 128, "vocab_size": 1000, "max_position_embeddings": 8192,
                    "rms_norm_eps": 1e-6, "rope_theta": 5e6, "rotary_dim": 32, "partial_rotary_factor": 0.5,
                    "num_local_experts": 4, "num_experts_per_tok": 2, "n_shared_experts": 1, "scoring_func": "sigmoid",
                    "routed_scaling_factor": 2.0, "moe_layer_freq": [0, 1, 1, 1], "tie_word_embeddings": False,
                    "sparse_attention_config": {"use_sparse_attention": True, "sparse_attention_freq": [0, 1, 1, 1],
                                                "sparse_index_dim": 64, "sparse_num_index_heads": 2,
                                                "sparse_topk_blocks": 4, "sparse_block_size": 128,
                                                "sparse_local_block": 1, "sparse_init_block": 0}}


def test_minimax_m3_round_trip(tmp_path):
    # the published config: 60 layers, 3 dense; the indexer (4 heads of 128, top 16 blocks of 128) on the other 57
    with open(MINIMAX_M3) as f:
        cfg = json.load(f)
    arch, meta = converted_metadata(cfg)
    assert (arch, meta["minimax-m3.leading_dense_block_count"], meta["minimax-m3.feed_forward_length"],
            meta["minimax-m3.expert_feed_forward_length"]) == ("minimax-m3", 3, 12288, 3072)
    model, back = round_trip(cfg, tmp_path / "m.gguf")
    same_kv(model, back)
    assert back.config["sparse_attention_config"]["sparse_attention_freq"] == [0] * 3 + [1] * 57


def test_minimax_m3_preset_text_model_round_trip(tmp_path):
    cfg = copy.deepcopy(kvmem.get_model("minimax-m3").config)
    cfg["text_config"]["model_type"] = "minimax_m3_vl_text"       # the preset's text model, as its class names it
    same_kv(*round_trip(cfg, tmp_path / "m.gguf"))


def test_minimax_m3_small_by_hand(tmp_path):
    model, back = round_trip(SMALL_MINIMAX_M3, tmp_path / "m.gguf")
    same_kv(model, back)
    # llama.cpp at 4,096 cells (f16): K and V of 2 x 64 in 4 layers = 4 x 4,096 x 256 x 2 B = 8 MiB; the MSA indexer
    # cache of layers 1-3 one K head of sparse_index_dim 64 and one V head of value_length 64 (llama.cpp@0c1e57098
    # src/llama-kv-cache-msa.cpp#L39-L50): 3 x 4,096 x 128 x 2 B = 3 MiB
    est = kvmem.estimate(back, engine="llama.cpp", tokens=4096, kv_dtype="f16", flash_attn="on")
    assert est.kv_bytes == 4 * 4096 * 256 * 2 + 3 * 4096 * (64 + 64) * 2


def small_hy_v4(**fields) -> dict:
    """transformers' HYV4Config at 8 layers (its indexer_types: full at 0, 1 and 5; 1 leading dense block), MLA of a
    128 latent + 32 rope, an indexer key of 64."""
    return small_config("hy_v4", **{"num_attention_heads": 4, "n_routed_experts": 4, "num_experts_per_tok": 2,
                                    "moe_intermediate_size": 128, "q_lora_rank": 64, "kv_lora_rank": 128,
                                    "qk_nope_head_dim": 32, "qk_rope_head_dim": 32, "v_head_dim": 64,
                                    "index_head_dim": 64, "index_n_heads": 2, "index_topk": 64, "pad_token_id": None,
                                    "bos_token_id": None, "eos_token_id": None, **fields})


def test_hy_v4_small_by_hand(tmp_path):
    cfg = small_hy_v4()
    arch, meta = converted_metadata(cfg)
    assert meta["hy_v4.attention.indexer.types"] == [True, True, False, False, False, True, False, False]
    model, back = round_trip(cfg, tmp_path / "m.gguf")
    same_kv(model, back)
    # llama.cpp at 4,096 cells (f16): the latent and rope key (128 + 32) in 8 layers, no V (MLA): 8 x 4,096 x 160 x
    # 2 B = 10 MiB; the indexer key (64) on the 3 full layers: 3 x 4,096 x 64 x 2 B = 1.5 MiB
    est = kvmem.estimate(back, engine="llama.cpp", tokens=4096, kv_dtype="f16", flash_attn="on")
    assert est.kv_bytes == 8 * 4096 * 160 * 2 + 3 * 4096 * 64 * 2


def test_hy_v4_without_dsa_layers_has_no_indexer(tmp_path):
    # conversion/hy_v4.py L67-L86: neither indexer_types nor a sparse layer_types: no indexer keys, a plain MLA cache
    cfg = small_hy_v4()
    cfg["indexer_types"] = None
    arch, meta = converted_metadata(cfg)
    assert "hy_v4.attention.indexer.top_k" not in meta
    model, back = round_trip(cfg, tmp_path / "m.gguf")
    same_kv(model, back)
    assert not any(layer.index_head_dim for layer in back.layers)


def test_hy_v4_layer_0_without_indexer_is_refused(tmp_path):
    arch, meta = converted_metadata(small_hy_v4())
    meta["hy_v4.attention.indexer.types"] = [False] + [True] * 7
    write_header(tmp_path / "m.gguf", arch, meta)
    with pytest.raises(SourceError, match="does not give layer 0 an indexer: llama.cpp 0c1e57098 refuses it"):
        kvmem.Model.from_gguf(tmp_path / "m.gguf")


def small_deepseek_ocr(**fields) -> dict:
    """transformers' DeepSeek-OCR-2 text config at 8 layers of 4 heads (head 256 / 4 = 64, 4 K/V heads), 4 experts."""
    return small_config("deepseek_ocr2_text", **{"num_key_value_heads": 4, "n_routed_experts": 4,
                                                 "num_experts_per_tok": 2, "moe_intermediate_size": 128,
                                                 "pad_token_id": None, "bos_token_id": None, "eos_token_id": None,
                                                 **fields})


def test_deepseek2_ocr_small_by_hand(tmp_path):
    # Unlimited-OCR's window is written "for metadata" (conversion/deepseek.py L376-L380) and read by nothing:
    # every layer whole, 8 x 4,096 cells x 4 heads x 64 x 2 (K, V) x 2 B = 32 MiB
    cfg = {**small_deepseek_ocr(), "sliding_window_size": 1024}
    arch, meta = converted_metadata(cfg)
    assert (arch, meta["deepseek2-ocr.attention.sliding_window"]) == ("deepseek2-ocr", 1024)
    write_header(tmp_path / "m.gguf", arch, meta)
    back = kvmem.Model.from_gguf(tmp_path / "m.gguf")
    assert "sliding_window" not in back.config
    assert not any(layer.kind.windowed for layer in back.layers)
    est = kvmem.estimate(back, engine="llama.cpp", tokens=4096, kv_dtype="f16", flash_attn="on")
    assert est.kv_bytes == 8 * 4096 * 4 * 64 * 2 * 2 == 32 * 2**20


def test_deepseek2_ocr_round_trip(tmp_path):
    same_kv(*round_trip(small_deepseek_ocr(), tmp_path / "m.gguf"))


def test_deepseek2_ocr_other_head_width_is_refused(tmp_path):
    arch, meta = converted_metadata(small_deepseek_ocr())
    meta["deepseek2-ocr.attention.key_length"] = meta["deepseek2-ocr.attention.value_length"] = 128
    write_header(tmp_path / "m.gguf", arch, meta)
    with pytest.raises(SourceError, match=r"key_length / value_length is 128, not embedding_length / head_count \(64\)"):
        kvmem.Model.from_gguf(tmp_path / "m.gguf")


def small_hrm_text(**fields) -> dict:
    """transformers' HrmTextConfig: 2 layers per stack, H_cycles 2, L_cycles 2 -> 2 x 2 x 3 = 12 cache slots."""
    return small_config("hrm_text", **{"num_hidden_layers": 2, "H_cycles": 2, "L_cycles": 2, "head_dim": 64,
                                       "embedding_scale": 1.0, "pad_token_id": None, "bos_token_id": None,
                                       "eos_token_id": None, **fields})


def test_hrm_text_slots_by_hand(tmp_path):
    cfg = small_hrm_text()
    arch, meta = converted_metadata(cfg)
    assert (meta["hrm_text.block_count"], meta["hrm_text.hrm.layers_per_stack"]) == (12, 2)
    model, back = round_trip(cfg, tmp_path / "m.gguf")
    same_kv(model, back)
    # 12 slots x 4,096 cells x 2 K/V heads x 64 x 2 (K, V) x 2 B (f16) = 24 MiB
    est = kvmem.estimate(back, engine="llama.cpp", tokens=4096, kv_dtype="f16", flash_attn="on")
    assert (back.num_layers, est.kv_bytes) == (12, 24 * 2**20)


def test_hrm_text_training_style_config_round_trip(tmp_path):
    # a checkpoint's config.json with the per-stack count in num_hidden_layers (conversion/hrm_text.py L21-L23)
    cfg = {k: v for k, v in small_hrm_text().items() if k != "num_layers_per_stack"}
    cfg["num_hidden_layers"] = 2
    model, back = round_trip(cfg, tmp_path / "m.gguf")
    same_kv(model, back)
    assert model.num_layers == back.num_layers == 12


def test_hrm_text_slot_count_that_does_not_multiply_is_refused():
    header = type("H", (), {"arch": "hrm_text", "tensors": [], "metadata": {
        "hrm_text.block_count": 10, "hrm_text.embedding_length": 256, "hrm_text.attention.head_count": 4,
        "hrm_text.hrm.layers_per_stack": 2, "hrm_text.hrm.h_cycles": 2, "hrm_text.hrm.l_cycles": 2}})()
    with pytest.raises(SourceError, match=r"block_count is 10, not .* \(2 x 2 x \(2 \+ 1\)\): llama.cpp 0c1e57098 aborts"):
        config_from_header(header)


def _header(arch: str, meta: dict):
    return type("H", (), {"arch": arch, "tensors": [], "metadata": meta})()


# (config, per-layer key, the length llama.cpp's get_key_or_arr reads): block_count for head_count, head_count_kv,
# feed_forward_length and expert_feed_forward_length (src/llama-model.cpp#L1395-L1404, step35.cpp#L12), counting the
# MTP layers (MiMo-V2's converter adds 3: 8 + 3 = 11; Step-3.5 with one: 9); block_count less them for HY-V4's
# indexer types (hy-v4.cpp#L59: n_layer())
_PER_LAYER_KEYS = [("deci", SMALL_NAS, "attention.head_count", 8), ("deci", SMALL_NAS, "attention.head_count_kv", 8),
                   ("deci", SMALL_NAS, "feed_forward_length", 8),
                   ("step35", SMALL_STEP35, "attention.head_count", 8),
                   ("step35", SMALL_STEP35, "attention.head_count_kv", 8),
                   ("step35-mtp", {**SMALL_STEP35, "num_nextn_predict_layers": 1}, "attention.head_count_kv", 9),
                   ("step35", SMALL_STEP35, "expert_feed_forward_length", 8),
                   ("mimo2", SMALL_MIMO2, "attention.head_count_kv", 11),
                   ("hy_v4", small_hy_v4(), "attention.indexer.types", 8)]


@pytest.mark.parametrize("case, cfg, name, n", _PER_LAYER_KEYS, ids=[f"{c[0]}:{c[2]}" for c in _PER_LAYER_KEYS])
@pytest.mark.parametrize("delta", [-1, 1], ids=["short", "long"])
def test_per_layer_array_of_another_length_is_refused_as_llamacpp_does(case, cfg, name, n, delta):
    # llama.cpp 0c1e57098 src/llama-model-loader.cpp#L476-L479: "key %s has wrong array length; expected %u, got %u"
    # (tests/oracles/test_gguf_arches_layered_oracle.py has llama.cpp refuse the same headers)
    arch, meta = converted_metadata(cfg)
    full = f"{arch}.{name}"
    value = meta[full] if isinstance(meta[full], list) else [meta[full]] * n
    assert len(value) == n          # as the converter writes it, the length llama.cpp reads
    config_from_header(_header(arch, dict(meta, **{full: value})))
    cut = value[:n - 3] if delta < 0 else value + value[-1:]
    depth = "block_count less nextn_predict_layers" if name == "attention.indexer.types" else "block_count"
    with pytest.raises(SourceError, match=rf"GGUF {full} has {len(cut)} entries, one per layer, and {depth} is {n}: "
                                          rf"llama.cpp 0c1e57098 refuses the file \(\"key {full} has wrong array "
                                          rf"length; expected {n}, got {len(cut)}\""):
        config_from_header(_header(arch, dict(meta, **{full: cut})))


def test_llama_head_count_kv_array_of_another_length_is_refused():
    # any architecture: src/llama-model.cpp#L1404 reads head_count_kv with get_key_or_arr over block_count (4 here);
    # [8, 8, 8] was read as 8 K/V heads before
    meta = {"llama.block_count": 4, "llama.embedding_length": 256, "llama.attention.head_count": 8,
            "llama.attention.head_count_kv": [8, 8, 8, 8]}
    assert config_from_header(_header("llama", meta))["num_key_value_heads"] == 8
    with pytest.raises(SourceError, match=r"llama.attention.head_count_kv has 3 entries, .* block_count is 4: .*"
                                          r"expected 4, got 3"):
        config_from_header(_header("llama", dict(meta, **{"llama.attention.head_count_kv": [8, 8, 8]})))

"""GGUF headers of the architectures kvmem/sources/gguf_more.py maps (deepseek4, gemma3n and the common-key
architectures), judged by round trip: kvmem.sources.gguf_converted writes the keys llama.cpp's converter writes
for a config, Model.from_gguf reads the header back, and the layers and llama.cpp mode's KV bytes and state must
equal the config's. tests/oracles/test_gguf_more_oracle.py has llama.cpp itself build the same headers."""

from __future__ import annotations

import copy
import json

import gguf
import pytest

import kvmem
from kvmem.sources import SourceError
from kvmem.sources.gguf_config import config_from_header
from kvmem.sources.gguf_converted import converted_metadata


def write_header(path, arch: str, meta: dict) -> None:
    """A GGUF of ``meta`` and no tensors, each value typed as the converter's gguf-py calls type it."""
    w = gguf.GGUFWriter(str(path), arch)
    for key, value in meta.items():
        if isinstance(value, bool):
            w.add_bool(key, value)
        elif isinstance(value, int):
            w.add_uint32(key, value)
        elif isinstance(value, float):
            w.add_float32(key, value)
        else:
            w.add_array(key, value)
    w.add_tokenizer_model("none")
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()


def small_config(model_type: str, **fields) -> dict:
    """transformers' own config class for ``model_type`` (its defaults) at a small shape."""
    from transformers import AutoConfig
    shape = dict(num_hidden_layers=8, hidden_size=256, intermediate_size=512, num_attention_heads=4,
                 num_key_value_heads=2, vocab_size=1000, max_position_embeddings=8192)
    shape.update(fields)
    cfg = AutoConfig.for_model(model_type, **json.loads(json.dumps(shape))).to_dict()     # a copy: it edits dicts
    cfg["model_type"] = model_type
    for name in ("layer_types", "rope_parameters"):     # as the file gives them: to_dict renames Granite 4's
        if name in fields:                              # "mamba" / "attention", drops HunYuan-VL's xdrope_section
            cfg[name] = fields[name]
    return cfg


def preset_config(name: str) -> dict:
    """A preset's config; Gemma 3n's (text fields only) completed by transformers' Gemma3nTextConfig, whose
    altup and per-layer-input fields the converter reads (conversion/gemma.py L533-L538)."""
    cfg = copy.deepcopy(kvmem.get_model(name).config)     # a copy: the callers change nested dicts (text_config)
    if cfg["model_type"] == "gemma3n":
        from transformers import AutoConfig
        text = cfg["text_config"]
        cfg = AutoConfig.for_model("gemma3n_text", **{k: v for k, v in text.items() if k != "model_type"}).to_dict()
        cfg["model_type"] = "gemma3n_text"
    return cfg


# EXAONE 3.5's config.json fields (remote code: transformers has no exaone class), at a small shape
EXAONE_3 = {"model_type": "exaone", "architectures": ["ExaoneForCausalLM"], "num_layers": 8, "hidden_size": 256,
            "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 512, "vocab_size": 1000,
            "max_position_embeddings": 8192, "layer_norm_epsilon": 1e-5, "activation_function": "silu",
            "rope_theta": 1e6, "tie_word_embeddings": False}


def round_trip(cfg: dict, path):
    model = kvmem.Model.from_hf_config(cfg, name="src")
    arch, meta = converted_metadata(cfg)
    write_header(path, arch, meta)
    return model, kvmem.Model.from_gguf(path)


def _kv(model, **kw):
    """(KV bytes, state bytes) of a llama.cpp estimate, or the refusal's text (kimi-linear's q8_0 V: both refuse)."""
    try:
        est = kvmem.estimate(model, engine="llama.cpp", **kw)
    except ValueError as exc:
        return str(exc)
    return est.kv_bytes, est.state_bytes


def same_kv(model, back) -> None:
    assert back.num_layers == model.num_layers
    for tokens, batch, kv_dtype in ((8192, 1, "auto"), (32768, 2, "q8_0")):
        kw = dict(tokens=tokens, batch=batch, kv_dtype=kv_dtype)
        mine, theirs = _kv(back, **kw), _kv(model, **kw)
        assert mine == theirs and (kv_dtype == "q8_0" or not isinstance(mine, str)), (tokens, kv_dtype)


_MROPE = {"rope_type": "default", "rope_theta": 5e6, "mrope_section": [12, 10, 10], "mrope_interleaved": True}
COMMON = {"olmo2": {}, "olmo3": {"sliding_window": 512}, "olmo": {}, "olmoe": {"num_experts": 8, "num_experts_per_tok": 2, "num_key_value_heads": 4},
          "granite": {}, "granitemoe": {"num_local_experts": 8, "num_experts_per_tok": 2},
          "granitemoeshared": {"num_local_experts": 8, "num_experts_per_tok": 2, "shared_intermediate_size": 256},
          "starcoder2": {}, "stablelm": {}, "seed_oss": {"head_dim": 128}, "exaone4": {"sliding_window": None, "layer_types": ["full_attention"] * 8},
          "exaone4-64": {"num_hidden_layers": 64, "sliding_window": 1024},
          "ernie4_5": {}, "ernie4_5_moe": {}, "hunyuan_v1_dense": {"head_dim": 64}, "hunyuan_v1_moe": {"head_dim": 64, "num_experts": 8, "moe_topk": 2, "moe_intermediate_size": 256,
                             "num_shared_expert": 1},
          "glm4": {"head_dim": 64}, "cohere": {}, "apertus": {}, "arcee": {}, "phi": {}, "nemotron": {"head_dim": 64},
          "smollm3": {}, "mamba": {"intermediate_size": 512, "state_size": 16, "time_step_rank": 16},
          "falcon_mamba": {"intermediate_size": 512, "state_size": 16, "time_step_rank": 16},
          "lfm2": {"layer_types": ["conv", "conv", "full_attention"] * 2 + ["conv", "full_attention"],
                   "conv_L_cache": 3},
          "lfm2_moe": {"layer_types": ["conv", "conv", "full_attention"] * 2 + ["conv", "full_attention"],
                       "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 256},
          "granitemoehybrid": {"layer_types": ["mamba"] * 3 + ["attention"] + ["mamba"] * 3 + ["attention"],
                               "mamba_n_heads": 8, "mamba_d_head": 64, "mamba_d_state": 64, "mamba_n_groups": 1,
                               "num_local_experts": 8, "shared_intermediate_size": 256},
          "gpt2": {"n_layer": 8, "n_embd": 256, "n_head": 4, "n_positions": 1024, "n_ctx": 1024, "num_key_value_heads": 4},
          "gpt_bigcode": {"n_layer": 8, "n_embd": 256, "n_head": 4, "n_positions": 1024, "multi_query": True},
          "bloom": {"n_layer": 8, "n_head": 4, "num_key_value_heads": 4}, "gpt_neox": {"num_key_value_heads": 4},
          "dbrx": {"n_layers": 8, "d_model": 256, "n_heads": 4, "max_seq_len": 4096,
                   "attn_config": {"kv_n_heads": 2, "rope_theta": 10000.0, "clip_qkv": 8.0},
                   "ffn_config": {"ffn_hidden_size": 512, "moe_num_experts": 4, "moe_top_k": 2}},
          "glm": {"head_dim": 64},
          "falcon_h1": {"head_dim": 64, "mamba_d_ssm": 512, "mamba_n_heads": 8, "mamba_d_head": 64,
                        "mamba_n_groups": 1, "mamba_d_state": 64, "mamba_d_conv": 4},
          "mistral4": {"num_key_value_heads": 4, "kv_lora_rank": 128, "q_lora_rank": 256, "qk_rope_head_dim": 32,
                       "qk_nope_head_dim": 32, "v_head_dim": 64, "n_routed_experts": 8, "num_experts_per_tok": 2,
                       "moe_intermediate_size": 128},
          "jais2": {"head_dim": 64}, "chameleon": {}, "muse_glimmer_text": {"head_dim": 64, "sliding_window": 512},
          "exaone_moe": {"num_experts": 8, "moe_intermediate_size": 128, "scoring_func": "sigmoid",
                         "sliding_window": 1024},
          "exaone_moe-mtp": {"num_experts": 8, "moe_intermediate_size": 128, "scoring_func": "sigmoid",
                             "num_nextn_predict_layers": 1},
          "cohere2_moe": {"head_dim": 64, "num_experts": 8, "num_experts_per_tok": 2, "sliding_window": 512,
                          "layer_norm_eps": 1e-5},
          "granite_swa": {"sliding_window": 256}, "granitemoe_swa": {"sliding_window": 256, "num_local_experts": 4},
          "hy_v3": {"head_dim": 64, "num_experts": 8, "moe_intermediate_size": 128},
          "mpt": {"n_layers": 8, "d_model": 256, "n_heads": 4, "max_seq_len": 2048, "num_key_value_heads": 4},
          "phimoe": {"num_local_experts": 4, "sliding_window": 8192},
          "minicpm3": {"num_key_value_heads": 4, "kv_lora_rank": 128, "q_lora_rank": 192, "qk_nope_head_dim": 32,
                       "qk_rope_head_dim": 32, "v_head_dim": 64},
          "hunyuan_vl_text": {"head_dim": 64, "rope_parameters": {"rope_type": "xdrope", "rope_theta": 1e4, "alpha": 1000.0, "factor": 1.0,
                                                                  "xdrope_section": [8, 8, 8, 8]}},
          "paddleocr_vl_text": {"head_dim": 64},
          "laguna": {"head_dim": 64, "num_attention_heads_per_layer": [4, 8] * 4, "sliding_window": 512,
                     "layer_types": ["full_attention" if i % 4 == 0 else "sliding_attention" for i in range(8)],
                     "num_experts": 8, "moe_intermediate_size": 128, "shared_expert_intermediate_size": 128,
                     "mlp_layer_types": ["dense"] + ["sparse"] * 7},
          "mamba2": {"num_heads": 8, "head_dim": 64, "expand": 2, "n_groups": 2, "state_size": 64}, "qwen2_vl_text": {"rope_parameters": {"rope_type": "default", "mrope_section": [16, 8, 8]}},
          "qwen3_vl_text": {"head_dim": 64, "rope_parameters": _MROPE},
          "qwen3_vl_moe_text": {"head_dim": 64, "num_experts": 8, "rope_parameters": _MROPE},
          "ministral3": {},
          "llama4_text": {"num_local_experts": 4, "intermediate_size_mlp": 512, "head_dim": 64},
          "llama4_text-full": {"num_local_experts": 4, "intermediate_size_mlp": 512, "head_dim": 64,
                               "layer_types": ["full_attention"] * 8, "attention_chunk_size": None}, "mellum": {"layer_types": ["full_attention" if (i + 1) % 4 == 0 else "sliding_attention" for i in range(8)]}, "dots1": {"n_shared_experts": 1, "scoring_func": "sigmoid", "num_key_value_heads": 4, "n_routed_experts": 8, "num_experts_per_tok": 2}, "afmoe": {}, "bitnet": {}}


@pytest.mark.parametrize("model_type", sorted(COMMON))
def test_common_key_architectures_round_trip(tmp_path, model_type):
    same_kv(*round_trip(small_config(model_type.split("-")[0], **COMMON[model_type]), tmp_path / "m.gguf"))


@pytest.mark.parametrize("name", ["deepseek-v4-flash", "deepseek-v4-pro", "gemma-3n-e2b", "gemma-3n-e4b",
                                  "llama-4-scout-17b-16e", "llama-4-maverick-17b-128e", "nemotron-3-nano-30b-a3b",
                                  "nemotron-h-8b", "kimi-linear-48b-a3b", "minimax-m1"])
def test_presets_round_trip(tmp_path, name):
    same_kv(*round_trip(preset_config(name), tmp_path / "m.gguf"))


def test_deepseek4_header_by_hand(tmp_path):
    # DeepSeek-V4-Flash: 43 layers, compress_ratios [0, 0, 4, 128, 4, 128, ...] (+ the MTP layer's entry);
    # the header keeps all 44 entries and block_count 43 (the converter's default, no --mtp-only)
    cfg = dict(kvmem.get_model("deepseek-v4-flash").config)
    arch, meta = converted_metadata(cfg)
    assert (arch, meta["deepseek4.block_count"], len(meta["deepseek4.attention.compress_ratios"])) == ("deepseek4", 43, 44)
    write_header(tmp_path / "m.gguf", arch, meta)
    back = kvmem.Model.from_gguf(tmp_path / "m.gguf")
    assert (back.model_type, back.config["head_dim"], back.config["sliding_window"], back.config["index_head_dim"]) == \
        ("deepseek_v4", 512, 128, 128)


def test_exaone_3_round_trip(tmp_path):
    same_kv(*round_trip(dict(EXAONE_3), tmp_path / "m.gguf"))


def test_llama4_chunks_by_hand(tmp_path):
    # Llama-4-Scout: 48 layers, every 4th full (12), 36 chunked at 8,192 tokens (llama4.cpp L13-L19);
    # 8 KV heads x 128 x 2 (K, V) x 2 B = 4,096 B a token a layer; at 32,768 tokens f16:
    # full 12 x 4,096 x 32,768 = 1,536 MiB; chunked 36 x 4,096 x 8,704 cells (8,192 + 512, padded to 256) = 1,224 MiB
    _, back = round_trip(preset_config("llama-4-scout-17b-16e"), tmp_path / "m.gguf")
    assert back.config["attention_chunk_size"] == 8192 and back.config["no_rope_layers"][:4] == [1, 1, 1, 0]
    kv = kvmem.estimate(back, engine="llama.cpp", tokens=32768, kv_dtype="f16").kv_bytes
    assert kv == (1536 + 1224) * 2**20


def test_gemma3n_kv_layers_by_hand(tmp_path):
    # Gemma 3n E2B: 30 layers, the last 10 share KV: 20 cached, 4 of them full (every 5th), 16 sliding (512)
    # f16 at 8,192 tokens: full 4 x 2 heads x 256 x 2 (K, V) x 2 B x 8,192 = 64 MiB;
    # sliding 16 x 2 x 256 x 2 x 2 B x 1,024 cells (512 + 512 ubatch, padded to 256) = 32 MiB: 96 MiB
    cfg = preset_config("gemma-3n-e2b")
    _, back = round_trip(cfg, tmp_path / "m.gguf")
    assert back.config["num_kv_shared_layers"] == 10
    kv = kvmem.estimate(back, engine="llama.cpp", tokens=8192, kv_dtype="f16").kv_bytes
    assert kv == 96 * 2**20


def test_gemma3n_shared_count_llama_cpp_does_not_read_is_refused(tmp_path):
    # llama.cpp caches the first 20 layers (gemma3n.cpp L7) whatever attention.shared_kv_layers says
    cfg = preset_config("gemma-3n-e2b")
    arch, meta = converted_metadata(cfg)
    meta["gemma3n.attention.shared_kv_layers"] = 12
    write_header(tmp_path / "m.gguf", arch, meta)
    with pytest.raises(SourceError, match=r"shared_kv_layers is 12 of 30 layers.*caches the first 20"):
        kvmem.Model.from_gguf(tmp_path / "m.gguf")


def test_deepseek4_other_gating_is_refused(tmp_path):
    arch, meta = converted_metadata(dict(kvmem.get_model("deepseek-v4-flash").config))
    meta["deepseek4.expert_gating_func"] = 2
    write_header(tmp_path / "m.gguf", arch, meta)
    with pytest.raises(SourceError, match="expects sqrtsoftplus"):
        kvmem.Model.from_gguf(tmp_path / "m.gguf")


def test_exaone4_window_llama_cpp_ignores_is_refused(tmp_path):
    # exaone4.cpp L4-L8: only a 64-layer model slides; an 8-layer file with a window is cached whole by llama.cpp
    arch, meta = converted_metadata(small_config("exaone4"))
    write_header(tmp_path / "m.gguf", arch, meta)
    with pytest.raises(SourceError, match="slides only 64-layer EXAONE 4"):
        kvmem.Model.from_gguf(tmp_path / "m.gguf")


def test_exaone4_64_layers_without_window_slide_as_llama_cpp_does():
    # exaone4.cpp L4-L7: n_swa 4,096, every 4th layer full, though the header names no window
    header = type("H", (), {"arch": "exaone4", "tensors": [], "metadata": {
        "exaone4.block_count": 64, "exaone4.embedding_length": 256, "exaone4.attention.head_count": 4,
        "exaone4.attention.head_count_kv": 2}})()
    cfg = config_from_header(header)
    assert cfg["sliding_window"] == 4096 and cfg["layer_types"].count("full_attention") == 16


def test_window_without_sliding_layers_is_refused(tmp_path):
    # transformers' MellumConfig defaults: sliding_window 1,024, every layer "full_attention"; the converter
    # writes both (conversion/mellum.py L9-L14) and llama.cpp aborts building the iSWA cache
    arch, meta = converted_metadata(small_config("mellum"))
    assert meta["mellum.attention.sliding_window"] == 1024 and not any(meta["mellum.attention.sliding_window_pattern"])
    write_header(tmp_path / "m.gguf", arch, meta)
    with pytest.raises(SourceError, match=r"no sliding layer: llama.cpp 0c1e57098 aborts"):
        kvmem.Model.from_gguf(tmp_path / "m.gguf")


@pytest.mark.parametrize(("arch", "why"), [
    ("gptj", "no converter at llama.cpp 0c1e57098 writes it"), ("rwkv7", "kvmem reads no Hugging Face family of it")])
def test_unmapped_architectures_refused_with_reason(arch, why):
    header = type("H", (), {"arch": arch, "tensors": [], "metadata": {}})()
    with pytest.raises(SourceError, match=rf"GGUF architecture '{arch}' is not mapped to a kvmem model \({why}"):
        config_from_header(header)


def test_phimoe_window_below_context_is_refused(tmp_path):
    # phimoe.cpp reads no window; the model's code would slide 4,096 of its 8,192 positions
    arch, meta = converted_metadata(small_config("phimoe", num_local_experts=4, sliding_window=4096))
    write_header(tmp_path / "m.gguf", arch, meta)
    with pytest.raises(SourceError, match=r"sliding_window is 4096, below context_length \(8192\)"):
        kvmem.Model.from_gguf(tmp_path / "m.gguf")


def test_cohere2moe_without_pattern_is_dense_first():
    # cohere2moe.cpp L27-L28: load_swa_pattern(ml, 4, dense_first = true) -> full where i % 4 == 0
    # (llama-hparams.cpp L8-L12), unlike the other archs' (i + 1) % 4 == 0
    header = type("H", (), {"arch": "cohere2moe", "tensors": [], "metadata": {
        "cohere2moe.block_count": 8, "cohere2moe.embedding_length": 256, "cohere2moe.attention.head_count": 4,
        "cohere2moe.attention.head_count_kv": 2, "cohere2moe.attention.sliding_window": 512,
        "cohere2moe.leading_dense_block_count": 0}})()
    types = config_from_header(header)["layer_types"]
    assert [i for i, t in enumerate(types) if t == "full_attention"] == [0, 4]


def test_hy_v3_shared_expert_width_round_trips(tmp_path):
    # conversion/hunyuan.py#L393-L395 writes expert_shared_feed_forward_length = 128 x 2 = 256; read back as
    # num_shared_experts 2, the shared MLP is 256 wide again (was the default 1: 128)
    model, back = round_trip(small_config("hy_v3", head_dim=64, num_experts=8, moe_intermediate_size=128,
                                          num_shared_experts=2), tmp_path / "m.gguf")
    assert back.config["num_shared_experts"] == 2
    assert back.facts.moe == model.facts.moe
    assert (back.facts.moe.shared_intermediate_size, back.facts.moe.moe_layers[:2]) == (256, (False, True))


def test_hy_v3_shared_width_not_a_multiple_is_refused(tmp_path):
    arch, meta = converted_metadata(small_config("hy_v3", head_dim=64, num_experts=8, moe_intermediate_size=128))
    meta["hy_v3.expert_shared_feed_forward_length"] = 200
    write_header(tmp_path / "m.gguf", arch, meta)
    with pytest.raises(SourceError, match=r"expert_shared_feed_forward_length is 200, not a multiple of .*\(128\)"):
        kvmem.Model.from_gguf(tmp_path / "m.gguf")

"""kvmem's vllm mode on GLM-5 (glm_moe_dsa), bytes derived by hand from vLLM 0.33.0.

vllm@v0.33.0: vllm/models/deepseek_v32/attention.py (the CUDA DSA attention GLM-5 runs on; the same
rule in vllm/model_executor/models/deepseek_v2.py) keeps an indexer on a layer unless
index_topk_pattern[i] == "S", or, without a pattern, max(i - index_skip_topk_offset + 1, 0) %
index_topk_freq != 0; DeepseekV32IndexerCache.get_kv_cache_spec: one head of index_head_dim +
index_head_dim // 128 x 4 B, uint8; the latent MLAAttentionSpec: kv_lora_rank + qk_rope_head_dim,
one head; FLASHMLA_SPARSE forces blocks of 64 (vllm/platforms/cuda.py). Checked against vLLM's
planning: tests/oracles/test_vllm_dsa_oracle.py.
"""

import pytest

import kvmem

GLM5 = {"model_type": "glm_moe_dsa", "architectures": ["GlmMoeDsaForCausalLM"], "num_hidden_layers": 78,
        "num_attention_heads": 64, "num_key_value_heads": 64, "hidden_size": 6144, "head_dim": 64,
        "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 192, "v_head_dim": 256, "q_lora_rank": 2048,
        "index_head_dim": 128, "index_n_heads": 32, "index_topk": 2048, "torch_dtype": "bfloat16",
        "max_position_embeddings": 202752}


def test_glm_5_latent_and_indexer_pages():
    # per token: latent (512 + 64) x 2 B = 1,152 B; indexer 128 + 128 // 128 x 4 = 132 B (uint8)
    # blocks of 64: 1,024 tokens = 16 blocks -> 16 x 64 x (1,152 + 132) = 1,314,816 B per layer
    # 131,072 tokens = 2,048 blocks -> 2,048 x 64 x 1,284 = 168,296,448 B per layer
    model = kvmem.Model.from_hf_config(GLM5)
    for tokens, per_layer in ((1024, 1_314_816), (131072, 168_296_448)):
        result = kvmem.estimate(model, engine="vllm", tokens=tokens)
        assert result.per_layer == (per_layer,) * 78
        assert result.kv_bytes == 78 * per_layer
    assert "fp8_e4m3" in " ".join(kvmem.estimate(model, engine="vllm", tokens=1024).notes)


def test_glm_5_indexer_only_where_vllm_keeps_one():
    # index_topk_freq 4, offset 2 (default): indexer where max(i - 1, 0) % 4 == 0 -> layers 0, 1, 5
    model = kvmem.Model.from_hf_config({**GLM5, "num_hidden_layers": 8, "index_topk_freq": 4})
    result = kvmem.estimate(model, engine="vllm", tokens=1024)
    with_indexer, without = 16 * 64 * (1_152 + 132), 16 * 64 * 1_152
    assert result.per_layer == (with_indexer, with_indexer, without, without, without, with_indexer, without, without)


def test_glm_5_indexer_types_vllm_does_not_read_are_refused():
    # transformers' indexer_types says layer 1 shares; vLLM reads only the pattern / freq (here: none,
    # freq 1 -> every layer keeps an indexer)
    types = ["full", "shared"] + ["full"] * 6
    model = kvmem.Model.from_hf_config({**GLM5, "num_hidden_layers": 8, "indexer_types": types})
    with pytest.raises(ValueError, match="layer 1: the config's indexer_types say it skips an indexer key"):
        kvmem.estimate(model, engine="vllm", tokens=1024)


def test_glm_5_mtp_layer_keeps_an_indexer():
    # deepseek_v2.py: an MTP layer always has its indexer (is_mtp_layer), even when the last layer skips
    model = kvmem.Model.from_hf_config({**GLM5, "num_hidden_layers": 4, "index_topk_pattern": "FFFS",
                                        "num_nextn_predict_layers": 1})
    result = kvmem.estimate(model, engine="vllm", tokens=1024, draft="mtp", num_speculative_tokens=1)
    # 1,024 tokens + 1 lookahead slot: cdiv(1,025, 64) = 17 blocks
    assert result.per_layer[3] == 17 * 64 * 1_152                  # "S": no indexer
    assert result.per_layer[4] == 17 * 64 * (1_152 + 132)          # the MTP layer: latent + indexer

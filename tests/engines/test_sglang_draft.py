"""SGLang's EAGLE/MTP draft pool (kvmem.engines.sglang.draft) by hand; SGLang's own configurator judges it in
tests/oracles/test_sglang_draft_oracle.py."""

import pytest

import kvmem
from kvmem.engines.sglang.draft import draft_pool

GIB = 1 << 30


def test_an_eagle_head_takes_one_layers_share_of_every_token():
    # llama-3.1-8b: cell 32 x 8 x 256 x 2 B = 131,072 B; one draft layer: int(131,072 x 1 / 32) = 4,096 B;
    # 20 GiB // 135,168 = 158,875 tokens (163,840 without the draft); draft pool (158,875 + 1) x 4,096 B
    pool = draft_pool(kvmem.get_model("llama-3.1-8b"), kv_memory=20 * GIB, draft_layers=1)
    assert (pool.cell_bytes, pool.draft_cell_bytes) == (131_072, 4_096)
    assert (pool.target_tokens, pool.tokens_without_draft) == (158_875, 163_840)
    assert pool.draft_pool_bytes == 158_876 * 4_096


def test_mla_mtp_layer():
    # deepseek-v2-lite: 27 x 576 x 2 B = 31,104 B; one MTP layer 1,152 B; 20 GiB // 32,256 = 665,762
    pool = draft_pool(kvmem.get_model("deepseek-v2-lite"), kv_memory=20 * GIB, draft_layers=1)
    assert (pool.draft_cell_bytes, pool.target_tokens) == (1_152, 665_762)


def test_refusals():
    with pytest.raises(ValueError, match="draft_layers must be a positive integer"):
        draft_pool(kvmem.get_model("llama-3.1-8b"), kv_memory=GIB, draft_layers=0)
    with pytest.raises(ValueError, match="HybridSWAPoolConfigurator"):
        draft_pool(kvmem.get_model("gpt-oss-20b"), kv_memory=20 * GIB, draft_layers=1)

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


# ---- wired into kvmem.capacity / estimate / fit by the speculative options ---------------------------------

EAGLE_HEAD = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
              "intermediate_size": 14336, "num_attention_heads": 32, "num_key_value_heads": 8,
              "num_hidden_layers": 1, "vocab_size": 128256, "max_position_embeddings": 8192,
              "torch_dtype": "bfloat16"}


def _cap(model, **options):
    return kvmem.capacity(model, engine="sglang", kv_memory=20 * GIB, **options)


def test_capacity_with_an_eagle_head_holds_the_pools_tokens():
    cap = _cap("llama-3.1-8b", speculative_algorithm="EAGLE", speculative_draft_model_path=EAGLE_HEAD)
    # as draft_pool above: 158,875 tokens; SGLang's cell (target + draft) 135,168 B; the draft pool
    # (158,875 + 1) x 4,096 = 650,756,096 B, logged as the draft worker's own "KV Cache is allocated"
    assert (cap.tokens, cap.details.cell_bytes_per_token) == (158_875, 135_168)
    assert (cap.details.draft_layers, cap.details.draft_cell_bytes, cap.details.draft_pool_bytes) == \
        (1, 4_096, 650_756_096)
    # 650,756,096 / 2**30 = 0.606 GB, half K half V: 0.30 GB each
    assert cap.log_lines[-1] == ("KV Cache is allocated. dtype: torch.bfloat16, #tokens: 158875, K size: 0.30 GB, "
                                 "V size: 0.30 GB")
    assert _cap("llama-3.1-8b", speculative_algorithm="NGRAM").tokens == 163_840   # NGRAM: no draft pool


def test_nextn_reads_the_models_mtp_layers():
    # deepseek-v3 (one MTP layer) tp 8: cell 61 x 1,152 = 70,272 B + int(70,272 / 61) = 1,152 -> 71,424 B;
    # 20 GiB // 71,424 = 300,666 tokens (305,595 without); draft pool 300,667 x 1,152 = 346,368,384 B
    cap = kvmem.capacity("deepseek-v3", engine="sglang", kv_memory=20 * GIB, tp=8, speculative_algorithm="NEXTN",
                         speculative_num_steps=3, speculative_eagle_topk=1, speculative_num_draft_tokens=4)
    assert (cap.tokens, cap.details.draft_pool_bytes) == (300_666, 346_368_384)
    assert kvmem.capacity("deepseek-v3", engine="sglang", kv_memory=20 * GIB, tp=8).tokens == 305_595


def test_estimate_and_fit_count_the_draft():
    est = kvmem.estimate("llama-3.1-8b", engine="sglang", tokens=1000, batch=1, speculative_algorithm="EAGLE",
                         speculative_draft_model_path=EAGLE_HEAD)
    plain = kvmem.estimate("llama-3.1-8b", engine="sglang", tokens=1000, batch=1)
    # one more layer's rows: (1,000 + 1 padding) x 4,096 B
    assert len(est.per_layer) == 33 and est.total_bytes - plain.total_bytes == 1_001 * 4_096
    fit = kvmem.fit("deepseek-v3", gpu="h200-sxm-141gb", num_gpus=8, engine="sglang", context=32768,
                    speculative_algorithm="NEXTN")
    # the same KV budget, the draft's share of each token taken: 688,155 tokens (699,436 without)
    assert fit.capacity.tokens == fit.kv_memory_bytes // 71_424 == 688_155


def test_speculative_refusals_name_the_setting():
    with pytest.raises(ValueError, match="needs the model's MTP layers"):
        _cap("llama-3.1-8b", speculative_algorithm="EAGLE")
    with pytest.raises(ValueError, match="DFLASH"):
        _cap("llama-3.1-8b", speculative_algorithm="DFLASH")
    with pytest.raises(ValueError, match="without speculative_algorithm"):
        _cap("llama-3.1-8b", speculative_num_steps=3)
    with pytest.raises(ValueError, match="a separate draft model beside a Mamba hybrid target"):
        _cap("qwen3-next-80b-a3b", speculative_algorithm="EAGLE", speculative_draft_model_path=EAGLE_HEAD)
    with pytest.raises(ValueError, match="path-less draft as the target's MTP head only for"):
        _cap("kimi-linear-48b-a3b", speculative_algorithm="NEXTN")
    with pytest.raises(ValueError, match="asserts both unset"):
        _cap("qwen3-next-80b-a3b", speculative_algorithm="NEXTN", speculative_num_draft_tokens=4)
    with pytest.raises(ValueError, match="pp > 1"):
        kvmem.capacity("llama-3.1-8b", engine="sglang", kv_memory=20 * GIB, pp=2, speculative_algorithm="EAGLE",
                       speculative_draft_model_path=EAGLE_HEAD)


# the target's and the draft worker's lines as SGLang prints them for llama-3.1-8b with a one-layer EAGLE head:
# target (158,875 + 1) x 32 x 8 x 128 x 2 B = 10,412,097,536 B = 9.70 GB a side; draft 158,876 x 2,048 B = 0.30 GB
EAGLE_LOG = """[2026-05-01 10:00:00 TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 158875, K size: 9.70 GB, V size: 9.70 GB
[2026-05-01 10:00:05 TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 158875, K size: 0.30 GB, V size: 0.30 GB
"""


def test_check_log_reads_the_draft_pool_line():
    from kvmem.logcheck import check_log
    r = check_log(EAGLE_LOG, "llama-3.1-8b", engine="sglang", speculative_algorithm="EAGLE",
                  speculative_draft_model_path=EAGLE_HEAD)
    assert r.matches and [c.quantity for c in r.checks] == ["KV Cache is allocated", "draft KV pool"]
    three = check_log(EAGLE_LOG, "llama-3.1-8b", engine="sglang", speculative_algorithm="EAGLE",
                      speculative_draft_model_path={**EAGLE_HEAD, "num_hidden_layers": 3})
    assert not three.matches and "speculative_draft_model_path" in three.checks[-1].cause
    bare = check_log(EAGLE_LOG, "llama-3.1-8b", engine="sglang")
    assert any("speculative_algorithm" in note for note in bare.notes)


def test_speculative_decoding_admits_48_requests_unless_given():
    # SGLang's speculative hook sets max_running_requests to 48 when none is given
    cap = kvmem.capacity("deepseek-v3", engine="sglang", kv_memory=20 * GIB, tp=8, max_model_len=4096,
                         speculative_algorithm="NEXTN")
    assert cap.details.max_running_requests == 48
    given = kvmem.capacity("deepseek-v3", engine="sglang", kv_memory=20 * GIB, tp=8, max_model_len=4096,
                           speculative_algorithm="NEXTN", max_running_requests=100)
    assert given.details.max_running_requests == 100


def test_hybrid_swa_target_prices_the_draft_layers_in_its_cell():
    # gpt-oss-20b: 12 full + 12 sliding layers of 8 x (64 + 64) x 2 = 2,048 B; a one-layer full-attention EAGLE3 head
    # joins the full side: 2,048 x 13 + 0.8 x 2,048 x 12 = 46,284.8 B; 21,474,836,480 / 46,284.8 = 463,971 full
    # tokens (485,451 without), int(463,971 x 0.8) = 371,176 SWA (HybridSWAPoolConfigurator gives the same)
    head = {**EAGLE_HEAD, "hidden_size": 2880, "num_attention_heads": 64, "head_dim": 64}
    cap = _cap("gpt-oss-20b", speculative_algorithm="EAGLE3", speculative_draft_model_path=head)
    assert (cap.details.full_layer_tokens, cap.details.swa_layer_tokens) == (463_971, 371_176)
    assert _cap("gpt-oss-20b").details.full_layer_tokens == 485_451
    # the draft worker's own pool, from the head's config at the target's max_total_num_tokens (the full pool's):
    # (463,971 + 1) x 1 layer x 8 x (64 + 64) x 2 B = 950,214,656 B, its own "KV Cache is allocated" line last
    assert cap.details.draft_pool_bytes == 463_972 * 2048 == 950_214_656
    assert cap.log_lines[-1] == ("KV Cache is allocated. dtype: torch.bfloat16, #tokens: 463971, K size: 0.44 GB, "
                                 "V size: 0.44 GB")


def test_a_mamba_targets_own_mtp_head():
    # qwen3-next-80b-a3b tp 2, NEXTN, 30 GiB (SGLang's own numbers: tests/oracles/test_sglang_draft_oracle.py):
    # a request's state 36 x (4,096 x 3 x 2 B + 262,144 x 4 B) = 38,633,472 B; D = 4 verify states (auto: 3 steps,
    # topk 1); the joint solve int((30 GiB x 0.9 / 1.9 - 5 x 38,633,472) // (38,633,472 x (1 + 4 / 5))) = 216 slots;
    # min(48, 216 // 5) + 1 = 44 requests' verify states, 44 x 4 x 38,633,472 = 6,799,491,072 B
    cap = kvmem.capacity("qwen3-next-80b-a3b", engine="sglang", kv_memory=30 * GIB, tp=2,
                         speculative_algorithm="NEXTN")
    d = cap.details
    assert (d.max_mamba_cache_size, d.max_running_requests, d.mamba_verify_state_bytes) == (216, 43, 6_799_491_072)
    # the config names no num_nextn_predict_layers: no share of the cell (12 layers x 2 heads x 512 x 2 B = 12,288);
    # the MTP head's pool, one layer of 1,024 B a token at the target's 1,385,848 tokens + 1 padding
    assert (d.cell_bytes_per_token, cap.tokens, d.draft_cell_bytes) == (12_288, 1_385_848, 0)
    assert d.draft_pool_bytes == (1_385_848 + 1) * 1024 == 1_419_109_376
    e = kvmem.estimate("qwen3-next-80b-a3b", engine="sglang", tokens=1000, batch=2, tp=2,
                       speculative_algorithm="NEXTN")
    # 12 target layers + 1 draft layer, (2 x 1,000 + 1) rows of 1,024 B; the state kept 1 + 4 times
    assert e.kv_bytes == 13 * 2001 * 1024 and e.state_bytes == 2 * 5 * 38_633_472


def test_a_dsa_targets_mtp_layer_takes_its_latent_and_indexer():
    # deepseek-v3.2 tp 8, fp8, NEXTN (1 MTP layer), 20 GiB: the target's cell 61 x 656 B (the fp8 latent with scales and
    # a bf16 rope) + 61 x 132 B (indexer keys: 128 + 4 B scale) = 48,068; the draft's share int(61 x 656 x 1 / 61) +
    # 132 (its indexer on every draft layer) = 788: 48,856 B a token, 20 GiB // 48,856 floored to 64-token pages =
    # 439,552 tokens (SGLang's own configurator: tests/oracles/test_sglang_draft_oracle.py)
    cap = kvmem.capacity("deepseek-v3.2", engine="sglang", kv_memory=20 * GIB, tp=8, kv_dtype="fp8_e4m3",
                         speculative_algorithm="NEXTN")
    d = cap.details
    assert (d.cell_bytes_per_token, d.draft_cell_bytes, cap.tokens) == (48_856, 788, 439_552)
    # the draft worker's DSATokenToKVPool: (439,552 + 64) x 656 + ((439,552 + 64 + 1) // 64 x 64) x 132
    assert d.draft_pool_bytes == (439_552 + 64) * 656 + (439_552 + 65) // 64 * 64 * 132 == 346_417_408

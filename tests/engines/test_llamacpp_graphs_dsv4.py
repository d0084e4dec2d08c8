"""DeepSeek-V4 (deepseek4) laid out from a config (kvmem/engines/llamacpp/graphs_dsv4.py): the tensor list and bytes
llama.cpp 0c1e57098 loaded for the same GGUFs (tests/oracles/test_llamacpp_dsv4_oracle.py writes them at full shape,
runs llama-quantize's dry run over the converter's source and loads them with no_alloc), pinned."""

from __future__ import annotations

from collections import Counter

import pytest

import kvmem
from kvmem.engines.llamacpp.tensors import synthesised_tensors
from kvmem.model import Model

# (preset, file type) -> (tensors, llama_model_size, {type: count}) as llama.cpp loaded and llama-quantize typed them
LOADED = {("deepseek-v4-flash", "q4_k_m"): (1328, 151_627_664_796,
                                            {"F32": 535, "I32": 3, "MXFP4": 129, "Q4_K": 639, "Q6_K": 22}),
          ("deepseek-v4-flash", "q2_k"): (1328, 150_041_124_652,
                                          {"F32": 535, "I32": 3, "MXFP4": 129, "Q2_K": 617, "Q3_K": 43, "Q6_K": 1}),
          ("deepseek-v4-pro", "q4_k_m"): (1894, 837_454_187_276,
                                          {"F32": 762, "I32": 3, "MXFP4": 183, "Q4_K": 915, "Q6_K": 31}),
          ("deepseek-v4-pro", "q2_k"): (1894, 831_676_853_612,
                                        {"F32": 762, "I32": 3, "MXFP4": 183, "Q2_K": 884, "Q3_K": 61, "Q6_K": 1})}


@pytest.mark.parametrize("preset,fmt", sorted(LOADED))
def test_dsv4_layout_is_what_llamacpp_loaded(preset, fmt):
    tensors = synthesised_tensors(kvmem.get_model(preset), fmt)
    count, size, types = LOADED[preset, fmt]
    assert len(tensors) == count
    assert sum(t.nbytes for t in tensors) == size
    assert dict(Counter(t.dtype for t in tensors)) == types


def test_flash_tensors_by_hand():
    t = {x.name: x for x in synthesised_tensors(kvmem.get_model("deepseek-v4-flash"), "q4_k_m")}
    # the head's hyper-connection mix: hc_mult 4 x n_embd 4,096 = 16,384 wide, 4 out
    assert t["output_hc_fn.weight"].shape == (16384, 4)
    # the 3 hash layers' token -> expert table: top-6 x 129,280 tokens, int32 = 3,102,720 B, never quantised
    assert (t["blk.0.ffn_gate_tid2eid.weight"].dtype, t["blk.0.ffn_gate_tid2eid.weight"].nbytes) == ("I32", 3102720)
    assert "blk.2.ffn_gate_tid2eid.weight" in t and "blk.3.ffn_gate_tid2eid.weight" not in t
    assert "blk.3.exp_probs_b.bias" in t
    assert "blk.0.exp_probs_b.bias" not in t
    # layer 2 is ratio 4 (compressor 2 x 512 wide, the indexer), layer 3 ratio 128 (512 wide, no indexer), 0 none
    assert t["blk.2.attn_compressor_kv.weight"].shape == (4096, 1024) and "blk.2.indexer.proj.weight" in t
    assert t["blk.3.attn_compressor_kv.weight"].shape == (4096, 512) and "blk.3.indexer.proj.weight" not in t
    assert "blk.0.attn_compressor_kv.weight" not in t
    # the experts stay the converter's MXFP4: 2,048 x 4,096 x 256 values / 32 x 17 B = 1,140,850,688 B
    assert (t["blk.10.ffn_down_exps.weight"].dtype, t["blk.10.ffn_down_exps.weight"].nbytes) == ("MXFP4", 1140850688)
    # attn_output_a as the file holds it: 64 heads x 512 / 8 groups = 4,096 columns, 1,024 x 8 rows
    assert t["blk.2.attn_output_a.weight"].shape == (4096, 8192)


def test_a_config_without_a_converter_key_is_refused():
    cfg = dict(kvmem.get_model("deepseek-v4-flash").config)
    del cfg["o_groups"]
    with pytest.raises(ValueError, match="reads o_groups, which this config does not set"):
        synthesised_tensors(Model.from_hf_config(cfg, name="no-o-groups"), "q4_k_m")


def test_a_compress_ratio_llamacpp_does_not_load_is_refused():
    cfg = dict(kvmem.get_model("deepseek-v4-flash").config, num_hidden_layers=4, compress_ratios=[0, 4, 16, 128, 0])
    with pytest.raises(ValueError, match="ratio|ratios"):
        synthesised_tensors(Model.from_hf_config(cfg, name="ratio-16"), "q4_k_m")

"""MiniMax-M1 (minimax-01) laid out from a config (kvmem/engines/llamacpp/graphs_minimax01.py): the tensor list and
bytes llama.cpp 0c1e57098 loaded for the same GGUF (tests/oracles/test_llamacpp_minimax01_oracle.py writes it at full
shape, runs llama-quantize's dry run over the converter's source and loads it with no_alloc), pinned."""

from __future__ import annotations

from collections import Counter

import pytest

import kvmem
from kvmem.engines.llamacpp.tensors import synthesised_tensors
from kvmem.model import Model

# file type -> (tensors, llama_model_size, {type: count}) as llama.cpp loaded and llama-quantize typed them
LOADED = {"q4_k_m": (803, 276_945_692_672, {"F32": 311, "Q4_K": 411, "Q6_K": 81}),
          "q2_k": (803, 167_945_861_120, {"F32": 311, "Q2_K": 251, "Q3_K": 160, "Q4_K": 80, "Q6_K": 1})}


@pytest.mark.parametrize("fmt", sorted(LOADED))
def test_minimax_m1_layout_is_what_llamacpp_loaded(fmt):
    tensors = synthesised_tensors(kvmem.get_model("minimax-m1"), fmt)
    count, size, types = LOADED[fmt]
    assert len(tensors) == count
    assert sum(t.nbytes for t in tensors) == size
    assert dict(Counter(t.dtype for t in tensors)) == types


def test_minimax_m1_tensors_by_hand():
    t = {x.name: x for x in synthesised_tensors(kvmem.get_model("minimax-m1"), "q4_k_m")}
    # layer 0 is lightning attention: one attn_qkv of 3 x 64 heads x 128 = 24,576, the gate and its norm 8,192
    assert t["blk.0.attn_qkv.weight"].shape == (6144, 24576) and t["blk.0.attn_gate.weight"].shape == (6144, 8192)
    assert t["blk.0.attn_norm_2.weight"].shape == (8192,) and "blk.0.attn_q.weight" not in t
    # layer 7 ((7 + 1) % 8 == 0) is softmax attention: Q 8,192, K and V 8 KV heads x 128 = 1,024
    assert (t["blk.7.attn_q.weight"].shape, t["blk.7.attn_k.weight"].shape) == ((6144, 8192), (6144, 1024))
    assert "blk.7.attn_qkv.weight" not in t
    # 32 experts of 9,216 in every layer, no shared expert: 9,216 x 6,144 x 32 in Q6_K (210 B / 256) = 1,486,356,480 B
    assert t["blk.0.ffn_down_exps.weight"].nbytes == 1486356480 and not any("shexp" in name for name in t)
    # the quantiser counts a lightning layer's attn_qkv as attn_v (80 of them with the softmax layers' attn_v)
    assert t["blk.0.attn_qkv.weight"].dtype == "Q6_K"


def test_a_softmax_layer_off_llamacpps_pattern_is_refused():
    cfg = dict(kvmem.get_model("minimax-m1").config)
    cfg["attn_type_list"] = [1] + list(cfg["attn_type_list"][1:])     # layer 0 softmax: the GGUF cannot say so
    with pytest.raises(ValueError, match="layer 0"):
        synthesised_tensors(Model.from_hf_config(cfg, name="layer-0-softmax"), "q4_k_m")


# MiniMax-M3 (minimax-m3): file type -> (tensors, llama_model_size, {type: count}) as llama.cpp loaded and typed them
LOADED_M3 = {"q4_k_m": (1176, 257_998_499_328, {"F32": 583, "Q4_K": 505, "Q6_K": 88}),
             "q2_k": (1176, 155_903_098_368, {"F32": 583, "Q2_K": 355, "Q3_K": 177, "Q4_K": 60, "Q6_K": 1})}


@pytest.mark.parametrize("fmt", sorted(LOADED_M3))
def test_minimax_m3_layout_is_what_llamacpp_loaded(fmt):
    tensors = synthesised_tensors(kvmem.get_model("minimax-m3"), fmt)
    count, size, types = LOADED_M3[fmt]
    assert len(tensors) == count
    assert sum(t.nbytes for t in tensors) == size
    assert dict(Counter(t.dtype for t in tensors)) == types


def test_minimax_m3_tensors_by_hand():
    t = {x.name: x for x in synthesised_tensors(kvmem.get_model("minimax-m3"), "q4_k_m")}
    # moe_layer_freq starts 0, 0, 0: three dense layers of dense_intermediate_size 12,288, no indexer
    assert t["blk.2.ffn_gate.weight"].shape == (6144, 12288) and "blk.2.indexer.q_proj.weight" not in t
    # then the MSA indexer: 4 heads x 128 and one 128 key, kept F32 (12,582,912 and 3,145,728 B)
    assert (t["blk.3.indexer.q_proj.weight"].dtype, t["blk.3.indexer.q_proj.weight"].nbytes) == ("F32", 12582912)
    assert t["blk.3.indexer.k_proj.weight"].nbytes == 6144 * 128 * 4
    # one shared expert of intermediate_size 3,072; q/k norms of one head (128)
    assert t["blk.3.ffn_up_shexp.weight"].shape == (6144, 3072) and t["blk.3.attn_q_norm.weight"].shape == (128,)


def test_minimax_m3_norms_llamacpp_does_not_load_are_refused():
    cfg = dict(kvmem.get_model("minimax-m3").config)
    cfg["text_config"] = dict(cfg["text_config"], qk_norm_type="per_layer")
    with pytest.raises(ValueError, match="qk_norm_type 'per_layer'"):
        synthesised_tensors(Model.from_hf_config(cfg, name="m3-per-layer-norm"), "q4_k_m")


# the compute graph (graphs_minimax01.build_minimax01): seed -> llama.cpp's "CPU compute buffer size" to four decimals
# for kvmem.oracles.llamacpp_minimax01.random_minimax01_case(seed) (tests/oracles/test_llamacpp_minimax01_oracle.py
# loads them; seeds 0-99 all equal, 1-3 sequences, the third reserve of one sequence among them)
PRINTED = {0: "0.4050", 1: "2.1157", 2: "7.4760", 3: "0.9169", 4: "1.8976", 5: "2.0495", 6: "1.3106", 7: "0.7264",
           8: "2.8668", 9: "3.3114", 10: "2.2647", 11: "0.2497"}


def _compute(model, ctx):
    from kvmem.engines.llamacpp.compute import llamacpp_compute_buffer
    est = kvmem.estimate(model, engine="llama.cpp", tokens=1, n_ctx=ctx["n_ctx"], n_seq=ctx["n_seq"],
                         flash_attn=bool(ctx["flash_attn"]), n_ubatch=ctx["n_ubatch"], n_batch=ctx["n_ctx"],
                         swa_full=False)
    d = est.details
    return llamacpp_compute_buffer(model, n_ctx=d.n_ctx, n_ubatch=d.n_ubatch, cells_per_stream=d.cells,
                                   flash_attn=bool(ctx["flash_attn"]), type_k="f16", type_v="f16", n_outputs=d.n_batch,
                                   n_seq=ctx["n_seq"], kv_unified=False, swa_cells=d.swa_cells, backend="cpu")


@pytest.mark.parametrize("seed", sorted(PRINTED))
def test_random_minimax01_compute_is_llamacpps(seed):
    from kvmem.oracles.llamacpp_minimax01 import random_minimax01_case
    model, ctx = random_minimax01_case(seed, dict(kvmem.get_model("minimax-m1").config))
    compute = _compute(model, ctx)
    assert compute.exact and f"{compute.bytes / 1048576.0:.4f}" == PRINTED[seed]


@pytest.mark.parametrize("n_ctx,n_ubatch,fa,mib", [(4096, 512, 1, 414.75), (32768, 512, 1, 414.75),
                                                   (8192, 128, 0, 280.10)])
def test_minimax_m1_compute_at_full_shape_is_llamacpps(n_ctx, n_ubatch, fa, mib):
    # llama.cpp's printed CPU compute buffer for MiniMax-M1 itself (no_alloc); the estimate said 402.75 / 272.00 MiB
    compute = _compute(kvmem.get_model("minimax-m1"), dict(n_ctx=n_ctx, n_ubatch=n_ubatch, flash_attn=fa, n_seq=1))
    assert compute.exact and round(compute.bytes / 1048576.0, 2) == mib


def _cut(n_layers):
    from kvmem.oracles.llamacpp_minimax01 import random_minimax01_case
    model, ctx = random_minimax01_case(12, dict(kvmem.get_model("minimax-m1").config))
    cfg = dict(model.config, num_hidden_layers=n_layers, attn_type_list=[int((i + 1) % 8 == 0) for i in range(n_layers)])
    return Model.from_hf_config(cfg, name=f"minimax01-{n_layers}"), ctx


# (layers, sequences, -ub, --kv-unified) -> llama.cpp's CPU compute MiB to four decimals (n_ctx 1000): the third
# reserve's one sequence of 32 or 33 tokens over a unified cache, or softmax attention in the last layer alone
EDGES = {(8, 3, 32, False): "0.4283", (8, 3, 32, True): "0.4605", (8, 2, 33, True): "0.4417",
         (9, 3, 32, True): "0.4605", (9, 2, 33, True): "0.4417"}


@pytest.mark.parametrize("case", sorted(EDGES))
def test_minimax01_one_sequence_reserve_is_llamacpps(case):
    n_layers, n_seq, n_ubatch, unified = case
    model, ctx = _cut(n_layers)
    est = kvmem.estimate(model, engine="llama.cpp", tokens=1, n_ctx=1000, n_seq=n_seq, flash_attn=bool(ctx["flash_attn"]),
                         n_ubatch=n_ubatch, n_batch=1000, swa_full=False, kv_unified=unified)
    d = est.details
    from kvmem.engines.llamacpp.compute import llamacpp_compute_buffer
    compute = llamacpp_compute_buffer(model, n_ctx=d.n_ctx, n_ubatch=d.n_ubatch, cells_per_stream=d.cells,
                                      flash_attn=bool(ctx["flash_attn"]), type_k="f16", type_v="f16",
                                      n_outputs=d.n_batch, n_seq=n_seq, kv_unified=unified, swa_cells=d.swa_cells,
                                      backend="cpu")
    assert f"{compute.bytes / 1048576.0:.4f}" == EDGES[case]


def test_where_llamacpp_aborts_minimax01_is_refused():
    # 9 layers (softmax at layer 7), 3 sequences with a KV stream each, -ub 32: llama.cpp aborts creating the context
    model, _ = _cut(9)
    with pytest.raises(ValueError, match=r"n_ubatch 32 over 3 sequences .* give -ub a multiple of 3, or --kv-unified"):
        kvmem.estimate(model, engine="llama.cpp", tokens=1, n_ctx=1000, n_seq=3, n_ubatch=32, n_batch=1000)

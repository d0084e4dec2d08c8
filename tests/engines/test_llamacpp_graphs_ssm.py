"""kvmem's Mamba hybrids for llama.cpp (kvmem/engines/llamacpp/tensors_ssm.py, graphs_ssm.py): jamba, nemotron_h and
nemotron_h_moe laid out from a config and graphed. The numbers are what llama.cpp 0c1e57098 (llama-cpp-python 0.3.36)
printed for sparse GGUFs of these layouts (tests/oracles/test_llamacpp_ssm_oracle.py runs it again)."""

from __future__ import annotations

import random

import pytest

import kvmem
from kvmem.engines.llamacpp.compute import compute_buffer, graph_bytes, graph_shape, llamacpp_compute_buffer
from kvmem.engines.llamacpp.placement import buffer_mib
from kvmem.engines.llamacpp.tensors import synthesised_tensors
from kvmem.engines.llamacpp.tensors_ssm import layer_kinds, nemotron_arch, ssm_shape
from kvmem.model import Model
from kvmem.oracles.llamacpp_ssm import random_ssm_case

# llama_model_size of the q4_k_m GGUF written from kvmem's list, as llama.cpp loaded it (no_alloc)
SIZES = {"jamba-1.5-mini": 31_161_236_992, "nemotron-h-8b": 4_975_480_832, "nemotron-3-nano-30b-a3b": 24_507_234_048}
# llama.cpp's printed "CPU compute buffer size" (MiB) at (n_ctx, n_ubatch, flash attention), one sequence
COMPUTE = {"jamba-1.5-mini": (196.08, 2148.01, 1280.31), "nemotron-h-8b": (284.01, 2156.01, 1120.01),
           "nemotron-3-nano-30b-a3b": (281.01, 2136.76, 1108.01)}
RUNS = ((4096, 512, True), (32768, 512, False), (131072, 2048, True))


@pytest.mark.parametrize("name", sorted(SIZES))
def test_preset_layout_is_llamacpps_model_size(name):
    assert sum(t.nbytes for t in synthesised_tensors(kvmem.get_model(name), "q4_k_m")) == SIZES[name]


def test_the_architecture_follows_the_converter():
    # conversion/nemotron.py#L219-L226: nemotron_h_moe where the config has num_experts_per_tok
    assert nemotron_arch(kvmem.get_model("nemotron-h-8b")) == "nemotron_h"
    assert nemotron_arch(kvmem.get_model("nemotron-3-nano-30b-a3b")) == "nemotron_h_moe"
    assert graph_shape(kvmem.get_model("nemotron-3-nano-30b-a3b")).arch == "nemotron_h_moe"


def test_jamba_layers_and_mamba1_tensors():
    model = kvmem.get_model("jamba-1.5-mini")
    s = ssm_shape(model)
    # attention where (il - 4) % 8 == 0, experts where (il - 1) % 2 == 0 (conversion/jamba.py#L38-L40, #L63-L68)
    assert [il for il, k in enumerate(layer_kinds(s)) if k == "*"] == [4, 12, 20, 28]
    assert [il for il, m in enumerate(s.moe_layers) if m] == list(range(1, 32, 2))
    t = {x.name: x for x in synthesised_tensors(model, "q4_k_m")}
    # d_inner 2 x 4096, dt_rank 256, d_state 16: ssm_x [d_inner, dt_rank + 2 d_state], ssm_a [d_state, d_inner] F32
    assert t["blk.0.ssm_x.weight"].shape == (8192, 288) and t["blk.0.ssm_dt.weight"].shape == (256, 8192)
    assert (t["blk.0.ssm_a"].shape, t["blk.0.ssm_a"].dtype) == ((16, 8192), "F32")
    assert t["blk.0.ssm_conv1d.weight"].dtype == "F32"      # never quantised (llama-quant.cpp ssm_conv1d)
    assert t["blk.1.ffn_gate_exps.weight"].shape == (4096, 14336, 16) and "blk.0.ffn_gate.weight" in t
    # Q2_K's attn_v rule reads n_gqa() of layer 0, a Mamba layer here (head_count_kv 0): Q3_K, not the Q4_K of
    # 32 / 8 heads (llama-quant.cpp#L569; llama.cpp's own quantiser agrees: the oracle's dry run)
    assert {x.name: x.dtype for x in synthesised_tensors(model, "q2_k")}["blk.4.attn_v.weight"] == "Q3_K"


def test_nemotron_tensors():
    nano = {t.name: t for t in synthesised_tensors(kvmem.get_model("nemotron-3-nano-30b-a3b"), "q4_k_m")}
    # d_inner 64 x 64, 8 groups of 128 states, 64 heads: ssm_in 2 x 4096 + 2 x 8 x 128 + 64 = 10304 wide
    assert nano["blk.0.ssm_in.weight"].shape == (2688, 10304)
    assert nano["blk.0.ssm_norm.weight"].shape == (512, 8) and nano["blk.0.ssm_a"].shape == (1, 64)
    assert nano["blk.1.ffn_up_exps.weight"].shape == (2688, 1856, 128) and "blk.1.ffn_gate_exps.weight" not in nano
    assert nano["blk.1.ffn_up_shexp.weight"].shape == (2688, 3712) and nano["blk.1.exp_probs_b.bias"].shape == (128,)
    assert len(nano) == 401
    dense = {t.name: t for t in synthesised_tensors(kvmem.get_model("nemotron-h-8b"), "q4_k_m")}
    assert dense["blk.1.ffn_up.weight"].shape == (4096, 21504) and "blk.1.ffn_gate.weight" not in dense
    assert dense["blk.7.attn_q.weight"].shape == (4096, 4096) and len(dense) == 311


@pytest.mark.parametrize("name", sorted(COMPUTE))
def test_full_shape_compute_buffers_are_llamacpps(name):
    model = kvmem.get_model(name)
    for (n_ctx, n_ubatch, fa), printed in zip(RUNS, COMPUTE[name], strict=True):
        d = kvmem.estimate(model, engine="llama.cpp", tokens=1, n_ctx=n_ctx, flash_attn=fa, n_ubatch=n_ubatch,
                           n_batch=n_ctx).details
        assert buffer_mib(graph_bytes(graph_shape(model), n_kv=d.cells, n_ubatch=n_ubatch, flash_attn=fa)) == printed


@pytest.mark.parametrize("kind, seed, n_rs, printed", [
    # the oracle's random cases (kvmem.oracles.llamacpp_ssm): compute buffer bytes without and with rollback slots
    ("nemotron_h", 0, 0, 990_624), ("nemotron_h", 0, 6, 3_349_920),
    ("nemotron_h_moe", 0, 0, 400_032), ("nemotron_h_moe", 0, 6, 1_186_464),
    ("jamba", 1, 0, 754_208), ("jamba", 1, 1, 754_208),     # jamba has no rollback: llama.cpp clamps n_rs_seq to 0
])
def test_rollback_slots_widen_the_mamba2_graph(kind, seed, n_rs, printed):
    model, _fmt, ctx = random_ssm_case(seed, kind)
    if n_rs:
        assert n_rs == random.Random(f"rs/{kind}/{seed}").randint(1, 6)
        ctx = dict(ctx, n_ubatch=max(ctx["n_ubatch"], n_rs + 2))
    d = kvmem.estimate(model, engine="llama.cpp", tokens=1, n_ctx=ctx["n_ctx"], n_seq=ctx["n_seq"],
                       kv_unified=ctx["kv_unified"], type_k=ctx["type_k"], type_v=ctx["type_v"],
                       flash_attn=bool(ctx["flash_attn"]), n_ubatch=ctx["n_ubatch"], n_batch=ctx["n_ctx"],
                       n_rs_seq=n_rs).details
    got = llamacpp_compute_buffer(model, n_ctx=d.n_ctx, n_ubatch=d.n_ubatch, cells_per_stream=d.cells,
                                  flash_attn=bool(ctx["flash_attn"]), type_k=ctx["type_k"], type_v=ctx["type_v"],
                                  n_outputs=d.n_batch, n_seq=ctx["n_seq"], kv_unified=ctx["kv_unified"], backend="cpu",
                                  n_rs_seq=n_rs)
    assert got.exact and got.bytes == printed


def _variant(name: str, **changes) -> Model:
    cfg = dict(kvmem.get_model(name).config)
    cfg.update(changes)
    return Model.from_hf_config({k: v for k, v in cfg.items() if v is not None}, name=f"{name}-variant")


@pytest.mark.parametrize("name, changes, message", [
    ("jamba-1.5-mini", {"mamba_expand": 4}, "expansion factor of 2"),
    ("jamba-1.5-mini", {"mamba_proj_bias": True}, "mamba_proj_bias"),
    ("nemotron-3-nano-30b-a3b", {"num_nextn_predict_layers": 2}, "num_nextn_predict_layers == 1"),
    ("nemotron-3-nano-30b-a3b", {"moe_intermediate_size": None}, "'moe_intermediate_size'"),
    ("nemotron-h-8b", {"use_conv_bias": False}, "use_conv_bias"),
    # fields the converter reads with no default: named, never guessed
    ("jamba-1.5-mini", {"expert_layer_period": None}, "'expert_layer_period'"),
    ("jamba-1.5-mini", {"attn_layer_offset": None}, "'attn_layer_offset'"),
    ("jamba-1.5-mini", {"num_experts_per_tok": 32}, "n_expert_used <= n_expert"),
    # nemotron-h.cpp#L18 requires layer_norm_epsilon (rms_norm_eps does not stand in for it)
    ("nemotron-h-8b", {"layer_norm_epsilon": None}, "'layer_norm_epsilon'"),
])
def test_configs_llamacpp_does_not_load_are_refused_by_name(name, changes, message):
    model = _variant(name, **changes)
    with pytest.raises(ValueError, match=message):
        synthesised_tensors(model, "q4_k_m")
    assert graph_shape(model) is None
    assert not compute_buffer(model, n_kv=4096, n_ubatch=512, flash_attn=True).exact


def test_nemotron_3_super_with_its_mtp_block():
    # the published config (tests/fixtures/configs/corpus): 88 layers, latent MoE (1,024), one MTP block, which the
    # default converter writes from PR #26725 (2026-08-10) and llama.cpp skips at load: counted, not listed
    import json
    import pathlib

    from kvmem.engines.llamacpp.nextn import gguf_nextn_layers
    path = pathlib.Path(__file__).parents[1] / "fixtures/configs/corpus/nvidia--NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4.json"
    model = Model.from_hf_config(json.loads(path.read_text()), name="nemotron-3-super")
    assert (gguf_nextn_layers(model), gguf_nextn_layers(model, "2026-08-09")) == (1, 0)
    tensors = synthesised_tensors(model, "q4_k_m")
    assert not any(t.name.startswith("blk.88.") for t in tensors)
    assert {t.name: t.shape for t in tensors}["blk.1.ffn_latent_down.weight"] == (4096, 1024)
    # llama.cpp's printed CPU compute buffer (its sparse GGUF with the MTP block, no_alloc): 292.01 MiB at 4,096 cells
    # (flash attention), 2,145.01 MiB at 32,768 (without)
    for (n_ctx, fa), printed in (((4096, True), 292.01), ((32768, False), 2145.01)):
        d = kvmem.estimate(model, engine="llama.cpp", tokens=1, n_ctx=n_ctx, flash_attn=fa, n_ubatch=512,
                           n_batch=n_ctx).details
        assert buffer_mib(graph_bytes(graph_shape(model), n_kv=d.cells, n_ubatch=512, flash_attn=fa)) == printed

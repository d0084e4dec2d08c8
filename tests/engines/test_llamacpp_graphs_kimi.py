"""kimi-linear and kimi-k3 laid out from a config, and kimi-linear's compute graph (kvmem/engines/llamacpp/tensors_kimi.py,
graphs_kimi.py): what llama.cpp 0c1e57098 printed for the same GGUFs (tests/oracles/test_llamacpp_kimi_oracle.py writes
and loads them; kvmem.oracles.llamacpp_kimi draws the random cases), pinned."""

from __future__ import annotations

import pytest

import kvmem
from kvmem.engines.llamacpp.compute import graph_bytes, graph_shape, llamacpp_compute_buffer
from kvmem.engines.llamacpp.placement import buffer_mib
from kvmem.engines.llamacpp.tensors import synthesised_tensors
from kvmem.model import Model
from kvmem.oracles.llamacpp_kimi import random_k3_case, random_kimi_case, small_k3

# seed -> llama.cpp's "CPU compute buffer size" to four decimals and its KV + RS buffers (MiB); seeds 2 (2 sequences),
# 7 (3, n_ubatch 32: the prompt rounded to 33, then reserved again with one sequence), 8 and 41 (3, unified)
PRINTED = {0: ("0.4074", 0.28 + 0.02), 2: ("3.0236", 2.81 + 0.43), 3: ("9.5078", 0.38 + 0.14),
           7: ("2.4368", 1.41 + 0.43), 8: ("21.2296", 18.0 + 0.22), 10: ("15.5078", 1.58 + 0.4),
           41: ("0.8278", 0.28 + 2.01), 43: ("8.7049", 27.0 + 0.79)}


@pytest.mark.parametrize("seed", sorted(PRINTED))
def test_random_kimi_linear_buffers_are_llamacpps(seed):
    model, _fmt, ctx = random_kimi_case(seed)
    est = kvmem.estimate(model, engine="llama.cpp", tokens=1, n_ctx=ctx["n_ctx"], n_seq=ctx["n_seq"],
                         kv_unified=ctx["kv_unified"], type_k=ctx["type_k"], type_v=ctx["type_v"],
                         flash_attn=bool(ctx["flash_attn"]), n_ubatch=ctx["n_ubatch"], n_batch=ctx["n_ctx"])
    d = est.details
    compute = llamacpp_compute_buffer(model, n_ctx=d.n_ctx, n_ubatch=d.n_ubatch, cells_per_stream=d.cells,
                                      flash_attn=bool(ctx["flash_attn"]), type_k=ctx["type_k"], type_v=ctx["type_v"],
                                      n_outputs=d.n_batch, n_seq=ctx["n_seq"], kv_unified=ctx["kv_unified"],
                                      backend="cpu")
    assert compute.exact
    assert (f"{compute.bytes / 2**20:.4f}", buffer_mib(est.total_bytes)) == pytest.approx(PRINTED[seed], abs=0.011)


def test_kimi_linear_48b_at_full_shape_is_llamacpps():
    model = kvmem.get_model("kimi-linear-48b-a3b")
    tensors = synthesised_tensors(model, "q4_k_m")
    # llama_model_size of the q4_k_m GGUF llama.cpp loaded (no_alloc): 27 layers, 20 KDA, 7 MLA
    assert sum(t.nbytes for t in tensors) == 29_695_810_048
    assert len([t for t in tensors if t.name.endswith("ssm_conv1d_q.weight")]) == 20
    # blk.3 (an MLA layer): attn_k_b's 128 columns take Q4_K's fallback Q5_0 (llama-quant.cpp tensor_type_fallback)
    assert {t.name: (t.shape, t.dtype) for t in tensors if t.name.startswith("blk.3.attn")} == {
        "blk.3.attn_norm.weight": ((2304,), "F32"), "blk.3.attn_kv_a_norm.weight": ((512,), "F32"),
        "blk.3.attn_q.weight": ((2304, 6144), "Q4_K"), "blk.3.attn_kv_a_mqa.weight": ((2304, 576), "Q4_K"),
        "blk.3.attn_k_b.weight": ((128, 512, 32), "Q5_0"), "blk.3.attn_v_b.weight": ((512, 128, 32), "Q4_K"),
        "blk.3.attn_output.weight": ((4096, 2304), "Q4_K")}
    assert {t.name: t.dtype for t in tensors if t.name.startswith("blk.0.ssm_conv1d")} == dict.fromkeys(
        ("blk.0.ssm_conv1d_q.weight", "blk.0.ssm_conv1d_k.weight", "blk.0.ssm_conv1d_v.weight"), "F32")
    shape = graph_shape(model)
    # llama.cpp's printed CPU compute buffers (MiB) at n_ctx / n_ubatch / flash attention
    for (n_ctx, n_ubatch, fa), mib in {(4096, 512, True): 342.01, (32768, 512, False): 2210.01,
                                       (131072, 2048, True): 1676.01}.items():
        assert buffer_mib(graph_bytes(shape, n_kv=n_ctx, n_ubatch=n_ubatch, flash_attn=fa)) == mib
    # KV: 7 MLA layers x 576 x f16 a cell (31.50 MiB at 4,096 cells) + RS: 20 KDA layers x (3 x 3 x 4,096 conv +
    # 128 x 128 x 32 state) x f32 = 44,892,160 B
    est = kvmem.estimate(model, engine="llama.cpp", tokens=1, n_ctx=4096, n_batch=4096)
    assert est.total_bytes == 4096 * 576 * 2 * 7 + 20 * (3 * 3 * 4096 + 128 * 128 * 32) * 4 == 77_922_304


def test_a_quantised_v_cache_over_head_dim_72_is_refused_as_llamacpp_does():
    # value_length is the config's head_dim 72 (conversion/base.py): llama_init_from_model checks it on every layer
    with pytest.raises(ValueError, match="V cache type q8_0 with block size 32 does not divide n_embd_head_v=72"):
        kvmem.estimate("kimi-linear-48b-a3b", engine="llama.cpp", tokens=1, n_ctx=4096, type_k="q8_0",
                       type_v="q8_0", flash_attn=True)


def test_a_context_llamacpp_aborts_on_is_refused():
    # llama.cpp run here: Kimi-Linear-48B-A3B, 3 sequences, a KV stream each, -ub 512 aborts (GGML_ASSERT ggml_can_repeat);
    # -ub 510 and --kv-unified build (340.0078 / 338.1817 / 342.0333 MiB of compute at 2 / 3 / 3 sequences)
    opts = dict(engine="llama.cpp", tokens=1, n_ctx=4096, n_batch=4096)
    with pytest.raises(ValueError, match="give -ub a multiple of 3, or --kv-unified"):
        kvmem.estimate("kimi-linear-48b-a3b", n_seq=3, n_ubatch=512, **opts)
    for n_seq, n_ubatch, unified in ((2, 512, False), (3, 510, False), (3, 512, True)):
        assert kvmem.estimate("kimi-linear-48b-a3b", n_seq=n_seq, n_ubatch=n_ubatch, kv_unified=unified, **opts)


def _changed(name: str, **change) -> Model:
    cfg = dict(kvmem.get_model(name).config)
    if "text_config" in cfg:
        cfg["text_config"] = dict(cfg["text_config"], **change)
    else:
        cfg.update(change)
    return Model.from_hf_config(cfg, name=f"{name}-changed")


def test_configs_llamacpp_does_not_load_or_kvmem_cannot_read_are_refused_by_name():
    with pytest.raises(ValueError, match="reads no q_lora_rank"):
        synthesised_tensors(_changed("kimi-linear-48b-a3b", q_lora_rank=1536), "q4_k_m")
    with pytest.raises(ValueError, match="'attn_res_block_size' is missing"):
        synthesised_tensors(_changed("kimi-k3", attn_res_block_size=None), "q4_k_m")
    with pytest.raises(ValueError, match="'activation_situ_beta'"):
        synthesised_tensors(_changed("kimi-k3", activation_situ_beta=None), "q4_k_m")


# kimi-k3 seed -> llama.cpp's compute buffer and KV + RS (MiB): seeds 4 (3 sequences, n_rs_seq 1), 7, 11 (n_rs_seq 3),
# 21 (unified, n_rs_seq 3), 29 (3 sequences unified, q5_1)
PRINTED_K3 = {0: ("5.0786", 7.71), 4: ("2.6985", 3.22), 7: ("22.5431", 17.52), 11: ("23.0078", 2.97),
              21: ("4.0323", 5.2), 29: ("0.8385", 1.42)}


@pytest.mark.parametrize("seed", sorted(PRINTED_K3))
def test_random_kimi_k3_buffers_are_llamacpps(seed):
    model, _fmt, ctx = random_k3_case(seed)
    est = kvmem.estimate(model, engine="llama.cpp", tokens=1, n_ctx=ctx["n_ctx"], n_seq=ctx["n_seq"],
                         kv_unified=ctx["kv_unified"], type_k=ctx["type_k"], type_v=ctx["type_v"],
                         flash_attn=bool(ctx["flash_attn"]), n_ubatch=ctx["n_ubatch"], n_batch=ctx["n_ctx"],
                         n_rs_seq=ctx["n_rs_seq"])
    d = est.details
    compute = llamacpp_compute_buffer(model, n_ctx=d.n_ctx, n_ubatch=d.n_ubatch, cells_per_stream=d.cells,
                                      flash_attn=bool(ctx["flash_attn"]), type_k=ctx["type_k"], type_v=ctx["type_v"],
                                      n_outputs=d.n_batch, n_seq=ctx["n_seq"], kv_unified=ctx["kv_unified"],
                                      backend="cpu", n_rs_seq=ctx["n_rs_seq"])
    assert compute.exact
    assert (f"{compute.bytes / 2**20:.4f}", buffer_mib(est.total_bytes)) == pytest.approx(PRINTED_K3[seed], abs=0.011)


def test_kimi_k3_is_laid_out_and_graphed():
    model = small_k3()
    tensors = synthesised_tensors(model, "q4_k_m")
    # llama_model_size of that file in llama.cpp's kimi-k3 loader; the checkpoint's MXFP4 experts kept
    assert sum(t.nbytes for t in tensors) == 7_659_232
    assert {t.dtype for t in tensors if "_exps." in t.name} == {"MXFP4"}
    assert {t.name for t in tensors if "res_score" in t.name} >= {"output_res_score.weight", "blk.0.attn_res_score.weight"}
    est = kvmem.estimate(model, engine="llama.cpp", tokens=1, n_ctx=4096, n_ubatch=512, n_batch=4096, flash_attn=True)
    assert buffer_mib(est.total_bytes) == pytest.approx(3.0 + 0.12, abs=0.011)       # llama.cpp's KV and RS lines
    # llama.cpp's CPU compute buffer at 4,096 cells, n_ubatch 512, flash attention
    compute = llamacpp_compute_buffer(model, n_ctx=4096, n_ubatch=512, n_outputs=4096, backend="cpu")
    assert compute.exact and f"{compute.bytes / 2**20:.4f}" == "12.2578"


def test_kimi_k3_keeps_rollback_snapshots_as_llamacpp_does():
    # llm_arch_supports_rs_rollback lists kimi-k3 (rs_seq.kept_rs_seq reads the KimiK3 config's own model_type): the
    # recurrent memory holds n_seq x (n_rs_seq + 1) rows; llama.cpp printed RS 0.36 MiB (n_rs_seq 2) and 0.96 MiB (2
    # sequences, n_rs_seq 3) beside the 3.00 MiB KV buffer (0.12 MiB a row: was taken as 0.12 / 0.24, clamped to 0)
    model = small_k3()
    for n_seq, n_rs_seq, mib in ((1, 2, 3.0 + 0.36), (2, 3, 3.0 + 0.96)):
        est = kvmem.estimate(model, engine="llama.cpp", tokens=1, n_ctx=4096, flash_attn=True, n_ubatch=512,
                             n_batch=4096, n_seq=n_seq, n_rs_seq=n_rs_seq)
        assert buffer_mib(est.total_bytes) == pytest.approx(mib, abs=0.011)


def test_kimi_k3_at_full_shape_is_llamacpps():
    # llama_model_size of the q4_k_m file llama.cpp's kimi-k3 loader took (no_alloc), and its CPU compute buffers
    model = kvmem.get_model("kimi-k3")
    assert sum(t.nbytes for t in synthesised_tensors(model, "q4_k_m")) == 1_482_134_159_744
    shape = graph_shape(model)
    for (n_ctx, fa), mib in {(4096, True): 518.03, (32768, False): 6702.03}.items():
        assert buffer_mib(graph_bytes(shape, n_kv=n_ctx, n_ubatch=512, flash_attn=fa)) == mib
    # KV: 24 MLA layers x 576 x f16 (108.00 MiB at 4,096 cells) + RS: 69 KDA layers x (3 x 3 x 12,288 + 128 x 128 x 96)
    # x f32
    est = kvmem.estimate(model, engine="llama.cpp", tokens=1, n_ctx=4096, n_batch=4096)
    assert est.total_bytes == 4096 * 576 * 2 * 24 + 69 * (3 * 3 * 12288 + 128 * 128 * 96) * 4

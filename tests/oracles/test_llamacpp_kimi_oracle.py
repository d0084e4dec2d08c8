"""kvmem's kimi-linear layout and compute graph (kvmem/engines/llamacpp/tensors_kimi.py, graphs_kimi.py) against
llama.cpp 0c1e57098 itself (llama-cpp-python 0.3.36, CPU-only), on sparse GGUFs written from kvmem's tensor list with
the metadata conversion/kimi_linear.py writes (kvmem.oracles.llamacpp_kimi):
1. the quantiser: llama_model_quantize --dry-run of the converter's F16 source gives every tensor kvmem's type
   (Kimi-Linear-48B-A3B, Q4_K_M and Q2_K);
2. the loader: the preset at full shape loads with no_alloc (every tensor kimi-linear.cpp load_arch_tensors asks
   for, no other) and llama_model_size is kvmem's sum; its compute buffer at three contexts is kvmem's;
3. KV, RS and compute: random kimi-linear configs with a context each (1-3 sequences, unified or not, every cache
   type -ctk takes): the printed CPU KV and RS lines and the CPU compute buffer equal kvmem's (compute to the four
   decimals); a quantised V cache over the config's head_dim 72 refused by both, with llama.cpp's words;
4. kimi-k3: Kimi-K3's config at a small size loads with kvmem's tensors (its MXFP4 experts kept), and random kimi-k3
   configs (banking period, latent, gates, 0-3 rollback snapshots) print kvmem's KV, RS and compute buffers.
llama.cpp 0c1e57098 itself aborts creating seed 4's context (GGML_ASSERT ggml_can_repeat: 3 streams, n_ubatch 32, MLA
layers before the last), and kvmem refuses it (tensors_kimi.check_kimi_streams); seeds 25, 30, 32, 33, 38 and 54 of
24-63 abort alike and are refused; seeds 24-63 otherwise, run once by a script: 34 of 34 equal; kimi-k3 seeds 6-47 by
the same script: 42 of 42."""

from tests.oracles.conftest import require

require("llama_cpp")

import pytest  # noqa: E402

import kvmem  # noqa: E402
from kvmem.engines.llamacpp.compute import graph_bytes, graph_shape, llamacpp_compute_buffer  # noqa: E402
from kvmem.engines.llamacpp.placement import buffer_mib  # noqa: E402
from kvmem.oracles.llamacpp_buffers import in_child  # noqa: E402
from kvmem.oracles.llamacpp_kimi import printed_kimi, random_k3_case, random_kimi_case, write_kimi  # noqa: E402
from kvmem.oracles.llamacpp_presets import load  # noqa: E402
from tests.oracles.test_llamacpp_layout_families_oracle import _dry_runs, _load  # noqa: E402

PRESET = "kimi-linear-48b-a3b"
SEEDS = list(range(24))


def test_kimi_linear_types_and_size_equal_llamacpp(tmp_path):
    model = kvmem.get_model(PRESET)
    source, path = str(tmp_path / "source.gguf"), str(tmp_path / "model.gguf")
    write_kimi(model, "f16", source, source=True)
    theirs = in_child(_dry_runs, source, ["q4_k_m", "q2_k"])
    for fmt in ("q4_k_m", "q2_k"):
        tensors = write_kimi(model, fmt, path)
        assert {t.name: t.dtype for t in tensors} == theirs[fmt], fmt
        out = in_child(_load, path, True)
        assert out["size"] == sum(t.nbytes for t in tensors)


@pytest.mark.parametrize("seed", SEEDS)
def test_kimi_linear_kv_rs_and_compute_equal_llamacpp(seed, tmp_path):
    model, fmt, ctx = random_kimi_case(seed)
    path = str(tmp_path / "model.gguf")
    write_kimi(model, fmt, path)
    options = dict(tokens=1, n_ctx=ctx["n_ctx"], n_seq=ctx["n_seq"], kv_unified=ctx["kv_unified"], type_k=ctx["type_k"],
                   type_v=ctx["type_v"], flash_attn=bool(ctx["flash_attn"]), n_ubatch=ctx["n_ubatch"], n_batch=ctx["n_ctx"])
    try:
        printed = in_child(printed_kimi, path, ctx)
    except RuntimeError as abort:       # llama.cpp aborts creating the context: kvmem refuses it
        assert "exit code -6" in str(abort)
        with pytest.raises(ValueError, match="aborts creating this kimi-linear context"):
            kvmem.estimate(model, engine="llama.cpp", **options)
        return
    if "log" in printed:        # llama_init_from_model refused the cache type: kvmem refuses it in the same words
        with pytest.raises(ValueError) as refused:
            kvmem.estimate(model, engine="llama.cpp", **options)
        assert str(refused.value).split("llama_init_from_model: ")[1] in printed["log"]
        return
    kv = kvmem.estimate(model, engine="llama.cpp", **options)
    d = kv.details
    compute = llamacpp_compute_buffer(model, n_ctx=d.n_ctx, n_ubatch=d.n_ubatch, cells_per_stream=d.cells,
                                      flash_attn=bool(ctx["flash_attn"]), type_k=ctx["type_k"], type_v=ctx["type_v"],
                                      n_outputs=d.n_batch, n_seq=ctx["n_seq"], kv_unified=ctx["kv_unified"],
                                      backend="cpu")
    assert compute.exact
    assert f"{compute.bytes / 1048576.0:.4f}" == printed["CPU compute 4dp"]
    assert buffer_mib(kv.total_bytes) == pytest.approx(sum(printed.get("KV lines", [])) + printed["RS"], abs=0.011)


def test_kimi_linear_full_shape_equals_llamacpp(tmp_path):
    model = kvmem.get_model(PRESET)
    path = str(tmp_path / "model.gguf")
    tensors = write_kimi(model, "q4_k_m", path)
    for n_ctx, n_ubatch, fa in ((4096, 512, True), (32768, 512, False), (131072, 2048, True)):
        out = in_child(load, path, no_alloc=True, n_ctx=n_ctx, n_ubatch=n_ubatch, flash_attn=fa)
        assert out["size"] == sum(t.nbytes for t in tensors)
        est = kvmem.estimate(model, engine="llama.cpp", tokens=1, n_ctx=n_ctx, flash_attn=fa, n_ubatch=n_ubatch,
                             n_batch=n_ctx)
        ours = graph_bytes(graph_shape(model), n_kv=est.details.cells, n_ubatch=n_ubatch, flash_attn=fa)
        assert buffer_mib(ours) == out["buffers"]["CPU compute"], (n_ctx, fa)
        # no_alloc prints the KV buffer as 0.00: the MLA cache's "llama_kv_cache: size =" line instead
        assert [(c["cells"], len(c["layers"])) for c in out["caches"]] == [(est.details.cells, 7)]
        kv_mib = float(out["caches"][0]["size_mib"])      # 576 x 2 B a cell and layer: 7 MLA layers
        assert kv_mib == pytest.approx(est.details.cells * 576 * 2 * 7 / 2**20, abs=0.006)


def test_kimi_k3_types_size_kv_and_rs_equal_llamacpp(tmp_path):
    # Kimi-K3's config at a small size (kvmem.oracles.llamacpp_kimi.small_k3): llama.cpp's kimi-k3 loader takes
    # exactly kvmem's tensors (the converter's MXFP4 experts kept by llama-quantize) and prints kvmem's KV and RS
    from kvmem.dtypes import GGML_TYPES
    from kvmem.engines.llamacpp.tensors import GPT_OSS_EXPERTS
    from kvmem.oracles.llamacpp_kimi import small_k3
    model = small_k3()
    source, path = str(tmp_path / "source.gguf"), str(tmp_path / "model.gguf")
    write_kimi(model, "f16", source, source=True)
    keep = tuple((pattern, GGML_TYPES[ggml].id) for pattern, ggml in GPT_OSS_EXPERTS)
    theirs = in_child(_dry_runs, source, ["q4_k_m"], keep)
    tensors = write_kimi(model, "q4_k_m", path)
    assert {t.name: t.dtype for t in tensors} == theirs["q4_k_m"]
    assert {t.dtype for t in tensors if "_exps." in t.name} == {"MXFP4"}
    assert in_child(_load, path, True)["size"] == sum(t.nbytes for t in tensors) == 7659232
    ctx = dict(n_ctx=4096, n_ubatch=512, flash_attn=1, type_k="f16", type_v="f16", mmap=True, n_seq=1,
               kv_unified=False, swa_full=False)
    printed = in_child(printed_kimi, path, ctx)
    kv = kvmem.estimate(model, engine="llama.cpp", tokens=1, n_ctx=4096, flash_attn=True, n_ubatch=512, n_batch=4096)
    assert buffer_mib(kv.total_bytes) == pytest.approx(sum(printed["KV lines"]) + printed["RS"], abs=0.011)
    assert (printed["KV lines"], printed["RS"], printed["CPU compute 4dp"]) == ([3.0], 0.12, "12.2578")
    for n_seq, n_rs_seq in ((1, 2), (2, 3)):     # kimi-k3 keeps rollback snapshots (rs_seq.kept_rs_seq)
        printed = in_child(printed_kimi, path, dict(ctx, n_seq=n_seq, n_rs_seq=n_rs_seq))
        kv = kvmem.estimate(model, engine="llama.cpp", tokens=1, n_ctx=4096, flash_attn=True, n_ubatch=512,
                            n_batch=4096, n_seq=n_seq, n_rs_seq=n_rs_seq)
        assert buffer_mib(kv.total_bytes) == pytest.approx(sum(printed["KV lines"]) + printed["RS"], abs=0.011)


@pytest.mark.parametrize("seed", range(6))
def test_kimi_k3_kv_rs_and_compute_equal_llamacpp(seed, tmp_path):
    model, fmt, ctx = random_k3_case(seed)
    path = str(tmp_path / "model.gguf")
    write_kimi(model, fmt, path)
    printed = in_child(printed_kimi, path, ctx)
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
    assert f"{compute.bytes / 1048576.0:.4f}" == printed["CPU compute 4dp"]
    assert buffer_mib(est.total_bytes) == pytest.approx(sum(printed.get("KV lines", [])) + printed["RS"], abs=0.011)


def test_kimi_k3_full_shape_equals_llamacpp(tmp_path):
    # Kimi-K3 at full shape (93 layers, 896 MXFP4 experts over a 3,584-wide latent): 1.48 TB of q4_k_m tensors, sparse
    model = kvmem.get_model("kimi-k3")
    path = str(tmp_path / "model.gguf")
    tensors = write_kimi(model, "q4_k_m", path)
    for n_ctx, n_ubatch, fa in ((4096, 512, True), (32768, 512, False)):
        out = in_child(load, path, no_alloc=True, n_ctx=n_ctx, n_ubatch=n_ubatch, flash_attn=fa)
        assert out["size"] == sum(t.nbytes for t in tensors)
        est = kvmem.estimate(model, engine="llama.cpp", tokens=1, n_ctx=n_ctx, flash_attn=fa, n_ubatch=n_ubatch,
                             n_batch=n_ctx)
        ours = graph_bytes(graph_shape(model), n_kv=est.details.cells, n_ubatch=n_ubatch, flash_attn=fa)
        assert buffer_mib(ours) == out["buffers"]["CPU compute"], (n_ctx, fa)
        assert [(c["cells"], len(c["layers"])) for c in out["caches"]] == [(est.details.cells, 24)]

"""kvmem's MiniMax-M1 (minimax-01) layout (kvmem/engines/llamacpp/graphs_minimax01.py) against llama.cpp 0c1e57098
itself (llama-cpp-python 0.3.36, CPU-only), on a sparse GGUF written from kvmem's tensor list with the metadata
conversion/minimax.py MiniMaxText01Model writes (kvmem.oracles.llamacpp_minimax01):
1. the quantiser: llama_model_quantize --dry-run of the converter's F16 source gives every tensor kvmem's type
   (Q4_K_M and Q2_K: the lightning layers' attn_qkv counted as attn_v);
2. the loader: the preset at full shape loads with no_alloc (every tensor minimax-01.cpp load_arch_tensors asks for,
   no other) and llama_model_size is kvmem's sum;
3. the cache: its softmax layers' "llama_kv_cache: size =" line and cells equal kvmem's at three contexts, and the CPU
   compute buffer kvmem's graph (graphs_minimax01.build_minimax01) to the printed MiB;
4. the graph on 8 random minimax-01 configs with a context each (1-3 sequences: llama.cpp's third reserve of one
   sequence): the CPU compute buffer to the four decimals ~llama_context prints (seeds 0-99 equal, run once);
5. where llama.cpp aborts creating the context (3 sequences, -ub 32, a softmax layer before the last), kvmem refuses;
MiniMax-M3 (minimax-m3): 1, 2 and 3's caches likewise (its compute graph, kvmem.engines.llamacpp.graphs_minimax_m3:
tests/oracles/test_llamacpp_graphs_minimax_m3_oracle.py). About 20 s."""

from tests.oracles.conftest import require

require("llama_cpp")

import pytest  # noqa: E402

import kvmem  # noqa: E402
from kvmem.engines.llamacpp.compute import llamacpp_compute_buffer  # noqa: E402
from kvmem.oracles.llamacpp_buffers import in_child, printed_buffers  # noqa: E402
from kvmem.oracles.llamacpp_minimax01 import random_minimax01_case, write_minimax01, write_minimax_m3  # noqa: E402
from kvmem.oracles.llamacpp_presets import load  # noqa: E402
from tests.oracles.test_llamacpp_layout_families_oracle import _dry_runs, _load  # noqa: E402


def test_minimax_m1_types_size_and_cache_equal_llamacpp(tmp_path):
    model = kvmem.get_model("minimax-m1")
    source, path = str(tmp_path / "source.gguf"), str(tmp_path / "model.gguf")
    write_minimax01(model, "q4_k_m", source, source=True)
    theirs = in_child(_dry_runs, source, ["q4_k_m", "q2_k"])
    for fmt in ("q4_k_m", "q2_k"):
        tensors = write_minimax01(model, fmt, path)
        assert {t.name: t.dtype for t in tensors} == theirs[fmt], fmt
        assert in_child(_load, path, True)["size"] == sum(t.nbytes for t in tensors), fmt
    for n_ctx, n_ubatch, fa in ((4096, 512, True), (32768, 512, True), (8192, 128, False)):
        out = in_child(load, path, no_alloc=True, n_ctx=n_ctx, n_ubatch=n_ubatch, flash_attn=fa)
        est = kvmem.estimate(model, engine="llama.cpp", tokens=1, n_ctx=n_ctx, flash_attn=fa, n_ubatch=n_ubatch,
                             n_batch=n_ctx, swa_full=False)
        # the 10 softmax layers' cache: n_ctx cells x 10 layers x (K + V) 1,024 x 2 B
        (cache,) = out["caches"]
        assert (cache["cells"], len(cache["layers"])) == (n_ctx, 10)
        assert float(cache["size_mib"]) == pytest.approx(n_ctx * 10 * 2 * 1024 * 2 / 1048576, abs=0.006)
        # kvmem's total: that cache and the 70 lightning layers' state, head_dim^2 x 64 heads in f32 (4 MiB each)
        assert est.total_bytes == n_ctx * 10 * 2 * 1024 * 2 + 70 * 128 * 128 * 64 * 4
        assert round(_compute(model, est, fa, 1).bytes / 1048576.0, 2) == out["buffers"]["CPU compute"]


def _compute(model, est, fa, n_seq):
    d = est.details
    compute = llamacpp_compute_buffer(model, n_ctx=d.n_ctx, n_ubatch=d.n_ubatch, cells_per_stream=d.cells,
                                      flash_attn=bool(fa), type_k="f16", type_v="f16", n_outputs=d.n_batch,
                                      n_seq=n_seq, kv_unified=False, swa_cells=d.swa_cells, backend="cpu")
    assert compute.exact
    return compute


@pytest.mark.parametrize("seed", range(8))
def test_minimax01_compute_equals_llamacpp(seed, tmp_path):
    model, ctx = random_minimax01_case(seed, dict(kvmem.get_model("minimax-m1").config))
    path = str(tmp_path / "model.gguf")
    write_minimax01(model, "q4_k_m", path)
    printed = in_child(printed_buffers, path, ctx)
    est = kvmem.estimate(model, engine="llama.cpp", tokens=1, n_ctx=ctx["n_ctx"], n_seq=ctx["n_seq"],
                         flash_attn=bool(ctx["flash_attn"]), n_ubatch=ctx["n_ubatch"], n_batch=ctx["n_ctx"],
                         swa_full=False)
    compute = _compute(model, est, ctx["flash_attn"], ctx["n_seq"])
    assert f"{compute.bytes / 1048576.0:.4f}" == printed["CPU compute 4dp"]


def test_minimax_m3_types_size_and_caches_equal_llamacpp(tmp_path):
    # MiniMax-M3 (minimax-m3): the same three checks; llama_kv_cache_msa's two caches (the main one over 60 layers,
    # the indexer's over the 57 sparse ones) equal kvmem's
    model = kvmem.get_model("minimax-m3")
    source, path = str(tmp_path / "source.gguf"), str(tmp_path / "model.gguf")
    write_minimax_m3(model, "q4_k_m", source, source=True)
    theirs = in_child(_dry_runs, source, ["q4_k_m", "q2_k"])
    for fmt in ("q4_k_m", "q2_k"):
        tensors = write_minimax_m3(model, fmt, path)
        assert {t.name: t.dtype for t in tensors} == theirs[fmt], fmt
        assert in_child(_load, path, True)["size"] == sum(t.nbytes for t in tensors), fmt
    for n_ctx, n_ubatch, fa in ((4096, 512, True), (32768, 512, True), (8192, 128, False)):
        out = in_child(load, path, no_alloc=True, n_ctx=n_ctx, n_ubatch=n_ubatch, flash_attn=fa)
        est = kvmem.estimate(model, engine="llama.cpp", tokens=1, n_ctx=n_ctx, flash_attn=fa, n_ubatch=n_ubatch,
                             n_batch=n_ctx, swa_full=False)
        sizes = [(c["cells"], len(c["layers"]), float(c["size_mib"])) for c in out["caches"]]
        assert sizes == [(n_ctx, 60, n_ctx * 60 * 2 * 512 * 2 / 1048576), (n_ctx, 57, n_ctx * 57 * 2 * 128 * 2 / 1048576)]
        assert est.total_bytes == sum(int(mib * 1048576) for _, _, mib in sizes)


def test_where_llamacpp_aborts_kvmem_refuses(tmp_path):
    # 9 layers (a softmax layer at 7), 3 sequences with a KV stream each, -ub 32: llama.cpp aborts creating the
    # context (GGML_ASSERT(ggml_can_repeat(b, a)), SIGABRT); kvmem refuses it (graphs_minimax01.check_minimax01_streams)
    from kvmem.model import Model
    model, ctx = random_minimax01_case(12, dict(kvmem.get_model("minimax-m1").config))
    model = Model.from_hf_config(dict(model.config, num_hidden_layers=9, attn_type_list=[0] * 7 + [1, 0]), name="m9")
    path = str(tmp_path / "model.gguf")
    write_minimax01(model, "q4_k_m", path)
    with pytest.raises(RuntimeError, match="exit code -6"):
        in_child(printed_buffers, path, dict(ctx, n_ctx=1000, n_seq=3, n_ubatch=32))
    with pytest.raises(ValueError, match="aborts creating this minimax-01 context"):
        kvmem.estimate(model, engine="llama.cpp", tokens=1, n_ctx=1000, n_seq=3, n_ubatch=32, n_batch=1000)

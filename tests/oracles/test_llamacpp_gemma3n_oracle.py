"""kvmem's Gemma 3n (gemma3n: E2B, E4B) layout and graph (kvmem/engines/llamacpp/graphs_gemma3n.py) against llama.cpp
0c1e57098 itself (llama-cpp-python 0.3.36, CPU-only), on sparse GGUFs written from kvmem's tensor list with the
metadata conversion/gemma.py Gemma3NModel writes (kvmem.oracles.llamacpp_gemma3n):
1. the quantiser: llama_model_quantize --dry-run of the converter's F16 source gives every tensor kvmem's type (both
   presets, Q4_K_M and Q2_K: AltUp, LAuReL and per_layer_model_proj kept, per_layer_token_embd as token_embd);
2. the loader: both presets at full shape load (every tensor gemma3n.cpp load_arch_tensors asks for, no other) and
   llama_model_size is kvmem's sum; at three contexts each cache's cells, layers and size and the CPU compute buffer
   are kvmem's (20 layers cached, the KV-shared ones none);
3. 12 random gemma3n configs with a context each: llama_model_size, the printed CPU KV lines and the CPU compute
   buffer (to the four decimals) equal kvmem's.
About 15 s."""

from tests.oracles.conftest import require

require("llama_cpp")

import pytest  # noqa: E402

import kvmem  # noqa: E402
from kvmem.engines.llamacpp.compute import graph_bytes, graph_shape, llamacpp_compute_buffer  # noqa: E402
from kvmem.engines.llamacpp.placement import buffer_mib  # noqa: E402
from kvmem.oracles.llamacpp_buffers import in_child, printed_buffers  # noqa: E402
from kvmem.oracles.llamacpp_gemma3n import random_gemma3n_case, write_gemma3n  # noqa: E402
from kvmem.oracles.llamacpp_presets import load  # noqa: E402
from tests.oracles.test_llamacpp_layout_families_oracle import _dry_runs, _load  # noqa: E402

PRESETS = ("gemma-3n-e2b", "gemma-3n-e4b")


@pytest.mark.parametrize("name", PRESETS)
def test_gemma3n_types_and_size_equal_llamacpp(name, tmp_path):
    model = kvmem.get_model(name)
    source, path = str(tmp_path / "source.gguf"), str(tmp_path / "model.gguf")
    write_gemma3n(model, "f16", source, source=True)
    theirs = in_child(_dry_runs, source, ["q4_k_m", "q2_k"])
    for fmt in ("q4_k_m", "q2_k"):
        tensors = write_gemma3n(model, fmt, path)
        assert {t.name: t.dtype for t in tensors} == theirs[fmt], fmt
        assert in_child(_load, path, True)["size"] == sum(t.nbytes for t in tensors)


@pytest.mark.parametrize("name", PRESETS)
def test_gemma3n_full_shapes_kv_equal_llamacpp(name, tmp_path):
    model = kvmem.get_model(name)
    path = str(tmp_path / "model.gguf")
    tensors = write_gemma3n(model, "q4_k_m", path)
    for n_ctx, n_ubatch, fa in ((4096, 512, True), (32768, 512, False), (32768, 2048, True)):
        out = in_child(load, path, no_alloc=True, n_ctx=n_ctx, n_ubatch=n_ubatch, flash_attn=fa)
        assert out["size"] == sum(t.nbytes for t in tensors)
        est = kvmem.estimate(model, engine="llama.cpp", tokens=1, n_ctx=n_ctx, flash_attn=fa, n_ubatch=n_ubatch,
                             n_batch=n_ctx, swa_full=False)
        d = est.details
        ours = graph_bytes(graph_shape(model), n_kv=d.cells, n_ubatch=d.n_ubatch, flash_attn=fa, swa_cells=d.swa_cells)
        assert buffer_mib(ours) == out["buffers"]["CPU compute"], (n_ctx, fa)
        # no_alloc prints the KV buffers as 0.00: each cache's "llama_kv_cache: size =" line instead
        sizes = [(c["cells"], len(c["layers"]), float(c["size_mib"])) for c in out["caches"]]
        assert [(c["cells"], c["layers"]) for c in est.details.caches] == [x[:2] for x in sizes], n_ctx
        assert sum(x[1] for x in sizes) == 20          # n_layer_kv_from_start (gemma3n.cpp L7)
        assert buffer_mib(est.total_bytes) == pytest.approx(sum(x[2] for x in sizes), abs=0.011), n_ctx


@pytest.mark.parametrize("seed", range(12))
def test_gemma3n_size_and_kv_equal_llamacpp(seed, tmp_path):
    model, fmt, ctx = random_gemma3n_case(seed)
    path = str(tmp_path / "model.gguf")
    tensors = write_gemma3n(model, fmt, path)
    assert in_child(_load, path, True)["size"] == sum(t.nbytes for t in tensors)
    printed = in_child(printed_buffers, path, ctx)
    kv = kvmem.estimate(model, engine="llama.cpp", tokens=1, n_ctx=ctx["n_ctx"], n_seq=ctx["n_seq"],
                        kv_unified=ctx["kv_unified"], swa_full=False, type_k=ctx["type_k"], type_v=ctx["type_v"],
                        flash_attn=bool(ctx["flash_attn"]), n_ubatch=ctx["n_ubatch"], n_batch=ctx["n_ctx"])
    d = kv.details
    compute = llamacpp_compute_buffer(model, n_ctx=d.n_ctx, n_ubatch=d.n_ubatch, cells_per_stream=d.cells,
                                      flash_attn=bool(ctx["flash_attn"]), type_k=ctx["type_k"], type_v=ctx["type_v"],
                                      n_outputs=d.n_batch, n_seq=ctx["n_seq"], kv_unified=ctx["kv_unified"],
                                      swa_cells=d.swa_cells, backend="cpu")
    assert compute.exact and f"{compute.bytes / 1048576.0:.4f}" == printed["CPU compute 4dp"]
    assert buffer_mib(kv.total_bytes) == pytest.approx(sum(printed["KV lines"]), abs=0.011)

"""kvmem's falcon, gpt2 and gptneox layouts and compute graphs (kvmem/engines/llamacpp/graphs_classic.py) against
llama.cpp 0c1e57098 itself (llama-cpp-python 0.3.36, CPU-only), on sparse GGUFs written from kvmem's tensor list with
the metadata each converter writes (kvmem.oracles.llamacpp_classic):
1. the quantiser: llama_model_quantize --dry-run of the converter's F16 source gives every tensor kvmem's type (the
   four presets, Q4_K_M and Q2_K: falcon's own rules, 4544 columns falling back, gpt2's F32 position_embd);
2. the loader: the presets at full shape load with no_alloc (every tensor falcon.cpp / gpt2.cpp / gptneox.cpp
   load_arch_tensors asks for, no other) and llama_model_size is kvmem's sum;
3. KV and compute: 18 random cases (6 of each family) with a context each: the CPU_Mapped model buffer, the CPU KV
   buffer and the CPU compute buffer (to the four decimals) equal kvmem's; the presets at full shape (no_alloc) at two
   contexts: KV and the compute buffer;
4. a GGUF of each family read back by kvmem.sources gives the config's graph shape.
Seeds 0-59 of the random cases, run once by a script beside it: 60 of 60 equal. About 15 s."""

from tests.oracles.conftest import require

require("llama_cpp")

import os  # noqa: E402

import pytest  # noqa: E402

import kvmem  # noqa: E402
from kvmem.engines.llamacpp.compute import graph_bytes, graph_shape, llamacpp_compute_buffer  # noqa: E402
from kvmem.engines.llamacpp.placement import buffer_mib, place  # noqa: E402
from kvmem.model import Model  # noqa: E402
from kvmem.oracles.llamacpp_buffers import in_child, printed_buffers  # noqa: E402
from kvmem.oracles.llamacpp_classic import random_classic_case, write_classic  # noqa: E402
from kvmem.oracles.llamacpp_presets import load  # noqa: E402
from tests.oracles.test_llamacpp_layout_families_oracle import _dry_runs, _load  # noqa: E402

PRESETS = ("falcon-7b", "falcon-40b", "gpt2", "gpt-neox-20b")


@pytest.mark.parametrize("name", PRESETS)
def test_types_and_size_equal_llamacpp(name, tmp_path):
    model = kvmem.get_model(name)
    source, path = str(tmp_path / "source.gguf"), str(tmp_path / "model.gguf")
    write_classic(model, "f16", source, source=True)
    theirs = in_child(_dry_runs, source, ["q4_k_m", "q2_k"])
    os.remove(source)
    for fmt in ("q4_k_m", "q2_k"):
        tensors = write_classic(model, fmt, path)
        assert {t.name: t.dtype for t in tensors} == theirs[fmt], fmt
    out = in_child(_load, path, True)
    assert out["size"] == sum(t.nbytes for t in tensors)


@pytest.mark.parametrize("name", PRESETS)
def test_full_shapes_equal_llamacpp(name, tmp_path):
    model = kvmem.get_model(name)
    path = str(tmp_path / "model.gguf")
    write_classic(model, "q4_k_m", path)
    for n_ctx, n_ubatch, fa in ((8192, 512, False), (4096, 2048, True)):
        out = in_child(load, path, no_alloc=True, n_ctx=n_ctx, n_ubatch=n_ubatch, flash_attn=fa)
        est = kvmem.estimate(model, engine="llama.cpp", tokens=1, n_ctx=n_ctx, flash_attn=fa, n_ubatch=n_ubatch,
                             n_batch=n_ctx, swa_full=False)
        d = est.details
        ours = graph_bytes(graph_shape(model), n_kv=d.cells, n_ubatch=d.n_ubatch, flash_attn=fa)
        assert buffer_mib(ours) == out["buffers"]["CPU compute"], (n_ctx, fa)
        # no_alloc prints the KV buffer as 0.00: the cache's "llama_kv_cache: size =" line instead
        assert buffer_mib(est.total_bytes) == pytest.approx(float(out["caches"][0]["size_mib"]), abs=0.011)


@pytest.mark.parametrize("seed", range(18))
def test_model_kv_and_compute_buffers_equal_llamacpp(seed, tmp_path):
    model, fmt, ctx = random_classic_case(seed)
    path = str(tmp_path / "model.gguf")
    tensors = write_classic(model, fmt, path)
    printed = in_child(printed_buffers, path, ctx)
    kv = kvmem.estimate(model, engine="llama.cpp", tokens=1, n_ctx=ctx["n_ctx"], n_seq=ctx["n_seq"],
                        kv_unified=ctx["kv_unified"], swa_full=False, type_k=ctx["type_k"], type_v=ctx["type_v"],
                        flash_attn=bool(ctx["flash_attn"]), n_ubatch=ctx["n_ubatch"], n_batch=ctx["n_ctx"])
    d = kv.details
    compute = llamacpp_compute_buffer(model, n_ctx=d.n_ctx, n_ubatch=d.n_ubatch, cells_per_stream=d.cells,
                                      flash_attn=bool(ctx["flash_attn"]), type_k=ctx["type_k"], type_v=ctx["type_v"],
                                      n_outputs=d.n_batch, n_seq=ctx["n_seq"], kv_unified=ctx["kv_unified"],
                                      backend="cpu")
    host = place(tensors, n_layer=model.num_layers, n_gpu_layers=0, mmap=True).host
    assert compute.exact
    assert f"{compute.bytes / 1048576.0:.4f}" == printed["CPU compute 4dp"]
    assert buffer_mib(kv.total_bytes) == printed["CPU KV"]
    assert buffer_mib(host.model_bytes) == printed["CPU_Mapped model"]


@pytest.mark.parametrize("seed", (0, 1, 2, 3, 5))
def test_a_gguf_read_back_has_the_configs_graph(seed, tmp_path):
    # kvmem.sources' GGUF reader gives the graph the config gives: falcon's second norm and KV heads, gpt2's position
    # rows, gptneox's FFN width and parallel residual
    model, fmt, _ctx = random_classic_case(seed)
    path = str(tmp_path / "model.gguf")
    write_classic(model, fmt, path)
    read = Model.from_gguf(path)
    assert graph_shape(read) is not None and graph_shape(read) == graph_shape(model)

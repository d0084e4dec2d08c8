"""kvmem's Llama 4 (llama4: Scout, Maverick) layout and compute graph (kvmem/engines/llamacpp/graphs_llama4.py) against
llama.cpp 0c1e57098 itself (llama-cpp-python 0.3.36, CPU-only), on sparse GGUFs written from kvmem's tensor list with
the metadata conversion/llama.py Llama4Model writes (kvmem.oracles.llamacpp_llama4):
1. the quantiser: llama_model_quantize --dry-run of the converter's F16 source gives every tensor kvmem's type
   (both presets, Q4_K_M and Q2_K: Maverick's dense / MoE layers interleaved);
2. the loader: both presets at full shape load with no_alloc (every tensor llama4.cpp load_arch_tensors asks for, no
   other) and llama_model_size is kvmem's sum;
3. KV and compute: 24 random llama4 configs with a context each (past the 8192-token chunk too): the printed CPU KV
   lines (the full and the chunked cache) and CPU compute buffer equal kvmem's (compute to the four decimals); the
   presets at full shape (no_alloc) at three contexts: KV per cache and the compute buffer;
4. a small GGUF of each preset read back by kvmem.sources gives the config's graph shape.
About a minute (seeds 24-199 of the random cases, run once by a script beside it: 176 of 176 equal too)."""

from tests.oracles.conftest import require

require("llama_cpp")

import pytest  # noqa: E402

import kvmem  # noqa: E402
from kvmem.engines.llamacpp.compute import graph_bytes, graph_shape, llamacpp_compute_buffer  # noqa: E402
from kvmem.engines.llamacpp.placement import buffer_mib  # noqa: E402
from kvmem.oracles.llamacpp_buffers import in_child, printed_buffers  # noqa: E402
from kvmem.oracles.llamacpp_llama4 import random_llama4_case, write_llama4  # noqa: E402
from kvmem.oracles.llamacpp_presets import load  # noqa: E402
from tests.oracles.test_llamacpp_layout_families_oracle import _dry_runs, _load  # noqa: E402

PRESETS = ("llama-4-scout-17b-16e", "llama-4-maverick-17b-128e")


@pytest.mark.parametrize("name", PRESETS)
def test_llama4_types_and_size_equal_llamacpp(name, tmp_path):
    model = kvmem.get_model(name)
    source, path = str(tmp_path / "source.gguf"), str(tmp_path / "model.gguf")
    write_llama4(model, "f16", source, source=True)
    theirs = in_child(_dry_runs, source, ["q4_k_m", "q2_k"])
    for fmt in ("q4_k_m", "q2_k"):
        tensors = write_llama4(model, fmt, path)
        assert {t.name: t.dtype for t in tensors} == theirs[fmt], fmt
        out = in_child(_load, path, True)
        assert out["size"] == sum(t.nbytes for t in tensors)


@pytest.mark.parametrize("seed", range(24))
def test_llama4_kv_and_compute_buffers_equal_llamacpp(seed, tmp_path):
    model, fmt, ctx = random_llama4_case(seed)
    path = str(tmp_path / "model.gguf")
    write_llama4(model, fmt, path)
    printed = in_child(printed_buffers, path, ctx)
    kv = kvmem.estimate(model, engine="llama.cpp", tokens=1, n_ctx=ctx["n_ctx"], n_seq=ctx["n_seq"],
                        kv_unified=ctx["kv_unified"], swa_full=False, type_k=ctx["type_k"], type_v=ctx["type_v"],
                        flash_attn=bool(ctx["flash_attn"]), n_ubatch=ctx["n_ubatch"], n_batch=ctx["n_ctx"])
    d = kv.details
    compute = llamacpp_compute_buffer(model, n_ctx=d.n_ctx, n_ubatch=d.n_ubatch, cells_per_stream=d.cells,
                                      flash_attn=bool(ctx["flash_attn"]), type_k=ctx["type_k"], type_v=ctx["type_v"],
                                      n_outputs=d.n_batch, n_seq=ctx["n_seq"], kv_unified=ctx["kv_unified"],
                                      swa_cells=d.swa_cells, backend="cpu")
    assert compute.exact
    assert f"{compute.bytes / 1048576.0:.4f}" == printed["CPU compute 4dp"]
    # one line per cache that holds layers (fewer than 4 layers: every one chunked, the full cache empty, unprinted)
    assert buffer_mib(kv.total_bytes) == pytest.approx(sum(printed["KV lines"]), abs=0.011)


@pytest.mark.parametrize("name", PRESETS)
def test_llama4_full_shapes_equal_llamacpp(name, tmp_path):
    model = kvmem.get_model(name)
    path = str(tmp_path / "model.gguf")
    write_llama4(model, "q4_k_m", path)
    for n_ctx, n_ubatch, fa in ((4096, 512, True), (32768, 512, False), (131072, 2048, True)):
        out = in_child(load, path, no_alloc=True, n_ctx=n_ctx, n_ubatch=n_ubatch, flash_attn=fa)
        est = kvmem.estimate(model, engine="llama.cpp", tokens=1, n_ctx=n_ctx, flash_attn=fa, n_ubatch=n_ubatch,
                             n_batch=n_ctx, swa_full=False)
        d = est.details
        ours = graph_bytes(graph_shape(model), n_kv=d.cells, n_ubatch=d.n_ubatch, flash_attn=fa, swa_cells=d.swa_cells)
        assert buffer_mib(ours) == out["buffers"]["CPU compute"], (n_ctx, fa)
        # no_alloc prints the KV buffers as 0.00: each cache's "llama_kv_cache: size =" line instead
        sizes = [(c["cells"], len(c["layers"]), float(c["size_mib"])) for c in out["caches"]]
        assert [(c["cells"], c["layers"]) for c in est.details.caches] == [x[:2] for x in sizes], n_ctx
        assert buffer_mib(est.total_bytes) == pytest.approx(sum(x[2] for x in sizes), abs=0.011), n_ctx



@pytest.mark.parametrize("name", PRESETS)
def test_a_llama4_gguf_read_back_has_the_configs_graph(name, tmp_path):
    # kvmem.sources' GGUF reader gives the graph the config gives: Maverick's dense layers (feed_forward_length 16384)
    # between its MoE ones (interleave_moe_layer_step 2), the chunked layers, the KQ norm off at 128 experts
    from kvmem.model import Model
    cfg = dict(kvmem.get_model(name).config)
    cfg["text_config"] = dict(cfg["text_config"], num_hidden_layers=8, vocab_size=32000)
    model = Model.from_hf_config(cfg, name=f"{name}-small")
    path = str(tmp_path / "llama4.gguf")
    write_llama4(model, "q4_k_m", path)
    read = Model.from_gguf(path)
    assert graph_shape(read) is not None and graph_shape(read) == graph_shape(model)
    assert graph_shape(read).moe_layers == ((True,) * 8 if "scout" in name else (False, True) * 4)


def test_another_chunk_size_in_the_config_is_cached_as_llamacpp_does(tmp_path):
    # attention_chunk_size 1024 in the config: the converter does not write it and llama.cpp chunks by 8192
    # (families.config_window): at 20000 cells the chunked cache holds 8192 + 512 -> 8704 cells, not 1536
    from kvmem.model import Model
    model, fmt, ctx = random_llama4_case(7)
    cfg = dict(model.config, attention_chunk_size=1024)
    model = Model.from_hf_config(cfg, name="llama4-chunk-1024")
    assert {layer.window for layer in model.layers if layer.window} == {1024}     # kvmem's reading of the config
    ctx = dict(ctx, n_ctx=20000, n_ubatch=512, n_seq=1, kv_unified=False)
    path = str(tmp_path / "model.gguf")
    write_llama4(model, fmt, path)
    printed = in_child(printed_buffers, path, ctx)
    kv = kvmem.estimate(model, engine="llama.cpp", tokens=1, n_ctx=20000, n_seq=1, swa_full=False,
                        type_k=ctx["type_k"], type_v=ctx["type_v"], flash_attn=bool(ctx["flash_attn"]), n_ubatch=512,
                        n_batch=20000)
    assert kv.details.swa_cells == 8704
    assert buffer_mib(kv.total_bytes) == pytest.approx(sum(printed["KV lines"]), abs=0.011)

"""kvmem's glm4moe, hybrid Gated DeltaNet and gemma4 compute graphs (kvmem/engines/llamacpp/graphs_glm4moe.py,
graphs_delta.py: qwen3next, qwen35, qwen35moe; graphs_gemma4.py) against llama.cpp 0c1e57098 itself
(llama-cpp-python 0.3.36, CPU-only): random glm4_moe configs laid out by kvmem (kvmem.oracles.llamacpp_family_files,
the metadata conversion/glm.py writes), loaded for real, a context created; the printed "CPU compute buffer size"
must equal kvmem's to the printed MiB and to the four decimals ~llama_context prints. Then GLM-4.5-Air and GLM-4.7
cut to 4 layers (their own widths, leading dense layers kept) at real contexts, and both at their full shapes
(no_alloc). The same for the hybrid graphs: 24 random cases (Qwen3-Next, Qwen3.5-MoE, Qwen3.5 alike; several
sequences, unified or not), Qwen3-Next-80B-A3B / Qwen3.5-27B / Qwen3.5-397B-A17B at their full shapes (36 of 36
random cases and 12 of 12 full-shape contexts were equal when this was built); gemma4: 24 random cases (20 of 20 when
this was built) and Gemma 4 26B-A4B at its full shape. kvmem.oracles.llamacpp_graphs_more says what the random cases
vary. About 2 minutes."""

from tests.oracles.conftest import require

require("llama_cpp")

import pytest  # noqa: E402

import kvmem  # noqa: E402
from kvmem.engines.llamacpp.compute import graph_bytes, graph_shape, llamacpp_compute_buffer  # noqa: E402
from kvmem.engines.llamacpp.graphs_delta import delta_shape, hybrid_graph_bytes  # noqa: E402
from kvmem.engines.llamacpp.placement import buffer_mib  # noqa: E402
from kvmem.model import Model  # noqa: E402
from kvmem.oracles.llamacpp_buffers import in_child, printed_buffers  # noqa: E402
from kvmem.oracles.llamacpp_family_files import write_family  # noqa: E402
from kvmem.oracles.llamacpp_graphs_more import random_delta_case, random_gemma4_case, random_glm4moe_case  # noqa: E402
from kvmem.oracles.llamacpp_presets import load  # noqa: E402


def _kvmem_compute(model, ctx):
    d = kvmem.estimate(model, engine="llama.cpp", tokens=1, n_ctx=ctx["n_ctx"], n_seq=ctx["n_seq"],
                       kv_unified=ctx["kv_unified"], swa_full=ctx["swa_full"], type_k=ctx["type_k"],
                       type_v=ctx["type_v"], flash_attn=bool(ctx["flash_attn"]), n_ubatch=ctx["n_ubatch"],
                       n_batch=ctx["n_ctx"]).details
    return llamacpp_compute_buffer(model, n_ctx=d.n_ctx, n_ubatch=d.n_ubatch, cells_per_stream=d.cells,
                                   flash_attn=bool(ctx["flash_attn"]), type_k=ctx["type_k"], type_v=ctx["type_v"],
                                   n_outputs=d.n_batch, n_seq=ctx["n_seq"], kv_unified=ctx["kv_unified"],
                                   swa_cells=d.swa_cells, backend="cpu", printed=True)   # the printed reserve


def _check(model, fmt, ctx, path):
    write_family(model, fmt, path, source=False)
    printed = in_child(printed_buffers, path, ctx)
    compute = _kvmem_compute(model, ctx)
    assert compute.exact
    assert buffer_mib(compute.bytes) == printed["CPU compute"]
    assert f"{compute.bytes / 1048576.0:.4f}" == printed["CPU compute 4dp"]


@pytest.mark.parametrize("seed", range(24))
def test_glm4moe_compute_buffers_equal_llamacpp(seed, tmp_path):
    model, fmt, ctx = random_glm4moe_case(seed)
    _check(model, fmt, ctx, str(tmp_path / "model.gguf"))


@pytest.mark.parametrize("preset", ["glm-4.5-air", "glm-4.7"])
@pytest.mark.parametrize("n_ctx, n_ubatch, fa, type_k", [(4096, 512, 1, "f16"), (8192, 2048, 1, "q8_0"),
                                                         (4096, 512, 0, "f16")])
def test_glm4moe_presets_cut_to_four_layers_equal_llamacpp(preset, n_ctx, n_ubatch, fa, type_k, tmp_path):
    # the preset's own widths (GLM-4.5-Air: 96 heads of 128, 8 KV heads, 128 experts of 1408, vocab 151552, no
    # Q/K norm; GLM-4.7: 160 experts, Q/K norms, 3 dense layers, routed_scaling_factor 2.5), four layers
    cfg = dict(kvmem.get_model(preset).config)
    cfg["num_hidden_layers"] = 4
    model = Model.from_hf_config(cfg, name=f"{preset}-cut")
    ctx = dict(n_ctx=n_ctx, n_ubatch=n_ubatch, flash_attn=fa, type_k=type_k, type_v=type_k, mmap=True, n_seq=1,
               kv_unified=False, swa_full=False)
    _check(model, "q4_0", ctx, str(tmp_path / "model.gguf"))


@pytest.mark.parametrize("preset", ["glm-4.5-air", "glm-4.7"])
def test_glm4moe_presets_full_shapes_prompt_graph_equals_llamacpp(preset, tmp_path):
    # every layer (a sparse GGUF of the whole model, never read): loaded with no_alloc, llama.cpp prints the prompt
    # graph's reserve (kvmem.oracles.llamacpp_presets.load), the larger graph at these n_ubatch
    model = kvmem.get_model(preset)
    path = str(tmp_path / "model.gguf")
    write_family(model, "q4_k_m", path, source=False)
    for n_ctx, n_ubatch, fa in ((4096, 512, True), (32768, 512, False), (65536, 2048, True)):
        printed = in_child(load, path, no_alloc=True, n_ctx=n_ctx, n_ubatch=n_ubatch, flash_attn=fa)["buffers"]
        d = kvmem.estimate(model, engine="llama.cpp", tokens=1, n_ctx=n_ctx, flash_attn=fa, n_ubatch=n_ubatch,
                           n_batch=n_ctx).details
        ours = graph_bytes(graph_shape(model), n_kv=d.cells, n_ubatch=d.n_ubatch, flash_attn=fa)
        assert buffer_mib(ours) == printed["CPU compute"], (n_ctx, fa)


@pytest.mark.parametrize("seed", range(24))
def test_hybrid_delta_net_compute_buffers_equal_llamacpp(seed, tmp_path):
    # the recurrent part over the n_seq sequences whatever the KV streams (kv_unified), the attention cache's cells
    # kvmem's plan settles on (llama_memory_hybrid: n_pad 1)
    model, fmt, ctx = random_delta_case(seed)
    path = str(tmp_path / "model.gguf")
    write_family(model, fmt, path, source=False)
    printed = in_child(printed_buffers, path, ctx)
    d = kvmem.estimate(model, engine="llama.cpp", tokens=1, n_ctx=ctx["n_ctx"], n_seq=ctx["n_seq"],
                       kv_unified=ctx["kv_unified"], type_k=ctx["type_k"], type_v=ctx["type_v"],
                       flash_attn=bool(ctx["flash_attn"]), n_ubatch=ctx["n_ubatch"], n_batch=ctx["n_ctx"]).details
    ours = hybrid_graph_bytes(delta_shape(model), n_kv=d.cells, n_ubatch=d.n_ubatch, flash_attn=bool(ctx["flash_attn"]),
                              type_k=ctx["type_k"], type_v=ctx["type_v"], n_outputs=d.n_batch, n_seq=ctx["n_seq"],
                              kv_unified=ctx["kv_unified"])
    assert buffer_mib(ours) == printed["CPU compute"]
    assert f"{ours / 1048576.0:.4f}" == printed["CPU compute 4dp"]
    wired = _kvmem_compute(model, ctx)      # the same bytes through compute.graph_shape (the wired path)
    assert wired.exact and wired.bytes == ours


@pytest.mark.parametrize("preset", ["qwen3-next-80b-a3b", "qwen3.5-27b", "qwen3.5-397b-a17b"])
def test_hybrid_presets_full_shapes_prompt_graph_equals_llamacpp(preset, tmp_path):
    model = kvmem.get_model(preset)
    path = str(tmp_path / "model.gguf")
    write_family(model, "q4_k_m", path, source=False)
    for n_ctx, n_ubatch, fa in ((4096, 512, True), (32768, 512, False), (65536, 2048, True), (262144, 512, True)):
        printed = in_child(load, path, no_alloc=True, n_ctx=n_ctx, n_ubatch=n_ubatch, flash_attn=fa)["buffers"]
        d = kvmem.estimate(model, engine="llama.cpp", tokens=1, n_ctx=n_ctx, flash_attn=fa, n_ubatch=n_ubatch,
                           n_batch=n_ctx).details
        ours = hybrid_graph_bytes(delta_shape(model), n_kv=d.cells, n_ubatch=d.n_ubatch, flash_attn=fa)
        assert buffer_mib(ours) == printed["CPU compute"], (n_ctx, fa)


@pytest.mark.parametrize("seed", range(24))
def test_gemma4_compute_buffers_equal_llamacpp(seed, tmp_path):
    # per-layer head widths and KV heads (sliding / full), K = V on full layers, the MoE block beside the dense FFN,
    # the sliding cache's cells from kvmem's plan (swa_full on or off)
    model, fmt, ctx = random_gemma4_case(seed)
    _check(model, fmt, ctx, str(tmp_path / "model.gguf"))


def test_gemma4_preset_full_shape_prompt_graph_equals_llamacpp(tmp_path):
    model = kvmem.get_model("gemma-4-26b-a4b")
    path = str(tmp_path / "model.gguf")
    write_family(model, "q4_k_m", path, source=False)
    for n_ctx, n_ubatch, fa in ((4096, 512, True), (32768, 512, False), (65536, 2048, True), (262144, 512, True)):
        printed = in_child(load, path, no_alloc=True, n_ctx=n_ctx, n_ubatch=n_ubatch, flash_attn=fa)["buffers"]
        d = kvmem.estimate(model, engine="llama.cpp", tokens=1, n_ctx=n_ctx, flash_attn=fa, n_ubatch=n_ubatch,
                           n_batch=n_ctx, swa_full=False).details
        ours = graph_bytes(graph_shape(model), n_kv=d.cells, n_ubatch=d.n_ubatch, flash_attn=fa,
                           swa_cells=d.swa_cells or 0)
        assert buffer_mib(ours) == printed["CPU compute"], (n_ctx, fa)

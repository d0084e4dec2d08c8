"""kvmem's deepseek2 (MLA) and gpt-oss compute graphs (kvmem/engines/llamacpp/graphs_mla_oss.py) against
llama.cpp 0c1e57098 itself (llama-cpp-python 0.3.36, CPU-only): random configs of both families laid out
by kvmem, loaded for real, a context created; the printed "CPU compute buffer size" must equal kvmem's to
the printed MiB and to the four decimals ~llama_context prints (kvmem.oracles.llamacpp_graphs); and the
presets DeepSeek-V3, gpt-oss-120b and DeepSeek-V2-Lite at their full shapes (no_alloc: the prompt graph's
reserve, to the printed MiB). 300 random cases were equal when this was built (deepseek_v3 105, gpt_oss 100,
deepseek_v2 95); 36 here. The glm-dsa / deepseek32 graphs (graphs_dsa.py) the same way: 300 of 300 random cases
(GLM-5.x with and without shared indexer layers, DeepSeek-V3.2), 24 here, and DeepSeek-V3.2 and GLM-5.2 at their
full shapes; deepseek2 GGUFs without the MLA split (per-head K/V, mla="none"), 8 cases. About 30 s."""

from tests.oracles.conftest import require

require("llama_cpp")

import pytest  # noqa: E402

import kvmem  # noqa: E402
from kvmem.engines.llamacpp.compute import graph_bytes, graph_shape, llamacpp_compute_buffer  # noqa: E402
from kvmem.engines.llamacpp.graphs_mla_oss import per_head_mla_shape  # noqa: E402
from kvmem.engines.llamacpp.placement import buffer_mib  # noqa: E402
from kvmem.oracles.llamacpp_buffers import in_child  # noqa: E402
from kvmem.oracles.llamacpp_family_files import write_family  # noqa: E402
from kvmem.oracles.llamacpp_graphs import (  # noqa: E402
    DSA_KINDS,
    per_head_case,
    random_graph_case,
    run_graph_case,
    run_per_head_case,
)
from kvmem.oracles.llamacpp_presets import load  # noqa: E402


def _kvmem_compute(model, ctx):
    kv = kvmem.estimate(model, engine="llama.cpp", tokens=1, n_ctx=ctx["n_ctx"], n_seq=ctx["n_seq"],
                        kv_unified=ctx["kv_unified"], swa_full=ctx["swa_full"], type_k=ctx["type_k"],
                        type_v=ctx["type_v"], flash_attn=bool(ctx["flash_attn"]), n_ubatch=ctx["n_ubatch"],
                        n_batch=ctx["n_ctx"])
    d = kv.details
    return llamacpp_compute_buffer(model, n_ctx=d.n_ctx, n_ubatch=d.n_ubatch, cells_per_stream=d.cells,
                                   flash_attn=bool(ctx["flash_attn"]), type_k=ctx["type_k"], type_v=ctx["type_v"],
                                   n_outputs=d.n_batch, n_seq=ctx["n_seq"], kv_unified=ctx["kv_unified"],
                                   swa_cells=d.swa_cells, backend="cpu")


@pytest.mark.parametrize("seed", range(36))
def test_mla_and_gpt_oss_compute_buffers_equal_llamacpp(seed, tmp_path):
    model, fmt, ctx = random_graph_case(seed)
    printed = run_graph_case(model, fmt, ctx, str(tmp_path / "model.gguf"))
    compute = _kvmem_compute(model, ctx)
    assert compute.exact
    assert buffer_mib(compute.bytes) == printed["CPU compute"]
    assert f"{compute.bytes / 1048576.0:.4f}" == printed["CPU compute 4dp"]


@pytest.mark.parametrize("seed", range(24))
def test_dsa_compute_buffers_equal_llamacpp(seed, tmp_path):
    # glm-dsa (every layer full, or GLM-5.2's shared layers through attention.indexer.types) and deepseek32:
    # the lightning indexer, its cache and top-k, the sparse mask (kvmem/engines/llamacpp/graphs_dsa.py);
    # 300 of 300 random cases were equal when this was built
    model, fmt, ctx = random_graph_case(seed, DSA_KINDS)
    printed = run_graph_case(model, fmt, ctx, str(tmp_path / "model.gguf"))
    compute = _kvmem_compute(model, ctx)
    assert compute.exact
    assert buffer_mib(compute.bytes) == printed["CPU compute"]
    assert f"{compute.bytes / 1048576.0:.4f}" == printed["CPU compute 4dp"]


@pytest.mark.parametrize("seed", range(8))
def test_per_head_mla_compute_buffers_equal_llamacpp(seed, tmp_path):
    # deepseek2 GGUFs without the MLA split (attn_kv_b, per-head K and V: kvmem's mla="none"), the non-absorbed
    # graph (graphs_mla_oss per_head_mla_shape); 192 of 192 random cases were equal when this was built
    model, fmt, ctx = per_head_case(seed)
    printed = run_per_head_case(model, fmt, ctx, str(tmp_path / "model.gguf"))
    kv = kvmem.estimate(model, engine="llama.cpp", tokens=1, n_ctx=ctx["n_ctx"], n_seq=ctx["n_seq"],
                        kv_unified=ctx["kv_unified"], type_k=ctx["type_k"], type_v=ctx["type_v"],
                        flash_attn=bool(ctx["flash_attn"]), n_ubatch=ctx["n_ubatch"], n_batch=ctx["n_ctx"], mla="none")
    d = kv.details
    assert printed["KV lines"] == [buffer_mib(c["k_bytes"] + c["v_bytes"]) for c in d.caches]
    ours = graph_bytes(per_head_mla_shape(model), n_kv=d.cells, n_ubatch=d.n_ubatch, flash_attn=bool(ctx["flash_attn"]),
                       type_k=ctx["type_k"], type_v=ctx["type_v"], n_outputs=d.n_batch, n_seq=ctx["n_seq"],
                       kv_unified=ctx["kv_unified"])
    assert f"{ours / 1048576.0:.4f}" == printed["CPU compute 4dp"]


@pytest.mark.parametrize("preset, fmt", [("deepseek-v3", "q4_k_m"), ("gpt-oss-120b", "mxfp4_moe"),
                                         ("deepseek-v2-lite", "q4_k_m"), ("deepseek-v3.2", "q4_k_m"),
                                         ("glm-5.2", "q4_k_m")])
def test_presets_full_shapes_prompt_graph_equals_llamacpp(preset, fmt, tmp_path):
    # the presets' own shapes, every layer (sparse GGUFs of hundreds of GB, never read): loaded with no_alloc,
    # llama.cpp prints the prompt graph's reserve (kvmem.oracles.llamacpp_presets), the larger graph here
    model = kvmem.get_model(preset)
    path = str(tmp_path / "model.gguf")
    write_family(model, fmt, path, source=False)
    for n_ctx, n_ubatch, fa in ((4096, 512, True), (32768, 512, False)):
        printed = in_child(load, path, no_alloc=True, n_ctx=n_ctx, n_ubatch=n_ubatch, flash_attn=fa)["buffers"]
        kv = kvmem.estimate(model, engine="llama.cpp", tokens=1, n_ctx=n_ctx, flash_attn=fa, n_ubatch=n_ubatch,
                            n_batch=n_ctx, swa_full=False)
        d = kv.details
        ours = graph_bytes(graph_shape(model), n_kv=d.cells, n_ubatch=d.n_ubatch, flash_attn=fa,
                           swa_cells=d.swa_cells or 0)
        assert buffer_mib(ours) == printed["CPU compute"], (n_ctx, fa)


def test_per_head_preset_full_shape_prompt_graph_equals_llamacpp(tmp_path):
    # DeepSeek-V2-Lite written without the MLA split, every layer: 1136.27 MiB at 32k without flash attention
    # (the latent graph: 1174.01), 848.01 MiB at 8k, ub 2048, flash attention
    model = kvmem.get_model("deepseek-v2-lite")
    path = str(tmp_path / "model.gguf")
    write_family(model, "q8_0", path, source=False, per_head_mla=True)
    for n_ctx, n_ubatch, fa in ((32768, 512, False), (8192, 2048, True)):
        printed = in_child(load, path, no_alloc=True, n_ctx=n_ctx, n_ubatch=n_ubatch, flash_attn=fa)["buffers"]
        d = kvmem.estimate(model, engine="llama.cpp", tokens=1, n_ctx=n_ctx, flash_attn=fa, n_ubatch=n_ubatch,
                           n_batch=n_ctx, mla="none").details
        ours = graph_bytes(per_head_mla_shape(model), n_kv=d.cells, n_ubatch=n_ubatch, flash_attn=fa)
        assert buffer_mib(ours) == printed["CPU compute"], (n_ctx, fa)

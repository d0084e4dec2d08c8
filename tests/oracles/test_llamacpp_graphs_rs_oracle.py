"""kvmem's hybrid Gated DeltaNet graphs with recurrent rollback snapshots (kvmem/engines/llamacpp/graphs_delta.py
with_rs_seq: llama_context_params.n_rs_seq, which llama-server sets to --spec-draft-n-max for a draft-mtp / eagle3 /
dflash / dspark --spec-type) against llama.cpp 0c1e57098 itself (llama-cpp-python 0.3.36, CPU-only): the random
hybrid cases of kvmem.oracles.llamacpp_graphs_more (Qwen3-Next, Qwen3.5-MoE, Qwen3.5 alike; several sequences,
unified or not) loaded for real with n_rs_seq 1-16; the printed "CPU compute buffer size" must equal kvmem's to the
four decimals ~llama_context prints (qwen3next has no rollback: llama.cpp clamps n_rs_seq to 0, so must kvmem).
Then the three presets at their full shapes (no_alloc). 16 of 16 and 6 of 6 equal when this was written; about
15 s."""

from tests.oracles.conftest import require

require("llama_cpp")

import random  # noqa: E402

import pytest  # noqa: E402

import kvmem  # noqa: E402
from kvmem.engines.llamacpp.compute import llamacpp_compute_buffer  # noqa: E402
from kvmem.engines.llamacpp.graphs_delta import delta_shape, hybrid_graph_bytes, with_rs_seq  # noqa: E402
from kvmem.engines.llamacpp.placement import buffer_mib  # noqa: E402
from kvmem.oracles.llamacpp_buffers import in_child, printed_buffers  # noqa: E402
from kvmem.oracles.llamacpp_family_files import write_family  # noqa: E402
from kvmem.oracles.llamacpp_graphs_more import random_delta_case  # noqa: E402
from kvmem.oracles.llamacpp_presets import load  # noqa: E402


def _details(model, ctx, n_rs_seq):
    return kvmem.estimate(model, engine="llama.cpp", tokens=1, n_ctx=ctx["n_ctx"], n_seq=ctx["n_seq"],
                          kv_unified=ctx["kv_unified"], type_k=ctx["type_k"], type_v=ctx["type_v"],
                          flash_attn=bool(ctx["flash_attn"]), n_ubatch=ctx["n_ubatch"], n_batch=ctx["n_ctx"],
                          n_rs_seq=n_rs_seq).details


@pytest.mark.parametrize("seed", range(16))
def test_hybrid_rollback_snapshots_compute_buffers_equal_llamacpp(seed, tmp_path):
    model, fmt, ctx = random_delta_case(seed)
    n_rs_seq = random.Random(f"graphs-rs/{seed}").randint(1, 16)
    # -ub at least n_rs_seq + 2 (below it llama.cpp's first decode aborts and kvmem refuses: rs_seq.kept_rs_seq)
    ctx = dict(ctx, n_ubatch=max(ctx["n_ubatch"], n_rs_seq + 2))
    d = _details(model, ctx, n_rs_seq)
    ctx = dict(ctx, n_rs_seq=n_rs_seq, n_ubatch=d.n_ubatch)
    path = str(tmp_path / "model.gguf")
    write_family(model, fmt, path, source=False)
    printed = in_child(printed_buffers, path, ctx)
    ours = hybrid_graph_bytes(with_rs_seq(delta_shape(model), n_rs_seq), n_kv=d.cells, n_ubatch=d.n_ubatch,
                              flash_attn=bool(ctx["flash_attn"]), type_k=ctx["type_k"], type_v=ctx["type_v"],
                              n_outputs=d.n_batch, n_seq=ctx["n_seq"], kv_unified=ctx["kv_unified"])
    assert f"{ours / 1048576.0:.4f}" == printed["CPU compute 4dp"], (model.model_type, n_rs_seq)
    wired = llamacpp_compute_buffer(model, n_ctx=d.n_ctx, n_ubatch=d.n_ubatch, cells_per_stream=d.cells,
                                    flash_attn=bool(ctx["flash_attn"]), type_k=ctx["type_k"], type_v=ctx["type_v"],
                                    n_outputs=d.n_batch, n_seq=ctx["n_seq"], kv_unified=ctx["kv_unified"],
                                    backend="cpu", n_rs_seq=n_rs_seq)
    assert wired.exact and wired.bytes == ours


@pytest.mark.parametrize("preset", ["qwen3-next-80b-a3b", "qwen3.5-27b", "qwen3.5-397b-a17b"])
def test_hybrid_presets_full_shapes_with_snapshots_equal_llamacpp(preset, tmp_path):
    model = kvmem.get_model(preset)
    path = str(tmp_path / "model.gguf")
    write_family(model, "q4_k_m", path, source=False)
    for n_ctx, n_ubatch, fa, n_rs_seq in ((32768, 512, True, 3), (4096, 2048, False, 16)):
        printed = in_child(load, path, no_alloc=True, n_ctx=n_ctx, n_ubatch=n_ubatch, flash_attn=fa,
                           n_rs_seq=n_rs_seq)["buffers"]
        d = kvmem.estimate(model, engine="llama.cpp", tokens=1, n_ctx=n_ctx, flash_attn=fa, n_ubatch=n_ubatch,
                           n_batch=n_ctx, n_rs_seq=n_rs_seq).details
        ours = hybrid_graph_bytes(with_rs_seq(delta_shape(model), n_rs_seq), n_kv=d.cells, n_ubatch=d.n_ubatch,
                                  flash_attn=fa)
        assert buffer_mib(ours) == printed["CPU compute"], (n_ctx, fa, n_rs_seq)

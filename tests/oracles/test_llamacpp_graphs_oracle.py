"""kvmem's deepseek2 (MLA) and gpt-oss compute graphs (kvmem/engines/llamacpp/graphs_mla_oss.py) against
llama.cpp 0c1e57098 itself (llama-cpp-python 0.3.36, CPU-only): random configs of both families laid out
by kvmem, loaded for real, a context created; the printed "CPU compute buffer size" must equal kvmem's to
the printed MiB and to the four decimals ~llama_context prints (kvmem.oracles.llamacpp_graphs). The
presets' own small copies (DeepSeek-V2-Lite, DeepSeek-V3, gpt-oss-20b cut to a few layers and experts)
too. About 20 s."""

from tests.oracles.conftest import require

require("llama_cpp")

import pytest  # noqa: E402

import kvmem  # noqa: E402
from kvmem.engines.llamacpp.compute import llamacpp_compute_buffer  # noqa: E402
from kvmem.engines.llamacpp.placement import buffer_mib  # noqa: E402
from kvmem.oracles.llamacpp_graphs import random_graph_case, run_graph_case  # noqa: E402


def _kvmem_compute(model, ctx):
    kv = kvmem.estimate(model, engine="llama.cpp", tokens=1, n_ctx=ctx["n_ctx"], n_seq=ctx["n_seq"],
                        kv_unified=ctx["kv_unified"], swa_full=ctx["swa_full"], type_k=ctx["type_k"],
                        type_v=ctx["type_v"], flash_attn=bool(ctx["flash_attn"]), n_ubatch=ctx["n_ubatch"],
                        n_batch=ctx["n_ctx"])
    d = kv.details
    return llamacpp_compute_buffer(model, n_ctx=d["n_ctx"], n_ubatch=d["n_ubatch"], cells_per_stream=d["cells"],
                                   flash_attn=bool(ctx["flash_attn"]), type_k=ctx["type_k"], type_v=ctx["type_v"],
                                   n_outputs=d["n_batch"], n_seq=ctx["n_seq"], kv_unified=ctx["kv_unified"],
                                   swa_cells=d["swa_cells"], backend="cpu")


@pytest.mark.parametrize("seed", range(36))
def test_mla_and_gpt_oss_compute_buffers_equal_llamacpp(seed, tmp_path):
    model, fmt, ctx = random_graph_case(seed)
    printed = run_graph_case(model, fmt, ctx, str(tmp_path / "model.gguf"))
    compute = _kvmem_compute(model, ctx)
    assert compute.exact
    assert buffer_mib(compute.bytes) == printed["CPU compute"]
    assert f"{compute.bytes / 1048576.0:.4f}" == printed["CPU compute 4dp"]

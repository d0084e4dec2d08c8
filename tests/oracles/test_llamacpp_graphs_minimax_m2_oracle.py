"""kvmem's minimax-m2 compute graph (kvmem/engines/llamacpp/graphs_minimax_m2.py: MiniMax-M2 / M2.1 / M2.5) against
llama.cpp 0c1e57098 itself (llama-cpp-python 0.3.36, CPU-only): 24 random minimax_m2 configs laid out by kvmem
(kvmem.oracles.llamacpp_family_files), loaded for real, a context created; the printed "CPU compute buffer size" must
equal kvmem's to the printed MiB and to the four decimals ~llama_context prints. Then MiniMax-M2.5 cut to 4 layers at
real contexts, and at its full shape (no_alloc), as test_llamacpp_graphs_more_oracle.py checks glm4moe."""

from tests.oracles.conftest import require

require("llama_cpp")

import pytest  # noqa: E402

import kvmem  # noqa: E402
from kvmem.engines.llamacpp.compute import graph_bytes, graph_shape  # noqa: E402
from kvmem.engines.llamacpp.placement import buffer_mib  # noqa: E402
from kvmem.model import Model  # noqa: E402
from kvmem.oracles.llamacpp_buffers import in_child  # noqa: E402
from kvmem.oracles.llamacpp_family_files import write_family  # noqa: E402
from kvmem.oracles.llamacpp_graphs_more import random_minimax_m2_case  # noqa: E402
from kvmem.oracles.llamacpp_presets import load  # noqa: E402
from tests.oracles.test_llamacpp_graphs_more_oracle import _check  # noqa: E402


@pytest.mark.parametrize("seed", range(24))
def test_minimax_m2_compute_buffers_equal_llamacpp(seed, tmp_path):
    model, fmt, ctx = random_minimax_m2_case(seed)
    assert graph_shape(model) is not None
    _check(model, fmt, ctx, str(tmp_path / "model.gguf"))


@pytest.mark.parametrize("n_ctx, n_ubatch, fa, type_k", [(4096, 512, 1, "f16"), (8192, 2048, 1, "q8_0"),
                                                         (4096, 512, 0, "f16"), (1000, 7, 0, "f16")])
def test_minimax_m2_5_cut_to_four_layers_equals_llamacpp(n_ctx, n_ubatch, fa, type_k, tmp_path):
    # MiniMax-M2.5's own widths (48 heads of 128, 8 KV heads, RoPE over 64, 256 experts of 1536, 8 used, sigmoid
    # routing, vocab 200064), four layers (402.7520 / 1611.0078 / 438.0098 / 5.5064 MiB when this was built)
    cfg = dict(kvmem.get_model("minimax-m2.5").config)
    cfg["num_hidden_layers"] = 4
    model = Model.from_hf_config(cfg, name="minimax-m2.5-cut")
    ctx = dict(n_ctx=n_ctx, n_ubatch=n_ubatch, flash_attn=fa, type_k=type_k, type_v=type_k, mmap=True, n_seq=1,
               kv_unified=False, swa_full=False)
    _check(model, "q4_0", ctx, str(tmp_path / "model.gguf"))


def test_minimax_m2_5_full_shape_prompt_graph_equals_llamacpp(tmp_path):
    # every layer (a sparse GGUF of the whole model, never read): loaded with no_alloc, llama.cpp prints the prompt
    # graph's reserve (kvmem.oracles.llamacpp_presets.load), the larger graph at these n_ubatch
    model = kvmem.get_model("minimax-m2.5")
    path = str(tmp_path / "model.gguf")
    write_family(model, "q4_k_m", path, source=False)
    for n_ctx, n_ubatch, fa in ((4096, 512, True), (32768, 512, False), (65536, 2048, True)):
        printed = in_child(load, path, no_alloc=True, n_ctx=n_ctx, n_ubatch=n_ubatch, flash_attn=fa)["buffers"]
        d = kvmem.estimate(model, engine="llama.cpp", tokens=1, n_ctx=n_ctx, flash_attn=fa, n_ubatch=n_ubatch,
                           n_batch=n_ctx).details
        ours = graph_bytes(graph_shape(model), n_kv=d.cells, n_ubatch=d.n_ubatch, flash_attn=fa)
        assert buffer_mib(ours) == printed["CPU compute"], (n_ctx, fa)

"""kvmem's minimax-m3 compute graph (kvmem/engines/llamacpp/graphs_minimax_m3.py: MiniMax-M3's text model, MSA) against
llama.cpp 0c1e57098 itself (llama-cpp-python 0.3.36, CPU-only): 44 random minimax-m3 configs
(kvmem.oracles.llamacpp_minimax_m3_cases: flash attention on with MSA, off, or on with several sequences in one unified
stream and so dense; 1-4 sequences, ubatches of 1-512, 2-6 layers, MSA blocks of 16-128 positions, 96 among them)
written by kvmem.oracles.llamacpp_minimax01.write_minimax_m3, loaded for real, a context created: the printed "CPU
compute buffer size" must equal kvmem's to the printed MiB and to the four decimals ~llama_context prints. Then
MiniMax-M3 cut to 4 layers (its 3 dense-lead layers and one sparse one) at real contexts, and at its full shape
(no_alloc). About 15 s."""

from tests.oracles.conftest import require

require("llama_cpp")

import pytest  # noqa: E402

import kvmem  # noqa: E402
from kvmem.engines.llamacpp.compute import graph_bytes, graph_shape  # noqa: E402
from kvmem.engines.llamacpp.placement import buffer_mib  # noqa: E402
from kvmem.oracles.llamacpp_buffers import in_child, printed_buffers  # noqa: E402
from kvmem.oracles.llamacpp_minimax01 import write_minimax_m3  # noqa: E402
from kvmem.oracles.llamacpp_minimax_m3_cases import minimax_m3_cut, random_minimax_m3_case  # noqa: E402
from kvmem.oracles.llamacpp_presets import load  # noqa: E402
from tests.oracles.test_llamacpp_graphs_more_oracle import _kvmem_compute  # noqa: E402


def _check(model, ctx, path):
    write_minimax_m3(model, "q4_0", path)
    printed = in_child(printed_buffers, path, ctx)
    compute = _kvmem_compute(model, ctx)
    assert compute.exact
    assert buffer_mib(compute.bytes) == printed["CPU compute"]
    assert f"{compute.bytes / 1048576.0:.4f}" == printed["CPU compute 4dp"]


# seeds 0-39 (14 with MSA on) and four with MSA blocks of 96 positions (GGML_PAD(256, 96) is 256, not 288)
@pytest.mark.parametrize("seed", [*range(40), 44, 61, 65, 71])
def test_minimax_m3_compute_buffers_equal_llamacpp(seed, tmp_path):
    model, ctx = random_minimax_m3_case(seed, dict(kvmem.get_model("minimax-m3").config))
    assert graph_shape(model) is not None
    _check(model, ctx, str(tmp_path / "model.gguf"))


@pytest.mark.parametrize("n_ctx, n_ubatch, fa, type_k, n_seq, unified", [
    (4096, 512, 1, "f16", 1, False), (8192, 2048, 1, "q8_0", 1, False), (4096, 512, 0, "f16", 1, False),
    (1000, 7, 1, "f16", 1, False), (4096, 1, 1, "f16", 1, False), (4096, 512, 1, "f16", 2, False),
    (4096, 512, 1, "f16", 2, True), (2048, 3, 1, "q4_0", 3, False)])
def test_minimax_m3_cut_to_four_layers_equals_llamacpp(n_ctx, n_ubatch, fa, type_k, n_seq, unified, tmp_path):
    # MiniMax-M3's own widths (64 heads of 128, 4 KV heads and 4 indexer heads of 128, RoPE over 64, 128 experts of
    # 3072, 4 used, a shared one, sigmoid routing scaled by 2, MSA blocks of 128, top 16, vocab 200064), 4 layers
    model = minimax_m3_cut(dict(kvmem.get_model("minimax-m3").config), 4)
    ctx = dict(n_ctx=n_ctx, n_ubatch=n_ubatch, flash_attn=fa, type_k=type_k, type_v=type_k, mmap=True, n_seq=n_seq,
               kv_unified=unified, swa_full=False)
    _check(model, ctx, str(tmp_path / "model.gguf"))


def test_minimax_m3_full_shape_prompt_graph_equals_llamacpp(tmp_path):
    # every layer (a sparse GGUF of the whole model, never read): loaded with no_alloc, llama.cpp prints the prompt
    # graph's reserve (kvmem.oracles.llamacpp_presets.load)
    model = kvmem.get_model("minimax-m3")
    path = str(tmp_path / "model.gguf")
    write_minimax_m3(model, "q4_k_m", path)
    for n_ctx, n_ubatch, fa in ((4096, 512, True), (32768, 512, False), (65536, 2048, True), (131072, 512, True)):
        printed = in_child(load, path, no_alloc=True, n_ctx=n_ctx, n_ubatch=n_ubatch, flash_attn=fa)["buffers"]
        d = kvmem.estimate(model, engine="llama.cpp", tokens=1, n_ctx=n_ctx, flash_attn=fa, n_ubatch=n_ubatch,
                           n_batch=n_ctx).details
        ours = graph_bytes(graph_shape(model), n_kv=d.cells, n_ubatch=d.n_ubatch, flash_attn=fa)
        assert buffer_mib(ours) == printed["CPU compute"], (n_ctx, fa)

"""llama.cpp's gated FFN before PR #14158 (a0535ffa0, 2025-06-29, build 5776): ggml_silu / ggml_gelu of the gate then
ggml_mul by up, each in place, where later builds make one GLU op with its own output (graphs.glu,
graphs.swiglu_fused, graphs.glu_dated)."""

from __future__ import annotations

import datetime

import pytest

import kvmem
from kvmem.engines.llamacpp.compute import graph_shape
from kvmem.engines.llamacpp.graph_build import build_graph
from kvmem.engines.llamacpp.graphs import Pass
from kvmem.engines.llamacpp.settings import PR_14158, PR_ROWS
from kvmem.logcheck import check_log

from .test_llamacpp_nkvo import SCOUT

BEFORE, MERGED = datetime.date(2025, 6, 28), datetime.date(2025, 6, 29)


def test_the_merge_is_dated_from_the_mirror():
    # git --git-dir=ngxson+llama.cpp log -S ggml_swiglu -- src/llama-graph.cpp: the oldest is a0535ffa0, committed
    # 2025-06-29, rev-list --count 5776
    assert PR_ROWS[14158][:3] == (5776, "2025-06-29", "a0535ffa0") and PR_14158 == MERGED


def _ops(model: str, build) -> dict:
    shape = graph_shape(kvmem.get_model(model), build)
    graph = build_graph(shape, Pass(512, 512, 4096, 1, True, "f16", "f16"))
    ops: dict = {}
    for t in graph.nodes:
        ops[t.op] = ops.get(t.op, 0) + 1
    return {"n_layer": shape.n_layer, **ops}


# (preset, FFNs per layer): llama / qwen3moe / gemma2 / gemma3 (graphs.ffn, graphs._moe: build_ffn's parallel gate,
# GELU for gemma), phi3 and glm4 (one fused ffn_up: graphs.swiglu_fused), deepseek2 (a dense lead layer, then routed
# + shared experts: graphs_mla_oss), llama4 (routed + shared: graphs_llama4)
@pytest.mark.parametrize("model, per_layer", [("llama-3.1-8b", 1), ("qwen3-30b-a3b", 1), ("gemma-2-9b", 1),
                                              ("gemma-3-12b", 1), ("phi-3-mini-4k", 1), ("glm-4-9b-0414", 1),
                                              ("deepseek-v2-lite", None), ("llama-4-scout-17b-16e", 2)])
def test_one_glu_op_per_ffn_from_the_merge_an_activation_and_a_mul_before(model, per_layer):
    after, before = _ops(model, MERGED), _ops(model, BEFORE)
    n_layer = after["n_layer"]
    ffns = per_layer * n_layer if per_layer else 1 + 2 * (n_layer - 1)     # deepseek-v2-lite: 1 dense, 26 x 2
    assert after.get("GLU", 0) == ffns and "GLU" not in before
    assert before["UNARY"] - after.get("UNARY", 0) == ffns
    assert before["MUL"] - after["MUL"] == ffns
    # phi3 / glm4: each half of the fused product copied out (ggml_cont of a view_2d) before the merge
    assert before.get("CONT", 0) - after.get("CONT", 0) == (2 * ffns if model in ("phi-3-mini-4k", "glm-4-9b-0414")
                                                             else 0)
    now = _ops(model, None)                 # the current build: the merged form
    assert all(now.get(op) == after.get(op) for op in ("GLU", "UNARY", "MUL"))


def test_the_heldout_scout_log_vulkan1_by_build():
    # docs/research/heldout/llamacpp_logs_2026-12-07.md row 10 (an April 2025 build, -ngl 11 -nkvo): Vulkan1
    # printed 72.00 MiB. From the merge the shared expert's GLU allocates its own [8192, 512] f32 output beside gate
    # and up: 8192 x 512 x 4 B = 16.00 MiB more
    def vulkan1(build):
        checks = {c.quantity: c.kvmem for c in check_log(SCOUT, weight_format="ud_q2_k_xl", build=build).checks}
        return float(checks["Vulkan1 compute buffer"].split()[0])
    assert vulkan1(BEFORE) == 72.09 and vulkan1(MERGED) == 72.09 + 8192 * 512 * 4 / 2**20 == 88.09

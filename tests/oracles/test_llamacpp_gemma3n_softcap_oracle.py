"""gemma3n's final logit softcap against llama.cpp 0c1e57098 itself: src/models/gemma3n.cpp#L306-L311 builds it
whatever the file says, so a GGUF written from a config without final_logit_softcapping (no softcap key) builds
as many graph nodes as one with it ("sched_reserve: graph: nodes = N"), and kvmem's graph (graphs_gemma3n) has N
nodes either way. About 2 s."""

from tests.oracles.conftest import require

require("llama_cpp")

import re  # noqa: E402

import pytest  # noqa: E402

import kvmem  # noqa: E402
from kvmem.engines.llamacpp.compute import graph_shape  # noqa: E402
from kvmem.engines.llamacpp.graphs import Pass  # noqa: E402
from kvmem.engines.llamacpp.graphs_gemma3n import build_gemma3n  # noqa: E402
from kvmem.model import Model  # noqa: E402
from kvmem.oracles.llamacpp_buffers import in_child, llama_lib, printed_buffers  # noqa: E402
from kvmem.oracles.llamacpp_gemma3n import random_gemma3n_case, write_gemma3n  # noqa: E402

NODES = re.compile(r"graph: nodes = (\d+),")


def _nodes(path: str, ctx: dict) -> int:
    _lib, lines, _ = llama_lib()
    printed_buffers(path, ctx)
    found = [int(m.group(1)) for m in map(NODES.search, "".join(lines).splitlines()) if m]
    return found[-1]


@pytest.mark.parametrize("seed", (0, 3))
def test_the_softcap_is_in_llamacpps_graph_without_the_key(seed, tmp_path):
    model, fmt, ctx = random_gemma3n_case(seed)
    counts = []
    for softcap in (True, False):
        cfg = dict(model.config)
        if not softcap:
            del cfg["final_logit_softcapping"]
        m = Model.from_hf_config(cfg, name=f"random-gemma3n-{seed}-{softcap}")
        path = str(tmp_path / f"model-{softcap}.gguf")
        write_gemma3n(m, fmt, path)
        theirs = in_child(_nodes, path, dict(ctx, swa_full=False))
        d = kvmem.estimate(m, engine="llama.cpp", tokens=1, n_ctx=ctx["n_ctx"], swa_full=False, type_k=ctx["type_k"],
                           type_v=ctx["type_v"], flash_attn=bool(ctx["flash_attn"]), n_ubatch=ctx["n_ubatch"],
                           n_batch=ctx["n_ctx"]).details
        g = build_gemma3n(graph_shape(m), Pass(d.n_ubatch, d.n_ubatch, d.cells, 1, bool(ctx["flash_attn"]),
                                               ctx["type_k"], ctx["type_v"], d.swa_cells))
        assert len(g.nodes) == theirs, softcap
        counts.append(theirs)
    assert counts[0] == counts[1]

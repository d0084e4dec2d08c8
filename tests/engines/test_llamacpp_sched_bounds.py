"""ggml_sched.sched_bounds (the bytes a backend allocates, summed: its buffer's high-water mark cannot exceed them) is
at least sched_sizes on every backend, on seeded random graphs and placements and on llama.cpp graphs; and
scheduled._sized, which skips the one-token graph where its bounds are within the prompt graph's buffers, answers as
the whole computation does. Bounded: ~4 s."""

import random

import pytest

import kvmem
from kvmem.engines.llamacpp import ggml_sched, layouts, scheduled
from kvmem.engines.llamacpp.best import _tensors
from kvmem.engines.llamacpp.graph_build import build_graph
from kvmem.engines.llamacpp.graphs import GraphShape, Pass
from kvmem.engines.llamacpp.offload import weight_format

from .test_llamacpp_ggml_fast import _placement, _random_graph


def _sizes_and_bounds(graph, rng, n_gpus, **options):
    """sched_sizes and sched_bounds on the same draws of the placement."""
    seed, n_copies = rng.random(), options.get("n_copies", 1)
    answers = []
    for call in (ggml_sched.sched_sizes, ggml_sched.sched_bounds):
        wb, nbytes, norms, alloc_size = _placement(seed, n_gpus, options.get("unplaced", False))
        extra = {"copy_unused_inputs": options.get("copy_unused", True)} if call is ggml_sched.sched_sizes else {}
        answers.append(call(graph, wb, n_gpus, weight_bytes=nbytes if options.get("placed", True) else None,
                            norm_backend=norms if options.get("pins") else None,
                            gpu_alloc_size=alloc_size if options.get("fa") else None, n_copies=n_copies,
                            op_offload=options.get("offload", True), **extra))
    return answers


@pytest.mark.parametrize("seed", range(60))
def test_the_bounds_hold_on_random_graphs(seed):
    rng = random.Random(seed)
    graph = _random_graph(rng, rng.randint(10, 80))
    for _ in range(4):
        n_gpus = rng.randint(1, 4)
        sizes, bounds = _sizes_and_bounds(graph, rng, n_gpus, n_copies=rng.choice((1, 1, 2, 4)), pins=rng.random() < 0.5,
                                          fa=rng.random() < 0.5, offload=rng.random() < 0.8,
                                          unplaced=rng.random() < 0.2, placed=rng.random() < 0.8,
                                          copy_unused=rng.random() < 0.5)
        assert bounds is None or all(s <= b for s, b in zip(sizes, bounds, strict=True)), (sizes, bounds)
    assert sum(sizes) > 0


SHAPES = (GraphShape("llama", 5, 512, 4, 4, 128, 1536, 512),
          GraphShape("qwen3moe", 3, 256, 2, 2, 128, 0, 2048, 4, 2, 256))


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.arch)
def test_the_bounds_hold_on_llamacpp_graphs(shape):
    rng = random.Random(7)
    for p in (Pass(64, 64, 256, 1, True, "f16", "q8_0"), Pass(1, 1, 512, 1, False, "f16", "f16"),
              Pass(512, 512, 1024, 2, True, "q8_0", "q8_0")):
        graph = build_graph(shape, p)
        for n_gpus in (1, 2, 3):
            sizes, bounds = _sizes_and_bounds(graph, rng, n_gpus, n_copies=rng.choice((1, 4)), pins=True, fa=True)
            assert all(s <= b for s, b in zip(sizes, bounds, strict=True)), (sizes, bounds)


def test_sized_skips_the_one_token_graph_only_where_it_cannot_change_a_buffer(monkeypatch):
    """GLM-5.1 (DSA: its graph is never cut) q4_k_m on 2-4 GPUs with 2 sequences (the one-token graph is scheduled:
    one_token_graph_dominated is False, as in kvmem fit's verdicts), every layer on the GPUs, --n-cpu-moe and the
    split drawn: the bytes per device equal those with both graphs scheduled, and the one-token graph was skipped
    where the bounds allow it (it allocates ~1 MiB per device, its prompt graph hundreds; with a layer on the host,
    as in the first and last layouts, the host's bound, every allocation of its layers summed, passes its prompt
    buffer: 54,859,680 > 33,632,288 B in the first)."""
    model = kvmem.get_model("glm-5.1")
    tensors = _tensors(model, weight_format(model, "q4_k_m"))[0]
    rng = random.Random(5)
    within = scheduled._graph_within
    answers: dict = {}
    for skip in (True, False):
        calls = []
        monkeypatch.setattr(scheduled, "_graph_within",
                            (lambda *a, seen=calls: seen.append(within(*a)) or seen[-1]) if skip else (lambda *a: False))
        scheduled._graph_sizes.cache_clear()
        rng.seed(5)
        for n_gpu_layers in (model.num_layers + 1, model.num_layers + 1, 40):
            k = rng.randint(2, 4)
            lay = layouts.layout(model, tensors, gpus=tuple(f"CUDA{i}" for i in range(k)), n_gpu_layers=n_gpu_layers,
                                 tensor_split=tuple(rng.randint(1, 5) for _ in range(k)),
                                 n_cpu_moe=rng.randint(0, model.num_layers), n_ctx=8192, flash_attn=True, n_seq=2)
            answers.setdefault(skip, []).append(lay)
        if skip:
            assert calls == [False, True, False], calls     # the host holds layer 0 in the first
    assert answers[True] == answers[False]

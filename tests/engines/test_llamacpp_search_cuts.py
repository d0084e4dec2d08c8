"""Layouts a llama.cpp placement command no longer lays out (issue 34 item 5), each cut deciding as what it stands
for: fit.cpp's probes settled by their weights alone (fit_probes.Probe, fitting._weights_floor), the verdict alone of
sizing.min_gpus (best.placement_holds) and kvmem's own searches past --fit on's (verdict_search.beyond)."""

from __future__ import annotations

import random

import pytest

import kvmem
from kvmem.engines.llamacpp import fitting
from kvmem.engines.llamacpp.best import _tensors, best_layout, placement_holds
from kvmem.engines.llamacpp.fit_probes import Probe
from kvmem.engines.llamacpp.fitting import _weights_floor, fit_layout, fit_on
from kvmem.engines.llamacpp.layouts import CUDA_CONTEXT_BYTES
from kvmem.engines.llamacpp.placement import CPU, cuda_alloc_bytes

GiB = 1 << 30
KW = dict(n_ubatch=512, type_k="f16", type_v="f16", flash_attn=None, mmap=True, kv_offload=True, n_seq=1)


def _probe(rng: random.Random, n: int, gpus: tuple) -> tuple:
    """A share of the layers per GPU as fit.cpp writes them (fit_layout's per_device, overflow)."""
    left, per, over = n + 1, [], []
    for d in range(len(gpus)):
        layers = rng.randint(0, left) if d < len(gpus) - 1 else left
        part = rng.randint(0, layers)
        per.append((layers, part, rng.choice(["MOE", "UP", "GATE", "ATTN"]) if part else "MOE"))
        over.append(gpus[d + 1] if d + 1 < len(gpus) and rng.random() < 0.5 else CPU)
        left -= layers
    return per, over


@pytest.mark.parametrize("name, n_ctx", [("qwen3-30b-a3b", 32768), ("deepseek-v2-lite", 16384),
                                          ("gpt-oss-20b", 8192)])
def test_a_probes_weights_are_its_layouts_and_at_most_what_it_takes(name, n_ctx):
    """12 seeded probes a model on 2-3 GPUs: the floor is exactly what the probe's own layout puts on each GPU but
    its compute buffer (weights and KV: the layout without a graph places every tensor and cell alike), on the first
    GPU plus the copy of its largest host expert before the last layer (host_weights.copy_floor: the prompt's MUL_MAT_ID
    offloaded there), and at most what fit reads there (total less the CUDA context: weights + KV + compute buffer)."""
    model = kvmem.get_model(name)
    tensors = _tensors(model, "q4_k_m")[0]
    rng = random.Random(34)
    copied = 0
    for i in range(12):
        gpus = ("CUDA0", "CUDA1", "CUDA2")[:2 + i % 2]
        per, over = _probe(rng, model.num_layers, gpus)
        floor = _weights_floor(model, tensors, gpus, dict(per_device=per, overflow=over, kw=KW, n_ctx=n_ctx))
        lay = fit_layout(model, tensors, gpus, per, over, KW, n_ctx)
        host = [cuda_alloc_bytes(t) for t in lay.placement.tensors if t.device == CPU
                and t.name.endswith("_exps.weight") and t.layer < model.num_layers - 1]
        copy = -(-max(host, default=0) // 128) * 128
        copied += copy > 0
        for d, g in enumerate(gpus):
            own = lay.placement.device(g).model_bytes + lay.placement.device(g).kv_bytes
            assert floor[d] == own + (copy if d == 0 else 0), (per, over, g)
            assert floor[d] <= lay.total_bytes[g] - CUDA_CONTEXT_BYTES
        assert any(lay.placement.device(g).kv_bytes for g in gpus) or not any(p[0] for p in per)
    assert copied


def test_a_probe_settled_by_its_floor_is_not_laid_out():
    laid = []

    def exact():
        laid.append(1)
        return [10, 50]
    probe = Probe(exact, None, lambda: [8, 45])
    # floors 8 and 45 against 40: device 1 is over whatever its compute adds; device 0 is not settled
    assert probe.over(1, 40) and not laid
    assert not probe.under(((0, 40), (1, 40))) and not laid
    assert probe.under(((0, 40),)) and laid == [1]            # 10 < 40, read from the layout
    assert not probe.over(0, 10) and probe.over(0, 9) and probe[1] == 50 and laid == [1]
    # the floor equal to the target: not under it, and over it only by the layout's word
    fresh = Probe(lambda: [20, 30], None, lambda: [20, 30])
    assert not fresh.under(((0, 20),)) and not fresh.over(0, 20)


@pytest.mark.parametrize("name, cards", [("glm-4.5-air", 2), ("qwen3-235b-a22b", 3), ("gpt-oss-120b", 2),
                                         ("llama-3.3-70b", 2)])
def test_fit_on_chooses_as_when_every_probe_is_laid_out(name, cards, monkeypatch):
    """--fit on's choice and note with the floors, and with every probe laid out (the floor made the exact value):
    the same flags, the same bytes; fewer layouts scheduled with the floors."""
    model = kvmem.get_model(name)
    tensors = _tensors(model, "q4_k_m")[0]
    gpus = tuple(f"CUDA{i}" for i in range(cards))
    free = dict.fromkeys(gpus, 24 * GiB - 2 * CUDA_CONTEXT_BYTES)
    counted = []
    real = fitting._layout

    def counting(*args, **kw):       # the layouts the search schedules a graph for (the floors are not among them)
        assert kw.get("kv_offload", True)
        counted.append(1)
        return real(*args, **kw)
    monkeypatch.setattr(fitting, "_layout", counting)
    fitting._LAID.clear()
    lay, note = fit_on(model, tensors, gpus, free, n_ctx=32768, kw=KW)
    lazy = sum(counted)
    monkeypatch.setattr(Probe, "floor", lambda self, d: self[d])
    fitting._LAID.clear()
    counted.clear()
    lay_all, note_all = fit_on(model, tensors, gpus, free, n_ctx=32768, kw=KW)
    assert lay.flags() == lay_all.flags() and note == note_all
    assert lay.total_bytes == lay_all.total_bytes
    assert lazy <= sum(counted)


@pytest.mark.parametrize("name, gib, cards", [
    ("qwen3-30b-a3b", 24, 1),       # MoE, every layer with its experts fits a 3090
    ("qwen3-235b-a22b", 24, 1),     # MoE, the experts on the host
    ("qwen3-235b-a22b", 2, 1),      # MoE, not even the dense parts of -ngl 0
    ("llama-3.3-70b", 24, 1),       # dense, partial offload
    ("llama-3.3-70b", 1, 1),        # dense, not even one layer
    ("llama-3.1-8b", 24, 1),        # dense, every layer
    ("qwen3-235b-a22b", 24, 2), ("llama-3.3-70b", 12, 2), ("llama-3.3-70b", 1, 3)])
def test_placement_holds_is_the_placements_own_word(name, gib, cards):
    model = kvmem.get_model(name)
    budgets = tuple((f"CUDA{i}", gib * GiB) for i in range(cards))
    options = tuple(sorted({**KW, "n_ctx": 32768, "mmproj_bytes": 0, "mmproj_offload": True,
                            "mmproj_compute": None}.items()))
    fitting._LAID.clear()
    from kvmem.engines.llamacpp import best
    best._BEST.clear()
    said = placement_holds(model, "q4_k_m", budgets, options)
    lay = best_layout(model, "q4_k_m", budgets, options)[0]
    assert said == (lay is not None and lay.fits(dict(budgets)))
    assert placement_holds(model, "q4_k_m", budgets, options) == said     # from best_layout's kept answer


def test_beyond_is_the_larger_of_the_known_and_the_search():
    """verdict_search.beyond over every boundary b (fits(u) = u <= b) and known value 0-12 of a cap of 10: max(known,
    largest_fitting's answer), the search run only where the flags hold one past the known value."""
    from kvmem.engines.llamacpp.verdict_search import beyond
    from kvmem.sizing.search import largest_fitting
    for b in range(1, 11):
        for known in range(13):
            searched = []

            def search(b=b, searched=searched):
                searched.append(1)
                return largest_fitting(lambda u: u <= b, 10, 3)
            got = beyond(known, lambda known=known, b=b: known < 10 and known + 1 <= b, search)
            assert got == max(known, min(b, 10))
            assert bool(searched) == (known < b)

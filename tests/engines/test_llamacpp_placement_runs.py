"""What a llama.cpp layout derives per run of one layer's placed tensors (Placement.runs, placed.per_run), and the
override rules tried per layer (overrides.Rules._order), equal what the tensor-by-tensor rules give (issue 34 item 5:
a placement trial's own cost)."""

from __future__ import annotations

from dataclasses import replace

import kvmem
from kvmem.engines.llamacpp import fitting, layouts
from kvmem.engines.llamacpp.best import _tensors
from kvmem.engines.llamacpp.fitting import fit_on
from kvmem.engines.llamacpp.offload import weight_format
from kvmem.engines.llamacpp.overrides import Rules, compile_rules
from kvmem.engines.llamacpp.placement import CPU, GROUPS, place
from kvmem.engines.llamacpp.plan import settled_plan


def _search(name: str, n_gpus: int, budget: int) -> list:
    """(model, layout) of each layout --fit's search lays out for ``name`` (q4_k_m, 8k) on ``n_gpus`` cards of
    ``budget`` bytes free."""
    model = kvmem.get_model(name)
    tensors = _tensors(model, weight_format(model, "q4_k_m"))[0]
    seen = []
    saved = fitting._layout

    def keep(*args, **kw):
        seen.append(saved(*args, **kw))
        return seen[-1]
    gpus = tuple(f"CUDA{i}" for i in range(n_gpus))
    fitting._layout = keep
    fitting._LAID.clear()
    try:
        fit_on(model, tensors, gpus, dict.fromkeys(gpus, budget), n_ctx=8192, kw={})
    finally:
        fitting._layout = saved
        fitting._LAID.clear()
    return [(model, lay) for lay in seen]


def test_runs_hold_the_placed_tensors_in_order_and_their_sums():
    """Qwen3-30B-A3B's --fit search on two 8 GiB cards (dense parts back to front, then whole layers, one -ot for
    the host's experts): per layout, the runs are the tensors in order, each device's group bytes the sum of its
    tensors', and the decode bytes the per-tensor rule (experts top_k/n_experts of each tensor, token_embd none)."""
    laid = _search("qwen3-30b-a3b", 2, 8 << 30)
    assert len(laid) >= 8
    moe = laid[0][0].facts.moe
    for _, lay in laid:
        p = lay.placement
        assert tuple(t for run in p.runs for t in run) == p.tensors
        for d in p.devices:
            mine = [t for t in p.tensors if t.device == d.device]
            assert d.group_bytes == {g: sum(t.nbytes for t in mine if t.group == g) for g in GROUPS}
            want = sum(t.nbytes * moe.top_k // moe.experts if t.group == "experts" else t.nbytes
                       for t in mine if t.group != "embeddings")
            assert lay.decode_bytes[d.device] == want + d.kv_bytes
    # the searches' trials share runs: a layer placed alike is the same tuple in every layout
    shared = {id(run) for run in laid[0][1].placement.runs} & {id(run) for run in laid[-1][1].placement.runs}
    assert shared


def test_the_graph_weights_from_runs_equal_those_from_the_tensors():
    """_scheduled's host and moved weights, derived per run (kept per run) and from the tensors as one (a placement
    without runs): the same GPU compute buffers for every layout of Qwen3-30B-A3B's and gpt-oss-20b's searches."""
    for name, n_gpus, budget in (("qwen3-30b-a3b", 2, 8 << 30), ("gpt-oss-20b", 3, 4 << 30)):
        for model, lay in _search(name, n_gpus, budget):
            p = lay.placement
            s, plan = settled_plan(model, tokens=1, batch=1, kv_dtype="fp16", tp=1, pp=1,
                                   options={**layouts.DEFAULTS, "n_ctx": lay.n_ctx})
            args = layouts._scheduled(model, p, s, plan, model.num_layers, False)
            assert args is not None
            assert args == layouts._scheduled(model, replace(p, runs=()), s, plan, model.num_layers, False)
            got = layouts.gpu_graph_bytes(**args)
            assert list(got) == [lay.compute_bytes[g] for g in p.gpus] + [lay.compute_bytes[CPU]]


def test_a_run_placed_alike_is_one_tuple():
    """Two trials of one -ngl and -ts, each moving another expert tensor: the layers they place alike share their
    run, the layer whose tensor moved has its own."""
    model = kvmem.get_model("qwen3-30b-a3b")
    tensors = tuple(_tensors(model, weight_format(model, "q4_k_m"))[0])
    flags = dict(n_layer=48, gpus=("CUDA0", "CUDA1"), n_gpu_layers=49, tensor_split=(20, 29))
    first = place(tensors, **flags, override_tensor=((r"blk\.30\.ffn_down_exps\.weight", "CUDA0"),))
    again = place(tensors, **flags, override_tensor=((r"blk\.31\.ffn_down_exps\.weight", "CUDA0"),))
    def run(p, layer):
        return next(r for r in p.runs if r[0].layer == layer)
    assert run(first, 4) is run(again, 4)       # placed alike: one tuple
    assert run(first, 30) is not run(again, 30)
    # layer 30's ffn_down_exps (CUDA1 by -ts 20,29: 30/49 >= 20/49) on CUDA0 in the first, back on CUDA1 in the second
    down = "blk.30.ffn_down_exps.weight"
    assert [t.device for t in run(first, 30) if t.name == down] == ["CUDA0"]
    assert [t.device for t in run(again, 30) if t.name == down] == ["CUDA1"]


def test_rules_tried_per_layer_are_those_that_can_match_it():
    """Rules._order: per layer, the rules with no blk prefix and those naming the layer, in the command's order."""
    rules = Rules(compile_rules(3, False, ((r"blk\.(4|5|6)\.ffn_(up|down)_exps", "CPU"), (r"\.ffn_gate_inp", "CPU"),
                                           (r"blk\.5\.ffn_down_exps\.weight", "CUDA0"), (r"attn_q", "CUDA1"))))
    assert rules._order(5)[0] == (0, 1, 2, 3)
    assert rules._order(4)[0] == (0, 1, 3)
    assert rules._order(1)[0] == (1, 3, 4)      # --n-cpu-moe 3: the last rule, blk\.(?:0|1|2)\.
    assert rules._order(9)[0] == (1, 3)
    assert rules._order(None)[0] == (1, 3)
    assert rules._order(9)[1] is None           # \.ffn_gate_inp has no blk prefix: no tails
    for layer in (None, *range(12)):
        assert rules._order(layer)[0] == tuple(i for i, layers in enumerate(rules.layers)
                                               if layers is None or layer in layers)

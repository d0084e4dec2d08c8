"""The shortcuts that make llama.cpp placement searches fast (issue 34 item 5) decide exactly as the
rules they stand for: tensor overrides matched through their tails (overrides.Rules), a placement's
tensors reused from one set of flags to the next (placement._placed)."""

from __future__ import annotations

import random

import kvmem
from kvmem.engines.llamacpp.best import _tensors
from kvmem.engines.llamacpp.offload import weight_format
from kvmem.engines.llamacpp.overrides import Rules, _first_tail, compile_rules
from kvmem.engines.llamacpp.placement import CPU, layer_devices, place, tensor_group
from kvmem.units import pad

RESTS = ("ffn_up_exps.weight", "ffn_down_exps.weight", "ffn_gate_exps.weight", "ffn_gate_up_exps.weight",
         "ffn_up_chexps.weight", "ffn_gate_inp.weight", "ffn_norm.weight", "attn_q.weight", "attn_k.bias",
         "ffn_up_shexp.weight", "ffn_down.weight", "ffn_gate.weight", "exp_probs_b.bias")
NAMES = [f"blk.{il}.{rest}" for il in range(24) for rest in RESTS] + [
    "token_embd.weight", "output.weight", "output_norm.weight", "blk.05.ffn_up_exps.weight"]
TAILS = (r"ffn_(up|down|gate_up|gate)_(ch|)exps", r"ffn_(gate|gate_up|down).*", r"ffn_down.*", r"ffn_down_exps\.weight",
         r"ffn_up", r"attn.*", r".*", r"ffn_(up|down)_exps$", r"(ffn|attn)_k", r"^ffn", r"\bffn_up", r"ffn_up|attn_q",
         r"(?=ffn)ffn_up", r"(ffn)_up_\1")


def _rule(rng: random.Random) -> tuple:
    tail, kind = rng.choice(TAILS), rng.random()
    if kind < 0.45:       # blk\.(N|M|...)\. as fit and --n-cpu-moe write it; now and then a 05 among them
        layers = "|".join(map(str, sorted(rng.sample(range(24), rng.randint(1, 20)))))
        layers = layers if rng.random() < 0.9 else "05|" + layers
        head = rf"blk\.({layers})\." if rng.random() < 0.5 else rf"blk\.(?:{layers})\."
    elif kind < 0.8:      # one layer, as kvmem's top-up writes re.escape(name)
        head = rf"blk\.{rng.randrange(24)}\."
    elif kind < 0.9:
        head = r"\."
    else:                 # no dot after the layer: not a blk\.N\. rule
        head = rf"blk\.{rng.randrange(24)}"
    return head + tail, rng.choice(["CPU", "CUDA0", "CUDA1"])


def test_tails_decide_as_the_first_pattern_that_searches_the_name():
    """300 seeded rule sets (-ot rules, --n-cpu-moe, --cpu-moe) x 316 names: Rules.target is the target of
    the first compiled pattern whose re.search finds the name (create_tensor's loop), tails or not."""
    rng = random.Random(34)
    for _ in range(300):
        rules = compile_rules(rng.choice([0, 0, 5, 20]), rng.random() < 0.1,
                              tuple(_rule(rng) for _ in range(rng.randint(1, 6))))
        got = Rules(rules)
        for name in NAMES:
            assert got.target(name) == next((t for p, t in rules if p.search(name)), None), (rules, name)


def test_the_patterns_kvmem_writes_are_decided_by_their_tails():
    """fit's one -ot for the layers whose experts stay on the host, its split layer's FFN and the top-up's one
    tensor each leave a tail; a tail with an anchor, lookahead or backreference does not."""
    rules = compile_rules(3, False, ((r"blk\.(4|5|6)\.ffn_(up|down|gate_up|gate)_(ch|)exps", "CPU"),
                                     (r"blk\.13\.ffn_(gate|gate_up|down).*", "CUDA1"),
                                     (r"blk\.40\.ffn_down_exps\.weight", "CUDA0"), (r"blk\.7\.^x", "CPU"),
                                     (r"blk\.8\.(?=a)a", "CPU"), (r"blk\.9\.(a)\1", "CPU")))
    tails = Rules(rules).tails
    assert tails[:3] == [r"ffn_(up|down|gate_up|gate)_(ch|)exps", r"ffn_(gate|gate_up|down).*",
                         r"ffn_down_exps\.weight"]
    assert tails[3:6] == [None, None, None]
    assert tails[6] == r"ffn_(up|down|gate|gate_up)_(ch|)exps"          # --n-cpu-moe 3: blk\.(?:0|1|2)\.
    assert _first_tail(tuple(tails[:3]), "ffn_down_exps.weight") == 0
    assert _first_tail((tails[1],), "ffn_up_exps.weight") is None       # ffn_up is not ffn_(gate|gate_up|down)


def _reference(tensors, n_layer, gpus, split, n_gpu_layers, n_cpu_moe, override_tensor) -> list:
    """(name, device, layer, offset) of every placed tensor as placement's module doc states the rules, tensor by
    tensor: the first -ot / --n-cpu-moe pattern that re.search-es the name, else its layer's device."""
    dev = [CPU if g is None else gpus[g] for g in layer_devices(n_layer, n_gpu_layers, split)]
    rules, out, held, offset = compile_rules(n_cpu_moe, False, override_tensor), [], set(), 0
    for t in tensors:
        group, layer = tensor_group(t.name)
        home = CPU if group == "embeddings" else dev[n_layer if layer is None else layer]
        device = next((to for p, to in rules if p.search(t.name)), None) or home
        if (t.name, device) not in held:
            held.add((t.name, device))
            out.append((t.name, device, layer, offset))
        offset += pad(t.nbytes, 32)
    return out


def test_a_placement_is_the_same_placed_afresh():
    """Qwen3-30B-A3B (48 layers, q4_k_m, untied output) on two GPUs with fit's and the top-up's kind of flags, each
    placed twice (the second from what the first made): every tensor where the rules one by one put it."""
    model = kvmem.get_model("qwen3-30b-a3b")
    tensors = tuple(_tensors(model, weight_format(model, "q4_k_m"))[0])
    gpus = ("CUDA0", "CUDA1")
    flags = [dict(n_gpu_layers=49, tensor_split=(20, 29), override_tensor=((r"blk\.(30|31|40)\.ffn_(up|down)_exps",
                                                                            "CPU"),)),
             dict(n_gpu_layers=30, tensor_split=(1, 1), n_cpu_moe=12),
             dict(n_gpu_layers=49, tensor_split=(20, 29), override_tensor=((r"blk\.41\.ffn_down_exps\.weight",
                                                                            "CUDA0"), (r"\.ffn_gate_inp", "CPU")))]
    for f in flags * 2:
        got = place(tensors, n_layer=48, gpus=gpus, **f)
        want = _reference(tensors, 48, gpus, f["tensor_split"], f["n_gpu_layers"], f.get("n_cpu_moe", 0),
                          f.get("override_tensor", ()))
        assert [(t.name, t.device, t.layer, t.offset) for t in got.tensors] == want
    where = {t.name: t.device for t in got.tensors if t.layer == 41}
    # -ts 20,29 over 49 layers: layer 41 on CUDA1 (41 / 49 >= 20 / 49), its ffn_down_exps moved to CUDA0 by -ot,
    # its router to the host by a pattern with no blk prefix
    assert where["blk.41.ffn_down_exps.weight"] == "CUDA0" and where["blk.41.ffn_up_exps.weight"] == "CUDA1"
    assert where["blk.41.ffn_gate_inp.weight"] == "CPU"

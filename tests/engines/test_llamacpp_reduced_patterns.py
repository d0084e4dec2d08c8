"""scheduled.reduced_layers on graphs whose layers' kinds repeat (graphs_delta's 3 linear + 1 full attention, gemma3 /
gemma4's 5 sliding + 1 full, gemma2 / gpt-oss alternating): the reduced graph's buffers on every device equal the
whole graph's (scheduled._gpu_graph_bytes), on seeded random layouts; the hybrid graphs wired into the GPU path
(compute.graph_shape, graph_weight_names, the recurrent part over n_seq sequences)."""

import datetime
import random
from dataclasses import replace

import pytest

import kvmem
from kvmem.engines.llamacpp import scheduled
from kvmem.engines.llamacpp.compute import compute_buffer, graph_shape
from kvmem.engines.llamacpp.graph_build import build_graph
from kvmem.engines.llamacpp.graphs import GraphShape, Pass
from kvmem.engines.llamacpp.graphs_delta import DeltaShape
from kvmem.engines.llamacpp.layouts import layout
from kvmem.engines.llamacpp.placement import buffer_mib
from kvmem.engines.llamacpp.tensors import tensors_for
from kvmem.oracles.llamacpp_graphs import random_graph_case
from kvmem.oracles.llamacpp_graphs_more import random_delta_case, random_gemma4_case


def _layer_names(shape) -> dict:
    g = build_graph(shape, Pass(1, 1, 256, 1, False, "f16", "f16"))
    names: dict = {}
    for t in g.leafs:
        if t.external and not t.kv and 0 <= t.layer < shape.n_layer:
            names.setdefault(t.layer, set()).add(t.name)
    return {il: sorted(v) for il, v in names.items()}


def _more_bits(il: int, n: int) -> bool:
    """Q4_K_M's larger ffn_down (llama-quant.cpp use_more_bits): the first and last eighth, every third between."""
    return il < n // 8 or il >= 7 * n // 8 or (il - n // 8) % 3 == 2


def _case(kind: str, seed: int, rng: random.Random):
    """A random patterned shape of 12-40 layers split over 1-3 GPUs: layers on the host (their weights there), experts
    on the host, every ffn_down on the host (Q4_K_M's two sizes) or none; several sequences for the hybrids."""
    n_seq, unified, swa_cells = 1, False, 256
    if kind == "delta":
        model, _f, ctx = random_delta_case(seed)
        n = rng.choice([12, 16, 20, 24, 28, 32, 40])
        shape = replace(graph_shape(model), n_layer=n, recurrent=tuple((il + 1) % 4 != 0 for il in range(n)))
        n_seq, unified, swa_cells = ctx["n_seq"], ctx["kv_unified"], 0
    elif kind == "gemma4":
        model, _f, _ctx = random_gemma4_case(seed)
        n = rng.randint(12, 36)
        shape = replace(graph_shape(model), n_layer=n,
                        swa=tuple((il + 1) % 6 != 0 and il != n - 1 for il in range(n)))
    elif kind == "gpt-oss":
        model, _f, _ctx = random_graph_case(2 + 3 * (seed % 20))
        n = rng.randint(12, 30)
        shape = replace(graph_shape(model), n_layer=n, swa=tuple(il % 2 == 0 for il in range(n)))
    else:       # gemma3 (every sixth layer full), gemma2 (every other)
        n = rng.randint(12, 36)
        per = 6 if kind == "gemma3" else 2
        shape = GraphShape(kind, n, rng.choice([256, 512]), 4, rng.choice([1, 2, 4]), rng.choice([64, 128]),
                           rng.choice([256, 1024]), rng.choice([512, 2048]),
                           swa=tuple((il + 1) % per != 0 for il in range(n)), final_softcap=kind == "gemma2")
        n_seq = rng.choice([1, 1, 2])
    n_gpus = rng.randint(1, 3)
    names = _layer_names(shape)
    mode = rng.choice(["split", "host_layers", "experts", "downs"])
    n_host = rng.randint(1, n - 2) if mode == "host_layers" else 0
    cuts = sorted(rng.randint(n_host, n) for _ in range(n_gpus - 1))
    layer_gpu = tuple(n_gpus if il < n_host else sum(il >= c for c in cuts) for il in range(n)) + (n_gpus - 1,)
    weights = [((il, name), (n_gpus, 70_000 if name.startswith("ffn_down") and _more_bits(il, n) else 50_000))
               for il in range(n_host) for name in names[il]]
    if mode == "experts" and shape.n_expert:
        weights += [((il, name), (n_gpus, 6_600_000 if name == "ffn_down_exps" and _more_bits(il, n) else 4_500_000))
                    for il in range(rng.randint(1, n)) for name in names[il] if name.endswith("_exps")]
    if mode == "downs":
        weights += [((il, name), (n_gpus, 70_000 if _more_bits(il, n) else 50_000))
                    for il in range(n) for name in names[il] if name.startswith("ffn_down")]
    fa = rng.random() < 0.5
    type_k = rng.choice(["f16", "q8_0"]) if fa else "f16"
    return shape, dict(layer_gpu=layer_gpu, n_gpus=n_gpus, n_kv=rng.choice([256, 1024, 4096]),
                       n_ubatch=rng.choice([1, 7, 64, 512]), flash_attn=fa, type_k=type_k, type_v=type_k,
                       n_seq=n_seq, kv_unified=unified, swa_cells=swa_cells,
                       n_copies=4 if n_gpus > 1 and not weights and rng.random() < 0.4 else 1,
                       weights=tuple(sorted(weights)))


def _whole(shape, kw):
    return scheduled._gpu_graph_bytes(shape, kw["layer_gpu"], kw["n_gpus"], kw["n_kv"], kw["n_ubatch"],
                                      kw["flash_attn"], kw["type_k"], kw["type_v"], None, kw["n_seq"], kw["kv_unified"],
                                      kw["swa_cells"], kw["n_copies"], True, kw["weights"], True)


# seeds whose layouts are cut (reduced_layers shorter than the model: 1-3 GPUs, some with weights on the host, hybrid
# ones with 1-4 sequences, unified or not), of 1,650 random layouts of _case this rule was checked on while it was
# built (hybrid 550, gemma4 350, gemma3 350, gemma2 300, gpt-oss 100: all equal to the whole graph)
CUT = {"delta": (8, 19, 29, 34, 39, 40, 46, 49), "gemma4": (1, 4, 20, 23, 38, 41), "gemma3": (0, 1, 14, 33, 53),
       "gemma2": (0, 1, 8, 11, 16), "gpt-oss": (4, 16, 18, 34, 42)}


@pytest.mark.parametrize("kind", sorted(CUT))
def test_reduced_layers_keep_every_buffer_of_patterned_layers(kind):
    shorter = 0
    for seed in CUT[kind]:
        shape, kw = _case(kind, seed, random.Random(f"L/{kind}/{seed}"))
        shorter += scheduled.reduced_layers(shape, kw["layer_gpu"], kw["weights"])[0].n_layer < shape.n_layer
        assert scheduled.gpu_graph_bytes(shape, **kw) == _whole(shape, kw), (kind, seed)
    assert shorter == len(CUT[kind])


def test_one_unit_of_a_pattern_is_not_enough(monkeypatch):
    # hybrid seed 86 (24 layers on one GPU, n_ubatch 64, no flash attention): kept to 1 unit of 4 layers the GPU's
    # buffer is 64 KiB short of the whole graph's; RUN_CAP_PATTERN's 3 units give it
    shape, kw = _case("delta", 86, random.Random("L/delta/86"))
    whole = _whole(shape, kw)
    assert scheduled.gpu_graph_bytes(shape, **kw) == whole
    monkeypatch.setattr(scheduled, "RUN_CAP_PATTERN", 1)
    scheduled._graph_sizes.cache_clear()
    assert whole[0] - scheduled.gpu_graph_bytes(shape, **kw)[0] == 65536
    scheduled._graph_sizes.cache_clear()


def test_hybrid_layers_cut_with_their_kind():
    # 48 layers of 3 linear + 1 full on one GPU: 47 before the last = 11 units of 4 and 3 more; the units cut to
    # 3 + (11 - 3) % lcm(4, 6) / 4 = 5 (20 layers), the 3 linear layers left (q = 1, under RUN_CAP), the last: 24
    shape = graph_shape(kvmem.get_model("qwen3-next-80b-a3b"))
    reduced, layer_gpu, _ = scheduled.reduced_layers(shape, (0,) * 49)
    assert reduced.n_layer == 24 and reduced.recurrent == shape.recurrent[:24]
    assert layer_gpu == (0,) * 25


def test_weight_names_cover_linear_and_full_layers():
    per_layer, output = scheduled.graph_weight_names(graph_shape(kvmem.get_model("qwen3.5-397b-a17b")))
    assert {"attn_qkv", "attn_gate", "ssm_beta", "ssm_alpha", "ssm_a", "ssm_dt.bias", "ssm_conv1d", "ssm_norm",
            "ssm_out", "attn_q", "attn_k", "attn_v", "attn_output", "attn_q_norm", "attn_k_norm",
            "post_attention_norm", "ffn_down_exps", "ffn_gate_inp_shexp"} <= per_layer
    assert output == {"output_norm", "output"}


def test_unified_cache_keeps_the_sequences_in_the_recurrent_part():
    # random hybrid seed 0: 2 sequences, one unified KV stream; llama.cpp printed 10.5293 MiB
    # (tests/engines/test_llamacpp_graphs_delta.py SEEDS), through compute.compute_buffer
    model, _f, ctx = random_delta_case(0)
    assert (ctx["n_seq"], ctx["kv_unified"]) == (2, True)
    assert isinstance(graph_shape(model), DeltaShape)
    d = kvmem.estimate(model, engine="llama.cpp", tokens=1, n_ctx=ctx["n_ctx"], n_seq=2, kv_unified=True,
                       type_k=ctx["type_k"], type_v=ctx["type_v"], flash_attn=bool(ctx["flash_attn"]),
                       n_ubatch=ctx["n_ubatch"], n_batch=ctx["n_ctx"]).details
    got = compute_buffer(model, n_kv=d.cells, n_ubatch=d.n_ubatch, flash_attn=bool(ctx["flash_attn"]),
                         type_k=ctx["type_k"], type_v=ctx["type_v"], n_outputs=d.n_batch, n_seq=2, kv_unified=True)
    assert got.exact and f"{got.bytes / 1048576.0:.4f}" == "10.5293"


@pytest.mark.parametrize("preset, flags", [("qwen3.5-27b", dict(n_gpu_layers=40)),
                                           ("qwen3-next-80b-a3b", dict(n_cpu_moe=10))])
def test_preset_layouts_are_scheduled_as_the_whole_graph(preset, flags, monkeypatch):
    # a partial offload on one 24 GB card at 32k: both buffers from the scheduled graph, whose runs of equal layers
    # were cut, equal to the whole graph's (every call layouts makes)
    from kvmem.engines.llamacpp import layouts
    calls = []

    def kept(shape, **kw):
        calls.append((shape, kw))
        return scheduled.gpu_graph_bytes(shape, **kw)
    monkeypatch.setattr(layouts, "gpu_graph_bytes", kept)
    model = kvmem.get_model(preset)
    tensors, _ = tensors_for(model, "q4_k_m")
    lay = layout(model, tensors, gpus=("rtx-3090-24gb",), n_ctx=32768, flash_attn=True, **flags)
    assert lay.compute_exact == {"rtx-3090-24gb": True, "CPU": True}
    shape, kw = calls[-1]
    reduced = scheduled.gpu_graph_bytes(shape, **kw)
    assert isinstance(shape, DeltaShape) and (lay.compute_bytes["rtx-3090-24gb"], lay.compute_bytes["CPU"]) == reduced
    k = dict(kw)
    weights = tuple(sorted(k.pop("weights")))
    assert scheduled.reduced_layers(shape, k["layer_gpu"], weights)[0].n_layer < shape.n_layer
    args = [k.pop(name) for name in ("layer_gpu", "n_gpus", "n_kv", "n_ubatch", "flash_attn", "type_k", "type_v",
                                     "n_outputs", "n_seq", "kv_unified", "swa_cells", "n_copies", "set_rows")]
    assert scheduled._gpu_graph_bytes(shape, *args, weights, k.pop("inp_embd"), **k) == reduced


def test_held_out_qwen35_27b_on_a_3090():
    # held-out log 07 (llama-server b8946, 2026-04-27): Qwen3.5-27B, RTX 3090, -ngl 99 (65/65), -c 200192, q8_0 K/V,
    # -fa on: "CUDA0 compute buffer size = 654.78 MiB", "CUDA_Host compute buffer size = 411.29 MiB" (the estimate
    # before the hybrid graphs were wired: 495.00 / 10.00)
    model = kvmem.get_model("qwen3.5-27b")
    tensors, _ = tensors_for(model, "q4_k_m")
    lay = layout(model, tensors, gpus=("rtx-3090-24gb",), n_ctx=200192, type_k="q8_0", type_v="q8_0",
                 flash_attn=True, build=datetime.date(2026, 4, 27))
    assert {k: buffer_mib(v) for k, v in lay.compute_bytes.items()} == {"rtx-3090-24gb": 654.78, "CPU": 411.29}
    assert lay.compute_exact == {"rtx-3090-24gb": True, "CPU": True}

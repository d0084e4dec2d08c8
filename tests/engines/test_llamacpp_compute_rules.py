"""scheduled.one_token_graph_dominated, checked against the scheduled graphs themselves: inside its domain the
one-token reserve never needs more of a device's compute buffer than the prompt reserve; outside it, it can."""

from __future__ import annotations

import random

import kvmem
from kvmem.engines.llamacpp import layouts, scheduled
from kvmem.engines.llamacpp.best import _tensors
from kvmem.engines.llamacpp.compute import graph_shape
from kvmem.engines.llamacpp.offload import weight_format
from kvmem.engines.llamacpp.scheduled import one_token_graph_dominated
from kvmem.units import pad


def _both_graphs(seen: list):
    """scheduled._sized recording (prompt graph's buffers, one-token graph's buffers) per device, as _sized
    computes them (the same reduced graphs and keys)."""
    sized = scheduled._sized

    def recording(shape, layer_gpu, n_gpus, n_kv, n_ubatch, flash_attn, type_k, type_v, n_outputs, n_seq, kv_unified,
                  swa_cells, n_copies, set_rows, weights, inp_embd, full_offload, fa_f16, copy_unused_inputs, mask_f32,
                  kv_rot, blas, qkv_order, kv_host, reduce):
        n_out = n_ubatch if n_outputs is None else min(n_outputs, n_ubatch)
        sizes = []
        for tokens, outputs in ((pad(n_ubatch, n_seq), n_out), (n_seq, n_seq)):
            placed = weights if tokens >= 32 else tuple((key, (dev, 0)) for key, (dev, _) in weights)
            args = scheduled.reduced_layers(shape, layer_gpu, placed)
            sizes.append(scheduled._graph_sizes(*args, n_gpus, tokens, outputs, n_kv, 1 if kv_unified else n_seq,
                                                flash_attn, type_k, type_v, swa_cells, n_copies, set_rows, inp_embd,
                                                full_offload or tokens < 32, fa_f16 and flash_attn,
                                                copy_unused_inputs, mask_f32, kv_rot, blas, qkv_order, kv_host))
        seen.append((one_token_graph_dominated(n_ubatch, n_seq, flash_attn), n_gpus, *sizes))
        return sized(shape, layer_gpu, n_gpus, n_kv, n_ubatch, flash_attn, type_k, type_v, n_outputs, n_seq,
                     kv_unified, swa_cells, n_copies, set_rows, weights, inp_embd, full_offload, fa_f16,
                     copy_unused_inputs, mask_f32, kv_rot, blas, qkv_order, kv_host, reduce)
    return recording


def test_inside_the_domain_the_prompt_graph_holds_the_larger_buffer(monkeypatch):
    """24 seeded random layouts of presets with a graph (1-4 GPUs, any -ngl / -ts / --n-cpu-moe, f16 or q8_0 K,
    n_ubatch 512-2048, one sequence, flash attention): on every device the one-token graph's buffer is at
    most the prompt graph's."""
    seen: list = []
    monkeypatch.setattr(scheduled, "_sized", _both_graphs(seen))
    rng = random.Random(22)
    models = sorted(m for m in kvmem.list_models() if graph_shape(kvmem.get_model(m)) is not None)
    for _ in range(24):
        model = kvmem.get_model(rng.choice(models))
        tensors = _tensors(model, weight_format(model, "q4_k_m"))[0]
        n, k = model.num_layers, rng.randint(1, 4)
        split = tuple(rng.randint(1, 5) for _ in range(k)) if k > 1 else None
        try:
            layouts.layout(model, tensors, gpus=tuple(f"CUDA{i}" for i in range(k)),
                           n_gpu_layers=rng.choice([n + 1, rng.randint(0, n + 1)]), tensor_split=split,
                           n_cpu_moe=rng.choice([0, rng.randint(0, n)]) if model.facts.moe else 0,
                           n_ctx=rng.choice([4096, 32768]), n_ubatch=rng.choice([512, 2048]), flash_attn=True,
                           type_k=rng.choice(["f16", "q8_0"]), type_v="f16")
        except ValueError:
            continue
    inside = [(pp, tg) for dominated, _, pp, tg in seen if dominated]
    assert len(inside) >= 12
    for pp, tg in inside:
        assert all(b <= a for a, b in zip(pp, tg, strict=True)), (pp, tg)


def test_outside_the_domain_the_host_can_need_more_for_one_token(monkeypatch):
    """Qwen2.5-72B q4_k_m, -ngl 57 of 81 (24 layers on the host), -ts 2,4,1,3, n_ubatch 32, flash attention
    off, 32k: the host computes its layers' one-token attention itself (KQ 32,768 cells x 64 heads x 4 B =
    8 MiB), where the prompt graph hands them to CUDA0 and keeps only its inputs: 8,691,840 B > 6,554,144 B."""
    seen: list = []
    monkeypatch.setattr(scheduled, "_sized", _both_graphs(seen))
    model = kvmem.get_model("qwen2.5-72b")
    tensors = _tensors(model, weight_format(model, "q4_k_m"))[0]
    layouts.layout(model, tensors, gpus=("CUDA0", "CUDA1", "CUDA2", "CUDA3"), n_gpu_layers=57,
                   tensor_split=(2, 4, 1, 3), n_ctx=32768, n_ubatch=32, flash_attn=False)
    (dominated, n_gpus, pp, tg), = seen
    assert not dominated
    assert (pp[n_gpus], tg[n_gpus]) == (6554144, 8691840)

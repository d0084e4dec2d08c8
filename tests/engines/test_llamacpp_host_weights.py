"""kvmem.engines.llamacpp.host_weights.copy_floor, the least a sketch (layouts.layout schedule=False) says the first
GPU's compute buffer takes: never more than the scheduled buffer, on seeded random layouts of every MoE preset whose
graph is scheduled (host experts by --n-cpu-moe and -ot, partial offload, 1-3 GPUs, ubatches about the offload
threshold), and a floor that is there to be checked on most of them."""

from __future__ import annotations

import random

import kvmem
from kvmem.engines.llamacpp import layouts
from kvmem.engines.llamacpp.best import _tensors
from kvmem.engines.llamacpp.offload import weight_format


def test_the_sketch_floor_is_under_the_scheduled_buffer():
    checked = floored = 0
    for name in kvmem.list_models():
        model = kvmem.get_model(name)
        if model.facts.moe is None:
            continue
        try:
            tensors = _tensors(model, weight_format(model, "q4_k_m"))[0]
        except ValueError:
            continue            # no layout from this config
        rng = random.Random(f"copy-floor {name}")
        n = model.num_layers
        for _ in range(3):
            k = rng.randint(1, 3)
            gpus = tuple(f"CUDA{i}" for i in range(k))
            flags = dict(gpus=gpus, n_gpu_layers=rng.choice((n + 1, n + 1, rng.randint(1, n))),
                         tensor_split=tuple(rng.randint(1, 4) for _ in gpus) if k > 1 else None,
                         n_cpu_moe=rng.randint(0, n), n_ctx=rng.choice((4096, 8192)),
                         n_ubatch=rng.choice((16, 32, 64, 512)), flash_attn=rng.choice((True, False)))
            if rng.random() < 0.3:      # one layer's down experts on the host by -ot, beside --n-cpu-moe
                flags["override_tensor"] = ((rf"blk\.{rng.randrange(n)}\.ffn_down_exps", "CPU"),)
            try:
                sketch = layouts.layout(model, tensors, **flags, schedule=False)
            except ValueError:
                continue
            if not sketch.compute_floor:
                continue                # not scheduled: no floor
            lay = layouts.layout(model, tensors, **flags)
            assert all(lay.compute_exact[g] for g in gpus)
            floor = sketch.compute_floor[gpus[0]]
            assert floor <= lay.compute_bytes[gpus[0]], (name, flags)
            assert lay.total_bytes[gpus[0]] - lay.compute_bytes[gpus[0]] == \
                sketch.total_bytes[gpus[0]] - sketch.compute_bytes[gpus[0]]
            checked += 1
            floored += floor > 0
    assert checked >= 40 and floored >= checked // 3, (checked, floored)


def test_the_last_layer_experts_are_not_copied():
    """The last layer's FFN runs on its output rows (out_ids), a MUL_MAT_ID of one row that no GPU takes over: its host
    experts are not copied, so they set no floor (Qwen3-30B-A3B at -ub 32: CUDA0 5 MiB with them on the host, under
    the 157 MiB expert); a layer before it is copied, its floor the expert's CUDA bytes, under the buffer."""
    for name in ("qwen3-30b-a3b", "deepseek-v2-lite"):
        model = kvmem.get_model(name)
        tensors = _tensors(model, weight_format(model, "q4_k_m"))[0]
        n = model.num_layers
        for il in (n - 1, n - 2):
            flags = dict(gpus=("CUDA0",), n_gpu_layers=n + 1, n_ctx=4096, n_ubatch=32, flash_attn=True,
                         override_tensor=((rf"blk\.{il}\.ffn_(up|gate|down)_exps", "CPU"),))
            lay = layouts.layout(model, tensors, **flags)
            floor = layouts.layout(model, tensors, **flags, schedule=False).compute_floor["CUDA0"]
            largest = max(t.nbytes for t in lay.placement.tensors if t.device == "CPU" and "_exps" in t.name)
            if il == n - 1:
                assert floor == 0 and lay.compute_bytes["CUDA0"] < largest
            else:
                assert largest <= floor <= lay.compute_bytes["CUDA0"]

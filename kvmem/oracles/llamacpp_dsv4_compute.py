"""llama.cpp's own CPU compute buffer as the judge of kvmem's DeepSeek-V4 graph (kvmem/engines/llamacpp/
graphs_dsv4_fwd.py, graphs_dsv4_comp.py).

A seeded small DeepSeek-V4 config (a few layers of random compress ratios 0 / 4 / 128, random widths: hidden, heads,
head and indexer widths, experts, window, top-k, hash layers) is written as a sparse deepseek4 GGUF
(llamacpp_dsv4.write_dsv4_layout), llama-cpp-python 0.3.36 (llama.cpp 0c1e57098) creates a context over it in a forked
child with random settings (context, ubatch, sequences, flash attention, cache type, rollback snapshots, -kvu,
--swa-full), and the "CPU compute buffer size" it prints to four decimals is compared with kvmem's host layout.
"""

from __future__ import annotations

import json
import os
import random
import tempfile

from ..model import Model
from .llamacpp_dsv4 import FLASH, write_dsv4_layout

__all__ = ["random_compute_case", "flash_compute_case", "run_compute_case"]


def random_compute_case(seed: int) -> tuple[str, Model, dict]:
    """A seeded small DeepSeek-V4 (module docstring) and its llama.cpp context settings."""
    rng = random.Random(f"dsv4-compute-{seed}")
    cfg = json.loads(FLASH.read_text())
    n = rng.randint(2, 6)
    ratios = [rng.choice((0, 4, 128)) for _ in range(n)]
    ratios[rng.randrange(n)] = 4        # llama.cpp aborts without a ratio-4 layer (kvmem refuses)
    head, index = rng.choice((128, 256, 512)), rng.choice((64, 128, 256))
    if 128 not in ratios and index == head:
        index = 64                       # llama.cpp aborts there too (kvmem refuses)
    heads = rng.choice((4, 8, 16))
    experts = rng.choice((4, 8, 16))
    cfg.update(num_hidden_layers=n, compress_ratios=ratios + [0], head_dim=head, index_head_dim=index,
               hidden_size=rng.choice((256, 512, 1024)), num_attention_heads=heads, o_groups=rng.choice((2, 4)),
               o_lora_rank=rng.choice((128, 256)), q_lora_rank=rng.choice((256, 512)),
               index_n_heads=rng.choice((4, 8, 16)), index_topk=rng.choice((16, 64, 512)),
               n_routed_experts=experts, num_experts_per_tok=rng.randint(1, min(4, experts)),
               moe_intermediate_size=rng.choice((256, 512)), num_hash_layers=rng.randint(0, 2),
               vocab_size=rng.choice((1024, 4096)), sliding_window=rng.choice((16, 64, 128, 256)),
               num_nextn_predict_layers=0)
    cfg.pop("layer_types", None)
    model = Model.from_hf_config(cfg, name=f"dsv4-compute-{seed}")
    fa = rng.random() < 0.7
    kind = rng.choice(("f16", "q4_0", "q8_0", "f32") if fa else ("f16", "f32"))  # a quantised V needs flash attention
    rs = rng.choice((0, 0, 1, 2))
    # with snapshots a sequence's last n_rs_seq + 1 tokens share a micro-batch: kvmem refuses -ub <= n_rs_seq + 1
    setting = dict(type_k=kind, type_v=kind, flash_attn=fa, n_ctx=rng.choice((256, 1000, 4096, 20000)),
                   n_seq=rng.choice((1, 1, 2, 3)), swa_full=rng.random() < 0.2, n_rs_seq=rs,
                   n_ubatch=rng.choice((64, 100, 512) if rs else (1, 64, 100, 512)), kv_unified=rng.random() < 0.2)
    return f"dsv4-compute-{seed}", model, setting


def flash_compute_case(n_ctx: int, n_ubatch: int = 512, flash_attn: bool = True, n_seq: int = 1) -> tuple:
    """DeepSeek-V4-Flash's own config at one setting (the layout at full shape: about 30 s of sparse-file I/O)."""
    model = Model.from_hf_config(json.loads(FLASH.read_text()), name="deepseek-v4-flash")
    return (f"flash-{n_ctx}-{n_ubatch}-{int(flash_attn)}-{n_seq}", model,
            dict(type_k="f16", type_v="f16", flash_attn=flash_attn, n_ctx=n_ctx, n_seq=n_seq, n_ubatch=n_ubatch,
                 swa_full=False))


def _ours(model: Model, fmt: str, s: dict) -> tuple:
    from ..engines.llamacpp.layouts import layout
    from ..engines.llamacpp.tensors import tensors_for
    lay = layout(model, tensors_for(model, fmt)[0], gpus=(), n_gpu_layers=0, n_ctx=s["n_ctx"], n_ubatch=s["n_ubatch"],
                 n_seq=s["n_seq"], flash_attn=s["flash_attn"], type_k=s["type_k"], type_v=s["type_v"],
                 n_batch=s["n_ctx"], swa_full=s.get("swa_full", False), kv_unified=s.get("kv_unified", False),
                 n_rs_seq=s.get("n_rs_seq", 0))
    return f"{lay.compute_bytes['CPU'] / 2**20:.4f}", lay.compute_exact.get("CPU")


def run_compute_case(model: Model, setting: dict, fmt: str = "q8_0") -> dict:
    """{"llama.cpp": its printed CPU compute MiB to 4 decimals, "kvmem": kvmem's, "exact": kvmem's flag}."""
    from .llamacpp_buffers import in_child, printed_buffers
    ours, exact = _ours(model, fmt, setting)
    ctx = dict(setting, flash_attn=int(setting["flash_attn"]), mmap=True)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "dsv4.gguf")
        write_dsv4_layout(model, fmt, path)
        printed = in_child(printed_buffers, path, ctx)
    return {"llama.cpp": printed.get("CPU compute 4dp"), "kvmem": ours, "exact": exact}

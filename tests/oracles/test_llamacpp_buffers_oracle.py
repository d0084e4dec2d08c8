"""kvmem's llama.cpp model, KV and compute buffers against llama.cpp's own (llama-cpp-python 0.3.36).

200 random GGUFs (llama dense 23, llama with experts 30, qwen2 23, qwen3 dense 31, qwen3moe 20, gemma3
22, gemma2 22, phi3 29 (24 with a fused attn_qkv, 5 with separate Q/K/V); random
widths, layers, experts, a random ggml type per weight, tied or untied output, mmap on or off;
n_ctx, n_ubatch, flash attention on or off, every K/V cache type -ctk/-ctv take, 1-4 sequences
with a stream each or unified, swa_full on or off), each loaded for real on this CPU-only build:
the "CPU_Mapped model buffer size" / "CPU model buffer size", "CPU KV buffer size" (one per
cache) and "CPU compute buffer size" lines must equal kvmem's bytes printed the same way, and the
compute buffer also to the four decimals llama.cpp prints when the context is freed
(kvmem.engines.llamacpp.compute: llama.cpp's graphs allocated as ggml-alloc allocates them).
About 35-70 s (two shared cores; 35 s measured with the eight kinds).
"""

from tests.oracles.conftest import require

require("llama_cpp")

import pytest  # noqa: E402

import kvmem  # noqa: E402
from kvmem.engines.llamacpp.compute import llamacpp_compute_buffer  # noqa: E402
from kvmem.engines.llamacpp.placement import buffer_mib, place  # noqa: E402
from kvmem.oracles.llamacpp_buffers import random_spec, run_spec, write_spec  # noqa: E402
from kvmem.sources.gguf import fields_from_header, read_header  # noqa: E402


@pytest.mark.parametrize("seed", range(200))
def test_model_kv_and_compute_buffers_equal_llamacpp(seed, tmp_path):
    spec = random_spec(seed)
    ctx = spec["context"]
    path = str(tmp_path / "model.gguf")
    write_spec(spec, path)
    header = read_header(path)
    model = kvmem.Model(**fields_from_header(header, name=f"random-{seed}"))
    placement = place(header.tensors, n_layer=spec["n_layer"], n_gpu_layers=0, mmap=ctx["mmap"],
                      alignment=header.metadata.get("general.alignment", 32))
    kv = kvmem.estimate(model, engine="llama.cpp", tokens=1, n_ctx=ctx["n_ctx"], n_seq=ctx["n_seq"],
                        kv_unified=ctx["kv_unified"], swa_full=ctx["swa_full"], type_k=ctx["type_k"],
                        type_v=ctx["type_v"], flash_attn=bool(ctx["flash_attn"]), n_ubatch=ctx["n_ubatch"],
                        n_batch=ctx["n_ctx"])
    printed = run_spec(spec, path)
    buffer = "CPU_Mapped" if ctx["mmap"] else "CPU"
    assert placement.host.buffer_name == buffer
    assert printed[f"{buffer} model"] == buffer_mib(placement.host.model_bytes)
    d = kv.details         # the caches, the cells per stream and the batch sizes llama.cpp settles on
    caches = [c["k_bytes"] + c["v_bytes"] for c in d.caches]
    # an iSWA cache without global layers (gemma3 with fewer than six) allocates no base buffer
    assert sorted(printed["KV lines"]) == sorted(buffer_mib(n) for n in caches if n)
    assert sum(caches) == kv.k_bytes + kv.v_bytes
    # every tensor counted once in its group: the groups add up to the tensors' bytes
    assert sum(placement.host.group_bytes.values()) == sum(t.nbytes for t in header.tensors)
    compute = llamacpp_compute_buffer(model, n_ctx=d.n_ctx, n_ubatch=d.n_ubatch, cells_per_stream=d.cells,
                                      flash_attn=bool(ctx["flash_attn"]), type_k=ctx["type_k"], type_v=ctx["type_v"],
                                      n_outputs=d.n_batch, n_seq=ctx["n_seq"], kv_unified=ctx["kv_unified"],
                                      swa_cells=d.swa_cells, backend="cpu")
    assert compute.exact
    assert buffer_mib(compute.bytes) == printed["CPU compute"]
    assert f"{compute.bytes / 1048576.0:.4f}" == printed["CPU compute 4dp"]

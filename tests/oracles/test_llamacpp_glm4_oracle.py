"""kvmem's dense GLM-4 (glm4: GLM-4-0414, GLM-Z1-0414) layout and compute graph (kvmem/engines/llamacpp/arch_tensors.py
_glm4, graphs_glm4.py) against llama.cpp 0c1e57098 itself (llama-cpp-python 0.3.36, CPU-only), on sparse GGUFs
written from kvmem's tensor list with the metadata conversion/glm.py writes (kvmem.oracles.llamacpp_family_files):
1. the quantiser: llama_model_quantize --dry-run of the converter's F16 source gives every tensor kvmem's type, for
   the presets' files (IQ4_XS, Q4_K_M, Q5_K_M, Q8_0; GLM-4-9B-0414 with its Q/K/V biases) and every file type on
   GLM-Z1-32B-0414's tensors;
2. the loader: the presets at full shape load with no_alloc (every tensor glm4.cpp load_arch_tensors asks for, no
   other), llama_model_size is kvmem's sum; a 3-layer cut (real widths, 32,000-token vocabulary) loads with mmap
   and its CPU_Mapped model buffer is kvmem's placement's to the printed MiB;
3. KV and compute: 24 random glm4 configs (kvmem.oracles.llamacpp_glm4) with a context each: the printed CPU KV and
   CPU compute buffers equal kvmem's to the printed MiB (compute also to the four decimals); the presets at full
   shape (no_alloc) at three contexts: the prompt graph's reserve equals kvmem's.
About a minute."""

from tests.oracles.conftest import require

require("llama_cpp")

import os  # noqa: E402

import pytest  # noqa: E402

import kvmem  # noqa: E402
from kvmem.engines.llamacpp.compute import graph_bytes, graph_shape, llamacpp_compute_buffer  # noqa: E402
from kvmem.engines.llamacpp.placement import buffer_mib, place  # noqa: E402
from kvmem.engines.llamacpp.quant_mix import FTYPES  # noqa: E402
from kvmem.engines.llamacpp.tensors import synthesised_tensors  # noqa: E402
from kvmem.model import Model  # noqa: E402
from kvmem.oracles.llamacpp_buffers import in_child, printed_buffers  # noqa: E402
from kvmem.oracles.llamacpp_family_files import write_family  # noqa: E402
from kvmem.oracles.llamacpp_glm4 import random_glm4_case  # noqa: E402
from kvmem.oracles.llamacpp_presets import load, tensor_bytes  # noqa: E402
from tests.oracles.test_llamacpp_layout_families_oracle import _dry_run, _dry_runs, _load  # noqa: E402

CASES = [("glm-z1-32b-0414", "iq4_xs"), ("glm-z1-32b-0414", "q4_k_m"), ("glm-4-32b-0414", "q8_0"),
         ("glm-4-9b-0414", "q4_k_m"), ("glm-4-9b-0414", "q5_k_m")]


def _model(name: str) -> Model:
    return kvmem.get_model(name)


@pytest.mark.parametrize("name,fmt", CASES, ids=[f"{n}-{f}" for n, f in CASES])
def test_glm4_gguf_equals_llamacpp(name, fmt, tmp_path):
    model = _model(name)
    source, path = str(tmp_path / "source.gguf"), str(tmp_path / "model.gguf")
    write_family(model, fmt, source, source=True)
    theirs = in_child(_dry_run, source, FTYPES[fmt][0])
    os.remove(source)
    tensors = write_family(model, fmt, path, source=False)
    assert {t.name: t.dtype for t in tensors} == theirs
    out = in_child(_load, path, True)
    ggml = tensor_bytes(path)
    assert {t.name: t.nbytes for t in tensors} == {n: nbytes for n, (_, _, nbytes, _) in ggml.items()}
    assert out["size"] == sum(t.nbytes for t in tensors)


def test_every_file_type_on_glm4_equals_llamacpps_quantiser(tmp_path):
    model = kvmem.get_model("glm-z1-32b-0414")
    source = str(tmp_path / "source.gguf")
    write_family(model, "f16", source, source=True)
    ftypes = [name for name in FTYPES if name not in ("f32", "q1_0")]
    theirs = in_child(_dry_runs, source, ftypes)
    for ftype in ftypes:
        ours = {t.name: t.dtype for t in synthesised_tensors(model, ftype)}
        assert ours == theirs[ftype], (ftype, {k: (v, theirs[ftype].get(k)) for k, v in ours.items()
                                                if theirs[ftype].get(k) != v})


@pytest.mark.parametrize("name", ["glm-z1-32b-0414", "glm-4-9b-0414"])
def test_glm4_model_buffer_equals_llamacpp(name, tmp_path):
    cfg = dict(_model(name).config, num_hidden_layers=3, vocab_size=32000)
    model = Model.from_hf_config(cfg, name=f"{name}-small")
    path = str(tmp_path / "model.gguf")
    tensors = write_family(model, "q4_k_m", path, source=False)
    out = in_child(_load, path, False)
    host = place(tensors, n_layer=model.num_layers, n_gpu_layers=0, mmap=True).host
    assert out["size"] == sum(host.group_bytes.values())
    assert out["buffers"] == {"CPU_Mapped": buffer_mib(host.model_bytes)}


@pytest.mark.parametrize("seed", range(24))
def test_glm4_kv_and_compute_buffers_equal_llamacpp(seed, tmp_path):
    model, fmt, ctx = random_glm4_case(seed)
    path = str(tmp_path / "model.gguf")
    write_family(model, fmt, path, source=False)
    printed = in_child(printed_buffers, path, ctx)
    d = kvmem.estimate(model, engine="llama.cpp", tokens=1, n_ctx=ctx["n_ctx"], n_seq=ctx["n_seq"],
                       kv_unified=ctx["kv_unified"], swa_full=False, type_k=ctx["type_k"], type_v=ctx["type_v"],
                       flash_attn=bool(ctx["flash_attn"]), n_ubatch=ctx["n_ubatch"], n_batch=ctx["n_ctx"]).details
    compute = llamacpp_compute_buffer(model, n_ctx=d.n_ctx, n_ubatch=d.n_ubatch, cells_per_stream=d.cells,
                                      flash_attn=bool(ctx["flash_attn"]), type_k=ctx["type_k"], type_v=ctx["type_v"],
                                      n_outputs=d.n_batch, n_seq=ctx["n_seq"], kv_unified=ctx["kv_unified"],
                                      backend="cpu")
    assert compute.exact
    assert buffer_mib(compute.bytes) == printed["CPU compute"]
    assert f"{compute.bytes / 1048576.0:.4f}" == printed["CPU compute 4dp"]
    kv = kvmem.estimate(model, engine="llama.cpp", tokens=1, n_ctx=ctx["n_ctx"], n_seq=ctx["n_seq"],
                        kv_unified=ctx["kv_unified"], type_k=ctx["type_k"], type_v=ctx["type_v"],
                        flash_attn=bool(ctx["flash_attn"]), n_ubatch=ctx["n_ubatch"], n_batch=ctx["n_ctx"])
    assert buffer_mib(kv.total_bytes) == printed["CPU KV"]


@pytest.mark.parametrize("name", ["glm-z1-32b-0414", "glm-4-9b-0414"])
def test_glm4_full_shapes_prompt_graph_equals_llamacpp(name, tmp_path):
    model = _model(name)
    path = str(tmp_path / "model.gguf")
    write_family(model, "q4_k_m", path, source=False)
    for n_ctx, n_ubatch, fa in ((4096, 512, True), (32768, 512, False), (32768, 2048, True)):
        printed = in_child(load, path, no_alloc=True, n_ctx=n_ctx, n_ubatch=n_ubatch, flash_attn=fa)["buffers"]
        d = kvmem.estimate(model, engine="llama.cpp", tokens=1, n_ctx=n_ctx, flash_attn=fa, n_ubatch=n_ubatch,
                           n_batch=n_ctx).details
        ours = graph_bytes(graph_shape(model), n_kv=d.cells, n_ubatch=d.n_ubatch, flash_attn=fa)
        assert buffer_mib(ours) == printed["CPU compute"], (n_ctx, fa)


def test_a_glm4_gguf_read_back_has_the_configs_graph(tmp_path):
    # kvmem.sources' GGUF reader (glm4: kvmem/sources/gguf_more.py) gives the graph the config gives: the Q/K/V biases
    # read from the file's tensor names, n_ff from feed_forward_length
    cfg = dict(kvmem.get_model("glm-4-9b-0414").config, num_hidden_layers=3, vocab_size=32000)
    model = Model.from_hf_config(cfg, name="glm-4-9b-small")
    path = str(tmp_path / "glm4.gguf")
    write_family(model, "q4_k_m", path, source=False)
    read = Model.from_gguf(path)
    assert read.model_type == "glm4" and graph_shape(read) == graph_shape(model)
    assert (graph_shape(read).qkv_bias, graph_shape(read).n_ff) == (True, 13696)

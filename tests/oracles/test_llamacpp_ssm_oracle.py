"""kvmem's Mamba hybrids (jamba; nemotron_h / nemotron_h_moe: kvmem/engines/llamacpp/tensors_ssm.py, graphs_ssm.py)
against llama.cpp 0c1e57098 itself (llama-cpp-python 0.3.36, CPU-only), on sparse GGUFs written from kvmem's tensor
list with the metadata conversion/jamba.py and conversion/nemotron.py write (kvmem.oracles.llamacpp_ssm):
1. the quantiser: llama_model_quantize --dry-run of the converter's F16 source gives every tensor kvmem's type (the
   three presets, Q4_K_M and Q2_K: Q2_K's attn_v rule reads n_gqa() of layer 0, a Mamba layer here);
2. the loader: the presets at full shape load with no_alloc (every tensor load_arch_tensors asks for, no other) and
   llama_model_size is kvmem's sum;
3. KV and compute: 4 random configs of each architecture with a context each (several sequences, unified or not,
   flash attention or not, quantised caches), and 2 of each with recurrent rollback slots (n_rs_seq 1-6; jamba has
   none: llama.cpp clamps it to 0): the printed CPU KV and RS lines and the CPU compute buffer equal kvmem's (compute
   to the four decimals ~llama_context prints); the presets at full shape (no_alloc) at 4,096 / 32,768 / 131,072
   cells: the compute buffer to the printed MiB; 2 with Nemotron 3 Super's latent MoE (moe_latent_size), 2 with its
   MTP block (num_nextn_predict_layers: in the file, not loaded).
When this was written: 12 + 6 random cases and 9 preset shapes, all equal; seeds 4-39 of the random cases, run once
by a script, 108 of 108 equal too."""

from tests.oracles.conftest import require

require("llama_cpp")

import random  # noqa: E402

import pytest  # noqa: E402

import kvmem  # noqa: E402
from kvmem.engines.llamacpp.compute import graph_bytes, graph_shape, llamacpp_compute_buffer  # noqa: E402
from kvmem.engines.llamacpp.placement import buffer_mib  # noqa: E402
from kvmem.engines.llamacpp.tensors import synthesised_tensors  # noqa: E402
from kvmem.oracles.llamacpp_buffers import in_child  # noqa: E402
from kvmem.oracles.llamacpp_presets import load  # noqa: E402
from kvmem.oracles.llamacpp_ssm import printed_with_rs, random_ssm_case, write_ssm  # noqa: E402
from tests.oracles.test_llamacpp_layout_families_oracle import _dry_runs, _load  # noqa: E402

PRESETS = ("jamba-1.5-mini", "nemotron-h-8b", "nemotron-3-nano-30b-a3b")
KINDS = ("jamba", "nemotron_h", "nemotron_h_moe")


@pytest.mark.parametrize("name", PRESETS)
def test_ssm_types_and_size_equal_llamacpp(name, tmp_path):
    model = kvmem.get_model(name)
    source, path = str(tmp_path / "source.gguf"), str(tmp_path / "model.gguf")
    write_ssm(model, "f16", source, source=True)
    theirs = in_child(_dry_runs, source, ["q4_k_m", "q2_k"])
    for fmt in ("q4_k_m", "q2_k"):
        assert {t.name: t.dtype for t in synthesised_tensors(model, fmt)} == theirs[fmt], fmt
    tensors = write_ssm(model, "q4_k_m", path)
    out = in_child(_load, path, True)
    assert out["size"] == sum(t.nbytes for t in tensors)


def _check(model, fmt, ctx, path, n_rs_seq=0):
    kv = kvmem.estimate(model, engine="llama.cpp", tokens=1, n_ctx=ctx["n_ctx"], n_seq=ctx["n_seq"],
                        kv_unified=ctx["kv_unified"], type_k=ctx["type_k"], type_v=ctx["type_v"],
                        flash_attn=bool(ctx["flash_attn"]), n_ubatch=ctx["n_ubatch"], n_batch=ctx["n_ctx"],
                        n_rs_seq=n_rs_seq)
    d = kv.details
    ctx = dict(ctx, n_rs_seq=n_rs_seq, n_ubatch=d.n_ubatch)
    write_ssm(model, fmt, path)
    printed = in_child(printed_with_rs, path, ctx)
    compute = llamacpp_compute_buffer(model, n_ctx=d.n_ctx, n_ubatch=d.n_ubatch, cells_per_stream=d.cells,
                                      flash_attn=bool(ctx["flash_attn"]), type_k=ctx["type_k"], type_v=ctx["type_v"],
                                      n_outputs=d.n_batch, n_seq=ctx["n_seq"], kv_unified=ctx["kv_unified"],
                                      backend="cpu", n_rs_seq=n_rs_seq)
    assert compute.exact
    assert f"{compute.bytes / 1048576.0:.4f}" == printed["CPU compute 4dp"]
    # the attention cache's line (none where no layer is attention) and the recurrent memory's RS line
    assert buffer_mib(kv.total_bytes) == pytest.approx(sum(printed.get("KV lines", [])) + printed["RS"], abs=0.011)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seed", range(4))
def test_ssm_kv_and_compute_buffers_equal_llamacpp(kind, seed, tmp_path):
    _check(*random_ssm_case(seed, kind), str(tmp_path / "model.gguf"))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seed", range(2))
def test_ssm_rollback_slots_equal_llamacpp(kind, seed, tmp_path):
    # nemotron_h / nemotron_h_moe keep n_rs_seq + 1 state slots a sequence (llm_arch_supports_rs_rollback,
    # src/llama-arch.cpp#L1123-L1140) and Mamba-2's scan returns as many; jamba none (clamped to 0)
    model, fmt, ctx = random_ssm_case(seed, kind)
    n_rs = random.Random(f"rs/{kind}/{seed}").randint(1, 6)
    _check(model, fmt, dict(ctx, n_ubatch=max(ctx["n_ubatch"], n_rs + 2)), str(tmp_path / "model.gguf"), n_rs)


@pytest.mark.parametrize("seed", (1, 2))
def test_nemotron_latent_moe_equals_llamacpp(seed, tmp_path):
    # moe_latent_size (Nemotron 3 Super's): the experts run in the latent width between ffn_latent_down and
    # ffn_latent_up (nemotron-h.cpp#L122-L126, #L295-L322)
    from kvmem.model import Model
    model, fmt, ctx = random_ssm_case(seed, "nemotron_h_moe")
    model = Model.from_hf_config(dict(model.config, moe_latent_size=64 * seed), name=f"latent-{seed}")
    assert any(t.name.endswith("ffn_latent_down.weight") for t in synthesised_tensors(model, fmt))
    _check(model, fmt, ctx, str(tmp_path / "model.gguf"))


@pytest.mark.parametrize("seed", (0, 1))
def test_nemotron_mtp_block_is_counted_not_loaded(seed, tmp_path):
    # num_nextn_predict_layers 1 (Nemotron 3 Super / Ultra / 3.5's configs): the default converter writes the MTP
    # block after the trunk (block_count + 1, nextn_predict_layers); llama.cpp skips its tensors without load_mtp
    # (nemotron-h.cpp#L142-L181), so the trunk's types (the quantiser counts the block: n_layer_all, its attn_v),
    # the mapped model buffer (the file span of the loaded tensors), KV + RS and compute are the trunk's
    from kvmem.model import Model
    model, fmt, ctx = random_ssm_case(seed, "nemotron_h_moe")
    model = Model.from_hf_config(dict(model.config, num_nextn_predict_layers=1), name=f"mtp-{seed}")
    source = str(tmp_path / "source.gguf")
    write_ssm(model, "f16", source, source=True)
    theirs = in_child(_dry_runs, source, ["q4_k_m", "q2_k"])
    block = f"blk.{model.num_layers}."
    for q in ("q4_k_m", "q2_k"):
        ours = {t.name: t.dtype for t in synthesised_tensors(model, q)}
        assert ours == {k: v for k, v in theirs[q].items() if not k.startswith(block)}, q
    path = str(tmp_path / "model.gguf")
    tensors = write_ssm(model, fmt, path)
    assert in_child(printed_with_rs, path, ctx)["CPU_Mapped model"] == buffer_mib(sum(t.nbytes for t in tensors))
    _check(model, fmt, ctx, path)


@pytest.mark.parametrize("name", PRESETS)
def test_ssm_full_shapes_equal_llamacpp(name, tmp_path):
    model = kvmem.get_model(name)
    path = str(tmp_path / "model.gguf")
    write_ssm(model, "q4_k_m", path)
    for n_ctx, n_ubatch, fa in ((4096, 512, True), (32768, 512, False), (131072, 2048, True)):
        out = in_child(load, path, no_alloc=True, n_ctx=n_ctx, n_ubatch=n_ubatch, flash_attn=fa)
        d = kvmem.estimate(model, engine="llama.cpp", tokens=1, n_ctx=n_ctx, flash_attn=fa, n_ubatch=n_ubatch,
                           n_batch=n_ctx).details
        ours = graph_bytes(graph_shape(model), n_kv=d.cells, n_ubatch=d.n_ubatch, flash_attn=fa)
        assert buffer_mib(ours) == out["buffers"]["CPU compute"], (n_ctx, fa)
        # the KV cache holds the attention layers alone (their indices as llama.cpp prints them), d.cells each
        attn = [il for il, layer in enumerate(model.layers) if layer.kv_heads]
        assert [(c["cells"], c["layers"]) for c in out["caches"]] == [(d.cells, attn)], n_ctx

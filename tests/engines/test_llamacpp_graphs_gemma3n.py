"""Gemma 3n (gemma3n) laid out from a config and its compute graph (kvmem/engines/llamacpp/graphs_gemma3n.py): what
llama.cpp 0c1e57098
printed for the same GGUFs (tests/oracles/test_llamacpp_gemma3n_oracle.py writes and loads them;
kvmem.oracles.llamacpp_gemma3n draws the random cases), pinned, and the refusals of configs llama.cpp does not load."""

from __future__ import annotations

import json

import pytest

import kvmem
from kvmem.catalog import preset
from kvmem.engines.llamacpp.compute import graph_bytes, graph_shape, llamacpp_compute_buffer
from kvmem.engines.llamacpp.placed import tensor_group
from kvmem.engines.llamacpp.placement import buffer_mib
from kvmem.engines.llamacpp.tensors import synthesised_tensors
from kvmem.model import Model
from kvmem.oracles.llamacpp_gemma3n import random_gemma3n_case

# seed -> llama.cpp's llama_model_size (bytes), its KV buffer lines (MiB: the full cache's, then the SWA one's) and its
# "CPU compute buffer size" to four decimals (~llama_context)
PRINTED = {0: (44218752, [2.28, 1.71], "2.3452"), 1: (18307584, [0.64, 0.64], "0.5765"),
           2: (24852160, [2.25, 4.5], "19.0608"), 3: (17440384, [4.0, 12.0], "58.0156"),
           4: (153924736, [1.38, 4.12], "0.8876"), 5: (52861120, [9.19, 11.48], "2.3296"),
           6: (11178368, [0.25, 0.12], "0.8760"), 7: (39354560, [8.0, 32.0], "0.8284"),
           8: (42128896, [32.06, 17.81], "26.0547"), 9: (24190720, [8.0, 2.5], "22.7539"),
           10: (46021376, [30.0, 15.75], "47.5156"), 11: (48078720, [3.44, 1.38], "0.0881")}


@pytest.mark.parametrize("seed", sorted(PRINTED))
def test_random_gemma3n_size_kv_and_compute_are_llamacpps(seed):
    model, fmt, ctx = random_gemma3n_case(seed)
    size, kv_lines, compute_4dp = PRINTED[seed]
    assert sum(t.nbytes for t in synthesised_tensors(model, fmt)) == size
    est = kvmem.estimate(model, engine="llama.cpp", tokens=1, n_ctx=ctx["n_ctx"], n_seq=ctx["n_seq"],
                         kv_unified=ctx["kv_unified"], swa_full=False, type_k=ctx["type_k"], type_v=ctx["type_v"],
                         flash_attn=bool(ctx["flash_attn"]), n_ubatch=ctx["n_ubatch"], n_batch=ctx["n_ctx"])
    assert buffer_mib(est.total_bytes) == pytest.approx(sum(kv_lines), abs=0.011)
    d = est.details
    compute = llamacpp_compute_buffer(model, n_ctx=d.n_ctx, n_ubatch=d.n_ubatch, cells_per_stream=d.cells,
                                      flash_attn=bool(ctx["flash_attn"]), type_k=ctx["type_k"], type_v=ctx["type_v"],
                                      n_outputs=d.n_batch, n_seq=ctx["n_seq"], kv_unified=ctx["kv_unified"],
                                      swa_cells=d.swa_cells, backend="cpu")
    assert compute.exact and f"{compute.bytes / 1048576.0:.4f}" == compute_4dp


# (preset, n_ctx) -> llama.cpp's CPU compute MiB (n_ubatch 512, flash attention, Q4_K_M, no_alloc)
PRESET_COMPUTE = {("gemma-3n-e2b", 4096): 525.52, ("gemma-3n-e2b", 32768): 540.5, ("gemma-3n-e4b", 4096): 525.52,
                  ("gemma-3n-e4b", 32768): 520.5}


@pytest.mark.parametrize("name, n_ctx", sorted(PRESET_COMPUTE))
def test_presets_compute_buffers_are_llamacpps(name, n_ctx):
    model = kvmem.get_model(name)
    d = kvmem.estimate(model, engine="llama.cpp", tokens=1, n_ctx=n_ctx, flash_attn=True, n_ubatch=512, n_batch=n_ctx,
                       swa_full=False).details
    ours = graph_bytes(graph_shape(model), n_kv=d.cells, n_ubatch=d.n_ubatch, flash_attn=True, swa_cells=d.swa_cells)
    assert buffer_mib(ours) == PRESET_COMPUTE[name, n_ctx]


@pytest.mark.parametrize("name, size, n_tensors", [("gemma-3n-e2b", 3_302_335_872, 2 + 5 + 30 * 24),
                                                   ("gemma-3n-e4b", 4_838_362_560, 2 + 5 + 35 * 24)])
def test_presets_q4_k_m_are_llamacpps_size(name, size, n_tensors):
    # llama_model_size of the sparse Q4_K_M GGUF llama.cpp loaded (the oracle); the tied head: output_norm and
    # token_embd, then AltUp's two projections, the per-layer table, its projection and norm, 24 tensors a layer
    tensors = synthesised_tensors(kvmem.get_model(name), "q4_k_m")
    assert sum(t.nbytes for t in tensors) == size and len(tensors) == n_tensors
    shapes = {t.name: tuple(t.shape) for t in tensors}
    n_layer = kvmem.get_model(name).num_layers
    # the per-layer table: 256 x n_layer wide, n_vocab (262,400: padded by the converter) rows, not 262,144
    assert shapes["per_layer_token_embd.weight"] == (256 * n_layer, 262_400)
    assert shapes["altup_proj.weight"] == (2048, 2048, 3)
    # the KV-shared last layers keep their K/V projections (create_tensor_qkv requires them)
    assert shapes[f"blk.{n_layer - 1}.attn_k.weight"] == (2048, 2 * 256)
    types = {t.name: t.dtype for t in tensors}
    assert types["blk.0.altup_predict_coef.weight"] == "F32" and types["blk.0.laurel_l.weight"] == "F16"
    assert types["per_layer_model_proj.weight"] == "F16"


def test_presets_at_32k_cache_twenty_layers():
    # llama.cpp printed for both presets at n_ctx 32,768 (flash attention, swa_full off): the full cache 256.00 MiB
    # (4 full layers x 32,768 cells x 2 x 512 x 2 B), the SWA cache 32.00 MiB (16 sliding layers x 1,024 cells:
    # window 512 + n_ubatch 512)
    for name in ("gemma-3n-e2b", "gemma-3n-e4b"):
        est = kvmem.estimate(name, engine="llama.cpp", tokens=1, n_ctx=32768, flash_attn=True, n_ubatch=512,
                             n_batch=32768, swa_full=False)
        assert [(c["cells"], c["layers"], c["size_mib"]) for c in est.details.caches] == [(32768, 4, 256.0),
                                                                                        (1024, 16, 32.0)]
        assert est.total_bytes == (4 * 32768 + 16 * 1024) * 2 * 512 * 2


def test_fit_answers_for_llamacpp_with_exact_buffers():
    fit = kvmem.fit("gemma-3n-e4b", engine="llama.cpp", gpu="rtx-3090-24gb", context="32k", weight_dtype="q4_k_m")
    assert fit.fits
    assert graph_shape(kvmem.get_model("gemma-3n-e4b")) is not None      # the graph, not the labelled estimate


def test_where_the_model_level_tensors_go():
    # llama-arch.cpp L921-L925: the per-layer table with the input, AltUp's projections with the output; the
    # per-layer projection and its norm are repeating tensors of layer 0 (gemma3n.cpp L39-L40)
    assert tensor_group("per_layer_token_embd.weight") == ("embeddings", None)
    assert tensor_group("altup_proj.weight") == tensor_group("altup_unembd_proj.weight") == ("output", None)
    assert tensor_group("per_layer_model_proj.weight") == tensor_group("per_layer_proj_norm.weight") == ("other", 0)


@pytest.mark.parametrize("change, field", [({"laurel_rank": 32}, "laurel_rank"),
                                           ({"altup_num_inputs": 2}, "altup_num_inputs"),
                                           ({"hidden_size_per_layer_input": 128}, "hidden_size_per_layer_input"),
                                           ({"vocab_size_per_layer_input": 300_000}, "vocab_size_per_layer_input")])
def test_configs_llamacpp_does_not_load_are_refused_by_field(change, field):
    cfg = json.loads(json.dumps(preset("gemma-3n-e2b")["config"]))
    cfg["text_config"].update(change)
    model = Model.from_hf_config(cfg, name="gemma-3n-changed")
    with pytest.raises(ValueError, match=f"config field '{field}'"):
        synthesised_tensors(model, "q4_k_m")


def test_one_width_a_layer_as_a_list_is_the_same_layout():
    # the published configs write intermediate_size as a list, one width a layer (Google's gemma3n-slicing-configs);
    # the converter writes it as feed_forward_length and llama.cpp reads layer 0's for every layer
    cfg = json.loads(json.dumps(preset("gemma-3n-e2b")["config"]))
    cfg["text_config"]["intermediate_size"] = [8192] * 30
    listed = synthesised_tensors(Model.from_hf_config(cfg, name="gemma-3n-listed"), "q4_k_m")
    assert listed == synthesised_tensors(kvmem.get_model("gemma-3n-e2b"), "q4_k_m")


def test_an_abridged_config_is_refused_naming_the_field():
    # tests/fixtures/configs/gemma-3n-e2b-abridged.json: the KV fields only (no AltUp, LAuReL, vocabulary, FFN)
    from tests.fixtures import ABRIDGED
    model = Model.from_hf_config(ABRIDGED, name="gemma-3n-e2b-abridged")
    with pytest.raises(ValueError, match="config field 'altup_num_inputs' is absent"):
        synthesised_tensors(model, "q4_k_m")
    assert graph_shape(model) is None


def test_a_config_without_kv_heads_is_refused_naming_the_field():
    # absent, the converter writes head_count_kv 4 (conversion/gemma.py#L158) where transformers' Gemma3nTextConfig
    # builds 2 KV heads: llama.cpp finds attn_k the wrong shape. kvmem laid it out with n_head = 8 heads (attn_k
    # 2048 x 2048) and its graph shape carried n_head_kv None into graph_bytes (a TypeError)
    cfg = json.loads(json.dumps(preset("gemma-3n-e2b")["config"]))
    del cfg["text_config"]["num_key_value_heads"]
    model = Model.from_hf_config(cfg, name="gemma-3n-no-kv-heads")
    with pytest.raises(ValueError, match="config field 'num_key_value_heads' is absent; convert_hf_to_gguf writes "
                                         r"head_count_kv 4 .*gemma.py#L158"):
        synthesised_tensors(model, "q4_k_m")
    assert graph_shape(model) is None
    compute = llamacpp_compute_buffer(model, n_ctx=4096, n_ubatch=512, n_outputs=4096, backend="cpu")
    assert not compute.exact


# seed -> llama.cpp's "sched_reserve: graph: nodes = N" for the GGUF written from the case's config without
# final_logit_softcapping (no softcap key in the file; the same N with it): gemma3n.cpp#L306-L311 softcaps always
SOFTCAP_NODES = {0: 1509, 3: 2537}


@pytest.mark.parametrize("seed", sorted(SOFTCAP_NODES))
def test_the_logit_softcap_is_built_whatever_the_config_says(seed):
    from kvmem.engines.llamacpp.graphs import Pass
    from kvmem.engines.llamacpp.graphs_gemma3n import build_gemma3n
    model, _fmt, ctx = random_gemma3n_case(seed)
    cfg = dict(model.config)
    del cfg["final_logit_softcapping"]
    model = Model.from_hf_config(cfg, name=f"random-gemma3n-{seed}-no-softcap")
    d = kvmem.estimate(model, engine="llama.cpp", tokens=1, n_ctx=ctx["n_ctx"], swa_full=False, type_k=ctx["type_k"],
                       type_v=ctx["type_v"], flash_attn=bool(ctx["flash_attn"]), n_ubatch=ctx["n_ubatch"],
                       n_batch=ctx["n_ctx"]).details
    g = build_gemma3n(graph_shape(model), Pass(d.n_ubatch, d.n_ubatch, d.cells, 1, bool(ctx["flash_attn"]),
                                               ctx["type_k"], ctx["type_v"], d.swa_cells))
    # kvmem built 3 nodes fewer (1,506 / 2,534): no scale, tanh, scale after the lm_head
    assert len(g.nodes) == SOFTCAP_NODES[seed]
    assert [n.op for n in g.nodes[-4:]] == ["MUL_MAT", "SCALE", "UNARY", "SCALE"]

"""llama.cpp DeepSeek sparse attention (glm-dsa, deepseek32) by build date (plan._dsa_build, graphs_dsa.dsa_build_shape).

The dates are the merge commits on llama.cpp master (settings.PR_19460 .. PR_27176): glm-dsa loads from PR #19460
(2026-02-13) with its indexer ignored (deepseek2's graph over a plain MLA cache) until PR #25407 (2026-07-24);
GLM-5.2's "shared" layers load from PR #24770 (2026-06-20); deepseek32 and llama_kv_cache_dsa come with PR #23346
(2026-05-29), its indexer of generic ggml ops until GGML_OP_LIGHTNING_INDEXER (PR #24231, 2026-07-11; CUDA from
PR #25545, 2026-07-15); from PR #24060 (2026-06-05) the GGUF's MTP block holds a cache layer until the trunk filter
(glm-dsa PR #25980 2026-07-29, deepseek32 PR #26457 2026-08-03); glm-dsa's indexer cache is in every layer until
PR #26474 (2026-08-03); the indexer ropes views and concatenates them until PR #27176 (2026-08-16).
"""

import datetime

import pytest

from kvmem import estimate

MiB = 2**20


def llama(model, **kw):
    kw.setdefault("tokens", 4096)
    return estimate(model, engine="llama.cpp", **kw)


def _caches(model, build):
    return [(c["cache"], c["layers"], c["k_bytes"]) for c in llama(model, build=build).details.caches]


def test_deepseek32_caches_by_build_the_mtp_layer_between_pr_24060_and_pr_26457():
    # DeepSeek-V3.2 at 4096 cells: the latent 61 x 576 x 2 B x 4096 = 287,834,112 B, the indexer 61 x 128 x 2 B x
    # 4096 = 63,963,136 B; its GGUF carries the MTP block (block_count 62), cached from PR #24060 (2026-06-05) until
    # PR #26457 (2026-08-03): 62 x 576 x 2 x 4096 = 292,552,704 B and 62 x 128 x 2 x 4096 = 65,011,712 B
    trunk = [("kv", 61, 287_834_112), ("kv_idx", 61, 63_963_136)]
    with_mtp = [("kv", 62, 292_552_704), ("kv_idx", 62, 65_011_712)]
    for build in ("2026-05-29", "2026-06-04", "2026-08-03", "2026-08-19", None):
        assert _caches("deepseek-v3.2", build) == trunk
    for build in ("2026-06-05", "2026-07-11", "2026-08-02"):
        assert _caches("deepseek-v3.2", build) == with_mtp
    with pytest.raises(ValueError, match="builds before 2026-05-29 .PR #23346, LLM_ARCH_DEEPSEEK32. have no "
                                         "deepseek32 architecture; build 2026-05-28"):
        llama("deepseek-v3.2", build="2026-05-28")


def test_deepseek32_graph_before_the_fused_indexer_is_refused_as_not_computed():
    # the KV cache is given (above); the compute buffer of the generic-op indexer is not: a layout says so
    import kvmem
    from kvmem.engines.llamacpp.offload import layout
    from kvmem.engines.llamacpp.tensors import synthesised_tensors
    model = kvmem.get_model("deepseek-v3.2")
    tensors = synthesised_tensors(model, "q4_k_m")
    with pytest.raises(ValueError, match=r"build 2026-06-01 builds its lightning indexer from generic ggml ops "
                                         r".*the compute buffer of that graph is not computed here"):
        layout(model, tensors, n_ctx=4096, build="2026-06-01")
    with pytest.raises(ValueError, match=r"build 2026-07-14 runs GGML_OP_LIGHTNING_INDEXER on the CPU only: a CUDA "
                                         r"build disables it .*until PR #25545 \(2026-07-15\)"):
        layout(model, tensors, n_ctx=4096, build="2026-07-14")


def test_glm_dsa_before_pr_19460_has_no_architecture():
    with pytest.raises(ValueError, match="builds before 2026-02-13 .PR #19460, LLM_ARCH_GLM_DSA. have no glm-dsa "
                                         "architecture; build 2026-02-12"):
        llama("glm-5.2", build="2026-02-12")


def test_glm_5_2_caches_by_build():
    # GLM-5.2 at 4096 cells, its GGUF with the MTP block (block_count 79): the latent 78 x 576 x 2 B x 4096 =
    # 368,050,176 B (351.00 MiB); 79 layers 372,768,768 B from PR #24060 (2026-06-05) until PR #25980 (2026-07-29);
    # the indexer cache from PR #25407 (2026-07-24): every layer x 128 x 2 B x 4096 (79: 82,837,504 B; 78:
    # 81,788,928 B) until PR #26474 (2026-08-03) keeps the 21 "full" layers: 22,020,096 B (21.00 MiB), as build
    # 10505's log prints 21 layers
    assert _caches("glm-5.2", "2026-06-20") == _caches("glm-5.2", "2026-07-23") == [("kv", 79, 372_768_768)]
    assert _caches("glm-5.2", "2026-07-24") == [("kv", 79, 372_768_768), ("kv_idx", 79, 82_837_504)]
    assert _caches("glm-5.2", "2026-07-29") == _caches("glm-5.2", "2026-08-02") == [
        ("kv", 78, 368_050_176), ("kv_idx", 78, 81_788_928)]
    assert _caches("glm-5.2", "2026-08-03") == _caches("glm-5.2", "2026-08-19") == [
        ("kv", 78, 368_050_176), ("kv_idx", 21, 22_020_096)]
    assert llama("glm-5.2", build="2026-08-19").kv_bytes == llama("glm-5.2").kv_bytes == 351 * MiB + 21 * MiB


def test_the_mtp_layers_cache_sits_on_the_mtp_blocks_device():
    # -ngl all on 2 GPUs, equal split over n_layer_all + 1 = 80: layers 0-39 on CUDA0, 40-77, the MTP block 78
    # (and the output) on CUDA1, so its latent and indexer rows, (576 + 128) x 2 B x 4096 = 5,767,168 B, go to
    # CUDA1 at 2026-07-24, not from PR #25980 (2026-07-29) on
    import kvmem
    from kvmem.engines.llamacpp.offload import layout
    from kvmem.engines.llamacpp.tensors import synthesised_tensors
    model = kvmem.get_model("glm-5.1")
    tensors = synthesised_tensors(model, "q2_k")
    kv = {b: {d.device: d.kv_bytes for d in layout(model, tensors, gpus=("CUDA0", "CUDA1"), n_ctx=4096,
                                                    build=b).placement.devices} for b in ("2026-07-24", "2026-07-29")}
    assert kv["2026-07-24"]["CUDA0"] == kv["2026-07-29"]["CUDA0"] == 40 * 704 * 2 * 4096
    assert kv["2026-07-24"]["CUDA1"] - kv["2026-07-29"]["CUDA1"] == 5_767_168


def test_the_indexer_graph_ropes_views_and_concatenates_before_pr_27176():
    # PR #27176 (2026-08-16) removed two ggml_concat per full indexer layer: GLM-5.2's 21 full layers, 7134 nodes
    # before (the node count PR #25407's 2026-07-20 comment prints for its branch at -c 8192), 7050 after
    import kvmem
    from kvmem.engines.llamacpp.compute import graph_shape
    from kvmem.engines.llamacpp.graph_build import build_graph
    from kvmem.engines.llamacpp.graphs import Pass
    model = kvmem.get_model("glm-5.2")
    p = Pass(512, 512, 8192, 1, True, "q8_0", "q8_0")
    nodes = {b: build_graph(graph_shape(model, datetime.date.fromisoformat(b)), p).nodes
             for b in ("2026-07-24", "2026-08-15", "2026-08-16")}
    assert [len(n) for n in nodes.values()] == [7134, 7134, 7050]
    assert sum(n.op == "CONCAT" for n in nodes["2026-08-15"]) - sum(n.op == "CONCAT" for n in nodes["2026-08-16"]) == 42


# ---- the GLM-5.2 runs of build 10505: CUDA0's compute line is set by which host expert is the largest ------

def _glm52_entries():
    import json
    from pathlib import Path
    logs = json.loads((Path(__file__).parents[2] / "docs/research/llamacpp_offload_logs.json").read_text())
    return {e["id"]: e for e in logs if e["id"].startswith("glm-5.2-ud-")}


GLM52 = _glm52_entries()
# bytes per weight of a 256 x 6144 x 2048 expert tensor: Q4_K 144 B / 256, Q6_K 210 B / 256, Q8_0 34 B / 32
# (llama.cpp@0c1e57098 ggml/src/ggml-common.h block_q4_K, block_q6_K, block_q8_0)
_BYTES = {"Q4_K": (144, 256), "Q6_K": (210, 256), "Q8_0": (34, 32)}
# one tensor retyped in kvmem's approximate UD mix (tensors.synthesised_tensors: llama-quantize's Q5_K_M /
# Q4_K_M rules, Q6_K ffn_down_exps on layers 0-9 by use_more_bits): the Q5 file's largest host expert is a Q8_0
# (the printed Q5 CUDA0 is 744.00 MiB = 3264 - 2520 above the Q4 run at the same flags), put in layer 8's
# ffn_down_exps; the Q4 file (4 q6_K tensors in all) has no Q6_K expert in layer 3, the first MoE layer
RETYPED = {"q5": ("blk.8.ffn_down_exps.weight", "Q8_0"), "q4": ("blk.3.ffn_down_exps.weight", "Q4_K")}


def _cuda0(entry, retype=None):
    import dataclasses
    import math

    import kvmem
    from kvmem.engines.llamacpp.offload import layout
    from kvmem.engines.llamacpp.placement import buffer_mib
    from kvmem.engines.llamacpp.tensors import synthesised_tensors
    s = entry["settings"]
    model = kvmem.get_model(entry["preset"])
    tensors = synthesised_tensors(model, entry["weight_format"], imatrix=entry.get("imatrix", False))
    if retype:
        name, dtype = retype
        num, den = _BYTES[dtype]
        tensors = [dataclasses.replace(t, dtype=dtype, nbytes=math.prod(t.shape) * num // den) if t.name == name
                   else t for t in tensors]
    lay = layout(model, tensors, gpus=tuple(s["gpus"]), n_gpu_layers=s["n_gpu_layers"],
                 tensor_split=s["tensor_split"], n_cpu_moe=s["n_cpu_moe"], n_ctx=s["n_ctx"],
                 n_ubatch=s.get("n_ubatch", 512), flash_attn=s["flash_attn"], mmap=s["mmap"], build=s["build"])
    return buffer_mib(lay.compute_bytes["CUDA0"])


@pytest.mark.parametrize("entry_id", sorted(GLM52))
def test_glm52_cuda0_compute_is_the_printed_with_the_files_largest_host_expert(entry_id):
    # -ncmoe 54: CUDA0 runs every host layer's prompt-sized MUL_MAT_ID on a copy of its expert tensor (pass 1's
    # op offload; each weight starts a split, ggml-backend.cpp#L1325-L1360, its copy allocated at the split's
    # start, #L1514-L1530), so the line is the largest copy + what is live beside it. The scheduler and allocator
    # as kvmem emulates them give every printed CUDA0 line to the MiB, nine of nine, once one tensor of the mix
    # has the file's type (the log prints only type counts: which tensor it is, is the fit)
    entry = GLM52[entry_id]
    retype = RETYPED["q5" if "-q5kxl-" in entry_id else "q4"]
    assert _cuda0(entry, retype) == entry["printed"]["compute_mib"]["CUDA0"]


def test_glm52_largest_host_expert_in_the_first_moe_layer_costs_44_mib():
    # the 44.00 MiB the Q4 lines were over (4424.07 against 4380.07) is the mix's Q6_K blk.3.ffn_down_exps: after
    # dense layer 2 the freed ffn_moe_up output (512 x 8 x 2048 x 4 B = 32 MiB) leaves a hole below ffn_inp
    # (512 x 6144 x 4 B = 12 MiB), the GLU output goes above it and the down copy (2520 MiB) above that, at
    # 1808.07. In later layers (e.g. 26) ffn_inp and the norm output lie below the masks (at 220 and 0 MiB) and
    # the copy follows the GLU output at 1732.07 directly: 1732.07 + 32 + 2520 + 96 (its output) = 4380.07
    entry = GLM52["glm-5.2-ud-q4kxl-ncmoe54-ts-54-9-8-8-ctx768000"]
    assert _cuda0(entry) == 4424.07 == entry["printed"]["compute_mib"]["CUDA0"] + 44.00


# ---- glm-dsa at builds 2026-02-13 .. 2026-07-23: PR #19460's glm-dsa, its indexer loaded and ignored ------------

def _small_glm5(**extra):
    """A GLM-5-shaped glm_moe_dsa config (zai-org/GLM-5 geometry), 4 layers, the first dense."""
    import kvmem
    config = dict(
        model_type="glm_moe_dsa", num_hidden_layers=4, hidden_size=6144, num_attention_heads=64,
        num_key_value_heads=64, kv_lora_rank=512, q_lora_rank=2048, qk_nope_head_dim=192, qk_rope_head_dim=64,
        v_head_dim=256, index_topk=2048, index_head_dim=128, index_n_heads=32, vocab_size=154880,
        intermediate_size=12288, moe_intermediate_size=2048, n_routed_experts=256, num_experts_per_tok=8,
        first_k_dense_replace=1, max_position_embeddings=202752)
    return kvmem.Model.from_hf_config({**config, **extra})


def test_glm_dsa_at_2026_03_01_caches_the_latent_alone_in_a_plain_llama_kv_cache():
    # deepseek2's llama_kv_cache, MLA latent only (PR #19067): 4 layers x (512 + 64) x 2 B x 4096 cells =
    # 18,874,368 B, no V and no indexer cache; from 2026-08-19 llama_kv_cache_dsa adds 4 x 128 x 2 B x 4096 =
    # 4,194,304 B of indexer keys
    model = _small_glm5()
    old = llama(model, build="2026-03-01").details.caches
    assert [(c["cache"], c["layers"], c["k_bytes"], c["v_bytes"]) for c in old] == [("kv", 4, 18_874_368, 0)]
    new = llama(model, build="2026-08-19").details.caches
    assert [(c["cache"], c["k_bytes"]) for c in new] == [("kv", 18_874_368), ("kv_idx", 4_194_304)]
    # GLM-5.1 (78 layers and the MTP block, no indexer_types) at 4096 cells: 78 x 576 x 2 x 4096 = 368,050,176 B
    # (351.00 MiB) before PR #24060, the MTP block's layer too from it: 79 x 576 x 2 x 4096 = 372,768,768 B
    assert llama("glm-5.1", build="2026-06-04").kv_bytes == 368_050_176 == 351 * MiB
    assert llama("glm-5.1", build="2026-07-23").kv_bytes == 372_768_768


def test_glm_dsa_at_2026_03_01_loads_the_indexer_weights_and_runs_deepseek2s_graph():
    import dataclasses
    import datetime

    import kvmem
    from kvmem.engines.llamacpp.compute import graph_bytes, graph_shape
    from kvmem.engines.llamacpp.graphs_mla_oss import mla_oss_shape
    from kvmem.engines.llamacpp.offload import layout
    from kvmem.engines.llamacpp.tensors import synthesised_tensors
    model = _small_glm5()
    tensors = synthesised_tensors(model, "q8_0")
    old = layout(model, tensors, n_ctx=4096, build="2026-03-01")
    new = layout(model, tensors, n_ctx=4096, build="2026-08-19")
    # the same tensors loaded (PR #19460 requires the indexer's five in every trunk layer; PR #24770's description:
    # "loaded-but-unused"): the model buffer does not move
    assert old.placement.devices[0].model_bytes == new.placement.devices[0].model_bytes
    idx = {t.name: t.nbytes for t in old.placement.tensors if ".indexer." in t.name}
    # per layer: k_norm weight and bias 128 x 4 B each (F32), and in the file's Q8_0 (34 B per 32 values) proj
    # 6144 x 32, attn_k 6144 x 128 and attn_q_b 2048 x 4096: 1,024 + 208,896 + 835,584 + 8,912,896 = 9,958,400 B
    assert len(idx) == 4 * 5 and sum(idx.values()) == 4 * 9_958_400
    # the graph: deepseek2's at that build over the same widths (the DeepSeek-V3 config of this geometry, GLM's
    # sigmoid gating without a selection bias), no indexer; Q's rope part roped first, as deepseek2 before PR #27382
    day = datetime.date(2026, 3, 1)
    shape = graph_shape(model, day)
    v3 = kvmem.Model.from_hf_config({**model.config, "model_type": "deepseek_v3"})
    assert shape == dataclasses.replace(mla_oss_shape(v3, day), gating="sigmoid", probs_bias=False)
    assert shape.rope_q_early and not graph_shape(model, datetime.date(2026, 7, 24)).rope_q_early
    assert graph_shape(model).arch == "glm-dsa" and graph_shape(model, datetime.date(2026, 8, 19)).indexer_full
    # CPU compute at 4096 cells, -ub 512, FA: deepseek2's graph 371,730,432 B (354.51 MiB), not the vendored
    # glm-dsa graph's 354,945,024 B (338.50 MiB)
    kw = dict(n_kv=4096, n_ubatch=512, flash_attn=True)
    assert (graph_bytes(shape, **kw), graph_bytes(graph_shape(model), **kw)) == (371_730_432, 354_945_024)


def test_glm_5_2_before_pr_24770_fails_to_load_its_shared_layers():
    with pytest.raises(ValueError, match="requires the indexer tensors in every layer .PR #19460's glm-dsa "
                                         "load_tensors, until PR #24770 of 2026-06-20 made them optional.; a GGUF "
                                         "converted from its config has none in its 57 'shared' layers"):
        llama("glm-5.2", build="2026-03-01")
    with pytest.raises(ValueError, match="until PR #24770 of 2026-06-20 made them optional"):
        llama("glm-5.2", build="2026-06-19")
    # from PR #24770's merge (796f41bed, 2026-06-20): laid out
    assert [c["cache"] for c in llama("glm-5.2", build="2026-06-20").details.caches] == ["kv"]


def test_a_gguf_with_the_indexer_in_every_layer_loads_before_pr_24770():
    # Unsloth's GLM-5.2 GGUFs carry the indexer tensors in every layer (ik_llama.cpp PR #2017: they load without
    # PR #24770): a checkpoint naming them in the "shared" layers is laid out at 2026-03-01, latent only:
    # 4 x 576 x 2 B x 4096 = 18,874,368 B
    from kvmem.engines.llamacpp.tensors import GGUFTensor
    from kvmem.sources import Checkpoint
    model = _small_glm5(indexer_types=["full", "shared", "shared", "full"])
    with pytest.raises(ValueError, match=r"none in its 2 'shared' layers and fails to load \(missing tensor "
                                         r"'blk.1.indexer.k_norm.weight'\)"):
        llama(model, build="2026-03-01")
    gguf = Checkpoint("gguf", "glm.gguf", tuple(GGUFTensor(f"blk.{i}.indexer.k_norm.weight", "F32", (128,), 1)
                                                for i in range(4)))
    caches = llama(model.with_checkpoint(gguf), build="2026-03-01").details.caches
    assert [(c["cache"], c["k_bytes"]) for c in caches] == [("kv", 18_874_368)]


def test_glm_5_2_on_dense_master_of_2026_07_20_has_the_published_cuda0_compute_buffer():
    # https://github.com/ggml-org/llama.cpp/pull/25407 (comment of 2026-07-20): GLM-5.2 UD-IQ2_M on 8 x RTX 5090,
    # all layers on GPU, -fa 1 -ctk q8_0 -ctv q8_0, -c 8192; "dense master" (deepseek2's graph, no indexer):
    # CUDA0 304 MiB, CUDA1-7 316-364 MiB. kvmem at 2026-07-20 (deepseek2's graph, the q2_k mix: every expert on a
    # GPU, so the graph's buffers do not read the weights' types): CUDA0 304.02, CUDA1-7 316.02 each (the range's
    # low end; which card printed 364 the comment does not say); the DSA graph of build 10505 gives CUDA0 433.29
    import kvmem
    from kvmem.engines.llamacpp.offload import layout
    from kvmem.engines.llamacpp.placement import buffer_mib
    from kvmem.engines.llamacpp.tensors import synthesised_tensors
    model = kvmem.get_model("glm-5.2")
    tensors = synthesised_tensors(model, "q2_k")
    gpus = tuple(f"CUDA{i}" for i in range(8))
    kw = dict(gpus=gpus, n_ctx=8192, flash_attn=True, type_k="q8_0", type_v="q8_0")
    dense = layout(model, tensors, build="2026-07-20", **kw).compute_bytes
    assert buffer_mib(dense["CUDA0"]) == 304.02 and {buffer_mib(dense[g]) for g in gpus[1:]} == {316.02}
    assert buffer_mib(layout(model, tensors, build="2026-08-19", **kw).compute_bytes["CUDA0"]) == 433.29


def test_glm_5_2_on_dense_master_of_2026_07_20_has_the_published_host_compute_buffer():
    # the same run's CUDA_Host line: 56 MiB ("dense master"), 88 MiB (PR #25407's branch). 8 GPUs, every layer
    # offloaded: pipeline parallelism, n_copies = 4 copies of each graph input on the host: tokens and positions
    # (2 KiB each at -ub 512), K indices (4 KiB), out_ids, the f16 KQ mask 8192 x 512 x 2 B = 8 MiB; plus token_embd's
    # GET_ROWS output 6144 x 512 x 4 B = 12 MiB and the unused inp_embd input (PR #18898), 12 MiB once: builds to
    # 2026-08-22 copy only the inputs a node reads (settings.SCHED_USED_INPUT_COPIES_TO), so 4 x 8 + 12 + 12 = 56 MiB
    # and 56.03 printed; four copies of inp_embd (the vendored scheduler's pass 6) made it 92.03. With the indexer
    # (PR #25407, 2026-07-24 on) its f16 mask adds 4 x 8 MiB: 88.30, the branch's 88
    import kvmem
    from kvmem.engines.llamacpp.offload import layout
    from kvmem.engines.llamacpp.placement import buffer_mib
    from kvmem.engines.llamacpp.tensors import synthesised_tensors
    model = kvmem.get_model("glm-5.2")
    tensors = synthesised_tensors(model, "q2_k")
    kw = dict(gpus=tuple(f"CUDA{i}" for i in range(8)), n_ctx=8192, flash_attn=True, type_k="q8_0", type_v="q8_0")
    host = {b: buffer_mib(layout(model, tensors, build=b, **kw).compute_bytes["CPU"])
            for b in ("2026-07-20", "2026-07-24", "2026-08-22", "2026-08-23")}
    assert host == {"2026-07-20": 56.03, "2026-07-24": 88.30, "2026-08-22": 88.30, "2026-08-23": 124.30}

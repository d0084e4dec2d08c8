"""A GGUF's NextN/MTP blocks in kvmem's llama.cpp placement (placement.place n_nextn, arch_tensors.gguf_nextn_layers):
the split over n_layer_all + 1, the blocks' tensors skipped but nextn_loaded's, the trunk's KV, "offloaded N/M"."""

import pytest

import kvmem
from kvmem.engines.llamacpp.nextn import gguf_nextn_layers, nextn_loaded
from kvmem.engines.llamacpp.placement import place
from kvmem.engines.llamacpp.tensors import GGUFTensor


def test_split_counts_the_mtp_block():
    # 5 trunk layers + 1 MTP block, -ts 1,1: split points 0.5, 1 against il / 7 (n_layer_all + 1 = 7):
    # il 0-3 on CUDA0 (3/7 = 0.43 < 0.5), il 4, the MTP block 5 and the output 6 on CUDA1; KV 10 B a trunk layer:
    # CUDA0 4 x 10 = 40, CUDA1 1 x 10 = 10. Without the block (over 6): il 0-2 on CUDA0 (3/6 = 0.5 goes to CUDA1)
    kw = dict(n_layer=5, n_gpu_layers=999, gpus=("CUDA0", "CUDA1"), tensor_split=(1, 1), kv_per_layer=[10] * 5)
    p = place([], n_nextn=1, **kw)
    assert p.layer_device == ("CUDA0",) * 4 + ("CUDA1",) and p.nextn_device == ("CUDA1",)
    assert (p.device("CUDA0").kv_bytes, p.device("CUDA1").kv_bytes) == (40, 10)
    assert (p.offloaded_layers, p.layers_total) == (7, 7)          # "offloaded 7/7 layers to GPU"
    q = place([], **kw)
    assert q.device("CUDA0").layers == (0, 1, 2) and (q.offloaded_layers, q.layers_total) == (6, 6)


def test_ngl_counts_from_the_back_of_n_layer_all():
    # -ngl 6 of n_layer_all + 1 = 7: i_gpu_start = 7 - 6 = 1, layer 0 on the host ("offloaded 6/7")
    p = place([], n_layer=5, n_nextn=1, n_gpu_layers=6, gpus=("CUDA0",), kv_per_layer=[10] * 5)
    assert p.layer_device[0] == "CPU" and p.layer_device[1:] == ("CUDA0",) * 4 and p.output_device == "CUDA0"
    assert (p.offloaded_layers, p.layers_total, p.host.kv_bytes) == (6, 7, 10)


def test_mtp_tensors_skipped_but_the_ones_loaded():
    # blk.2 is the MTP block of a 2-layer trunk: its tensors are skipped (TENSOR_SKIP) but exp_probs_b.bias
    # (glm-dsa.cpp#L155: 256 experts x 4 B = 1,024 B, on the block's device)
    t = [GGUFTensor("token_embd.weight", "F32", (8, 16), 512), GGUFTensor("blk.0.attn_norm.weight", "F32", (8,), 32),
         GGUFTensor("blk.1.attn_norm.weight", "F32", (8,), 32), GGUFTensor("blk.2.attn_norm.weight", "F32", (8,), 32),
         GGUFTensor("blk.2.exp_probs_b.bias", "F32", (256,), 1024)]
    p = place(t, n_layer=2, n_nextn=1, n_gpu_layers=999, gpus=("CUDA0",), nextn_loaded=(".exp_probs_b.bias",),
              tied_output=False)
    assert [x.name for x in p.tensors if x.device == "CUDA0"] == ["blk.0.attn_norm.weight", "blk.1.attn_norm.weight",
                                                                  "blk.2.exp_probs_b.bias"]
    # CUDA0: 128 + 128 + 1,024 (each padded to 128 B); the host: token_embd's 512 B span
    assert (p.device("CUDA0").model_bytes, p.host.model_bytes) == (1280, 512)
    assert [x.name for x in place(t, n_layer=2, n_nextn=1, n_gpu_layers=999, gpus=("CUDA0",)).tensors
            if x.layer == 2] == []
    with pytest.raises(ValueError, match="past the model's 2 layers"):
        place(t, n_layer=2, n_gpu_layers=999, gpus=("CUDA0",))
    with pytest.raises(ValueError, match="n_nextn must be a whole number"):
        place(t, n_layer=2, n_nextn=-1, n_gpu_layers=0)


def test_nextn_count_per_converter():
    # convert_hf_to_gguf's defaults: glm4moe / glm-dsa / deepseek32 add num_nextn_predict_layers (1 in these
    # configs), qwen35moe mtp_num_hidden_layers (1); DeepseekV2Model drops them (skip_mtp); llama has none
    counts = {name: gguf_nextn_layers(kvmem.get_model(name)) for name in
              ("glm-4.5-air", "glm-5.2", "deepseek-v3.2", "qwen3.5-397b-a17b", "deepseek-v3", "llama-3.1-8b")}
    assert counts == {"glm-4.5-air": 1, "glm-5.2": 1, "deepseek-v3.2": 1, "qwen3.5-397b-a17b": 1, "deepseek-v3": 0,
                      "llama-3.1-8b": 0}
    assert nextn_loaded(kvmem.get_model("glm-5.2")) == (".exp_probs_b.bias",)
    assert nextn_loaded(kvmem.get_model("glm-4.5-air")) == ()


def test_the_loaded_mtp_tensor_is_in_no_graph():
    # GLM-5.2 on two GPUs (the glm-dsa graph scheduled, layouts._scheduled): the MTP block's exp_probs_b.bias moved
    # to the host by -ot is no weight of the main context's graph, so every compute buffer stays as it was (before,
    # the graph refused the unknown weight and fell back to the estimate); the bias leaves CUDA1 for the host
    from kvmem.engines.llamacpp.layouts import layout
    from kvmem.engines.llamacpp.tensors import synthesised_tensors
    model = kvmem.get_model("glm-5.2")
    tensors = synthesised_tensors(model, "q4_k_m")
    kw = dict(gpus=("CUDA0", "CUDA1"), n_cpu_moe=78, n_ctx=4096, flash_attn=True)
    base = layout(model, tensors, **kw)
    moved = layout(model, tensors, override_tensor=((r"blk\.78\.", "CPU"),), **kw)
    assert [(t.name, t.device) for t in base.placement.tensors if t.layer == 78] == [("blk.78.exp_probs_b.bias",
                                                                                     "CUDA1")]
    assert moved.compute_bytes == base.compute_bytes
    # 256 experts x 4 B = 1,024 B, a multiple of CUDA's 128-byte alignment
    assert base.placement.device("CUDA1").model_bytes - moved.placement.device("CUDA1").model_bytes == 1024


def test_check_log_splits_a_glm_5_2_log_as_printed():
    # the published GLM-5.2 log (-ts 54,9,8,8, 4,096 cells, "offloaded 80/80"): both DSA caches' KV lines per GPU,
    # 55 / 9 / 8 / 6 of the 78 trunk layers x 4.50 MiB (4,096 x 576 x 2 B) + 16 / 2 / 2 / 1 indexer layers x 1.00
    # MiB (4,096 x 128 x 2 B): CUDA0 247.50 + 16.00 = 263.50 (the 79-layer split gave 54 x 4.50 + 15 = 258.00)
    import json
    from pathlib import Path

    from kvmem.logcheck import check_log
    logs = {e["id"]: e for e in json.loads((Path(__file__).parents[2] / "docs/research/llamacpp_offload_logs.json")
                                           .read_text())}
    log = logs["glm-5.2-ud-q5kxl-ncmoe54-ts-54-9-8-8-ctx4096"]["log"]
    r = check_log(log, "glm-5.2", tensor_split="54,9,8,8")
    assert r.matches and [(c.quantity, c.kvmem) for c in r.checks if "KV buffer" in c.quantity] == [
        ("CUDA0 KV buffer", "263.50 MiB"), ("CUDA1 KV buffer", "42.50 MiB"), ("CUDA2 KV buffer", "38.00 MiB"),
        ("CUDA3 KV buffer", "28.00 MiB")]
    # a file with another count of MTP blocks prints another M: said in a note (the split moves)
    other = check_log(log.replace("offloaded 80/80", "offloaded 79/79"), "glm-5.2", tensor_split="54,9,8,8")
    assert "line 1: 'offloaded 79/79 layers to GPU' counts 78 layers in the file, kvmem 79 (78 and 1 NextN/MTP)" \
        in other.notes[-1]


def test_fit_emulation_counts_the_trunk_as_fit_cpp_does():
    # common/fit.cpp counts hp_ngl = llama_model_n_layer (the trunk; + n_layer_nextn only with load_mtp,
    # llama.cpp@0c1e57098 common/fit.cpp#L140-L143) and writes -ngl = the layers it assigned, at most hp_ngl + 1
    # (#L553-L560); the load then splits n_layer_all + 1. GLM-4.5-Air (46 trunk layers + 1 MTP block) given 20 + 27
    # = 47 = hp_ngl + 1 layers: -ngl 47 -ts 20,27 over 48 layers, i_gpu_start = 48 - 47 = 1, so layer 0 stays on the
    # host ("offloaded 47/48"); layers 1-20 on CUDA0 ((il - 1) / 47 < 20/47), 21-45, the block and the output on CUDA1
    from kvmem.engines.llamacpp.fitting import fit_layout
    from kvmem.engines.llamacpp.placement import CPU
    from kvmem.engines.llamacpp.tensors import synthesised_tensors
    model = kvmem.get_model("glm-4.5-air")
    lay = fit_layout(model, synthesised_tensors(model, "q4_k_m"), ("CUDA0", "CUDA1"),
                     [(20, 0, "MOE"), (27, 0, "MOE")], [CPU, CPU], {}, 4096)
    p = lay.placement
    assert (lay.n_gpu_layers, lay.tensor_split, p.offloaded_layers, p.layers_total) == (47, (20, 27), 47, 48)
    assert p.layer_device[0] == CPU and p.device("CUDA0").layers == tuple(range(1, 21))
    assert p.nextn_device == ("CUDA1",) and p.output_device == "CUDA1"


def test_pipeline_plan_splits_the_mtp_block_too():
    # plan's per-GPU layers under an equal split (all offloaded): 5 trunk layers + 1 block over 2 GPUs, il / 7
    # against 0.5: layers 0-3 on GPU 0 (3/7 = 0.43), 4 on GPU 1; without the block il / 6: 0-2 and 3-4
    from kvmem.engines.llamacpp.plan import _layer_devices
    assert _layer_devices(5, 2, 1) == [0, 0, 0, 0, 1] and _layer_devices(5, 2) == [0, 0, 0, 1, 1]

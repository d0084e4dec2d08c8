"""kvmem.engines.llamacpp.compute: llama.cpp's CPU compute buffer, pinned to values llama.cpp itself
printed (llama-cpp-python 0.3.36, "CPU compute buffer size is %.4f MiB" when the context is freed;
the GGUFs as kvmem/oracles/llamacpp_buffers.py writes them, sparse, Q4_0 weights for the two real
shapes; real-shape presets under no_alloc print two decimals only). The oracle
(tests/oracles/test_llamacpp_buffers_oracle.py) checks 200 random GGUFs."""

from dataclasses import replace

import pytest

import kvmem
from kvmem.engines.llamacpp.compute import (
    GraphShape,
    compute_buffer,
    estimate_bytes,
    graph_bytes,
    llamacpp_compute_buffer,
    llamacpp_compute_bytes,
)
from kvmem.engines.llamacpp.ggml_alloc import gallocr_size
from kvmem.engines.llamacpp.ggml_graph import OUTPUT, Graph
from kvmem.engines.llamacpp.offload import layout
from kvmem.engines.llamacpp.scheduled import expert_weights, reduced_layers
from kvmem.engines.llamacpp.tensors import tensors_for

LLAMA3_8B = GraphShape("llama", n_layer=32, n_embd=4096, n_head=32, n_head_kv=8, head_dim=128, n_ff=14336,
                       n_vocab=128256)
QWEN3_30B_A3B = GraphShape("qwen3moe", n_layer=48, n_embd=2048, n_head=32, n_head_kv=4, head_dim=128, n_ff=0,
                           n_vocab=151936, n_expert=128, n_expert_used=8, n_ff_exp=768)


def mib4(nbytes: int) -> str:
    return f"{nbytes / 1048576.0:.4f}"


@pytest.mark.parametrize("shape, n_ctx, n_ubatch, flash_attn, cache, nbytes, printed", [
    # flash attention off: the n_kv x n_ubatch x heads f32 KQ of one layer beside the f32 mask
    (LLAMA3_8B, 512, 512, False, "f16", 279_447_552, "266.5020"),
    (LLAMA3_8B, 8192, 512, False, "f16", 599_795_712, "572.0098"),
    # flash attention on: the logits (512 x 128,256 f32) win
    (LLAMA3_8B, 8192, 512, True, "f16", 279_447_552, "266.5020"),
    # q8_0 cache: the Hadamard rotations of Q, K, V and the attention output add 8 MiB
    (LLAMA3_8B, 32768, 512, True, "q8_0", 287_836_160, "274.5020"),
    (LLAMA3_8B, 4096, 2048, True, "f16", 1_117_790_208, "1066.0078"),
    (QWEN3_30B_A3B, 512, 512, False, "f16", 319_555_584, "304.7520"),
    (QWEN3_30B_A3B, 8192, 512, False, "f16", 585_115_648, "558.0098"),
    (QWEN3_30B_A3B, 32768, 512, True, "q8_0", 319_555_584, "304.7520"),
    (QWEN3_30B_A3B, 4096, 2048, True, "f16", 1_278_222_336, "1219.0078"),
])
def test_real_shapes_equal_llamacpp(shape, n_ctx, n_ubatch, flash_attn, cache, nbytes, printed):
    got = graph_bytes(shape, n_kv=n_ctx, n_ubatch=n_ubatch, flash_attn=flash_attn, type_k=cache, type_v=cache)
    assert got == nbytes and mib4(got) == printed


@pytest.mark.parametrize("shape, n_ctx, n_ubatch, flash_attn, type_k, type_v, nbytes, printed", [
    # each measured on a random GGUF written by kvmem/oracles/llamacpp_buffers.py write_spec
    # flash attention, f32 K (cast to f16 per layer), q8_0 V (rotated)
    (GraphShape("llama", 4, 1024, 4, 4, 64, 768, 2048), 256, 128, True, "f32", "q8_0", 2_706_944, "2.5815"),
    # MoE, 2 of 4 experts, flash attention off over 4096 cells
    (GraphShape("qwen3moe", 4, 256, 2, 2, 128, 0, 2048, 4, 2, 256), 4096, 128, False, "f32", "f16",
     7_211_520, "6.8774"),
    # one expert per token (the experts' view made contiguous), q4_0 K rotated in 128 x 128
    (GraphShape("qwen3moe", 1, 512, 8, 1, 128, 0, 256, 16, 1, 256), 256, 32, False, "q4_0", "f16",
     721_536, "0.6881"),
    # q4_0 K and V, head size 64
    (GraphShape("qwen3moe", 3, 768, 4, 1, 64, 0, 2048, 8, 1, 256), 512, 32, True, "q4_0", "q4_0",
     557_184, "0.5314"),
    # llama, flash attention on and off
    (GraphShape("llama", 5, 512, 4, 4, 128, 1536, 512), 256, 512, True, "f16", "q8_0", 6_970_368, "6.6475"),
    (GraphShape("llama", 6, 512, 4, 1, 128, 1280, 512), 512, 128, False, "q4_0", "f16", 3_213_824, "3.0649"),
    # llama architecture with experts (Mixtral's GGUFs), n_ctx 1000 -> 1024 cells
    (GraphShape("llama", 4, 256, 8, 4, 64, 0, 1000, 8, 1, 256), 1000, 512, False, "q8_0", "f16",
     22_571_008, "21.5254"),
    (GraphShape("llama", 6, 1024, 2, 2, 64, 0, 256, 8, 2, 512), 1000, 512, True, "f32", "q8_0",
     13_924_352, "13.2793"),
    # qwen3 dense: RMS-normed Q and K
    (GraphShape("qwen3", 1, 512, 8, 1, 128, 768, 256), 256, 512, False, "q8_0", "f16", 5_313_536, "5.0674"),
    (GraphShape("qwen3", 6, 768, 8, 2, 64, 512, 512), 4096, 512, True, "f16", "f32", 11_024_384, "10.5137"),
    # qwen2: Q/K/V biases (added in place); a bf16 V cache
    (GraphShape("qwen2", 1, 512, 4, 1, 128, 768, 256, qkv_bias=True), 256, 512, False, "q4_0", "f16",
     3_740_672, "3.5674"),
    (GraphShape("qwen2", 6, 768, 12, 1, 64, 512, 512, qkv_bias=True), 4096, 512, True, "q8_0", "bf16",
     13_137_920, "12.5293"),
])
def test_random_gguf_shapes_equal_llamacpp(shape, n_ctx, n_ubatch, flash_attn, type_k, type_v, nbytes, printed):
    n_kv = -(-n_ctx // 256) * 256
    got = graph_bytes(shape, n_kv=n_kv, n_ubatch=min(n_ubatch, n_ctx), flash_attn=flash_attn, type_k=type_k,
                      type_v=type_v)
    assert got == nbytes and mib4(got) == printed


@pytest.mark.parametrize("shape, n_kv, n_ubatch, n_batch, n_seq, unified, type_k, nbytes, printed", [
    # several sequences, flash attention off: two sequences in one unified stream of 512 cells
    (GraphShape("qwen3", 5, 768, 2, 2, 64, 1280, 1000), 512, 512, 512, 2, True, "f16", 14_690_304, "14.0098"),
    # three streams of 256 cells; n_ubatch 1 rounded up to 3 tokens, the one-token graph also 3
    (GraphShape("qwen3", 3, 256, 4, 1, 64, 512, 256), 256, 1, 512, 3, False, "q8_0", 48_768, "0.0465"),
    # eight streams of 256 cells (n_ctx 1000 -> 2048 cells in all), 32 tokens: 4 per stream
    (GraphShape("llama", 4, 768, 2, 2, 64, 1024, 1000), 256, 32, 1000, 8, False, "q4_0", 787_072, "0.7506"),
])
def test_sequences_and_streams_equal_llamacpp(shape, n_kv, n_ubatch, n_batch, n_seq, unified, type_k, nbytes,
                                               printed):
    got = graph_bytes(shape, n_kv=n_kv, n_ubatch=n_ubatch, flash_attn=False, type_k=type_k, n_outputs=n_batch,
                      n_seq=n_seq, kv_unified=unified)
    assert got == nbytes and mib4(got) == printed


SWA13 = tuple((i + 1) % 6 != 0 for i in range(13))       # gemma3: every sixth layer global


@pytest.mark.parametrize("shape, kw, nbytes, printed", [
    # gemma3, iSWA cache: 4096 global cells, 256 in the sliding-window cache (swa_full off)
    (GraphShape("gemma3", 13, 256, 2, 2, 128, 256, 2048, swa=SWA13),
     dict(n_kv=4096, swa_cells=256, n_ubatch=128, flash_attn=False, type_k="q4_1", n_outputs=4096),
     7_605_760, "7.2534"),
    (GraphShape("gemma3", 13, 256, 8, 4, 128, 1024, 1000, swa=SWA13),
     dict(n_kv=4096, swa_cells=1024, n_ubatch=512, flash_attn=False, type_k="q5_1", n_outputs=4096),
     85_604_352, "81.6387"),
    # three sequences, a stream each: 1536 and 768 cells per stream
    (GraphShape("gemma3", 2, 768, 12, 1, 64, 512, 512, swa=(True, True)),
     dict(n_kv=1536, swa_cells=768, n_ubatch=512, flash_attn=True, type_k="q8_0", type_v="bf16", n_outputs=4096,
          n_seq=3),
     9_749_120, "9.2975"),
])
def test_gemma3_iswa_equal_llamacpp(shape, kw, nbytes, printed):
    got = graph_bytes(shape, **kw)
    assert got == nbytes and mib4(got) == printed


@pytest.mark.parametrize("n_ctx, flash_attn, cache, swa_cells, printed", [
    # Gemma-3-27B (the preset's config; a GGUF of its shape measured): 1536 SWA cells as llama-server
    # keeps them (swa_full off), or the whole context (the C API's default, swa_full on)
    (4096, True, "f16", 1536, "533.1270"),
    (32768, True, "q8_0", 1536, "533.1270"),
    (8192, False, "f16", 1536, "594.5137"),
    (4096, True, "f16", 4096, "533.1270"),
])
def test_gemma_3_27b_equal_llamacpp(n_ctx, flash_attn, cache, swa_cells, printed):
    got = llamacpp_compute_buffer("gemma-3-27b", n_ctx=n_ctx, flash_attn=flash_attn, type_k=cache, type_v=cache,
                                  n_outputs=n_ctx, swa_cells=swa_cells, backend="cpu")
    assert got.exact and mib4(got.bytes) == printed
    assert not llamacpp_compute_buffer("gemma-3-27b", n_ctx=n_ctx, backend="cpu").exact   # no swa_cells: estimate


@pytest.mark.parametrize("preset, n_ctx, n_ubatch, flash_attn, cache, printed", [
    # the presets' configs give the graphs of GGUFs of the same shape (Q4_0, sparse), measured
    ("llama-3-8b", 8192, 512, False, "f16", "572.0098"),
    ("qwen3-30b-a3b", 512, 512, False, "f16", "304.7520"),
    ("qwen3-8b", 512, 512, False, "f16", "312.7520"),
    ("qwen3-8b", 32768, 512, True, "q8_0", "320.7520"),
    ("qwen3-8b", 4096, 2048, True, "f16", "1251.0078"),
    ("mixtral-8x7b", 512, 512, False, "f16", "205.0098"),
    ("mixtral-8x7b", 8192, 512, True, "f16", "208.0137"),
    ("mixtral-8x7b", 32768, 512, True, "q8_0", "224.1230"),
    ("mixtral-8x7b", 4096, 2048, True, "f16", "816.0547"),
    ("qwen2.5-7b", 512, 512, False, "f16", "311.0020"),
    ("qwen2.5-7b", 8192, 512, False, "f16", "501.0098"),
    ("qwen2.5-7b", 32768, 512, True, "q8_0", "318.0020"),
    ("qwen2.5-7b", 4096, 2048, True, "f16", "1244.0078"),
])
def test_presets_equal_llamacpp(preset, n_ctx, n_ubatch, flash_attn, cache, printed):
    got = llamacpp_compute_buffer(preset, n_ctx=n_ctx, n_ubatch=n_ubatch, flash_attn=flash_attn, type_k=cache,
                                  type_v=cache, backend="cpu")
    assert got.exact and mib4(got.bytes) == printed


SWA2 = {n: tuple(i % 2 == 0 for i in range(n)) for n in (1, 6)}       # gemma2: every other layer sliding


@pytest.mark.parametrize("shape, kw, nbytes, printed", [
    # gemma2 (random GGUFs of the oracle, seeds 159, 92, 0, 130): the attention softcap's scale,
    # tanh, scale without flash attention; the logits' softcap always
    (GraphShape("gemma2", 4, 512, 2, 1, 128, 256, 512, swa=SWA2[6][:4], final_softcap=True),
     dict(n_kv=4096, swa_cells=768, n_ubatch=512, flash_attn=False, type_k="q4_0", n_outputs=4096),
     30_554_112, "29.1387"),
    (GraphShape("gemma2", 1, 768, 8, 8, 64, 1280, 256, swa=SWA2[1], final_softcap=True),
     dict(n_kv=512, swa_cells=512, n_ubatch=512, flash_attn=False, type_k="q5_0", n_outputs=512),
     17_328_128, "16.5254"),
    (GraphShape("gemma2", 5, 1024, 4, 4, 64, 768, 2048, swa=SWA2[6][:5], final_softcap=True),
     dict(n_kv=4096, swa_cells=768, n_ubatch=512, flash_attn=True, type_k="f16", type_v="iq4_nl", n_outputs=4096,
          kv_unified=True),
     15_521_792, "14.8027"),
    (GraphShape("gemma2", 3, 768, 8, 8, 128, 512, 1000, swa=SWA2[6][:3], final_softcap=True),
     dict(n_kv=1024, swa_cells=256, n_ubatch=32, flash_attn=False, type_k="iq4_nl", n_outputs=4096, n_seq=4),
     2_392_960, "2.2821"),
    # phi3 (seeds 83, 112, 106, 27): a fused attn_qkv (V copied out of it without flash attention)
    # and a fused ffn_up; seed 27 has separate Q/K/V
    (GraphShape("phi3", 1, 1024, 16, 8, 64, 1536, 256, fused_qkv=True),
     dict(n_kv=1024, n_ubatch=512, flash_attn=False, type_k="q5_1", n_outputs=1000), 50_358_272, "48.0254"),
    (GraphShape("phi3", 3, 768, 6, 1, 128, 1280, 512, fused_qkv=True),
     dict(n_kv=4096, n_ubatch=512, flash_attn=True, type_k="q5_0", type_v="bf16", n_outputs=4096, kv_unified=True),
     16_857_088, "16.0762"),
    (GraphShape("phi3", 1, 256, 2, 2, 128, 1024, 512, fused_qkv=True),
     dict(n_kv=1536, n_ubatch=512, flash_attn=False, type_k="f32", n_outputs=4096, n_seq=3),
     12_092_512, "11.5323"),
    (GraphShape("phi3", 1, 768, 6, 1, 128, 1280, 1000),
     dict(n_kv=256, n_ubatch=256, flash_attn=True, type_k="q5_0", type_v="q5_1", n_outputs=256, n_seq=2,
          kv_unified=True),
     5_987_328, "5.7100"),
])
def test_gemma2_and_phi3_equal_llamacpp(shape, kw, nbytes, printed):
    got = graph_bytes(shape, **kw)
    assert got == nbytes and mib4(got) == printed


@pytest.mark.parametrize("preset, n_ctx, n_ubatch, flash_attn, swa_cells, printed", [
    # GGUFs of the presets' shapes (Q4_0, sparse) loaded with no_alloc, f16 cache, swa_full off: the
    # printed "CPU compute buffer size" (two decimals; no_alloc prints no four-decimal line)
    ("gemma-2-9b", 8192, 512, False, 4608, "514.00"),
    ("gemma-2-9b", 4096, 2048, True, 4096, "2056.01"),
    ("gemma-2-2b", 16384, 1024, True, 5120, "1018.00"),
    ("gemma-3-1b", 32768, 1024, True, 1536, "1033.00"),
    ("phi-4", 8192, 512, False, None, "691.01"),
    ("phi-4", 16384, 512, True, None, "216.00"),
    ("phi-3-mini-4k", 4096, 1024, True, None, "181.28"),
    ("phi-3-medium-4k", 4096, 512, False, None, "363.01"),
    # mistral-7b-v0.1's sliding_window: not in its GGUF (llama arch), one full-size cache
    ("mistral-7b-v0.1", 8192, 512, False, None, "572.01"),
    ("mistral-7b-v0.1", 32768, 512, True, None, "148.01"),
])
def test_gemma_phi_mistral_presets_equal_llamacpp(preset, n_ctx, n_ubatch, flash_attn, swa_cells, printed):
    got = llamacpp_compute_buffer(preset, n_ctx=n_ctx, n_ubatch=n_ubatch, flash_attn=flash_attn, swa_cells=swa_cells,
                                  backend="cpu")
    assert got.exact and f"{got.bytes / 1048576.0:.2f}" == printed


def test_cuda_keeps_the_estimate_that_reproduces_the_published_logs():
    # "CUDA0 compute buffer size = 258.50 MiB" (Llama-3-8B, n_ctx 512, flash attention off, an older
    # build): the estimate; this build's CPU graph is 8 MiB larger (its unused inp_embd input)
    cuda = llamacpp_compute_buffer("llama-3-8b", n_ctx=512, flash_attn=False)
    assert not cuda.exact and cuda.bytes == 4 * 512 * (128_256 + 4_096) == round(258.50 * 2**20)
    assert llamacpp_compute_bytes("llama-3-8b", n_ctx=512, flash_attn=False) == cuda.bytes


def test_families_not_transcribed_get_the_estimate_marked_as_such():
    import json
    import pathlib

    from kvmem.model import Model
    # lfm2 (short convolutions and attention): no graph transcribed (jamba's is now: graphs_ssm)
    path = pathlib.Path(__file__).parents[1] / "fixtures/configs/corpus/FlameF0X--LFM2.5-1.2B-Distilled-Claude-4.6.json"
    model = Model.from_hf_config(json.loads(path.read_text()), name="lfm2.5-1.2b")
    got = compute_buffer(model, n_kv=4096, n_ubatch=512, flash_attn=True)
    assert not got.exact and "estimate" in got.note
    assert got.bytes == estimate_bytes(model, n_kv=4096, n_ubatch=512, flash_attn=True)


def test_host_only_layout_takes_the_exact_cpu_buffer():
    model = kvmem.get_model("llama-3-8b")
    tensors, _ = tensors_for(model, "q4_k_m")
    lay = layout(model, tensors, n_gpu_layers=0, n_ctx=8192, flash_attn=False)
    assert lay.compute_bytes["CPU"] == 599_795_712 and lay.compute_exact["CPU"] is True
    assert lay.to_dict()["devices"][0]["compute_exact"] is True


@pytest.mark.parametrize("preset, nbytes", [
    # the layout sizes the sliding-window cache itself (plan.swa_cells, swa_full off) and hands it on;
    # llama.cpp printed 514.00, 594.51, 691.01 and 572.01 MiB for GGUFs of these shapes at n_ctx 8192
    ("gemma-2-9b", 538_970_112), ("gemma-3-27b", 623_392_768), ("phi-4", 724_576_256),
    ("mistral-7b-v0.1", 599_795_712),
])
def test_host_only_layout_is_exact_for_gemma_phi3_and_mistral(preset, nbytes):
    model = kvmem.get_model(preset)
    tensors, _ = tensors_for(model, "q4_k_m")
    lay = layout(model, tensors, n_gpu_layers=0, n_ctx=8192, flash_attn=False)
    assert lay.compute_bytes["CPU"] == nbytes and lay.compute_exact["CPU"] is True


def test_allocator_reuses_a_single_child_source_in_place():
    # RMS_NORM may run in place: the 32 B input's memory becomes the norm's, the product takes 64 B
    g = Graph()
    x = g.input("f32", 8)
    y = g.mul_mat(g.weight(8, 16), g.dup("RMS_NORM", x))
    y.flags |= OUTPUT
    g.expand(y)
    assert gallocr_size(g) == 32 + 64


def test_allocator_keeps_a_source_that_has_another_child():
    # x feeds the norm and the add: the norm takes new memory; the add, x's last child, takes x's
    g = Graph()
    x = g.input("f32", 8)
    out = g.dup("ADD", x, g.dup("RMS_NORM", x))
    out.flags |= OUTPUT
    g.expand(out)
    assert gallocr_size(g) == 64
    assert gallocr_size(g, alignment=128) == 256


def _scheduled_case(rng):
    """A random transcribed graph on 1-4 GPUs with routed experts on the host the way --n-cpu-moe and
    Q4_K_M leave them: ffn_down's bytes in llama-quant.cpp's use_more_bits pattern (a period of 3)."""
    moe = rng.random() < 0.6
    arch = rng.choice(["qwen3moe", "llama"]) if moe else rng.choice(["llama", "qwen2", "qwen3"])
    n = rng.randint(6, 30)
    shape = GraphShape(arch, n_layer=n, n_embd=rng.choice([256, 512]), n_head=rng.choice([4, 8]),
                       n_head_kv=rng.choice([1, 4]), head_dim=rng.choice([64, 128]),
                       n_ff=0 if moe else rng.choice([512, 1536]), n_vocab=rng.choice([512, 4096]),
                       n_expert=8 if moe else 0, n_expert_used=rng.choice([1, 2, 4]) if moe else 0,
                       n_ff_exp=rng.choice([128, 384]) if moe else 0, qkv_bias=arch == "qwen2")
    n_gpus = rng.randint(1, 4)
    cuts = sorted(rng.randint(0, n) for _ in range(n_gpus - 1))
    layer_gpu = tuple(sum(il >= c for c in cuts) for il in range(n)) + (n_gpus - 1,)
    experts = []
    if moe and rng.random() < 0.7:
        big, small = rng.choice([(60_000, 40_000), (6_600_000, 4_500_000)])
        for il in range(rng.randint(1, n)):
            more = il < n // 8 or il >= 7 * n // 8 or (il - n // 8) % 3 == 2
            experts += [((il, True), big if more else small), ((il, False), small)]
    flash_attn = rng.random() < 0.5
    type_k = rng.choice(["f16", "q8_0"])
    return shape, dict(layer_gpu=layer_gpu, n_gpus=n_gpus, n_kv=rng.choice([256, 4096]),
                       n_ubatch=rng.choice([1, 64, 512]), flash_attn=flash_attn, type_k=type_k,
                       type_v=type_k if flash_attn else "f16", n_seq=rng.choice([1, 2]),
                       n_copies=1 if experts or n_gpus == 1 else rng.choice([1, 4]),
                       weights=expert_weights(experts, n_gpus))


def test_reduced_layers_keep_every_buffer():
    # gpu_graph_bytes schedules the graph with runs of equal layers cut (reduced_layers); the whole graph
    # gives the same bytes on every device. 600 seeded cases of this kind (n_layer up to 40) were equal
    # while this was built; 24 here, with at least one reduced graph that is shorter than its model.
    import random

    from kvmem.engines.llamacpp import scheduled
    rng = random.Random(34)
    shorter = 0
    for _ in range(24):
        shape, kw = _scheduled_case(rng)
        reduced = scheduled.reduced_layers(shape, kw["layer_gpu"], kw["weights"])[0]
        shorter += reduced.n_layer < shape.n_layer
        whole = scheduled._gpu_graph_bytes(
            shape, kw["layer_gpu"], kw["n_gpus"], kw["n_kv"], kw["n_ubatch"], kw["flash_attn"], kw["type_k"],
            kw["type_v"], None, kw["n_seq"], False, 0, kw["n_copies"], True, kw["weights"], True)
        assert scheduled.gpu_graph_bytes(shape, **kw) == whole, (shape, kw)
    assert shorter >= 12


def test_a_built_graph_scheduled_again_gives_the_bytes_of_a_fresh_one():
    # scheduled._built keeps a graph across placements (ggml_sched puts back what it changes): 12 seeded
    # placements of one shape scheduled on the kept graph, in turn, equal each scheduled on a graph built anew
    import random

    from kvmem.engines.llamacpp import scheduled
    rng = random.Random(16)
    shape, kw = _scheduled_case(rng)
    while shape.n_expert == 0:
        shape, kw = _scheduled_case(rng)
    cases = []
    for i in range(12):     # the layers split over the GPUs in order, some routed experts on the host
        cuts = sorted(rng.randint(0, shape.n_layer) for _ in range(kw["n_gpus"] - 1))
        gpus = tuple(sum(il >= c for c in cuts) for il in range(shape.n_layer))
        weights = tuple(w for w in kw["weights"] if rng.random() < 0.5) if i % 3 else ()
        # pipeline copies (n_copies 4: ggml_sched marks the inputs as outputs) where nothing is on the host
        copies = 4 if kw["n_gpus"] > 1 and not weights and i % 2 else 1
        cases.append({**kw, "layer_gpu": gpus + (kw["n_gpus"] - 1,), "weights": weights, "n_copies": copies,
                      "n_ubatch": 512 if i % 4 < 2 else kw["n_ubatch"]})
    kept = []
    scheduled._graph_sizes.cache_clear()
    scheduled._built.cache_clear()
    for case in cases:      # the same graphs, scheduled one placement after another
        kept.append(scheduled.gpu_graph_bytes(shape, **case))
    fresh = []
    for case in cases:      # each on graphs built for it alone
        scheduled._graph_sizes.cache_clear()
        scheduled._built.cache_clear()
        fresh.append(scheduled.gpu_graph_bytes(shape, **case))
    assert kept == fresh
    assert len(set(kept)) > 1      # the placements differ in what they reserve


def test_reduced_layers_cut_repeated_units():
    # 94 layers: 13 on GPU 0, 81 on GPU 1 -> 4 + (13 - 4) % 6 = 7, then 4 + (80 - 4) % 6 = 8, the last one
    shape = GraphShape("llama", n_layer=94, n_embd=256, n_head=4, n_head_kv=4, head_dim=64, n_ff=512, n_vocab=512)
    reduced, layer_gpu, _ = reduced_layers(shape, (0,) * 13 + (1,) * 82)
    assert reduced.n_layer == 7 + 8 + 1 and layer_gpu == (0,) * 7 + (1,) * 10
    # a down tensor of two sizes in a period of 3 (B B A): a unit of 3 layers, cut to 2 + (c - 2) % 2 units
    experts = expert_weights((((il, True), 2 if il % 3 == 2 else 1) for il in range(31)), 1)
    reduced, _, kept = reduced_layers(replace(shape, n_layer=31), (0,) * 32, experts)
    # 30 layers = 10 units of 3 -> 2 units (6 layers), the last layer on its own: 7
    assert reduced.n_layer == 7 and [b for (_, _), (_, b) in kept] == [1, 1, 2, 1, 1, 2, 1]
    # a partial offload of 40 layers: 22 on the host (their weights there) -> 4 + (22 - 4) % 6 = 4 kept; 17 on
    # GPU 0 -> 4 + (17 - 4) % 6 = 5; the last layer: 10 layers, GPU 0 also the output's
    host = tuple(((il, name), (1, 10)) for il in range(22) for name in ("attn_q", "ffn_up"))
    reduced, layer_gpu, kept = reduced_layers(replace(shape, n_layer=40), (1,) * 22 + (0,) * 19, host)
    assert reduced.n_layer == 4 + 5 + 1 and layer_gpu == (1,) * 4 + (0,) * 7
    assert {il for (il, _), _ in kept} == set(range(4))

"""kvmem.engines.llamacpp.placement: which device llama.cpp loads each tensor on.

The GGUF is Qwen3-30B-A3B's real tensor list (tests/fixtures/gguf_models.py, a Q4_K_M mix, header
only): 48 layers, hidden 2048, 128 experts of 768, vocab 151936.
"""

import pytest

from kvmem.engines.llamacpp.placement import PlacedTensor, cuda_alloc_bytes, layer_devices, place, tensor_group
from kvmem.sources.gguf import read_header
from tests.fixtures import gguf_models


@pytest.fixture(scope="module")
def qwen3_moe(tmp_path_factory):
    path = tmp_path_factory.mktemp("gguf") / "qwen3-30b-a3b.gguf"
    gguf_models.write(path, "qwen3-30b-a3b", tiny=False)
    return read_header(path).tensors


# token_embd Q4_K: 2048 x 151936 / 256 x 144 B = 175,030,272 B; output Q6_K: x 210 = 255,252,480 B
# + output_norm 8,192 B = 255,260,672 B
EMBD, OUTPUT = 175_030_272, 255_260_672


def test_ngl_0_keeps_everything_on_the_host(qwen3_moe):
    p = place(qwen3_moe, n_layer=48, n_gpu_layers=0, gpus=("CUDA0",))
    assert p.offloaded_layers == 0 and p.device("CUDA0").model_bytes == 0
    assert p.host.buffer_name == "CPU_Mapped"
    assert p.host.model_bytes == 19_802_863_616        # the file's whole tensor span
    assert p.host.group_bytes["experts"] == 18_798_870_528


def test_ngl_1_offloads_only_the_output_layer(qwen3_moe):
    # i_gpu_start = 48 + 1 - 1 = 48: only il = 48, the output layer, is on the GPU
    p = place(qwen3_moe, n_layer=48, n_gpu_layers=1, gpus=("CUDA0",))
    assert p.offloaded_layers == 1 and p.output_device == "CUDA0"
    assert set(p.layer_device) == {"CPU"}
    assert p.device("CUDA0").group_bytes["output"] == OUTPUT


def test_ngl_n_layer_leaves_layer_0_on_the_host(qwen3_moe):
    p = place(qwen3_moe, n_layer=48, n_gpu_layers=48, gpus=("CUDA0",))
    assert p.layer_device[0] == "CPU" and set(p.layer_device[1:]) == {"CUDA0"}
    assert p.offloaded_layers == 48
    full = place(qwen3_moe, n_layer=48, n_gpu_layers=99, gpus=("CUDA0",))
    assert full.offloaded_layers == 49 and full.host.model_bytes == EMBD and full.host.layers == ()


def test_tensor_split_3_1(qwen3_moe):
    # splits [0.75, 1.0]; layer il goes to CUDA0 while il / 49 < 0.75: il <= 36
    p = place(qwen3_moe, n_layer=48, n_gpu_layers=99, gpus=("CUDA0", "CUDA1"), tensor_split=(3, 1))
    assert p.device("CUDA0").layers == tuple(range(37))
    assert p.device("CUDA1").layers == tuple(range(37, 48)) and p.output_device == "CUDA1"
    assert layer_devices(4, 99, (1, 1)) == [0, 0, 0, 1, 1]     # 0/5, 1/5, 2/5 < 0.5 <= 3/5, 4/5


def test_n_cpu_moe_moves_experts_of_the_first_layers(qwen3_moe):
    p = place(qwen3_moe, n_layer=48, n_gpu_layers=99, gpus=("CUDA0",), n_cpu_moe=10)
    # per layer: gate + up 2 x 113,246,208 (Q4_K) + down 165,150,720 (Q6_K) = 391,643,136 B
    assert p.host.group_bytes["experts"] == 10 * 391_643_136
    assert p.device("CUDA0").group_bytes["experts"] == 38 * 391_643_136
    # the mapped span runs from token_embd to blk.9's last expert tensor, attention of 0..9 included
    assert p.host.model_bytes == 4_210_982_912
    assert p.host.group_bytes["attention"] == 0
    every = place(qwen3_moe, n_layer=48, n_gpu_layers=99, gpus=("CUDA0",), cpu_moe=True)
    assert every.host.group_bytes["experts"] == 48 * 391_643_136
    ot = place(qwen3_moe, n_layer=48, n_gpu_layers=99, gpus=("CUDA0",),
               override_tensor=[(r"blk\.(4[0-7])\.ffn_.*_exps", "CPU")])
    assert ot.host.group_bytes["experts"] == 8 * 391_643_136


def test_no_kv_offload_keeps_kv_on_the_host(qwen3_moe):
    kv = [1000] * 48
    on = place(qwen3_moe, n_layer=48, n_gpu_layers=30, gpus=("CUDA0",), kv_per_layer=kv)
    assert on.device("CUDA0").kv_bytes == 29 * 1000 and on.host.kv_bytes == 19 * 1000   # layers 19..47 on the GPU
    off = place(qwen3_moe, n_layer=48, n_gpu_layers=30, gpus=("CUDA0",), kv_per_layer=kv, kv_offload=False)
    assert off.host.kv_bytes == 48_000 and off.device("CUDA0").kv_bytes == 0


def test_cuda_pads_quantised_rows_to_512_and_aligns_to_128():
    # ffn_down_exps Q6_K, ne0 = 768: 768 % 512 = 256 more values = one 210-byte block
    t = PlacedTensor("blk.0.ffn_down_exps.weight", "Q6_K", (768, 2048, 128), 165_150_720, 0, "experts", 0, "CUDA0")
    assert cuda_alloc_bytes(t) == 165_150_976        # 165,150,720 + 210 = 165,150,930, padded to 128
    norm = PlacedTensor("blk.0.attn_norm.weight", "F32", (2880,), 11_520, 0, "attention", 0, "CUDA0")
    assert cuda_alloc_bytes(norm) == 11_520                      # not quantised: no row padding


def test_tied_output_is_a_copy_on_the_gpu_only(tmp_path):
    path = tmp_path / "gemma.gguf"
    gguf_models.write(path, "gemma-3-27b", tiny=False)
    tensors = read_header(path).tensors
    # token_embd Q4_K 5376 x 262208 / 256 x 144 = 792,916,992 B
    gpu = place(tensors, n_layer=62, n_gpu_layers=63, gpus=("CUDA0",))
    assert gpu.device("CUDA0").group_bytes["output"] == 792_916_992 + 5376 * 4
    host = place(tensors, n_layer=62, n_gpu_layers=0, gpus=("CUDA0",))
    assert host.host.group_bytes["output"] == 5376 * 4      # output_norm only: the tied table is token_embd


def test_refusals():
    with pytest.raises(ValueError, match="mmproj"):
        tensor_group("v.blk.0.attn_q.weight")
    with pytest.raises(ValueError, match="tensor_split has 1 values for 2 GPUs"):
        place([], n_layer=1, n_gpu_layers=1, gpus=("CUDA0", "CUDA1"), tensor_split=(1,))
    with pytest.raises(ValueError, match="n_cpu_moe"):
        place([], n_layer=1, n_gpu_layers=1, n_cpu_moe=-1)


# ---- placements that use every GPU (issue 34 item 1) ------------------------------------------

MIXES = {2: ("rtx-4060-ti-16gb", "rtx-3060-12gb"),
         3: ("rtx-3090-24gb", "rtx-4060-ti-16gb", "rtx-3060-12gb"),
         4: ("rtx-3090-24gb", "rtx-4060-ti-16gb", "t4-16gb", "rtx-3060-12gb")}


# kimi-k2-instruct (deepseek2) was unplaced here: fitting.fit_on's back-to-front step leaves layers 1-2's routed
# experts (9.5 GiB each at Q4_K) on the last GPU (-ts 2,60: CUDA1 19.2 GiB of 12) under both margins; best._spread
# now places it (every layer on the GPUs in whole counts, experts on the host, then top_up): see the test below
UNPLACED: set = set()
# --fit's emulation (fitting.fit_on) leaves the last card with the output layer alone for Kimi-K3 (-ngl 41 -ts 40,1 on
# 16 + 12 GB: the last card 1.7 GiB; each layer's routed expert tensor is 4.9 GiB at MXFP4, the checkpoint's own: 896 x
# 3,584 x 3,072 x 17 / 32 B); kvmem's own placement (best) uses every card
FIT_UNSPREAD = {"kimi-k3"}
# DeepSeek-V4-Pro likewise (-ngl 62 -ts 61,1 on 16 + 12 GB, every routed expert on the host: its 61 layers' non-expert
# tensors fit on the first card, no expert tensor, 4.5 GB each at MXFP4, is moved to the others)
FIT_UNSPREAD.add("deepseek-v4-pro")


def _moe_presets():
    import kvmem
    from kvmem.catalog import as_model
    return [name for name in kvmem.list_models() if as_model(name).facts.moe is not None]


@pytest.mark.parametrize("n_gpus", [2, 3, 4])
def test_no_gpu_keeps_room_while_experts_sit_on_the_host(n_gpus):
    """Every MoE preset kvmem lays out from its config, on 2, 3 and 4 mixed cards at 32k, Q4_K_M:
    kvmem's placement gives every GPU layers when anything sits on the host, and no GPU could take
    even the smallest routed expert tensor left on the host (moved there, every budget still holds)."""
    from kvmem.catalog import as_model
    from kvmem.engines.llamacpp.best import room_left
    from kvmem.engines.llamacpp.offload import llamacpp_offload
    from kvmem.engines.llamacpp.tensors import tensors_for
    placed, spilled = [], []
    for name in _moe_presets():
        try:
            p = llamacpp_offload(name, gpus=list(MIXES[n_gpus]), context="32k", weight_dtype="q4_k_m")
        except ValueError as exc:      # a family kvmem does not lay out from a config says so
            assert str(exc).endswith(": give the GGUF file itself"), (name, str(exc))
            continue
        placed.append(name)
        best = p.best
        if name in UNPLACED:        # fails when the search finds the placement: then drop it from UNPLACED
            assert best is None, (name, best.flags())
            continue
        assert best is not None, name
        host = best.placement.host
        on_host = host.group_bytes["experts"] + sum(1 for d in best.placement.layer_device if d == "CPU")
        if on_host:
            spilled.append(name)
            for gpu in best.placement.gpus:   # no GPU left empty
                d = best.placement.device(gpu)
                assert d.layers or d.group_bytes["experts"], (name, gpu, best.flags())
            tensors, _ = tensors_for(as_model(name), "q4_k_m")
            kw = dict(n_ubatch=512, type_k="f16", type_v="f16", flash_attn=None, mmap=True, kv_offload=True,
                      n_seq=1, mmproj_bytes=0, mmproj_offload=True)
            assert room_left(as_model(name), tensors, best, p.budgets, kw) == [], (name, best.flags())
        # --fit's emulation also spreads layers (or a split layer's FFN, fit.cpp's -ot ...=CUDAn: kimi-k2 on 3
        # cards, -ts 4,0,58 with blk.3's FFN on CUDA1) over every card when the model spills
        if p.fit is not None and p.fit.placement.host.group_bytes["experts"]:
            assert all(p.fit.placement.device(g).layers or p.fit.placement.device(g).group_bytes["experts"]
                       for g in p.fit.placement.gpus) != (name in FIT_UNSPREAD), (name, p.fit.flags())
    assert {"qwen3-235b-a22b", "qwen3-30b-a3b", "mixtral-8x7b"} <= set(placed)
    assert "qwen3-235b-a22b" in spilled


def test_kimi_k2_on_16_plus_12_gb_is_placed_where_fit_overflows():
    """--fit's emulation leaves layers 1-2's routed experts on the 12 GB card (-ts 2,60: 20.7 GB there);
    kvmem's fallback puts every layer on the GPUs in whole counts proportional to the budgets
    (62 x 16/28 = 35.4 -> 35, 26.6 -> 27) with every expert on the host, and top_up then moves two
    expert tensors onto the cards (three ffn_down_exps while the compute buffers were the estimate: the deepseek2
    graph, graphs_mla_oss, copies each host expert tensor to CUDA0 for the prompt, 7.8 GB there)."""
    from kvmem.engines.llamacpp.offload import llamacpp_offload
    p = llamacpp_offload("kimi-k2-instruct", gpus=list(MIXES[2]), context="32k", weight_dtype="q4_k_m")
    assert not p.fit.fits(p.budgets) and p.fit.total_bytes["CUDA1"] > p.budgets["CUDA1"]
    assert p.best.fits(p.budgets)
    assert p.best.flags() == ["-ngl", "62", "-ts", "35,27", "-ot", r"blk\.1\.ffn_down_exps\.weight=CUDA1",
                              "-ot", r"blk\.1\.ffn_gate_exps\.weight=CUDA0", "--n-cpu-moe", "61"]
    assert [len(p.best.placement.device(g).layers) for g in ("CUDA0", "CUDA1")] == [35, 26]   # + output on CUDA1


def test_qwen3_235b_on_two_3090s_uses_both():
    """Issue 34's example: kvmem answered -ts 0,95 (CUDA0 at 512 MiB, the CUDA context alone) and
    said --fit on would do the same. fit.cpp's step 4 hands the dense-only layers of the last
    device to the first as full layers: 15 layers with their experts on CUDA0, the 16th split with
    its whole FFN on CUDA1 (ATTN), CUDA1 the other 79 dense-only and the output layer,
    converting its first ones to full layers until it is full (ATTN split of blk.26)."""  # noqa: D400
    from kvmem.engines.llamacpp.offload import llamacpp_offload
    p = llamacpp_offload("qwen3-235b-a22b", gpus="rtx-3090-24gb,rtx-3090-24gb", context="16k",
                         weight_dtype="q4_k_m")
    fit, best = p.fit, p.best
    assert fit.tensor_split == (15, 80)
    assert fit.override_tensor[0] == (r"blk\.14\.ffn_(gate|up|gate_up|down).*", "CUDA1")
    assert fit.override_tensor[1] == (r"blk\.26\.ffn_(gate|up|gate_up|down).*", "CPU")
    assert fit.override_tensor[2][0].startswith(r"blk\.(27|28|")
    # kvmem takes --fit's layers and fills its 1 GiB margin with host expert tensors, each named in an
    # -ot ahead of fit's
    assert best.tensor_split == (15, 80)
    extra = best.override_tensor[:len(best.override_tensor) - len(fit.override_tensor)]
    assert best.override_tensor[len(extra):] == fit.override_tensor
    assert extra and all(pattern.endswith(r"_exps\.weight") and device in ("CUDA0", "CUDA1")
                         for pattern, device in extra)
    for gpu in ("CUDA0", "CUDA1"):     # left: under one expert tensor (Q4_K ffn_up_exps: 452,984,832 B)
        assert p.budgets[gpu] - 452_984_832 < best.total_bytes[gpu] <= p.budgets[gpu]
        # --fit leaves its 1 GiB margin and less than one more layer's experts (up, gate Q4_K 452,984,832 B
        # each, down at most Q6_K 660,602,880 B)
        assert fit.total_bytes[gpu] > p.budgets[gpu] - (1 << 30) - (2 * 452_984_832 + 660_602_880)
    assert "-ts 0," not in p.command_best


def test_false_position_step_is_fit_cpp_s_integer_arithmetic():
    from kvmem.engines.llamacpp.fitting import _step
    # delta 10, target 50 between low 0 and high 100: 10 * 50 / 100 = 5
    assert _step(10, 50, 0, 100) == 5
    # 10 * 99 / 100 = 9.9 -> 9, at most delta - 1 = 9; 10 * 1 / 100 = 0 -> at least 1
    assert _step(10, 99, 0, 100) == 9 and _step(10, 1, 0, 100) == 1
    # a low already over the target: 10 x (0 - 50) / 50 = -10, a uint32_t 4,294,967,286, then delta - 1;
    # -50 / 95 truncates toward zero: 0, then at least 1
    assert _step(10, 0, 50, 100) == 9 and _step(10, 0, 5, 100) == 1


def test_qwen3_235b_on_four_3090s_at_32k_uses_all_four():
    """The four-card shape of the issue (Qwen3-VL-235B answered -ts 0,0,0,95): every card holds
    layers. With no margin, fit.cpp's search ended 69 MiB over CUDA1 here (a later card's split
    layer turns kvmem's compute buffers from the scheduled graph to the estimate), so kvmem's
    placement takes the next margin that fits, then fills the room left with host expert tensors."""
    from kvmem.catalog import as_model
    from kvmem.engines.llamacpp.best import room_left
    from kvmem.engines.llamacpp.offload import llamacpp_offload
    from kvmem.engines.llamacpp.tensors import tensors_for
    p = llamacpp_offload("qwen3-235b-a22b", gpus=["rtx-3090-24gb"] * 4, context="32k", weight_dtype="q4_k_m")
    best = p.best
    assert best is not None and best.fits(p.budgets)
    assert all(n > 0 for n in best.tensor_split) and len(best.tensor_split) == 4
    assert all(p.fit.placement.device(g).layers for g in p.fit.placement.gpus)
    kw = dict(n_ubatch=512, type_k="f16", type_v="f16", flash_attn=None, mmap=True, kv_offload=True, n_seq=1,
              mmproj_bytes=0, mmproj_offload=True)
    model = as_model("qwen3-235b-a22b")
    assert room_left(model, tensors_for(model, "q4_k_m")[0], best, p.budgets, kw) == []


@pytest.mark.parametrize("n_cpu_moe", [1, 2, 10, 12, 100])
def test_n_cpu_moe_rules_match_as_one_rule_per_layer(n_cpu_moe):
    # common/arg.cpp --n-cpu-moe N: one rule "blk\.{il}" + LLM_FFN_EXPS_REGEX per il < N; kvmem keeps them
    # as one alternation, which must send exactly the same names to CPU (blk.1 never takes blk.12's experts)
    import re

    from kvmem.engines.llamacpp.overrides import EXPS_REGEX, compile_rules
    per_layer = [re.compile(rf"blk\.{il}{EXPS_REGEX}") for il in range(n_cpu_moe)]
    names = [f"blk.{il}.{kind}.weight" for il in range(130) for kind in
             ("ffn_up_exps", "ffn_down_exps", "ffn_gate_exps", "ffn_gate_up_exps", "ffn_up_chexps", "ffn_up_shexp",
              "ffn_down", "attn_q")]
    moved = [n for n in names if any(p.search(n) for p, _ in compile_rules(n_cpu_moe, False, ()))]
    assert moved == [n for n in names if any(p.search(n) for p in per_layer)]
    assert len(moved) == 5 * n_cpu_moe and "blk.12.ffn_up_exps.weight" not in moved[:5]


def test_override_rules_keep_their_order_when_tried_by_layer():
    # overrides.Rules tries a blk\.N\. (or blk\.(N|M)\.) rule only on layer N's names; a pattern with a top-level |
    # or a quantifier on its prefix is tried on every name, and the first match still wins
    from kvmem.engines.llamacpp.overrides import Rules, compile_rules
    rules = Rules(compile_rules(2, False, ((r"blk\.1\.*ffn", "CUDA2"), (r"blk\.1\.|output", "CUDA1"),
                                           (r"blk\.(3|4)\.ffn_up", "CUDA0"), (r"exps", "CUDA3"))))
    assert [None if r is None else sorted(r) for r in rules.layers] == [None, None, [3, 4], None, [0, 1]]
    assert [rules.target(n) for n in ("blk.10.ffn_up.weight", "blk.1.ffn_up.weight", "blk.1.attn_q.weight",
                                       "output.weight", "blk.3.ffn_up_exps.weight", "blk.5.ffn_up_exps.weight",
                                       "blk.0.ffn_up_exps.weight", "token_embd.weight")] == [
        None, "CUDA2", "CUDA1", "CUDA1", "CUDA0", "CUDA3", "CUDA3", None]


@pytest.mark.parametrize("gpus", [("h100-sxm-80gb",) * 2, MIXES[3], MIXES[4]])
def test_no_layer_sits_on_the_host_while_gpus_hold_routed_experts(gpus):
    """Files that carry MTP blocks: --fit counts the trunk alone in -ngl while the split counts the blocks, so
    its placement leaves layer 0 on the host (glm-5.2 q4_k_m on 2 x H100 at 32k: -ngl 79 -ts 15,64, 79/80);
    kvmem's own takes every layer (-ngl 80 -ts 16,64, 80/80) and moves routed experts to the host instead."""
    from kvmem.catalog import as_model
    from kvmem.engines.llamacpp.nextn import gguf_nextn_layers
    from kvmem.engines.llamacpp.offload import llamacpp_offload
    checked = []
    for name in _moe_presets():
        model = as_model(name)
        if not gguf_nextn_layers(model):
            continue
        try:
            p = llamacpp_offload(name, gpus=list(gpus), context="32k", weight_dtype="q4_k_m")
        except ValueError as exc:
            assert str(exc).endswith(": give the GGUF file itself"), (name, str(exc))
            continue
        if p.best is None:
            continue
        placement = p.best.placement
        layers_on_host = [i for i, d in enumerate(placement.layer_device[:model.num_layers]) if d == "CPU"]
        experts_on_gpus = sum(placement.device(g).group_bytes["experts"] for g in placement.gpus)
        assert not (layers_on_host and experts_on_gpus), (name, layers_on_host, p.best.flags())
        checked.append((name, placement.offloaded_layers, placement.layers_total))
    assert len(checked) >= 5, checked
    if gpus == ("h100-sxm-80gb",) * 2:
        assert ("glm-5.2", 80, 80) in checked

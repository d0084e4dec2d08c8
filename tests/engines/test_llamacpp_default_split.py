"""llama.cpp's split with no -ts: by each device's free memory (llama.cpp@0c1e57098 src/llama-model.cpp#L1556-L1576),
in kvmem's placement, --fit on's emulation and its "changes nothing" layout (review finding 2, issue 34)."""

import itertools

import pytest

import kvmem
from kvmem.engines.llamacpp.fitting import fit_on
from kvmem.engines.llamacpp.layouts import CUDA_CONTEXT_BYTES
from kvmem.engines.llamacpp.panel import mixed_cards
from kvmem.engines.llamacpp.placement import free_split, layer_devices
from kvmem.engines.llamacpp.tensors import tensors_for
from kvmem.gpus import get_gpu

MiB = 1 << 20


def free(*gpus):
    return [get_gpu(g).usable_memory_bytes - CUDA_CONTEXT_BYTES for g in gpus]


def test_free_split_is_the_free_mib_over_their_gcd():
    # 3090: 24 GiB - 512 MiB = 24,064 MiB free; 3060: 12,288 - 512 = 11,776; gcd 512: 47 : 23
    assert free_split(free("rtx-3090-24gb", "rtx-3060-12gb")) == (47.0, 23.0)
    # H100 SXM: 85,061,827,297 B usable (CUDA's total) - 512 MiB = 80,609.28 MiB, 80,609 whole (llama.cpp prints
    # whole MiB free); gcd(80,609, 11,776) = 1
    assert free_split(free("h100-sxm-80gb", "rtx-3060-12gb")) == (80609.0, 11776.0)
    # equal cards: the same weights as the old default, so the same layers and the same -ts 1,1
    assert free_split(free("rtx-3090-24gb", "rtx-3090-24gb")) == (1.0, 1.0)
    assert free_split(free(*["h100-sxm-80gb"] * 4)) == (1.0, 1.0, 1.0, 1.0)
    assert free_split([0, 3 * MiB + 5]) == (0.0, 1.0)
    with pytest.raises(ValueError, match="no GPU has a MiB free"):
        free_split([MiB - 1, 0])


@pytest.mark.parametrize("gpus", [("rtx-3090-24gb", "rtx-3060-12gb"), ("rtx-4090-24gb", "rtx-3090-24gb"),
                                  ("rtx-3060-12gb", "rtx-4060-ti-16gb", "rtx-3090-24gb"),
                                  ("a100-pcie-80gb", "l4-24gb")])
def test_whole_mib_cards_split_as_llama_cpp_splits_their_bytes(gpus):
    # cards whose free memory is whole MiB: bytes = MiB x 2^20, a power-of-two scale that float32 keeps exact, so
    # llama.cpp's split of the bytes (splits[i] = free, float) puts every layer where the reduced -ts does
    raw = [float(b) for b in free(*gpus)]
    for n_layer in range(1, 130):
        assert layer_devices(n_layer, 999, free_split(raw)) == layer_devices(n_layer, 999, raw), n_layer


def test_fit_changes_nothing_with_the_free_memory_split():
    # review finding 2: Qwen3-30B-A3B Q4_K_M on an H100 SXM + a 3060 at 32k. -ts 80609,11776: split point
    # 80609/92385 = 0.87253 against k/49: CUDA0 layers 0-42 (42/49 = 0.857 < 0.8725 <= 43/49 = 0.878), CUDA1 43-47
    # and the output; the old default -ts 1,1 gave the 3060 half the layers (24) and held 2 sequences of 32k
    model = kvmem.get_model("qwen3-30b-a3b")
    got = mixed_cards(model, ["h100-sxm-80gb", "rtx-3060-12gb"], context=32768, batch=None, weight_dtype="q4_k_m",
                      kv_dtype="auto", options={})
    plan = got.plan
    assert plan.fit_note == ("it fits at full offload: --fit changes nothing (no -ts: llama.cpp splits the layers "
                             "by free memory, CUDA0 43 layers, CUDA1 5)")
    assert plan.fit.flags() == plan.best.flags() == ["-ngl", "999", "-ts", "80609,11776"]
    assert plan.best.placement.layer_device == ("CUDA0",) * 43 + ("CUDA1",) * 5
    # KV of one 32k sequence: 48 layers x 4 heads x 128 x 2 (K,V) x 2 B x 32,768 = 3 GiB, 43/48 of it on the H100;
    # the 3060 holds 5 layers' worth: 23 sequences, as --llama-args "-ngl 99 -np 1" (no -ts) lays them out
    assert (got.max_batch, got.max_context) == (23, 40960)


def test_equal_cards_keep_their_layers():
    # two 3090s: fit's full-offload layout is the old default's, -ts 1,1, every layer where it was
    model = kvmem.get_model("llama-3.1-8b")
    tensors, _ = tensors_for(model, "q4_k_m")
    names = ("CUDA0", "CUDA1")
    room = dict(zip(names, free("rtx-3090-24gb", "rtx-3090-24gb"), strict=True))
    kw = dict(n_ubatch=512, type_k="f16", type_v="f16", flash_attn=None, mmap=True, kv_offload=True, n_seq=1)
    lay, note = fit_on(model, tensors, names, room, n_ctx=8192, kw=kw)
    assert lay.tensor_split == (1.0, 1.0) and lay.flags()[:4] == ["-ngl", "999", "-ts", "1,1"]
    # 33 layers (32 + output) at split point 0.5: k/33 < 0.5 for k <= 16, so CUDA0 0-16, CUDA1 17-31
    assert lay.placement.layer_device == ("CUDA0",) * 17 + ("CUDA1",) * 15
    assert note.endswith("(no -ts: llama.cpp splits the layers by free memory, CUDA0 17 layers, CUDA1 15)")


def _fit_holds(model, gpus, context, weight_dtype, got):
    """The most sequences of ``context`` and the longest context at one sequence --fit on's flags hold."""
    from kvmem.engines.llamacpp.panel import panel_offload
    from kvmem.engines.llamacpp.settings import LLAMA_MAX_SEQ
    from kvmem.sizing.search import largest_fitting

    def runs(ctx, seqs):
        try:
            p = panel_offload(model, gpus=list(gpus), context=ctx, batch=seqs, weight_dtype=weight_dtype,
                              kv_dtype="auto", host_memory=None, options={}, hold=got.plan.fit)
        except ValueError:
            return False
        return p.best is not None

    cap = max(model.max_position_embeddings, context)
    most = largest_fitting(lambda b: runs(context, b), LLAMA_MAX_SEQ, 1)
    units = largest_fitting(lambda u: runs(min(u * 256, cap), 1), -(-cap // 256), -(-context // 256))
    return most, min(units * 256, cap)


@pytest.mark.parametrize("name, weight_dtype, context", [("qwen3-30b-a3b", "q4_k_m", 32768),
                                                         ("llama-3.1-8b", "q8_0", 32768),
                                                         ("qwen3-32b", "q4_k_m", 16384)])
def test_kvmem_holds_at_least_what_fit_on_holds_on_mixed_pairs(name, weight_dtype, context):
    model = kvmem.get_model(name)
    for gpus in itertools.islice(itertools.permutations(
            ["h100-sxm-80gb", "rtx-3060-12gb", "rtx-4090-24gb", "a100-sxm-40gb"], 2), 0, None, 3):
        got = mixed_cards(model, gpus, context=context, batch=None, weight_dtype=weight_dtype, kv_dtype="auto",
                          options={})
        held = _fit_holds(model, gpus, context, weight_dtype, got)
        assert got.max_batch >= held[0] and got.max_context >= held[1], (gpus, held)


@pytest.mark.parametrize("name, weight_dtype, context, fit_holds", [
    ("qwen3-235b-a22b", "q4_k_m", 8192, (2, 16128)), ("llama-3.3-70b", "q4_k_m", 8192, (1, 15104)),
    ("qwen3-32b", "q8_0", 16384, (1, 25088))])
def test_where_the_cards_are_tight_kvmem_answers_at_least_fit_on(name, weight_dtype, context, fit_holds):
    # a 3090 + a 3060 that do not hold the model whole: kvmem's flags put the most on the GPUs (llama-3.3-70b:
    # -ngl 67 -ts 46,21, whose flags hold 9,216 tokens), --fit on's keep 1 GiB a card (-ngl 63 -ts 44,19: 15,104);
    # max batch and max context are the larger of the two, and kvmem plan finds a placement for them
    model = kvmem.get_model(name)
    gpus = ("rtx-3090-24gb", "rtx-3060-12gb")
    got = mixed_cards(model, gpus, context=context, batch=None, weight_dtype=weight_dtype, kv_dtype="auto",
                      options={})
    assert _fit_holds(model, gpus, context, weight_dtype, got) == fit_holds
    assert (got.max_batch, got.max_context) == fit_holds
    for ctx, seqs in ((context, got.max_batch), (got.max_context, 1)):
        plan = got.placed(ctx, seqs)
        assert plan.best is not None and plan.best.fits(plan.budgets), (ctx, seqs)


def test_fit_on_says_when_its_choice_overruns_a_card():
    # review finding 5g: GLM-5 Q2_K at 64k on a 4090 + 3090 + 2 x 3060. fit.cpp fills CUDA0 first (9 layers, one
    # split GATE: 22,705 MiB of its 23,028 MiB target), then CUDA1's layers grow CUDA0's compute buffer (the host
    # experts it copies in) to 26,041 MiB, which fit.cpp does not look at again; CUDA1's own model buffer is
    # 25,270 MiB of 24,064 MiB free, so the load stops at CUDA1's model buffer
    got = mixed_cards(kvmem.get_model("glm-5"), ["rtx-4090-24gb", "rtx-3090-24gb", "rtx-3060-12gb", "rtx-3060-12gb"],
                      context=65536, batch=None, weight_dtype="q2_k", kv_dtype="auto", options={})
    assert got.plan.fit_note.endswith(
        "; its choice does NOT fit: CUDA0 26,041 MiB of 24,052 MiB free, CUDA1 26,375 MiB of 24,064 MiB free "
        "(fit.cpp checks a device only while it fills it, then writes its choice unchecked): llama.cpp stops at "
        "load, 'unable to allocate CUDA1 buffer / failed to load model'")
    assert got.plan.best.fits(got.plan.budgets)      # kvmem's own placement holds on every card


@pytest.mark.parametrize("name, gpu, n, fit_holds", [("llama-3.3-70b", "rtx-3060-12gb", 3, (2, 23552)),
                                                     ("qwen3-235b-a22b", "rtx-3090-24gb", 2, (2, 16384))])
def test_one_kind_of_card_answers_as_the_list_of_them(name, gpu, n, fit_holds):
    # kvmem fit --gpu X --num-gpus N (the sizing verdict) and --gpu X,X,... (mixed_cards) answer alike, at least
    # what --fit on's flags hold: llama-3.3-70b q4_k_m 8k on 3 x 3060 said max batch 1, max context 9,216 (kvmem's
    # flags, the most layers on the GPUs), qwen3-235b-a22b on 2 x 3090 1 and 8,192
    model = kvmem.get_model(name)
    got = kvmem.fit(model, gpu=gpu, num_gpus=n, pp=n, context=8192, weight_dtype="q4_k_m", engine="llama.cpp")
    listed = mixed_cards(model, [gpu] * n, context=8192, batch=None, weight_dtype="q4_k_m", kv_dtype="auto",
                         options={})
    assert got.fits and (got.max_batch, got.max_context) == (listed.max_batch, listed.max_context) == fit_holds
    assert _fit_holds(model, [gpu] * n, 8192, "q4_k_m", listed) == fit_holds

"""llama.cpp: every sizing option reaches the placement (kvmem.llamacpp_offload, the verdict's placement) and its
commands, and an option the placement does not take is refused by name (review findings 1, 2 and 10)."""

import pytest

import kvmem
from kvmem.engines.llamacpp.budget import SIZING_OPTIONS
from kvmem.engines.llamacpp.launch import server_flags
from kvmem.engines.llamacpp.panel import NOT_PLACED, PLACEMENT_SIZING, offload_options


def _kv(lay) -> int:
    return sum(d.kv_bytes for d in lay.placement.devices)


def _estimate_kv(model, **options) -> int:
    return kvmem.estimate(model, engine="llama.cpp", tokens=32_768, batch=1, **options).total_bytes_all_devices


def test_swa_full_sizes_the_placement_and_says_so_in_both_commands():
    # gemma-3-27b at -c 32768: 10 global layers x 32,768 cells x 8,192 B (16 KV heads x 128 x 2 (K,V) x 2 B) =
    # 2,684,354,560 B (2560 MiB), and with --swa-full the 52 SWA layers at 32,768 cells too: 13,958,643,712 B
    # (13312 MiB), 16,642,998,272 B in all, kvmem.estimate's bytes at the same settings
    p = kvmem.llamacpp_offload("gemma-3-27b", gpus="rtx-3060-12gb", context=32_768, weight_dtype="q4_k_m",
                               swa_full=True)
    assert _kv(p.best) == _kv(p.fit) == 10 * 32_768 * 8_192 + 52 * 32_768 * 8_192 == 16_642_998_272
    assert _kv(p.best) == _estimate_kv("gemma-3-27b", swa_full=True)
    assert "-np 1 --swa-full --fit off" in p.command_best and "-np 1 --swa-full --fit on" in p.command_fit


def test_fit_places_the_swa_full_cache_it_prints():
    # the verdict's placement of the same workload holds the same 16,642,998,272 B of KV (on CUDA0 and the host)
    r = kvmem.fit("gemma-3-27b", engine="llama.cpp", gpu="rtx-3060-12gb", context="32k", batch=1,
                  weight_dtype="q4_k_m", swa_full=True)
    assert any("13312.00 MiB" in line for line in r.engine_numbers.lines)
    p = kvmem.llamacpp_offload("gemma-3-27b", gpus="rtx-3060-12gb", context=32_768, weight_dtype="q4_k_m",
                               swa_full=True)
    assert r.placement["total_bytes"] == p.best.total_bytes


def test_an_older_build_places_its_own_cache():
    # glm-5.2 at build 2026-07-10 (PR #19460's plain MLA cache: no indexer cache, the MTP block's layer cached from
    # PR #24060 to PR #25980) and at the pinned build (the DSA indexer's 21 layers x 32,768 cells x 128 x 2 B =
    # 176,160,768 B more, the MTP layer's 32,768 x 576 x 2 B = 37,748,736 B less): the placement's KV is
    # kvmem.estimate's at each build
    kw = dict(gpus="h100-sxm-80gb,h100-sxm-80gb", context=32_768, weight_dtype="q4_k_m")
    old = kvmem.llamacpp_offload("glm-5.2", build="2026-07-10", **kw)
    now = kvmem.llamacpp_offload("glm-5.2", **kw)
    assert _kv(old.best) == _estimate_kv("glm-5.2", build="2026-07-10")
    assert _kv(now.best) == _estimate_kv("glm-5.2")
    assert _kv(now.best) - _kv(old.best) == 21 * 32_768 * 128 * 2 - 32_768 * 576 * 2 == 138_412_032
    assert any(note.startswith("build='2026-07-10': in both placements") for note in old.notes)


def test_the_cache_flags_are_kvmem_plans():
    # one function writes them for kvmem plan and both offload commands: -np always (llama-server's default is
    # 4 unified slots), the rest where they differ from llama-server's defaults
    words = [w for f in server_flags(2, n_batch=4096, kv_unified=True, flash_attn=False, kv_offload=False,
                                     mmap=False, type_k="q8_0") for w in f.argv]
    assert words == ["-np", "2", "-fa", "off", "-ctk", "q8_0", "-b", "4096", "--kv-unified", "-nkvo", "-lm", "none"]
    assert [w for f in server_flags(1) for w in f.argv] == ["-np", "1"]
    # flash attention as settings.py reads its words: "enabled" is on, "auto" (llama-server's default) unwritten
    assert [w for f in server_flags(1, flash_attn="enabled") for w in f.argv] == ["-np", "1", "-fa", "on"]
    assert [w for f in server_flags(1, flash_attn="disabled") for w in f.argv] == ["-np", "1", "-fa", "off"]
    assert [w for f in server_flags(1, flash_attn="auto") for w in f.argv] == ["-np", "1"]
    p = kvmem.llamacpp_offload("llama-3.1-8b", gpus="rtx-3060-12gb", context=8_192, weight_dtype="q4_k_m",
                               n_batch=1024, kv_unified=True, n_seq=2)
    assert p.command_best.startswith("llama-server -m llama-3.1-8b-q4_k_m.gguf -c 8192 -np 2 -b 1024 --kv-unified "
                                     "--fit off")


@pytest.mark.parametrize("zero", [0, "0MB"])
def test_mmproj_zero_is_no_projector(zero):
    # as budget.py's other zero options (0 checkpoints, 0 MiB of prompt cache) charge nothing: no weights, no
    # compute buffer (its 121.25 MiB was charged before), no --mmproj in the commands
    kw = dict(engine="llama.cpp", gpu="rtx-3090-24gb", context="32k", batch=1, weight_dtype="q4_k_m")
    assert kvmem.fit("gemma-3-27b", mmproj=zero, **kw).max_context == kvmem.fit("gemma-3-27b", **kw).max_context
    p = kvmem.llamacpp_offload("gemma-3-27b", gpus="rtx-3090-24gb", context=32_768, weight_dtype="q4_k_m",
                               mmproj=zero)
    assert "--mmproj" not in p.command_best + p.command_fit and p.best.mmproj == {}


def test_an_option_the_placement_does_not_take_is_refused_by_name():
    def placement_without_swa_full(model, *, gpus, context, n_ubatch=512):
        raise AssertionError("not called")
    with pytest.raises(ValueError, match="option swa_full=True: the llama.cpp offload placement does not take it"):
        offload_options({"swa_full": True, "n_ubatch": 256}, placement_without_swa_full)
    # kvmem.fit's own arguments (the Fit page passes them along) are no llama.cpp option: left out
    assert offload_options({"gpu": "h100", "n_ubatch": 256}, placement_without_swa_full) == {"n_ubatch": 256}
    # every sizing option is either laid out or named as not the placement's
    assert set(SIZING_OPTIONS) <= PLACEMENT_SIZING | NOT_PLACED


def test_the_checkpoints_count_the_slots_the_kv_was_sized_for():
    # qwen3.5-27b after 32k tokens: one context checkpoint 156,894,364 B (tests/engines/test_llamacpp_checkpoints.py);
    # fit with no batch answers for its work batch (the placement's n_seq, the -np its commands write), so the
    # host-RAM line counts 32 x 3 slots, not llama-server's auto 4: 15,061,858,944 B
    from types import SimpleNamespace

    from kvmem.engines.llamacpp.checkpoints import host_terms
    s = SimpleNamespace(model=kvmem.get_model("qwen3.5-27b"), sizing={}, batch=None, context=32_768, kv_dtype="auto",
                        engine_options={})
    counted = {t.name: t.bytes_per_node for t in host_terms(s, 0, {"n_seq": 3, "host_bytes": 0})}
    assert counted["llama.cpp context checkpoints"] == 32 * 3 * 156_894_364 == 15_061_858_944
    counted = {t.name: t.bytes_per_node for t in host_terms(s, 0, None)}      # no placement, no batch: auto 4
    assert counted["llama.cpp context checkpoints"] == 32 * 4 * 156_894_364


def test_the_decode_curve_lays_out_the_swa_full_cache():
    # every layer on the GPU (-ngl 63): --swa-full adds 52 x (32,768 - 1,536) x 8,192 B = 13,304,332,288 B of KV
    # on CUDA0 (and the graph's reads of the longer SWA cache)
    from kvmem.engines.llamacpp.panel import panel_decode_curve
    kw = dict(gpus=["rtx-3060-12gb"], context=32_768, batch=1, weight_dtype="q4_k_m", kv_dtype="auto",
              host_memory=None)
    full = panel_decode_curve("gemma-3-27b", options={"swa_full": True}, **kw)[-1]
    plain = panel_decode_curve("gemma-3-27b", options={}, **kw)[-1]
    assert full.value == plain.value == 63
    assert full.total_bytes["CUDA0"] - plain.total_bytes["CUDA0"] >= 52 * (32_768 - 1_536) * 8_192 == 13_304_332_288

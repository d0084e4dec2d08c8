"""SGLang's CUDA-graph lines against the reserve its memory rule leaves beside the KV pool
(kvmem.engines.sglang.cudagraph), on published startup logs (tests/fixtures/logs/SOURCES.md)."""

from fractions import Fraction
from pathlib import Path

import pytest

import kvmem
from kvmem.engines.sglang.budget import sglang_mem_fraction_static
from kvmem.engines.sglang.cudagraph import default_reserve_mib
from kvmem.logcheck import check_log

LOGS = Path(__file__).resolve().parent.parent / "fixtures" / "logs"
CONFIGS = Path(__file__).resolve().parent.parent / "fixtures" / "configs" / "corpus"
GIB = 1 << 30
MIB = 1 << 20


def _log(name: str) -> str:
    return (LOGS / name).read_text(encoding="utf-8")


def _qwq():
    # QwQ-32B is a Qwen2.5-32B fine-tune: the same config fields (64 layers, 8 KV heads of 128)
    return kvmem.Model.from_hf_config(CONFIGS / "Qwen--Qwen2.5-32B.json")


def _by(result, quantity: str):
    (found,) = [c for c in result.checks if c.quantity == quantity]
    return found


def test_qwq_on_four_l4_graphs_within_the_reserve():
    # didier-durand/llms-in-clouds/docs/sglang.md: SGLang 0.4.3.post4, 4 x L4, tp 4, mem_fraction_static 0.85
    # (server_args), 13 decode graphs up to cuda_graph_max_bs 80
    result = check_log(_log("sglang_qwq32b_4xl4_startup.log"), _qwq(), engine="sglang")
    assert result.matches
    graphs = _by(result, "CUDA graph memory within the reserve")
    assert graphs.line == 28 and graphs.logged == "decode 0.93 GB"
    # reserve = free before the weights x (1 - mfs) = 21.63 GB x 0.15 = 3.2445 GB; the graphs took 0.93 GB
    assert result.settings["cuda_graph_bytes"] == round(0.93 * GIB) == 998_579_896
    assert result.settings["reserve_bytes"] == int(round(21.63 * GIB) * Fraction(15, 100)) == 3_483_755_347
    assert result.settings["cuda_graph_max_bs"] == 80
    assert result.settings["weights_bytes_logged"] == round(15.54 * GIB)
    notes = " ".join(result.notes)
    assert "after capture 2.31 GB of the 3.24 GB reserve is left" in notes      # 3.2445 - 0.93
    # 2 MiB x 80 = 160 MiB is all the default rule sets aside for the decode graphs
    assert "the decode graphs took 0.93 GB, above the 2 MiB x max_bs 80 = 0.16 GB" in notes
    # chunked_prefill_size 2048: 2048 x 1.5 MiB + 512 MiB = 3.50 GB the rule allows for a prefill; 0.53 GB was left
    assert "line 28: 0.53 GB is free after capture, below the 3.50 GB" in notes


def test_qwq_kv_pool_is_the_budget_sglang_measured():
    # rest = free after the weights - free before x (1 - mfs) = 6.09 - 21.63 x 0.15 GB (model_runner's profile), and
    # #tokens = rest // (K + V bytes a token): 64 layers x 2 heads x 128 x 2 B x 2 (K, V) = 65,536 B at tp 4
    result = check_log(_log("sglang_qwq32b_4xl4_startup.log"), _qwq(), engine="sglang")
    rest = result.settings["kv_budget_bytes"]
    assert rest == int(round(6.09 * GIB) - round(21.63 * GIB) * Fraction(15, 100)) == 3_055_332_360
    # each GB is printed to 0.01: +-0.005 GB on both, 0.00575 GB = 6,174,015 B, 94 tokens of 65,536 B
    assert abs(rest // 65_536 - result.settings["tokens"][0]) <= 94
    assert rest // 65_536 == 46_620 and result.settings["tokens"] == [46_611]


def test_a_graph_past_the_reserve_is_the_oom_at_capture():
    # the same lines under --mem-fraction-static 0.99: 21.63 GB x 0.01 = 0.22 GB of reserve for 0.93 GB of graphs
    result = check_log(_log("sglang_qwq32b_4xl4_startup.log"), _qwq(), engine="sglang", mem_fraction_static=0.99)
    graphs = _by(result, "CUDA graph memory within the reserve")
    assert not graphs.matches
    assert graphs.kvmem.startswith("<= 0.22 GB")
    assert "sizes before capture" in graphs.cause


def test_without_the_fraction_the_room_the_pool_left():
    # no server_args line: the graphs are checked against "Memory pool end. avail mem=2.09 GB"
    lines = [line for line in _log("sglang_qwq32b_4xl4_startup.log").splitlines() if "server_args=" not in line]
    result = check_log("\n".join(lines), _qwq(), engine="sglang")
    graphs = _by(result, "CUDA graph memory within the room the pool left")
    assert graphs.matches and graphs.kvmem.startswith("<= 2.09 GB")


def test_llama4_maverick_capture_line_alone_is_read_not_checked():
    # sglang#8538: Llama-4-Maverick FP8, tp 8, --mem-fraction-static 0.8, decode graphs up to bs 160: 6.19 GB
    result = check_log(_log("sglang_8538_llama4_maverick_capture.log"), "llama-4-maverick-17b-128e", engine="sglang")
    assert result.engine == "sglang" and not result.checks
    assert result.settings["cuda_graph_bytes"] == round(6.19 * GIB)
    assert any("the graphs took 6.19 GB; the reserve they fit in needs 'Load weight begin" in n for n in result.notes)


def test_every_rank_prints_its_capture_the_largest_is_read():
    # sglang#12978: TP1 1.04 GB, TP0 1.00 GB
    result = check_log(_log("sglang_12978_capture_tp2.log"), "llama-3.1-8b", engine="sglang")
    assert result.settings["cuda_graph_bytes"] == round(1.04 * GIB)


def test_the_batch_sizes_line_gives_max_bs():
    # sglang#20758 (MUSA): "Capture cuda graph bs [1, 2, 4, 8]", 0.83 GB against 2 MiB x 8
    result = check_log(_log("sglang_20758_musa_capture.log"), "llama-3.1-8b", engine="sglang")
    assert result.settings["cuda_graph_max_bs"] == 8
    assert any("above the 2 MiB x max_bs 8 = 0.02 GB" in n for n in result.notes)


def test_the_0_5_23_line_with_the_weight_lines():
    # inclusionAI/ling-cookbook (an SGLang branch on a GB10): "Capture target decode CUDA graph end. elapsed=10.10 s,
    # mem usage=0.79 GB, avail mem=10.39 GB."; --mem-fraction-static 0.8 (the command, continued over lines: given)
    result = check_log(_log("sglang_ling3_flash_gb10_startup.log"), "llama-3.1-8b", engine="sglang",
                       mem_fraction_static=0.8)
    graphs = _by(result, "CUDA graph memory within the reserve")
    assert graphs.matches and graphs.logged == "target decode 0.79 GB"
    assert result.settings["reserve_bytes"] == int(round(109.98 * GIB) * Fraction(2, 10))   # 22.00 GB
    assert result.settings["weights_bytes_logged"] == round(80.31 * GIB)


def test_a_number_no_server_prints_is_refused():
    line = "[t] Capture cuda graph end. Time elapsed: 1.00 s. mem usage=1" + "0" * 30 + ".00 GB. avail mem=1.00 GB."
    with pytest.raises(ValueError, match="kvmem reads numbers of at most 24"):
        check_log(line, "llama-3.1-8b", engine="sglang")


@pytest.mark.parametrize("gpu_mib, chunk, max_bs, tp, fraction", [
    (183_359, 16_384, 512, 8, "0.852"),    # B200, tp 8: 512 + 24,576 + 1,024 + 1,024 = 27,136 MiB
    (81_559, 8_192, 256, 1, "0.835"),      # H100: 512 + 12,288 + 512 + 128 = 13,440 MiB
    (23_034, 4_096, 160, 4, "0.675"),      # L4, tp 4: 512 + 6,144 + 320 + 512 = 7,488 MiB
])
def test_the_reserve_is_the_one_the_default_fraction_leaves(gpu_mib, chunk, max_bs, tp, fraction):
    reserved = default_reserve_mib(chunked_prefill_size=chunk, max_bs=max_bs, tp=tp, gpu_mib=gpu_mib)
    assert round(Fraction(gpu_mib - reserved) / gpu_mib, 3) == Fraction(fraction)
    assert sglang_mem_fraction_static(gpu_mib * MIB, tp=tp) == Fraction(fraction)


@pytest.mark.parametrize("given, message", [
    ({"mem_fraction_static": 32}, r"mem_fraction_static must be a number in \(0, 1\], got 32"),
    ({"mem_fraction_static": "x"}, r"mem_fraction_static must be a number in \(0, 1\], got 'x'"),
    ({"chunked_prefill_size": 0.93}, "chunked_prefill_size must be a positive integer, got 0.93"),
])
def test_a_setting_sglang_does_not_take_is_refused_by_name(given, message):
    with pytest.raises(ValueError, match=message):
        check_log(_log("sglang_qwq32b_4xl4_startup.log"), _qwq(), engine="sglang", **given)


def test_a_long_line_is_read_in_one_pass():
    # 2,000 "Load weight end." markers without the numbers after them: each search starts at a literal
    import time
    line = "[TP0] Load weight end. type=X, avail mem=1 GB" * 2000
    check_log("[t] Capture cuda graph bs [1]", "llama-3.1-8b", engine="sglang")     # the readers imported
    start = time.perf_counter()
    check_log(line + "\n[TP0] Capture cuda graph end. Time elapsed: 1.00 s. mem usage=0.50 GB. avail mem=1.00 GB.",
              "llama-3.1-8b", engine="sglang")
    assert time.perf_counter() - start < 1.0


def test_the_weight_load_against_kvmems_weights():
    # "Load weight end. ... mem usage=15.54 GB": SGLang's free memory before less after the load; kvmem's weights a
    # GPU: Qwen2.5-32B's 32,763,876,352 parameters x 2 B / tp 4 = 16,381,938,176 B (15.26 GB): 0.28 GB more was
    # held over the load, memory kvmem's budget leaves in the KV pool
    result = check_log(_log("sglang_qwq32b_4xl4_startup.log"), _qwq(), engine="sglang")
    assert result.settings["weights_bytes_kvmem"] == 32_763_876_352 * 2 // 4
    assert "line 12: SGLang measured 15.54 GB over the weight load; kvmem's bf16 weights are 15.26 GB a GPU " \
           "(+0.28 GB" in " ".join(result.notes)


def test_a_speculative_start_sums_its_phases():
    # the 0.5.23 spellings (cuda_graph_setup.py, speculative/eagle_worker_v2.py,
    # multi_layer_eagle_draft_extend_cuda_graph_runner.py): target verify + draft decode + two draft extend steps
    lines = ["[t TP0] Capture target verify CUDA graph end. bs=[1, 2, 4], elapsed=2.27 s, mem usage=0.14 GB, "
             "avail mem=52.93 GB.",
             "[t TP1] Capture target verify CUDA graph end. bs=[1, 2, 4], elapsed=2.27 s, mem usage=0.16 GB, "
             "avail mem=52.91 GB.",
             "[t] Capture draft decode CUDA graph end. elapsed=0.98 s, mem usage=0.18 GB, avail mem=52.66 GB.",
             "[t] Capture draft extend CUDA graph end. step=0, elapsed=0.84 s, mem usage=0.11 GB, avail mem=52.54 GB.",
             "[t] Capture draft extend CUDA graph end. step=1, elapsed=0.84 s, mem usage=0.12 GB, avail mem=52.42 GB."]
    result = check_log("\n".join(lines), "llama-3.1-8b", engine="sglang")
    # 0.16 (TP1, the larger rank) + 0.18 + 0.11 + 0.12 GB
    assert result.settings["cuda_graph_bytes"] == sum(round(x * GIB) for x in (0.16, 0.18, 0.11, 0.12))
    assert result.settings["cuda_graph_max_bs"] == 4

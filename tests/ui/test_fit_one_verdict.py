"""Fit page, llama.cpp: the metrics say what the verdict and the offload panel say (review finding 8): the
decode bound at the panel's host RAM bandwidth, the fewest GPUs from the same placement."""

from tests.ui.apptest import load


def test_deepseek_v3_2_on_one_3090_metrics_match_the_panel():
    at = load("ui/fit.py")
    at.query_params.update({"model": "deepseek-v3.2", "gpu": "rtx-3090-24gb", "tokens": "8k", "engine": "llama.cpp",
                            "weight_dtype": "q4_k_m"})
    at = at.run()
    assert not at.exception
    assert [h.value for h in at.subheader][0].split(": ", 1)[1].startswith("fits, 356.87 GiB of it in host RAM")
    metrics = {m.label: m.value for m in at.metric}
    # one card runs it (was 21, the cards that hold every layer); the decode bound is the panel's, both at the
    # panel's default host RAM (ddr5-5600-2ch): 6.9 tok/s (was "—" beside the panel's number)
    assert metrics["Fewest GPUs"] == "1" and metrics["Decode bound at batch 1"] == "6.9 tok/s"
    panel = [m.value for m in at.markdown if m.value.startswith("**kvmem: the most on the GPUs**")]
    assert panel and panel[0].endswith("decode bound 6.9 tok/s")


def test_gemma_3_27b_at_79872_every_layer_on_one_card():
    at = load("ui/fit.py")
    at.query_params.update({"model": "gemma-3-27b", "gpu": "rtx-3090-24gb", "tokens": "79872", "engine": "llama.cpp",
                            "weight_dtype": "q4_k_m"})
    at = at.run()
    at.number_input(key="mmproj_mb").set_value(858)
    at = at.run()
    assert not at.exception
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Fewest GPUs"] == "1"      # was 2 with all 63 layers placed on the one card
    panel = [m.value for m in at.markdown if m.value.startswith("**kvmem: the most on the GPUs**")]
    assert panel and "63/63 layers on the GPUs" in panel[0]

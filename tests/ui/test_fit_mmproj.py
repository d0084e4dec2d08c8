"""Fit page, llama.cpp: a multimodal projector (ui/offload.py mmproj_inputs) counted in the verdict, the metrics
and the offload panel, as kvmem.fit counts the sizing option mmproj."""

import kvmem
from tests.ui.apptest import load


def test_an_mmproj_moves_the_max_context_and_is_said_in_the_panel():
    at = load("ui/fit.py")
    at.query_params.update({"model": "gemma-3-27b", "gpu": "rtx-3090-24gb", "tokens": "32k", "engine": "llama.cpp",
                            "weight_dtype": "q4_k_m"})
    at = at.run()
    assert not at.exception
    before = {m.label: m.value for m in at.metric}["Max context"]
    at.number_input(key="mmproj_mb").set_value(858)
    at.run()
    assert not at.exception
    expected = kvmem.fit("gemma-3-27b", gpu="rtx-3090-24gb", context="32k", batch=1, engine="llama.cpp",
                         weight_dtype="q4_k_m", mmproj=858_000_000)
    after = {m.label: m.value for m in at.metric}["Max context"]
    # kvmem's placement (every layer on the GPU) since review finding 3; budget.py's estimate gave 91,392 and 79,360
    assert (before, after) == ("94,720", f"{expected.max_context:,}") == ("94,720", "82,944")
    assert any("mmproj: weights 858,000,000 B on CUDA0; its compute buffers CUDA0 127,139,840 B" in c.value
               for c in at.caption)
    assert any(c.value.endswith("--mmproj mmproj.gguf --fit off -ngl 63") for c in at.code)


def test_an_engine_without_the_option_shows_no_mmproj_box():
    at = load("ui/fit.py").run()
    assert not at.exception and not [n for n in at.number_input if n.key == "mmproj_mb"]

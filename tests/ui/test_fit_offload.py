"""Fit page, llama.cpp: the offload panel (kvmem.llamacpp_offload) for a MoE model that does not fit
the card whole: the verdict is its placement's, and the placement comes first (issue 34 item 2)."""

from tests.ui.apptest import load


def test_offload_panel_for_qwen3_30b_a3b_on_a_12gb_card():
    at = load("ui/fit.py")
    at.query_params.update({"model": "qwen3-30b-a3b", "gpu": "rtx-3060-12gb", "tokens": "32k", "engine": "llama.cpp",
                            "weight_dtype": "q4_k_m"})
    at = at.run()
    assert not at.exception
    # one verdict: the placement's (9,734,385,696 B = 9.07 GiB in host RAM), not "does not fit" above it
    heads = [h.value for h in at.subheader]
    assert heads[0].endswith(": fits, 9.07 GiB of it in host RAM — if the host has 9.07 GiB of free RAM for it (not "
                             "checked: kvmem does not know the host's memory; -o host_memory_bytes=... checks it)")
    assert heads[1] == "llama.cpp: layers and experts on the GPUs"      # the placement right under it
    assert not at.error and all("does not fit" not in w.value for w in at.warning)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Max batch"] == "1" and metrics["Max context"] == "32,768"
    codes = [c.value for c in at.code]
    assert ("llama-server -m qwen3-30b-a3b-q4_k_m.gguf -c 32768 -np 1 --fit off -ngl 49 "
            r"-ot 'blk\.1\.ffn_down_exps\.weight=CUDA0' -ot 'blk\.0\.ffn_down_exps\.weight=CUDA0' --n-cpu-moe 27") in codes
    assert "llama-server -m qwen3-30b-a3b-q4_k_m.gguf -c 32768 -np 1 --fit on" in codes
    panel = [m.value for m in at.markdown if m.value.startswith("**kvmem: the most on the GPUs**")]
    assert panel and "49/49 layers on the GPUs" in panel[0] and "decode bound 51.9 tok/s" in panel[0]

"""llama.cpp's one verdict when the host RAM given is short (review finding 5h, issue 34 item 2): the headline is the
placement's reason, host RAM short by what the placement keeps there, and "what would fit" names more host RAM, a
smaller quant and a shorter context where each fits."""

import kvmem
from kvmem.cli import main

GiB = 1 << 30
QWEN = dict(gpu="rtx-3060-12gb", context=32768, weight_dtype="q4_k_m", engine="llama.cpp")


def test_the_headline_is_the_host_gap():
    # Qwen3-30B-A3B Q4_K_M, one 32k sequence on a 3060: kvmem's placement holds the GPU (-ngl 49 --n-cpu-moe 27, two
    # expert tensors back on CUDA0) and keeps 9,734,385,696 B (9.07 GiB) in host RAM; 8 GiB given: short by
    # 9,734,385,696 - 8,589,934,592 = 1,144,451,104 B (1.07 GiB). The weights-on-GPU budget said "short by
    # 9.19 GiB per device", which is no gap of this placement.
    got = kvmem.fit("qwen3-30b-a3b", **QWEN, host_memory_bytes=8 * GiB)
    # not one sequence of 32k; the longest context the placement runs in 8 GiB, at one sequence: 20,992 tokens
    assert not got.fits and (got.max_batch, got.max_context) == (0, 20992)
    assert got.why_not.startswith(
        "qwen3-30b-a3b does not fit on 1 x rtx-3060-12gb (llama.cpp): kvmem's placement (49/49 layers on the GPUs, "
        "--n-cpu-moe 27) holds the GPUs but keeps 9.07 GiB (9,734,385,696 B) in host RAM, more than the 8.00 GiB "
        "given: host RAM short by 1.07 GiB (1,144,451,104 B). What would fit: ")
    assert "per device" not in got.why_not and " And host RAM" not in got.why_not     # said once
    # the host RAM line is the placement's (it said 0 B of 8 GiB): its tensors in host RAM, against the 8 GiB
    assert (got.host["total_bytes"], got.host["host_memory_bytes"]) == (9_734_385_696, 8 * GiB)
    assert got.suggestions[0] == "host RAM 9.07 GiB (9,734,385,696 B), not 8.00 GiB"
    assert {"weight_dtype='q3_k_m'", "context <= 20,992 tokens"} <= set(got.suggestions)


def test_each_lever_is_true():
    # the host RAM named fits to the byte and a byte less does not; 20,992 tokens fit in 8 GiB, 21,248 do not
    need = 9_734_385_696
    assert kvmem.fit("qwen3-30b-a3b", **QWEN, host_memory_bytes=need).fits
    assert not kvmem.fit("qwen3-30b-a3b", **QWEN, host_memory_bytes=need - 1).fits
    assert kvmem.fit("qwen3-30b-a3b", **{**QWEN, "context": 20992}, host_memory_bytes=8 * GiB).fits
    assert not kvmem.fit("qwen3-30b-a3b", **{**QWEN, "context": 21248}, host_memory_bytes=8 * GiB).fits
    assert kvmem.fit("qwen3-30b-a3b", **{**QWEN, "weight_dtype": "q3_k_m"}, host_memory_bytes=8 * GiB).fits


def test_unbounded_host_fits_with_no_gap(capsys):
    # no host RAM given: the placement runs if the host has its 9.07 GiB (fit says so), no host lever
    got = kvmem.fit("qwen3-30b-a3b", **QWEN)
    assert got.fits and got.why_not is None
    code = main(["fit", "qwen3-30b-a3b", "--engine", "llama.cpp", "--gpu", "rtx-3060-12gb", "--context", "32k",
                 "--weight-dtype", "q4_k_m", "--host-memory", "8GiB"])
    out = capsys.readouterr()
    assert code == 1 and "host RAM short by 1.07 GiB (1,144,451,104 B)" in out.err + out.out
    assert "would fit, as flags: -o host_memory_bytes=9734385696;" in out.out

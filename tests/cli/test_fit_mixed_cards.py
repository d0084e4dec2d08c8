"""kvmem fit --gpu A,B (llama.cpp on mixed cards): flags that contradict the list refused by name, the verdict
from the placement record, the single-card path's keys in --json (review finding 7)."""

import json

import pytest

from kvmem.cli import main


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


QWEN = ("fit", "qwen3-30b-a3b", "--engine", "llama.cpp", "--weight-dtype", "q4_k_m", "--gpu", "rtx-3090,rtx-3060")


@pytest.mark.parametrize("flag", [("--num-gpus", "3"), ("--tp", "2"), ("--pp", "3")])
def test_flags_contradicting_the_list_are_refused(capsys, flag):
    code, out, err = run(capsys, *QWEN, "--context", "32k", *flag)
    assert code == 2 and out == ""
    assert f"{flag[0]} {flag[1]}: --gpu rtx-3090,rtx-3060 lists 2 cards" in err


@pytest.mark.parametrize("flag", [("--weights", "20GB"), ("-o", "activation_bytes=1GB")])
def test_byte_counts_the_placement_does_not_take_are_refused(capsys, flag):
    code, out, err = run(capsys, *QWEN, "--context", "32k", *flag)
    name = flag[0] if flag[0] == "--weights" else "-o activation_bytes"
    assert code == 2 and out == "" and f"{name}: on mixed cards kvmem lays out llama.cpp's tensors" in err


def test_json_has_the_single_card_keys(capsys):
    # Qwen3-30B-A3B Q4_K_M on a 3090 + a 3060 with 8 GiB of host RAM at 32k: kvmem places it (49/49 layers on
    # the GPUs at one sequence, -ngl 999 -ts 47,23: the cards' free memory); those flags hold 5 sequences of 32k,
    # not 6 (tests/engines/test_llamacpp_mixed_cards.py); at one sequence the context stops at 40,960 positions
    code, out, _ = run(capsys, *QWEN, "--context", "32k", "--host-memory", "8GiB", "--json")
    data = json.loads(out)
    single = json.loads(run(capsys, "fit", "qwen3-30b-a3b", "--engine", "llama.cpp", "--weight-dtype", "q4_k_m",
                            "--gpu", "rtx-3090", "--context", "32k", "--json")[1])
    assert {"fits", "max_batch", "max_context", "llamacpp_offload"} <= set(data) & set(single)
    assert code == 0 and (data["fits"], data["max_batch"], data["max_context"]) == (True, 5, 40960)
    assert (data["num_gpus"], data["pp"], data["tp"]) == (2, 2, 1)


def test_verdict_is_the_records_host_shortfall(capsys):
    # Qwen3-235B-A22B Q4_K_M at 8k: kvmem's placement keeps 107,621,494,816 B in host RAM, more than 16 GiB
    code, out, _ = run(capsys, "fit", "qwen3-235b-a22b", "--engine", "llama.cpp", "--weight-dtype", "q4_k_m",
                       "--gpu", "rtx-3090,rtx-3060", "--context", "8k", "--host-memory", "16GiB", "--json")
    data = json.loads(out)
    assert code == 1 and (data["fits"], data["max_batch"], data["max_context"]) == (False, 0, 0)
    assert data["llamacpp_offload"]["host_shortfall"].startswith("kvmem's placement needs 107,621,494,816 B")


def test_unbounded_host_says_what_the_yes_rests_on(capsys):
    # the same placement with no --host-memory: it runs if the host has its 107,621,494,816 B (100.23 GiB)
    code, out, _ = run(capsys, "fit", "qwen3-235b-a22b", "--engine", "llama.cpp", "--weight-dtype", "q4_k_m",
                       "--gpu", "rtx-3090,rtx-3060", "--context", "8k")
    assert code == 0 and out.split("\n")[1] == ("fits: yes, if the host has 100.23 GiB of free RAM for it (not "
                                                "checked: --host-memory checks it) — 8,192 tokens, batch 1")

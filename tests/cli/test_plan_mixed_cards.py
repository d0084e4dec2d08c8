"""kvmem plan --gpu A,B: llama.cpp's command for kvmem's placement over mixed cards (review finding 7)."""

import json

from kvmem.cli import main

QWEN = ("plan", "qwen3-30b-a3b", "--weight-dtype", "q4_k_m", "--gpu", "rtx-3090,rtx-3060", "--context", "32k")


def test_plan_lays_out_mixed_cards_for_llama_cpp(capsys):
    # Qwen3-30B-A3B Q4_K_M, one sequence of 32k on a 3090 + a 3060: every layer on the GPUs, split by free memory
    # (24,064 : 11,776 MiB = 47 : 23)
    code = main([*QWEN, "--engine", "llama.cpp", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and (data["batch"], data["context"]) == (1, 32768)
    assert data["command"] == "llama-server -m qwen3-30b-a3b-q4_k_m.gguf -c 32768 -np 1 --fit off -ngl 999 -ts 47,23"


def test_plan_max_context_is_fits_answer(capsys):
    # the longest context with a placement at batch 1: the model's 40,960 positions (kvmem fit says the same)
    code = main([*QWEN, "--engine", "llama.cpp", "--target", "max_context", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["context"] == 40960 and " -c 40960 -np 1 " in data["command"]


def test_plan_mixed_cards_other_engine_and_contradicting_flags_refused(capsys):
    assert main([*QWEN, "--engine", "vllm"]) == 2
    assert "mixed cards are laid out by llama.cpp's offload placement only; engine vllm" in capsys.readouterr().err
    assert main([*QWEN, "--engine", "llama.cpp", "--num-gpus", "4"]) == 2
    assert "--num-gpus 4: --gpu rtx-3090,rtx-3060 lists 2 cards" in capsys.readouterr().err

"""kvmem fit / plan --llama-args: the user's own llama-server flags, one record in fit, plan --json (and the Fit
page: tests/ui/test_fit_own_flags.py)."""

import json

import pytest

from kvmem.cli import main


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


CARDS = ("qwen3-30b-a3b", "--engine", "llama.cpp", "--weight-dtype", "q4_k_m", "--gpu", "rtx-3090-24gb,rtx-3060-12gb",
         "--context", "32k")
FLAGS = "-ngl 99 -ts 3,1 --n-cpu-moe 30 -np 1"


def test_fit_prints_the_verdict_per_device_and_what_llama_cpp_prints(capsys):
    code, out, err = run(capsys, "fit", *CARDS, "--llama-args", FLAGS)
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0] == ("qwen3-30b-a3b: your flags on rtx-3090-24gb + rtx-3060-12gb · llama.cpp: fit — 1 x 32,768 "
                        "tokens (-c 32,768, 1 slot)")
    # CUDA0: 2,783.37 MiB of weights + 2,368 MiB KV + 249.51 MiB compute + 512 MiB CUDA context = 5.77 GiB
    assert ("  CUDA0: weights 2.72 GiB, KV 2.31 GiB, compute 249.51 MiB, CUDA context 512.00 MiB = 5.77 GiB of "
            "24.00 GiB ok") in lines
    # -np 1 and -c 32,768: one sequence; 8 need -c 8 x 32,768 = 262,144 and -np 8 (review finding 5b)
    assert "  with -c 32,768 (1 slot): 1 sequence of 32,768 tokens at once; a sequence up to 32,768 tokens" in lines
    assert "  max batch at 32,768 tokens: 8, with -c raised to 262,144 and -np 8" in lines
    assert ("  sized as: llama-server -m qwen3-30b-a3b-q4_k_m.gguf -ngl 99 -ts 3,1 --n-cpu-moe 30 -np 1 -c 32768"
            in lines)
    assert any(line.startswith("  instead, kvmem: -ngl 999 -ts 47,23;") for line in lines)
    assert any(line.startswith("  instead, --fit on: -ngl 999 -ts 47,23;") for line in lines)
    assert "    load_tensors:        CUDA1 model buffer size =  4328.06 MiB" in lines


def test_one_workload_one_record_in_fit_and_plan_json(capsys):
    _, fit_out, _ = run(capsys, "fit", *CARDS, "--llama-args", FLAGS, "--json")
    code, plan_out, _ = run(capsys, "plan", *CARDS, "--llama-args", FLAGS, "--json")
    fit, plan = json.loads(fit_out), json.loads(plan_out)
    assert code == 0 and fit["own_flags"] == plan["own_flags"]
    assert plan["command"] == fit["own_flags"]["command"]
    assert (fit["fits"], fit["max_batch"], fit["max_context"]) == (True, 8, 40960)


def test_flags_that_do_not_fit_exit_1_and_plan_refuses(capsys):
    # llm-rig #85's shape: the experts of layers 27-47 all on the last card (tests/engines/test_llamacpp_own_flags.py)
    args = ("qwen3-next-80b-a3b", "--engine", "llama.cpp", "--weight-dtype", "q4_k_m", "--gpu",
            "rtx-4060-ti-16gb", "--num-gpus", "2", "--context", "8192", "--batch", "1", "--llama-args",
            "-ngl 99 -ts 16,15 --n-cpu-moe 27")
    code, out, _ = run(capsys, "fit", *args)
    assert code == 1 and "llama.cpp: do not fit" in out.splitlines()[0]
    assert any(line.startswith("  CUDA1: weights 19.91 GiB") and line.endswith("OVER") for line in out.splitlines())
    code, out, err = run(capsys, "plan", *args)
    assert code == 1 and out == "" and "kvmem plan: refused: qwen3-next-80b-a3b: your flags do not fit" in err


@pytest.mark.parametrize("extra, named", [
    (("--engine", "vllm"), "--llama-args: the flags of llama.cpp's llama-server; engine vllm is not llama.cpp"),
    (("--llama-args", "-ngl 99 --mlock"), "'--mlock' is not a flag kvmem reads"),
    (("--llama-args", "-ngl 99 -c 8192"), "-c 8192 contradicts --context 32,768"),
    (("--tp", "2", "--gpu", "rtx-3090-24gb"), "--tp 2 / --pp 1: llama.cpp splits the layers"),
])
def test_refusals_exit_2_naming_the_flag(capsys, extra, named):
    argv = ["fit", *CARDS, "--llama-args", FLAGS]
    for flag, value in zip(extra[::2], extra[1::2], strict=True):   # the later value replaces the earlier
        at = argv.index(flag) if flag in argv else None
        if at is None:
            argv += [flag, value]
        else:
            argv[at + 1] = value
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "" and named in err


def test_without_llama_args_fit_is_unchanged(capsys):
    """The argument is new: a fit without it prints what it printed before (the mixed-cards headline)."""
    code, out, _ = run(capsys, "fit", *CARDS)
    assert code == 0 and out.startswith("qwen3-30b-a3b on rtx-3090-24gb + rtx-3060-12gb · llama.cpp: fits with the "
                                        "placement below")


def test_plan_target_max_batch_answers_with_the_number(capsys):
    code, out, err = run(capsys, "plan", *CARDS, "--llama-args", FLAGS, "--target", "max_batch")
    assert code == 1 and out == ""
    assert ("--target max_batch with --llama-args: your flags' placement holds 8 sequences of 32,768 tokens with -c "
            "raised to 262,144 (your -c 32,768 holds 1 sequence of 32,768 tokens, each up to 32,768): give -np 8 among "
            "your flags (kvmem then writes -c 262144)") in err

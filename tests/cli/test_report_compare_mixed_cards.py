"""kvmem report / compare --gpu A,B: refused as taking one kind of card, naming kvmem fit / plan, which lay mixed
cards out (review finding 5a: they said "unknown GPU 'A,B'", which was false: both cards are in the catalog)."""

import json

import pytest

from kvmem.cli import main

ARGS = ("qwen3-30b-a3b", "--gpu", "rtx-3090-24gb,rtx-3060-12gb", "--context", "32k")
POINTER = ("Mixed cards are laid out by llama.cpp's offload placement in kvmem fit and kvmem plan: kvmem fit "
           "qwen3-30b-a3b --gpu rtx-3090-24gb,rtx-3060-12gb --engine llama.cpp")


@pytest.mark.parametrize("command, extra, said", [
    ("report", ("--engine", "llama.cpp"), "kvmem report takes one kind of card (--gpu NAME --num-gpus N): its "
                                         "document is kvmem.fit of one card kind"),
    ("compare", (), "kvmem compare (fit --engine all) takes one kind of card (--gpu NAME --num-gpus N): it sizes "
                    "every engine mode on the same cards, and only llama.cpp runs mixed ones"),
    ("fit", ("--engine", "all"), "kvmem compare (fit --engine all) takes one kind of card")])
def test_report_and_compare_refuse_mixed_cards_truly(command, extra, said, capsys):
    assert main([command, *ARGS, *extra]) == 2
    err = capsys.readouterr().err
    assert "--gpu rtx-3090-24gb,rtx-3060-12gb lists mixed cards" in err and said in err and POINTER in err
    assert "unknown GPU" not in err
    assert main([command, *ARGS, *extra, "--json"]) == 2
    data = json.loads(capsys.readouterr().out)
    assert data["type"] == "ValueError" and said in data["error"] and POINTER in data["error"]


def test_the_pointer_is_a_command_that_answers(capsys):
    # the refusal's own suggestion runs: the placement over both cards (tests/cli/test_fit_mixed_cards.py has its
    # numbers)
    code = main(["fit", *ARGS, "--engine", "llama.cpp", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code in (0, 1) and data["gpu"] == ["rtx-3090-24gb", "rtx-3060-12gb"] and "llamacpp_offload" in data

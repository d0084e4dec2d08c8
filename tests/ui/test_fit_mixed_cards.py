"""Fit page, llama.cpp on mixed cards (issue 34): the page draws kvmem fit --gpu A,B's record
(kvmem.engines.llamacpp.panel.mixed_cards): the same verdict, max batch, max context and command as the CLI for
the same inputs, the placement right under the headline; a bad list is refused by name, never a traceback."""

import json

import pytest

from kvmem.cli import main
from tests.ui.apptest import load

QWEN = {"model": "qwen3-30b-a3b", "tokens": "32k", "engine": "llama.cpp", "weight_dtype": "q4_k_m"}


def page(query: dict, **widgets):
    at = load("ui/fit.py")
    at.query_params.update(query)
    at.run()
    for key, value in widgets.items():
        at.number_input(key=key).set_value(value)
    if widgets:
        at.run()
    assert not at.exception
    return at


def cli(capsys, *argv):
    """kvmem fit's exit status, its text and its --json for the same arguments."""
    code = main(["fit", *argv])
    text = capsys.readouterr().out
    assert main(["fit", *argv, "--json"]) == code
    return code, text, json.loads(capsys.readouterr().out)


def order(at) -> list[str]:
    """The page's main elements in the order drawn: headings, the placement's lines and the metrics."""
    seen = []

    def walk(node):
        for child in getattr(node, "children", {}).values():
            kind = getattr(child, "type", "")
            if kind == "subheader" or (kind == "markdown" and child.value.startswith("**")):
                seen.append(child.value)
            elif kind == "metric":
                seen.append(f"metric {child.label}")
            walk(child)
    walk(at.main)
    return seen


def test_two_mixed_cards_give_the_clis_answer(capsys):
    # Qwen3-30B-A3B Q4_K_M on a 3090 + a 3060 at 32k with 8 GiB of host RAM: kvmem places all 49 layers, -ts 47,23
    # (the cards' 24,064 : 11,776 MiB free, as llama.cpp splits with no -ts); its flags hold 5 sequences of 32k
    # and, at one sequence, the model's 40,960 positions (tests/engines/test_llamacpp_mixed_cards.py)
    at = page({**QWEN, "cards": "rtx-3090,rtx-3060"}, host_ram_gib=8)
    code, text, data = cli(capsys, "qwen3-30b-a3b", "--engine", "llama.cpp", "--weight-dtype", "q4_k_m", "--gpu",
                           "rtx-3090,rtx-3060", "--context", "32k", "--batch", "1", "--host-memory", "8GiB")
    metrics = {m.label: m.value for m in at.metric}
    assert code == 0 and data["fits"] and not at.error
    assert metrics["Max batch"] == f"{data['max_batch']:,}" == "5"
    assert metrics["Max context"] == f"{data['max_context']:,}" == "40,960"
    command = data["llamacpp_offload"]["command_best"]
    assert command == "llama-server -m qwen3-30b-a3b-q4_k_m.gguf -c 32768 -np 1 --fit off -ngl 999 -ts 47,23"
    assert [c.value for c in at.code][:2] == [command, data["llamacpp_offload"]["command_fit"]]
    # the CLI's headline, word for word; the placement right under it, the metrics after
    assert at.subheader[0].value.replace("\\", "") == text.split("\n")[0] == (
        "qwen3-30b-a3b on rtx-3090 + rtx-3060 · llama.cpp: fits with the placement below")
    drawn = order(at)
    assert drawn[:2] == [at.subheader[0].value, "**kvmem: the most on the GPUs**: 49/49 layers on the GPUs, context "
                         "32,768; CUDA0 14.31 GiB, CUDA1 7.24 GiB, CPU 314.97 MiB; decode bound 117.0 tok/s"]
    assert drawn[2].startswith("**--fit on**: 49/49 layers") and drawn[3] == "metric Max batch"
    # per device: the record's bytes (CUDA0 layers 0-32, CUDA1 33-47: 15 layers, and the output)
    rows = at.dataframe[0].value
    assert list(rows["device"]) == ["CUDA0", "CUDA1", "CPU"] and list(rows["layers"]) == [33, 15, 0]
    assert list(rows["memory"]) == ["24.00 GiB", "12.00 GiB", "host RAM"]
    # each total the CLI's (CUDA0 14,658 MiB = 14.31 GiB): weights + KV + compute + the 512 MiB CUDA context; the
    # host's weights are token_embd's 175,030,272 B (166.92 MiB) beside its 155,238,528 B compute buffer
    assert list(rows["total"]) == ["14.31 GiB", "7.24 GiB", "314.97 MiB"]
    assert list(rows["other"]) == ["512.00 MiB", "512.00 MiB", "0 B"] and rows["weights"][2] == "166.92 MiB"
    assert len(at.get("vega_lite_chart")) == 1
    assert "Not used on this page: GPU, GPUs (the mixed cards replace them)." in [c.value for c in at.caption]


def test_three_cards_and_a_batch(capsys):
    # Llama-3.1-8B bf16 on a 4090 + 3090 + 3060, 2 x 16k: the cards' free 24,052 : 24,064 : 11,776 MiB over their
    # gcd 4, -ts 6013,6016,2944 (14, 13 and 5 layers and the output), holds 20 sequences of 16k and, at 2, the
    # model's 131,072 positions (-ts 1,1,1 held 10 and 78,848: the 3060's third of the layers filled it first)
    at = page({"model": "llama-3.1-8b", "tokens": "16k", "engine": "llama.cpp", "batch": "2",
               "cards": "rtx-4090-24gb,rtx-3090-24gb,rtx-3060-12gb"})
    _, _, data = cli(capsys, "llama-3.1-8b", "--engine", "llama.cpp", "--gpu",
                     "rtx-4090-24gb,rtx-3090-24gb,rtx-3060-12gb", "--context", "16k", "--batch", "2")
    metrics = {m.label: m.value for m in at.metric}
    assert (metrics["Max batch"], metrics["Max context"]) == (f"{data['max_batch']:,}", f"{data['max_context']:,}") \
        == ("20", "131,072")
    assert at.code[0].value == data["llamacpp_offload"]["command_best"] == (
        "llama-server -m llama-3.1-8b-bf16.gguf -c 32768 -np 2 --fit off -ngl 999 -ts 6013,6016,2944")
    # no host RAM given: the yes says what it rests on (1.08 GiB there: token_embd and the host's compute buffer)
    assert [i.value for i in at.info] == ["It runs if the host has 1.08 GiB of free RAM for it (not checked: Host RAM "
                                          "per node, under Host RAM, checks it)."]


def test_the_host_shortfall_is_the_verdict(capsys):
    # Qwen3-235B-A22B Q4_K_M at 8k keeps 107,621,494,816 B in host RAM: more than 16 GiB, so nothing runs
    at = page({**QWEN, "model": "qwen3-235b-a22b", "tokens": "8k", "cards": "rtx-3090,rtx-3060"}, host_ram_gib=16)
    code, text, data = cli(capsys, "qwen3-235b-a22b", "--engine", "llama.cpp", "--weight-dtype", "q4_k_m", "--gpu",
                           "rtx-3090,rtx-3060", "--context", "8k", "--host-memory", "16GiB")
    assert code == 1 and at.subheader[0].value.replace("\\", "") == text.split("\n")[0] == (
        "qwen3-235b-a22b on rtx-3090 + rtx-3060 · llama.cpp: does not fit: no placement below runs")
    assert [e.value for e in at.error] == [data["llamacpp_offload"]["host_shortfall"]]
    metrics = {m.label: m.value for m in at.metric}
    assert (metrics["Max batch"], metrics["Max context"], metrics["In host RAM"]) == ("0", "0", "100.23 GiB")


@pytest.mark.parametrize("cards, message", [
    ("rtx-3090,rtx-309x", "Mixed cards: card 2, 'rtx-309x': not a GPU kvmem knows; nearest: rtx-3090-24gb"),
    ("rtx-3090,zzzz", "Mixed cards: card 2, 'zzzz': not a GPU kvmem knows; the sidebar's GPU list names them all, or "
                      "give a custom spec such as custom:24GiB:936GB/s"),
    ("rtx-3090", "Mixed cards: one card (rtx-3090) is the sidebar's GPU: give two or more, comma-separated, or none"),
    ("rtx-3090,,rtx-3060", "Mixed cards: card 2 is empty: one GPU name between each pair of commas"),
    (",".join(["rtx-3090"] * 9), "Mixed cards: 9 cards: the app takes at most 8 (kvmem fit --gpu takes the list "
                                 "whole)"),
])
def test_a_bad_list_is_named(cards, message):
    at = page(QWEN)
    at.text_input(key="cards").set_value(cards).run()
    assert not at.exception and [e.value for e in at.error] == [message]


@pytest.mark.parametrize("widget, value, message", [
    ("tp", 2, "Tensor parallel 2: the 2 mixed cards run as one llama.cpp replica split by layers over the 2"),
    ("num_gpus", 3, "GPUs 3: the 2 mixed cards run as one llama.cpp replica split by layers over the 2"),
])
def test_sidebar_inputs_the_cards_contradict_are_refused(widget, value, message):
    # as kvmem fit --gpu A,B refuses --tp 2 and --num-gpus 3 (tests/cli/test_fit_mixed_cards.py)
    at = page({**QWEN, "cards": "rtx-3090,rtx-3060"}, **{widget: value})
    assert len(at.error) == 1 and at.error[0].value.startswith(message) and not at.metric


def test_links_are_checked():
    # a link's bad list is refused by name and the page is drawn with one kind of card; another engine's cards
    # are refused as that engine's (vLLM takes one kind of card)
    at = load("app.py")
    at.query_params.update({**QWEN, "cards": "rtx-3090,h100-nope"})
    at.run()
    at.switch_page("ui/fit.py").run()
    warned = " ".join(w.value for w in at.warning)
    assert not at.exception and "`cards=rtx-3090,h100-nope` refused: card 2, 'h100-nope'" in warned
    at = load("app.py")
    at.query_params.update({"model": "llama-3.1-8b", "tokens": "8k", "cards": "rtx-3090,rtx-3060"})
    at.run()
    at.switch_page("ui/fit.py").run()
    warned = " ".join(w.value for w in at.warning)
    assert not at.exception and "`cards=rtx-3090,rtx-3060` refused: mixed cards are llama.cpp's; engine vllm" in warned
    assert any(c.value.startswith("Mixed cards (a 3090 beside a 4090) are llama.cpp's") for c in at.caption)


def test_cards_typed_then_another_engine_say_they_are_not_used():
    at = page({**QWEN, "cards": "rtx-3090,rtx-3060"})
    at.selectbox(key="engine").set_value("vllm").run()
    assert not at.exception and at.info[0].value.startswith("Mixed cards rtx-3090,rtx-3060 not used: mixed cards (a "
                                                            "3090 beside a 4090) are llama.cpp's")
    at.selectbox(key="engine").set_value("llama.cpp").run()     # back: the cards and their answer again
    assert at.text_input(key="cards").value == "rtx-3090,rtx-3060" and at.metric[1].value == "40,960"


def test_a_custom_card_beside_a_preset(capsys):
    # a 24 GiB custom card (CUDA0) and a 3060: the page and kvmem fit --gpu custom:...,rtx-3060 say the same
    # (split by free memory, 24,064 : 11,776 MiB = -ts 47,23: 19 sequences of 8k, the model's 131,072 positions)
    at = page({"model": "llama-3.1-8b", "tokens": "8k", "engine": "llama.cpp", "cards": "custom:24GiB:936GB/s,rtx-3060"})
    _, _, data = cli(capsys, "llama-3.1-8b", "--engine", "llama.cpp", "--gpu", "custom:24GiB:936GB/s,rtx-3060",
                     "--context", "8k", "--batch", "1")
    metrics = {m.label: m.value for m in at.metric}
    assert (metrics["Max batch"], metrics["Max context"]) == (f"{data['max_batch']:,}", f"{data['max_context']:,}") \
        == ("19", "131,072")
    assert at.code[0].value == data["llamacpp_offload"]["command_best"]

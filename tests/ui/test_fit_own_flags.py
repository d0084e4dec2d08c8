"""Fit page, "your llama-server flags" (the llama.cpp panel): the box draws kvmem fit --llama-args's record
(kvmem.engines.llamacpp.own_flags) for the page's cards and workload, the same verdict, per-device totals and max
batch/context as the CLI; text that is not flags kvmem reads is refused by name, never run."""

import json

from kvmem.cli import main
from tests.ui.apptest import load

QWEN = {"model": "qwen3-30b-a3b", "tokens": "32k", "engine": "llama.cpp", "weight_dtype": "q4_k_m"}
FLAGS = "-ngl 99 -ts 3,1 --n-cpu-moe 30 -np 1"


def page(query: dict, flags: str):
    at = load("ui/fit.py")
    at.query_params.update(query)
    at.run()
    at.text_input(key="llama_args").set_value(flags).run()
    assert not at.exception
    return at


def flags_table(at):
    """The box's per-device table (the page draws other tables beside it)."""
    tables = [d.value for d in at.dataframe if "holds it" in d.value.columns]
    assert len(tables) == 1
    return tables[0]


def test_mixed_cards_and_your_flags_give_the_clis_record(capsys):
    at = page({**QWEN, "cards": "rtx-3090-24gb,rtx-3060-12gb"}, FLAGS)
    assert main(["fit", "qwen3-30b-a3b", "--engine", "llama.cpp", "--weight-dtype", "q4_k_m", "--gpu",
                 "rtx-3090-24gb,rtx-3060-12gb", "--context", "32k", "--llama-args", FLAGS, "--json"]) == 0
    record = json.loads(capsys.readouterr().out)["own_flags"]
    # "your flags on rtx-3090-24gb + rtx-3060-12gb · llama.cpp: fit — 1 x 32,768 tokens (-c 32,768, 1 slot)"
    assert [s.value for s in at.success] == ["Your flags on rtx-3090-24gb + rtx-3060-12gb · llama.cpp: fit — 1 x "
                                             "32,768 tokens (-c 32,768, 1 slot)"]
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Max batch"] == f"{record['max_batch']:,}" == "8"
    assert metrics["Max context"] == f"{record['max_context']:,}" == "40,960"
    # what the flags' own -c 32768 and 4 unified slots hold: one 32,768-token sequence
    assert metrics["Your -c / -np: sequences at once"] == f"{record['pool_sequences']:,}" == "1"
    assert metrics["Your -c / -np: longest sequence"] == f"{record['slot_context']:,}" == "32,768"
    codes = [c.value for c in at.code]
    assert FLAGS in codes                                   # shown back shell-quoted
    assert "\n".join(record["log_lines"]) in codes          # llama.cpp's start-up lines, as the CLI prints them
    table = flags_table(at)
    assert list(table["device"]) == ["CUDA0", "CUDA1", "CPU"] and list(table["holds it"]) == ["yes", "yes", "—"]


def test_one_card_from_the_sidebar_and_flags_that_overfill_it():
    # every expert of Qwen3-30B-A3B Q4_K_M on one 12 GB card: 17.5 GiB of weights, over
    at = page({**QWEN, "gpu": "rtx-3060-12gb", "batch": "1"}, "-ngl 99 -np 1")
    assert [e.value for e in at.error if e.value.startswith("Your flags on")] == [
        "Your flags on rtx-3060-12gb · llama.cpp: do not fit — 1 x 32,768 tokens (-c 32,768, 1 slot)"]
    assert list(flags_table(at)["holds it"])[0] == "NO"


def test_text_that_is_not_flags_is_refused_by_name_and_never_run():
    for text, named in (("-ngl 99; $(touch /tmp/kvmem-own-flags)", "is not a flag kvmem reads"),
                        ("-ot 'blk", "not split as a shell would"),
                        ("-ngl 99 -c 1000", "-c 1000 contradicts --context 32,768")):
        at = page({**QWEN, "cards": "rtx-3090-24gb,rtx-3060-12gb"}, text)
        assert any(e.value.startswith("Your flags: --llama-args: ") and named in e.value for e in at.error), text

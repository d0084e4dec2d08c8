"""kvmem.engines.llamacpp.panel.mixed_cards: llama.cpp on mixed cards, the one record that kvmem fit --gpu A,B,
kvmem plan --gpu A,B and the app's Fit page read (issue 34: one workload, one answer)."""

import json

import pytest

import kvmem
from kvmem.cli import main
from kvmem.engines.llamacpp.panel import mixed_cards

QWEN = dict(context=32768, batch=None, weight_dtype="q4_k_m", kv_dtype="auto")


def cli_json(capsys, *argv):
    code = main(["fit", *argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_qwen3_30b_a3b_on_a_3090_and_a_3060():
    # Qwen3-30B-A3B Q4_K_M at 32k with 8 GiB of host RAM: all 49 layers on the two cards, split by free memory as
    # llama.cpp does with no -ts: 24,064 and 11,776 MiB (usable less the 512 MiB CUDA context) over their gcd 512,
    # -ts 47,23; split point 47/70 = 0.6714 against k/49: CUDA0 takes layers 0-32, CUDA1 33-47 and the output. The
    # host keeps token_embd (175,030,272 B) and its compute buffer (155,238,528 B): 330,268,800 B. KV on CUDA0:
    # 33 layers x 4 heads x 128 x 2 (K,V) x 2 B x 32,768 = 2,214,592,512 B a sequence: 5 sequences take CUDA0 to
    # 24,229,890,816 B of 25,769,803,776, a 6th past it; at one sequence the context stops at the model's 40,960
    got = mixed_cards(kvmem.get_model("qwen3-30b-a3b"), ["rtx-3090", "rtx-3060"], **QWEN,
                      options={"host_memory_bytes": 8 << 30})
    assert (got.engine, got.gpus, got.fits, got.max_batch, got.max_context) == (
        "llama.cpp", ("rtx-3090", "rtx-3060"), True, 5, 40960)
    assert got.command == "llama-server -m qwen3-30b-a3b-q4_k_m.gguf -c 32768 -np 1 --fit off -ngl 999 -ts 47,23"
    assert (got.host_bytes, got.host_checked, got.host_shortfall) == (330_268_800, True, None)
    assert got.placed(40960, 1).command_best == ("llama-server -m qwen3-30b-a3b-q4_k_m.gguf -c 40960 -np 1 --fit off "
                                                 "-ngl 999 -ts 47,23")


def test_the_cli_prints_the_record(capsys):
    # kvmem fit --gpu A,B --json: fits, max batch, max context and the placement are the record's, key for key
    got = mixed_cards(kvmem.get_model("qwen3-30b-a3b"), ["rtx-3090", "rtx-3060"], **QWEN,
                      options={"host_memory_bytes": 8 << 30})
    code, data = cli_json(capsys, "qwen3-30b-a3b", "--engine", "llama.cpp", "--weight-dtype", "q4_k_m", "--gpu",
                          "rtx-3090,rtx-3060", "--context", "32k", "--host-memory", "8GiB")
    assert code == 0 and (data["fits"], data["max_batch"], data["max_context"]) == (True, 5, 40960)
    assert data["llamacpp_offload"] == json.loads(json.dumps(got.to_dict()))


def test_host_shortfall_is_the_verdict():
    # Qwen3-235B-A22B Q4_K_M at 8k: kvmem's placement keeps 107,621,494,816 B (100.23 GiB) in host RAM, more than
    # 16 GiB: no placement runs, so nothing is held (max batch and context 0)
    model = kvmem.get_model("qwen3-235b-a22b")
    got = mixed_cards(model, ["rtx-3090", "rtx-3060"], **{**QWEN, "context": 8192},
                      options={"host_memory_bytes": 16 << 30})
    assert (got.fits, got.max_batch, got.max_context, got.host_bytes) == (False, 0, 0, 107_621_494_816)
    # short by 107,621,494,816 - 17,179,869,184 = 90,441,625,632 B (84.23 GiB), said with the host RAM that runs it
    assert got.host_shortfall == ("kvmem's placement needs 107,621,494,816 B of host RAM, more than "
                                  "host_memory_bytes 17,179,869,184: it does not run (host RAM short by 84.23 GiB, "
                                  "90,441,625,632 B; it runs with host_memory_bytes=107621494816 or more)")
    assert got.to_dict()["host_shortfall"] == got.host_shortfall


def test_host_ram_given_as_an_option_is_checked(capsys):
    # -o host_memory_bytes=64GiB bounds the host as --host-memory 64GiB does: the yes rests on nothing unchecked
    # (the headline said "not checked: --host-memory checks it" before the record carried host_checked)
    code = main(["fit", "llama-3.1-8b", "--engine", "llama.cpp", "--gpu", "rtx-4090-24gb,rtx-3090-24gb", "--context",
                 "8k", "-o", "host_memory_bytes=64GiB"])
    assert code == 0 and capsys.readouterr().out.split("\n")[1] == "fits: yes — 8,192 tokens, batch 1"


@pytest.mark.parametrize("gpus, message", [
    (["rtx-4090-24gb", "nosuchgpu"], "unknown GPU 'nosuchgpu'"),
    (["rtx-4090-24gb", ""], "gpu must be a catalog name, a custom spec or a kvmem.GPU, got ''"),
])
def test_a_card_it_cannot_read_is_refused(gpus, message):
    with pytest.raises(ValueError, match=message.replace(".", r"\.").replace("(", r"\(")):
        mixed_cards(kvmem.get_model("llama-3.1-8b"), gpus, **{**QWEN, "context": 8192, "weight_dtype": "auto"},
                    options={})

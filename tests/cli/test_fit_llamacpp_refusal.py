"""kvmem fit --engine llama.cpp: a layout the placement refuses is one refusal (exit 2) whatever the cards
(review finding 9), its layer kind shown by value."""

import json

import pytest

from kvmem.cli import main
from kvmem.sources.gguf_converted import converted_metadata
from tests.sources.test_gguf_more import COMMON, small_config, write_header


@pytest.fixture(scope="module")
def granite_header(tmp_path_factory):
    # a small GraniteMoeHybrid's converted header (llama.cpp's granitehybrid): layer 0 a Mamba-2 ('linear') layer,
    # which kvmem's tensor layout from a config does not take (kvmem/engines/llamacpp/tensors.py; Nemotron-H's,
    # Jamba's and the other hybrids' it now does)
    path = tmp_path_factory.mktemp("granite") / "m.gguf"
    write_header(path, *converted_metadata(small_config("granitemoehybrid", **COMMON["granitemoehybrid"])))
    return str(path)


@pytest.mark.parametrize("cards", [["--gpu", "rtx-3090"], ["--gpu", "rtx-3090", "--num-gpus", "2"],
                                   ["--gpu", "rtx-3090", "--num-gpus", "3"], ["--gpu", "rtx-3090,rtx-3060"]])
def test_refused_layout_exits_2_on_any_cards(granite_header, cards, capsys):
    code = main(["fit", granite_header, "--engine", "llama.cpp", "--weight-dtype", "q4_k_m", "--context", "8k",
                 *cards])
    out = capsys.readouterr()
    assert code == 2 and out.out == ""
    assert "m: layer 0 is 'linear'; kvmem lays out llama.cpp tensors from a config only" in out.err
    assert "<Kind" not in out.err and "fits: no" not in out.err


def test_weights_given_as_bytes_place_nothing_and_answer(tmp_path, capsys):
    # with the weight bytes given the verdict places nothing (every layer on the GPUs: verdict.py), so a layout
    # the placement refuses is a note, not the refusal: the small GraniteMoeHybrid's config, 16 GB of weights on an H100
    path = tmp_path / "m" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(small_config("granitemoehybrid", **COMMON["granitemoehybrid"])))
    code = main(["fit", str(path), "--engine", "llama.cpp", "--gpu", "h100-sxm-80gb", "--context", "8k",
                 "--weights", "16GB"])
    out = capsys.readouterr().out
    assert code == 0 and "fits: yes" in out and "llama.cpp offload: not placed: m: layer 0 is 'linear'" in out

"""kvmem fit --engine llama.cpp for Qwen3.5 at a build before llama.cpp PR #22673 (2026-05-16), whose GGUFs carry no
MTP block (arch_tensors.gguf_nextn_layers): the headline, -ngl, -ts and the note agree (the reviewer's repro printed
'49/49 layers' beside -ngl 50 -ts 10,10,10,20 and a note saying the file carries the block)."""

import re

from kvmem.cli import main

REPRO = ("fit", "qwen3.5-122b-a10b", "--engine", "llama.cpp", "--gpu", ",".join(["rtx-4060-ti-16gb"] * 4),
         "--context", "32k", "--weight-dtype", "q4_k_m", "--host-memory", "128GiB")


def _placement(capsys, build):
    code = main([*REPRO, "-o", f"build={build}"])
    out = capsys.readouterr().out
    head = re.search(r"kvmem: (\d+)/(\d+) layers on the GPUs", out)
    flags = re.search(r"--fit off -ngl (\d+) -ts ([\d,]+)", out)
    return code, out, (int(head[1]), int(head[2])), int(flags[1]), [int(c) for c in flags[2].split(",")]


def test_before_the_pr_48_layers_and_the_output(capsys):
    # 48 trunk layers + the output = 49: the headline, -ngl and the -ts counts (whole layers, summing to -ngl)
    code, out, head, ngl, split = _placement(capsys, "2026-04-20")
    assert code == 0 and head == (49, 49) and ngl == 49 and sum(split) == 49
    assert "NextN/MTP" not in out


def test_from_the_pr_the_block_is_the_50th(capsys):
    # from PR #22673 the converter writes the block: 48 + 1 + the output = 50 in the headline, -ngl and -ts, and
    # the note says why (kvmem's -ts 11,10,10,19; --fit counts the trunk alone: -ngl 49)
    code, out, head, ngl, split = _placement(capsys, "2026-06-01")
    assert code == 0 and head == (50, 50) and ngl == 50 and split == [11, 10, 10, 19]
    assert "the file carries 1 NextN/MTP block after the 48 trunk layers" in out

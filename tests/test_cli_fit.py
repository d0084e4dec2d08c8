"""kvmem fit and kvmem compare say one answer, the record's (issue 33 findings 3, 5, 8; item 5)."""

import kvmem
from kvmem.cli import main
from kvmem.sizing.results import decode_words


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_decode_bound_says_which_batch(capsys):
    # DeepSeek-V3 on 8 x H200 at 32k: without --batch the bound is for the max batch, with --batch 1 for one
    # sequence; the issue found 345.2 vs 79.7 tok/s between the app (batch 1) and the CLI (max batch) unsaid
    free = kvmem.fit("deepseek-v3", gpu="h200-sxm-141gb", num_gpus=8, context="32k")
    one = kvmem.fit("deepseek-v3", gpu="h200-sxm-141gb", num_gpus=8, context="32k", batch=1)
    assert free.breakdown_batch == free.max_batch > 1 and one.breakdown_batch == 1
    _, out, _ = run(capsys, "fit", "deepseek-v3", "--gpu", "h200-sxm-141gb", "--num-gpus", "8", "--context", "32k")
    assert f"decode bound: {free.decode_text}" in out
    assert free.decode_text.endswith(f"at {free.max_batch:,} sequences of 32,768 tokens (the max batch: no batch "
                                     "was given)")
    _, out, _ = run(capsys, "fit", "deepseek-v3", "--gpu", "h200-sxm-141gb", "--num-gpus", "8", "--context", "32k",
                    "--batch", "1")
    assert "at 1 sequence of 32,768 tokens (the batch asked)" in out


def test_decode_words_by_hand():
    fit = {"decode_tokens_per_s": 79.71, "decode_tokens_per_s_aggregate": 3188.4, "batch": None,
           "breakdown_batch": 20, "breakdown_context": 32768, "replicas": 2}
    assert decode_words(fit) == ("79.7 tokens/s per sequence, 3,188 in all, at 20 sequences per replica of "
                                 "32,768 tokens (the max batch: no batch was given)")
    assert decode_words({**fit, "decode_tokens_per_s": None}) is None

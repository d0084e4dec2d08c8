"""llama.cpp: kvmem fit's verdict, max batch and max context come from one computation, kvmem's placement
(kvmem.engines.llamacpp.verdict, review finding 3), also where every layer fits the GPUs: the longest context
is then the same whichever context is asked (budget.py's estimate, 512 outputs' logits and the projector on
every pp stage, answered before at the shorter asks)."""

import pytest

import kvmem
from kvmem.cli import main

MMPROJ = "858MB"


def _fit(model, context, **kw):
    return kvmem.fit(model, engine="llama.cpp", weight_dtype="q4_k_m", batch=1, context=context, **kw)


@pytest.mark.parametrize(("model", "kw", "longest"), [
    # one 3090, gemma-3-27b + an 858 MB projector, all 63 layers on the GPU: 82,944 = 324 x 256 at every ask
    # (budget.py's estimate answered 79,360 at 32k: 522.62 MiB of graph compute against the placement's 234.02)
    ("gemma-3-27b", dict(gpu="rtx-3090-24gb", mmproj=MMPROJ), 82_944),
    # two 3060s (pp 2, -ts 1,1): the projector's 858 MB and 121.25 MiB on CUDA0 only, as mtmd loads it:
    # 64,000 = 250 x 256 (budget.py charged them to both GPUs: 43,264 at 8k)
    ("gemma-3-27b", dict(gpu="rtx-3060-12gb", num_gpus=2, mmproj=MMPROJ), 64_000),
    # a MoE preset on one 3060 (gpt-oss-20b, -ngl 25: every layer and expert on the GPU): 39,936 = 156 x 256
    ("gpt-oss-20b", dict(gpu="rtx-3060-12gb"), 39_936)])
def test_max_context_is_the_same_at_8k_32k_and_at_itself(model, kw, longest):
    answers = [_fit(model, asked, **kw) for asked in ("8k", "32k", longest)]
    assert [a.max_context for a in answers] == [longest] * 3
    assert longest % 256 == 0
    # one verdict: each fits with every layer on the GPUs, no host-RAM condition, the decode bound given
    for a in answers:
        assert a.fits and a.placement["whole"] and a.placement["condition"] == ""
        assert a.decode_tokens_per_s is not None
    # on one GPU (-ngl the only flag) 256 cells more do not fit whole: the answer is a boundary. (On two GPUs it is
    # the boundary of the flags placed, -ts 1,1: asked at 64,256, kvmem places -ngl 63 -ts 31,32, which holds it.)
    if kw.get("num_gpus", 1) == 1:
        over = _fit(model, longest + 256, **kw)
        assert not over.fits or not over.placement["whole"]


def test_max_batch_at_the_answer_is_one_sequence():
    # at the longest context a second sequence's KV cannot fit (it would need the whole of the first's again)
    a = _fit("gemma-3-27b", 82_944, gpu="rtx-3090-24gb", mmproj=MMPROJ)
    assert a.max_batch == 1 and a.max_context == 82_944


def test_the_cli_says_the_same_verdict_at_each_ask(capsys):
    lines = []
    for asked in ("8k", "32k", "82944"):
        main(["fit", "gemma-3-27b", "--gpu", "rtx-3090-24gb", "--context", asked, "--engine", "llama.cpp",
              "--weight-dtype", "q4_k_m", "--batch", "1", "-o", f"mmproj={MMPROJ}"])
        out = capsys.readouterr().out
        lines.append([line for line in out.splitlines() if line.startswith(("fits:", "max context"))])
    for found in lines:
        assert found[0].startswith("fits: yes —") and "host" not in found[0]
        assert found[1] == "max context at batch 1: 82,944"

"""The Markdown report says one shortfall and one decode bound, from the fit's record (issue 33 findings 3, 5)."""

import kvmem


def test_a_report_that_does_not_fit_says_its_shortfall_once():
    # Llama-3.3-70B bf16 on 2 x H100 at 32k x 4: the plan's refusal repeated the fit's "short by" (for batch 1,
    # 1.35 GiB) beside the breakdown's (for batch 4, 16.35 GiB) and its "what would fit" beside the section
    report = kvmem.report("llama-3.3-70b", gpu="h100-sxm-80gb", num_gpus=2, context="32k", batch=4)
    text = report.to_markdown()
    assert report.fit.shortfall_bytes == 17_553_273_193        # 4 x 5.00 GiB of KV - 3.65 GiB of budget
    assert text.count("short by") + text.count("short of") == 1 and "| short of vllm's KV budget | 17,553,273,193 B (16.35 GiB) |" in text
    assert ("No command: the workload does not fit (its shortfall is under Memory per device, the changes that "
            "fit under What would fit).") in text
    assert "no command: no command" not in text.lower()
    assert text.count("4 GPUs per replica (tp=4)") == 1


def test_the_decode_bound_says_its_batch():
    report = kvmem.report("llama-3.1-8b", gpu="h100-sxm-80gb", context="8k")
    assert f"| decode bound | {report.fit.decode_text} |" in report.to_markdown()
    assert report.fit.decode_text.endswith("(the max batch: no batch was given)")

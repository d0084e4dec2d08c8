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


def test_compare_rows_are_fit_and_plan_of_each_engine(capsys):
    # "which engine?" (issue 33 item 5): Llama-3.3-70B fp8 on 2 x H100 at 32k, no batch: each row is that
    # engine's kvmem.fit (max batch, max context) and kvmem.plan(target="max_batch") (command, concurrency)
    import json

    code, out, _ = run(capsys, "compare", "llama-3.3-70b", "--gpu", "h100-sxm-80gb", "--num-gpus", "2",
                       "--context", "32k", "--kv-dtype", "fp8", "--weight-dtype", "fp8",
                       "--engine", "vllm,sglang,hf-dynamic", "--json")
    rows = {r["engine"]: r for r in json.loads(out)["rows"]}
    assert code == 0 and list(rows) == ["vllm", "sglang", "hf-dynamic"]
    for engine in ("vllm", "sglang"):
        fit = kvmem.fit("llama-3.3-70b", gpu="h100-sxm-80gb", num_gpus=2, context="32k", kv_dtype="fp8",
                        weight_dtype="fp8", engine=engine)
        plan = kvmem.plan("llama-3.3-70b", gpu="h100-sxm-80gb", num_gpus=2, context="32k", kv_dtype="fp8",
                          weight_dtype="fp8", engine=engine, target="max_batch")
        assert (rows[engine]["fits"], rows[engine]["max_batch"], rows[engine]["max_context"]) == (
            True, fit.max_batch, fit.max_context)
        assert rows[engine]["command"] == plan.command
        assert rows[engine]["max_concurrency"] == plan.fit.engine_numbers.max_concurrency
    assert rows["vllm"]["max_batch"] == 14 and "--max-num-seqs 14" in rows["vllm"]["command"]
    # transformers keeps KV in the compute dtype: fp8 KV is refused, by the engine's own words
    assert rows["hf-dynamic"]["fits"] is None and rows["hf-dynamic"]["refused"].startswith("kv_dtype for hf-dynamic")
    code, text, _ = run(capsys, "fit", "llama-3.3-70b", "--gpu", "h100-sxm-80gb", "--num-gpus", "2", "--context",
                        "32k", "--kv-dtype", "fp8", "--weight-dtype", "fp8", "--engine", "vllm,sglang")
    assert code == 0 and text.splitlines()[2].split() == ["engine", "fits", "max", "batch", "max", "context",
                                                          "concurrency", "command", "/", "why", "none"]
    assert text.splitlines()[3].startswith("vllm") and "14.21x" in text.splitlines()[3]


def test_one_sequence_is_singular_and_levers_are_flags(capsys):
    # Qwen3-32B fp8 on 2 x RTX 4090 at 32k: max batch 1 ("up to 1 sequences" before); with bf16 KV and
    # -o max_num_seqs=256 it does not fit, and what would fit is also said as this command's flags
    _, out, _ = run(capsys, "fit", "qwen3-32b", "--gpu", "rtx-4090-24gb", "--num-gpus", "2", "--context", "32k",
                    "--weight-dtype", "fp8", "--kv-dtype", "bf16")
    assert "fits: yes — 32,768 tokens, up to 1 sequence (no --batch given)" in out
    code, out, _ = run(capsys, "fit", "qwen3-32b", "--gpu", "rtx-4090-24gb", "--num-gpus", "2", "--context",
                       "32k", "--weight-dtype", "fp8", "--kv-dtype", "bf16", "-o", "max_num_seqs=256")
    assert code == 1 and "fits: no — 32,768 tokens, not one sequence (no --batch given)" in out
    assert ("would fit, as flags: --gpu-memory-utilization 0.95; no -o max_num_seqs; --num-gpus 4 --tp 4; "
            "--kv-dtype fp8; --context 31392") in out   # 31,408: vLLM refuses to start (its null block left out)


def test_cli_errors_name_commands_not_python_calls(capsys):
    code, _, err = run(capsys, "estimate", "xyzmodel", "--tokens", "1")
    assert code == 2 and err.strip() == "kvmem estimate: error: unknown model 'xyzmodel'; see `kvmem models`"
    code, _, err = run(capsys, "fit", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--context", "8k", "--engine",
                       "sglang", "--gpu-memory-utilization", "0.8")
    assert code == 2 and err.strip() == ("kvmem fit: error: gpu_memory_utilization is vLLM's setting; engine "
                                         "'sglang' takes -o mem_fraction_static=...")


def test_no_zero_reserve_for_a_workload_that_does_not_fit(capsys):
    # Llama-3.3-70B bf16 (131.45 GiB) on one RTX 4090: the weights overflow the card, so nothing is left outside
    # vLLM's budget; "reserve outside vLLM's budget (1 − gpu_memory_utilization) 0 B" read as if vLLM kept none
    _, out, _ = run(capsys, "fit", "llama-3.3-70b", "--gpu", "rtx-4090-24gb", "--context", "8k")
    assert "reserve outside vLLM's budget" not in out and "short of vllm's KV budget 113.53 GiB" in out
    text = kvmem.report("llama-3.3-70b", gpu="rtx-4090-24gb", context="8k").to_markdown()
    assert "reserve outside vLLM's budget" not in text
    _, out, _ = run(capsys, "fit", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--context", "8k")
    assert "reserve outside vLLM's budget (1 − gpu_memory_utilization) 7.92 GiB" in out     # 10% of 79.22 GiB


def test_a_batch_that_does_not_fit_is_said_in_the_fits_words(capsys):
    # the README's 70B fp8 on 2 x H100 at 32k x 16: 14 fit; the CLI prints Fit.why_not, as the app does
    result = kvmem.fit("llama-3.3-70b", gpu="h100-sxm-80gb", num_gpus=2, context="32k", batch=16, kv_dtype="fp8",
                       weight_dtype="fp8")
    code, out, _ = run(capsys, "fit", "llama-3.3-70b", "--gpu", "h100-sxm-80gb", "--num-gpus", "2", "--context",
                       "32k", "--batch", "16", "--kv-dtype", "fp8", "--weight-dtype", "fp8")
    assert code == 1 and result.why_not in out.splitlines() and out.count("short by") == 1

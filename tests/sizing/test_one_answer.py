"""One workload, one answer (issue 33, done-when): for seeded random presets x engines x GPUs x contexts,
kvmem.fit, kvmem.plan, kvmem.sweep and kvmem.report give the same verdict, max batch and concurrency."""

import random

import pytest

import kvmem
from kvmem.launch import PlanRefused

ENGINES = ("vllm", "sglang", "llama.cpp", "trtllm")
GPUS = ("h100-sxm-80gb", "a100-sxm-80gb", "l40s-48gb", "rtx-4090-24gb", "h200-sxm-141gb")
CONTEXTS = (2048, 8192, 32768, 131072)


def _cases(n=30, seed=33):
    rng = random.Random(seed)
    models = [m for m in kvmem.list_models() if kvmem.get_model(m).params_total]
    return [(rng.choice(models), rng.choice(ENGINES), rng.choice(GPUS), rng.choice(CONTEXTS), rng.choice((1, 2)))
            for _ in range(n)]


@pytest.mark.parametrize("model, engine, gpu, context, num_gpus", _cases())
def test_fit_plan_sweep_and_report_agree(model, engine, gpu, context, num_gpus):
    args = dict(gpu=gpu, num_gpus=num_gpus, context=context, engine=engine)
    try:
        fit = kvmem.fit(model, **args)
    except ValueError as exc:        # a set-up the engine refuses (tp and heads, a family): sweep refuses it too
        cell, = kvmem.sweep([model], [gpu], contexts=[context], engines=[engine], num_gpus=num_gpus)
        assert cell.refused and cell.max_batch is None, exc
        return
    cell, = kvmem.sweep([model], [gpu], contexts=[context], engines=[engine], num_gpus=num_gpus)
    if cell.refused:                 # the engine would not start (past its positions): fit says so as its refusal
        assert fit.engine_refuses
        return
    numbers = fit.engine_numbers
    concurrency = numbers.max_concurrency if numbers else None
    assert (cell.fits, cell.max_batch, cell.max_context, cell.max_concurrency) == (
        fit.fits, fit.max_batch, fit.max_context, concurrency)
    report = kvmem.report(model, **args)
    assert (report.fit.fits, report.fit.max_batch, report.fit.max_context) == (fit.fits, fit.max_batch,
                                                                               fit.max_context)
    if fit.max_batch == 0:
        with pytest.raises(PlanRefused):
            kvmem.plan(model, target="max_batch", **args)
        return
    try:
        plan = kvmem.plan(model, target="max_batch", **args)
    except PlanRefused as exc:        # a setting with no flag, or a layout one server cannot run: said why
        assert "does not fit" not in str(exc)
        return
    # no batch given: fit answers for its max batch, the settings the command pins (--max-num-seqs etc.)
    assert plan.batch == fit.max_batch
    planned = plan.fit.engine_numbers
    # SGLang's hybrid (Mamba-state) models: the requests admitted at once also cap the concurrency
    # (engines/sglang/entry.py: min(pool / context, max_running_requests)), and the plan pins
    # --max-running-requests to its batch: qwen3.5-27b on 2 x A100 at 32k, fit 18.51 (admits 230 // ratio), plan 18.0
    capped = planned is not None and any(line.startswith("Mamba Cache") for line in planned.lines)
    expected = min(concurrency, float(plan.batch)) if capped and concurrency is not None else concurrency
    assert (planned.max_concurrency if planned else None) == expected

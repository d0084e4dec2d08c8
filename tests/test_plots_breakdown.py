"""The per-device bar of a workload that does not fit draws each byte once (issue 33 finding 4's bar)."""

import kvmem
from kvmem import plots, tables
from kvmem.sizing import part_names

GIB = 2**30


def _bars(result):
    fig = plots.breakdown_bar(tables.breakdown_frame(result), total_bytes=result.breakdown["total"],
                              names=part_names(result.engine))
    return {trace.name: trace.x[0] for trace in fig.data}


def test_weights_that_overflow_are_not_drawn_again_as_shortfall():
    # Llama-3.3-70B bf16 on one RTX 4090 at 8k: weights 131.45 GiB; the shortfall (113.53 GiB: the KV's 2.50 GiB
    # plus the weights' overflow) was stacked on the weights; the bar now adds only the 2.50 GiB of KV
    result = kvmem.fit("llama-3.3-70b", gpu="rtx-4090-24gb", context=8192)
    assert round(result.shortfall_bytes / GIB, 2) == 113.53 and round(result.breakdown["kv"] / GIB, 2) == 2.5
    bars = _bars(result)
    assert round(bars["short of vllm's KV budget"], 2) == 2.5
    assert round(sum(bars.values()), 2) == round((result.breakdown["weights"] + result.breakdown["kv"]
                                                  + result.breakdown["activations"] + result.breakdown["overhead"])
                                                 / GIB, 2)


def test_a_pool_short_of_the_kv_draws_the_shortfall_as_it_is():
    # Llama-3.3-70B bf16 on 2 x H100 at 32k: 5.00 GiB of KV, a 3.65 GiB pool: 1.35 GiB short, drawn as such
    result = kvmem.fit("llama-3.3-70b", gpu="h100-sxm-80gb", num_gpus=2, context="32k", batch=1)
    assert round(_bars(result)["short of vllm's KV budget"], 2) == round(result.shortfall_bytes / GIB, 2) == 1.35

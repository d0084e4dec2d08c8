"""TensorRT-LLM's target/draft split of one KV budget (kvmem.engines.trtllm.draft), by hand from
_compute_draft_budget_shares as read at d8ae02ca."""

import pytest

import kvmem
from kvmem.engines.trtllm.draft import CacheCost, mtp_costs, split_budget

GIB = 1 << 30


def test_the_split_is_proportional_to_the_slopes():
    # 4 GiB, 4 target layers to 1 draft layer: draft int(4,294,967,296 x 1 / 5) = 858,993,459; target the rest
    assert split_budget(4 * GIB, CacheCost(4), CacheCost(1)) == (3_435_973_837, 858_993_459)


def test_intercepts_are_charged_first_on_the_gpu_and_dropped_for_the_host():
    # 10 GiB, Mamba state 1 GiB (target) + 0.5 GiB (draft); slopes 3:1 -> draft 0.5 GiB + int(8.5 GiB / 4)
    target, draft = CacheCost(3, GIB), CacheCost(1, GIB // 2)
    assert split_budget(10 * GIB, target, draft) == (10 * GIB - (GIB // 2 + 2_281_701_376), GIB // 2 + 2_281_701_376)
    # host_cache_size: slopes alone, 10 GiB / 4 = 2,684,354,560 to the draft
    assert split_budget(10 * GIB, target, draft, budget="host_cache_size")[1] == 2_684_354_560
    with pytest.raises(ValueError, match=r"KV cache GPU budget \(1.00 GiB\) is smaller than the combined fixed cost"):
        split_budget(GIB, CacheCost(1, GIB), CacheCost(1))


def test_deepseek_v3_mtp_layer():
    # 61 MLA layers of 576 x 2 B = 70,272 B a token; one nextn layer 1,152 B; 40 GiB:
    # draft int(42,949,672,960 x 1,152 / 71,424) = 692,736,660 B
    target, draft = mtp_costs(kvmem.get_model("deepseek-v3"))
    assert (target.slope, draft.slope) == (70_272, 1_152)
    assert split_budget(40 * GIB, target, draft) == (42_256_936_300, 692_736_660)
    with pytest.raises(ValueError, match="no MTP layers"):
        mtp_costs(kvmem.get_model("llama-3.1-8b"))

"""vLLM's multimodal encoder cache budget (kvmem.engines.vllm.encoder); vLLM's own compute_mm_encoder_budget
judges the tokens where .venv-oracles has vLLM."""

import importlib.util
import types

import pytest

from kvmem.engines.vllm.encoder import encoder_cache


def test_the_budget_is_the_batched_tokens_or_the_largest_item():
    # Qwen2.5-VL-7B-like: hidden 3,584, bf16; an image of 16,384 tokens above 8,192 batched tokens:
    # 16,384 x 3,584 x 2 B = 117,440,512 B
    cache = encoder_cache(max_num_batched_tokens=8192, max_tokens_per_item=16384, hidden_size=3584)
    assert (cache.cache_tokens, cache.compute_budget_tokens, cache.cache_bytes) == (16384, 16384, 117_440_512)
    small = encoder_cache(max_num_batched_tokens=8192, max_tokens_per_item=1024, hidden_size=3584)
    assert small.cache_tokens == 8192
    with pytest.raises(ValueError, match=r"max_tokens_per_mm_item \(16384\) is larger than max_num_batched_tokens"):
        encoder_cache(max_num_batched_tokens=8192, max_tokens_per_item=16384, hidden_size=3584,
                      disable_chunked_mm_input=True)


@pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vLLM is not installed here: run `make oracles`")
@pytest.mark.parametrize("batched,item,chunked_off", [(8192, 16384, False), (2048, 1024, False), (8192, 576, True),
                                                      (512, 513, False)])
def test_tokens_equal_vllms_compute_mm_encoder_budget(batched, item, chunked_off):
    from vllm.v1.core.encoder_cache_manager import compute_mm_encoder_budget
    scheduler = types.SimpleNamespace(max_num_batched_tokens=batched, max_num_encoder_input_tokens=batched,
                                      encoder_cache_size=batched, disable_chunked_mm_input=chunked_off)
    compute, space = compute_mm_encoder_budget(scheduler, {"image": item, "video": item // 2})
    ours = encoder_cache(max_num_batched_tokens=batched, max_tokens_per_item=item, hidden_size=1,
                         disable_chunked_mm_input=chunked_off)
    assert (ours.compute_budget_tokens, ours.cache_tokens) == (compute, space)

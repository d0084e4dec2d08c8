"""vLLM's CUDA-graph capture sizes (kvmem.engines.vllm.cudagraph) by hand; vLLM's own config code judges them
in tests/oracles/test_vllm_cudagraph_oracle.py."""

import pytest

from kvmem.engines.vllm.cudagraph import capture_log_line, capture_sizes


def test_the_default_grid():
    # max_num_seqs 1024 on an H100: ceiling min(1024 x 2, 512) = 512: 1, 2, 4, 8..248 (31), 256..512 by 16 (17)
    sizes = capture_sizes(max_num_seqs=1024, max_num_batched_tokens=8192)
    assert sizes[:5] == [1, 2, 4, 8, 16] and sizes[-1] == 512 and len(sizes) == 3 + 31 + 17
    assert capture_log_line(sizes) == "51 capture sizes, largest=512"
    assert capture_sizes(max_num_seqs=1024, max_num_batched_tokens=8192, blackwell=True)[-1] == 1024


def test_few_sequences_and_few_tokens_cap_it():
    # max_num_seqs 3: ceiling 6: 1, 2, 4 and the decode size 3; 300 batched tokens cap 512 at 300 (added)
    assert capture_sizes(max_num_seqs=3, max_num_batched_tokens=8192) == [1, 2, 3, 4]
    assert capture_sizes(max_num_seqs=256, max_num_batched_tokens=300)[-3:] == [272, 288, 300]


def test_speculative_decoding_adds_decode_multiples():
    # 3 draft tokens: q 4, ceiling min(8 x 4 x 2, 512) = 64; decode sizes n x 4 for n in 1, 2, 4, 8
    assert capture_sizes(max_num_seqs=8, max_num_batched_tokens=8192, num_speculative_tokens=3) == \
        [1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64]


def test_refusals():
    with pytest.raises(ValueError, match="max_num_seqs must be a positive integer, got 0"):
        capture_sizes(max_num_seqs=0, max_num_batched_tokens=8192)

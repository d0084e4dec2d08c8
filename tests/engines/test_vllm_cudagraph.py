"""vLLM's CUDA-graph capture sizes (kvmem.engines.vllm.cudagraph) by hand; vLLM's own config code judges them
in tests/oracles/test_vllm_cudagraph_oracle.py."""

import pytest

from kvmem.engines.vllm.cudagraph import (
    CUDAGRAPH_BYTES,
    CUDAGRAPH_LABEL,
    capture_log_line,
    capture_sizes,
    graph_counts,
    vllm_graph_estimate,
)
from kvmem.logcheck import check_log


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


# The graph lines as published (docs/research/vllm_cudagraph_logs.md), prefixes kept
QWEN3_8B = """\
(EngineCore pid=4108) INFO 05-28 08:00:24 [gpu_model_runner.py:6063] Profiling CUDA graph memory: PIECEWISE=51 (largest=512), FULL=35 (largest=256)
(EngineCore pid=4108) INFO 05-28 08:00:25 [gpu_model_runner.py:6142] Estimated CUDA graph memory: 0.52 GiB total
(EngineCore pid=4108) INFO 05-28 08:00:26 [gpu_worker.py:462] Available KV cache memory: 6.37 GiB
(EngineCore pid=4108) INFO 05-28 08:00:26 [gpu_worker.py:477] CUDA graph memory profiling is enabled (default since v0.21.0). The current --gpu-memory-utilization=0.9764 is equivalent to --gpu-memory-utilization=0.9543 without CUDA graph memory profiling. To maintain the same effective KV cache size as before, increase --gpu-memory-utilization to 0.9984. To disable, set VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0.
(EngineCore pid=4108) INFO 05-28 08:00:26 [kv_cache_utils.py:1710] GPU KV cache size: 46,368 tokens
(EngineCore pid=4108) INFO 05-28 08:00:26 [kv_cache_utils.py:1711] Maximum concurrency for 16,384 tokens per request: 2.83x
"""  # noqa: E501  (LMCache/LMCache#3430)


def test_graphs_per_mode():
    # FULL_AND_PIECEWISE at 256 sequences, 2,048 tokens: 51 piecewise sizes up to 512; FULL only the decode
    # batches 1..256: 1, 2, 4, 8..248 (31), 256 = 35
    sizes = capture_sizes(max_num_seqs=256, max_num_batched_tokens=2048)
    assert graph_counts(sizes, max_num_seqs=256) == {"PIECEWISE": (51, 512), "FULL": (35, 256)}
    assert graph_counts(sizes, max_num_seqs=256, mode="PIECEWISE") == {"PIECEWISE": (51, 512)}
    # 3 draft tokens, 8 sequences: q = 4, FULL holds the sizes 4..32 of [1, 2, 4, 8, ..., 64]: 4, 8, 16, 24, 32
    spec = capture_sizes(max_num_seqs=8, max_num_batched_tokens=8192, num_speculative_tokens=3)
    assert graph_counts(spec, max_num_seqs=8, num_speculative_tokens=3, mode="FULL_DECODE_ONLY") == {"FULL": (5, 32)}
    with pytest.raises(ValueError, match="cudagraph mode must be one of"):
        graph_counts(sizes, max_num_seqs=256, mode="FULL")


def test_vllms_estimate_from_its_samples():
    # 300 MiB for the first PIECEWISE graph, 4 MiB the second; FULL 200 / 0.5 MiB (counted at least 1 MiB):
    # max(300, 200) + 50 x 4 + 34 x 1 = 534 MiB
    samples = {"PIECEWISE": (51, 300 << 20, 4 << 20), "FULL": (35, 200 << 20, 1 << 19)}
    assert vllm_graph_estimate(samples) == 534 << 20
    assert vllm_graph_estimate({}) == 0


def test_check_log_reads_the_graph_lines():
    # 0.52 GiB estimated against kvmem's flat 512 MiB (0.50 GiB): named, with the option that reproduces it
    r = check_log(QWEN3_8B, "qwen3-8b", max_num_seqs=256, max_num_batched_tokens=2048)
    checks = {c.quantity: c for c in r.checks}
    graphs = checks["CUDA graphs captured"]
    assert graphs.matches and graphs.kvmem == "PIECEWISE=51 (largest=512), FULL=35 (largest=256)"
    estimate = checks["CUDA graph memory (vLLM's estimate, subtracted)"]
    assert not estimate.matches and estimate.logged == "0.52 GiB"
    assert "give -o cudagraph_bytes=558345748 (0.52 GiB)" in estimate.cause      # round(0.52 x 2**30)
    assert r.settings["cudagraph_estimate_gib"] == 0.52
    assert r.settings["cudagraph_utilization_delta"] == 0.0221                    # 0.9764 - 0.9543
    again = check_log(QWEN3_8B, "qwen3-8b", cudagraph_bytes=558_345_748)
    assert {c.quantity: c.matches for c in again.checks}["CUDA graph memory (vLLM's estimate, subtracted)"]
    # other settings give other graphs: 1,024 sequences and 8,192 tokens are 51 piecewise and 51 full
    other = check_log(QWEN3_8B, "qwen3-8b", max_num_seqs=1024, max_num_batched_tokens=8192)
    assert not {c.quantity: c for c in other.checks}["CUDA graphs captured"].matches


def test_the_real_capture_is_set_beside_the_estimate():
    took = "INFO [gpu_model_runner.py:6516] Graph capturing finished in 18 secs, took 0.96 GiB\n"
    r = check_log(QWEN3_8B + took, "qwen3-8b")
    assert r.settings["cudagraph_captured_gib"] == 0.96
    assert any("0.44 GiB above the 0.52 GiB vLLM subtracted" in note for note in r.notes)
    # the model runner V2 prints the estimate in the pool line only; a negative actual is read with its sign
    pool = ("INFO [gpu_worker.py:1003] CUDA graph pool memory: -0.19 GiB (actual), 2.43 GiB (estimated), "
            "difference: 2.62 GiB (1378.9%).\n")
    r = check_log(pool, "qwen3-8b", cudagraph_bytes=2_609_192_632)        # round(2.43 x 2**30)
    assert r.settings["cudagraph_captured_gib"] == -0.19
    assert [c.matches for c in r.checks if c.quantity.startswith("CUDA graph memory")] == [True]
    assert any("2.62 GiB below the 2.43 GiB" in note for note in r.notes)


def test_profiling_disabled_subtracts_nothing():
    off = ("WARNING [gpu_worker.py:803] CUDA graph memory profiling is disabled "
           "(VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0). Without it, CUDA graph memory is not accounted for\n"
           "INFO [gpu_model_runner.py:6410] Estimated CUDA graph memory: 0.58 GiB total\n")
    (line,) = [c for c in check_log(off, "qwen3-8b").checks if c.quantity == "CUDA graph memory subtracted"]
    assert not line.matches and "give -o cudagraph_bytes=0" in line.cause
    assert [c.matches for c in check_log(off, "qwen3-8b", cudagraph_bytes=0).checks] == [True]


def test_the_fit_says_how_its_graph_term_was_come_by():
    import kvmem
    flat = kvmem.fit("llama-3.1-8b", gpu="h100-sxm-80gb", context="32k", engine="vllm")
    assert CUDAGRAPH_LABEL in flat.notes and CUDAGRAPH_BYTES == 536_870_912
    given = kvmem.fit("llama-3.1-8b", gpu="h100-sxm-80gb", context="32k", engine="vllm", cudagraph_bytes=558_345_748)
    assert "CUDA graphs: 532.48 MiB as given (cudagraph_bytes" in " ".join(given.notes)
    assert given.kv_memory_bytes == flat.kv_memory_bytes - (558_345_748 - 536_870_912)


def test_releases_before_0_21_keep_the_graphs_out_of_the_kv_budget():
    # "CUDA graph memory profiling is enabled (default since v0.21.0)": before it the graphs were captured in the
    # memory gpu_memory_utilization leaves, so 0.20's budget is 512 MiB larger than 0.21's
    import kvmem
    old = kvmem.fit("llama-3.1-8b", gpu="h100-sxm-80gb", context="32k", engine="vllm", version="0.20.0")
    new = kvmem.fit("llama-3.1-8b", gpu="h100-sxm-80gb", context="32k", engine="vllm", version="0.21.0")
    assert old.kv_memory_bytes - new.kv_memory_bytes == CUDAGRAPH_BYTES
    assert CUDAGRAPH_LABEL in new.notes and CUDAGRAPH_LABEL not in old.notes
    # the opt-in era's log says the estimate was not used (vllm-project/vllm PR #30515, a GB10 run)
    opt_in = ("INFO [gpu_model_runner.py:5651] Estimated CUDA graph memory: 0.26 GiB total\n"
              "INFO [gpu_worker.py:490] In v0.19, CUDA graph memory profiling will be enabled by default "
              "(VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1), which more accurately accounts for CUDA graph memory "
              "during KV cache allocation. To try it now, set VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1 and "
              "increase --gpu-memory-utilization from 0.7000 to 0.7021 to maintain the same effective KV cache "
              "size.\n")
    (line,) = check_log(opt_in, "qwen3-8b", cudagraph_bytes=0).checks
    assert line.quantity == "CUDA graph memory subtracted" and line.matches and line.line == 2

"""kvmem's vLLM CUDA-graph capture sizes against vLLM 0.33.0's own VllmConfig._set_cudagraph_sizes."""

from tests.oracles.conftest import require

require("vllm")

from kvmem.oracles import vllm_cudagraph as oracle  # noqa: E402


def test_capture_sizes_equal_vllms():
    bad = [f"{c.case}: kvmem {c.kvmem}, vLLM {c.engine}" for s in oracle.cases() for c in oracle.run_case(s)
           if not c.matches]
    assert not bad, "\n".join(bad[:5])


def test_blackwell_raises_the_ceiling_in_vllms_own_code():
    assert oracle.vllm_sizes(max_num_seqs=1024, max_num_batched_tokens=8192, blackwell=True)[-1] == 1024
    assert oracle.vllm_sizes(max_num_seqs=1024, max_num_batched_tokens=8192)[-1] == 512


def test_graphs_per_mode_equal_vllms_dispatcher():
    bad = [f"{c.case}: kvmem {c.kvmem}, vLLM {c.engine}" for s in oracle.graph_cases() for c in oracle.run_graph_case(s)
           if not c.matches]
    assert not bad, "\n".join(bad[:5])


def test_the_published_qwen3_8b_profile_line_is_vllms_own_count():
    # LMCache/LMCache#3430 (Qwen3-8B, a 24 GB GPU: vLLM's small-device defaults 256 sequences, 2,048 tokens)
    # logged "Profiling CUDA graph memory: PIECEWISE=51 (largest=512), FULL=35 (largest=256)"
    assert oracle.vllm_graph_counts(max_num_seqs=256, max_num_batched_tokens=2048) == \
        {"PIECEWISE": (51, 512), "FULL": (35, 256)}

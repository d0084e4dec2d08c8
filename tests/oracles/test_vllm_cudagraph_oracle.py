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

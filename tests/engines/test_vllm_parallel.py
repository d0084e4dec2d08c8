"""vLLM's data-parallel replicas and expert parallelism in the weights per GPU (kvmem.engines.vllm.parallel);
vLLM's own MoE placement judges them in tests/oracles/test_vllm_dp_oracle.py."""

from fractions import Fraction

import pytest

import kvmem
from kvmem.engines.vllm.parallel import weights_per_device
from kvmem.sizing.setup import model_weights


def test_replicas_share_the_experts():
    model = kvmem.get_model("qwen3-30b-a3b")
    w = model_weights(model, "auto")
    base = w.per_device(tp=1, replicated=True)
    # 2 replicas of tp 1: vLLM's MoE tp is 1 x 2, so each GPU holds half the routed experts' bytes
    got, notes = weights_per_device(w, model, tp=1, pp=1, dp=2, options={})
    assert got == base - w.expert_bytes // 2 and "tp x replicas = 2" in notes[0]
    # with --enable-expert-parallel: 128 experts over 3 ranks, the first holds 43 whole experts
    got3, _ = weights_per_device(w, model, tp=1, pp=1, dp=3, options={"enable_expert_parallel": True})
    assert got3 == base + int(w.expert_bytes * (Fraction(43, 128) - 1))
    # one replica, no EP: Weights.per_device itself
    assert weights_per_device(w, model, tp=2, pp=1, dp=1, options={}) == (w.per_device(tp=2, replicated=True), ())


def test_fit_with_replicas():
    f = kvmem.fit("qwen3-30b-a3b", engine="vllm", gpu="h100-sxm-80gb", num_gpus=2, tp=1, context="32k")
    w = model_weights(kvmem.get_model("qwen3-30b-a3b"), "auto")
    assert f.replicas == 2
    assert f.breakdown.weights_bytes < w.total_bytes - w.expert_bytes // 2 + (1 << 30)


def test_refusals():
    model = kvmem.get_model("qwen3-30b-a3b")
    w = model_weights(model, "auto")
    with pytest.raises(ValueError, match="num_redundant_experts needs enable_expert_parallel"):
        weights_per_device(w, model, tp=1, pp=1, dp=2, options={"num_redundant_experts": 8})
    with pytest.raises(ValueError, match="llama-3.1-8b has none"):
        kvmem.fit("llama-3.1-8b", engine="vllm", gpu="h100-sxm-80gb", num_gpus=2, tp=1, context="8k",
                  enable_expert_parallel=True)


def test_decode_bound_with_replicas_sharing_the_experts():
    # 2 replicas of tp 1: a step reads the dense layers and head whole, and the experts both replicas' 13
    # sequences touch (26 tokens) over 2 GPUs, and its own 13 sequences' KV
    model = kvmem.get_model("qwen3-30b-a3b")
    w = model_weights(model, "auto")
    f = kvmem.fit("qwen3-30b-a3b", engine="vllm", gpu="h100-sxm-80gb", num_gpus=2, tp=1, context="32k")
    assert (f.replicas, f.max_batch, f.breakdown_batch) == (2, 26, 13)
    fixed = w.dense_bytes + (w.lm_head_bytes or w.embedding_bytes)
    assert w.active_bytes(0) == fixed
    kv = kvmem.estimate(model, engine="vllm", tokens=32768, batch=13).total_bytes_all_devices
    step = fixed + (w.active_bytes(26) - fixed) // 2 + kv
    assert f.decode_tokens_per_s == pytest.approx(3.35e12 / step)

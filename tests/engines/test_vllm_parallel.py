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


def test_decode_context_parallel_capacity():
    # deepseek-v3 at tp 8, 40 GiB a GPU: pages of 64 tokens x 576 x 2 B x 61 layers = 4,497,408 B -> 9,549 blocks,
    # unchanged by DCP; a 32,768-token request needs cdiv(cdiv(32,768, 8), 64) = 64 of them, not 512:
    # concurrency 9,549 / 64 = 149.203125x, int(149.203125 x 32,768) = 4,889,088 tokens (dcp 1: 18.65x, 611,136)
    base = kvmem.capacity("deepseek-v3", engine="vllm", kv_memory=40 << 30, tp=8, max_model_len=32768)
    cap = kvmem.capacity("deepseek-v3", engine="vllm", kv_memory=40 << 30, tp=8, max_model_len=32768,
                         decode_context_parallel_size=8)
    assert (base.blocks, base.tokens, f"{base.max_concurrency:.2f}") == (9549, 611136, "18.65")
    assert (cap.blocks, cap.tokens, cap.max_concurrency) == (9549, 4889088, 149.203125)
    assert cap.log_lines == ("GPU KV cache size: 4,889,088 tokens, Maximum concurrency for 32,768 tokens per "
                             "request: 149.20x",)
    assert cap.longest_request_tokens == 8 * base.longest_request_tokens
    # a GPU holds cdiv(tokens, 8) of each sequence
    e = kvmem.estimate("deepseek-v3", engine="vllm", tokens=131072, batch=4, tp=8, decode_context_parallel_size=8)
    assert e.kv_bytes == kvmem.estimate("deepseek-v3", engine="vllm", tokens=16384, batch=4, tp=8).kv_bytes
    # the plan: 41 sequences of 128k on 8 x H200, not 5, and the flag
    plan = kvmem.plan("deepseek-v3", engine="vllm", gpu="h200-sxm-141gb", num_gpus=8, context=131072,
                      target="max_batch", decode_context_parallel_size=8)
    assert plan.argv[plan.argv.index("--decode-context-parallel-size") + 1] == "8" and plan.fit.max_batch == 41


def test_decode_context_parallel_refusals():
    def cap(model, tp, dcp):
        return kvmem.capacity(model, engine="vllm", kv_memory=20 << 30, tp=tp, max_model_len=8192,
                              decode_context_parallel_size=dcp)
    # GQA: the shards ride the KV heads' tp replicas, tp // kv_heads of them (vllm/config/model.py)
    with pytest.raises(ValueError, match=r"exceeds tp_size // num_kv_heads = 8 // 8 = 1"):
        cap("qwen3-32b", 8, 2)
    assert cap("qwen3-235b-a22b", 8, 2).tokens > cap("qwen3-235b-a22b", 8, 1).tokens   # 4 KV heads, 2 replicas each
    with pytest.raises(ValueError, match="tp_size=8 must be divisible by dcp_size=3"):
        cap("deepseek-v3", 8, 3)
    with pytest.raises(ValueError, match="gpt-oss-20b has sliding layers"):
        cap("gpt-oss-20b", 8, 2)
    with pytest.raises(ValueError, match="as vLLM 0.33.0 plans it"):
        kvmem.capacity("deepseek-v3", engine="vllm", kv_memory=20 << 30, tp=8, max_model_len=8192,
                       decode_context_parallel_size=2, version="0.19.0")

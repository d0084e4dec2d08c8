"""kvmem's data-parallel attention and expert-parallel sizing against SGLang 0.5.23's own start-up chain on the
CPU (kvmem/oracles/sglang_dp.py): its resolved mem_fraction_static and chunk, its KV budget from the free memory,
its pool for attn_tp = tp // attn_dp_size, and its requests per DP worker."""

from tests.oracles.conftest import require

require("sglang")

import pytest  # noqa: E402

from kvmem.oracles import sglang_dp as oracle  # noqa: E402
from kvmem.oracles import sglang_dp_weights as weights  # noqa: E402
from kvmem.oracles.sglang_runtime import config_dir  # noqa: E402


def assert_agrees(name, setting):
    checks = oracle.run_case(name, setting)
    bad = [c for c in checks if not c.matches]
    assert not bad, "\n".join(f"{c.case}: {c.quantity}: kvmem {c.kvmem!r}, SGLang {c.engine!r}" for c in bad)
    return {c.quantity: c.kvmem for c in checks}


def test_the_issue_setting_deepseek_v3_on_8_h200_with_attn_dp_8():
    # SGLang: reserve 512 + 1.5 x 8192 + 2 x 512 + 8/8 x 1024 + 512 x 8 x (3 + 1.5) = 33,280 MiB of 143,771:
    # mem_fraction_static round(110,491 / 143,771, 3) = 0.769; the chunk 8192 // 8 = 1024; 273,420 latent tokens
    # per GPU (576 x 61 x 2 B = 70,272 B a token), 8 pools: 2,187,360 tokens in the tp group
    numbers = assert_agrees(*oracle.cases()[0])
    assert (numbers["mem_fraction_static"], numbers["chunked_prefill_size"], numbers["tokens"]) == (0.769, 1024, 273420)


def test_tp_alone_is_unchanged():
    numbers = assert_agrees(*oracle.cases()[1])
    assert (numbers["mem_fraction_static"], numbers["tokens"]) == (0.897, 699436)


@pytest.mark.parametrize("case", oracle.cases()[2:], ids=lambda case: case[0])
def test_directed(case):
    assert_agrees(*case)


@pytest.mark.parametrize("index", range(8))
def test_seeded_random_settings(index):
    assert_agrees(*oracle.random_case(7, index))


@pytest.mark.parametrize("index", range(8))
def test_seeded_random_gqa_settings(index):
    # Qwen3-MoE, GLM-4.5/4.7 and Qwen3 dense: the pool laid out for attn_tp's KV heads (replicated past them)
    assert_agrees(*oracle.gqa_random_case(7, index))


def test_qwen3_235b_on_8_h200_with_attn_dp_8():
    # each GPU its own group, the 4 KV heads whole: 94 x 4 x 256 x 2 B = 192,512 B a token; 225,249 tokens
    numbers = assert_agrees(*oracle.cases()[5])
    assert numbers["tokens"] == 225249


@pytest.mark.parametrize("model", weights.WEIGHT_MODELS)
def test_weights_attn_dp_adds_are_sglangs_layers(model):
    # SGLang's attention class and VocabParallelEmbedding for one rank at attn_tp and at tp (meta device, bf16):
    # what attn_dp_size adds to a GPU, kvmem's rule beside them, at attn_tp 1 and 4 of tp 8
    for attn_dp in (8, 2):
        check = weights.weights_case(model, tp=8, attn_dp=attn_dp)
        assert check.matches, f"{check.case}: kvmem {check.kvmem:,}, SGLang {check.engine:,}"


def test_weights_qwen2_moe_from_its_config():
    # Qwen1.5-MoE-A2.7B (no preset): Qwen2MoeAttention with its default q/k/v bias, 16 heads of 128 over attn_tp
    for tp, attn_dp in ((8, 8), (8, 2), (16, 4)):
        check = weights.weights_case("qwen1.5-moe-a2.7b", tp=tp, attn_dp=attn_dp, cfg=weights.QWEN2_MOE_CONFIG)
        assert check.matches, f"{check.case}: kvmem {check.kvmem:,}, SGLang {check.engine:,}"


def test_weights_qwen3_235b_by_hand():
    # SGLang's Qwen3MoeAttention a rank: qkv 4096 x (8 x 128 + 2 x 128) + o 1024 x 4096 at tp 8 (one KV head
    # replicated), qkv 4096 x (64 + 8) x 128 + o 8192 x 4096 at attn_tp 1; 94 layers; embedding 151,936 / 8 rows at
    # tp 8, all at attn_tp 1; at 2 B: 94 x 2 x (71,303,168 - 9,437,184) + 2 x 4,096 x 151,936 x 7/8 = 12,719,882,240
    check = weights.weights_case("qwen3-235b-a22b", tp=8, attn_dp=8)
    assert check.engine == 94 * 2 * (71303168 - 9437184) + 2 * 4096 * 151936 * 7 // 8 == 12719882240 == check.kvmem


@pytest.mark.parametrize("model", ("deepseek-v3", "kimi-k2-instruct", "deepseek-v2-lite", "glm-4.5-air", "glm-4.7",
                                   "qwen3-235b-a22b", "gpt-oss-120b"))
def test_dp_lm_head_and_dense_tp_1_are_sglangs_layers(model):
    # ParallelLMHead(use_attn_tp_group=True) and the dense MLP class with parallel_group "replicated", beside the
    # defaults; Qwen3-MoE and GPT-OSS have no first_k_dense_replace layers: the head alone
    for attn_dp in (8, 2):
        check = weights.head_and_dense_case(model, tp=8, attn_dp=attn_dp)
        assert check.matches, f"{check.case}: kvmem {check.kvmem:,}, SGLang {check.engine:,}"


def test_dp_lm_head_and_dense_tp_1_deepseek_v3_by_hand():
    # lm_head 129,280 x 7,168 x 2 B over attn_tp 1 not tp 8: + 7/8 of 1,853,358,080 = 1,621,688,320; the 3 dense
    # MLP layers 3 x 3 x 7,168 x 18,432 x 2 B whole, not 1/8: + 7/8 of 2,378,170,368 = 2,080,899,072
    check = weights.head_and_dense_case("deepseek-v3", tp=8, attn_dp=8)
    assert check.engine == 1621688320 + 2080899072 == 3702587392 == check.kvmem


def test_the_plan_is_what_sglang_resolves():
    # the command kvmem plan writes for the issue's setting, read back by SGLang 0.5.23's own parser and resolved
    # on the CPU: 8 attention groups, ep 8, the dp lm_head and dense MLPs whole, the chunk divided to 1024
    import argparse
    from unittest import mock

    import kvmem
    from kvmem.catalog import preset
    from kvmem.oracles.sglang_runtime import load
    load()   # SGLang with its torchvision stand-in (sglang_runtime.py says why)
    import sglang.srt.arg_groups.memory_hook as memory_hook
    from sglang.srt.server_args import ServerArgs
    plan = kvmem.plan("deepseek-v3", engine="sglang", gpu="h200-sxm-141gb", num_gpus=8, context=32768,
                      target="max_batch", attn_dp_size=8, ep_size=8, enable_dp_lm_head=True, moe_dense_tp_size=1)
    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    ns = parser.parse_args(plan.argv[3:])
    ns.model_path = config_dir(preset("deepseek-v3")["config"])   # its config.json, for SGLang's ModelConfig
    ns.device = "cuda"
    with mock.patch.object(memory_hook, "get_device_memory_capacity", lambda *_a: 143771.0):
        args = ServerArgs.from_cli_args(ns)
        args.resolve_once()
    resolved = args.resolved_dict()
    assert (resolved["attn_dp_size"], resolved["dp_size"], resolved["ep_size"]) == (8, 1, 8)
    assert (resolved["enable_dp_lm_head"], resolved["moe_dense_tp_size"]) == (True, 1)
    # the head and dense MLPs cost 3,702,587,392 B a GPU more: 235,533 tokens a GPU, 7 a group at 32k
    assert (resolved["chunked_prefill_size"], resolved["max_running_requests"]) == (1024, 56)
    assert resolved["mem_fraction_static"] == 0.769
    assert plan.fit.max_batch == 56

"""The parallel layouts in the commands plan writes and in the logs check-log reads (issue 36 item 3); SGLang's
and vLLM's own parsers read these commands back in tests/oracles/test_{sglang,vllm}_dp_oracle.py."""

import pytest

import kvmem

H200 = "h200-sxm-141gb"


def test_sglang_attention_dp_command():
    plan = kvmem.plan("deepseek-v3", engine="sglang", gpu=H200, num_gpus=8, context=32768, target="max_batch",
                      attn_dp_size=8, ep_size=8)
    argv = plan.argv
    assert argv[argv.index("--attn-dp-size") + 1] == "8" and argv[argv.index("--ep-size") + 1] == "8"
    assert "--dp-size" not in argv
    # 8 requests an attention group (273,420 // 32,768), 8 groups: SGLang gives each 64 // 8
    assert argv[argv.index("--max-running-requests") + 1] == "64"
    assert argv[argv.index("--mem-fraction-static") + 1] == "0.769"
    assert argv[argv.index("--chunked-prefill-size") + 1] == "8192"    # SGLang divides it by 8 itself


def test_sglang_dp_lm_head_and_dense_tp_1():
    plan = kvmem.plan("deepseek-v3", engine="sglang", gpu=H200, num_gpus=8, context=32768, target="max_batch",
                      attn_dp_size=8, enable_dp_lm_head=True, moe_dense_tp_size=1)
    argv = plan.argv
    assert "--enable-dp-lm-head" in argv and argv[argv.index("--moe-dense-tp-size") + 1] == "1"
    # the head and the dense MLPs cost a GPU more than attn_dp 8 alone: 7 a group, not 8
    assert argv[argv.index("--max-running-requests") + 1] == "56"


def test_sglang_deepep_command():
    plan = kvmem.plan("qwen3-235b-a22b", engine="sglang", gpu=H200, num_gpus=8, context=32768, target="max_batch",
                      attn_dp_size=8, moe_a2a_backend="deepep")
    argv = plan.argv
    assert argv[argv.index("--moe-a2a-backend") + 1] == "deepep"
    assert argv[argv.index("--mem-fraction-static") + 1] == "0.754"   # 2 GiB more reserved for DeepEP


def test_sglang_nodes_and_refusals():
    plan = kvmem.plan("deepseek-v3", engine="sglang", gpu=H200, num_gpus=16, context=32768, batch=64,
                      attn_dp_size=16, nnodes=2)
    assert plan.argv[plan.argv.index("--nnodes") + 1] == "2"
    with pytest.raises(ValueError, match="nnodes=3 must divide the 16 GPUs"):
        kvmem.plan("deepseek-v3", engine="sglang", gpu=H200, num_gpus=16, context=32768, attn_dp_size=16, nnodes=3)
    # SGLang refuses --dp-size replicas with --attn-dp-size (parallel_hook.py): so do fit and plan
    with pytest.raises(ValueError, match="refuses --dp-size 2 with --attn-dp-size 8"):
        kvmem.plan("deepseek-v3", engine="sglang", gpu=H200, num_gpus=16, tp=8, context=32768, attn_dp_size=8)


def test_vllm_expert_parallel_command():
    plan = kvmem.plan("deepseek-v3", engine="vllm", gpu=H200, num_gpus=16, tp=8, context=32768, batch=16,
                      enable_expert_parallel=True, num_redundant_experts=32)
    argv = plan.argv
    assert argv[argv.index("--data-parallel-size") + 1] == "2"
    assert "--enable-expert-parallel" in argv and "--enable-eplb" in argv
    assert argv[argv.index("--eplb-config") + 1] == '{"num_redundant_experts": 32}'


LOG = """\
[2026-01-01 00:00:00 DP0 TP0 EP0] server_args=ServerArgs(model_path='deepseek-ai/DeepSeek-V3', tp_size=8, pp_size=1, \
dp_size=8, enable_dp_attention=True, ep_size=8, kv_cache_dtype='auto', page_size=1, max_running_requests=64, \
context_length=32768, mem_fraction_static=0.769)
[2026-01-01 00:01:00 DP0 TP0 EP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 273420, KV size: 17.89 GB
[2026-01-01 00:01:00 DP1 TP1 EP1] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 273420, KV size: 17.89 GB
[2026-01-01 00:01:05 DP0 TP0 EP0] max_total_num_tokens=273420, chunked_prefill_size=1024, max_prefill_tokens=16384, \
max_running_requests=8, context_len=32768, available_gpu_mem=10.00 GB
"""


def test_check_log_reads_dp_lm_head_and_dense_tp():
    log = LOG.replace("mem_fraction_static=0.769)", "mem_fraction_static=0.769, enable_dp_lm_head=True, "
                      "moe_dense_tp_size=1)")
    result = kvmem.check_log(log)
    assert result.inputs["enable_dp_lm_head"][0] is True and result.inputs["moe_dense_tp_size"][0] == 1
    unset = kvmem.check_log(LOG.replace("mem_fraction_static=0.769)", "mem_fraction_static=0.769, "
                                        "moe_dense_tp_size=None)"))
    assert unset.checks and all(check.matches for check in unset.checks)


def test_check_log_reads_attention_dp():
    # the deprecated spelling dp_size=8 + enable_dp_attention=True is 8 attention groups; each worker's
    # max_running_requests is 64 // 8 = 8 (resolve_max_num_reqs), which a tp-only reading would expect as 64
    result = kvmem.check_log(LOG)
    assert result.inputs["attn_dp_size"][0] == 8 and result.inputs["ep_size"][0] == 8
    assert result.checks and all(check.matches for check in result.checks), [c.to_dict() for c in result.checks]
    assert len(result.checks) == 2

"""Compute buffers of the held-out llama.cpp logs of 2026-12-07 (docs/research/heldout/llamacpp_logs_2026-12-07.md,
"Failures by cause" 1, 4, 5) that kvmem missed: RPC devices without pipeline-parallel copies
(kvmem.engines.llamacpp.pipeline), host-only graphs at 2025 builds (no set_rows index inputs before PR #14959, no
unused inp_embd input before PR #18898), phi3's fused-QKV copies before PR #14568 / #15662. A few lines of each
published log, its source beside."""

from __future__ import annotations

import pytest

from kvmem.catalog import as_model
from kvmem.engines.llamacpp.offload import layout
from kvmem.engines.llamacpp.pipeline import pipeline_parallel
from kvmem.engines.llamacpp.tensors import synthesised_tensors
from kvmem.logcheck import check_log

MIB = 1 << 20


def _compute(result) -> dict:
    return {c.quantity: (c.logged, c.kvmem, c.matches) for c in result.checks if "compute" in c.quantity}


# Arm's learning path "llama.cpp RPC on AWS Graviton" (GitHub file, index id 21146195652): llama-cli build 6209
# (fb22dd07, 2025-08-19), Llama-3.1-70B Q4_0 over two RPC servers, -ngl 999, -c 4096, flash attention off
CASE13 = """bin/llama-cli -m ../../model.gguf -p "Here's a knock knock joke for kids:" -n 128 --rpc "172.31.110.11:50052,172.31.110.12:50052" -ngl 999
build: 6209 (fb22dd07) with cc (Ubuntu 13.3.0-6ubuntu2~24.04) 13.3.0 for aarch64-linux-gnu
llama_model_load_from_file_impl: using device RPC[172.31.27.42:50052] (RPC[172.31.27.42:50052]) - 31491 MiB free
llama_model_load_from_file_impl: using device RPC[172.31.20.38:50052] (RPC[172.31.20.38:50052]) - 31491 MiB free
print_info: file type   = Q4_0
print_info: n_layer          = 80
load_tensors: offloaded 81/81 layers to GPU
load_tensors: RPC[172.31.27.42:50052] model buffer size = 18821.56 MiB
load_tensors: RPC[172.31.20.38:50052] model buffer size = 18725.42 MiB
load_tensors:   CPU_Mapped model buffer size =   563.62 MiB
llama_context: n_seq_max     = 1
llama_context: n_ctx         = 4096
llama_context: n_batch       = 2048
llama_context: n_ubatch      = 512
llama_context: flash_attn    = 0
llama_context: kv_unified    = false
llama_kv_cache_unified: RPC[172.31.27.42:50052] KV buffer size =   656.00 MiB
llama_kv_cache_unified: RPC[172.31.20.38:50052] KV buffer size =   624.00 MiB
llama_kv_cache_unified: size = 1280.00 MiB (  4096 cells,  80 layers,  1/1 seqs), K (f16):  640.00 MiB, V (f16):  640.00 MiB
llama_context: RPC[172.31.27.42:50052] compute buffer size =   588.01 MiB
llama_context: RPC[172.31.20.38:50052] compute buffer size =   588.01 MiB
llama_context:        CPU compute buffer size =    28.01 MiB
"""


def test_rpc_servers_get_no_pipeline_copies():
    # RPC devices report neither async compute nor events (ggml-rpc.cpp#L1888-L1894 at 3f545becc), so llama_context
    # leaves pipeline parallelism off (src/llama-context.cpp#L428-L455): one copy of each input. With the four
    # copies of a CUDA pair kvmem said 688.02 / 688.03 / 64.04 MiB
    checks = _compute(check_log(CASE13, "llama-3.1-70b"))
    assert checks == {"RPC[172.31.27.42:50052] compute buffer": ("588.01 MiB", "588.01 MiB", True),
                      "RPC[172.31.20.38:50052] compute buffer": ("588.01 MiB", "588.01 MiB", True),
                      "CPU compute buffer": ("28.01 MiB", "28.01 MiB", True)}


def test_the_same_split_over_two_cuda_devices_is_pipelined():
    # the same model, split and build over CUDA0 / CUDA1 (async + events): GGML_SCHED_MAX_COPIES = 4 copies
    model = as_model("llama-3.1-70b")
    tensors = synthesised_tensors(model, "q4_0", build="2025-08-19")
    kw = dict(n_gpu_layers=999, tensor_split=(1, 1), n_ctx=4096, flash_attn=False, build="2025-08-19")
    rpc = layout(model, tensors, gpus=("RPC[172.31.27.42:50052]", "RPC[172.31.20.38:50052]"), **kw)
    cuda = layout(model, tensors, gpus=("CUDA0", "CUDA1"), **kw)
    assert [round(v / MIB, 2) for v in rpc.compute_bytes.values()][-1] == 28.01
    assert sorted(round(v / MIB, 2) for v in cuda.compute_bytes.values()) == [64.04, 688.02, 688.03]
    assert all(rpc.compute_exact.values()) and all(cuda.compute_exact.values())


@pytest.mark.parametrize("gpus, kw, expected", [
    (("CUDA0", "CUDA1"), {}, True),
    (("ROCm0", "ROCm1"), {}, True),
    (("SYCL0", "SYCL1"), {}, True),
    (("CUDA0",), {}, False),                                    # one device
    (("CUDA0", "CUDA1"), {"full": False}, False),               # a layer on the host
    (("CUDA0", "CUDA1"), {"overrides": True}, False),           # -ot / --n-cpu-moe given
    (("CUDA0", "CUDA1"), {"kv_offload": False}, False),         # -nkvo
    (("CUDA0", "CUDA1"), {"blas": True}, False),                # a GGML_BLAS build: the BLAS ACCEL device has neither
    (("RPC[10.0.0.1:50052]", "RPC0[10.0.0.2:50052]"), {}, False),
    (("CUDA0", "RPC[10.0.0.1:50052]"), {}, False),              # one RPC device is enough
    (("CANN0", "CANN1"), {}, False),                            # events, no async (ggml-cann.cpp#L2816-L2822)
    (("HTP0", "HTP1"), {}, False),                              # async, no events
    (("Vulkan0", "Vulkan1"), {"build": "2025-12-20"}, False),   # before PR #18047 (2025-12-21): neither
    (("Vulkan0", "Vulkan1"), {"build": "2025-12-21"}, True),
    (("Vulkan0", "Vulkan1"), {}, True),
    (("OPENVINO0", "OPENVINO1"), {}, False),
    (("h100-sxm-80gb", "h100-sxm-80gb"), {}, True),             # no backend's name: CUDA's caps (kvmem plans CUDA)
    (("h100-sxm-80gb", "RPC[10.0.0.1:50052]"), {}, False),
])
def test_pipeline_parallel_by_backend(gpus, kw, expected):
    import datetime
    if "build" in kw:
        kw = {**kw, "build": datetime.date.fromisoformat(kw["build"])}
    assert pipeline_parallel(gpus, **{"full": True, "overrides": False, **kw}) is expected


# https://github.com/ikawrakow/ik_llama.cpp/issues/437 (kirnat, 2025-05-20): mainline llama-cli build 5389, Xeon with
# AMX, CPU only, Llama-3.1-8B Q4_K_M, -c 4096, flash attention off
CASE03 = """llama.cpp/build/bin/llama-cli -m ./models/Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf
load_tensors:   CPU_Mapped model buffer size =  4685.30 MiB
llama_context: n_seq_max     = 1
llama_context: n_ctx         = 4096
llama_context: n_ubatch      = 512
llama_context: flash_attn    = 0
llama_kv_cache_unified:        CPU KV buffer size =   512.00 MiB
llama_kv_cache_unified: KV self size  =  512.00 MiB, K (f16):  256.00 MiB, V (f16):  256.00 MiB
llama_context:        CPU compute buffer size =   296.01 MiB
build: e3a9421b (5389)
"""
# https://github.com/ikawrakow/ik_llama.cpp/issues/380: mainline llama-server.exe build 5273 (MSVC), CPU only,
# Qwen3-30B-A3B Q5_K_M, -c 4096, flash attention off
CASE11 = """PS C:\\neuro\\llama-avx2> ./llama-server.exe -t 8 -c 4096 -m F:\\llm\\Qwen3-30B-A3B-Q5_K_M.gguf
build: 5273 (8ae5ebcf) with MSVC 19.43.34808.0 for x64
print_info: file type   = Q5_K - Medium
print_info: general.name     = Qwen3-30B-A3B
load_tensors: offloaded 0/49 layers to GPU
load_tensors:   CPU_Mapped model buffer size = 20713.44 MiB
llama_context: n_seq_max     = 1
llama_context: n_ctx         = 4096
llama_context: n_ubatch      = 512
llama_context: flash_attn    = 0
llama_kv_cache_unified:        CPU KV buffer size =   384.00 MiB
llama_kv_cache_unified: KV self size  =  384.00 MiB, K (f16):  192.00 MiB, V (f16):  192.00 MiB
llama_context:        CPU compute buffer size =   300.75 MiB
"""
# https://github.com/ikawrakow/ik_llama.cpp/pull/344 (ubergarm): mainline llama-sweep-bench build 5192, CPU only,
# bartowski's GLM-Z1-32B-0414 IQ4_XS, -fa, q8_0 cache, -c 5120
CASE14 = """$ ./build/bin/llama-sweep-bench --model /models/THUDM_GLM-Z1-32B-0414-IQ4_XS.gguf -fa -ctk q8_0 -ctv q8_0 -c 5120 --no-mmap
build: 5192 (e59a5f1e) with cc (GCC) 14.2.1 20250128 for x86_64-pc-linux-gnu
print_info: file type   = IQ4_XS - 4.25 bpw
print_info: general.name     = GLM Z1 32B 0414
load_tensors: offloaded 0/62 layers to GPU
llama_context: n_seq_max     = 1
llama_context: n_ctx         = 5120
llama_context: n_ubatch      = 512
llama_context: flash_attn    = 1
init:        CPU KV buffer size =   162.03 MiB
llama_context:        CPU compute buffer size =   308.00 MiB
"""


@pytest.mark.parametrize("log, model, options, mib", [
    (CASE03, None, {"weight_format": "q4_k_m"}, "296.01"),     # was the estimate 308.01 (+12.00)
    (CASE11, None, {}, "300.75"),                              # was 304.75 (+4.00)
    (CASE14, None, {}, "308.00"),                              # was 320.00 (+12.00)
])
def test_host_only_compute_at_2025_builds(log, model, options, mib):
    checks = _compute(check_log(log, model, **options))
    assert checks == {"CPU compute buffer": (f"{mib} MiB", f"{mib} MiB", True)}


def test_host_only_graph_by_build():
    # Qwen3-30B-A3B, CPU only, -c 4096, FA off (case 11): builds from PR #18898 (2026-01-23) add the unused inp_embd
    # input, 512 x 2048 x 4 B = 4.00 MiB, on the prompt graph's peak; the set_rows index inputs (PR #14959) are not
    # on it there. Llama-3.1-8B (case 03): both are, 512 x 4096 x 4 B = 8.00 MiB and the non-FA V index input
    # 512 x 1024 x 8 B = 4.00 MiB
    def host(name, fmt, build):
        model = as_model(name)
        lay = layout(model, synthesised_tensors(model, fmt), gpus=(), n_gpu_layers=0, n_ctx=4096, flash_attn=False,
                     build=build)
        return round(lay.compute_bytes["CPU"] / MIB, 2), lay.compute_exact["CPU"]
    assert host("qwen3-30b-a3b", "q5_k_m", "2025-05-04") == (300.75, True)
    assert host("qwen3-30b-a3b", "q5_k_m", "2026-01-22") == (300.75, True)
    assert host("qwen3-30b-a3b", "q5_k_m", "2026-01-23") == (304.75, True)
    assert host("llama-3.1-8b", "q4_k_m", "2025-05-14") == (296.01, True)
    assert host("llama-3.1-8b", "q4_k_m", "2025-08-02") == (300.01, True)
    assert host("llama-3.1-8b", "q4_k_m", "2026-01-23") == (308.01, True)


# GitHub notes file, index id 68635202314 (text-generation-webui's bundled llama-server, a shallow clone's "build: 1";
# line formats of May-July 2025): Phi-3-mini-4k Q4_K_M, RTX 3070, 33/33 layers, -c 4096, -ub 256, flash attention off
CASE02 = """21:55:01-986678 INFO     Using gpu_layers=33 | ctx_size=4096 | cache_type=fp16
build: 1 (b548c7c) with cc (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0 for x86_64-linux-gnu
llama_model_load_from_file_impl: using device CUDA0 (NVIDIA GeForce RTX 3070) - 7100 MiB free
llama_model_loader: loaded meta data with 24 key-value pairs and 195 tensors from user_data/models/Phi-3-mini-4k-instruct-q4/Phi-3-mini-4k-instruct-q4.gguf (version GGUF V3 (latest))
print_info: file type   = Q4_K - Medium
print_info: arch             = phi3
print_info: n_layer          = 32
load_tensors: offloaded 33/33 layers to GPU
load_tensors:        CUDA0 model buffer size =  2228.82 MiB
load_tensors:   CPU_Mapped model buffer size =    52.84 MiB
llama_context: n_seq_max     = 1
llama_context: n_ctx         = 4096
llama_context: n_ctx_per_seq = 4096
llama_context: n_batch       = 256
llama_context: n_ubatch      = 256
llama_context: flash_attn    = 0
llama_context:  CUDA_Host  output buffer size =     0.12 MiB
llama_kv_cache_unified:      CUDA0 KV buffer size =  1536.00 MiB
llama_kv_cache_unified: size = 1536.00 MiB (  4096 cells,  32 layers,  1 seqs), K (f16):  768.00 MiB, V (f16):  768.00 MiB
llama_context:      CUDA0 compute buffer size =   150.00 MiB
llama_context:  CUDA_Host compute buffer size =     7.00 MiB
"""


def test_phi3_copies_q_k_v_out_of_the_fused_product_before_pr_14568():
    # llm_build_phi3 before PR #14568 (2025-07-07): Q, K, V = ggml_cont(ggml_view_2d(wqkv product)), three
    # 256 x 3072 x 4 B = 3 MiB copies a layer; kvmem's graph of the views alone gave 138.00 MiB
    checks = _compute(check_log(CASE02))
    assert checks == {"CUDA0 compute buffer": ("150.00 MiB", "150.00 MiB", True),
                      "CUDA_Host compute buffer": ("7.00 MiB", "7.00 MiB", True)}
    later = _compute(check_log(CASE02, build="2025-07-08"))       # Q and K views from PR #14568, V still copied
    assert later["CUDA0 compute buffer"] == ("150.00 MiB", "138.00 MiB", False)


# https://github.com/ikawrakow/ik_llama.cpp/issues/285: mainline llama-perplexity build 4905 (b1b132ef, 2025-03-17),
# Xeon with AMX, CPU only, unsloth's DeepSeek-R1 Q8_0 (per-head K/V: a file converted before the MLA split), -c 512
# x 4 sequences, flash attention off
CASE04 = """./build/bin/llama-perplexity --model /models/DeepSeek-R1-Q8_0/DeepSeek-R1.Q8_0-00001-of-00015.gguf -ctk f16 -ctv f16 --ctx-size 512 --ubatch-size 512 -f wiki.test.raw
build: 4905 (b1b132ef) with cc (Ubuntu 13.3.0-6ubuntu2~24.04) 13.3.0 for x86_64-linux-gnu
print_info: file type   = Q8_0
print_info: arch             = deepseek2
print_info: n_layer          = 61
print_info: general.name     = DeepSeek R1 BF16
llama_context: n_seq_max     = 4
llama_context: n_ctx         = 2048
llama_context: n_ctx_per_seq = 512
llama_context: n_batch       = 2048
llama_context: n_ubatch      = 512
llama_context: flash_attn    = 0
init:        CPU KV buffer size =  9760.00 MiB
llama_context: KV self size  = 9760.00 MiB, K (f16): 5856.00 MiB, V (f16): 3904.00 MiB
llama_context:        CPU compute buffer size =   670.01 MiB
"""


def test_deepseek2_per_head_host_graph_at_b4905():
    # the per-head graph of that build (graphs_mla_oss, from PR #12181) with its stores: no set_rows index inputs
    # (before PR #14959), no unused inp_embd input (before PR #18898); with both kvmem said 732.01 MiB, "estimate"
    checks = _compute(check_log(CASE04))
    assert checks == {"CPU compute buffer": ("670.01 MiB", "670.01 MiB", True)}

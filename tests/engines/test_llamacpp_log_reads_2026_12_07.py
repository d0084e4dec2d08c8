"""check-log's reading of the held-out llama.cpp logs of 2026-12-07 (docs/research/heldout/llamacpp_logs_2026-12-07.md):
a command pasted over several lines, a quantisation after a dot in a GGUF name, the CPU's extra weight buffers (AMX),
compute checked without a file type where no weight's type enters it, the 2026 and llama-bench build lines, a
shallow clone's build 1, llama-server's "loading model" line. A few lines of each published log, its source beside."""

from __future__ import annotations

import pytest

from kvmem.catalog import as_model
from kvmem.engines.llamacpp.builds import build_line, uncounted
from kvmem.engines.llamacpp.offload import layout
from kvmem.engines.llamacpp.tensors import synthesised_tensors
from kvmem.logcheck import check_log


def _checks(result) -> dict:
    return {c.quantity: (c.logged, c.kvmem, c.matches) for c in result.checks}


# https://github.com/ikawrakow/ik_llama.cpp/issues/514 (mukul, 2025-06): mainline llama.cpp b5622, Qwen3-30B-A3B
# Q4_K_M on an RTX 4090 + RTX 5090, the experts on the host (-ot), the command pasted over several lines
CASE05 = """./llama.cpp/llama-cli \\
    --model /media/mukul/data/models/unsloth/Qwen3-30B-A3B-GGUF/Q4_K_M/Qwen3-30B-A3B-Q4_K_M.gguf \\
    --threads 32 \\
    --ctx-size 16384 \\
    --n-gpu-layers 99 \\
    -ot ".ffn_.*_exps.=CPU" \\
    --seed 3407 \\
    -no-cnv \\
    --prompt "<|im_start|>user\\nhey, how are you?<|im_end|>\\n<|im_start|>assistant\\n"
build: 5622 (97340b4c) with cc (Ubuntu 13.3.0-6ubuntu2~24.04) 13.3.0 for x86_64-linux-gnu
llama_model_load_from_file_impl: using device CUDA0 (NVIDIA GeForce RTX 4090) - 9862 MiB free
llama_model_load_from_file_impl: using device CUDA1 (NVIDIA GeForce RTX 5090) - 31518 MiB free
print_info: file type   = Q4_K - Medium
print_info: n_layer          = 48
print_info: general.name     = Qwen3-30B-A3B
load_tensors: offloaded 49/49 layers to GPU
load_tensors:   CPU_Mapped model buffer size = 17447.91 MiB
load_tensors:        CUDA0 model buffer size =   135.76 MiB
load_tensors:        CUDA1 model buffer size =   648.66 MiB
llama_context: n_seq_max     = 1
llama_context: n_ctx         = 16384
llama_context: n_ubatch      = 512
llama_context: flash_attn    = 0
llama_kv_cache_unified:      CUDA0 KV buffer size =   384.00 MiB
llama_kv_cache_unified:      CUDA1 KV buffer size =  1152.00 MiB
llama_kv_cache_unified: size = 1536.00 MiB ( 16384 cells,  48 layers,  1 seqs), K (f16):  768.00 MiB, V (f16):  768.00 MiB
llama_context:      CUDA0 compute buffer size =  1080.00 MiB
llama_context:      CUDA1 compute buffer size =  1080.00 MiB
llama_context:  CUDA_Host compute buffer size =    36.01 MiB
"""


def test_a_command_continued_over_lines_is_read():
    # the -ot rule of the fourth continued line puts the experts on the host: CPU_Mapped 17447.91, CUDA0 135.76
    result = check_log(CASE05)
    checks = _checks(result)
    assert result.model == "qwen3-30b-a3b"
    assert checks["CPU_Mapped model buffer"] == ("17447.91 MiB", "17447.91 MiB", True)
    assert checks["CUDA1 compute buffer"] == ("1080.00 MiB", "1080.00 MiB", True)
    assert checks["CUDA_Host compute buffer"][2]
    assert all(ok for _, _, ok in checks.values()) and len(checks) == 9
    assert not any("not read" in n for n in result.notes)


def test_a_backslash_ending_the_last_line_of_the_log_is_not_a_continuation_past_it():
    from kvmem.engines.llamacpp.logs import READER
    from kvmem.logcheck import command
    got = command.read(["llama-server -m x.gguf -c 4096 \\"], READER)
    assert got["n_ctx"][0] == 4096


# https://github.com/ikawrakow/ik_llama.cpp/issues/285 (2025-03): mainline llama.cpp b4905, llama-perplexity on a
# CPU with AMX, unsloth's DeepSeek-R1 Q8_0 in 15 files
CASE04 = """build: 4905 (b1b132ef) with cc (Ubuntu 13.3.0-6ubuntu2~24.04) 13.3.0 for x86_64-linux-gnu
llama_model_loader: loaded meta data with 48 key-value pairs and 1025 tensors from /mnt/ai/models/unsloth/DeepSeek-R1-GGUF/DeepSeek-R1-Q8_0/DeepSeek-R1.Q8_0-00001-of-00015.gguf (version GGUF V3 (latest))
print_info: file type   = Q8_0
print_info: arch             = deepseek2
print_info: n_layer          = 61
print_info: general.name     = DeepSeek R1 BF16
load_tensors:          AMX model buffer size = 18214.39 MiB
""" + "".join(f"load_tensors:   CPU_Mapped model buffer size = {m} MiB\n" for m in
              ["45565.90"] + ["46661.11"] * 13 + ["28077.60"]) + """llama_context: n_seq_max     = 4
llama_context: n_ctx         = 2048
llama_context: n_ctx_per_seq = 512
llama_context: n_ubatch      = 512
llama_context: flash_attn    = 0
init: kv_size = 2048, offload = 1, type_k = 'f16', type_v = 'f16', n_layer = 61, can_shift = 0
init:        CPU KV buffer size =  9760.00 MiB
llama_context: KV self size  = 9760.00 MiB, K (f16): 5856.00 MiB, V (f16): 3904.00 MiB
llama_context:        CPU compute buffer size =   670.01 MiB
"""


def test_a_quantisation_after_a_dot_and_a_bf16_general_name_name_the_preset():
    result = check_log(CASE04)
    assert result.model == "deepseek-r1"
    # the general.name alone: "DeepSeek R1 BF16" (the checkpoint it was converted from) read as DeepSeek-R1
    assert check_log(CASE04.replace("/mnt/ai/models/unsloth/DeepSeek-R1-GGUF/DeepSeek-R1-Q8_0/"
                                    "DeepSeek-R1.Q8_0-00001-of-00015.gguf", "/m/x.gguf")).model == "deepseek-r1"


def test_the_amx_buffer_is_the_hosts_and_said_not_summed():
    # AMX (ggml-cpu amx.cpp "AMX") is a CPU extra buffer type: a repacked copy beside the mapped file. The 15
    # CPU_Mapped lines span the whole file (680237.93 MiB; kvmem's host weights 680238.00, within 15 x 0.005)
    result = check_log(CASE04)
    checks = _checks(result)
    assert checks["CPU_Mapped model buffer"][2] and checks["CPU_Mapped model buffer"][0] == "680237.93 MiB in 15 lines"
    assert "AMX model buffer" not in checks
    assert any("AMX model buffer (18214.39 MiB) is not checked" in n for n in result.notes)
    assert checks["CPU KV buffer"] == ("9760.00 MiB", "9760.00 MiB", True)


# text-generation-webui's llama.cpp server (a public GitHub notes file, search index id 68635202314): Phi-3-mini
# Q4_K_M on an RTX 3070, every layer on the GPU, built from a shallow clone ("build: 1 (b548c7c)")
PHI3 = """build: 1 (b548c7c) with cc (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0 for x86_64-linux-gnu
llama_model_load_from_file_impl: using device CUDA0 (NVIDIA GeForce RTX 3070) - 7100 MiB free
llama_model_loader: loaded meta data with 24 key-value pairs and 195 tensors from user_data/models/Phi-3-mini-4k-instruct-q4/Phi-3-mini-4k-instruct-q4.gguf (version GGUF V3 (latest))
print_info: file type   = Q4_K - Medium
load_tensors: offloaded 33/33 layers to GPU
load_tensors:        CUDA0 model buffer size =  2228.82 MiB
load_tensors:   CPU_Mapped model buffer size =    52.84 MiB
llama_context: n_seq_max     = 1
llama_context: n_ctx         = 4096
llama_context: n_ubatch      = 256
llama_context: flash_attn    = 0
llama_kv_cache_unified:      CUDA0 KV buffer size =  1536.00 MiB
llama_kv_cache_unified: size = 1536.00 MiB (  4096 cells,  32 layers,  1 seqs), K (f16):  768.00 MiB, V (f16):  768.00 MiB
llama_context:      CUDA0 compute buffer size =   150.00 MiB
llama_context:  CUDA_Host compute buffer size =     7.00 MiB
"""


def test_a_shallow_clones_build_1_dates_nothing():
    # cmake/build-info.cmake: git rev-list --count HEAD of a --depth 1 clone is 1. Dated as master's build 1
    # (2023-03-10) the log's "N seqs" line was checked under kv_self rules: "kvmem 0 size lines"
    assert uncounted(1, "b548c7c") is not None and uncounted(1, None) is None
    assert uncounted(0, "abc1234") is not None and uncounted(5331, "33eff402") is None
    result = check_log(PHI3)
    assert result.settings["build"] == "2025-06-01"          # the "N seqs" era (logs._ERA), not 2023-03-10
    checks = _checks(result)
    assert checks["llama_kv_cache_unified"][2] and checks["CUDA0 KV buffer"][2]
    assert any("shallow clone" in n for n in result.notes)


def test_compute_is_checked_without_a_file_type_where_no_weights_type_enters_it():
    # every layer on the GPU, no override: the CUDA_Host compute (7.00 MiB, graph inputs) is checked though the
    # log prints no file type; model buffers are not
    result = check_log(PHI3.replace("print_info: file type   = Q4_K - Medium\n", ""), "phi-3-mini-4k")
    checks = _checks(result)
    assert checks["CUDA_Host compute buffer"] == ("7.00 MiB", "7.00 MiB", True)
    assert "CUDA0 compute buffer" in checks and "CUDA0 model buffer" not in checks
    # host experts (-ot ...=CPU): their matmuls copy the weights to the GPU, sized by their type: not checked
    typeless = check_log(CASE05.replace("print_info: file type   = Q4_K - Medium\n", ""))
    assert not any("compute" in q for q in _checks(typeless))
    # the same log without its command: "offloaded 49/49" and no override stated, but the host's 17447.91 MiB is
    # more than token_embd can be (151936 x 2048 x 4 B = 1187 MiB): weights the log does not say moved there
    hidden = check_log("\n".join(CASE05.replace("print_info: file type   = Q4_K - Medium\n", "").splitlines()[9:]),
                       "qwen3-30b-a3b")
    assert hidden.checks and not any("compute" in q for q in _checks(hidden))


@pytest.mark.parametrize("name", ["llama-3.1-8b", "qwen3-30b-a3b", "gpt-oss-20b", "deepseek-v2-lite", "gemma-3-4b"])
def test_kvmems_compute_bytes_do_not_depend_on_the_format_where_weights_stay_put(name):
    # the rule above, in kvmem's own graphs: the CPU alone, and every layer on one GPU
    model = as_model(name)
    for gpus, ngl in (((), 0), (("CUDA0",), 999)):
        seen = {str(sorted(layout(model, synthesised_tensors(model, fmt), gpus=gpus, n_gpu_layers=ngl, n_ctx=4096,
                                  n_ubatch=512, flash_attn=True).compute_bytes.items()))
                for fmt in ("q4_0", "q8_0", "f16")}
        assert len(seen) == 1, (name, gpus, seen)


def test_build_lines_of_2026_and_of_llama_bench():
    # common/common.cpp#L403 at 3f545becc: "%s: build %d (%s) with %s for %s%s" (a GLM-5.2 run on 4 x RTX PRO 6000,
    # a public GitHub session log, search index id 61219781833), after a timestamp and level
    line = ("0.00.720.705 I cmn  common_param: common_params_print_info: build 10505 (ee4c505a4) with GNU 12.3.0 "
            "for Linux x86_64")
    assert build_line([line])[1:3] == (10505, "ee4c505a4")
    # tools/llama-bench/llama-bench.cpp#L2065: "build: %s (%d)", the commit first
    # (https://github.com/ikawrakow/ik_llama.cpp/issues/437, kirnat 2025-05-20)
    assert build_line(["build: e3a9421b (5389)"])[1:3] == (5389, "e3a9421b")
    assert build_line(["build: 5389 (e3a9421b) with cc"])[1:3] == (5389, "e3a9421b")


# The GLM-5.2 run above: llama-server names its file before the loader does (tools/server/server-context.cpp#L992)
def test_the_loading_model_line_names_the_file_an_unsloth_ud_mix():
    log = """0.00.720.705 I cmn  common_param: common_params_print_info: build 10505 (ee4c505a4) with GNU 12.3.0 for Linux x86_64
0.01.103.341 I srv    load_model: loading model '/data/llama_cpp/models/GLM-5.2-GGUF/UD-Q5_K_XL/GLM-5.2-UD-Q5_K_XL-00001-of-00013.gguf'
0.01.787.213 I print_info: file type   = Q5_K - Medium
43.17.306.562 I load_tensors: offloaded 80/80 layers to GPU
43.17.306.606 I load_tensors:        CUDA0 model buffer size = 19485.92 MiB
44.18.851.402 I llama_context: n_ctx                 = 768000
44.18.851.403 I llama_context: n_ubatch              = 512
"""
    from kvmem.engines.llamacpp import logs
    found = logs.read(log.splitlines())
    assert found["context"]["model"].endswith("GLM-5.2-UD-Q5_K_XL-00001-of-00013.gguf")
    assert found["context"]["build"] == "2026-08-19"


# A public GitHub notes file (search index id 1349331823): mainline llama-server on a Mac Pro's two FirePro D700
# (Vulkan), Llama-4-Scout UD-Q2_K_XL, -ngl 11 -nkvo -c 256000; llama-bench names the file type "Q2_K - Medium"
SCOUT = """./build/bin/llama-server -m ../llm-models/Llama-4-Scout-17B-16E-Instruct-UD-Q2_K_XL.gguf -t 11 -ngl 11 -nkvo --ctx-size 256000
llama_model_load_from_file_impl: using device Vulkan0 (AMD Radeon HD - FirePro D700) - 6144 MiB free
llama_model_load_from_file_impl: using device Vulkan1 (AMD Radeon HD - FirePro D700) - 6144 MiB free
load_tensors: offloaded 11/49 layers to GPU
load_tensors:   CPU_Mapped model buffer size = 31730.07 MiB
load_tensors:      Vulkan1 model buffer size =  4034.57 MiB
load_tensors:      Vulkan0 model buffer size =  4841.48 MiB
init: kv_size = 256000, offload = 0, type_k = 'f16', type_v = 'f16', n_layer = 48, can_shift = 1
init:        CPU KV buffer size = 48000.00 MiB
llama_context: KV self size  = 48000.00 MiB, K (f16): 24000.00 MiB, V (f16): 24000.00 MiB
llama_context:    Vulkan0 compute buffer size =   616.06 MiB
"""


def test_a_file_type_given_for_an_architecture_not_laid_out_keeps_the_kv_checks():
    # the 48000.00 MiB host KV buffer (-nkvo: 256000 cells x 48 layers x 8 x 128 x 2 x 2 B) is checked with and
    # without the file type; given it, the llama4 layout's refusal (chunked layers) once dropped every buffer line.
    # llama4 is laid out since graphs_llama4 (tests/engines/test_llamacpp_graphs_llama4.py): its model lines compared
    for options in ({}, {"weight_format": "q2_k"}):
        result = check_log(SCOUT, **options)
        assert _checks(result)["CPU KV buffer"] == ("48000.00 MiB", "48000.00 MiB", True)
    assert _checks(check_log(SCOUT, weight_format="q2_k"))["Vulkan0 model buffer"][:2] == ("4841.48 MiB", "4573.13 MiB")


# A Chinese deployment note (search index id 44321302313):
# mainline b6115 on eight Ascend 910B (CANN): the pinned host buffer is "CANN_Host" (ggml-cann.cpp#L1653)
def test_every_backends_pinned_host_buffer_is_the_hosts():
    from kvmem.engines.llamacpp.logs import HOSTS
    assert {"CUDA_Host", "ROCm_Host", "MUSA_Host", "SYCL_Host", "Vulkan_Host", "CANN_Host"} <= HOSTS
    log = """llama_model_load_from_file_impl: using device CANN0 (Ascend910B4) - 29812 MiB free
print_info: file type   = MXFP4 MoE
load_tensors: offloaded 25/25 layers to GPU
load_tensors:   CPU_Mapped model buffer size = 10949.33 MiB
load_tensors:        CANN0 model buffer size =   109.20 MiB
llama_context: n_ctx         = 131072
llama_context: n_ubatch      = 512
llama_context: flash_attn    = 1
llama_context:  CANN_Host compute buffer size =   402.27 MiB
"""
    result = check_log(log, "gpt-oss-20b")
    assert not any("CANN_Host holds nothing" in n for n in result.notes)
    # read as the host's line: it differs, and CANN decides its own op support, so it is said (the test below)
    assert any(n.startswith("line 9: CANN_Host compute buffer logged 402.27 MiB") for n in result.notes)

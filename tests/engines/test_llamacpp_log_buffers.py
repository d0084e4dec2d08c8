"""Issue 33 item 7: check-log compares llama.cpp's buffers per device (model, KV, compute) with the layout kvmem's
offload plan makes (kvmem.engines.llamacpp.offload.layout), under the placement the log states. Real logs from
docs/research/llamacpp_offload_logs.json (each with its source)."""

import json
import pathlib

import pytest

from kvmem.engines.llamacpp import logs as llamacpp
from kvmem.logcheck import check_log

ROOT = pathlib.Path(__file__).resolve().parents[2]
LOGS = {e["id"]: e for e in json.loads((ROOT / "docs/research/llamacpp_offload_logs.json").read_text())}
OLLAMA_8B = LOGS["llama3.1-8b-q4km-ollama-0.5.4-parallel-4"]["log"]


def test_an_ollama_log_checks_every_buffer_it_prints():
    # Llama-3.1-8B Q4_K_M (llm_load_print_meta: model ftype = Q4_K - Medium), 33/33 layers on CUDA0, -c 8192 -np 4
    # (Ollama 0.5.4): token_embd Q4_K 4096 x 128256 / 256 x 144 B = 281.81 MiB on the host, the rest 4403.49 MiB on
    # CUDA0; KV 32 layers x 8 heads x 128 x 2 (K,V) x 2 B x 8,192 cells = 1024.00 MiB
    r = check_log(OLLAMA_8B, "llama-3.1-8b")
    assert r.matches and r.inputs["weight_format"] == ("q4_k_m", "log line 4")
    # "llama_new_context_with_model: KV self size" dates the build (before 2025: kvmem renders that era's rules),
    # under which the CUDA0 compute buffer is llama.cpp's own graph, 560.00 MiB, as printed
    assert r.inputs["build"] == ("2024-12-01", "log line 19")
    assert [(c.quantity, c.kvmem) for c in r.checks] == [
        ("CPU model buffer", "281.81 MiB"), ("CUDA0 model buffer", "4403.49 MiB"), ("CUDA0 KV buffer", "1024.00 MiB"),
        ("KV self size", "llama_new_context_with_model: KV self size  = 1024.00 MiB, K (f16):  512.00 MiB, "
                         "V (f16):  512.00 MiB"),
        ("CUDA0 compute buffer", "560.00 MiB"), ("CUDA_Host compute buffer", "24.01 MiB")]
    assert r.notes == ()
    # read as a current build, the CUDA0 compute buffer is that build's graph (a current llama-server reserves one
    # output row per slot, PR #23861: 4 rows of logits, not 512): 168.01 MiB, checked, so the line fails and says why
    current = check_log(OLLAMA_8B, "llama-3.1-8b", build="current")
    failed = [c for c in current.checks if not c.matches]
    assert not current.matches and current.notes == ()
    assert [(c.quantity, c.kvmem) for c in failed] == [("CUDA0 compute buffer", "168.01 MiB")]
    assert "build" in failed[0].cause


@pytest.mark.parametrize("old, new, quantity", [
    ("CUDA0 model buffer size =  4403.49 MiB", "CUDA0 model buffer size =  4503.49 MiB", "CUDA0 model buffer"),
    ("CUDA0 KV buffer size =  1024.00 MiB", "CUDA0 KV buffer size =  1024.50 MiB", "CUDA0 KV buffer"),
    ("CPU model buffer size =   281.81 MiB", "CPU model buffer size =   281.82 MiB", "CPU model buffer"),
])
def test_an_altered_buffer_line_fails(old, new, quantity):
    altered = OLLAMA_8B.replace(old, new)
    assert altered != OLLAMA_8B
    r = check_log(altered, "llama-3.1-8b")
    assert not r.matches and [c.quantity for c in r.checks if not c.matches] == [quantity]


def test_a_log_without_its_file_type_names_what_is_missing():
    # Phi-4 (Ollama, Dec 2025): no print_info file type in the excerpt; the KV buffer and size line are still checked
    log = LOGS["phi-4-q4km-ollama-full-offload"]["log"]
    r = check_log(log, "phi-4", build="2025-12-01")
    # every layer on the GPU: no weight's type enters the compute buffers, checked without it (the same 353.01 /
    # 23.01 MiB as with weight_format=q4_k_m below); the model buffers are said, not dropped silently
    assert r.matches and [c.quantity for c in r.checks] == ["CUDA0 KV buffer", "llama_kv_cache", "CUDA0 compute buffer",
                                                            "CUDA_Host compute buffer"]
    assert r.notes[0].startswith("model buffers are not checked: the log prints no file type (print_info")
    given = check_log(log, "phi-4", weight_format="q4_k_m", build="2025-12-01")
    # host token_embd Q4_K 100352 x 5120 = 275.62 MiB; CUDA0 8354.71 MiB; the CUDA0 compute buffer 353.01 MiB, the
    # host's 23.01 (a late-2025 build: no unused inp_embd input, PR #18898)
    assert given.matches and given.inputs["weight_format"] == ("q4_k_m", "given")
    assert [c.kvmem for c in given.checks if "model" in c.quantity] == ["275.62 MiB", "8354.71 MiB"]
    # the log dates no build: read as the current one, the host's buffer has the 512 x 5120 x 4 B (10 MiB) input
    # embeddings PR #18898 added, so that line fails and names the build among the causes
    current = check_log(log, "phi-4", weight_format="q4_k_m")
    failed = [(c.quantity, c.kvmem) for c in current.checks if not c.matches]
    assert failed == [("CUDA_Host compute buffer", "33.01 MiB")] and not current.matches


def test_what_the_log_does_not_state_is_named():
    # two GPUs and no 'using device ... MiB free' lines: the split is unknown
    # (its KV self line is still checked: 24 layers x 2 heads x 64 x 2 (K,V) x 2 B x 32,768 cells = 384.00 MiB)
    r = check_log(LOGS["qwen2-0.5b-q4_0-two-gpus"]["log"], "qwen2.5-0.5b", weight_format="q4_0")
    assert r.matches and [c.quantity for c in r.checks] == ["KV self size"]
    assert r.notes[0].startswith("buffers are not checked: several devices and no split")
    # Qwen3-32B in Ollama: KV on the host and on CUDA0 without an 'offloaded N/M layers' line
    from tests.engines.test_llamacpp_log_check import LLAMACPP
    r = check_log(LLAMACPP[23]["log"], "qwen3-32b")
    assert r.matches and [c.quantity for c in r.checks] == ["llama_kv_cache"]
    assert r.notes[0].startswith("buffers are not checked: KV on the host and on the GPUs")


def test_buffer_lines_are_read_whatever_the_prefix():
    lines = ["llm_load_tensors:      CUDA0 buffer size =  4403.49 MiB",
             "load_tensors:   CPU_Mapped model buffer size =   281.81 MiB",
             "llama_memory_recurrent:      CUDA0 RS buffer size =   100.50 MiB",
             "llama_context:  CUDA_Host  output buffer size =     2.02 MiB",            # not a buffer kvmem predicts
             "sched_reserve:      CUDA0 compute buffer size =   148.09 MiB"]
    found = llamacpp.read(lines)
    assert [(b[2], b[3], b[5]) for b in found["buffers"]] == [
        ("model", "CUDA0", 4403.49), ("model", "CPU_Mapped", 281.81), ("KV", "CUDA0", 100.5), ("compute", "CUDA0", 148.09)]


def test_an_old_kv_self_line_and_a_host_kv_buffer():
    # koboldcpp 1.78 (Nov 2024), Llama-2-13B, -c 6272, KV on the host (CUDA_Host KV buffer): 40 layers x 40 heads x
    # 128 x 2 (K,V) x 2 B x 6,272 cells (a multiple of 32: no flash attention, that era's padding) = 4900.00 MiB
    r = check_log(LOGS["llama-2-13b-q5km-full-offload-kv-on-host"]["log"], "llama-2-13b")
    assert r.matches and [(c.quantity, c.logged) for c in r.checks] == [
        ("CUDA_Host KV buffer", "4900.00 MiB"),
        ("KV self size", "llama_new_context_with_model: KV self size  = 4900.00 MiB, K (f16): 2450.00 MiB, "
                         "V (f16): 2450.00 MiB")]
    assert r.inputs["n_ctx"] == (6272, "log line 7") and r.inputs["build"] == ("2024-12-01", "log line 10")
    # given -c 8192 instead, both differ
    other = check_log(LOGS["llama-2-13b-q5km-full-offload-kv-on-host"]["log"], "llama-2-13b", n_ctx=8192)
    assert not other.matches and all(not c.matches for c in other.checks)


KVU_LINES = """load_tensors: offloaded 49/49 layers to GPU
load_tensors:   CPU_Mapped model buffer size =  3866.64 MiB
load_tensors:        CUDA0 model buffer size = 13937.93 MiB
llama_kv_cache:      CUDA0 KV buffer size =  3072.00 MiB
llama_kv_cache: size = 3072.00 MiB ( 32768 cells,  48 layers,  {seqs} seqs), K (f16): 1536.00 MiB, V (f16): 1536.00 MiB
sched_reserve:      CUDA0 compute buffer size =   249.51 MiB
sched_reserve:  CUDA_Host compute buffer size =    40.01 MiB
"""


def test_kv_unified_sizes_the_compute_buffers():
    # review finding 3: `kvmem fit qwen3-30b-a3b --engine llama.cpp --gpu rtx-3090-24gb --context 32k --weight-dtype
    # q4_k_m --llama-args "-ngl 99 --n-cpu-moe 10 -fa on -np 4 -kvu"` prints these lines (CUDA0 compute 249.51, host
    # 40.01 MiB): one KV stream, so the KQ mask spans all 32,768 cells. check-log of its command + lines read -kvu and
    # matched the KV lines but laid the compute graph out with 4 streams (225.51 / 16.01 MiB: "another -ub ...")
    command = "llama-server -m qwen3-30b-a3b-q4_k_m.gguf -ngl 99 --n-cpu-moe 10 -fa on -np 4 {kvu}-c 32768\n"
    r = check_log(command.format(kvu="-kvu ") + KVU_LINES.format(seqs="4/1"), weight_format="q4_k_m")
    assert r.inputs["kv_unified"][0] is True and r.matches and len(r.checks) == 6     # 2 model, KV, size, 2 compute
    assert [c.kvmem for c in r.checks[-2:]] == ["249.51 MiB", "40.01 MiB"]
    # the log's own "kv_unified = true" (llama_context prints it) without -kvu in the command: the same
    r = check_log(command.format(kvu="") + "llama_context: kv_unified    = true\n" + KVU_LINES.format(seqs="4/1"),
                  weight_format="q4_k_m")
    assert r.inputs["kv_unified"][0] is True and r.matches

"""Issue 33 item 7: check-log reads the settings the engine prints (vLLM's config line and non-default args,
SGLang's server_args, llama.cpp's llama_context and loader lines, TRT-LLM's tokens per block), so a log whose
model kvmem has a preset for is explained with no flag; flags given override the log, and every setting says
where it came from. Every number line kvmem predicts is compared: an altered "Maximum concurrency", weights or
max_running_requests line fails."""

import json
import pathlib
import subprocess
import sys

import pytest

from kvmem.logcheck import check_log
from tests.engines.test_sglang import qwen35_9b
from tests.engines.test_sglang_log_check import QWEN35_LOG

ROOT = pathlib.Path(__file__).resolve().parents[2]
SERVING = json.loads((ROOT / "docs/research/engine_logs_serving.json").read_text())
LLAMACPP = json.loads((ROOT / "docs/research/engine_logs_llamacpp.json").read_text())

# docs/research/engine_logs_serving.json #0 (Llama-3.1-8B-Instruct, vLLM v0.6, RTX 3090, max_model_len 20,000) with the
# engine's config line in front, written as vLLM 0.6.4's LLMEngine prints it (vllm/engine/llm_engine.py
# "Initializing an LLM engine (v%s) with config: ...") with the settings the source states
CONFIG_V0 = (
    "INFO 12-10 09:59:01 llm_engine.py:249] Initializing an LLM engine (v0.6.4.post1) with config: "
    "model='meta-llama/Llama-3.1-8B-Instruct', speculative_config=None, tokenizer='meta-llama/Llama-3.1-8B-Instruct', "
    "skip_tokenizer_init=False, tokenizer_mode=auto, revision=None, override_neuron_config=None, tokenizer_revision=None, "
    "trust_remote_code=False, dtype=torch.bfloat16, max_seq_len=20000, download_dir=None, load_format=LoadFormat.AUTO, "
    "tensor_parallel_size=1, pipeline_parallel_size=1, disable_custom_all_reduce=False, quantization=None, "
    "enforce_eager=False, kv_cache_dtype=auto, quantization_param_path=None, device_config=cuda, "
    "decoding_config=DecodingConfig(guided_decoding_backend='outlines'), observability_config=ObservabilityConfig("
    "otlp_traces_endpoint=None, collect_model_forward_time=False, collect_model_execute_time=False), seed=0, "
    "served_model_name=meta-llama/Llama-3.1-8B-Instruct, num_scheduler_steps=1, chunked_prefill_enabled=False "
    "multi_step_stream_outputs=True, enable_prefix_caching=False, use_async_output_proc=True, use_cached_outputs=False, "
    "mm_processor_kwargs=None, pooler_config=None, compilation_config=CompilationConfig(level=0)\n")
V0_LOG = CONFIG_V0 + SERVING[0]["log"]

# vLLM 0.33.0's lines (vllm/entrypoints/common/startup.py non-default args; vllm/v1/engine/core.py config line;
# kv_cache_utils.py update_kv_cache_capacity: tokens and concurrency on one line) for Qwen2.5-7B-Instruct with an fp8
# KV cache. By hand: 28 layers x 4 KV heads x 128 x 2 (K,V) x 1 B = 28,672 B/token, 458,752 B a block of 16;
# 8.0 GiB printed = 7.995..8.005 GiB -> 18,712..18,736 blocks = 299,392..299,776 tokens; one request of 32,768 tokens
# takes 2,048 blocks: 9.14x..9.15x. The line below prints 18,720 blocks' worth.
V1_LOG = (
    "(APIServer pid=1) INFO 11-20 08:00:00 [utils.py:326] non-default args: {'model_tag': 'Qwen/Qwen2.5-7B-Instruct', "
    "'model': 'Qwen/Qwen2.5-7B-Instruct', 'max_model_len': 32768, 'kv_cache_dtype': 'fp8'}\n"
    "(EngineCore pid=90) INFO 11-20 08:00:02 [core.py:140] Initializing a V1 LLM engine (v0.33.0) with config: "
    "model='Qwen/Qwen2.5-7B-Instruct', speculative_config=None, tokenizer='Qwen/Qwen2.5-7B-Instruct', "
    "skip_tokenizer_init=False, tokenizer_mode=auto, revision=None, tokenizer_revision=None, trust_remote_code=False, "
    "dtype=torch.bfloat16, max_seq_len=32768, download_dir=None, load_format=auto, tensor_parallel_size=1, "
    "pipeline_parallel_size=1, data_parallel_size=1, decode_context_parallel_size=1, dcp_comm_backend=ag_rs, "
    "disable_custom_all_reduce=False, quantization=None, quantization_config=None, enforce_eager=False, "
    "aux_output_config=None, kv_cache_dtype=fp8, device_config=cuda, seed=0, "
    "served_model_name=Qwen/Qwen2.5-7B-Instruct, enable_prefix_caching=True, enable_chunked_prefill=True, "
    "pooler_config=None, compilation_config={'level': None, 'mode': 3}, kernel_config=None\n"
    "(EngineCore pid=90) INFO 11-20 08:00:30 [gpu_worker.py:773] Available KV cache memory: 8.0 GiB\n"
    "(EngineCore pid=90) INFO 11-20 08:00:30 [kv_cache_utils.py:1148] GPU KV cache size: 299,520 tokens, "
    "Maximum concurrency for 32,768 tokens per request: 9.14x\n")

# docs/research/engine_logs_serving.json #19 (Llama-3.1-8B-Instruct, SGLang of Jul 2025) with its server_args in
# front, in that era's ServerArgs repr, with the settings the source states (chunked_prefill_size 2048)
SGLANG_ARGS = (
    "[2025-07-14 05:48:30] server_args=ServerArgs(model_path='meta-llama/Llama-3.1-8B-Instruct', "
    "tokenizer_path='meta-llama/Llama-3.1-8B-Instruct', tokenizer_mode='auto', skip_tokenizer_init=False, "
    "load_format='auto', trust_remote_code=False, dtype='auto', kv_cache_dtype='auto', quantization=None, "
    "context_length=None, device='cuda', served_model_name='meta-llama/Llama-3.1-8B-Instruct', chat_template=None, "
    "is_embedding=False, revision=None, host='127.0.0.1', port=30000, mem_fraction_static=None, "
    "max_running_requests=None, max_total_tokens=None, chunked_prefill_size=2048, max_prefill_tokens=16384, "
    "schedule_policy='fcfs', schedule_conservativeness=1.0, page_size=1, tp_size=1, pp_size=1, stream_interval=1, "
    "random_seed=42, disable_radix_cache=False, disable_overlap_schedule=False, attention_backend=None)\n")
SGLANG_LOG = SGLANG_ARGS + SERVING[19]["log"]


def test_a_vllm_v0_log_explains_itself_with_no_flag():
    r = check_log(V0_LOG)
    assert r.engine == "vllm" and r.model == "llama-3.1-8b" and r.matches
    assert r.inputs["model"] == ("llama-3.1-8b", "log line 1: 'meta-llama/Llama-3.1-8B-Instruct'")
    assert r.inputs["max_model_len"] == (20000, "log line 1") and r.inputs["version"] == ("v0", "log line 1")
    assert r.inputs["tp"] == (1, "log line 1") and r.inputs["kv_dtype"] == ("auto", "log line 1")
    # weights 16,060,522,496 B + the rotary cache 131,072 x 128 x 2 B = 14.9888 GiB; 1,952 blocks; 1,952 x 16 /
    # 20,000 = 1.56x
    assert [(c.quantity, c.kvmem) for c in r.checks] == [("Model loading (weights)", "14.9888 GiB"),
                                                         ("# GPU blocks (v0)", "1,948 to 1,953"),
                                                         ("Maximum concurrency", "1.56x")]


@pytest.mark.parametrize("old, new, quantity", [
    ("per request: 1.56x", "per request: 2.56x", "Maximum concurrency"),
    ("took 14.9888 GB", "took 15.9888 GB", "Model loading (weights)"),
    ("took 14.9888 GB", "took 14.9899 GB", "Model loading (weights)"),
])
def test_an_altered_number_line_fails(old, new, quantity):
    altered = V0_LOG.replace(old, new)
    assert altered != V0_LOG
    r = check_log(altered)
    assert not r.matches and [c.quantity for c in r.checks if not c.matches] == [quantity]
    assert all(c.cause for c in r.checks if not c.matches)


def test_a_v1_log_reads_its_config_line_and_non_default_args():
    r = check_log(V1_LOG)
    assert r.matches and r.model == "qwen2.5-7b"
    assert r.inputs["kv_dtype"] == ("fp8", "log line 1")            # non-default args come first in the log
    assert r.inputs["version"] == ("0.33.0", "log line 2") and r.inputs["enable_prefix_caching"] == (True, "log line 2")
    assert [(c.line, c.quantity, c.kvmem) for c in r.checks] == [
        (4, "GPU KV cache size", "299,392 to 299,776 tokens"), (4, "Maximum concurrency", "9.14x to 9.15x")]


def test_a_flag_overrides_the_log_and_says_so():
    r = check_log(V1_LOG, kv_dtype="auto")
    assert r.inputs["kv_dtype"] == ("auto", "given") and not r.matches
    # bf16: twice the bytes, half the tokens: 149,696..149,888 and 4.57x
    assert [c.kvmem for c in r.checks] == ["149,696 to 149,888 tokens", "4.57x"]
    two = check_log(V1_LOG, tp=2)
    assert two.inputs["tp"] == (2, "given") and not two.matches


def test_a_model_the_log_names_without_a_preset_is_refused_truly():
    log = V1_LOG.replace("Qwen/Qwen2.5-7B-Instruct", "mistralai/Ministral-8B-Instruct-2410")
    with pytest.raises(ValueError, match="names the model 'mistralai/Ministral-8B-Instruct-2410' .log line 1., which "
                                         "is not a kvmem preset; check-log does not fetch it: give the model"):
        check_log(log)
    assert check_log(log, "qwen2.5-7b").inputs["model"] == ("qwen2.5-7b", "given")
    with pytest.raises(ValueError, match="no model given and the log names none"):
        check_log(SERVING[10]["log"])


def test_a_quantised_checkpoint_of_a_preset_is_read_as_it_and_says_so():
    # Qwen2.5-7B-Instruct-AWQ (docs/research #10's model): its config is Qwen2.5-7B-Instruct's with AWQ weights
    log = V1_LOG.replace("Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-7B-Instruct-AWQ").replace(
        "quantization=None", "quantization=awq_marlin")
    r = check_log(log)
    assert r.matches and r.model == "qwen2.5-7b"
    assert r.inputs["model"][1].endswith("read as Qwen/Qwen2.5-7B-Instruct, whose quantised checkpoint it is (the "
                                         "same KV; its weights from the log's quantization)")


def test_a_sglang_log_reads_server_args_and_checks_max_running_requests():
    r = check_log(SGLANG_LOG)
    assert r.matches and r.model == "llama-3.1-8b" and r.inputs["tp"] == (1, "log line 1")
    # resolve_max_num_reqs: int(38,141 / 131,072 x 512) = 148, clamped to [2048, 4096] = 2,048; min(2,048, 38,141 // 2)
    assert [(c.quantity, c.kvmem) for c in r.checks][-1] == ("max_running_requests", "2,048")
    altered = check_log(SGLANG_LOG.replace("max_running_requests=2048", "max_running_requests=4096"))
    assert not altered.matches and altered.checks[-1].cause.startswith("another --max-running-requests")
    # Mar 2025: the line prints the request pool's size (2049), not modelled, and said so
    old = check_log(SERVING[18]["log"], "qwen3-32b", tp=4)
    assert old.matches and "max_running_requests is not checked" in old.notes[0]


def test_a_hand_wrapped_sglang_line_with_spaced_units_reads_the_same():
    spaced = QWEN35_LOG.replace("conv_state size: 0.10GB", "conv_state size: 0.10 GB").replace(
        "ssm_state size: 4.38GB", "ssm_state size:  4.38 GB")
    assert spaced != QWEN35_LOG
    assert check_log(spaced, qwen35_9b(), tp=2).matches
    assert not check_log(spaced.replace("0.10 GB", "0.11 GB"), qwen35_9b(), tp=2).matches


def test_a_llamacpp_log_names_its_model_by_its_gguf_file():
    # Qwen3-32B, -c 8192, q8_0 (docs/research/engine_logs_llamacpp.json #23) with the loader's line naming the file
    loader = ("llama_model_loader: loaded meta data with 27 key-value pairs and 707 tensors from "
              "/root/.ollama/models/Qwen3-32B-Q4_K_M.gguf (version GGUF V3 (latest))\n")
    r = check_log(loader + LLAMACPP[23]["log"])
    assert r.matches and r.model == "qwen3-32b"
    assert r.inputs["model"] == ("qwen3-32b", "log line 1: '/root/.ollama/models/Qwen3-32B-Q4_K_M.gguf', read as "
                                              "Qwen3-32B")
    assert r.inputs["n_ctx"] == (8192, "log line 3") and r.inputs["type_k"] == ("q8_0", "log line 16")   # its size line
    # an old build's kv_size line states the cache types (llama_kv_cache_init: ..., type_k = 'q4_0', ...)
    old = "llama_kv_cache_init: kv_size = 16384, offload = 1, type_k = 'q4_0', type_v = 'f16', n_layer = 61, can_shift = 0"
    from kvmem.engines.llamacpp import logs as llamacpp
    assert llamacpp.printed([old]) == {"n_ctx": (16384, 1), "type_k": ("q4_0", 1), "type_v": ("f16", 1),
                                       "architecture": ({"n_layer": 61}, 1)}   # its n_layer checks a preset


def test_trtllm_reads_its_tokens_per_block():
    docs = ("[TensorRT-LLM][INFO] Memory usage when calculating max tokens in paged kv cache: total: 79.10 GiB, "
            "available: 70.48 GiB\n[TensorRT-LLM][INFO] Number of blocks in KV cache primary pool: 4060\n"
            "[TensorRT-LLM][INFO] Number of tokens per block: 64.\n"
            "[TensorRT-LLM][INFO] [MemUsageChange] Allocated 63.44 GiB for max tokens in paged KV cache (259840).\n")
    r = check_log(docs, "llama-2-7b", kv_dtype="fp8")
    assert r.matches and r.inputs["tokens_per_block"] == (64, "log line 3")


def test_cli_check_log_with_the_log_alone(tmp_path):
    path = tmp_path / "server.log"
    path.write_text(V0_LOG)
    done = subprocess.run([sys.executable, "-m", "kvmem", "check-log", str(path)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "settings: model 'llama-3.1-8b' (log line 1: 'meta-llama/Llama-3.1-8B-Instruct')" in done.stdout
    assert "line 5: Maximum concurrency: matches" in done.stdout
    path.write_text(V0_LOG.replace("1.56x", "2.56x"))
    bad = subprocess.run([sys.executable, "-m", "kvmem", "check-log", str(path), "--json"], capture_output=True,
                         text=True, timeout=60)
    result = json.loads(bad.stdout)
    assert bad.returncode == 1 and result["matches"] is False
    assert result["inputs"]["tp"] == {"value": 1, "from": "log line 1"}


def test_vllm_weights_lines_of_the_repository():
    # docs/research/weights_and_memory_logs.json: DeepSeek-R1-Distill-Llama-8B (Llama-3.1-8B's shapes) 14.99 GiB
    # = 16,060,522,496 B + 33,554,432 B rotary cache; gpt-oss-20b's MXFP4 experts padded by vLLM's kernels (13.72
    # GiB loaded, 12.83 GiB of checkpoint + cache): a difference, named with vLLM's MXFP4 note
    logs = json.loads((ROOT / "docs/research/weights_and_memory_logs.json").read_text())
    r = check_log(logs[0]["log"], "llama-3.1-8b", engine="vllm")
    assert r.matches and [(c.quantity, c.kvmem) for c in r.checks] == [("Model loading (weights)", "14.99 GiB")]
    oss = check_log(logs[4]["log"], "gpt-oss-20b", engine="vllm")
    (c,) = oss.checks
    assert not c.matches and c.kvmem == "12.83 GiB" and "MXFP4 MoE kernels pad the expert weights" in c.cause
    assert "(the checkpoint's own format: the log prints no quantization=)" in c.cause
    # the log's own quantization is read: fp8 given where the checkpoint is bf16 halves the weights
    fp8 = check_log(CONFIG_V0.replace("quantization=None", "quantization=fp8") + SERVING[0]["log"])
    assert fp8.inputs["quantization"] == ("fp8", "log line 1") and not fp8.checks[0].matches


def test_number_lines_are_read_whatever_their_spacing():
    # a log copied by hand: extra spaces, a space before the unit (vLLM prints "8.0 GiB", "4.57x")
    spaced = ("Available KV cache memory:  8.0GiB\nGPU KV cache size:  149,712  tokens\n"
              "Maximum concurrency for  32,768 tokens per request:  4.57 x\n")
    r = check_log(spaced, "qwen2.5-7b")
    assert r.matches and [c.quantity for c in r.checks] == ["GPU KV cache size", "Maximum concurrency"]
    sglang = "KV Cache is allocated.  #tokens: 38141 , K size: 2.33 GB, V size:  2.33 GB"
    assert check_log(sglang, "llama-3.1-8b").matches
    assert not check_log(sglang.replace("2.33 GB, V", "2.43 GB, V"), "llama-3.1-8b").matches


def test_trtllm_pytorch_backend_lines_are_all_checked():
    # docs/research/engine_logs_serving.json #23: gpt-oss-120b, TRT-LLM 1.1 (PyTorch backend) sizes a small pool
    # (8,224 tokens), then the real one (86,720); "kv size is 73728" = 36 layers x 8 KV heads x 64 x 2 (K,V) x 2 B;
    # 86,720 x 73,728 B = 5.95 GiB. The fraction and tokens per block come from the log.
    log = SERVING[23]["log"]
    r = check_log(log, "gpt-oss-120b")
    assert r.matches and [(c.line, c.quantity, c.kvmem) for c in r.checks] == [
        (3, "Allocated for max tokens", "0.56 GiB"), (8, "kv size (bytes per token)", "73,728"),
        (13, "Allocated for max tokens", "5.95 GiB")]
    assert r.inputs["tokens_per_block"] == (32, "log line 2")
    assert r.inputs["free_gpu_memory_fraction"] == (0.8999999761581421, "log line 1")
    altered = check_log(log.replace("Allocated 5.95 GiB", "Allocated 6.95 GiB"), "gpt-oss-120b")
    assert not altered.matches and [c.line for c in altered.checks if not c.matches] == [13]


def test_a_setting_the_log_prints_badly_is_refused_naming_where_it_came_from():
    with pytest.raises(ValueError, match=r"tp must be a positive integer, got 'abc' \(tp from log line 2, pp from "
                                         r"log line 2\)"):
        check_log(V1_LOG.replace("tensor_parallel_size=1", "tensor_parallel_size=abc"))
    # a switch printed unset (None) is left to the engine, as it was: vLLM's enable_prefix_caching=None is its
    # choice for the model, which kvmem makes the same way (kvmem.engines.vllm.options.prefix_caching_default)
    r = check_log(V1_LOG.replace("enable_prefix_caching=True", "enable_prefix_caching=None"))
    assert r.matches and r.inputs["enable_prefix_caching"] == (None, "log line 2")


def test_sglang_0_5_server_args_as_a_dict():
    # sglang@v0.5.23 python/sglang/srt/entrypoints/engine.py#L311: server_args={...} (ServerArgs.resolved_dict())
    from kvmem.engines.sglang import logs as sglang
    line = ("[2026-04-14 16:08:30] server_args={'model_path': 'Qwen/Qwen3.5-9B', 'tp_size': 2, 'pp_size': 1, "
            "'kv_cache_dtype': 'fp8_e4m3', 'page_size': 64, 'max_running_requests': None, 'disable_radix_cache': "
            "False, 'mamba_ssm_dtype': 'float32', 'mamba_scheduler_strategy': 'extra_buffer', 'served_model_name': "
            "'qwen', 'context_length': 262144}")
    assert sglang.printed([line]) == {
        "model": ("Qwen/Qwen3.5-9B", 1), "tp": (2, 1), "pp": (1, 1), "kv_dtype": ("fp8_e4m3", 1), "page_size": (64, 1),
        "max_running_requests": (None, 1), "disable_radix_cache": (False, 1), "context_length": (262144, 1),
        "mamba_ssm_dtype": ("fp32", 1), "mamba_extra_buffer": (True, 1)}


def test_model_names_a_log_may_print():
    from kvmem.logcheck import _model_names
    # an HF cache snapshot folder names its id; a Windows GGUF path its file, without the quantisation tag
    assert _model_names("/root/.cache/huggingface/hub/models--Qwen--Qwen3-8B/snapshots/0123abc")[-1] == "Qwen/Qwen3-8B"
    assert _model_names("C:\\models\\Qwen3-0.6B-Q8_0.gguf")[-1] == "Qwen3-0.6B"
    log = V1_LOG.replace("'Qwen/Qwen2.5-7B-Instruct'", "'/data/hub/models--Qwen--Qwen2.5-7B-Instruct/snapshots/a1b2'")
    r = check_log(log)
    assert r.matches and r.inputs["model"][0] == "qwen2.5-7b"
    assert r.inputs["model"][1].endswith(", read as Qwen/Qwen2.5-7B-Instruct")


def test_a_pasted_launch_command_gives_its_flags_below_what_the_engine_prints():
    # the command alone above the numbers (V1_LOG's last two lines: fp8 KV, 32k): read from its flags
    numbers = "".join(V1_LOG.splitlines(keepends=True)[2:])
    cmd = "$ vllm serve Qwen/Qwen2.5-7B-Instruct --kv-cache-dtype fp8 --max-model-len 32768 --enable-prefix-caching\n"
    r = check_log(cmd + numbers)
    assert r.matches and r.inputs["kv_dtype"] == ("fp8", "log line 1, the command")
    assert r.inputs["model"] == ("qwen2.5-7b", "log line 1, the command: 'Qwen/Qwen2.5-7B-Instruct'")
    # the engine's own config line wins over the command (which says -tp 2 here)
    both = check_log(cmd.replace("vllm serve", "vllm serve -tp 2 --model") + V1_LOG)
    assert both.matches and both.inputs["tp"] == (1, "log line 3")


def test_a_llamacpp_command_explains_its_log():
    # docs/research/engine_logs_llamacpp.json #0: gpt-oss-20b on 4 Hexagon devices, its source's command above it:
    # --batch-size 128 makes n_ubatch min(128, 512) = 128, so the SWA cache holds pad256(128 + 128) = 256 cells;
    # the model from the GGUF's file name
    r = check_log(LLAMACPP[0]["settings"]["cmd"] + "\n" + LLAMACPP[0]["log"])
    assert r.matches and r.model == "gpt-oss-20b" and len(r.checks) == 2
    assert r.inputs["n_batch"] == (128, "log line 1, the command") and r.inputs["mmap"] == (False, "log line 1, the command")
    from kvmem.logcheck import command, readers
    assert command.read(["llama-server.exe -m Qwen_Qwen3.5-9B-Q4_K_M.gguf -c 262144 -np 2 -kvu -fa on -ts 3,1"],
                        readers()["llama.cpp"]) == {
        "model": ("Qwen_Qwen3.5-9B-Q4_K_M.gguf", "1, the command"), "n_ctx": (262144, "1, the command"),
        "n_seq": (2, "1, the command"), "kv_unified": (True, "1, the command"), "flash_attn": (True, "1, the command"),
        "tensor_split": ("3,1", "1, the command")}


def test_concurrency_without_the_memory_is_checked_over_the_memories_that_give_the_tokens():
    # DeepSeek-V3.2 tp 8 pp 4 (docs/research #13): 1,214,464 tokens; one request of 163,840 tokens: 7.41x
    log = SERVING[13]["log"]
    assert check_log(log, "deepseek-v3.2", tp=8, pp=4).matches
    altered = check_log(log.replace("7.41x", "8.41x"), "deepseek-v3.2", tp=8, pp=4)
    assert not altered.matches and [c.quantity for c in altered.checks if not c.matches] == ["Maximum concurrency"]

"""The launch command pasted above a log: its flags, as settings (below what the engine itself prints).

A line that runs a server ("vllm serve", "sglang.launch_server", "llama-server" / "llama-cli",
"trtllm-serve") is split as a shell would (shlex, within MAX_COMMAND_CHARS) and the flags kvmem uses
are read under their engine's names: vLLM's (vllm/engine/arg_utils.py EngineArgs), SGLang's
(python/sglang/srt/server_args.py), llama.cpp's (common/arg.cpp), TRT-LLM's (trtllm-serve). What the
engine prints later (its config line, server_args, llama_context lines) is what it ran with and wins
over the command (kvmem.logcheck.check_log); a flag kvmem does not use is left alone.
"""

from __future__ import annotations

import shlex

from .printed import value_of

MAX_COMMAND_CHARS = 8000      # a launch command; a longer line is not read as one
MAX_TRIED = 8                 # lines that look like a command and are split (shlex is slow): a log holds one or two
RUNS = {"vllm": ("vllm serve ", "vllm.entrypoints.openai.api_server"),
        "sglang": ("sglang.launch_server", "sglang serve "),
        "llama.cpp": ("llama-server ", "llama-cli ", "llama-server.exe ", "llama-cli.exe "),
        "trtllm": ("trtllm-serve ",)}
# flag -> kvmem name; a flag that takes no value is a switch (its value: True, or False for a "--no-" form)
FLAGS = {
    "vllm": {"--model": "model", "--tensor-parallel-size": "tp", "-tp": "tp", "--pipeline-parallel-size": "pp",
             "-pp": "pp", "--kv-cache-dtype": "kv_dtype", "--max-model-len": "max_model_len",
             "--block-size": "block_size", "--max-num-batched-tokens": "max_num_batched_tokens",
             "--max-num-seqs": "max_num_seqs", "--quantization": "quantization", "-q": "quantization",
             "--gpu-memory-utilization": "gpu_memory_utilization"},
    "sglang": {"--model-path": "model", "--model": "model", "--tp-size": "tp", "--tp": "tp", "--pp-size": "pp",
               "--kv-cache-dtype": "kv_dtype", "--page-size": "page_size",
               "--max-running-requests": "max_running_requests", "--context-length": "context_length",
               "--mem-fraction-static": "mem_fraction_static", "--swa-full-tokens-ratio": "swa_full_tokens_ratio",
               "--max-mamba-cache-size": "max_mamba_cache_size"},
    "llama.cpp": {"-m": "model", "--model": "model", "-c": "n_ctx", "--ctx-size": "n_ctx", "-np": "n_seq",
                  "--parallel": "n_seq", "-ctk": "type_k", "--cache-type-k": "type_k", "-ctv": "type_v",
                  "--cache-type-v": "type_v", "-ub": "n_ubatch", "--ubatch-size": "n_ubatch", "-b": "n_batch",
                  "--batch-size": "n_batch", "-ngl": "n_gpu_layers", "--n-gpu-layers": "n_gpu_layers",
                  "--gpu-layers": "n_gpu_layers", "-ts": "tensor_split", "--tensor-split": "tensor_split"},
    "trtllm": {"--tp_size": "tp", "--pp_size": "pp", "--kv_cache_free_gpu_memory_fraction": "free_gpu_memory_fraction"},
}
SWITCHES = {
    "vllm": {"--enable-prefix-caching": ("enable_prefix_caching", True),
             "--no-enable-prefix-caching": ("enable_prefix_caching", False)},
    "sglang": {"--disable-radix-cache": ("disable_radix_cache", True),
               "--disable-overlap-schedule": ("disable_overlap_schedule", True)},
    "llama.cpp": {"-kvu": ("kv_unified", True), "--kv-unified": ("kv_unified", True), "--no-mmap": ("mmap", False),
                  "-fa": ("flash_attn", True), "--flash-attn": ("flash_attn", True)},
    "trtllm": {},
}
_FLASH = {"on": True, "off": False}        # llama.cpp's -fa on|off|auto (auto: left to the build)


def read(lines: list[str], engine: str) -> dict:
    """The settings of the first launch command of ``engine`` in ``lines``: kvmem name -> (value, where)."""
    tried = 0
    for n, line in enumerate(lines, 1):
        hits = [(at, run) for run in RUNS[engine] if (at := line.find(run)) >= 0]
        if not hits:
            continue
        start, run = min(hits)
        if len(line) - start > MAX_COMMAND_CHARS:
            continue
        tried += 1
        if tried > MAX_TRIED:
            break
        try:
            words = shlex.split(line[start:])
        except ValueError:                   # an unclosed quote: not a command kvmem reads
            continue
        return _flags(words, len(run.split()), engine, n, line)
    return {}


def _flags(words: list[str], first: int, engine: str, n: int, line: str) -> dict:
    """The flags of ``words`` from ``words[first]`` on (the words before it run the server)."""
    found, where = {}, f"{n}, the command"
    flags, switches = FLAGS[engine], SWITCHES[engine]
    positional = engine in ("vllm", "trtllm")       # vllm serve MODEL, trtllm-serve MODEL
    i = first
    while i < len(words):
        word, i = words[i], i + 1
        name, _, inline = word.partition("=") if word.startswith("--") else (word, "", "")
        if name in switches and not inline:
            key, value = switches[name]
            if engine == "llama.cpp" and key == "flash_attn" and i < len(words) and words[i] in (*_FLASH, "auto"):
                value, i = _FLASH.get(words[i]), i + 1
            if value is not None:
                found.setdefault(key, (value, where))
        elif name in flags:
            raw = inline or (words[i] if i < len(words) else None)
            i += 0 if inline else 1
            if raw is not None:
                found.setdefault(flags[name], (value_of(raw, n, line), where))
        elif positional and not word.startswith("-") and "model" not in found:
            found["model"] = (word, where)
        positional = positional and not word.startswith("-")
    return found

"""The ``kvmem`` command line: models, estimate, capacity (and fit, plan, report, sweep, check-log, gpus, validate).

    kvmem models [--json]
    kvmem estimate llama-3.1-8b --tokens 128k --batch 8 --engine vllm --kv-dtype fp8 [--json]
    kvmem estimate ./config.json --tokens 32k --engine llama.cpp --option type_k=q8_0
    kvmem estimate Qwen/Qwen3-4B --tokens 32k            # an HF id: the HF cache, else the Hub
    kvmem estimate ./Meta-Llama-3-8B.Q4_K_M.gguf --tokens 8k --engine llama.cpp
    kvmem capacity llama-3.1-8b --kv-memory 20GiB --engine vllm --max-model-len 32k [--json]
    kvmem validate --engine vllm --cases 500 --seed 7 [--json]   (against the installed engine)

Exit status: 0 done; 1 the workload does not fit, does not match (validate), or the engine
itself would refuse it (set the engine's override, e.g. VLLM_ALLOW_LONG_MAX_MODEL_LEN=1, where
it has one); 2 a bad input (the message names it); 70 an internal error (KVMEM_DEBUG=1 shows
the traceback); 130 interrupted (Ctrl-C); 141 the reader of stdout went away (``| head``).
With --json an error is a JSON object on stdout too. Output that the terminal's encoding
cannot show (PYTHONIOENCODING=ascii) is written with ASCII stand-ins (x for ×, - for ·).
"""

from .parser import build_parser, main

__all__ = ["main", "build_parser"]

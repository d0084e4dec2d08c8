"""The defaults the command line and the app share, declared once.

Every ``kvmem`` command and every page of the app start from the same engine and KV format, so
that one workload gives one number in both (the API's ``estimate()`` keeps ``engine="ideal"``,
the textbook count, as docs/api.md fixes it). vLLM is the engine whose rules every command
needs (capacity and fit size a pool), and "auto" is the model's own dtype, bf16 when unknown:
llama.cpp then takes its own default, f16, as its -ctk/-ctv do.
"""

ENGINE = "vllm"
KV_DTYPE = "auto"

"""Hardware sizing: does a workload fit, how many sequences and tokens, on how many GPUs, how fast.

    fit(model, gpu=..., context=..., engine="vllm") -> Fit

Per device, each engine splits memory its own way, and its module says how with its sources
(``SizingRules`` in kvmem.engines.base, filled in by each engine module): its memory budget
(of total or of free memory, and what it subtracts), its activation and compute-buffer model,
its batch defaults by device, its sequence limit and how it splits over GPUs. This module asks
them and searches; it names no engine. ``total`` = GPU.usable_memory_bytes (the CUDA total
where known), ``weights`` = kvmem.weights per device (plus what the engine keeps beside them),
KV bytes from the engine's own module through kvmem.estimate.

Options, beside each engine module's own (passed to kvmem.estimate / capacity), are the
engine's sizing options: weights_bytes, activation_bytes, non_torch_bytes (per device; replace
the engine's models with measured figures) and the engine's own (vLLM max_num_seqs,
cudagraph_bytes, kv_cache_memory_bytes; SGLang mem_fraction_static, chunked_prefill_size,
cuda_graph_max_bs; TensorRT-LLM free_gpu_memory_fraction, max_num_tokens).
gpu_memory_utilization is vLLM's alone. ``engine_defaults(engine, gpu, ...)`` tells the
settings in force that depend on the device, and why; the Fit's notes say it too. Under the
engines' own defaults more memory can fit less: vLLM's batch defaults step up at 70 GiB
(3.4 GiB of sampler peak for a 128k vocabulary) and SGLang's reserve jumps to 10 GiB above
60 GiB. Pin those options to compare GPUs on equal terms.

Parallelism: tp x pp GPUs per replica; num_gpus / (tp x pp) data-parallel replicas, each with
its own copy of the weights; max_batch counts all replicas. tp must divide the attention heads.
An engine that splits layers (llama.cpp, -sm layer) takes num_gpus as pp; one that sizes one
device per copy (transformers, hf-*) takes tp = pp = 1 and more GPUs as replicas.
A workload fits when the engine's estimate() for batch x context (its transient peak included:
for vLLM the padding-layer slots and the most blocks a window layer holds while the sequence
grows to ``context``) is within the KV budget; for vLLM and full attention that is its
"Maximum concurrency" rounded down.

The results:
    max_batch    sequences of ``context`` tokens that fit at once (all replicas, at most the
                 engine's sequence limit: llama.cpp's LLAMA_MAX_SEQ 256)
    max_context  the longest context for ``batch`` sequences (1 when batch is None), capped
                 at the model's max_position_embeddings
    min_gpus     the fewest GPUs (tp x pp, tp from 1, 2, 4, ... 64) that fit the workload
    decode bound a step reads the active weights once (MoE: the experts the batch touches)
                 and every sequence's KV (at ``context`` tokens: the last, slowest step):
                 tokens/s per sequence = bandwidth / (active weights / tp + KV read / tp);
                 pipeline stages run one after another for a token, so pp does not raise it;
                 the bound ignores compute, kernels' efficiency and communication.
    kv_crossover_tokens  the context at which the batch's KV reads equal the weight reads
A workload that does not fit is a Fit with ``.fits`` False, whether not one sequence fits or not
the batch asked: its ``.why_not`` says by how much per device and what would fit (fit() raises
only for inputs it cannot size; FitError is kept for callers that want to raise one themselves).

Modules: setup (inputs, the engine's rules, its budget), search (the most sequences, the
longest context), decode (the bandwidth bound, the KV/weights crossover), suggest (the fewest
GPUs, what would fit: the one answer of the CLI, the app and FitError), numbers (what the
engine itself prints: vLLM's GPU KV cache size and Maximum concurrency, SGLang's
max_total_num_tokens, llama.cpp's cells, TRT-LLM's max_tokens), fit (the answer), results
(Fit, MemoryBreakdown, FitError, part_names), sweep (the overview: models x GPUs x contexts x
engines with fit's numbers and nothing else, kvmem.sweep). A workload that does not fit has no
decode bound.
"""

from .decode import kv_crossover_tokens
from .fit import fit
from .numbers import EngineNumbers
from .results import Fit, FitError, MemoryBreakdown, part_names
from .setup import engine_defaults
from .sweep import SweepCell, sweep

__all__ = ["Fit", "FitError", "fit", "kv_crossover_tokens", "engine_defaults", "MemoryBreakdown", "EngineNumbers",
           "part_names", "sweep", "SweepCell"]

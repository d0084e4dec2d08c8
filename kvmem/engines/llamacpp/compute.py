"""llama.cpp's compute buffer: the graphs llama.cpp reserves, allocated as ggml-alloc allocates them.

llama.cpp sizes its compute buffer once, at context creation (src/llama-context.cpp
llama_context::sched_reserve): it builds the prompt graph (n_tokens = min(n_ctx, n_ubatch),
n_outputs = min(n_tokens, n_outputs_max = n_batch)) and reserves it, then the one-token graph
(one token and one output per sequence), then the prompt graph again;
ggml_gallocr_reserve_n_impl grows the buffer only when a graph needs more, so the buffer is the
larger of the two graphs' high-water marks. Both graphs see the whole cache: n_kv = the cells of
one stream (llama_kv_cache_context for init_full: n_kv = kv->get_size()). With n_seq_max
sequences the prompt graph's tokens are rounded up to a multiple of n_seq
(llama_context::graph_reserve), the one-token graph has n_seq tokens and outputs, and the cache
has one stream per sequence unless kv_unified (build_attn_inp_kq_mask n_stream; cpy_k/cpy_v
reshape the streams into one, get_k/get_v and build_attn_mha's Q view split them). Printed as
"<buffer type> compute buffer size".

This module rebuilds those two graphs node by node (kvmem.engines.llamacpp.graphs, on
kvmem.engines.llamacpp.ggml_graph and ggml_alloc: ggml's shapes, its depth-first graph order and ggml-alloc's
allocator) for the families whose graph it transcribes, and returns the bytes the allocator
reserves:

    llama (llama, mistral; mixtral's experts) src/models/llama.cpp llama_model_llama::graph
    qwen2 (qwen2: Q/K/V biases)               src/models/qwen2.cpp llama_model_qwen2::graph
    qwen3 (qwen3)                             src/models/qwen3.cpp llama_model_qwen3::graph
    qwen3moe (qwen3_moe)                      src/models/qwen3moe.cpp llama_model_qwen3moe::graph
    gemma3 (gemma3_text)                      src/models/gemma3.cpp llama_model_gemma3::graph<iswa>
    gemma2 (gemma2: both softcaps)            src/models/gemma2.cpp llama_model_gemma2::graph
    phi3 (phi3: fused attn_qkv and ffn_up)    src/models/phi3.cpp llama_model_phi3::graph<false>
(gemma2, gemma3 and phi3 in kvmem.engines.llamacpp.graphs_gemma_phi3, whose docstring has their
details; glm4, glm4moe, gemma4, llama4 (Llama 4's chunked iSWA, tests/oracles/test_llamacpp_llama4_oracle.py), the
DeltaNet hybrids, deepseek2 / gpt-oss, minimax-m2, minimax-m3, the DSA models and deepseek4 (DeepSeek-V4:
graphs_dsv4_fwd, graphs_dsv4_comp; Flash's printed CPU buffer at 8k-256k, -ub 256-2048, flash attention on and off,
--swa-full, 1-4 sequences, and 200 seeded small configs: all equal, tests/oracles/test_llamacpp_graphs_dsv4_oracle.py)
in their own graphs_* modules;
mistral's and phi3's sliding_window is ignored as llama.cpp ignores it: one full cache),
with, from src/llama-graph.cpp: build_inp_embd (get_rows of the token embeddings and the
unused inp_embd input, both kept by ggml_build_forward_select), build_inp_out_ids (always built,
even when every token is an output), build_norm, build_qkv (separate Q/K/V), build_ffn (SiLU,
parallel gate: ggml_swiglu_split), build_moe_ffn (softmax gating, argsort top-k, normalised
weights, ggml_mul_mat_id for up/gate/down, the experts' views added one by one), build_attn
(KV path) and build_attn_mha: flash attention ggml_flash_attn_ext over permuted views, with
ggml_cast of an f32 K/V cache to f16; without it KQ = mul_mat(K, Q), ggml_soft_max_ext with the
f32 mask, V transposed in the cache, KQV, permute, ggml_cont_2d; build_attn_inp_kq_mask (f16 mask
with flash attention, f32 without: n_kv x n_tokens); src/llama-kv-cache.cpp cpy_k/cpy_v
(ggml_set_rows into the cache: views), get_k/get_v, build_input_k_idxs/v_idxs (i64; V of a
transposed cache one index per element), build_input_k_rot/v_rot (a quantised cache and head
size % 64 == 0: Hadamard rotations, src/llama-impl.h llama_mul_mat_hadamard, n x n f32 inputs,
n the largest power of two >= 64 dividing the K head size, 64 for V); the outputs (result_norm,
result_output) are never freed (llm_graph_result::set_outputs).

Measured (llama-cpp-python 0.3.36, this CPU-only build): equal to the printed "CPU compute
buffer size" and to the four decimals ~llama_context prints, for
  - the oracle's 200 random GGUFs (tests/oracles/test_llamacpp_buffers_oracle.py, about 30-65 s),
    with its first six kinds: llama dense 37, llama with experts 37, qwen2 31, qwen3 dense 34, qwen3moe 40, gemma3 21
    (2-13 layers, sliding window 64-1024, swa_full off 13 / on 8); 1-13 layers, n_ctx 256-4096,
    n_ubatch 32-512, flash attention on 105 and off 95, K any of the nine types -ctk takes
    (common/arg.cpp kv_cache_types), V the same choices with flash attention (f16 without),
    1 sequence (86) or 2-4 (114: 86 with a stream each, 28 unified): 200 of 200;
  - with scripts beside the test: 300 more of the same six kinds with n_ubatch 1-2048, n_ctx
    256-8192 (300 and 3000 too), up to 13 layers, up to 8 of 32 experts: 300 of 300; 40 gemma3,
    60 with 2-8 sequences and n_ubatch 1, 3, 32, 100 or 512 (the prompt graph's tokens rounded
    up to a multiple of the sequences), 600 llama / qwen3 / qwen3moe with f16/f32/q8_0/q4_0
    caches: all equal;
  - since gemma2 and phi3 joined the oracle's kinds (its 200 seeds: llama 23, llama with experts
    30, qwen2 23, qwen3 31, qwen3moe 20, gemma3 22, gemma2 22, phi3 29 of which 5 with separate
    Q/K/V; 200 of 200, about 35 s), 315 more gemma2 / phi3 GGUFs (seeds 200-1399 of those kinds)
    with n_ubatch 1-2048 and n_ctx 256-8192 (300 and 3000 too): all equal; the presets' GGUFs
    (tests/oracles/test_llamacpp_presets_oracle.py: all 31, gemma-2, gemma-3, phi-3/phi-4 and
    mistral-7b-v0.1 among them, n_ctx 4096, flash attention on and off) and, with no_alloc, the
    real shapes of gemma-2-9b, gemma-2-2b, gemma-3-1b, phi-4, phi-3-mini/medium-4k and
    mistral-7b-v0.1 at n_ctx 4096-32768, n_ubatch 512-2048: to the printed MiB;
  - Llama-3-8B, Qwen2.5-7B, Qwen3-8B, Mixtral-8x7B and Qwen3-30B-A3B shapes at n_ctx 512-32768,
    n_ubatch 512/2048, f16/q8_0 caches: 25 of 25; Gemma-3-27B at 4096-32768: 4 of 4.
tests/engines/test_llamacpp_compute.py pins these (the six presets' configs map to the same
graphs), twelve random cases, three with several sequences, three gemma3 ones, four gemma2 and
four phi3 ones, and ten gemma / phi / mistral presets at real shapes.
The CPU buffer type aligns to 32 bytes (ggml-impl.h TENSOR_ALIGNMENT).

Gemma2 and gemma3 need the sliding-window cache's cells per stream (``swa_cells``: plan.swa_cells,
which follows swa_full); without them they get the estimate. Not covered, so not exact: other
families (older gemma, other sliding-window or chunked caches, MLA, recurrent layers, fused QKV
outside phi3, o_proj or MLP biases, per-layer widths, shared experts) get ``estimate_bytes``,
returned with ``exact=False`` and a note saying it is an
estimate; so does ``llamacpp_compute_buffer(backend="cuda")``, the default of
``llamacpp_compute_bytes``. A GPU layout's buffers (full or partial offload, -ngl 0 beside a GPU,
experts moved by -ot) come from kvmem.engines.llamacpp.scheduled: the same graphs split by
kvmem.engines.llamacpp.ggml_sched as ggml_backend_sched splits them (inputs on the host, host
weights copied to the first GPU for prompt-sized ops, copies across devices, 128-byte CUDA
alignment, n_copies with pipeline parallelism; llama-server's output rows from PR #23861, the
flash-attention output's f16 K/V from PR #23907); 14 of the 16 published GPU lines to the printed
MiB (docs/research/llamacpp_offload_logs.md). The graphs are this build's (llama.cpp 0c1e57098);
older builds' graphs differ (the unused inp_embd input came with ggml-org/llama.cpp PR #18898,
settings.PR_18898): the published CUDA logs of Llama-3-8B, from older builds, are 8.00 MiB (n_ctx
512) and 12.01 MiB (8192) below this build's CPU graph.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...units import pad
from .ggml_alloc import gallocr_size
from .ggml_graph import TYPES
from .graph_build import build_graph
from .graphs import PR_16884, PR_21038, PR_23764, GraphShape, Pass, glu_dated
from .graphs_classic import CLASSIC, classic_shape
from .graphs_delta import DELTA, delta_shape, with_rs_seq, with_seqs
from .graphs_dsa import DSA, dsa_build_shape
from .graphs_dsv4 import DSV4
from .graphs_dsv4_fwd import dsv4_context, dsv4_shape
from .graphs_gemma3n import GEMMA3N, gemma3n_shape
from .graphs_gemma4 import GEMMA4, gemma4_shape
from .graphs_gemma_phi3 import phi3_dated
from .graphs_glm4 import GLM4, glm4_shape
from .graphs_glm4moe import GLM4MOE, glm4moe_shape
from .graphs_kimi import one_seq_prompt
from .graphs_kimi_k3 import kimi_shapes
from .graphs_llama4 import LLAMA4, llama4_shape
from .graphs_minimax01 import MINIMAX01, minimax01_once, minimax01_shape
from .graphs_minimax_m2 import MINIMAX_M2, minimax_m2_shape
from .graphs_minimax_m3 import MINIMAX_M3, filled, minimax_m3_shape
from .graphs_mla_oss import MLA_OSS, mla_oss_shape
from .graphs_ssm import SSM, ssm_shape
from .settings import CURRENT, PR_14959, PR_18898
from .tensors_kimi import KIMI

__all__ = ["ComputeBuffer", "GraphShape", "compute_buffer", "graph_shape", "graph_bytes", "estimate_bytes",
           "ggml_type_name",
           "llamacpp_compute_bytes", "llamacpp_compute_buffer", "CPU_ALIGNMENT"]

CPU_ALIGNMENT = 32        # ggml/src/ggml-impl.h TENSOR_ALIGNMENT, ggml_backend_cpu_buffer_type_get_alignment
# kvmem model_type -> llama.cpp graph (GGUF arch)
FAMILIES = {"llama": "llama", "mistral": "llama", "mixtral": "llama", "qwen2": "qwen2", "qwen3": "qwen3",
            "qwen3_moe": "qwen3moe", "gemma2": "gemma2", "gemma3_text": "gemma3", "phi3": "phi3"}
ISWA = ("gemma2", "gemma3")           # an iSWA cache: sliding layers read their own cells
NO_WINDOW = ("llama", "phi3")         # sliding_window ignored: the llama graph reads none, phi3 disables it
# families whose graph (and widths) a module of their own transcribes: glm4 (dense GLM-4-0414, GLM-Z1): graphs_glm4;
# glm4moe (GLM-4.5/4.6/4.7): graphs_glm4moe; llama4 (Llama 4 Scout / Maverick: chunked iSWA): graphs_llama4;
# gemma4 (Gemma 4 26B-A4B / 31B): graphs_gemma4
_OWN_SHAPES = {**dict.fromkeys(GLM4, glm4_shape), **dict.fromkeys(GLM4MOE, glm4moe_shape),
               **dict.fromkeys(LLAMA4, llama4_shape), **dict.fromkeys(GEMMA4, gemma4_shape)}
_OWN_SHAPES.update(dict.fromkeys(CLASSIC, classic_shape))     # falcon, gpt2, gptneox: graphs_classic
_OWN_SHAPES.update(dict.fromkeys(GEMMA3N, gemma3n_shape))     # gemma3n (Gemma 3n): graphs_gemma3n
_OWN_SHAPES.update(dict.fromkeys(SSM, ssm_shape))     # jamba, nemotron_h (Mamba hybrids): graphs_ssm
_OWN_SHAPES.update(dict.fromkeys(KIMI, kimi_shapes))     # kimi-linear, kimi-k3: graphs_kimi, graphs_kimi_k3
_OWN_SHAPES.update(dict.fromkeys(MINIMAX01, minimax01_shape))     # minimax-01 (MiniMax-M1): graphs_minimax01
_OWN_SHAPES.update(dict.fromkeys(MINIMAX_M2, minimax_m2_shape))     # minimax-m2 (MiniMax-M2 / M2.5): graphs_minimax_m2
_OWN_SHAPES.update(dict.fromkeys(MINIMAX_M3, minimax_m3_shape))     # minimax-m3 (MiniMax-M3, MSA): graphs_minimax_m3
_OWN_SHAPES.update(dict.fromkeys(DSV4, dsv4_shape))     # deepseek4 (DeepSeek-V4): graphs_dsv4_fwd, graphs_dsv4_comp
QKV_BIASES = (".attn_q.bias", ".attn_k.bias", ".attn_v.bias")


@dataclass(frozen=True)
class ComputeBuffer:
    """One device's compute buffer: its bytes, and whether they are llama.cpp's own (exact) or
    the estimate kept for families this module does not transcribe."""

    bytes: int
    exact: bool
    note: str = ""
    # what llama.cpp prints at context creation where it is less than ``bytes`` (MiniMax-M3: the reserve over 256
    # positions, grown as a prompt fills the cache); None: it prints ``bytes``
    printed: int | None = None


def graph_shape(model, build=CURRENT) -> GraphShape | None:
    """The graph widths of ``model`` at llama.cpp ``build`` (a date; the vendored build by default), or None when
    its family's graph is not transcribed here; before PR #14158 the FFNs' activation, ggml_mul: graphs.glu_dated."""
    return glu_dated(_graph_shape(model, build), build)


def _graph_shape(model, build=CURRENT) -> GraphShape | None:
    own = _OWN_SHAPES.get(model.model_type)
    if own is not None:
        return own(model)
    if model.model_type in DELTA:       # qwen3next / qwen35 / qwen35moe (Gated DeltaNet hybrids): graphs_delta
        return delta_shape(model)
    if model.model_type in MLA_OSS:     # deepseek2 (MLA) and gpt-oss: kvmem.engines.llamacpp.graphs_mla_oss
        return mla_oss_shape(model, build or CURRENT)
    if model.model_type in DSA:         # glm-dsa and deepseek32 (MLA + lightning indexer) by build: graphs_dsa
        return dsa_build_shape(model, build or CURRENT)
    arch = FAMILIES.get(model.model_type)
    layers = model.layers
    kinds = ("full", "sliding") if arch in ISWA + NO_WINDOW else ("full",)
    if arch is None or not layers or any(str(layer.kind) not in kinds for layer in layers):
        return None
    if arch not in ISWA + NO_WINDOW and any(layer.window for layer in layers):
        return None
    first = layers[0]
    if any((layer.kv_heads, layer.head_dim_k, layer.head_dim_v) != (first.kv_heads, first.head_dim_k,
                                                                        first.head_dim_k) for layer in layers):
        return None
    facts = model.facts
    moe = facts.moe
    if moe is not None and (moe.shared_intermediate_size or moe.dense_intermediate_size
                            or (moe.moe_layers and not all(moe.moe_layers))):
        return None
    if (moe is None and arch == "qwen3moe") or (moe is not None and arch in ("qwen2", "qwen3")) or not facts.vocab_size:
        return None
    config = model.config or {}
    names = [t.name for t in getattr(model.checkpoint, "tensors", None) or ()]
    fused_qkv = any("attn_qkv" in n for n in names) if names else arch == "phi3"
    if config.get("attention_bias") or config.get("mlp_bias") or (fused_qkv and arch != "phi3"):
        return None         # o_proj and MLP biases, and fused QKV outside phi3, are not transcribed
    if config.get("final_logit_softcapping") and arch not in ISWA:
        return None
    if any(n.endswith(".bias") and not n.endswith(QKV_BIASES) for n in names) or (fused_qkv and any(
            n.endswith(".bias") for n in names)):
        return None
    qkv_bias = arch == "qwen2" if not names else any(n.endswith(QKV_BIASES) for n in names)
    return GraphShape(arch=arch, n_layer=len(layers), n_embd=model.hidden_size, n_head=model.num_attention_heads,
                      n_head_kv=first.kv_heads, head_dim=first.head_dim_k,
                      n_ff=0 if moe else facts.intermediate_size, n_vocab=facts.vocab_size,
                      n_expert=moe.experts if moe else 0, n_expert_used=moe.top_k if moe else 0,
                      n_ff_exp=(moe.intermediate_size or facts.intermediate_size) if moe else 0, qkv_bias=qkv_bias,
                      swa=tuple(str(layer.kind) == "sliding" for layer in layers) if arch in ISWA else (),
                      final_softcap=arch == "gemma2" or bool(config.get("final_logit_softcapping")),
                      fused_qkv=fused_qkv, **phi3_dated(arch, build))


def graph_bytes(shape: GraphShape, *, n_kv: int, n_ubatch: int, flash_attn: bool, type_k: str = "f16",
                type_v: str = "f16", n_outputs: int | None = None, n_seq: int = 1, kv_unified: bool = False,
                swa_cells: int = 0, alignment: int = CPU_ALIGNMENT, mask_f32: bool = False, kv_rot: bool = True,
                qkv_order: bool = False, set_rows: bool = True, inp_embd: bool = True) -> int:
    """The compute buffer llama_context::sched_reserve keeps: the larger of the prompt graph
    (``n_ubatch`` tokens rounded up to a multiple of ``n_seq``, ``n_outputs`` of them output,
    n_ubatch by default) and the one-token-per-sequence graph (n_seq tokens and outputs), both over
    ``n_kv`` cells per stream; one stream per sequence unless ``kv_unified`` (build_attn_inp_kq_mask:
    n_stream = kv_unified ? 1 : n_seqs_unq; llama_batch_allocr::ubatch_reserve). ``mask_f32``: builds before
    PR #23764 (an f32 KQ mask cast to f16 for flash attention: graphs.kq_mask); ``kv_rot`` False: builds before
    PR #21038 (no Hadamard rotation of a quantised cache); ``qkv_order``: before PR #16884; ``set_rows`` False: before
    PR #14959, ``inp_embd`` False: before PR #18898 (graphs.Pass)."""
    n_outputs = n_ubatch if n_outputs is None else min(n_outputs, n_ubatch)
    n_stream = 1 if kv_unified else n_seq
    pp_tokens = pad(n_ubatch, n_seq)          # llama_context::graph_reserve
    shape = with_seqs(shape, n_seq)           # graphs_delta's recurrent part: n_seq sequences, whatever the streams
    dated = dict(mask_f32=mask_f32, kv_rot=kv_rot, qkv_order=qkv_order, set_rows=set_rows, inp_embd=inp_embd)
    pp = build_graph(shape, Pass(pp_tokens, n_outputs, n_kv, n_stream, flash_attn, type_k, type_v, swa_cells, **dated))
    tg = build_graph(shape, Pass(n_seq, n_seq, n_kv, n_stream, flash_attn, type_k, type_v, swa_cells, **dated))
    mm = minimax01_once(shape, Pass(n_ubatch, n_outputs, n_kv, 1, flash_attn, type_k, type_v, swa_cells, **dated))
    if mm is not None:      # minimax-01's third reserve, one sequence (graphs_minimax01.minimax01_once)
        return max(gallocr_size(pp, alignment), gallocr_size(tg, alignment), gallocr_size(mm, alignment))
    once = one_seq_prompt(shape, Pass(n_ubatch, n_outputs, n_kv, 1, flash_attn, type_k, type_v, swa_cells, **dated))
    return max(gallocr_size(pp, alignment), gallocr_size(tg, alignment), gallocr_size(once, alignment) if once else 0)


def compute_buffer(model, *, n_kv: int, n_ubatch: int, flash_attn: bool, type_k: str = "f16", type_v: str = "f16",
                   n_outputs: int | None = None, n_seq: int = 1, kv_unified: bool = False, swa_cells: int = 0,
                   alignment: int = CPU_ALIGNMENT, build=CURRENT, n_rs_seq: int = 0,
                   printed: bool = False) -> ComputeBuffer:
    """llama.cpp's compute buffer for ``model``: exact for the transcribed families, else the estimate;
    ``n_rs_seq``: the context's recurrent rollback snapshots (graphs_delta.with_rs_seq). MiniMax-M3: the larger of
    the reserve context creation prints and the graphs over a full cache (graphs_minimax_m3.filled), what a long
    prompt grows the buffer to; ``printed``: the reserve alone."""
    shape = graph_shape(model, build)
    shape = with_rs_seq(shape, n_rs_seq) if shape is not None else None
    shape = dsv4_context(shape, n_seq, n_rs_seq)        # deepseek4: a stream a sequence, its snapshots
    type_k, type_v = _ggml_type(type_k), _ggml_type(type_v)
    if shape is not None and any(shape.swa) and not swa_cells:
        return ComputeBuffer(estimate_bytes(model, n_kv=n_kv, n_ubatch=n_ubatch, flash_attn=flash_attn), False,
                             "an estimate: the sliding-window cache's cells (swa_cells) were not given")
    if shape is not None and type_k in TYPES and type_v in TYPES:
        at = build or CURRENT

        def sized(of):
            return graph_bytes(of, n_kv=n_kv, n_ubatch=n_ubatch, flash_attn=flash_attn, type_k=type_k, type_v=type_v,
                               n_outputs=n_outputs, n_seq=n_seq, kv_unified=kv_unified, swa_cells=swa_cells,
                               alignment=alignment, mask_f32=at < PR_23764, kv_rot=at >= PR_21038,
                               qkv_order=at < PR_16884, set_rows=at >= PR_14959, inp_embd=at >= PR_18898)
        reserve, full = sized(shape), filled(shape, n_kv)
        grown = sized(full) if full is not None and not printed else 0
        note = (f"MiniMax-M3: {grown / 2**20:,.2f} MiB once a prompt fills the cache (MSA over every position); "
                f"context creation prints {reserve / 2**20:,.2f} MiB" if grown > reserve else "")
        # deepseek2 / gpt-oss before PR #14959's set_rows stores: not transcribed (layouts)
        return ComputeBuffer(max(reserve, grown), not (shape.arch in ("deepseek2", "gpt-oss") and at < PR_14959),
                             note, reserve if grown > reserve else None)
    return ComputeBuffer(estimate_bytes(model, n_kv=n_kv, n_ubatch=n_ubatch, flash_attn=flash_attn), False,
                         f"an estimate: llama.cpp's {model.model_type or 'model'} graph is not transcribed "
                         "(kvmem.engines.llamacpp.compute covers llama, mistral, mixtral, qwen2, qwen3, qwen3_moe, "
                         "gemma2, gemma3 and phi3)")


def llamacpp_compute_buffer(model, *, n_ctx: int, n_ubatch: int = 512, flash_attn: bool = True,
                            cells_per_stream: int | None = None, type_k: str = "f16", type_v: str = "f16",
                            n_outputs: int | None = None, n_seq: int = 1, kv_unified: bool = False,
                            swa_cells: int | None = None, backend: str = "cuda", build=CURRENT,
                            n_rs_seq: int = 0, printed: bool = False) -> ComputeBuffer:
    """llama.cpp's compute buffer on one device for a context of ``n_ctx`` cells (one stream of
    ``cells_per_stream``, n_ctx rounded up to 256 by default): ``backend="cpu"`` the CPU buffer,
    exact for the transcribed families (``compute_buffer``); ``backend="cuda"`` the estimate
    (``estimate_bytes``), which reproduces the published CUDA logs tests/test_sizing.py and
    tests/engines/test_llamacpp_logs.py check (Llama-3-8B n_ctx 512 / 8192: 258.50 / 560.00 MiB,
    Mistral-7B 2048 / 32768: 164.00 / 2144.00 MiB, flash attention off). The CUDA graph is not
    transcribed: those logs come from older builds than the vendored one (this build's CPU graph
    gives 266.50 / 572.01 MiB for the two Llama-3-8B cases: its unused inp_embd input alone is
    8 MiB), so the CUDA figure stays an estimate (``exact=False``)."""
    from ...catalog import as_model
    model = as_model(model)
    n_ub = min(n_ubatch, n_ctx)
    n_kv = cells_per_stream if cells_per_stream is not None else pad(n_ctx, 256)
    if backend == "cpu":
        return compute_buffer(model, n_kv=n_kv, n_ubatch=n_ub, flash_attn=flash_attn, type_k=type_k, type_v=type_v,
                              n_outputs=n_outputs, n_seq=n_seq, kv_unified=kv_unified, swa_cells=swa_cells or 0,
                              build=build, n_rs_seq=n_rs_seq, printed=printed)
    if backend != "cuda":
        raise ValueError(f"backend must be 'cpu' or 'cuda', got {backend!r}")
    return ComputeBuffer(estimate_bytes(model, n_kv=n_kv, n_ubatch=n_ub, flash_attn=flash_attn), False,
                         "an estimate: the CUDA graph is not transcribed (kvmem.engines.llamacpp.compute)")


def llamacpp_compute_bytes(model, *, n_ctx: int, n_ubatch: int = 512, flash_attn: bool = True,
                           cells_per_stream: int | None = None, type_k: str = "f16", type_v: str = "f16",
                           n_outputs: int | None = None, n_seq: int = 1, kv_unified: bool = False,
                           swa_cells: int | None = None, backend: str = "cuda") -> int:
    """The bytes of ``llamacpp_compute_buffer``."""
    return llamacpp_compute_buffer(model, n_ctx=n_ctx, n_ubatch=n_ubatch, flash_attn=flash_attn,
                                   cells_per_stream=cells_per_stream, type_k=type_k, type_v=type_v,
                                   n_outputs=n_outputs, n_seq=n_seq, kv_unified=kv_unified, swa_cells=swa_cells,
                                   backend=backend).bytes


def estimate_bytes(model, *, n_kv: int, n_ubatch: int, flash_attn: bool) -> int:
    """The former estimate, for families whose graph is not transcribed: the largest of
        output    n_ub x (vocab + H)                  logits + the final norm
        attention n_ub x (n_kv x (heads + 1) + 4 H)   flash attention off: KQ, the f32 mask
                  n_ub x (n_kv / 2 + 4 H)             flash attention on: the f16 mask
        ffn       n_ub x (3 I + 2 H)                  gate, up, their product
    x 4 B. Within 0.25x to 1.2x of llama.cpp's CPU buffer on the llama/qwen3moe oracle before
    the graphs were transcribed; not checked on other families."""
    from ...activations import forward_shape
    shape = forward_shape(model)
    h = shape.hidden
    ffn = 3 * shape.intermediate if shape.intermediate else 3 * shape.top_k * shape.moe_intermediate
    attention = n_kv // 2 + 4 * h if flash_attn else n_kv * (shape.heads + 1) + 4 * h
    return 4 * n_ubatch * max(shape.vocab + h, ffn + 2 * h, attention)


def ggml_type_name(name) -> str:
    """A cache type as ggml names it ("float16" -> "f16")."""
    return _ggml_type(name)


def _ggml_type(name) -> str:
    name = str(name).lower()
    return {"float16": "f16", "fp16": "f16", "float32": "f32", "fp32": "f32", "bfloat16": "bf16"}.get(name, name)

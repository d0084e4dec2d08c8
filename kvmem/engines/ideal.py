"""The textbook count: every cached element once, in exact bytes.

Per layer and sequence of t tokens (kvmem.textbook.ideal_layer_bytes):
    full          t x kv_heads x (head_dim_k + head_dim_v) elements
    sliding       min(t, window) x kv_heads x (head_dim_k + head_dim_v) (GPT-Neo's "local" layers too:
                  window_size, gpt_neo_layers)
    chunked       min(t, chunk) x kv_heads x (head_dim_k + head_dim_v)
    mla           t x (kv_lora_rank + qk_rope_head_dim [+ index_head_dim]), one latent for K and V
    linear/SSM    no per-token cache; a fixed state per sequence: (conv_kernel - 1) x conv_channels
                  in the model's dtype + the recurrent elements in the state's own dtype (the
                  config's mamba_ssm_dtype where it names one; kvmem.engines.base.state_bytes)
    compressed    DeepSeek-V4: min(t, window) x head_dim (one row for K and V) + floor(t / rate) x
                  (head_dim + index_head_dim) compressed rows, as K; state: the open window's
                  projected tokens, (t mod rate) x buffer_width kv + gate in the model's dtype,
                  and once a window has closed (CSA) its Ca slice, rate x (head_dim +
                  index_head_dim) in the model's dtype + the same in fp32 for the gate
                  (kvmem.layer.Compressor; modeling_deepseek_v4.py DeepseekV4HCACache/CSACache)
    shared, none  nothing
Element bytes from kvmem.dtypes (ggml blocks and group scales included). With tp the
heads split as in kvmem.engines.base; with pp the largest stage is reported.
For capacity, every token-caching layer is charged for every token (a pool view with
no windows): tokens = kv_memory // bytes per token.
"""

from __future__ import annotations

from dataclasses import replace

from ..configs.fields import Fields
from ..dtypes import dtype
from ..layer import SLIDING, Compressor
from ..model import Model
from ..parallel import layer_heads
from ..textbook import ideal_layer_bytes
from .base import Budget, BudgetRequest, CheckedFamilies, EngineSpec, SizingRules, resolve_dtypes, state_bytes
from .budget import kv_budget
from .results import Capacity, assemble


def gpt_neo_layers(model: Model) -> Model:
    """GPT-Neo with its local layers windowed: each token of a "local" layer attends to the last
    window_size positions, itself included (modeling_gpt_neo.py GPTNeoSelfAttention: the causal mask
    XOR tril(mask, -window_size)), so the textbook count keeps min(t, window_size) of them; which layers
    are local is attention_types expanded (configuration_gpt_neo.py expand_attention_types_params; its
    validate_architecture refuses a length other than num_layers). transformers' own cache keeps every
    token (kvmem's reading of the config, which the hf engine modes size)."""
    if model.model_type != "gpt_neo":
        return model
    f = Fields(model.config, model.model_type)
    types = f.get("attention_types", default=None) or [[["global", "local"], 12]]
    window = f.int("window_size", default=256, minimum=1)
    try:
        kinds = [kind for names, repeat in types for _ in range(repeat) for kind in names]
    except (TypeError, ValueError):
        raise ValueError(f"config field 'attention_types' must list [[kinds...], repeat] pairs as GPT-Neo's "
                         f"config reads them, got {str(types)[:80]}") from None
    if len(kinds) != len(model.layers) or not set(kinds) <= {"global", "local"}:
        raise ValueError(f"config field 'attention_types' expands to {len(kinds)} layer kinds of {sorted(set(kinds))}, "
                         f"but GPT-Neo needs 'global' or 'local' for each of its {len(model.layers)} layers "
                         "(configuration_gpt_neo.py validate_architecture)")
    return replace(model, layers=tuple(replace(layer, kind=SLIDING, window=window) if kind == "local" else layer
                                       for layer, kind in zip(model.layers, kinds, strict=True)))


def layer_rows(model: Model, *, tokens: int, batch: int, kv_dtype, tp: int):
    """Per-layer (K, V, state) bytes on one tensor-parallel rank."""
    k_dtype, v_dtype, _ = resolve_dtypes(model, kv_dtype)
    rows = []
    for layer in model.layers:
        k, v = ideal_layer_bytes(layer, tokens=tokens, batch=batch, k_dtype=k_dtype, v_dtype=v_dtype,
                                 kv_heads=layer_heads(layer, tp))
        state = batch * state_bytes(layer.state, model.dtype, tp) if layer.state else 0
        if layer.compressor:
            state += batch * compressor_state_bytes(layer.compressor, tokens, model.dtype)
        rows.append((k, v, state))
    return rows, k_dtype


def compressor_state_bytes(compressor: Compressor, tokens: int, model_dtype: str) -> int:
    """One sequence's compressor buffers and overlap state (Compressor.state_elements): the
    projections in the model's dtype, the overlap gate in the compressor's gate_dtype (fp32)."""
    own, gate = compressor.state_elements(tokens)
    return dtype(model_dtype).row_bytes(own) + dtype(compressor.gate_dtype).row_bytes(gate)


def estimate(model: Model, *, tokens: int, batch: int, kv_dtype, tp: int, pp: int):
    model = gpt_neo_layers(model)
    rows, k_dtype = layer_rows(model, tokens=tokens, batch=batch, kv_dtype=kv_dtype, tp=tp)
    return assemble(model, "ideal", tokens=tokens, batch=batch, kv_dtype=k_dtype.name, tp=tp, pp=pp,
                    rows=rows)


def capacity(model: Model, *, kv_memory: int, kv_dtype, tp: int, pp: int, max_model_len: int | None):
    if any(layer.compressor for layer in model.layers):
        raise ValueError("the ideal capacity charges every layer a fixed number of bytes per token; a compressed "
                         "layer's rows (one per compress_rate tokens, DeepSeek-V4) have none: estimate() sizes them")
    one_token = estimate(model, tokens=1, batch=1, kv_dtype=kv_dtype, tp=tp, pp=pp)
    per_token = sum(one_token.per_layer) - one_token.state_bytes
    tokens = kv_memory // per_token if per_token else 0
    concurrency = None
    if max_model_len:
        request = estimate(model, tokens=max_model_len, batch=1, kv_dtype=kv_dtype, tp=tp, pp=pp)
        concurrency = kv_memory / request.total_bytes
    return Capacity(model=model.name, engine="ideal", kv_memory=kv_memory, blocks=tokens, tokens=tokens,
                    max_concurrency=concurrency, longest_request_tokens=tokens, block_size=1,
                    k_dtype=one_token.k_dtype, v_dtype=one_token.v_dtype)


def _budget(req: BudgetRequest) -> Budget:
    """Sizing's textbook case: weights + KV, nothing else."""
    total = req.gpu.usable_memory_bytes
    # reserve: the textbook case keeps no fraction back; all that the weights leave holds KV
    return Budget(total, req.weights_bytes, 0, 0, kv_budget("reserve", total=total, weights=req.weights_bytes))


SIZING = SizingRules(budget=_budget, options={"weights_bytes": None}, non_torch_bytes=0)
QUERY_HEADS = "the ideal count splits the query heads evenly over the ranks, as SGLang and TensorRT-LLM assert"
# Every opt-in family (kvmem.configs.families); GPT-Neo's local layers counted over their window (gpt_neo_layers)
FAMILIES = CheckedFamilies(frozenset(), all_but=True)
SPECS = (EngineSpec("ideal", {}, estimate, capacity, SIZING, query_heads_rule=QUERY_HEADS, families=FAMILIES),)

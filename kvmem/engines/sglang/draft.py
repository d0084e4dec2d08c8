"""SGLang's draft KV pool for EAGLE / MTP speculative decoding: what it takes from the target's pool.

The rule (SGLang 0.5.23, python/sglang/srt/model_executor/pool_configurator.py#L259-L311,
DefaultPoolConfigurator.__init__): for EAGLE and STANDALONE drafts (MTP included) that reuse the target's
attention, the target's cell grows by the draft's
    draft_cell = int(cell x draft_layers / target_layers)
so both pools hold max_total_num_tokens = available // (cell + draft_cell) tokens (page-rounded,
calculate_pool_sizes #L907-L916), and the draft worker builds its pool at that size with the padding page
(mem_cache/kv_cache_configurator.py#L733-L739; memory_pool.py's ``size + page_size`` rows):
    draft pool bytes = (max_total_num_tokens + page_size) x draft_cell
``draft_layers``: speculative_config's eagle_draft_num_layers -- 1 for an EAGLE head, the model's
num_nextn_predict_layers for MTP. Under DP attention SGLang sizes it per attention-TP group (sglang#38202);
kvmem takes tp = the attention TP size here.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...records import Record


@dataclass(frozen=True)
class DraftPool(Record):
    target_tokens: int          # max_total_num_tokens with the draft in the cell
    tokens_without_draft: int   # what the target alone would hold
    cell_bytes: int             # the target's cell per rank
    draft_cell_bytes: int       # int(cell x draft_layers / layers)
    draft_pool_bytes: int       # (target_tokens + page_size) x draft_cell


def draft_pool(model, *, kv_memory: int, draft_layers: int, tp: int = 1, kv_dtype="auto",
               page_size: int = 1) -> DraftPool:
    """SGLang's target and draft pools for ``kv_memory`` bytes per GPU and ``draft_layers`` draft layers."""
    from ...engines import capacity
    if isinstance(draft_layers, bool) or not isinstance(draft_layers, int) or draft_layers < 1:
        raise ValueError(f"draft_layers must be a positive integer (1 for EAGLE, the MTP layers), got {draft_layers!r}")
    cap = capacity(model, engine="sglang", kv_memory=kv_memory, kv_dtype=kv_dtype, tp=tp, max_model_len=None,
                   page_size=page_size)
    d = cap.details
    if len(d.pools) != 1:
        raise ValueError(f"{model.name}: SGLang sizes a hybrid model's draft pools in its hybrid configurators "
                         "(pool_configurator.py HybridSWAPoolConfigurator, the Mamba path); kvmem sizes the "
                         "one-pool MHA and MLA draft only")
    layers = len(d.pools[0]["layers"])
    cell = d.cell_bytes_per_token
    draft_cell = cell * draft_layers // layers
    tokens = kv_memory // (cell + draft_cell) // page_size * page_size
    return DraftPool(target_tokens=tokens, tokens_without_draft=d.max_total_num_tokens, cell_bytes=cell,
                     draft_cell_bytes=draft_cell, draft_pool_bytes=(tokens + page_size) * draft_cell)

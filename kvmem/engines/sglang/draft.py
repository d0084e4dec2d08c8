"""SGLang's draft KV pool for EAGLE / MTP speculative decoding: what it takes from the target's pool.

The rule (SGLang 0.5.23, python/sglang/srt/model_executor/pool_configurator.py#L259-L311,
DefaultPoolConfigurator.__init__): for EAGLE and STANDALONE drafts (MTP included) that reuse the target's
attention, the target's cell grows by the draft's
    draft_cell = int(cell x draft_layers / target_layers)
so both pools hold max_total_num_tokens = available // (cell + draft_cell) tokens (page-rounded,
calculate_pool_sizes #L907-L916), and the draft worker builds its pool at that size with the padding page
(mem_cache/kv_cache_configurator.py#L733-L739; memory_pool.py's ``size + page_size`` rows):
    draft pool bytes = (max_total_num_tokens + page_size) x draft_cell
``draft_layers``: spec_aux_config.eagle_draft_num_layers (model_executor/model_runner_components/
spec_aux_hidden_state.py#L140-L178): the draft's num_nextn_predict_layers when its config has one, else, with a
--speculative-draft-model-path, max(num_hidden_layers, attention layers) of the draft; a path-less NEXTN/EAGLE
reads the target's num_nextn_predict_layers (its MTP layers). Under DP attention SGLang sizes it per
attention-TP group (sglang#38202); kvmem takes tp = the attention TP size here.

The engine options (SGLang's own names, python/sglang/srt/arg_groups/fields/spec.py#L31-L69):
    speculative_algorithm         EAGLE, EAGLE3, NEXTN (resolved to EAGLE, arg_groups/speculative_hook.py
                                  #L109-L116), STANDALONE: a draft pool; NGRAM: none; other algorithms
                                  (DFLASH, DSPARK, UNO, FROZEN_KV_MTP) size their draft elsewhere: refused
    speculative_draft_model_path  the draft (a preset or a kvmem Model; its layers as above)
    speculative_num_steps, speculative_eagle_topk, speculative_num_draft_tokens
                                  written to the command; the pool's size does not read them (the
                                  configurator reads eagle_draft_num_layers only)
Hybrid sliding-window targets (HybridSWAPoolConfigurator, pool_configurator.py#L729-L811): the draft's layers
split into eagle_draft_swa_num_layers sliding ones -- the draft config's sliding layers when it is a hybrid-SWA
model (a path-less draft reads the target's: spec_aux_hidden_state.py#L179-L182), at most the draft's layers --
and full ones; each prices as a target layer of its kind, so the cell is
    full x (F + d_full) + ratio x swa x (S + d_swa)
and the full/SWA split follows from it (entry._split_swa). Sized here: one-pool MHA or MLA targets and hybrid
SWA targets with full layers, on one pipeline stage. Mamba hybrid targets (Qwen3-Next, Qwen3.5, Nemotron-H) with
their own MTP head as the draft (NEXTN / EAGLE without a draft path; mamba_draft): the cell's share from the target
config's num_nextn_predict_layers over its attention layers (none in the published configs: no share, and the
draft worker's one-layer pool comes out of the memory outside mem_fraction_static), the verify width's states
reserved beside the state slots (mamba.state_pool), the requests capped at slots // (3 + 2). Refused by name: a
separate draft model beside a Mamba target, Inkling's MTP, all-sliding targets, mtp_local_layer_ids configs,
DeepSeek-V4 (DSV4PoolConfigurator), pp > 1. Beside a hybrid-SWA target a draft model's worker builds its own pools
from the draft's config at the target's sizes (entry.capacity: their bytes and log lines); the pools of the
target's own MTP head there (one draft worker a depth) are not modelled: the estimate gives the draft's rows at
the configurator's prices (_draft_pool_bytes_per_token, #L805-L811). DSA targets: dsa_draft_cell_bytes.
Not counted: the draft's weights (loaded after the pool is sized, out of 1 - mem_fraction_static; sglang#36452).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...layer import LINEAR, SLIDING
from ...model import Model
from ...records import Record
from ..declared import Option

__all__ = ["DRAFT_DEFAULTS", "DECLARED", "DraftPool", "draft_pool", "split", "draft_layers", "draft_cell_bytes",
           "DraftSpec", "check_target", "draft_pool_of", "mamba_draft", "is_mamba_target", "verify_width", "MTP_HEADS"]

DRAFT_DEFAULTS = {"speculative_algorithm": None, "speculative_draft_model_path": None,
                  "speculative_num_steps": None, "speculative_eagle_topk": None,
                  "speculative_num_draft_tokens": None}
SPECULATIVE_MAX_RUNNING_REQUESTS = 48   # arg_groups/speculative_hook.py#L1086-L1094: without --max-running-requests
WITH_POOL = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE")   # spec_info.py is_eagle / is_standalone (NEXTN -> EAGLE)
ALGORITHMS = WITH_POOL + ("NGRAM",)
DECLARED = (
    Option("speculative_algorithm", None, choices=ALGORITHMS,
           help="--speculative-algorithm: EAGLE/EAGLE3/NEXTN/STANDALONE add a draft KV pool beside the target's "
                "(the cell grows by int(cell x draft layers / layers)); NGRAM adds none"),
    Option("speculative_draft_model_path", None, model=True,
           help="--speculative-draft-model-path: the draft (its num_nextn_predict_layers, else its layers); "
                "without it NEXTN/EAGLE use the model's own MTP layers"),
    Option("speculative_num_steps", None, help="--speculative-num-steps (written to the command; not in the pool)"),
    Option("speculative_eagle_topk", None, help="--speculative-eagle-topk (written to the command; not in the pool)"),
    Option("speculative_num_draft_tokens", None,
           help="--speculative-num-draft-tokens (written to the command; not in the pool)"),
)


@dataclass(frozen=True)
class DraftSpec:
    algorithm: str | None
    draft: Model | None
    layers: int          # eagle_draft_num_layers: the draft's share of the cell; 0: none
    swa_layers: int = 0  # eagle_draft_swa_num_layers, at most ``layers`` (hybrid-SWA targets only)
    pool_layers: int | None = None   # the draft worker's pool layers where they differ from ``layers`` (Mamba targets)
    draft_tokens: int = 0            # the verify width D whose states a Mamba target reserves (mamba_draft)

    @property
    def pool(self) -> int:
        """Layers of the draft worker's own pool (0: no draft pool)."""
        return self.layers if self.pool_layers is None else self.pool_layers


# sglang@v0.5.23 python/sglang/srt/configs/model_config.py#L1134-L1136, #L1159-L1181, #L1198-L1203: the hybrids whose
# checkpoint a path-less NEXTN/EAGLE draft reads again as its own MTP head (num_nextn_predict_layers 1)
MTP_HEADS = frozenset({"Qwen3NextForCausalLM", "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration",
                       "Qwen3_5ForCausalLM", "Qwen3_5MoeForCausalLM", "NemotronHForCausalLM",
                       "NemotronHPuzzleForCausalLM"})
# sglang@v0.5.23 python/sglang/srt/arg_groups/speculative_hook.py#L1430-L1461 _auto_choose_speculative_params:
# (steps, topk, draft tokens) when --speculative-num-steps is not given
AUTO_PARAMS = {"STANDALONE": (3, 1, 4), "LlamaForCausalLM": (5, 4, 8), "Grok1ForCausalLM": (5, 4, 8),
               "Grok1VForCausalLM": (5, 4, 8)}
DEFAULT_PARAMS = (3, 1, 4)


def verify_width(model: Model, algorithm: str, spec: dict) -> int:
    """--speculative-num-draft-tokens as SGLang 0.5.23 resolves it (speculative_hook.py#L1158-L1173, #L1255-L1266)."""
    steps, topk, tokens = (spec.get(name) for name in ("speculative_num_steps", "speculative_eagle_topk",
                                                       "speculative_num_draft_tokens"))
    if steps is None:
        if topk is not None or tokens is not None:
            raise ValueError("speculative_eagle_topk or speculative_num_draft_tokens without speculative_num_steps: "
                             "SGLang 0.5.23 asserts both unset then (arg_groups/speculative_hook.py "
                             "_handle_eagle_family), and picks all three itself")
        arch = model.facts.architectures[0] if model.facts.architectures else None
        return AUTO_PARAMS.get(algorithm, AUTO_PARAMS.get(arch or "", DEFAULT_PARAMS))[2]
    if topk == 1:
        return steps + 1   # "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1"
    if topk is None or tokens is None:
        raise ValueError("speculative_num_steps without speculative_eagle_topk and speculative_num_draft_tokens: "
                         "give them (with topk 1 SGLang makes the draft tokens steps + 1)")
    return tokens


def is_mamba_target(model: Model) -> bool:
    """A linear/Mamba hybrid (not hybrid SWA, not Inkling): its draft is sized by mamba_draft."""
    from .inkling import is_inkling
    from .pools import is_hybrid_swa
    return (not is_inkling(model) and not is_hybrid_swa(model)
            and any(layer.kind == LINEAR or layer.state is not None for layer in model.layers))


def mamba_draft(model: Model, spec: dict) -> DraftSpec:
    """A speculative draft beside a Mamba hybrid target, as SGLang 0.5.23 runs the target's own MTP head:
    the cell's share from the target config's num_nextn_predict_layers (a path-less draft reads the TARGET config,
    model_runner_components/spec_aux_hidden_state.py#L166-L178; none there, no share: the draft's pool then comes
    out of the memory outside mem_fraction_static); the draft worker's pool one attention layer of the target's
    shape at the target's #tokens (mem_cache/kv_cache_configurator.py#L2605-L2622 _build_hybrid_linear_kv_pool:
    full_attention_layer_ids [0] for a draft worker); the verify width D (verify_width), whose states the target
    reserves beside its state slots (mamba.state_pool)."""
    algorithm = spec.get("speculative_algorithm")
    if algorithm is None or str(algorithm).upper() not in WITH_POOL:
        return draft_layers(model, spec)
    algorithm = str(algorithm).upper()
    if spec.get("speculative_draft_model_path") is not None or algorithm == "STANDALONE":
        raise ValueError(f"{model.name}: a separate draft model beside a Mamba hybrid target: SGLang's draft worker "
                         "builds its pool from the draft's own config (kv_cache_configurator.py "
                         "_build_token_to_kv_pool), which kvmem does not size; the target's own MTP head (NEXTN or "
                         "EAGLE without speculative_draft_model_path) is sized")
    arch = model.facts.architectures[0] if model.facts.architectures else None
    if arch not in MTP_HEADS:
        raise ValueError(f"{model.name}: SGLang 0.5.23 reads a path-less draft as the target's MTP head only for "
                         f"{', '.join(sorted(MTP_HEADS))} (configs/model_config.py), not {arch}: give a draft model, "
                         "which kvmem does not size beside a Mamba hybrid")
    cfg = model.config or {}
    text = cfg["text_config"] if isinstance(cfg.get("text_config"), dict) else cfg
    nextn = text.get("num_nextn_predict_layers")   # configs/model_config.py#L1602-L1604 (the target's, unrewritten)
    if nextn is not None and (isinstance(nextn, bool) or not isinstance(nextn, int) or nextn < 0):
        raise ValueError(f"num_nextn_predict_layers must be a non-negative integer, got {nextn!r}")
    return DraftSpec(algorithm, None, nextn or 0, pool_layers=1, draft_tokens=verify_width(model, algorithm, spec))


def split(options: dict) -> tuple[dict, dict]:
    """(the speculative options, the rest): the pool functions take only the rest."""
    spec = {name: options[name] for name in DRAFT_DEFAULTS if name in options}
    return spec, {name: value for name, value in options.items() if name not in DRAFT_DEFAULTS}


def _draft_model(value) -> Model | None:
    if value is None or isinstance(value, Model):
        return value
    if isinstance(value, (str, dict)):
        from ...catalog import as_model
        return as_model(value)
    raise ValueError("speculative_draft_model_path must be a preset name, a config dict or a kvmem Model, got "
                     f"{type(value).__name__}")


def draft_layers(model: Model, spec: dict) -> DraftSpec:
    """The algorithm, the draft and eagle_draft_num_layers as SGLang 0.5.23 resolves them (module docstring)."""
    algorithm = spec.get("speculative_algorithm")
    for name in ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens"):
        value = spec.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if algorithm is None:
        if any(spec.get(name) is not None for name in DRAFT_DEFAULTS):
            raise ValueError("speculative options without speculative_algorithm: SGLang 0.5.23 runs no draft then; "
                             f"give one of {', '.join(ALGORITHMS)}")
        return DraftSpec(None, None, 0)
    if not isinstance(algorithm, str) or algorithm.upper() not in ALGORITHMS:
        raise ValueError(f"speculative_algorithm {algorithm!r}: kvmem sizes SGLang 0.5.23's {', '.join(ALGORITHMS)}; "
                         "DFLASH, DSPARK, UNO and FROZEN_KV_MTP size their draft pools in their own code "
                         "(pool_configurator.py#L319-L340 for DFLASH), which kvmem does not follow")
    algorithm = algorithm.upper()
    draft = _draft_model(spec.get("speculative_draft_model_path"))
    if algorithm == "NGRAM":
        return DraftSpec(algorithm, draft, 0)
    # sglang@v0.5.23 python/sglang/srt/model_executor/model_runner_components/spec_aux_hidden_state.py#L140-L178
    source = draft if draft is not None else model
    if source.mtp_layers:
        layers = source.mtp_layers
    elif draft is not None:
        layers = draft.num_layers
    else:
        raise ValueError(f"speculative_algorithm {algorithm} without speculative_draft_model_path needs the model's "
                         f"MTP layers (num_nextn_predict_layers), and {model.name} has none: give the draft")
    # sglang@v0.5.23 python/sglang/srt/model_executor/model_runner_components/spec_aux_hidden_state.py#L179-L182
    # (the draft config's SWA layers when it is hybrid SWA) and pool_configurator.py#L750-L754 (at most its layers)
    if (source.config or {}).get("mtp_local_layer_ids") is not None:
        raise ValueError(f"{source.name}: mtp_local_layer_ids places the draft's layers in SGLang's full-capacity SWA "
                         "rows (pool_configurator.py#L739-L748), which kvmem does not size")
    sliding = sum(layer.kind == SLIDING for layer in source.layers)
    return DraftSpec(algorithm, draft, layers, min(sliding, layers))


def draft_cell_bytes(cell: int, layers: int, target_layers: int) -> int:
    """int(cell x draft layers / target layers) (sglang@v0.5.23
    python/sglang/srt/model_executor/pool_configurator.py#L310-L313)."""
    return cell * layers // target_layers


# sglang@v0.5.23 python/sglang/srt/mem_cache/kv_cache_configurator.py#L748-L767 (each MTP depth clones the conv-state
# pool), python/sglang/srt/model_executor/pool_configurator.py#L735-L758 (mtp_local_layer_ids), models/inkling.py
# #L1771-L1856 InklingForConditionalGenerationMTP
INKLING_DRAFT = ("a draft beside Inkling (its own MTP head, InklingForConditionalGenerationMTP, or another model): "
                 "SGLang 0.5.23 runs one draft worker per MTP depth, each with its own window and full pools and its "
                 "own clone of the conv-state pool (kv_cache_configurator.py clone_with_new_mamba), and prices "
                 "mtp_local_layer_ids depths as full-capacity SWA rows (pool_configurator.py): kvmem does not size "
                 "those pools")


def check_target(model: Model, layout, pp: int, own_head: bool = False) -> None:
    """The targets whose draft this module sizes (module docstring); the others refused by name. ``own_head``: a
    Mamba target's own MTP head (mamba_draft)."""
    if pp > 1:
        raise ValueError("a speculative draft with pp > 1: SGLang runs the draft on the last stage only; kvmem does "
                         "not model its pool there")
    if layout.linear and not own_head:
        raise ValueError(f"{model.name}: a draft beside a target with a conv/Mamba state and a sliding-window pool "
                         "(Inkling's InklingForConditionalGenerationMTP): SGLang sizes it in its hybrid configurators "
                         "with the state's own draft slots, which kvmem does not follow; kvmem sizes the one-pool "
                         "MHA/MLA, hybrid-SWA and Mamba-hybrid (the target's own MTP head) drafts")
    if layout.swa and not layout.full:
        raise ValueError(f"{model.name}: every layer sliding: SGLang prices an all-SWA target's draft in its own "
                         "branch (pool_configurator.py#L786-L796), which kvmem does not size")
    if layout.sparse_index:
        raise ValueError(f"{model.name}: a draft beside MiniMax-M3's sparse indexer pools (MiniMaxSparseKVPool): "
                         "kvmem does not size its indexer rows in the draft's pool")


def draft_pool_of(layout, num_tokens: int, layers: int, dtype: str):
    """The draft worker's pool as its "KV Cache is allocated" line reports it: the target's #tokens and padding
    page, ``layers`` layers shaped as the target's (SGLang's sizing assumes the draft shares the target's
    per-layer KV size, pool_configurator.py#L259-L260)."""
    from .pools import Pool, index_bytes
    n = num_tokens + layout.page_size
    # a DSA draft keeps its indexer keys on every layer (pool_configurator.py#L302-L306: allocate_all_layers)
    index = index_bytes(num_tokens, layout.page_size, layout.index_row) * layers
    return Pool(role="draft", layout=layout.kind, num_tokens=num_tokens, page_size=layout.page_size, layers=(),
                k_bytes=n * layout.k_row["full"] * layers + index, v_bytes=n * layout.v_row["full"] * layers,
                dtype=dtype)


def dsa_draft_cell_bytes(layout, stage: range, cell: int, layers: int) -> int:
    """A DSA target's draft share of the cell: the latent int(kv_cell x draft layers / target layers) and the indexer
    on every draft layer (sglang@v0.5.23 python/sglang/srt/model_executor/pool_configurator.py#L282-L309: the
    target's indexer taken out of the cell first, the draft's added with allocate_all_layers)."""
    target_index = layout.index_row * sum(1 for i in stage if i in layout.indexed)
    return int((cell - target_index) * layers / len(stage)) + layout.index_row * layers


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
    draft_cell = draft_cell_bytes(cell, draft_layers, layers)
    tokens = kv_memory // (cell + draft_cell) // page_size * page_size
    return DraftPool(target_tokens=tokens, tokens_without_draft=d.max_total_num_tokens, cell_bytes=cell,
                     draft_cell_bytes=draft_cell, draft_pool_bytes=(tokens + page_size) * draft_cell)

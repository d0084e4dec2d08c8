"""Each layer's attention kind, by the layout rule of its family (kvmem.configs.layers gives the shapes).

``layer_types`` (or ``layers_block_type``) is read name by name where a config gives it
(LAYER_TYPE_NAMES); else the family's layout rule applies (kvmem.configs.layouts: one table,
LAYOUTS, of every layout's rule and its source). Every kind returned is a ``Kind``; the
reader's own three (HYBRID, HYBRID_SLIDING, SPARSE) become layers in kvmem.configs.layers.
"""

from __future__ import annotations

from ..errors import ConfigError
from ..layer import CHUNKED, FULL, LINEAR, NONE, SLIDING, Kind
from ..units import show_value
from .derived import DERIVED_LAYER_TYPES
from .families import Family
from .fields import Fields, check_int
from .layouts import layout_kinds

__all__ = ["LAYER_TYPE_NAMES", "layer_count", "kinds_of"]

HYBRID, HYBRID_SLIDING, SPARSE = Kind.HYBRID, Kind.HYBRID_SLIDING, Kind.SPARSE

LAYER_TYPE_NAMES = {
    "full_attention": FULL, "attention": FULL, "global": FULL, "full": FULL,
    "sliding_attention": SLIDING, "sliding": SLIDING, "local": SLIDING,
    "chunked_attention": CHUNKED,
    "linear_attention": LINEAR, "mamba": LINEAR, "mamba2": LINEAR, "conv": LINEAR,
    "hybrid": HYBRID,            # attention with a state beside it in one layer (Falcon-H1, Inkling, ZAYA)
    "hybrid_sliding": HYBRID_SLIDING,     # sliding attention with a state beside it (Inkling, ZAYA)
    "indexed_attention": FULL,   # DeepSeek sparse attention: a full layer whose indexer picks the keys
    # its legacy name (GLM-5.2's files): configuration_utils.py _LEGACY_LAYER_TYPE_REMAP#L93-L98
    "deepseek_sparse_attention": FULL,
    "moe": NONE, "mlp": NONE, "dummy": NONE,
}

_NEMOTRON_LAYER_LISTS = ("hybrid_override_pattern", "layers_block_type", "layer_types")


def layer_count(f: Fields) -> int:
    """num_hidden_layers (or its spellings); Nemotron-3 configs give only ``layers_block_type``."""
    if f.model_type == "longcat_flash":
        return _longcat_layers(f)
    if f.model_type == "hrm_text" and not f.has("num_layers_per_stack"):
        # HrmTextConfig.__post_init__ (transformers@5.24.0 models/hrm_text/configuration_hrm_text.py#L109-L115):
        # a file without num_layers_per_stack gives the per-stack count as num_hidden_layers, which becomes
        # per_stack x H_cycles x (L_cycles + 1): one cache layer per attention call of the recurrent forward
        per_stack = f.int("num_hidden_layers")
        return check_int("num_hidden_layers", per_stack * f.int("H_cycles") * (f.int("L_cycles") + 1))
    if f.model_type == "nemotron_h" and not any(f.has(n) for n in _NEMOTRON_LAYER_LISTS):
        raise ConfigError("model_type 'nemotron_h' needs hybrid_override_pattern or layers_block_type: without "
                          "them NemotronHConfig builds its 4-layer default (mamba, moe, attention, mlp) whatever "
                          "num_hidden_layers says (transformers@5.24.0 models/nemotron_h/configuration_nemotron_h.py"
                          "#L174-L186), which kvmem does not take for the model")
    if f.model_type == "nemotron_h" and not any(f.has(n) for n in ("num_hidden_layers", "n_layer")):
        blocks = f.cfg.get("layers_block_type")
        if isinstance(blocks, list):
            return check_int("num_hidden_layers", len(blocks))
    return f.int("num_hidden_layers", "n_layer", "num_layers", "n_layers", "layers")


def _longcat_layers(f: Fields) -> int:
    """LongCat-Flash: two MLA attentions per decoder layer, each its own cache layer
    (modeling_longcat_flash.py: layer_idx * 2 + i); configuration_longcat_flash.py derives
    num_hidden_layers = 2 x num_layers, and a num_hidden_layers the file gives sets num_layers to half."""
    if f.has("num_hidden_layers"):
        given = f.int("num_hidden_layers")
        if given % 2 or (f.has("num_layers") and f.int("num_layers") * 2 != given):
            raise ConfigError(f"config field 'num_hidden_layers' ({given}) must be twice 'num_layers' "
                              f"({f.get('num_layers', default=None)}) for model_type 'longcat_flash': two "
                              "attention layers per decoder layer")
        return given
    return 2 * f.int("num_layers")


_BLOCK_TYPE_LAYOUTS = ("nemotron_h", "granite_hybrid", "bamba")

# The layouts whose layers all keep a state beside their attention, and the hybrid kinds each reads.
HYBRID_KINDS = {"falcon_h1": {HYBRID}, "inkling": {HYBRID, HYBRID_SLIDING},
                "inkling_loop": {HYBRID, HYBRID_SLIDING}, "zaya": {HYBRID, HYBRID_SLIDING}}


def _named_kinds(f: Fields, layout: str, n_layers: int) -> list[Kind] | None:
    """``layer_types`` (or ``layers_block_type``) read name by name; None when absent."""
    field = "layer_types"
    given = f.get("layer_types", default=None)
    if given is None and layout in _BLOCK_TYPE_LAYOUTS:
        field, given = "layers_block_type", f.get("layers_block_type", default=None)
    if given is None:
        return None
    if (layout == "step3p5" and isinstance(given, list)
            and len(given) == n_layers + f.int("num_nextn_predict_layers", default=0, minimum=0)):
        # configuration_step3p7.py Step3p7TextConfig.__post_init__: a layer_types padded with the MTP
        # layers' types is cut to num_hidden_layers (the rest is mtp_layer_types)
        given = given[:n_layers]
    if not isinstance(given, list) or len(given) != n_layers:
        raise ConfigError(f"{field} must list one type per layer ({n_layers}), "
                          f"got {len(given) if isinstance(given, list) else show_value(given)}")
    kinds = []
    for i, name in enumerate(given):
        kind = LAYER_TYPE_NAMES.get(name) if isinstance(name, str) else None
        if layout == "minimax_m3" and name == "minimax_m3_sparse":
            kind = SPARSE       # a full layer that also keeps an indexer key (modeling_minimax_m3_vl.py)
        hybrid = HYBRID_KINDS.get(layout)
        if kind is None or (kind not in hybrid if hybrid else kind in (HYBRID, HYBRID_SLIDING)):
            raise ConfigError(f"{field}[{i}] is {show_value(name)}: a layer type kvmem does not read for "
                              f"model_type {f.model_type!r}")
        kinds.append(kind)
    return kinds


def kinds_of(f: Fields, family: Family, n_layers: int) -> list[Kind]:
    """Every layer's kind: ``layer_types`` (or ``layers_block_type``) when given, else the pattern the config
    class writes in its place (DERIVED_LAYER_TYPES), else the family rule."""
    kinds = _named_kinds(f, family.layout, n_layers)
    derived = DERIVED_LAYER_TYPES.get(f.model_type)
    if kinds is None and derived is not None:     # the config class's own pattern (kvmem.configs.derived)
        kinds = [derived[0](i, n_layers) for i in range(n_layers)]
    elif kinds is None:
        kinds = layout_kinds(f, family.layout, n_layers)
    if family.layout == "gemma4" and kinds[-1] != FULL:
        kinds[-1] = FULL   # Gemma4TextConfig.__post_init__: "Last layer must use full_attention"
    return kinds

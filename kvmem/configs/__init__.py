"""Hugging Face ``config.json`` -> a Model's fields (kvmem.Model.from_hf_config builds it), refusing what it
does not fully understand.

    files      the file's text, read within bounds (size, nesting, number length)
    fields     one field: the first spelling set, else the transformers class default
    families   the model_types kvmem reads and how; everything else refused by name
    reads      the fields that shape a cache and which each layout reads; the rest refused by name
    kinds      each layer's attention kind, by its family's layout rule
    layers     each layer's cache shape: heads, widths, window, latent, shared source, state
    states     linear-attention / SSM states per sequence
    params     parameter counts and the MoE shape, by family
    build      the Model's fields: layers, dtype, parameters, facts
"""

from ..errors import ConfigError
from .build import custom_config, model_fields
from .families import FAMILIES, Family, family_of
from .fields import DEFAULT_FIELD_LIMIT, FIELD_LIMITS, Fields
from .files import MAX_CONFIG_BYTES, MAX_NESTING, load_config
from .reads import CACHE_FIELDS

__all__ = ["ConfigError", "model_fields", "load_config", "custom_config", "Fields", "FIELD_LIMITS",
           "DEFAULT_FIELD_LIMIT", "MAX_CONFIG_BYTES", "MAX_NESTING", "FAMILIES", "Family", "family_of",
           "CACHE_FIELDS"]

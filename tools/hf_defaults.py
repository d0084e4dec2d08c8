"""Write kvmem/data/hf_defaults.json: the defaults transformers' config classes fill in.

Real config.json files omit fields whose value is the config class default (Gemma-3's
text_config has no head counts). kvmem's core must not import transformers, so the
defaults it needs are read here, once, from the installed transformers and kept as data.

    .venv/bin/python tools/hf_defaults.py      # rewrites kvmem/data/hf_defaults.json
"""

import dataclasses
import json
import pathlib

import transformers
from transformers import CONFIG_MAPPING

from kvmem.configs.families import FAMILIES  # the families kvmem reads

SKIP = {"layer_types", "no_rope_layers", "moe_layers", "mlp_layer_types", "architectures",
        "id2label", "label2id", "rope_parameters", "rope_scaling", "mtp_layers_block_type",
        "transformers_version", "dtype", "torch_dtype"}
PRIVATE = {"_sliding_window_pattern": "sliding_window_pattern"}


def text_config_classes() -> dict:
    """model_type -> config class, for every decoder config transformers defines: the classes of
    CONFIG_MAPPING and the text-model classes nested in them (``text_config``)."""
    classes = {}
    for model_type, cls in CONFIG_MAPPING.items():
        classes.setdefault(model_type, cls)
        try:
            text = cls().get_text_config(decoder=True)
        except Exception:  # a config class that cannot be built with its defaults: its text part unknown
            continue
        classes.setdefault(text.model_type, type(text))
    return classes


def defaults_of(cls) -> dict:
    """The declared defaults of the config class (not values derived in __post_init__,
    such as Llama's head_dim = hidden_size // num_attention_heads)."""
    values = {}
    for field in dataclasses.fields(cls):
        key, value = field.name, field.default
        if key in SKIP or key.startswith("_") or value is dataclasses.MISSING:
            continue
        if isinstance(value, (bool, int, float, str)) or value is None:
            values[key] = value
    for private, public in PRIVATE.items():
        value = getattr(cls(), private, None)
        if value is not None and public not in values:
            values[public] = value
    return values


def main():
    out = {"source": f"transformers {transformers.__version__}, defaults of each "
                     "configuration_<model_type>.py config class (tools/hf_defaults.py)",
           "defaults": {}}
    classes = text_config_classes()
    for model_type in sorted(FAMILIES):
        if model_type in classes:
            out["defaults"][model_type] = defaults_of(classes[model_type])
    path = pathlib.Path(__file__).resolve().parent.parent / "kvmem" / "data" / "hf_defaults.json"
    path.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    print(f"wrote {len(out['defaults'])} model types to {path}")


if __name__ == "__main__":
    main()

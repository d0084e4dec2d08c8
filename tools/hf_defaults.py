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

MODEL_TYPES = [
    "llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "qwen3_next",
    "qwen3_5_text", "qwen3_5_moe_text", "gemma", "gemma2", "gemma3_text", "gemma3n_text", "phi3",
    "phi", "falcon", "gpt2", "gpt_neox", "gpt_oss", "deepseek_v2", "deepseek_v3", "deepseek_v32",
    "llama4_text", "glm4", "glm4_moe", "cohere", "cohere2", "jamba", "nemotron_h", "starcoder2",
    "olmo2", "falcon_h1", "granite", "exaone4", "minimax", "ministral",
]
SKIP = {"layer_types", "no_rope_layers", "moe_layers", "mlp_layer_types", "architectures",
        "id2label", "label2id", "rope_parameters", "rope_scaling", "mtp_layers_block_type",
        "transformers_version", "dtype", "torch_dtype"}
PRIVATE = {"_sliding_window_pattern": "sliding_window_pattern"}


def defaults_of(model_type: str) -> dict:
    """The declared defaults of the config class (not values derived in __post_init__,
    such as Llama's head_dim = hidden_size // num_attention_heads)."""
    cls = CONFIG_MAPPING[model_type]
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
    for model_type in MODEL_TYPES:
        if model_type in CONFIG_MAPPING:
            out["defaults"][model_type] = defaults_of(model_type)
    path = pathlib.Path(__file__).resolve().parent.parent / "kvmem" / "data" / "hf_defaults.json"
    path.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    print(f"wrote {len(out['defaults'])} model types to {path}")


if __name__ == "__main__":
    main()

"""Print kvmem.configs.wrappers.TEXT_MODEL_TYPES from the installed transformers: for every config class
with a ``text_config`` sub-config, the model_type of the text config its default instance builds
(``cls().get_text_config(decoder=True).model_type``). Run with .venv/bin/python; paste the output."""

import json
import warnings

import transformers
from transformers.models.auto.configuration_auto import CONFIG_MAPPING


def text_model_types() -> dict[str, str]:
    out = {}
    for model_type in sorted(CONFIG_MAPPING.keys()):
        cls = CONFIG_MAPPING[model_type]
        if "text_config" not in (getattr(cls, "sub_configs", None) or {}):
            continue
        try:
            out[model_type] = cls().get_text_config(decoder=True).model_type
        except Exception:   # a class that cannot build its defaults (gemma4_assistant): left out
            continue
    return out


if __name__ == "__main__":
    warnings.filterwarnings("ignore")
    transformers.logging.set_verbosity_error()
    table = text_model_types()
    print(f"# transformers {transformers.__version__}: {len(table)} wrappers")
    print(json.dumps(table, indent=1, sort_keys=True))

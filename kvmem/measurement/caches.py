"""The real cache objects, empty, per engine: transformers 5.24's or the seed's, on a torch device.

``hf-dynamic`` is ``DynamicCache(config=...)``, ``hf-static`` ``StaticCache`` (``max_cache_len``
defaults to the tokens), ``hf-quantized`` ``QuantizedCache`` with the hqq, quanto or fp8 backend
(``backend_problem`` says when one cannot run here); ``toy`` is the seed's per-layer [K, V]
list grown by ``torch.cat``. The transformers config object is built from the model's own
config.json (kvmem's preset data): no weights, no Hub, no download. A transformers cache is
empty until its first update, so building one allocates no K/V.
"""

from __future__ import annotations

import contextlib
import warnings

from ..model import Model

# Published model_types transformers reads with another family's config class.
_SAME_AS = {"kimi_k2": "deepseek_v3"}


def resolve_device(device: str):
    import torch
    name = str(device).strip().lower()
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name != "cpu" and not name.startswith("cuda"):
        raise ValueError(f"device must be 'cpu', 'cuda', 'cuda:N' or 'auto', got {device!r}")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} asked for, but torch {torch.__version__} sees no CUDA GPU")
    dev = torch.device(name)
    if dev.type == "cuda" and dev.index is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    return dev


def torch_dtype(name: str):
    import torch
    return {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[name]


@contextlib.contextmanager
def quiet_transformers():
    """transformers' config warnings off; and hqq's import of torch.utils.mkldnn, which trips
    torch 2.13's own DeprecationWarning for torch.jit.script_method, kept quiet."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*torch.jit.script_method.*", category=DeprecationWarning)
        from transformers.utils import logging
        level = logging.get_verbosity()
        logging.set_verbosity_error()
        try:
            yield
        finally:
            logging.set_verbosity(level)


def hf_config(model: Model):
    """The transformers config object for a model's own config.json (kvmem's preset data)."""
    if not model.config:
        raise ValueError(f"measure needs the model's config.json; {model.name!r} has none "
                         "(use a preset name, a config dict or Model.from_hf_config)")
    from transformers import CONFIG_MAPPING
    raw = dict(model.config)
    model_type = _SAME_AS.get(raw.get("model_type"), raw.get("model_type"))
    if model_type not in CONFIG_MAPPING:
        raise ValueError(f"transformers has no config class for model_type {raw.get('model_type')!r}")
    with quiet_transformers():
        return CONFIG_MAPPING[model_type](**{k: v for k, v in raw.items() if k != "model_type"})


def build_cache(engine: str, config, *, tokens: int, options: dict):
    """The empty transformers cache object of an hf-* engine."""
    with quiet_transformers():
        from transformers import DynamicCache, QuantizedCache, StaticCache
        if engine == "hf-dynamic":
            return DynamicCache(config=config)
        if engine == "hf-static":
            return StaticCache(config=config, max_cache_len=options.get("max_cache_len") or tokens)
        return QuantizedCache(backend=options.get("backend", "quanto"), config=config,
                              nbits=options.get("nbits"), q_group_size=options.get("q_group_size"),
                              residual_length=options.get("residual_length"))


def build_toy_cache(plans, *, batch: int, element, device) -> list:
    """The seed's cache: per layer [K, V], each with no tokens yet."""
    import torch
    return [[torch.empty((batch, p.k_shape[0], 0, p.k_shape[1]), dtype=element, device=device),
             torch.empty((batch, p.v_shape[0], 0, p.v_shape[1]), dtype=element, device=device)] for p in plans]


def backend_problem(backend: str) -> str | None:
    """Why a quantisation backend cannot run here, or None when it can."""
    try:
        with quiet_transformers():
            if backend == "quanto":
                import optimum.quanto  # noqa: F401
                from optimum.quanto.library.extensions import is_extension_available
                if not is_extension_available("quanto_cpp"):
                    return "optimum-quanto's C++ extension (quanto_cpp) cannot be built or loaded on this machine"
            elif backend == "hqq":
                import hqq.core.quantize  # noqa: F401
    except Exception as exc:  # an optional library failing to import or build: say why
        return f"{backend} cannot run here: {type(exc).__name__}: {exc}"
    return None

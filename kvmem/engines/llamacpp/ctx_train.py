"""n_ctx_train, the training context llama.cpp reads from a GGUF ({arch}.context_length: llama_model_loader's
LLM_KV_CONTEXT_LENGTH, src/llama-model.cpp#L1321), as convert_hf_to_gguf writes it from the config.

It is what llama.cpp warns past ("n_ctx_seq (N) > n_ctx_train (M) -- possible training context overflow",
src/llama-context.cpp#L328), what llama-server caps each slot at (server_slots.held) and what -c 0 takes (fitting). Most
converters write the config's max_position_embeddings (TextModel.set_gguf_parameters, llama.cpp@0c1e57098
conversion/base.py#L1437-L1438); those below write a constant instead, whatever the config says (hunyuan's also
asserts its 32k / 256k pair, conversion/hunyuan.py#L109, #L274, which kvmem does not check)."""

from __future__ import annotations

from ...layer import LINEAR
from ...model import Model

__all__ = ["n_ctx_train", "trained_context"]

# model_type -> (the context_length its converter writes, where: llama.cpp@0c1e57098 conversion/falcon.py#L27 ...)
_FIXED = {
    "falcon": (2048, "conversion/falcon.py#L27"),           # FalconModel: "not in config.json"
    "mamba": (2**20, "conversion/mamba.py#L63"),             # MambaModel
    "falcon_mamba": (2**20, "conversion/mamba.py#L63"),      # FalconMambaForCausalLM: MambaModel
    "mamba2": (2**20, "conversion/mamba.py#L155"),           # Mamba2Model
}
# GraniteHybridModel without RoPE (not BambaForCausalLM, some Mamba2 layer): GraniteMoeModel's max_position_embeddings
# overwritten by 2**20 (conversion/granite.py#L515-L521; gguf-py add_key_value keeps the later value)
_GRANITE_NOPE = (2**20, "conversion/granite.py#L515-L521")
# HunYuanMoEModel / HunYuanModel with dynamic (NTK alpha) RoPE: 256k (conversion/hunyuan.py#L94-L106, #L258-L271)
_HUNYUAN = {"hunyuan_v1_moe": "conversion/hunyuan.py#L94-L106", "hunyuan_v1_dense": "conversion/hunyuan.py#L268-L271"}


def _rope_type(model: Model):
    cfg = model.config or {}
    rope = cfg.get("rope_parameters", cfg.get("rope_scaling")) or {}      # conversion/base.py#L1359, #L1372-L1373
    return rope.get("rope_type", rope.get("type")) if isinstance(rope, dict) else None


def trained_context(model: Model) -> tuple[int | None, str]:
    """(n_ctx_train, where it comes from) for ``model``'s GGUF: the converter's constant where it writes one, else
    the config's max_position_embeddings (None where the config has none)."""
    fixed = _FIXED.get(model.model_type)
    if fixed is None and model.model_type == "granitemoehybrid" \
            and "BambaForCausalLM" not in ((model.config or {}).get("architectures") or ()) \
            and any(layer.kind == LINEAR for layer in model.layers):
        fixed = _GRANITE_NOPE
    if fixed is None and model.model_type in _HUNYUAN and _rope_type(model) == "dynamic":
        fixed = (256 * 1024, _HUNYUAN[model.model_type])
    if fixed is not None:
        return fixed[0], f"n_ctx_train: llama.cpp's converter writes {fixed[0]:,} whatever the config says, {fixed[1]}"
    return model.max_position_embeddings, "max_position_embeddings"


def n_ctx_train(model: Model) -> int | None:
    """The GGUF's context_length as llama.cpp's converter writes it (trained_context)."""
    return trained_context(model)[0]

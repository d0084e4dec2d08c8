"""What a config says beyond its layers (ModelFacts, MoeShape, SsmFacts), and how it was read
(ConfigReading): the records kvmem.configs fills and a Model carries."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["MoeShape", "SsmFacts", "ModelFacts", "ConfigReading"]


@dataclass(frozen=True)
class MoeShape:
    """A mixture-of-experts MLP: routed experts, the experts each token reads, their widths.

    ``moe_layers`` marks which layers route (DeepSeek's first_k_dense_replace, Llama 4's
    interleave step, Jamba's expert period, Qwen's decoder_sparse_step / mlp_only_layers);
    ``dense_intermediate_size`` is the MLP width of the other layers (0 when there are none).
    """

    experts: int
    top_k: int
    intermediate_size: int            # one routed expert's width
    shared_intermediate_size: int     # the shared experts' width together (0: none)
    dense_intermediate_size: int
    moe_layers: tuple[bool, ...] = ()

    def is_moe(self, layer: int) -> bool:
        return self.moe_layers[layer] if self.moe_layers else True


@dataclass(frozen=True)
class SsmFacts:
    """The config fields of a Mamba2-style SSM that engines lay their state out by."""

    n_groups: int = 0
    state_size: int = 0
    chunk_size: int = 0
    ssm_dtype: str | None = None       # the config's own state dtype (Qwen3.5 mamba_ssm_dtype,
                                       # Nemotron-H mamba_ssm_cache_dtype), verbatim; None: unset


@dataclass(frozen=True)
class ModelFacts:
    """Every config fact an engine or sizing reads beyond the layers, read once (kvmem.configs).

    A hand-built Model carries the empty facts: no MoE, vocabulary 0, no quantisation.
    """

    architectures: tuple[str, ...] = ()
    intermediate_size: int = 0                  # the dense MLP width (0: not given)
    vocab_size: int = 0
    tie_word_embeddings: bool = True
    q_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0
    partial_rotary_factor: str = "1"            # as written (rotary_pct for GPT-NeoX), exact
    new_decoder_architecture: bool = False
    quantization_config: dict | None = field(default=None, hash=False)   # compared (a dict: not hashed)
    moe: MoeShape | None = None
    ssm: SsmFacts | None = None


@dataclass(frozen=True)
class ConfigReading:
    """How a config.json was read: its family and the rule it follows, the fields taken from the
    file, those the file left out that came from transformers' config-class defaults, and the cache
    fields the file sets that its family's code leaves without effect on the cache (with why)."""

    model_type: str
    rule: str
    from_config: tuple[str, ...] = ()
    from_defaults: tuple[tuple[str, object], ...] = ()
    ignored: tuple[tuple[str, str], ...] = ()

    def lines(self) -> list[str]:
        """Plain sentences for the CLI, the app and explanations."""
        out = [f"Read as {self.model_type} ({self.rule}); fields read: {', '.join(self.from_config) or 'none'}."]
        if self.from_defaults:
            out.append("Not in the file, taken from transformers' defaults for this family: "
                       + ", ".join(f"{name} = {value!r}" for name, value in self.from_defaults) + ".")
        if self.ignored:
            out.append("Set in the file, without effect on the cache: "
                       + "; ".join(f"{name} ({why})" for name, why in self.ignored) + ".")
        return out

"""What an engine does with a context past the model's max_position_embeddings (PastPositions, each engine's
POSITIONS), and the models whose positions are a learned table that no setting runs past."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..model import Model
from .results import Refusal

__all__ = ["PastPositions", "LEARNED_POSITIONS", "past_positions", "trained_positions"]


@dataclass(frozen=True)
class PastPositions:
    """What an engine does with a context past the model's max_position_embeddings (its module
    gives the source): ``what`` it does, and the setting that makes it start anyway where it
    refuses (None: it runs); ``trained``: where the engine reads the trained context from something else than
    the config's max_position_embeddings (llama.cpp: the GGUF's n_ctx_train as its converter writes it), the model
    -> (positions, what they are)."""

    what: str
    allow_with: str | None = None
    trained: Callable[[Model], tuple[int | None, str]] | None = None


# model types whose positions are a learned embedding table of max_position_embeddings rows (transformers 5.24:
# models/gpt2/modeling_gpt2.py#L492, gpt_bigcode/modeling_gpt_bigcode.py#L374, gpt_neo/modeling_gpt_neo.py#L384,
# opt/modeling_opt.py#L46 OPTLearnedPositionalEmbedding; llama.cpp@0c1e57098 src/models/gpt2.cpp#L74 reads its
# position_embd by get_rows, which asserts the row exists: ggml/src/ggml-cpu/ops.cpp#L5240)
LEARNED_POSITIONS = frozenset({"gpt2", "gpt_bigcode", "gpt_neo", "opt"})


def trained_positions(model: Model, rule: PastPositions | None) -> tuple[int | None, str]:
    """(the positions an engine whose rule is ``rule`` (its spec's positions) takes as the model's trained context,
    what they are): its own reader (PastPositions.trained), else the config's max_position_embeddings."""
    return rule.trained(model) if rule and rule.trained else (model.max_position_embeddings, "max_position_embeddings")


def past_positions(model: Model, spec, tokens: int) -> tuple[str, Refusal | None] | None:
    """(note, refusal) when ``tokens`` exceed the model's max_position_embeddings, else None; ``spec``: the
    engine's EngineSpec (its name and positions).

    ``refusal`` (None where the engine runs) holds the note as the reason the engine would not
    start and the setting that makes it start anyway.
    """
    limit, named = trained_positions(model, spec.positions)
    if not limit or tokens <= limit:
        return None
    rule = spec.positions or PastPositions(f"kvmem does not know what {spec.name} does")
    note = (f"{tokens:,} tokens exceed the model's {limit:,} positions ({named}): {rule.what}"
            + (f" unless {rule.allow_with}" if rule.allow_with else ""))
    if model.model_type in LEARNED_POSITIONS:
        # a learned table of `limit` rows: no setting makes a later position run
        note += (f"; but {model.model_type}'s positions are a learned table of {limit:,} rows: a token at position "
                 f"{limit:,} or later has none (transformers: nn.Embedding's index out of range; llama.cpp: "
                 "get_rows' GGML_ASSERT(i01 < ne01)), so no sequence runs past it")
        return note, Refusal(note, None)
    note += "; positions past the trained range may lose quality"
    return note, Refusal(note, rule.allow_with) if rule.allow_with else None

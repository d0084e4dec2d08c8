"""The graph llama.cpp builds for a GraphShape, by its architecture: the one entry compute.py and scheduled.py
call (llama / qwen2 / qwen3 / qwen3moe: graphs.build; gemma2 / gemma3 / phi3: graphs_gemma_phi3; deepseek2
and gpt-oss: graphs_mla_oss; glm-dsa and deepseek32: graphs_dsa; glm4: graphs_glm4; glm4moe: graphs_glm4moe;
gemma4: graphs_gemma4; qwen3next / qwen35 / qwen35moe: graphs_delta; llama4: graphs_llama4; minimax-m2:
graphs_minimax_m2; minimax-m3: graphs_minimax_m3; and by their shapes' classes the Mamba hybrids, kimi-linear /
kimi-k3, minimax-01, falcon / gpt2 / gptneox, gemma3n and deepseek4: graphs_dsv4_fwd)."""

from __future__ import annotations

from collections.abc import Callable

from .ggml_graph import Graph
from .graphs import GraphShape, Pass, build
from .graphs_classic import ClassicShape, build_classic
from .graphs_delta import DeltaShape, build_delta
from .graphs_dsa import build_dsa
from .graphs_dsv4_fwd import DSV4Shape, build_dsv4
from .graphs_gemma3n import Gemma3nShape, build_gemma3n
from .graphs_gemma4 import Gemma4Shape, build_gemma4
from .graphs_gemma_phi3 import build_gemma_phi3
from .graphs_glm4 import build_glm4
from .graphs_glm4moe import build_glm4moe
from .graphs_kimi import KimiShape, build_kimi
from .graphs_kimi_k3 import KimiK3Shape, build_kimi_k3
from .graphs_llama4 import Llama4Shape, build_llama4
from .graphs_minimax01 import Minimax01Shape, build_minimax01
from .graphs_minimax_m2 import build_minimax_m2
from .graphs_minimax_m3 import build_minimax_m3
from .graphs_mla_oss import build_mla_oss
from .graphs_ssm import SsmShape, build_ssm

__all__ = ["build_graph"]


# the architectures built by name, and the shapes of their own class (a subclass before its base: a KimiK3Shape is a
# KimiShape, a KimiShape, Minimax01Shape and SsmShape are DeltaShapes); anything else: graphs.build
_BY_ARCH: dict[str, Callable[..., Graph]] = {
    **dict.fromkeys(("deepseek2", "gpt-oss"), build_mla_oss), **dict.fromkeys(("glm-dsa", "deepseek32"), build_dsa),
    "glm4": build_glm4, "glm4moe": build_glm4moe, "minimax-m2": build_minimax_m2, "minimax-m3": build_minimax_m3,
    **dict.fromkeys(("gemma2", "gemma3", "phi3"), build_gemma_phi3)}
_BY_SHAPE: tuple[tuple[type, Callable[..., Graph]], ...] = (
    (SsmShape, build_ssm), (KimiK3Shape, build_kimi_k3), (KimiShape, build_kimi), (Minimax01Shape, build_minimax01),
    (DeltaShape, build_delta), (ClassicShape, build_classic), (Llama4Shape, build_llama4),
    (Gemma3nShape, build_gemma3n), (Gemma4Shape, build_gemma4), (DSV4Shape, build_dsv4))


def build_graph(shape: GraphShape, p: Pass) -> Graph:
    """The graph of one reserve ``p`` of ``shape``'s architecture."""
    by_arch = _BY_ARCH.get(shape.arch)
    builder = by_arch if by_arch is not None else next((b for kind, b in _BY_SHAPE if isinstance(shape, kind)), build)
    return builder(shape, p)

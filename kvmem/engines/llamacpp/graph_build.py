"""The graph llama.cpp builds for a GraphShape, by its architecture: the one entry compute.py and scheduled.py
call (llama / qwen2 / qwen3 / qwen3moe: graphs.build; gemma2 / gemma3 / phi3: graphs_gemma_phi3; deepseek2
and gpt-oss: graphs_mla_oss; glm-dsa and deepseek32: graphs_dsa; glm4: graphs_glm4; glm4moe: graphs_glm4moe;
gemma4: graphs_gemma4; qwen3next / qwen35 / qwen35moe: graphs_delta; llama4: graphs_llama4)."""

from __future__ import annotations

from .ggml_graph import Graph
from .graphs import GraphShape, Pass, build
from .graphs_classic import ClassicShape, build_classic
from .graphs_delta import DeltaShape, build_delta
from .graphs_dsa import build_dsa
from .graphs_gemma3n import Gemma3nShape, build_gemma3n
from .graphs_gemma4 import Gemma4Shape, build_gemma4
from .graphs_gemma_phi3 import build_gemma_phi3
from .graphs_glm4 import build_glm4
from .graphs_glm4moe import build_glm4moe
from .graphs_kimi import KimiShape, build_kimi
from .graphs_kimi_k3 import KimiK3Shape, build_kimi_k3
from .graphs_llama4 import Llama4Shape, build_llama4
from .graphs_minimax01 import Minimax01Shape, build_minimax01
from .graphs_mla_oss import build_mla_oss
from .graphs_ssm import SsmShape, build_ssm

__all__ = ["build_graph"]


def build_graph(shape: GraphShape, p: Pass) -> Graph:
    """The graph of one reserve ``p`` of ``shape``'s architecture."""
    if shape.arch in ("deepseek2", "gpt-oss"):
        return build_mla_oss(shape, p)
    if shape.arch in ("glm-dsa", "deepseek32"):
        return build_dsa(shape, p)
    if isinstance(shape, SsmShape):     # jamba, nemotron_h: graphs_ssm (a DeltaShape too)
        return build_ssm(shape, p)
    if isinstance(shape, KimiK3Shape):      # kimi-k3 (a KimiShape): graphs_kimi_k3
        return build_kimi_k3(shape, p)
    if isinstance(shape, KimiShape):        # kimi-linear (a DeltaShape): graphs_kimi
        return build_kimi(shape, p)
    if isinstance(shape, Minimax01Shape):     # minimax-01 (a DeltaShape): graphs_minimax01
        return build_minimax01(shape, p)
    if isinstance(shape, DeltaShape):
        return build_delta(shape, p)
    if isinstance(shape, ClassicShape):     # falcon, gpt2, gptneox: graphs_classic
        return build_classic(shape, p)
    if isinstance(shape, Llama4Shape):
        return build_llama4(shape, p)
    if isinstance(shape, Gemma3nShape):     # gemma3n: graphs_gemma3n
        return build_gemma3n(shape, p)
    if isinstance(shape, Gemma4Shape):
        return build_gemma4(shape, p)
    if shape.arch == "glm4":
        return build_glm4(shape, p)
    if shape.arch == "glm4moe":
        return build_glm4moe(shape, p)
    if shape.arch in ("gemma2", "gemma3", "phi3"):
        return build_gemma_phi3(shape, p)
    return build(shape, p)

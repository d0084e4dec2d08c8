"""Parameter layouts of the 2026 families' token mixers beside params_new.py's: Laguna, LFM2, the GPT-2-like
and Mamba-1 legacy families, MiniMax-M3, Nemotron-NAS (DeciLM) and MiMo-V2-Flash (what each lays out:
params_new.py's docstring; the judge: transformers 5.24 on the meta device, tests/oracles/test_params_oracle.py).
"""

from __future__ import annotations

from ..layer import LINEAR, SLIDING
from ..units import cdiv

__all__ = ["laguna_mixer", "lfm2_ffn", "lfm2_mixer", "legacy_layer", "m3_mixer", "nas_block", "nas_body", "mimo_mixer"]


def laguna_mixer(f, i, layer, hidden) -> int:
    # transformers@5.24.0 models/laguna/modeling_laguna.py#L326-L356 (LagunaAttention)
    per_layer = f.get("num_attention_heads_per_layer", default=None)
    heads = int(per_layer[i]) if isinstance(per_layer, list) else f.int("num_attention_heads")
    hd, kv = layer.head_dim_k, layer.kv_heads
    n = 2 * hidden * heads * hd + 2 * hidden * kv * hd + 2 * hd
    if f.get("attention_bias", default=False):
        n += heads * hd + 2 * kv * hd + hidden
    gating = f.get("gating", default=True)
    return n + hidden * (heads if gating is True or gating == "per-head" else heads * hd)


def lfm2_ffn(f) -> int:
    # transformers@5.24.0 models/lfm2/modeling_lfm2.py#L111-L125 (Lfm2MLP)
    inter = f.int("intermediate_size")
    if f.get("block_auto_adjust_ff_dim", default=False):
        inter = int(2 * inter / 3)
        multiplier = f.get("block_ffn_dim_multiplier", default=None)
        if multiplier is not None:
            inter = int(multiplier * inter)
            step = f.int("block_multiple_of")
            inter = step * cdiv(inter, step)
    return 3 * f.int("hidden_size") * inter


def lfm2_mixer(f, layer, hidden, heads) -> int:
    # modeling_lfm2.py#L325-L338 (Lfm2ShortConv) and #L213-L218 (Lfm2Attention)
    if layer.kind == LINEAR:
        bias = 5 * hidden if f.get("conv_bias", default=False) else 0
        return 4 * hidden * hidden + hidden * f.int("conv_L_cache") + bias
    hd, kv = layer.head_dim_k, layer.kv_heads
    return 2 * hidden * heads * hd + 2 * hidden * kv * hd + 2 * hd


def legacy_layer(f, hidden, heads) -> int:
    """One whole block of gpt_bigcode, gpt_neo, mamba, falcon_mamba (norms included)."""
    t = f.model_type
    if t in ("mamba", "falcon_mamba"):
        # transformers@5.24.0 models/mamba/modeling_mamba.py MambaMixer, MambaBlock (falcon_mamba: the same
        # weights; its extra RMS norms carry none)
        # intermediate_size is recomputed from expand, whatever the config says (configuration_mamba.py#L95)
        inner, state = int(f.get("expand", default=2) * hidden), f.int("state_size")
        rank = f.get("time_step_rank", default="auto")   # "auto": ceil(hidden / 16) (configuration_mamba.py#L97)
        rank = cdiv(hidden, 16) if rank == "auto" else f.int("time_step_rank")
        bias = f.get("use_bias", default=False)
        n = (hidden * 2 * inner + (2 * inner if bias else 0) + inner * f.int("conv_kernel")
             + (inner if f.get("use_conv_bias", default=True) else 0) + inner * (rank + 2 * state) + rank * inner
             + inner + inner * state + inner + inner * hidden + (hidden if bias else 0))
        return n + hidden
    inter = f.int("n_inner", "intermediate_size", default=None) or 4 * hidden
    mlp = 2 * hidden * inter + inter + hidden
    if t == "gpt_bigcode":
        # models/gpt_bigcode/modeling_gpt_bigcode.py GPTBigCodeAttention: c_attn (q + one K/V head under
        # multi_query), c_proj, all biased
        kv_width = 2 * (hidden // heads) * (1 if f.get("multi_query", default=True) else heads)
        attn = (hidden + 1) * (hidden + kv_width) + hidden * hidden + hidden
    else:
        # models/gpt_neo/modeling_gpt_neo.py GPTNeoSelfAttention: q/k/v without bias, out_proj with
        attn = 4 * hidden * hidden + hidden
    return attn + mlp + 4 * hidden


def m3_mixer(f, layer, hidden, heads) -> int:
    hd, kv = layer.head_dim_k, layer.kv_heads
    n = 2 * hidden * heads * hd + 2 * hidden * kv * hd + 2 * hd
    if layer.index_head_dim:   # the sparse layers' indexer
        idx = layer.index_head_dim
        n += hidden * f.int("index_n_heads", "sparse_num_index_heads", default=None) * idx + hidden * idx + 2 * idx
    return n


def nas_block(block: dict, f, hidden: int, heads: int) -> int | None:
    """One DeciLM block (vLLM's DeciLMDecoderLayer), or None for a layout vLLM does not build."""
    attn, ffn = block.get("attention") or {}, block.get("ffn") or {}
    if attn.get("replace_with_linear") or ffn.get("replace_with_linear"):
        return None
    n = 0
    if not attn.get("no_op"):
        hd, kv = hidden // heads, heads // int(attn["n_heads_in_group"])
        n += 2 * hidden * heads * hd + 2 * hidden * kv * hd + hidden
        if f.get("attention_bias", default=False):
            n += heads * hd + 2 * kv * hd + hidden
    if not ffn.get("no_op"):
        if "ffn_mult" not in ffn and "intermediate_size" not in ffn:
            return None     # a block whose MLP width the config does not give: no count, no guess
        inter = int(2 * ffn["ffn_mult"] * hidden / 3) if "ffn_mult" in ffn else int(ffn["intermediate_size"])
        inter = cdiv(inter, 256) * 256 if "ffn_mult" in ffn else inter
        n += 3 * hidden * inter + hidden + ((2 * inter + hidden) if f.get("mlp_bias", default=False) else 0)
    return n


def nas_body(f, hidden: int, heads: int) -> tuple[int, int] | None:
    blocks = f.get("block_configs", default=None)
    if not isinstance(blocks, list) or not all(isinstance(b, dict) for b in blocks):
        return None
    sizes = [nas_block(b, f, hidden, heads) for b in blocks]
    known = [size for size in sizes if size is not None]
    return None if len(known) < len(sizes) else (sum(known), sum(known))


def mimo_mixer(f, layer, hidden, heads) -> int:
    # transformers@5.24.0 models/mimo_v2_flash/modeling_mimo_v2_flash.py#L352-L360: q and k of the K width, v and
    # o of the V width, sinks (one per head) on sliding layers; the published flags name where sinks are
    # (add_swa_attention_sink_bias true, add_full_attention_sink_bias false: where transformers puts them)
    sliding = layer.kind == SLIDING
    n = (hidden * heads * layer.head_dim_k + hidden * layer.kv_heads * (layer.head_dim_k + layer.head_dim_v)
         + heads * layer.head_dim_v * hidden)
    if f.get("attention_bias", default=False):
        n += heads * layer.head_dim_k + layer.kv_heads * (layer.head_dim_k + layer.head_dim_v)
    if f.get("add_swa_attention_sink_bias" if sliding else "add_full_attention_sink_bias", default=sliding):
        n += heads
    return n

"""llama.cpp's deepseek4 architecture (DeepSeek-V4 Flash / Pro: DeepseekV4ForCausalLM), its tensors as the GGUF holds
them (the cache: kvmem.engines.llamacpp.dsv4).

Transcribed from the vendored llama.cpp (llama-cpp-python 0.3.36, llama.cpp 0c1e57098):

    load_arch_tensors (src/models/deepseek4.cpp#L82-L183): token_embd, output_norm, output and the head's
        hyper-connection mix (output_hc_fn [hc_mult x n_embd, hc_mult], output_hc_base [hc_mult], output_hc_scale
        [1]); per layer attn_norm, attn_sinks [n_head], the low-rank Q (attn_q_a, attn_q_a_norm, attn_q_b), one K=V
        projection attn_kv [n_embd, head_dim] and its attn_kv_a_norm, the grouped output (attn_output_a: the file's
        [n_head x head_dim / o_groups, o_lora_rank x o_groups], reshaped at load; attn_output_b), the two
        hyper-connection mixes (hc_attn_*, hc_ffn_*: fn [hc_mult x n_embd, (2 + hc_mult) x hc_mult], base, scale
        [3]); on a compressed layer the compressor (kv, gate: 2 x head_dim wide at ratio 4, head_dim at 128; ape
        [width, ratio]; norm) and, at ratio 4, the lightning indexer (indexer.proj [n_embd, index_n_heads],
        indexer.attn_q_b, its own compressor of 2 x index_head_dim); the router (ffn_gate_inp), on the first
        num_hash_layers layers the token -> expert table ffn_gate_tid2eid [n_expert_used, n_vocab] (I32) instead
        of exp_probs_b.bias; ffn_norm, the routed experts of moe_intermediate_size and n_shared_experts shared ones.
    The converter (conversion/deepseek.py DeepseekV4Model): block_count num_hidden_layers (the MTP modules are skipped
        unless --mtp-only: filter_tensors L583-L587), the routed experts repacked from the checkpoint's FP4 into
        MXFP4 (_write_mxfp4_expert_tensor L721-L746), tid2eid as int32 (L748-L763), gate.bias dropped on hash layers
        (modify_tensors L880-L886). llama-quantize will not requantize the MXFP4 experts ("requantizing from type
        mxfp4 is disabled", src/llama-quant.cpp#L1306-L1308): they stay MXFP4 in every file type, as gpt-oss's do
        (tensors.GPT_OSS_EXPERTS).
"""

from __future__ import annotations

from .arch_fields import field, need
from .dsv4 import CONVERTER_KEYS

__all__ = ["DSV4", "dsv4_tensors"]

# kvmem model_type -> llama.cpp architecture (llama-arch.cpp LLM_ARCH_NAMES "deepseek4")
DSV4 = {"deepseek_v4": "deepseek4"}


def _ratios(model) -> list:
    cfg = model.config or {}
    missing = [key for key in CONVERTER_KEYS if key not in cfg]
    if missing:
        raise ValueError(f"{model.name}: llama.cpp's converter (conversion/deepseek.py DeepseekV4Model."
                         f"set_gguf_parameters) reads {', '.join(missing)}, which this config does not set: it does "
                         "not convert (KeyError), so there is no GGUF to load")
    ratios = cfg["compress_ratios"]
    if not isinstance(ratios, list) or len(ratios) < model.num_layers:
        raise ValueError(f"{model.name}: \"DeepSeek-V4 compress_ratios is shorter than block_count\" "
                         "(llama.cpp@0c1e57098 src/models/deepseek4.cpp#L56-L59)")
    bad = [r for r in ratios[:model.num_layers] if r not in (0, 4, 128)]
    if bad:
        raise ValueError(f"{model.name}: compress ratio {bad[0]!r}: \"DeepSeek-V4 loader only supports compression "
                         "ratios 0, 4, and 128\" (llama.cpp@0c1e57098 src/models/deepseek4.cpp#L150-L153)")
    return list(ratios[:model.num_layers])


def dsv4_tensors(model, h: int) -> list:
    """(name, ne) of a deepseek4 GGUF after output / output_norm / token_embd (the module docstring)."""
    # llama.cpp@0c1e57098 src/models/deepseek4.cpp#L82-L183 load_arch_tensors (the n_layer trunk)
    moe = model.facts.moe
    if moe is None or not moe.experts:
        raise ValueError(f"{model.name}: llama.cpp's deepseek4 layers are MoE, and the config gives no experts")
    ratios = _ratios(model)
    n_head, hd = model.num_attention_heads, model.layers[0].head_dim_k
    q_lora, o_groups, o_lora = need(model, "q_lora_rank"), need(model, "o_groups"), need(model, "o_lora_rank")
    hc = need(model, "hc_mult")
    ih, ihd = need(model, "index_n_heads"), need(model, "index_head_dim")
    hash_layers = field(model, "num_hash_layers", 0)
    e, f, used = moe.experts, need(model, "moe_intermediate_size"), moe.top_k
    shared = f * field(model, "n_shared_experts", 0)
    vocab = model.facts.vocab_size
    hc_dim, hc_mix = hc * h, (2 + hc) * hc
    out: list[tuple[str, tuple[int, ...]]] = [("output_hc_fn.weight", (hc_dim, hc)), ("output_hc_base.weight", (hc,)),
                                              ("output_hc_scale.weight", (1,))]
    for i, ratio in enumerate(ratios):
        b = f"blk.{i}."
        out += [(b + "attn_norm.weight", (h,)), (b + "attn_sinks.weight", (n_head,)),
                (b + "attn_q_a.weight", (h, q_lora)), (b + "attn_q_a_norm.weight", (q_lora,)),
                (b + "attn_q_b.weight", (q_lora, n_head * hd)), (b + "attn_kv.weight", (h, hd)),
                (b + "attn_kv_a_norm.weight", (hd,)),
                (b + "attn_output_a.weight", (n_head * hd // o_groups, o_lora * o_groups)),
                (b + "attn_output_b.weight", (o_groups * o_lora, h))]
        for part in ("attn", "ffn"):
            out += [(b + f"hc_{part}_fn.weight", (hc_dim, hc_mix)), (b + f"hc_{part}_base.weight", (hc_mix,)),
                    (b + f"hc_{part}_scale.weight", (3,))]
        if ratio:
            width = (2 if ratio == 4 else 1) * hd
            out += [(b + "attn_compressor_kv.weight", (h, width)), (b + "attn_compressor_gate.weight", (h, width)),
                    (b + "attn_compressor_ape.weight", (width, ratio)), (b + "attn_compressor_norm.weight", (hd,))]
        if ratio == 4:
            out += [(b + "indexer.proj.weight", (h, ih)), (b + "indexer.attn_q_b.weight", (q_lora, ih * ihd)),
                    (b + "indexer_compressor_kv.weight", (h, 2 * ihd)),
                    (b + "indexer_compressor_gate.weight", (h, 2 * ihd)),
                    (b + "indexer_compressor_ape.weight", (2 * ihd, ratio)),
                    (b + "indexer_compressor_norm.weight", (ihd,))]
        out.append((b + "ffn_gate_inp.weight", (h, e)))
        hashed = i < hash_layers
        out.append((b + "ffn_gate_tid2eid.weight", (used, vocab)) if hashed else (b + "exp_probs_b.bias", (e,)))
        out += [(b + "ffn_norm.weight", (h,)), (b + "ffn_gate_exps.weight", (h, f, e)),
                (b + "ffn_down_exps.weight", (f, h, e)), (b + "ffn_up_exps.weight", (h, f, e))]
        if shared:
            out += [(b + "ffn_gate_shexp.weight", (h, shared)), (b + "ffn_down_shexp.weight", (shared, h)),
                    (b + "ffn_up_shexp.weight", (h, shared))]
    return out

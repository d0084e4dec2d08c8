"""kvmem.engines.llamacpp.tensors with quant_mix: llama-quantize's file types on a config (every type
here equals llama.cpp 0c1e57098's own quantiser: tests/oracles/test_llamacpp_layout_quant_oracle.py)."""

from collections import Counter

import pytest

from kvmem.catalog import get_model
from kvmem.engines.llamacpp.quant_mix import QuantModel, ftype_of, quant_types
from kvmem.engines.llamacpp.tensors import FORMATS, synthesised_tensors


def _types(preset, fmt):
    return {t.name: t.dtype for t in synthesised_tensors(get_model(preset), fmt)}


def test_iq2_xxs_on_llama_3_1_8b():
    """32 layers, 32/8 heads (n_gqa 4): attn_v Q4_K (the IQ rule for n_gqa >= 4), ffn_down of the first
    n_ffn_down/8 = 4 layers Q2_K, token_embd Q2_K, output Q5_K (4096 columns are whole 256-blocks)."""
    t = _types("llama-3.1-8b", "iq2_xxs")
    assert (t["output.weight"], t["token_embd.weight"]) == ("Q5_K", "Q2_K")
    assert [t[f"blk.{i}.ffn_down.weight"] for i in range(6)] == ["Q2_K"] * 4 + ["IQ2_XXS"] * 2
    assert {t[f"blk.{i}.attn_v.weight"] for i in range(32)} == {"Q4_K"}
    assert Counter(t.values()) == {"IQ2_XXS": 188, "F32": 66, "Q4_K": 32, "Q2_K": 5, "Q5_K": 1}


def test_iq4_xs_on_llama_3_1_8b_bytes():
    """IQ4_XS: attn_v Q5_K (n_gqa >= 4), ffn_down Q5_K on the first 4 layers (no importance matrix),
    output Q6_K. Bytes: token_embd 4096 x 128256 / 256 x 136 = 279,085,056; every layer's
    attn_q 4096 x 4096 and attn_output the same: 16,777,216 / 256 x 136 = 8,912,896 each."""
    ts = {t.name: t for t in synthesised_tensors(get_model("llama-3.1-8b"), "iq4_xs")}
    assert ts["token_embd.weight"].nbytes == 279_085_056
    assert ts["blk.7.attn_q.weight"].nbytes == ts["blk.7.attn_output.weight"].nbytes == 8_912_896
    assert ts["blk.3.ffn_down.weight"].dtype == "Q5_K" and ts["blk.4.ffn_down.weight"].dtype == "IQ4_XS"
    assert sum(t.nbytes for t in ts.values()) == 4_476_526_848


def test_fallback_when_columns_are_not_whole_blocks():
    """gemma-3-1b: hidden 1152 is not whole 256-blocks: IQ2_XXS falls back to IQ4_NL, attn_v's Q4_K to
    Q5_0, the tied token_embd takes the output rule's Q8_0 ("nx % qk_k != 0")."""
    t = _types("gemma-3-1b", "iq2_xxs")
    assert (t["token_embd.weight"], t["blk.0.attn_q.weight"], t["blk.0.attn_v.weight"]) == ("Q8_0", "IQ4_NL", "Q5_0")
    assert t["blk.0.ffn_down.weight"] == "Q2_K"     # ne0 6912 = 27 x 256


def test_mxfp4_moe_puts_experts_in_mxfp4_and_the_rest_in_q8_0():
    """qwen3-30b-a3b (48 layers x 3 expert tensors = 144): MXFP4; every other quantisable tensor Q8_0,
    norms and routers F32."""
    assert Counter(_types("qwen3-30b-a3b", "mxfp4").values()) == {"F32": 241, "Q8_0": 194, "MXFP4": 144}


def test_tensor_type_rules_and_their_order():
    """--tensor-type: the first pattern that regex_search-es the name wins, then the shape fallback."""
    qm = QuantModel(arch="llama", n_layer=8, n_head=8, n_head_kv=8)    # use_more_bits(0, 8): 0 < 8 / 8 -> Q6_K
    specs = [(f"blk.{i}.{n}.weight", (4096, 4096), "F16") for i in range(2) for n in ("attn_v", "ffn_down")]
    types = quant_types(specs, "q4_k_m", qm, tensor_types=[(r"blk\.1\.", "q8_0"), ("attn_v", "iq4_xs")])
    assert types == {"blk.0.attn_v.weight": "IQ4_XS", "blk.0.ffn_down.weight": "Q6_K",
                     "blk.1.attn_v.weight": "Q8_0", "blk.1.ffn_down.weight": "Q8_0"}


def test_file_types_and_refusals():
    assert {"iq1_s", "iq1_m", "iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "iq4_nl", "iq4_xs", "tq1_0",
            "tq2_0", "mxfp4_moe"} <= set(FORMATS)
    assert ftype_of("Q4_K") == "q4_k_m" and ftype_of("IQ2-M") == "iq2_m"
    with pytest.raises(ValueError, match="writes no LLAMA_FTYPE_MOSTLY_NVFP4"):
        ftype_of("nvfp4")
    with pytest.raises(ValueError, match="not a llama-quantize file type"):
        ftype_of("q4_k_xl")


def test_published_tensor_sets_of_qwen35moe():
    """Qwen3.5-35B-A3B (Unsloth's Q4_K_M, lemonade-sdk/lemonade#1511): 301 f32 and 312 + 78 + 41 + 1 = 432
    quantised tensors; Qwen3.6-35B-A3B without its MTP block: 733 tensors in 40 blocks
    (joryirving/home-ops#9398). kvmem's layout has the same sets (its Q4_K_M mix is llama-quantize's,
    without Unsloth's per-tensor choices: 61 Q6_K + 371 Q4_K)."""
    import kvmem
    for name in ("Qwen--Qwen3.5-35B-A3B", "Qwen--Qwen3.6-35B-A3B"):
        model = kvmem.Model.from_hf_config(f"tests/fixtures/configs/corpus/{name}.json")
        counts = Counter(t.dtype for t in synthesised_tensors(model, "q4_k_m"))
        assert counts == {"F32": 301, "Q6_K": 61, "Q4_K": 371}
        assert sum(counts.values()) == 733


def test_unsloth_ud_mixes_are_a_labelled_approximation():
    """UD-* names lay out llama-quantize's mix of the same name, and say so; published UD files differ from it:
    Qwen3-30B-A3B UD-IQ1_S 8.42 GiB against the IQ1_S mix's 6,410,539,008 B (5.97 GiB),
    Qwen3.6-35B-A3B UD-Q4_K_XL 21.28 GiB against Q4_K_M's 21,155,768,832 B (19.70 GiB), DeepSeek-R1's four
    (131, 158, 183, 212 GB) against 133.7, 149.1, 174.6 and 244.1 GB."""
    import kvmem
    from kvmem.engines.llamacpp.quant_mix import UD_PUBLISHED
    from kvmem.engines.llamacpp.tensors import tensors_for
    model = get_model("qwen3-30b-a3b")
    ud, source = tensors_for(model, "UD-IQ1_S")
    assert [t.dtype for t in ud] == [t.dtype for t in synthesised_tensors(model, "iq1_s")]
    assert source.startswith("APPROXIMATION: Unsloth's UD-IQ1_S") and "iq1_s mix" in source
    ratios = []
    for name, mix, published, _ in UD_PUBLISHED:
        m = kvmem.Model.from_hf_config(f"tests/fixtures/configs/corpus/Qwen--{name}.json") if name[0] == "Q" \
            else get_model(name)
        ours = sum(t.nbytes for t in tensors_for(m, mix)[0])
        ratios.append(round(published / ours, 3))
    # published / kvmem: 0.87 (DeepSeek-R1 UD-Q2_K_XL 212 GB against Q2_K's 244.1 GB) to 1.41 (the first above)
    assert ratios == [1.41, 1.08, 0.98, 1.06, 1.048, 0.868]
    with pytest.raises(ValueError, match="not an Unsloth UD mix kvmem approximates"):
        synthesised_tensors(model, "UD-Q7_K_XL")


def test_gpt_oss_tensors_keep_their_mxfp4_experts():
    """24 layers x 19 tensors + output, output_norm, token_embd = 459. The 72 routed expert tensors stay in
    the converter's MXFP4 whatever the file type (published: every gpt-oss-20b GGUF keeps the 72 expert
    tensors in MXFP4, NousResearch/hermes-agent#116681; the 20B MXFP4 file is 12.1 GB and the 120B's Q8_0
    and MXFP4 files are both 63.4 GB, AlexsJones/llmfit#1059): ffn_down_exps 2,880 x 2,880 x 32 / 32 x 17 =
    141,004,800 B. The rest follows the mix: 2,880 columns are not whole 256-blocks, so Q4_K_M's Q4_K falls
    back to Q5_0 and Q6_K to Q8_0; attn_sinks is 64 heads x 4 B."""
    t = _types("gpt-oss-20b", "q4_k_m")
    assert len(t) == 459 and Counter(t.values()) == {"F32": 289, "MXFP4": 72, "Q5_0": 61, "Q4_K": 24, "Q8_0": 13}
    ts = {x.name: x for x in synthesised_tensors(get_model("gpt-oss-20b"), "q4_k_m")}
    assert ts["blk.0.ffn_down_exps.weight"].nbytes == 141_004_800 and ts["blk.0.attn_sinks.weight"].nbytes == 256
    for preset, gb in (("gpt-oss-20b", "12.10"), ("gpt-oss-120b", "63.37")):
        for fmt in ("mxfp4", "q8_0"):
            assert f"{sum(x.nbytes for x in synthesised_tensors(get_model(preset), fmt)) / 1e9:.2f}" == gb
    assert Counter(_types("gpt-oss-20b", "f16").values()) == {"F16": 98, "F32": 289, "MXFP4": 72}


def test_mla_tensors_are_the_split_ones():
    """DeepSeek-V2-Lite (no q_lora_rank): attn_q [2048, 16 x (128 + 64)], attn_kv_a_mqa [2048, 512 + 64],
    attn_k_b [128, 512, 16] (128 columns: Q4_K -> Q5_0), attn_v_b [512, 128, 16]; no exp_probs_b (softmax
    router). DeepSeek-V3 MXFP4_MOE: every 3-D tensor is MXFP4, the MLA ones too (ne[2] > 1)."""
    ts = {x.name: x for x in synthesised_tensors(get_model("deepseek-v2-lite"), "q4_k_m")}
    assert ts["blk.1.attn_q.weight"].shape == (2048, 3072) and ts["blk.1.attn_kv_a_mqa.weight"].shape == (2048, 576)
    assert (ts["blk.1.attn_k_b.weight"].shape, ts["blk.1.attn_k_b.weight"].dtype) == ((128, 512, 16), "Q5_0")
    assert ts["blk.1.attn_v_b.weight"].shape == (512, 128, 16) and "blk.1.exp_probs_b.bias" not in ts
    v3 = _types("deepseek-v3", "mxfp4")
    assert (v3["blk.5.attn_k_b.weight"], v3["blk.5.ffn_up_exps.weight"], v3["blk.5.attn_q_b.weight"]) == \
        ("MXFP4", "MXFP4", "Q8_0") and v3["blk.5.exp_probs_b.bias"] == "F32"


def test_qwen35_deltanet_tensors():
    """Qwen3.5-27B: layer 3 is full attention, q with its gate: [5120, 2 x 24 x 256]; layer 0 is Gated
    DeltaNet: attn_qkv [5120, 2 x 16 x 128 + 48 x 128], counted as attn_v (Q6_K on use_more_bits
    layers), ssm_conv1d and ssm_a kept F32."""
    ts = {x.name: x for x in synthesised_tensors(get_model("qwen3.5-27b"), "q4_k_m")}
    assert ts["blk.3.attn_q.weight"].shape == (5120, 12288) and ts["blk.0.attn_qkv.weight"].shape == (5120, 10240)
    assert (ts["blk.0.attn_qkv.weight"].dtype, ts["blk.0.ssm_conv1d.weight"].dtype, ts["blk.0.ssm_a"].dtype) == \
        ("Q6_K", "F32", "F32")


def test_every_file_type_has_its_printed_name():
    """llama_ftype_name (src/llama-model-loader.cpp): one printed name per file type kvmem lays out, none twice
    (a log's "file type = IQ4_XS - 4.25 bpw" names the mix)."""
    from kvmem.engines.llamacpp.quant_mix import FILE_TYPE_NAMES, FTYPES
    assert set(FILE_TYPE_NAMES) == set(FTYPES) and len(set(FILE_TYPE_NAMES.values())) == len(FTYPES) == 35
    assert FILE_TYPE_NAMES["iq3_m"] == "IQ3_S mix - 3.66 bpw" and FILE_TYPE_NAMES["mxfp4_moe"] == "MXFP4 MoE"


def test_gemma4_26b_a4b_equals_a_published_q4_k_m():
    """lmstudio-community's gemma-4-26B-A4B-it-Q4_K_M.gguf as llama.cpp loads it (scrya-com/rotorquant#9):
    392 f32, 32 q5_0, 28 q8_0, 192 q4_K, 14 q6_K tensors, 15.63 GiB. The full layers (every sixth) have no
    attn_v (attention_k_eq_v) and 512-wide heads; the 2,816 columns are not whole 256-blocks (fallbacks)."""
    ts = synthesised_tensors(get_model("gemma-4-26b-a4b"), "q4_k_m")
    assert Counter(t.dtype for t in ts) == {"F32": 392, "Q5_0": 32, "Q8_0": 28, "Q4_K": 192, "Q6_K": 14}
    assert f"{sum(t.nbytes for t in ts) / 2**30:.2f}" == "15.63"
    names = {t.name: t for t in ts}
    assert "blk.5.attn_v.weight" not in names and names["blk.5.attn_q.weight"].shape == (2816, 16 * 512)
    assert names["blk.0.attn_v.weight"].shape == (2816, 8 * 256) and names["rope_freqs.weight"].shape == (256,)


def test_tensor_type_rules_reach_the_llama_layout():
    """--tensor-type on a llama-style config (the generic layout, not arch_tensors): '\\.weight=q8_0' makes every
    quantisable tensor Q8_0 (34 B a 32-block). llama-3.1-8b: token_embd + output 2 x 4096 x 128256 = 1,050,673,152
    values, 32 layers x (2 x 4096^2 + 2 x 4096 x 1024 + 3 x 4096 x 14336) = 6,979,321,856: 8,029,995,008 / 32 x 34 =
    8,531,869,696 B, plus 65 norms x 4096 x 4 B + rope_freqs 64 x 4 B = 1,065,216 B F32: 8,532,934,912 B (the plain
    Q4_K_M mix: 4,912,898,304 B)."""
    model = get_model("llama-3.1-8b")
    plain = synthesised_tensors(model, "q4_k_m")
    q8 = synthesised_tensors(model, "q4_k_m", tensor_types=[(r"\.weight", "q8_0")])
    assert Counter(t.dtype for t in q8) == {"Q8_0": 226, "F32": 66}
    assert (sum(t.nbytes for t in plain), sum(t.nbytes for t in q8)) == (4_912_898_304, 8_532_934_912)
    # qwen3-30b-a3b (qwen3_moe, the same generic layout): one rule moves only the 48 ffn_down_exps to Q8_0
    moe = Counter(t.dtype for t in synthesised_tensors(get_model("qwen3-30b-a3b"), "q4_k_m",
                                                       tensor_types=[("ffn_down_exps", "q8_0")]))
    assert moe == {"Q4_K": 265, "F32": 241, "Q8_0": 48, "Q6_K": 25}

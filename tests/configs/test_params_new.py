"""Parameter counts of the 2026 families (kvmem/configs/params_new.py, params.py's moe_shape).

The pinned totals are transformers 5.24's own: the model built from the preset's config on the
meta device, numel summed, tied weights once (kvmem/oracles/params.py; tests/oracles/test_params_oracle.py
re-derives them and seeded variations).
"""

import json

import pytest

import kvmem
from kvmem.catalog import get_model, list_models, preset
from tests.fixtures import ABRIDGED

# preset: (total, active) -- total from transformers 5.24 on the meta device
TOTALS = {"glm-5": (743_911_199_232, 40_833_126_912), "glm-5.1": (743_911_199_232, 40_833_126_912),
          "glm-5.2": (743_377_000_704, 40_298_928_384),
          "deepseek-v4-flash": (284_332_230_231, 13_270_091_351),
          "deepseek-v4-pro": (1_572_997_179_491, 48_852_379_747),
          "gemma-4-26b-a4b": (25_233_141_760, 3_822_530_560),
          "kimi-linear-48b-a3b": (49_122_675_072, 3_106_965_888),
          "minimax-m1": (456_089_655_296, 47_174_113_280),
          # the text model (Gemma3nForCausalLM's): the vision and audio towers are not counted, as for every
          # multimodal preset (kvmem/configs/params.py); llama.cpp's GGUF holds the text model alone (the towers go
          # to the mmproj file: convert_hf_to_gguf's Gemma3nVisionAudioModel)
          "gemma-3n-e2b": (4_435_182_688, 2_421_916_768), "gemma-3n-e4b": (6_835_235_568, 4_486_425_328)}
# no count, for a stated reason: none now (the abridged gemma-3n config is a fixture: tests/fixtures/configs)
NO_COUNT: set = set()


@pytest.mark.parametrize("name", sorted(TOTALS))
def test_totals_are_transformers(name):
    m = get_model(name)
    assert (m.params_total, m.params_active) == TOTALS[name]


def test_glm_5_2_shared_indexer_layers_carry_no_indexer():
    # 57 'shared' layers x (wq_b 32*128 x 2048 + wk 128 x 6144 + k_norm 2*128 + weights_proj 32 x 6144)
    per_layer = 32 * 128 * 2048 + 128 * 6144 + 2 * 128 + 32 * 6144
    assert per_layer == 9_371_904
    assert TOTALS["glm-5"][0] - TOTALS["glm-5.2"][0] == 57 * per_layer


def test_gemma4_reads_top_k_experts():
    m = get_model("gemma-4-26b-a4b")
    assert (m.facts.moe.experts, m.facts.moe.top_k) == (128, 8)
    cfg = json.loads(json.dumps(preset("gemma-4-26b-a4b")["config"]))
    cfg["text_config"]["top_k_experts"] = 2
    two = kvmem.Model.from_hf_config(cfg)
    # 6 fewer experts a layer x 30 layers x 3 x 2816 x 704 weights
    assert m.params_active - two.params_active == 6 * 30 * 3 * 2816 * 704


def test_kimi_linear_reads_num_shared_experts():
    cfg = json.loads(json.dumps(preset("kimi-linear-48b-a3b")["config"]))
    cfg["num_shared_experts"] = 2
    two = kvmem.Model.from_hf_config(cfg)
    # one more shared expert on the 26 MoE layers (first_k_dense_replace 1): 3 x 2304 x 1024 each
    assert two.params_total - TOTALS["kimi-linear-48b-a3b"][0] == 26 * 3 * 2304 * 1024


def _unit(n: int) -> int:
    """The last significant digit's place of a published round figure (744e9 -> 1e9)."""
    unit = 1
    while n % (unit * 10) == 0:
        unit *= 10
    return unit


@pytest.mark.parametrize("name", sorted(TOTALS))
def test_within_published_rounding(name):
    pub = preset(name).get("published") or {}
    if "params_total" not in pub:
        pytest.skip(f"{name}: no published total found")
    m = get_model(name)
    for key, ours in (("params_total", m.params_total), ("params_active", m.params_active)):
        if key in pub:
            assert abs(ours - pub[key]) <= _unit(pub[key]) // 2, (key, ours, pub[key])


def test_every_preset_has_a_count_or_a_stated_reason():
    missing = {n for n in list_models() if get_model(n).params_total is None}
    assert missing == NO_COUNT


@pytest.mark.parametrize("name", sorted(set(list_models()) - NO_COUNT))
def test_fit_on_8_h200_needs_no_weight_bytes(name):
    try:
        kvmem.fit(name, gpu="h200-sxm-141gb", num_gpus=8, context=4096)
    except Exception as e:  # a refusal for another, true reason (tp dividing heads, ...) is allowed
        assert "no parameter count" not in str(e)


def test_gemma3n_abridged_config_has_no_count_but_the_preset_has():
    assert kvmem.Model.from_hf_config(ABRIDGED, name="gemma-3n-e2b-abridged").params_total is None      # the class default intermediate_size is E4B's 16,384
    m = get_model("gemma-3n-e2b")
    # transformers 5.24 on the meta device: 4,435,182,688; active leaves out the per-layer table
    # (262,144 x 30 layers x 256) and the input embedding (262,400 x 2,048; tied, so the head keeps it)
    assert m.params_total == 4_435_182_688
    assert m.params_total - m.params_active == 262_144 * 30 * 256


@pytest.mark.parametrize("name, shared, published", [("gemma-3n-e2b", 10, 1.91e9), ("gemma-3n-e4b", 15, 3.98e9)])
def test_gemma3n_effective_params_are_googles(name, shared, published):
    # Google's gemma3n-slicing-configs dataset (https://huggingface.co/datasets/google/gemma3n-slicing-configs):
    # "# Effective Params (B)" 3.98 for the main model (E4B), 1.91 for the official E2B config: the text model
    # without either embedding table, with the K/V projections the checkpoint (and llama.cpp's GGUF) keeps on the
    # KV-shared layers, which transformers 5.24 does not build (modeling_gemma3n.py Gemma3nTextAttention)
    m = get_model(name)
    kv_shared = shared * 2 * 2048 * 512                   # k_proj, v_proj: hidden 2,048 x 2 KV heads x 256
    effective = m.params_active - m.params_embedding + kv_shared
    assert m.params_embedding == 262_400 * 2048
    assert round(effective / 1e7) == round(published / 1e7), effective     # E2B 1,905,493,088; E4B 3,980,487,408


def test_kimi_k3_by_hand_from_sglang_layout():
    # sglang@v0.5.23 python/sglang/srt/models/kimi_k3.py (no transformers class: the count is by hand);
    # 93 layers: 69 KDA (kda_layers) + 24 MLA (full_attn_layers), layer 0 dense, 92 MoE
    h, vocab = 7168, 163_840
    heads, d, k = 96, 128, 4                       # linear_attn_config: num_heads, head_dim, conv kernel
    w = heads * d
    kda = (4 * h * w                               # q, k, v, g (use_full_rank_gate: one g_proj)
           + 3 * w * k + w + heads                 # qkv_conv1d, dt_bias, A_log
           + d * h + w * d + heads * h + d         # f_a, f_b, b_proj, o_norm
           + w * h)                                # o_proj
    qr, r, rope, nope, v = 1536, 512, 64, 128, 128
    mla = (h * qr + qr + qr * heads * (nope + rope) + h * (r + rope) + r + r * heads * (nope + v)
           + heads * v * h + h * heads * v)        # ... o_proj, g_proj (mla_use_output_gate)
    dense = 3 * h * 33_792
    experts, inter, latent = 896, 3072, 3584
    moe_common = 3 * h * 2 * inter + h * experts + 2 * h * latent + latent   # 2 shared, gate, latent down/up/norm
    moe = experts * 3 * latent * inter + moe_common
    moe_active = 16 * 3 * latent * inter + moe_common
    per_layer = 2 * h + 4 * h                      # two norms; attention-residual norms and projections
    total = 2 * vocab * h + h + 2 * h + 69 * kda + 24 * mla + dense + 92 * moe + 93 * per_layer
    m = get_model("kimi-k3")
    assert m.params_total == total == 2_779_484_393_568
    assert m.params_active == total - vocab * h - 92 * (moe - moe_active) == 104_189_530_208


def test_mimo_v2_flash_within_its_published_309b_15b():
    # XiaomiMiMo/MiMo-V2-Flash README: 309B total, 15B active (the 3 MTP blocks apart), as quoted at
    # https://github.qingwei-s.workers.dev/XiaomiMiMo/MiMo-V2-Flash; transformers 5.24 on the meta device: 308,778,768,832
    from pathlib import Path
    path = Path(__file__).parents[1] / "fixtures" / "configs" / "corpus" / "XiaomiMiMo--MiMo-V2-Flash.json"
    m = kvmem.Model.from_hf_config(json.loads(path.read_text()))
    assert (m.params_total, m.params_active) == (308_778_768_832, 14_820_972_992)
    assert abs(m.params_total - 309_000_000_000) <= 500_000_000 and abs(m.params_active - 15_000_000_000) <= 500_000_000
    # the first layer dense (moe_layer_freq 0), 47 MoE layers of 256 experts x 3 x 4,096 x 2,048, top-8
    assert m.params_total - m.params_active == 47 * (256 - 8) * 3 * 4096 * 2048 + 152_576 * 4096


def test_mamba_time_step_rank_auto():
    # configuration_mamba.py: "auto" is ceil(hidden_size / 16); the published Mamba configs say "auto"
    cfg = {"model_type": "mamba", "hidden_size": 768, "num_hidden_layers": 2, "vocab_size": 1000, "state_size": 16,
           "intermediate_size": 1536, "conv_kernel": 4, "time_step_rank": "auto", "use_bias": False,
           "use_conv_bias": True}
    m = kvmem.Model.from_hf_config(cfg)
    rank = 48
    mixer = (768 * 2 * 1536 + 1536 * 4 + 1536 + 1536 * (rank + 2 * 16) + rank * 1536 + 1536 + 1536 * 16 + 1536
             + 1536 * 768)
    assert m.params_total == 1000 * 768 + 2 * (mixer + 768) + 768   # tied head, a norm a layer, norm_f
    cfg["time_step_rank"] = 48
    assert kvmem.Model.from_hf_config(cfg).params_total == m.params_total


def test_nemotron_nas_by_hand_from_vllm_layout():
    # vllm@v0.33.0 nemotron_nas.py (DeciLM; transformers 5.24 has none): Llama-3.3-Nemotron-Super-49B-v1's
    # block_configs: 49 attention blocks (64 heads x 128, 8 KV heads), 31 no-op; FFN widths from ffn_mult:
    # int(2 x mult x 8,192 / 3) rounded up to 256: 5.25 -> 28,672 (49 blocks), 2.625 -> 14,336 (6),
    # 1.3125 -> 7,168 (10), 1.0 -> 5,632 (8), 0.5 -> 2,816 (6), 3.28125 -> 17,920 (1)
    from pathlib import Path
    path = Path(__file__).parents[1] / "fixtures" / "configs" / "corpus" / "nvidia--Llama-3_3-Nemotron-Super-49B-v1.json"
    h = 8192
    attn = 2 * h * 64 * 128 + 2 * h * 8 * 128 + h                  # q, o, k, v, input_layernorm
    ffn = {28_672: 49, 14_336: 6, 7_168: 10, 5_632: 8, 2_816: 6, 17_920: 1}
    total = 2 * 128_256 * h + h + 49 * attn + sum(n * (3 * h * width + h) for width, n in ffn.items())
    m = kvmem.Model.from_hf_config(json.loads(path.read_text()))
    assert m.params_total == total == 49_867_145_216
    assert m.params_active == total - 128_256 * h


def test_minimax_m3_dense_layers_are_dense_intermediate_size_wide():
    # the published config: intermediate_size 3,072 (experts and the shared MLP), dense_intermediate_size 12,288
    # for the first three layers (moe_layer_freq 0, 0, 0, 1, ...)
    moe = kvmem.get_model("minimax-m3").facts.moe
    assert (moe.dense_intermediate_size, moe.intermediate_size, moe.shared_intermediate_size) == (12288, 3072, 3072)
    assert moe.moe_layers[:4] == (False, False, False, True)


def test_gemma3n_per_layer_intermediate_size_is_read():
    # transformers@5.24.0 configuration_gemma3n.py#L130-L138 writes intermediate_size one per layer (an int is
    # expanded), so every config it saves carries a list; the reader took it for a malformed int. The default
    # Gemma3nTextConfig (google/gemma-3n-E4B's shape: 35 layers, 2,048 wide, 16,384 MLPs, 15 KV-shared layers)
    # built on the meta device: 6,835,235,568 parameters, tied weights once
    cfg = {"model_type": "gemma3n_text", "vocab_size": 262_400, "vocab_size_per_layer_input": 262_144,
           "hidden_size": 2048, "hidden_size_per_layer_input": 256, "intermediate_size": [16_384] * 35,
           "num_hidden_layers": 35, "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 256,
           "num_kv_shared_layers": 15, "laurel_rank": 64, "altup_num_inputs": 4, "sliding_window": 512,
           "layer_types": (["sliding_attention"] * 4 + ["full_attention"]) * 7}
    m = kvmem.Model.from_hf_config(cfg)
    assert m.facts.intermediate_size == 16_384
    assert m.params_total == 6_835_235_568
    # the scalar spelling counts the same
    assert kvmem.Model.from_hf_config(dict(cfg, intermediate_size=16_384)).params_total == 6_835_235_568
    # MatFormer-sliced checkpoints write differing widths: the count reads them per layer, the one-width
    # facts refuse the field by name
    with pytest.raises(kvmem.errors.ConfigError, match="'intermediate_size'"):
        kvmem.Model.from_hf_config(dict(cfg, intermediate_size=[8192] * 15 + [16_384] * 20))

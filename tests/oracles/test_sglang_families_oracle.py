"""kvmem's SGLang layout of each declared opt-in family against SGLang 0.5.23's own ModelConfig
(kvmem/oracles/sglang_families.py): the real checkpoints' configs, then seeded variations of them."""

import json
from pathlib import Path

import pytest

from tests.oracles.conftest import require

require("sglang")

from kvmem.engines.sglang.families import FAMILIES  # noqa: E402
from kvmem.oracles import sglang_families as oracle  # noqa: E402

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "configs" / "corpus"
# one real config per family where the corpus has one (the others: the config class's defaults below)
REAL = {
    "glm_moe_dsa": ["zai-org--GLM-5.json", "zai-org--GLM-5.1.json", "zai-org--GLM-5.2.json", "zai-org--GLM-5.3.json"],
    "gemma4_text": ["google--gemma-4-26B-A4B.json", "nvidia--Gemma-4-31B-IT-NVFP4.json"],
    "kimi_linear": ["moonshotai--Kimi-Linear-48B-A3B-Instruct.json", "moonshotai--Kimi-K3.json"],
    "mimo_v2_flash": ["XiaomiMiMo--MiMo-V2-Flash.json"],
    "lfm2": ["FlameF0X--LFM2.5-1.2B-Distilled-Claude-4.6.json"],
    "laguna": ["poolside--Laguna-XS.2-FP8.json", "poolside--Laguna-S-2.1-FP8.json"],
}
# nemotron-nas and mimo: their config classes are the checkpoints' own code (auto_map), which ModelConfig loads
# from the checkpoint; checked by source reading (kvmem/engines/sglang/families.py) and tests/engines.


DBRX = {"architectures": ["DbrxForCausalLM"], "model_type": "dbrx", "d_model": 6144, "n_heads": 48, "n_layers": 40,
        "max_seq_len": 32768, "vocab_size": 100352, "torch_dtype": "bfloat16",
        "attn_config": {"kv_n_heads": 8, "clip_qkv": 8, "rope_theta": 500000},
        "ffn_config": {"ffn_hidden_size": 10752, "moe_num_experts": 16, "moe_top_k": 4}}


def base_configs():
    for names in REAL.values():
        for name in names:
            data = json.loads((CORPUS / name).read_text())
            yield name, data.get("config", data)
    from kvmem.oracles.transformers import default_config
    for family in oracle.ARCHITECTURES:   # the families run through the Transformers backend: backend_writes too
        yield family, oracle.default_case(family)
    yield "dbrx-instruct", DBRX
    lfm2_moe = default_config("lfm2_moe").to_dict()   # with a layer pattern set (the defaults have none)
    lfm2_moe.update(architectures=["Lfm2MoeForCausalLM"], layer_types=[
        "full_attention" if i in (2, 6, 10, 14, 18, 21) else "conv" for i in range(lfm2_moe["num_hidden_layers"])])
    yield "lfm2_moe", lfm2_moe


BASES = list(base_configs())


def assert_agrees(name, cfg, tp=1):
    bad = [c for c in oracle.run_config(name, cfg, tp) if not c.matches]
    assert not bad, "\n".join(f"{c.case}: {c.quantity}: kvmem {c.kvmem!r}, SGLang {c.engine!r}" for c in bad)


def test_every_declared_family_has_a_case():
    assert FAMILIES.names == set(REAL) | set(oracle.ARCHITECTURES) | {"nemotron-nas", "mimo", "dbrx", "lfm2_moe",
                                                                       "minimax_m3_vl_text",   # below
                                                                       # tests/oracles/test_sglang_dsv4_oracle.py
                                                                       "deepseek_v4",
                                                                       # tests/oracles/test_sglang_inkling_oracle.py
                                                                       "inkling_text"}


@pytest.mark.parametrize("name, cfg", BASES, ids=[name for name, _ in BASES])
def test_real_and_default_configs(name, cfg):
    assert_agrees(name, cfg)


@pytest.mark.parametrize("name, cfg", BASES, ids=[name for name, _ in BASES])
def test_seeded_variations(name, cfg):
    for i, (varied, tp) in enumerate(oracle.variations(cfg, 4, seed=31)):
        assert_agrees(f"{name}#{i} tp{tp}", varied, tp)


def test_the_backend_judge_sees_a_model_whose_attention_bypasses_sglangs():
    # transformers' Megatron-BERT does not call the attention interface (_supports_attention_backend False):
    # nothing reaches SGLang's pool, which is why resolve_transformers_arch refuses it (kvmem/engines/sglang/families.py)
    cfg = oracle.default_case("bert")
    cfg.update(model_type="megatron-bert", architectures=["MegatronBertForCausalLM"], num_hidden_layers=2,
               hidden_size=64, num_attention_heads=4, intermediate_size=128, vocab_size=100)
    assert oracle.backend_writes(cfg, device="cpu") == {0: 0, 1: 0}
    cfg.update(model_type="bert", architectures=["BertLMHeadModel"])   # the same shape through BERT: 4 x 16 x 2 x 2 B
    assert oracle.backend_writes(cfg, device="cpu") == {0: 256, 1: 256}
    assert set(oracle.backend_writes(oracle.default_case("bert")).values()) == {12 * 64 * 2 * 2}


# The families kvmem refuses because SGLang's Transformers backend cannot run them (kvmem/engines/sglang/families.py
# REFUSALS): each transformers class run with SGLang's attention function fails where the refusal says
REFUSED_BY_THE_BACKEND = [
    ("axk1", "AXK1ForCausalLM", ValueError, r"K \(5, 12288\), V \(5, 8192\) do not fit 64 x 64"),   # 64 x 192, 64 x 128
    ("youtu", "YoutuForCausalLM", ValueError, r"K \(5, 3072\), V \(5, 2048\) do not fit 16 x 64"),  # 16 x 192, 16 x 128
    ("axk2", "AXK2ForCausalLM", TypeError, "'NoneType' object is not subscriptable"),   # attention_mask[:, 0, :, :]
    ("lfm3", "Lfm3ForCausalLM", RuntimeError, "broadcast"),     # flat (5, 2048) output x a (1, 5, 16, 1) gate
]


@pytest.mark.parametrize("model_type, arch, error, match", REFUSED_BY_THE_BACKEND,
                         ids=[case[0] for case in REFUSED_BY_THE_BACKEND])
def test_the_backend_fails_on_the_refused_families(model_type, arch, error, match):
    from kvmem.engines.sglang.refusals import REFUSALS
    from kvmem.oracles.transformers import default_config
    assert model_type in REFUSALS
    cfg = dict(default_config(model_type).to_dict(), architectures=[arch])
    with pytest.raises(error, match=match):
        oracle.backend_writes(cfg)


def test_youtu_with_a_head_dim_the_backend_fits_fails_in_its_rotary_embedding():
    # head_dim = qk_nope + qk_rope = v_head_dim (192) would fit RadixAttention, but Youtu's rotary spans head_dim
    from kvmem.oracles.transformers import default_config
    cfg = dict(default_config("youtu").to_dict(), architectures=["YoutuForCausalLM"], head_dim=192, v_head_dim=192)
    with pytest.raises(RuntimeError, match="broadcast"):
        oracle.backend_writes(cfg)


def test_sglang_cannot_read_deepseek_v4s_reference_format_nor_minimax_m3s_own():
    # HfModelConfigParser.parse -> AutoConfig.from_pretrained: these model types are registered nowhere
    data = json.loads((CORPUS / "sgl-project--DeepSeek-V4-Flash-FP8.json").read_text())
    m3 = json.loads((CORPUS.parent / "new" / "minimax-m3.json").read_text())
    for model_type, cfg in (("deepseek_ref", data.get("config", data)), ("minimax_m3", m3),
                            ("minimax_m3_text", dict(m3, model_type="minimax_m3_text"))):
        with pytest.raises(ValueError, match=f"model type `{model_type}` but Transformers does not recognize"):
            oracle.sglang_view(cfg)


def minimax_m3_vl() -> dict:
    # transformers' minimax_m3_vl wrapper around MiniMax-M3's published text config (tests/engines/test_sglang_families.py)
    from kvmem.oracles.transformers import default_config
    text = dict(json.loads((CORPUS.parent / "new" / "minimax-m3.json").read_text()), model_type="minimax_m3_vl_text")
    del text["architectures"]
    return dict(default_config("minimax_m3_vl").to_dict(), text_config=text,
                architectures=["MiniMaxM3SparseForConditionalGeneration"])


def test_minimax_m3_pools_are_sglangs_own():
    # SGLang's MiniMaxSparseKVPool built on the CPU: main pool, index K+V pool, index K-only pool, their log lines and
    # the profile's cell; MiniMax-M3's config, then 8 seeded variations (heads, widths, sparse layers, tp, page size)
    cfg = minimax_m3_vl()
    assert_agrees("MiniMax-M3 (VL wrapper)", cfg)          # and ModelConfig's view of the main pool
    cases = [(cfg, 1, 1000, 1)] + oracle.minimax_variations(cfg, 8, seed=31)
    for i, (varied, tp, tokens, page) in enumerate(cases):
        bad = [c for c in oracle.minimax_pool_checks(f"m3#{i}", varied, tp, tokens, page) if not c.matches]
        assert not bad, "\n".join(f"{c.case}: {c.quantity}: kvmem {c.kvmem!r}, SGLang {c.engine!r}" for c in bad)


def test_sglang_reads_a_transformers_layout_zaya_config_as_alternating_attention_and_moe():
    # why zaya is refused (kvmem/engines/sglang/families.py): SGLang's ZayaConfig takes transformers' 40 decoder layers
    # (each attention + MoE) as 40 alternating layers, attention (and its CCA state) on the even ids only
    # transformers' own class (once SGLang is imported, AutoConfig's "zaya" is SGLang's ZayaConfig)
    from transformers.models.zaya.configuration_zaya import ZayaConfig
    cfg = dict(ZayaConfig().to_dict(), architectures=["ZayaForCausalLM"])
    assert cfg["num_hidden_layers"] == 40 and set(cfg["layer_types"]) == {"hybrid"}
    view = oracle.sglang_view(cfg)
    assert view["full"] == view["linear"] == list(range(0, 40, 2))

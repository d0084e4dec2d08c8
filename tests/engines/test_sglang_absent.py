"""SGLang mode on config files that leave fields out, where SGLang 0.5.23 reads the file with its own config class
and fills the field otherwise than transformers' class (kvmem's reader) or raises
(kvmem/engines/sglang/own_configs.py; found and judged by kvmem/oracles/sglang_absent.py with SGLang's ModelConfig)."""

import pytest

import kvmem
from kvmem import Model
from kvmem.engines.sglang import cell_size
from kvmem.engines.sglang.own_configs import sglang_model


def drop(cfg: dict, *names: str) -> dict:
    text = cfg.get("text_config")
    if isinstance(text, dict):
        return {**cfg, "text_config": {k: v for k, v in text.items() if k not in names}}
    return {k: v for k, v in cfg.items() if k not in names}


def cell(cfg: dict) -> int:
    return cell_size(Model.from_hf_config(cfg), kv_dtype="bf16")


def test_qwen3_5_without_kv_heads_takes_sglangs_2():
    # Qwen3.5-27B: 64 layers, every 4th full attention (16), 4 KV heads x (256 + 256) x 2 B = 4,096 B per layer:
    #   16 x 4,096 = 65,536 B/token; SGLang's Qwen3_5TextConfig (a Qwen3NextConfig) fills 2 KV heads
    #   (configs/qwen3_next.py#L190; transformers' 4): 16 x 2 x 512 x 2 B = 32,768 B/token
    cfg = kvmem.get_model("qwen3.5-27b").config
    assert cell(cfg) == 65_536
    assert cell(drop(cfg, "num_key_value_heads")) == 32_768


@pytest.mark.parametrize(("preset", "field", "reason"), [
    ("qwen3-next-80b-a3b", "full_attention_interval", "Qwen3NextConfig reads full_attention_interval"),
    ("qwen3.5-27b", "full_attention_interval", "Qwen3_5TextConfig"),
    ("nemotron-h-8b", "n_groups", "NemotronHConfig reads n_groups"),
    ("deepseek-v3.2", "index_head_dim", "index_head_dim"),
    ("kimi-linear-48b-a3b", "kv_lora_rank", "KimiLinearConfig leaves it None"),
])
def test_a_field_sglangs_own_class_cannot_do_without_is_refused_with_sglangs_reason(preset, field, reason):
    model = Model.from_hf_config(drop(kvmem.get_model(preset).config, field))
    with pytest.raises(ValueError, match=f"'{field}' is absent: .*{reason}"):
        kvmem.estimate(model, engine="sglang", tokens=1024)


def test_layer_types_against_full_attention_interval_follow_the_interval_or_refuse():
    # SGLang takes Qwen3-Next's attention layers from full_attention_interval alone (configs/qwen3_next.py
    # #L259-L284): a file whose layer_types say otherwise is refused
    cfg = dict(kvmem.get_model("qwen3-next-80b-a3b").config)
    types = ["full_attention" if i % 4 == 0 else "linear_attention" for i in range(cfg["num_hidden_layers"])]
    with pytest.raises(ValueError, match="layer 0: .*full_attention_interval 4"):
        kvmem.estimate(Model.from_hf_config({**cfg, "layer_types": types}), engine="sglang", tokens=1024)


def test_deepseek_v3_2_without_index_topk_is_plain_mla_under_sglang():
    # model_config.py#L191-L212 is_deepseek_dsa needs index_topk (_DeepseekV32ConfigAlias has no default):
    #   with it  61 x 576 x 2 B = 70,272 + 61 indexer keys x (128 + 4) B = 8,052 -> 78,324 B/token
    #   without  61 x 576 x 2 B = 70,272 B/token, no indexer
    cfg = kvmem.get_model("deepseek-v3.2").config
    assert cell(cfg) == 70_272 + 8_052 == 78_324
    assert cell(drop(cfg, "index_topk")) == 70_272


def test_granite_hybrid_without_fields_takes_sglangs_defaults():
    # SGLang's GraniteMoeHybridConfig (configs/granitemoehybrid.py#L142-L165, #L186-L193): attention every 6th layer
    # when layer_types is absent; 8 KV heads; mamba_d_state 128
    from kvmem.oracles.transformers import default_config
    pytest.importorskip("transformers")
    cfg = {**default_config("granitemoehybrid").to_dict(), "architectures": ["GraniteMoeHybridForCausalLM"]}
    model = sglang_model(Model.from_hf_config(drop(cfg, "layer_types")))
    assert [i for i, layer in enumerate(model.layers) if layer.kind.value == "full"] == [5, 11, 17, 23, 29]
    kv = sglang_model(Model.from_hf_config(drop(cfg, "num_key_value_heads")))
    assert {layer.kv_heads for layer in kv.layers if layer.kind.value == "full"} == {8}
    with pytest.raises(ValueError, match=r"mamba_d_head \(64\) \* mamba_n_heads \(128\) must equal mamba_intermediate"):
        sglang_model(Model.from_hf_config(drop(cfg, "hidden_size")))   # SGLang's 2,048 x 2 = 4,096 != 64 x 128


def test_muse_spark_hybrid_swa_with_sliding_layers_and_all_full_without_layer_types():
    # transformers' MuseSparkConfig defaults: 62 layers, 16 KV heads x 64, window 2,048; 16 full, 46 sliding.
    # SGLang 0.5.23 (its own MuseSparkTextConfig, registered over transformers'): hybrid SWA when a layer is sliding
    # (configs/muse_spark.py#L115-L117), every layer full when the file has no layer_types (#L55-L59).
    # Per layer 16 x (64 + 64) x 2 B = 4,096 B/token; at 8,192 tokens, page 1, one padding row per layer (62 x 4,096):
    #   hybrid   16 x 4,096 x 8,192 + 46 x 4,096 x 2,048 + 253,952 = 923,000,832 B
    #   all full 62 x 4,096 x 8,192 + 253,952 = 2,080,628,736 B
    transformers = pytest.importorskip("transformers.models.muse_spark.configuration_muse_spark")
    cfg = {**transformers.MuseSparkConfig().to_dict(), "architectures": ["MuseSparkForConditionalGeneration"]}

    def sglang(c):
        return kvmem.estimate(Model.from_hf_config(c), engine="sglang", tokens=8192, kv_dtype="bf16").kv_bytes
    assert sglang(cfg) == 16 * 4096 * 8192 + 46 * 4096 * 2048 + 62 * 4096 == 923_000_832
    assert sglang(drop(cfg, "layer_types")) == 62 * 4096 * 8192 + 62 * 4096 == 2_080_628_736


def test_exaone_without_kv_heads_is_multi_head_under_sglang():
    # SGLang's own ExaoneConfig: num_key_value_heads None -> num_attention_heads (configs/exaone.py#L151, #L172-L174);
    # transformers' ExaoneConfig: 8. EXAONE defaults: 32 layers, 32 heads x 128:
    #   with 8 KV heads  32 x 8 x (128 + 128) x 2 B = 131,072 B/token
    #   without          32 x 32 x 256 x 2 B = 524,288 B/token
    cfg = {"model_type": "exaone", "architectures": ["ExaoneForCausalLM"], "num_layers": 32, "hidden_size": 4096,
           "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 102400}
    assert cell(cfg) == 131_072
    assert cell(drop(cfg, "num_key_value_heads")) == 524_288

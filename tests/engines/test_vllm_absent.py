"""vLLM mode on config files that leave fields out, where vLLM 0.33.0 reads the file with its own config class
(vllm/transformers_utils/config.py _CONFIG_REGISTRY) and fills the field otherwise than transformers' class,
which kvmem's reader follows (found by kvmem/oracles/vllm_absent.py, tests/oracles/test_vllm_absent_oracle.py)."""

import pytest

import kvmem
from kvmem import Model
from kvmem.engines.vllm.models import vllm_layers
from kvmem.engines.vllm.options import LATEST

# Beam, 6 layers with a layer_types list (5 sliding, then full)
BEAM = {"model_type": "beam", "num_hidden_layers": 6, "hidden_size": 4096, "num_attention_heads": 32,
        "num_key_value_heads": 8, "head_dim": 128, "sliding_window": 1024,
        "layer_types": ["sliding_attention"] * 5 + ["full_attention"]}


def vllm_bytes(cfg: dict, tokens: int) -> int:
    return kvmem.estimate(Model.from_hf_config(cfg), engine="vllm", tokens=tokens, kv_dtype="bf16").kv_bytes


def test_beam_without_sliding_window_takes_vllms_4096_not_transformers_512():
    # vllm@v0.33.0 configs/beam.py#L32: sliding_window 4096 (transformers' BeamConfig: 512, kvmem's reading)
    cfg = {k: v for k, v in BEAM.items() if k != "sliding_window"}
    assert Model.from_hf_config(cfg).layers[0].window == 512
    layers = vllm_layers(Model.from_hf_config(cfg), 1, LATEST)
    assert [layer.window for layer in layers] == [4096] * 5 + [0]
    # the file vLLM's class makes of it sizes alike, and differs from the 512 window at 8,192 tokens
    assert vllm_bytes(cfg, 8192) == vllm_bytes({**BEAM, "sliding_window": 4096}, 8192)
    assert vllm_bytes(cfg, 8192) != vllm_bytes({**BEAM, "sliding_window": 512}, 8192)


def test_beam_without_kv_heads_or_head_dim_takes_vllms_defaults():
    # configs/beam.py#L26: 4 KV heads (transformers': 8); models/beam/nvidia/attention.py#L66: head_dim =
    # config.head_dim or hidden_size // heads = 4,096 // 32 = 128
    cfg = {k: v for k, v in BEAM.items() if k not in ("num_key_value_heads", "head_dim")}
    layers = vllm_layers(Model.from_hf_config(cfg), 1, LATEST)
    assert {(layer.kv_heads, layer.head_dim_k, layer.head_dim_v) for layer in layers} == {(4, 128, 128)}
    # the full layer at 8,192 tokens: 4 heads x (128 + 128) x 2 B = 2,048 B/token x 8,192 = 16,777,216 B, half
    # of the 8-head file's 33,554,432 B
    full = vllm_bytes({**cfg, "layer_types": ["full_attention"] * 6}, 8192)
    assert full == 6 * 2048 * 8192 == 100_663_296
    assert vllm_bytes({**BEAM, "layer_types": ["full_attention"] * 6}, 8192) == 2 * full


def test_beam_without_num_hidden_layers_takes_vllms_24():
    # configs/beam.py#L24, #L52-L57: 24 layers; a 6-entry layer_types then raises in vLLM's class (and kvmem's
    # reader, whose transformers default is 52 layers, refuses it first)
    cfg = {k: v for k, v in BEAM.items() if k != "num_hidden_layers"}
    with pytest.raises(ValueError, match="layer_types must"):
        kvmem.estimate(Model.from_hf_config(cfg), engine="vllm", tokens=1024)
    # 24 entries: transformers' class would read 52 layers; vLLM's takes 24, as kvmem's vLLM mode does
    listed = {**cfg, "layer_types": ["sliding_attention"] * 24}
    with pytest.raises(ValueError, match="layer_types must"):
        Model.from_hf_config(listed)   # kvmem's reader: transformers' 52 layers against 24 entries
    # neither layer count nor layer_types: vLLM builds 24 sliding layers (#L50-L51)
    bare = {k: v for k, v in cfg.items() if k != "layer_types"}
    layers = vllm_layers(Model.from_hf_config(bare), 1, LATEST)
    assert len(layers) == 24 and {layer.kind.value for layer in layers} == {"sliding"}


KIMI = kvmem.get_model("kimi-linear-48b-a3b").config


@pytest.mark.parametrize("field", ["kv_lora_rank", "qk_rope_head_dim", "num_hidden_layers"])
def test_kimi_linear_without_a_field_vllms_class_leaves_none_is_refused(field):
    # vllm@v0.33.0 configs/kimi_linear.py#L18, #L43-L45: num_hidden_layers 32, kv_lora_rank / qk_rope_head_dim None
    cfg = {k: v for k, v in KIMI.items() if k != field}
    with pytest.raises(ValueError, match=f"'{field}' is absent: vLLM 0.33.0's own KimiLinearConfig"):
        kvmem.estimate(Model.from_hf_config(cfg), engine="vllm", tokens=1024)
    # the whole file still sizes: 7 MLA layers x (512 + 64) x 2 B = 8,064 B/token (+ the KDA state)
    assert kvmem.estimate(Model.from_hf_config(KIMI), engine="vllm", tokens=1024).kv_bytes > 0


def test_muse_spark_without_layer_types_is_refused_as_vllm_refuses_it():
    # vllm@v0.33.0 configs/muse_spark.py#L321-L343: MuseSparkTextConfig has no defaults and reads layer_types
    from kvmem.oracles.transformers import default_config
    pytest.importorskip("transformers")
    cfg = default_config("muse_spark").to_dict()
    text = {k: v for k, v in cfg["text_config"].items() if k != "layer_types"}
    cfg = {**cfg, "text_config": {**text, "num_shared_experts": 0}}
    with pytest.raises(ValueError, match="MuseSparkTextConfig has no defaults .* reads 'layer_types'"):
        kvmem.estimate(Model.from_hf_config(cfg), engine="vllm", tokens=1024)

"""Shared experts and leading dense layers that transformers' config classes name their own way
(kvmem/configs/params.py moe_shape): afmoe, exaone_moe, cohere2_moe (num_shared_experts), aria_text
(moe_num_shared_experts). transformers 5.24 on the meta device is the judge (kvmem/oracles/params.py)."""

import importlib.util

import pytest

from kvmem import Model

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None
                                or importlib.util.find_spec("vllm") is not None,
                                reason="judged in the main environment (transformers 5.24 and torch)")

SHAPE = dict(num_hidden_layers=4, hidden_size=64, intermediate_size=96, num_attention_heads=4, num_key_value_heads=2,
             vocab_size=300, max_position_embeddings=4096, head_dim=16)
# model_type: (the shared count's field, the MoE fields, kvmem's added parameters for 3 shared experts instead of 1)
CASES = {
    # 3 MoE layers (the first dense: num_dense_layers / first_k_dense_replace 1) x 3 x 64 x (2 x 32)
    "afmoe": ("num_shared_experts", {"num_experts": 4, "moe_intermediate_size": 32}, 36_864),
    "exaone_moe": ("num_shared_experts", {"num_experts": 4, "moe_intermediate_size": 32}, 36_864),
    # 4 MoE layers x 3 x 64 x (2 x 96): the shared MLP is intermediate_size x count wide
    "cohere2_moe": ("num_shared_experts", {"num_experts": 4}, 147_456),
    "aria_text": ("moe_num_shared_experts", {"moe_num_experts": 4}, 147_456),
}


def _config(model_type: str, **fields) -> dict:
    from transformers import AutoConfig
    cfg = AutoConfig.for_model(model_type, **SHAPE, **fields).to_dict()
    cfg["model_type"] = model_type
    return cfg


@pytest.mark.parametrize("model_type", sorted(CASES))
def test_shared_experts_counted_as_transformers(model_type):
    from kvmem.oracles.params import meta_count
    field, moe, by_hand = CASES[model_type]
    one, three = _config(model_type, **moe, **{field: 1}), _config(model_type, **moe, **{field: 3})
    mine = Model.from_hf_config(three).params_total - Model.from_hf_config(one).params_total
    assert mine == meta_count(three) - meta_count(one) == by_hand      # was 0: the field was not read


@pytest.mark.parametrize("model_type", ["afmoe", "exaone_moe"])
def test_first_layer_dense(model_type):
    assert Model.from_hf_config(_config(model_type, **CASES[model_type][1])).facts.moe.moe_layers == \
        (False, True, True, True)


@pytest.mark.parametrize(("model_type", "total"), [("aria_text", 605_248), ("exaone_moe", 236_480)])
def test_total_is_transformers(model_type, total):
    # exaone_moe: with its q/k norms (2 x 16 a layer x 4); afmoe and cohere2_moe differ elsewhere (not shared)
    from kvmem.oracles.params import meta_count
    field, moe, _ = CASES[model_type]
    cfg = _config(model_type, **moe, **{field: 3})
    assert Model.from_hf_config(cfg).params_total == meta_count(cfg) == total

"""hy_v3's parameter count (kvmem/configs/params.py): shared experts, the dense first layer, q/k norms.

transformers 5.24's HYV3 is the judge: the model built on the meta device (kvmem/oracles/params.py meta_count).
"""

import importlib.util

import pytest

from kvmem import Model
from kvmem.configs import ConfigError
from tests.weights.test_formula_all_active import HY_V3

# transformers' HYV3Config at its defaults (configuration_hy_v3.py#L80-L113): 80 layers, hidden 4096
DEFAULT = {"model_type": "hy_v3", "architectures": ["HYV3ForCausalLM"]}


def test_default_shape_by_hand():
    # embedding and untied lm_head: 2 x 120,832 x 4,096 = 989,855,744
    # per layer: attention 4096 x 8192 (q) + 2 x 4096 x 1024 (k, v) + 8192 x 4096 (o) + 2 x 128 (q/k norm)
    #   = 75,497,728; two RMSNorms 8,192
    # layer 0 dense (mlp_layer_types' default): 3 x 4,096 x 13,312 = 163,577,856
    # layers 1-79 MoE: 192 x 3 x 4,096 x 1,536 (experts) + 3 x 4,096 x 1,536 (one shared expert)
    #   + 192 x 4,096 (router) = 3,643,539,456; final norm 4,096
    # 989,855,744 + 80 x 75,505,920 + 163,577,856 + 79 x 3,643,539,456 + 4,096 = 295,033,528,320
    # (transformers 5.24 on the meta device: the same; was 297,003,520,000 with no shared expert, 80 MoE layers)
    m = Model.from_hf_config(DEFAULT)
    assert m.params_total == 295_033_528_320
    moe = m.facts.moe
    assert (moe.shared_intermediate_size, moe.dense_intermediate_size) == (1536, 13312)
    assert moe.moe_layers == (False,) + (True,) * 79


@pytest.mark.skipif(importlib.util.find_spec("torch") is None or importlib.util.find_spec("vllm") is not None,
                    reason="judged in the main environment (transformers 5.24 and torch)")
@pytest.mark.parametrize("fields", [{}, {"num_experts_per_tok": 2, "num_shared_experts": 2},
                                    {"mlp_layer_types": ["sparse"] * 8},
                                    {"mlp_layer_types": ["dense", "sparse"] * 4, "num_shared_experts": 3}])
def test_small_configs_are_transformers(fields):
    from kvmem.oracles.params import meta_count
    cfg = {**HY_V3, **fields}
    assert Model.from_hf_config(cfg).params_total == meta_count(cfg)


def test_small_config_by_hand():
    # HY_V3 (8 layers, hidden 256, 8 experts of 128, dense width 512, vocab 1,000, head_dim 64):
    # embeddings 2 x 256,000; attention 8 x (256 x 256 + 2 x 256 x 128 + 256 x 256 + 128) = 8 x 196,736;
    # norms 8 x 512 + 256; layer 0 dense 3 x 256 x 512 = 393,216; 7 MoE layers x (8 x 3 x 256 x 128
    # + 3 x 256 x 128 + 8 x 256) = 7 x 886,784; 512,000 + 1,573,888 + 4,352 + 393,216 + 6,207,488 = 8,690,944
    # (was 8,397,056: no shared expert, no q/k norm, layer 0 MoE)
    assert Model.from_hf_config(HY_V3).params_total == 8_690_944


def test_no_shared_expert_is_refused():
    # transformers builds an intermediate_size-wide shared MLP for num_shared_experts 0 (HYV3MLP's
    # "intermediate_size or config.intermediate_size"), llama.cpp a moe_intermediate_size-wide one: no one count
    with pytest.raises(ConfigError, match="'num_shared_experts' must be an integer from 1"):
        Model.from_hf_config({**HY_V3, "num_shared_experts": 0})

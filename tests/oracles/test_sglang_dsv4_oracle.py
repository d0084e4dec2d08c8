"""kvmem's SGLang DeepSeek-V4 pools against SGLang 0.5.23's own DSV4PoolConfigurator and DeepSeekV4TokenToKVPool
(kvmem/oracles/sglang_dsv4.py: its resolved launch defaults, its configurator, its pool built on the meta device):
pool sizes, every pool's bytes, max_running_requests and the DSV4 log lines equal, on DeepSeek-V4-Flash and -Pro
and on seeded variations of layers, compress ratios, window and indexer width."""

import copy
import random

import pytest

from tests.oracles.conftest import require

require("sglang")

import kvmem  # noqa: E402
from kvmem.oracles.sglang_dsv4 import dsv4_pools  # noqa: E402

GIB = 1 << 30


def _preset(name):
    return kvmem.get_model(name)


def _compare(model, kv_memory, ratio=None, requests=None):
    theirs = dsv4_pools(model.config, kv_memory=kv_memory, swa_full_tokens_ratio=ratio,
                        max_running_requests=requests)
    options = {}
    if ratio is not None:
        options["swa_full_tokens_ratio"] = ratio
    if requests is not None:
        options["max_running_requests"] = requests
    ours = kvmem.capacity(model, engine="sglang", kv_memory=kv_memory, **options)
    if theirs["error"]:
        assert ours.refusal is not None and ours.tokens == 0
        assert theirs["error"].split(":")[0] in str(ours.refusal), (theirs["error"], ours.refusal)
        return theirs
    d = ours.details
    assert (ours.tokens, d.swa_layer_tokens, d.max_running_requests) == (theirs["full"], theirs["swa"],
                                                                        theirs["max_running_requests"])
    assert {p["role"]: p["k_bytes"] for p in d.pools} == theirs["pools"]
    assert list(ours.log_lines) == theirs["log"]
    return theirs


@pytest.mark.parametrize("name", ["deepseek-v4-flash", "deepseek-v4-pro"])
@pytest.mark.parametrize("kv_memory, ratio, requests", [
    (40 * GIB, None, None), (8 * GIB, None, None), (100 * GIB, 0.25, None), (20 * GIB, None, 64),
    (3 * GIB, 0.5, 1024), (GIB // 4, None, None), (2 << 20, None, None)])
def test_presets_equal_sglangs_own_pools(name, kv_memory, ratio, requests):
    _compare(_preset(name), kv_memory, ratio, requests)


def test_flash_numbers():
    # 40 GiB: 7,086.75 B a full token (0.1 x 31,875 B a SWA slot + 21 x 179.25 + 20 x 6.75), 2.53 GiB of c128
    # state for 257 slots: 5,677,312 full tokens, 567,552 SWA, 1,419,328 c4 rows, 44,354 c128 rows
    got = _compare(_preset("deepseek-v4-flash"), 40 * GIB)
    assert (got["full"], got["swa"], got["c4"], got["c128"]) == (5_677_312, 567_552, 1_419_328, 44_354)
    # SWA 43 x 2,218 pages x 149,760 B; c4 21 x 22,181 x 37,440; c4 indexer 21 x 22,181 x 8,448; c128 20 x 22,305 x
    # 1,728; c4 states 21 x 17,748 rows x (8,192 + 2,048) B; c128 state 20 x 33,152 rows x 4,096 B
    assert sum(got["pools"].values()) == 42_961_089_088


def _variation(rng, base):
    cfg = copy.deepcopy(base.config)
    layers = rng.randint(3, 12)
    ratios = [rng.choice([0, 4, 128]) for _ in range(layers)]
    ratios[rng.randrange(layers)] = 4
    cfg.update(num_hidden_layers=layers, compress_ratios=ratios + [0], sliding_window=rng.choice([64, 128, 256]),
               index_head_dim=rng.choice([64, 128, 256]), max_position_embeddings=rng.choice([65536, 1048576]))
    return kvmem.Model.from_hf_config(cfg)


@pytest.mark.parametrize("seed", range(6))
def test_seeded_variations_equal_sglangs_own_pools(seed):
    rng = random.Random(7000 + seed)
    model = _variation(rng, _preset("deepseek-v4-flash"))
    for kv_memory in (rng.choice([1, 4, 16]) * GIB, rng.randint(64, 900) << 20):
        _compare(model, kv_memory, rng.choice([None, 0.05, 0.3]), rng.choice([None, 8, 512]))

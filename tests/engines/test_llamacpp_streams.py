"""The sequence counts llama.cpp aborts on (kvmem.engines.llamacpp.streams): with a KV stream per sequence,
kimi-linear and minimax-01 create a context only where the reserve's tokens are a multiple of the streams (the aborts
themselves are judged by llama.cpp in tests/oracles/test_llamacpp_kimi_oracle.py and the minimax-01 oracle)."""

import pytest

import kvmem
from kvmem.engines.llamacpp.streams import check_streams, creatable_streams


@pytest.mark.parametrize("name", ["kimi-linear-48b-a3b", "minimax-m1"])
def test_only_the_divisors_of_the_reserve_are_created(name):
    model = kvmem.get_model(name)
    assert creatable_streams(model, 256, False, lambda n_seq: 512) == (1, 2, 4, 8, 16, 32, 64, 128, 256)
    assert creatable_streams(model, 12, False, lambda n_seq: 480) == (1, 2, 3, 4, 5, 6, 8, 10, 12)
    assert creatable_streams(model, 7, True, lambda n_seq: 512) == tuple(range(1, 8))      # one stream: -kvu
    with pytest.raises(ValueError, match="give -ub a multiple of 3, or --kv-unified"):
        check_streams(model, 3, False, 512)


def test_other_families_take_every_count():
    model = kvmem.get_model("kimi-k2-instruct")
    assert creatable_streams(model, 9, False, lambda n_seq: 512) == tuple(range(1, 10))
    check_streams(model, 3, False, 512)


def test_a_plan_with_such_a_count_is_refused():
    with pytest.raises(ValueError, match="aborts creating this kimi-linear context"):
        kvmem.estimate("kimi-linear-48b-a3b", tokens=8192, batch=3, engine="llama.cpp")
    assert kvmem.estimate("kimi-linear-48b-a3b", tokens=8192, batch=4, engine="llama.cpp").total_bytes > 0


def test_the_max_batch_is_a_count_llama_cpp_creates_and_grows_with_the_cards():
    # kimi-linear aborts on 3 sequences of -ub 512 (above): a search over every count stopped short of it (4 x 3090
    # answered 2 where 3 x 3090 answered 16); over the counts it creates, more cards hold no fewer sequences
    most = [kvmem.fit("kimi-linear-48b-a3b", gpu="rtx-3090-24gb", num_gpus=n, context=32768, engine="llama.cpp",
                      weight_dtype="q4_k_m").max_batch for n in (2, 3, 4)]
    assert all(512 % b == 0 for b in most) and most == sorted(most) and most[0] > 2, most

"""kvmem.engines.llamacpp.panel: the options the offload panel and report pass on, read from
kvmem.llamacpp_offload's own signature."""

import inspect

import kvmem
from kvmem.engines.llamacpp.panel import PLACED, offload_options


def test_the_options_are_the_offload_functions_keyword_parameters_beyond_the_placement():
    params = set(inspect.signature(kvmem.llamacpp_offload).parameters)
    assert PLACED <= params
    given = {name: 1 for name in params} | {"gpu": "h100", "num_gpus": 2, "swa_full": True}
    assert set(offload_options(given)) == params - PLACED
    assert offload_options({"type_k": "q8_0", "n_seq": 2, "block_size": 16}) == {"type_k": "q8_0", "n_seq": 2}

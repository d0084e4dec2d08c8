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


def test_the_decode_curve_takes_only_its_own_options():
    # llamacpp_offload's model_path and context_set name the file and whether -c was given; the decode
    # curve's -ngl steps read neither, and passing them on was a TypeError
    from kvmem.engines.llamacpp.offload import decode_curve
    from kvmem.engines.llamacpp.panel import panel_decode_curve
    assert offload_options({"model_path": "m.gguf", "context_set": False, "n_ubatch": 256}, decode_curve) \
        == {"n_ubatch": 256}
    args = dict(gpus=["rtx-3060-12gb"], context=4096, batch=1, weight_dtype="q4_k_m", kv_dtype="auto",
                host_memory=None)
    plain = panel_decode_curve("llama-3.1-8b", options={}, **args)
    named = panel_decode_curve("llama-3.1-8b", options={"model_path": "m.gguf", "context_set": False}, **args)
    assert [s.to_dict() for s in named] == [s.to_dict() for s in plain] and len(plain) == 34

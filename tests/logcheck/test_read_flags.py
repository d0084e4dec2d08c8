"""kvmem.logcheck.command.read_flags: a user's llama-server flags read by check-log's own reader, strictly."""

import pytest

from kvmem.engines.llamacpp.logs import READER
from kvmem.engines.llamacpp.overrides import EXPS_REGEX
from kvmem.logcheck.command import read_flags


def test_the_flags_check_log_reads_are_read_the_same():
    got = read_flags("-ngl 99 -ts 3,1 --n-cpu-moe 2 -ot 'blk\\.(1|2)\\.ffn_.*=CPU' -c 32768 -fa on", READER)
    values = {k: v for k, (v, _) in got.items()}
    assert values["n_gpu_layers"] == 99 and values["tensor_split"] == "3,1" and values["n_ctx"] == 32768
    assert values["flash_attn"] is True
    # in the command's order: --n-cpu-moe 2 (blk.0 and blk.1's experts, common.h llm_add_n_cpu_ffn_overrides), then -ot
    assert values["override_tensor"] == [(rf"blk\.(?:0|1){EXPS_REGEX}", "CPU"), (r"blk\.(1|2)\.ffn_.*", "CPU")]


def test_as_llama_cpp_reads_them_the_last_value_wins_and_underscores_are_dashes():
    # common/arg.cpp#L820-L836: '_' -> '-' in a "--" flag; "only last value will be used"; -ot values add up
    got = read_flags("-ngl 99 --n_gpu_layers 40 -fa on -fa auto -ot a=CPU -ot b=CUDA0", READER)
    assert got["n_gpu_layers"][0] == 40 and got["flash_attn"][0] is None
    assert got["override_tensor"][0] == [("a", "CPU"), ("b", "CUDA0")]


@pytest.mark.parametrize("text, named", [
    ("-ngl 99 -sm row", "'-sm' is not a flag kvmem reads"),
    ("-ngl 99 model.gguf", "'model.gguf' is not a flag kvmem reads"),
    ("--n-gpu-layers=99", "llama.cpp: error: invalid argument: --n-gpu-layers=99"),
    ("-ngl", "-ngl takes a value and has none"),
    ("--n-cpu-moe -3", "takes a whole number of layers"),
    ("-ot 'blk", "not split as a shell would"),
    ("-c " + "1" * 2100, "more than the 2,000 kvmem reads"),
])
def test_what_it_does_not_read_is_refused_by_name(text, named):
    with pytest.raises(ValueError, match="your flags") as err:
        read_flags(text, READER, max_chars=2000, what="your flags")
    assert named in str(err.value)

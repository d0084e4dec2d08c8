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


@pytest.mark.parametrize("text, named", [
    ("-ngl 99 -sm row", "'-sm' is not a flag kvmem reads"),
    ("-ngl 99 model.gguf", "'model.gguf' is not a flag kvmem reads"),
    ("-ngl 99 -ngl 40", "-ngl 40 given again (first 99)"),
    ("-ngl", "-ngl takes a value and has none"),
    ("--n-cpu-moe -3", "takes a whole number of layers"),
    ("-ot 'blk", "not split as a shell would"),
    ("-c " + "1" * 2100, "more than the 2,000 kvmem reads"),
])
def test_what_it_does_not_read_is_refused_by_name(text, named):
    with pytest.raises(ValueError, match="your flags") as err:
        read_flags(text, READER, max_chars=2000, what="your flags")
    assert named in str(err.value)

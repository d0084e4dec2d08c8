"""A user's -ot pattern whose backtracking can blow up is refused on every path that searches tensor names with it
(check-log's command and -o override_tensor, kvmem fit --llama-args, the Python API's override_tensor), before it is
searched; the patterns people publish and kvmem prints are still read (review finding 1, issue 34)."""

import json
import pathlib
import re
import shlex
import time

import pytest

from kvmem.engines.llamacpp import fitting, logs
from kvmem.engines.llamacpp.overrides import EXPS_REGEX, compile_rules
from kvmem.engines.llamacpp.own_flags import read_llama_args
from kvmem.logcheck import check_log
from kvmem.regex_guard import MAX_PATTERN_WAYS, slow_pattern

ROOT = pathlib.Path(__file__).resolve().parents[2]
# the reviewer's log: a hostile -ot above two lines of a Llama 3.1 8B run
REVIEW_LOG = ("llama-server -m /m/Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf -ngl 99 -c 4096 -ot '{p}=CPU'\n"
              "print_info: file type   = Q4_K - Medium\n"
              "load_tensors:        CUDA0 model buffer size =  4403.49 MiB\n")
SIDE_BY_SIDE = "has two repeats side by side that can match the same characters"
NESTED = "repeats a group that holds a repeat or an alternation"
HOSTILE = {
    ".?" * 26 + "X": SIDE_BY_SIDE,       # the reviewer's: 2**26 ways per start (it hung check-log past 100 s)
    "(a?){30}a{30}": NESTED,             # 2**30
    "(a|a)*": NESTED,                    # 2**n on a name of n a's
    "(.*){20}": NESTED,                  # n**20
    ".*.*.*.*.*.*X": SIDE_BY_SIDE,       # n**6
    "(?i)A*a*": SIDE_BY_SIDE,            # the same letters once case is ignored
    r"\d+[0-9]*": SIDE_BY_SIDE,
    "a*(?:b?|c)a*": SIDE_BY_SIDE,        # only optional text between the two a*
    ".?a" * 6: "has 6 variable repeats",  # apart, but 2**6 x the rest: more than 4
    "(a|a)" * 10: f"has more than {MAX_PATTERN_WAYS:,} ways through its alternatives",   # 2**10
}


@pytest.mark.parametrize("pattern", HOSTILE)
def test_a_pattern_that_can_blow_up_is_refused_at_once(pattern):
    start = time.perf_counter()
    assert HOSTILE[pattern] in slow_pattern(pattern)
    with pytest.raises(ValueError, match=re.escape(HOSTILE[pattern])):        # check-log, the command above a log
        check_log(REVIEW_LOG.format(p=pattern))
    with pytest.raises(ValueError, match=re.escape(HOSTILE[pattern])):        # check-log -o override_tensor
        check_log(REVIEW_LOG.splitlines(True)[1] + REVIEW_LOG.splitlines(True)[2], "llama-3.1-8b",
                  override_tensor=f"{pattern}=CPU")
    with pytest.raises(ValueError, match=re.escape(HOSTILE[pattern])):        # kvmem fit --llama-args
        read_llama_args(f"-ngl 99 -ot {shlex.quote(pattern + '=CPU')}")
    with pytest.raises(ValueError, match=re.escape(f"override_tensor pattern {pattern!r} {HOSTILE[pattern]}")):
        compile_rules(0, False, ((pattern, "CPU"),))                          # the Python API's layout()
    assert time.perf_counter() - start < 1.0                                   # refused in well under a second


def test_patterns_people_use_and_kvmem_prints_are_read():
    entries = json.loads((ROOT / "docs/research/llamacpp_offload_logs.json").read_text())
    published = [p for e in entries for p, _ in e.get("settings", {}).get("override_tensor", ())]
    published += [m for e in entries for m in re.findall(r"-ot \"([^\"=]+)=", e.get("settings", {}).get("command", ""))]
    assert ".ffn_.*_exps." in published
    published += [r"blk\.(1[0-9]|2[0-9])\.ffn_.*", r"blk\.(0|1|2|3|4|5|6)\.ffn.*", r"blk\.[2-9][0-9]\.ffn.*",
                  r"blk\.\d+\.ffn_.*_exps.*", r"blk\\.(1|2)\\.ffn_.*_exps", "exps", "ffn_*", r"blk\.1[3-9]\.ffn.*"]
    # kvmem's own: --cpu-moe, --n-cpu-moe 999 as check-log writes it, --fit's fractions, an expert moved by name
    printed = [EXPS_REGEX, logs._first_layers(999, EXPS_REGEX)[0][0], re.escape("blk.1.ffn_down_exps.weight")]
    printed += [rf"blk\.12{f}" for f in fitting._FRACTION.values()]
    printed += [rf"blk\.({'|'.join(map(str, range(200)))}){fitting._FRACTION['MOE']}"]
    for pattern in published + printed:
        assert slow_pattern(pattern) is None, pattern
    assert len(compile_rules(0, False, tuple((p, "CPU") for p in published + printed))) == len(published + printed)

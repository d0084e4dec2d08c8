"""check-log's -o tensor_type (llama-quantize's --tensor-type rules the file was made with): applied to every
architecture kvmem lays out, and refused by name where no llama-quantize file can hold what it says."""

import pytest

from kvmem.logcheck import check_log

# llama-3.1-8b Q4_K_M on the host (-ngl 0): llama-quantize's mix is 4,912,898,304 B = 4685.30 MiB
# (tests/engines/test_llamacpp_tensors.py); with '\.weight=q8_0' every quantised tensor is Q8_0: 8,532,934,912 B
LOG = """bin/llama-server -m Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf -ngl 0 -c 4096
build: 6209 (fb22dd07) with cc (Ubuntu 13.3.0-6ubuntu2~24.04) 13.3.0 for x86_64-linux-gnu
print_info: file type   = Q4_K - Medium
print_info: n_layer          = 32
load_tensors: offloaded 0/33 layers to GPU
load_tensors:   CPU_Mapped model buffer size =  4685.30 MiB
"""


def _model_line(result):
    (check,) = [c for c in result.checks if "model buffer" in c.quantity]
    return check.logged, check.kvmem, check.matches


def test_a_q8_0_rule_changes_a_llama_files_model_buffer():
    # review finding: the rules reached only the arch_tensors layouts; llama's was typed without them ("matches")
    assert _model_line(check_log(LOG, "llama-3.1-8b")) == ("4685.30 MiB", "4685.30 MiB", True)
    q8 = check_log(LOG, "llama-3.1-8b", tensor_type=r"\.weight=q8_0")
    assert _model_line(q8) == ("4685.30 MiB", "8137.64 MiB", False) and not q8.matches


@pytest.mark.parametrize("ggml", ["q8_k", "Q8_1", "i8", "i16", "i32", "i64", "f64"])
def test_types_llama_quantize_cannot_write_are_refused_by_name(ggml):
    # ggml_quantize_chunk has no case for them (llama.cpp@0c1e57098 ggml/src/ggml.c#L8135-L8136 assert(false))
    with pytest.raises(ValueError, match=rf"llama-quantize cannot write {ggml.upper()} \(ggml_quantize_chunk"):
        check_log(LOG, "llama-3.1-8b", tensor_type=f"attn_v={ggml}")


@pytest.mark.parametrize("ggml", ["q4_0", "IQ4_XS", "tq1_0", "mxfp4", "bf16", "f32"])
def test_types_it_writes_are_taken(ggml):
    assert check_log(LOG, "llama-3.1-8b", tensor_type=f"attn_v={ggml}").checks


def test_a_slow_pattern_is_refused_naming_tensor_type():
    with pytest.raises(ValueError, match=r"^tensor_type pattern '\(a\+\)\+b' .*backtracking"):
        check_log(LOG, "llama-3.1-8b", tensor_type="(a+)+b=q8_0")


def test_more_rules_than_kvmem_searches_are_refused_by_name():
    # kvmem's own bound (logs.MAX_TENSOR_TYPE_RULES, 4096): 20,000 rules took 4 s before, a million would take minutes
    with pytest.raises(ValueError, match="tensor_type gives 4,097 rules; kvmem takes at most 4,096"):
        check_log(LOG, "llama-3.1-8b", tensor_type=",".join(f"x{i}=q8_0" for i in range(4097)))
    with pytest.raises(ValueError, match="tensor_type gives 5,000 rules"):
        check_log(LOG, "llama-3.1-8b", tensor_type=[(f"x{i}", "q8_0") for i in range(5000)])
    assert check_log(LOG, "llama-3.1-8b", tensor_type=",".join(f"x{i}=q8_0" for i in range(4096))).matches

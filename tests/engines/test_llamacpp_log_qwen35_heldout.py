"""A held-out llama.cpp log of Qwen3.5-122B-A10B (issue 34, docs/research/heldout/llamacpp_logs_2026-12-06.md row 01)
against the qwen3.5-122b-a10b preset: every model, KV and compute line, once the log's own facts are given.

Source: a public report found by the search index (file id 51910220944; its repository is not reported),
"2026-04-20_013006_qwen3-122b-c3-phaseSevalcross.md", section 9 (startup buffers at ub=1586) and its environment
(4 x Tesla P100-PCIE-16GB; `Qwen3.5-122B-A10B-Q4_K_M-00001-of-00003.gguf` "(unsloth snapshot)"; fa=1, f16/f16 KV,
ctx=32768, ngl=999, the -ot below; run 2026-04-20). The report prints the four KV lines as one
"CUDA{0,1,2,3} KV buffer size = 192.00 MiB" and no RS lines: the excerpt below has them one a device, as the held-out
file has them. The facts the log does not print, given as the report states them:
- build: before 2026-04-20 (the report's date), so before llama.cpp PR #22673 (2026-05-16): the GGUF holds no MTP
  block (kvmem.engines.llamacpp.arch_tensors.gguf_nextn_layers) and the 48 layers split 13/12/12/11 (+ output);
- tensor_split 1,1,1,1: four equal P100s (the log prints no free memory); each GPU's KV of 3 attention layers agrees;
- the file's mix is Unsloth's, not llama-quantize's Q4_K_M: solved from the four model lines (all exact below):
  every non-expert matrix Q8_0, routed experts gate/up Q4_K and down Q5_K, output Q6_K.
"""

import pytest

from kvmem.engines.llamacpp.nextn import gguf_nextn_layers
from kvmem.logcheck import check_log

LOG = r"""llama-server -m Qwen3.5-122B-A10B-Q4_K_M-00001-of-00003.gguf -ngl 999 -fa on -c 32768 -ub 1586 -ctk f16 -ctv f16 -ot blk\.([0-9]|1[0-3]|2[0-4]|3[1-9]|4[0-7])\.ffn_.*_exps\.weight=CPU
load_tensors:        CUDA0 model buffer size =  1301.21 MiB
load_tensors:        CUDA1 model buffer size =  9550.77 MiB
load_tensors:        CUDA2 model buffer size =  9550.77 MiB
load_tensors:        CUDA3 model buffer size =  1693.13 MiB
llama_kv_cache:      CUDA0 KV buffer size =   192.00 MiB
llama_kv_cache:      CUDA1 KV buffer size =   192.00 MiB
llama_kv_cache:      CUDA2 KV buffer size =   192.00 MiB
llama_kv_cache:      CUDA3 KV buffer size =   192.00 MiB
sched_reserve:      CUDA0 compute buffer size =   980.36 MiB
sched_reserve:      CUDA1 compute buffer size =   452.31 MiB
sched_reserve:      CUDA2 compute buffer size =   452.31 MiB
sched_reserve:      CUDA3 compute buffer size =  1558.12 MiB
sched_reserve:  CUDA_Host compute buffer size =   235.48 MiB
"""
GIVEN = dict(weight_format="q4_k_m", tensor_split="1,1,1,1", build="2026-04-20")
UNSLOTH_MIX = r"ffn_down_exps\.weight=q5_k,_exps\.weight=q4_k,^output\.weight=q6_k,\.weight=q8_0"


def _lines(result) -> dict:
    return {c.line: c for c in result.checks}


def test_every_line_of_the_held_out_log_matches():
    r = check_log(LOG, **GIVEN, tensor_type=UNSLOTH_MIX)
    assert r.model == "qwen3.5-122b-a10b" and r.engine == "llama.cpp"
    assert sorted(_lines(r)) == list(range(2, 15)) and r.matches, r.to_dict()
    assert any("no 'RS buffer size' lines" in note for note in r.notes)


def test_without_the_files_mix_kv_and_compute_still_match_but_cuda0s():
    # llama-quantize's own Q4_K_M: every KV line and 4 of 5 compute lines. CUDA0's compute holds the copy of the
    # largest host expert matrix its offloaded matmuls read, ffn_down_exps: 256 x 1024 x 3072 values, Q6_K
    # (210 B a 256-block) in llama-quantize's mix = 630 MiB, Q5_K (176 B) in the file = 528 MiB: 102.00 MiB more
    checks = _lines(check_log(LOG, **GIVEN))
    assert all(checks[n].matches for n in (6, 7, 8, 9, 11, 12, 13, 14))
    assert (checks[10].logged, checks[10].kvmem) == ("980.36 MiB", "1082.36 MiB")
    assert not any(checks[n].matches for n in (2, 3, 4, 5))


def test_a_build_with_the_mtp_block_splits_otherwise():
    # from PR #22673 the converter writes Qwen3.5's MTP block (49 blocks + output over 4 GPUs: 13/12/13/10 + output)
    checks = _lines(check_log(LOG, **{**GIVEN, "build": "2026-06-01"}, tensor_type=UNSLOTH_MIX))
    assert checks[2].matches and checks[3].matches and not checks[4].matches and not checks[5].matches


def test_rs_lines_are_summed_with_the_kv_lines_when_the_log_has_them():
    # each Gated DeltaNet layer's state in llama.cpp (f32): conv 3 x (2 x 16 x 128 + 64 x 128) x 4 B = 147,456 +
    # ssm 64 x 128 x 128 x 4 B = 4,194,304 -> 4,341,760 B; CUDA0 holds 10 such layers (0..12 but 3, 7, 11) = 41.41 MiB,
    # CUDA1 and CUDA2 9 = 37.27 MiB, CUDA3 8 (37..47 but 39, 43, 47) = 33.12 MiB
    rs = "".join(f"llama_memory_recurrent:      CUDA{i} RS buffer size =    {mib} MiB\n"
                 for i, mib in enumerate(("41.41", "37.27", "37.27", "33.12")))
    r = check_log(LOG + rs, **GIVEN, tensor_type=UNSLOTH_MIX)
    assert r.matches and not any("no 'RS buffer size' lines" in note for note in r.notes)
    wrong = check_log(LOG + rs.replace("41.41", "45.41"), **GIVEN, tensor_type=UNSLOTH_MIX)
    assert [c.line for c in wrong.checks if not c.matches] == [6]


@pytest.mark.parametrize("build, blocks", [(None, 1), ("2026-05-15", 0), ("2026-05-16", 1), ("2026-04-20", 0)])
def test_qwen35_mtp_block_by_build(build, blocks):
    import kvmem
    assert gguf_nextn_layers(kvmem.get_model("qwen3.5-122b-a10b"), build) == blocks
    # glm4moe's converter wrote its NextN layer long before: no date moves it
    assert gguf_nextn_layers(kvmem.get_model("glm-4.5-air"), build) == 1


def test_a_malformed_tensor_type_is_refused_by_name():
    with pytest.raises(ValueError, match="is not PATTERN=TYPE"):
        check_log(LOG, **GIVEN, tensor_type="ffn_down_exps")
    with pytest.raises(ValueError, match="not a ggml type"):
        check_log(LOG, **GIVEN, tensor_type="ffn_down_exps=q9_z")

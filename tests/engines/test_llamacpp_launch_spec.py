"""n_rs_seq and nextn at the commands kvmem writes for llama-server (kvmem/engines/llamacpp/launch.py): the pinned
build sets them only through its speculative-decoding flags (llama.cpp@0c1e57098 common/common.h#L396-L402
need_n_rs_seq: --spec-draft-n-max, default 3, under --spec-type draft-mtp / eagle3 / dflash / dspark;
common/common.cpp#L1625 load_mtp under draft-mtp), which also build a draft context kvmem does not size."""

import pytest

import kvmem

KW = dict(gpus="rtx-3090-24gb", context=8_192, weight_dtype="q4_k_m")


def test_the_offload_notes_name_the_flag_that_sets_n_rs_seq():
    p = kvmem.llamacpp_offload("qwen3.5-27b", n_rs_seq=3, **KW)
    [note] = [n for n in p.notes if n.startswith("n_rs_seq=3")]
    # was "no llama-server flag of llama.cpp 0c1e57098 ... sets it": --spec-draft-n-max does
    assert "--spec-draft-n-max (default 3)" in note and "--spec-type draft-mtp, eagle3, dflash or dspark" in note
    assert "no llama-server flag" not in note
    assert "--spec-type" not in p.command_best and "--spec-draft-n-max" not in p.command_best
    assert not [n for n in kvmem.llamacpp_offload("qwen3.5-27b", n_rs_seq=0, **KW).notes if n.startswith("n_rs_seq")]


def test_the_plan_refuses_n_rs_seq_with_the_flags_that_would_set_it():
    kw = dict(gpu="h100-sxm-80gb", num_gpus=1, context="8k", engine="llama.cpp")
    with pytest.raises(ValueError, match=r"n_rs_seq=3: .*--spec-draft-n-max .*draft context kvmem does not size"):
        kvmem.plan("qwen3.5-27b", n_rs_seq=3, **kw)
    # n_rs_seq 0 is llama-server's own without --spec-type: the command stands, with no speculative flag
    words = " ".join(f.flag for f in kvmem.plan("qwen3.5-27b", n_rs_seq=0, **kw).flags)
    assert "--spec-type" not in words and "-np" in words

"""Issue 20: the API inputs that crashed (exit 70) become refusals naming their field, quoting at
most ~100 characters of the input; no per-layer entry goes negative."""

from __future__ import annotations

import os

import pytest

import kvmem


def _refused(fn, *words) -> str:
    with pytest.raises(ValueError) as info:
        fn()
    message = str(info.value)
    for word in words:
        assert word in message, message
    assert len(message) < 400, message
    return message


def test_a_custom_gpu_dict_with_a_text_gpu_share():      # was TypeError: '<' between int and str
    _refused(lambda: kvmem.fit("llama-3.1-8b", gpu={"name": "x", "memory": "80GiB", "gpu_share": "0.5"},
                               context=1000), "gpu_share", "'0.5'")


def test_trtllm_capacity_with_more_ranks_than_kv_heads():  # was ZeroDivisionError
    _refused(lambda: kvmem.capacity("llama-3.1-8b", engine="trtllm", kv_memory="20GiB", tp=4096), "tp=4096")


def test_offload_past_a_float():                          # was OverflowError: int too large to convert to float
    _refused(lambda: kvmem.estimate("llama-3.1-8b", tokens=100, offload=10**400), "offload", "10**400")


def test_revision_that_is_not_text():                     # was TypeError inside huggingface_hub
    _refused(lambda: kvmem.get_model("org/name", revision=5), "revision", "5")


@pytest.mark.parametrize("engine, option", [("llama.cpp", "n_rs_seq"), ("vllm", "block_size"),
                                            ("sglang", "page_size"), ("trtllm", "tokens_per_block"),
                                            ("vllm", "max_num_batched_tokens")])
def test_engine_options_have_upper_bounds(engine, option):
    # n_rs_seq=10**300 was OverflowError (struct 'f'); block_size=10**300 gave ~1.3e305 bytes
    message = _refused(lambda: kvmem.estimate("jamba-1.5-mini" if option == "n_rs_seq" else "llama-3.1-8b",
                                              engine=engine, tokens=100, **{option: 10**300}), option, "10**300")
    assert "1,099,511,627,776" in message


def test_a_megabyte_option_value_is_not_repeated():
    message = _refused(lambda: kvmem.estimate("llama-3.1-8b", engine="vllm", tokens=100, version="x" * 10**6),
                       "version", "1,000,000-character")
    assert "xxxxxxxxxx" * 11 not in message


@pytest.mark.parametrize("fraction", [0.6, 0.7, 1])
def test_sglang_gemma_3n_offload_leaves_no_negative_layer(fraction):
    # SGLang allocates Gemma-3n's 15 KV-shared layers too: 35 x 2,050,048 B at 1,000 tokens; offloading
    # 0.7 of it from the 20 layers with their own KV alone left each at -461,261 B
    base = kvmem.estimate("gemma-3n-e4b", engine="sglang", tokens=1000)
    moved = kvmem.estimate("gemma-3n-e4b", engine="sglang", tokens=1000, offload=fraction)
    assert base.per_layer == (2_050_048,) * 35
    assert min(moved.per_layer) >= 0 and sum(moved.per_layer) == moved.kv_bytes
    host = moved.offload.host_kv_bytes
    assert moved.kv_bytes == base.kv_bytes - host
    assert host == {0.6: 43_051_008, 0.7: 50_226_176, 1: 71_751_680}[fraction]   # of K and V, 35,875,840 B each


# ---------------------------------------------------------------- issue 32: --output of sweep and report

def _cli(argv):
    import contextlib
    import io

    from kvmem.cli import main
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


SWEEP = ["sweep", "--models", "llama-3.1-8b", "--gpus", "h100-sxm-80gb"]
REPORT = ["report", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--context", "8k"]


@pytest.mark.parametrize("argv", [SWEEP, REPORT], ids=["sweep", "report"])
def test_output_never_overwrites_without_force(tmp_path, argv):
    path = tmp_path / "out.txt"
    path.write_text("mine\n")
    code, _, err = _cli([*argv, "--output", str(path)])     # was: overwritten silently
    assert code == 2 and "exists; add --force to overwrite it" in err, err
    assert path.read_text() == "mine\n"
    code, _, err = _cli([*argv, "--output", str(path), "--force"])
    assert code == 0, err
    assert path.read_text().startswith(("model,gpu,engine", "# kvmem plan: llama-3.1-8b"))


@pytest.mark.parametrize("argv", [SWEEP, REPORT], ids=["sweep", "report"])
def test_output_never_follows_a_symbolic_link(tmp_path, argv):
    target = tmp_path / "elsewhere.txt"
    target.write_text("not yours\n")
    link = tmp_path / "out.txt"
    link.symlink_to(target)                                   # was: followed, the target overwritten
    for force in ([], ["--force"]):
        code, _, err = _cli([*argv, "--output", str(link), *force])
        assert code == 2 and "is a symbolic link; kvmem does not write through one" in err, err
    assert target.read_text() == "not yours\n"
    dangling = tmp_path / "dangling.txt"
    dangling.symlink_to(tmp_path / "created-through-the-link.txt")
    code, _, err = _cli([*argv, "--output", str(dangling)])
    assert code == 2 and "symbolic link" in err and not (tmp_path / "created-through-the-link.txt").exists()


def test_output_that_is_not_a_regular_file_is_refused(tmp_path):
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)                                           # opening it for writing blocked with no reader
    for path in (tmp_path, fifo):
        code, _, err = _cli([*REPORT, "--output", str(path), "--force"])
        assert code == 2 and "is not a regular file" in err, err


def test_output_new_file_is_written(tmp_path):
    path = tmp_path / "plan.json"
    code, _, err = _cli([*REPORT, "--output", str(path)])
    assert code == 0 and "json report written to" in err
    assert kvmem.rerun_report(path).to_dict()["fit"]["context"] == 8192

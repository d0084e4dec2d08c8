"""Fuzz: the kvmem command line with hostile arguments, in process (issue 13 item 8, issue 14 item 15).
Every run ends with exit 0, 1 (does not fit / the engine would refuse) or 2 (a message naming the
input), never a traceback; with --json stdout is one JSON document even for an error."""

import contextlib
import io
import json

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import kvmem
from kvmem.cli import main

from . import harness

MODELS = kvmem.list_models()
VALUES = st.one_of(st.sampled_from(["8k", "128k", "10M", "1", "0", "-5", "-1GiB", "1,5k", "9" * 5000, "nan", "abc",
                                    "3.98GiB", "20", "20GiB", "1e400", "", "½", "--json"]),
                   st.text(max_size=8))
OPTIONS = st.sampled_from([[], [], ["-o", "block_size=32"], ["-o", "max_num_batched_tokens=abc"], ["-o", "x"],
                           ["-o", "type_k=q8_0"], ["-o", "swap_space=NaN"], ["-o", "draft=llama-3.2-1b"],
                           ["-o", "page_size=" + "9" * 5000]])


@st.composite
def command_lines(draw):
    command = draw(st.sampled_from(["estimate", "capacity", "fit", "models", "gpus", "check-log"]))
    model = draw(st.one_of(st.sampled_from(MODELS), st.sampled_from(["nope", "/dev/zero", "/nonexistent.json",
                                                                     "configs/config.json", "/"])))
    argv = [command]
    if command == "estimate":
        argv += [model, "--tokens", draw(VALUES), "--batch", draw(st.sampled_from(["1", "4", "0", "-3", "x"])),
                 "--engine", draw(st.sampled_from(kvmem.list_engines() + ["foo"]))]
    elif command == "capacity":
        argv += [model, "--kv-memory", draw(VALUES), "--engine",
                 draw(st.sampled_from(["vllm", "sglang", "ideal", "llama.cpp", "trtllm", "hf-dynamic"]))]
        if draw(st.booleans()):
            argv += ["--max-model-len", draw(VALUES)]
    elif command == "fit":
        argv += [model, "--gpu", draw(st.sampled_from(["h100-sxm-80gb", "rtx-4090-24gb", "nope", "custom:abc"])),
                 "--context", draw(VALUES), "--engine", draw(st.sampled_from(["vllm", "sglang", "llama.cpp"]))]
        if draw(st.booleans()):
            argv += ["--batch", draw(st.sampled_from(["1", "8", "0", "-1"]))]
    elif command == "check-log":     # issue 32 H1: a device, a directory, a missing file, a file with no KV line
        argv += [draw(st.sampled_from(["/dev/zero", "/dev/null", "/", "/nonexistent.log", __file__])), "--model",
                 model, "--tp", draw(st.sampled_from(["1", "2", "0", "x"]))]
    if command in ("estimate", "capacity", "fit", "check-log"):
        argv += draw(OPTIONS)
    if draw(st.booleans()):
        argv.append("--json")
    return argv


def run(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse's own usage errors exit 2
            code = exc.code
    return code, out.getvalue(), err.getvalue()


@settings(max_examples=700, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(argv=command_lines())
@example(argv=["fit", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--context", "8k", "-o",
               "max_num_batched_tokens=abc"])  # issue 13: TypeError traceback
@example(argv=["capacity", "llama-3.1-8b", "--kv-memory", "3.98GiB"])   # issue 14: "not a whole number"
@example(argv=["capacity", "llama-3.1-8b", "--kv-memory", "20"])        # issue 14: read as 20 bytes
@example(argv=["capacity", "llama-3.1-8b", "--kv-memory", "-1GiB"])     # issue 14: argparse noise
@example(argv=["estimate", "llama-3.1-8b", "--tokens", "-5"])           # issue 14: argparse noise
@example(argv=["estimate", "llama-3.1-8b", "--tokens", "10M", "--engine", "vllm"])  # issue 14: exit 0
@example(argv=["estimate", "llama-3.1-8b", "--tokens", "9" * 5000, "--json"])       # issue 13: OverflowError
@example(argv=["estimate", "/dev/zero", "--tokens", "8k"])              # issue 13: read until out of memory
@example(argv=["check-log", "/dev/zero", "--model", "llama-3.1-8b"])     # issue 32 H1: read until killed
@example(argv=["check-log", "/", "--model", "llama-3.1-8b", "--json"])   # issue 32: a directory, refused by name
def test_command_line(argv):
    def check(result):
        code, out, err = result
        if code not in (0, 1, 2):
            return f"exit {code}: {err[-300:]}"
        if "Traceback" in err or "Traceback" in out:
            return f"a traceback: {err[-300:]}"
        if code == 2 and not err.strip():
            return "exit 2 without a message"
        if "--json" in argv and code in (0, 1, 2):
            try:
                json.loads(out)
            except json.JSONDecodeError:
                return f"--json printed no JSON document: {out[:200]!r}"
        return None

    harness.call(f"kvmem {' '.join(a[:20] for a in argv)}", lambda: run(argv), names=[], check=check)

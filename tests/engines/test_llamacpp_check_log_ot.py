"""check-log on llama.cpp logs run with tensor overrides (-ot, --cpu-moe, --n-cpu-moe: review finding 4), and a DSA
model's indexer cache line paired with kvmem's indexer cache, not its main cache."""

import json
import pathlib

import pytest

from kvmem.engines.llamacpp.logs import READER
from kvmem.engines.llamacpp.overrides import EXPS_REGEX
from kvmem.logcheck import check_log, command

ROOT = pathlib.Path(__file__).resolve().parents[2]
ENTRIES = {e["id"]: e for e in json.loads((ROOT / "docs/research/llamacpp_offload_logs.json").read_text())}
QWEN_OT = ENTRIES["qwen3-30b-a3b-q4km-ot-exps-two-gpus"]
GLM = sorted(name for name in ENTRIES if name.startswith("glm-5.2-ud-"))


def _with_command(entry) -> str:
    return entry["settings"]["command"] + "\n" + entry["log"]


def _flags(cmd: str) -> dict:
    return command.read([cmd], READER)


def test_the_ot_command_places_every_expert_on_the_host():
    # llama-cli ... -ot ".ffn_.*_exps.=CPU", two GPUs split 9862:31518 by free memory (given: the log excerpt
    # does not print it): every buffer line matches, the experts in the CPU_Mapped span (17447.91 MiB)
    r = check_log(_with_command(QWEN_OT), weight_format="q4_k_m", tensor_split="9862,31518")
    assert r.model == "qwen3-30b-a3b" and r.matches and len(r.checks) == 9
    assert r.inputs["override_tensor"] == ([(".ffn_.*_exps.", "CPU")], "log line 1, the command")
    assert r.to_dict()["inputs"]["override_tensor"] == {"value": [[".ffn_.*_exps.", "CPU"]],
                                                         "from": "log line 1, the command"}
    host = next(c for c in r.checks if c.quantity == "CPU_Mapped model buffer")
    assert host.kvmem == "17447.91 MiB" and host.matches


def test_the_same_override_given_as_an_option():
    log = QWEN_OT["log"]           # no command: -o override_tensor gives the rule
    r = check_log(log, "qwen3-30b-a3b", weight_format="q4_k_m", tensor_split="9862,31518",
                  override_tensor=".ffn_.*_exps.=CPU")
    assert r.matches and len(r.checks) == 9
    # --cpu-moe and --n-cpu-moe 48 (every one of the 48 layers) put the same experts on the host
    for given in (dict(cpu_moe=True), dict(n_cpu_moe=48)):
        assert check_log(log, "qwen3-30b-a3b", weight_format="q4_k_m", tensor_split="9862,31518", **given).matches
    # without it every expert is on the GPUs: the host keeps only the token embeddings (166.92 MiB)
    bare = check_log(log, "qwen3-30b-a3b", weight_format="q4_k_m", tensor_split="9862,31518")
    host = next(c for c in bare.checks if c.quantity == "CPU_Mapped model buffer")
    assert not bare.matches and host.kvmem == "166.92 MiB"


@pytest.mark.parametrize("name", GLM)
def test_glm_dsa_logs_check_their_kv_lines(name):
    # --n-cpu-moe 54 -ts 54,9,8,8, build 10505 (2026-08-19): the main cache (78 layers x 576 x 2 B per cell) and
    # the indexer cache (21 layers x 128 x 2 B per cell) each match kvmem's line of the same cache
    entry = ENTRIES[name]
    r = check_log(_with_command(entry), "glm-5.2", build=entry["settings"]["build"])
    kv = [c for c in r.checks if c.quantity == "llama_kv_cache" or c.quantity.endswith("KV buffer")]
    assert kv and all(c.matches for c in kv), [(c.line, c.logged, c.kvmem) for c in kv if not c.matches]
    cells = entry["settings"]["n_ctx"]
    indexer = [c for c in kv if " 21 layers" in c.logged]
    assert len(indexer) == 1
    # 21 x cells x 128 x 2 B: 168.00 MiB at 32,768 cells (not the main cache's 2808.00 = 78 x 32768 x 576 x 2 B)
    assert f"{21 * cells * 128 * 2 / 2**20:.2f} MiB" in indexer[0].kvmem


def test_n_cpu_moe_from_the_command_or_given_places_alike():
    entry = ENTRIES["glm-5.2-ud-q4kxl-ncmoe54-ts-54-9-8-8-ctx768000"]   # prints its file type: model lines checked
    build = entry["settings"]["build"]
    from_command = check_log(_with_command(entry), "glm-5.2", build=build)
    given = check_log(entry["log"], "glm-5.2", build=build, n_cpu_moe=54, n_gpu_layers=999, tensor_split="54,9,8,8")
    assert [c.kvmem for c in from_command.checks] == [c.kvmem for c in given.checks]    # one line further down
    host = next(c for c in given.checks if c.quantity == "CUDA_Host model buffer")
    bare = check_log(entry["log"], "glm-5.2", build=build, n_gpu_layers=999, tensor_split="54,9,8,8")
    bare_host = next(c for c in bare.checks if c.quantity == "CUDA_Host model buffer")
    # the routed experts of layers 0-53 on the host: hundreds of GiB there, against the embeddings alone without
    assert float(host.kvmem.split()[0]) > 250_000 > 1_000 > float(bare_host.kvmem.split()[0])


def test_overrides_keep_the_commands_order():
    # common/arg.cpp appends each flag's rules as it comes; create_tensor takes the first that matches
    ot = r"blk\.0\.ffn_up_exps=CUDA0"
    first = _flags(f'llama-server -m m.gguf -ot "{ot}" --n-cpu-moe 2')["override_tensor"][0]
    second = _flags(f'llama-server -m m.gguf --n-cpu-moe 2 -ot "{ot}"')["override_tensor"][0]
    moe = (rf"blk\.(?:0|1){EXPS_REGEX}", "CPU")
    assert first == [(r"blk\.0\.ffn_up_exps", "CUDA0"), moe]
    assert second == [moe, (r"blk\.0\.ffn_up_exps", "CUDA0")]


def test_ot_lists_and_the_cpu_moe_switch():
    cmd = "llama-server -m m.gguf --override-tensor=a=CPU,b=CUDA0 -ot c=CUDA1 --cpu-moe -c 4096"
    found = _flags(cmd)
    assert found["override_tensor"][0] == [("a", "CPU"), ("b", "CUDA0"), ("c", "CUDA1"), (EXPS_REGEX, "CPU")]
    assert found["n_ctx"][0] == 4096
    assert _flags("llama-server -m m.gguf --n-cpu-moe 0")["override_tensor"][0] == []


def test_a_buffer_type_kvmem_has_no_device_for_is_said():
    # -ot exps=CUDA7 on a two-GPU log: the buffers are not checked, and the note says why; the cache line still is
    r = check_log('llama-server -m Qwen3-30B-A3B-Q4_K_M.gguf -ot "exps=CUDA7"\n' + QWEN_OT["log"],
                  weight_format="q4_k_m", tensor_split="9862,31518")
    assert [c.quantity for c in r.checks] == ["llama_kv_cache_unified"] and r.matches
    assert r.notes == ("buffers are not checked: override_tensor target 'CUDA7' is neither CPU nor one of "
                       "['CUDA0', 'CUDA1']",)


def test_a_malformed_override_is_refused_naming_it():
    with pytest.raises(ValueError, match=r"log line 1, the command: -ot 'exps-CPU': .*'invalid value'"):
        _flags("llama-server -m m.gguf -ot exps-CPU")
    with pytest.raises(ValueError, match=r"--n-cpu-moe '-3': takes a whole number"):
        _flags("llama-server -m m.gguf --n-cpu-moe -3")
    # a log is an input from outside: "(.*a)*b" would backtrack 2**n steps on an n-character tensor name
    with pytest.raises(ValueError, match=r"pattern '\(\.\*a\)\*b' repeats a group that holds a repeat or an alt"):
        _flags("llama-server -m m.gguf -ot '(.*a)*b=CPU'")
    for pattern in ("(.*[)])+", "(a|a)*"):          # a ) in a class; overlapping alternatives: 2**n too
        with pytest.raises(ValueError, match="repeats a group"):
            check_log(QWEN_OT["log"], "qwen3-30b-a3b", override_tensor=f"{pattern}=CPU")
    # ".*" five times: n**5 steps on an n-character name (ten times: 4 s on blk.10.ffn_down_exps.weight; 300 -ot
    # rules of six ".*" in one command: 6.8 s, of four: 0.5 s); apart, five still more than kvmem searches with
    with pytest.raises(ValueError, match=r"has two repeats side by side that can match the same characters"):
        _flags("llama-server -m m.gguf -ot '" + ".*" * 5 + "=CPU'")
    with pytest.raises(ValueError, match=r"has 5 variable repeats \(\?, \*, \+, \{m,n\}\), more than the 4"):
        _flags("llama-server -m m.gguf -ot '" + ".*_" * 5 + "=CPU'")
    with pytest.raises(ValueError, match=r"-ot '\[=CPU': override_tensor pattern '\[' is not a regular expression"):
        _flags("llama-server -m m.gguf -ot '[=CPU'")
    with pytest.raises(ValueError, match="log line 1, the command: -ot takes a value and has none"):
        _flags("llama-server -m m.gguf -ot")
    with pytest.raises(ValueError, match=r"override_tensor 3 is not PATTERN=BUFFER_TYPE"):
        check_log(QWEN_OT["log"], "qwen3-30b-a3b", override_tensor=[3])
    assert _flags(r"llama-server -ot 'blk\.(1[0-9]|2[0-9])\.ffn_.*=CPU'")["override_tensor"][0] == [
        (r"blk\.(1[0-9]|2[0-9])\.ffn_.*", "CPU")]       # a group with | that is not repeated: read
    with pytest.raises(ValueError, match="cpu_moe must be true or false"):
        check_log(QWEN_OT["log"], "qwen3-30b-a3b", cpu_moe="maybe")


def test_kvmems_own_command_places_as_kvmem_does():
    # kvmem fit qwen3-30b-a3b --gpu rtx-3060-12gb --context 32k prints this kind of command:
    # -ngl 49 -ot 'blk\.1\.ffn_down_exps\.weight=CUDA0' --n-cpu-moe 27 (the -ot first: llama.cpp takes the first
    # matching rule in the command's order)
    import shlex

    from kvmem.catalog import as_model
    from kvmem.engines.llamacpp.offload import layout
    from kvmem.engines.llamacpp.tensors import synthesised_tensors
    model = as_model("qwen3-30b-a3b")
    tensors = synthesised_tensors(model, "q4_k_m")
    kw = dict(gpus=("CUDA0",), n_gpu_layers=49, n_ctx=32768)
    planned = layout(model, tensors, n_cpu_moe=27, override_tensor=((r"blk\.1\.ffn_down_exps\.weight", "CUDA0"),),
                     **kw)
    rules = _flags("llama-server -m m.gguf " + shlex.join(planned.flags()))["override_tensor"][0]
    ran = layout(model, tensors, override_tensor=tuple(rules), **kw)
    # 8,693,140,992 B of weights on CUDA0 both ways; with --n-cpu-moe written first the command gave 8,527,990,016 B
    # (blk.1's ffn_down experts, 165,150,976 B, stayed on the host: --n-cpu-moe's rule matched them first)
    assert ran.placement.device("CUDA0").model_bytes == planned.placement.device("CUDA0").model_bytes


def test_load_mode_reads_as_llama_cpp_maps_it_to_mmap():
    # llama.cpp@0c1e57098 has no --no-mmap: -lm MODE, mmap for auto / mmap / mmap+mlock only
    # (src/llama-model-loader.cpp#L559); the commands kvmem prints write -lm none for mmap off
    from kvmem.engines.llamacpp.logs import READER
    from kvmem.logcheck.command import read
    for mode, mmap in (("none", False), ("dio", False), ("mlock", False), ("mmap", True), ("mmap+mlock", True),
                       ("auto", True)):
        found = read([f"llama-server -m m.gguf -c 4096 -lm {mode} -ngl 99"], READER)
        assert found["mmap"][0] is mmap, (mode, found)
        assert found["n_gpu_layers"][0] == 99
    assert "mmap" not in read(["llama-server -m m.gguf -c 4096"], READER)

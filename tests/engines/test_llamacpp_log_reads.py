"""What a llama.cpp log states and check-log reads: the build line (kvmem.engines.llamacpp.builds), the May 2025
prefixes, the commands of llama.cpp's other tools, every file type name, the host compute lines, the GGUF names.
Lines from published logs (docs/research/heldout/llamacpp_logs_2026-12-06.md, its appendix and sources), a line or
two per rule: the held-out cases themselves stay out of kvmem's corpus."""

from __future__ import annotations

import kvmem
from kvmem.datafiles import has_json, read_json
from kvmem.engines.llamacpp import logs
from kvmem.engines.llamacpp.builds import build_date, build_line, table
from kvmem.logcheck import command


def _prs() -> dict:
    """PR -> [first build, date, commit, ...]: the PR table (its own file where there is one)."""
    return read_json("llamacpp_prs.json")["prs"] if has_json("llamacpp_prs.json") else table()["prs"]

# ikawrakow/ik_llama.cpp PR #394 (Panchovix, 2025-05-10): mainline llama.cpp b5331, DeepSeek-V3-0324 on 4 GPUs
CASE02 = """build: 5331 (33eff402) with gcc-14 (GCC) 14.2.1 20250210 (Red Hat 14.2.1-8) for x86_64-redhat-linux
llama_model_load_from_file_impl: using device CUDA0 (NVIDIA GeForce RTX 5090) - 29249 MiB free
llama_model_load_from_file_impl: using device CUDA1 (NVIDIA GeForce RTX 4090) - 23633 MiB free
llama_model_load_from_file_impl: using device CUDA2 (NVIDIA GeForce RTX 4090) - 23698 MiB free
llama_model_load_from_file_impl: using device CUDA3 (NVIDIA RTX A6000) - 48280 MiB free
llama_context: n_seq_max     = 1
llama_context: n_ctx         = 16384
llama_context: n_ubatch      = 1024
llama_context: flash_attn    = 1
llama_kv_cache_unified: kv_size = 16384, type_k = 'f16', type_v = 'f16', n_layer = 61, can_shift = 1, padding = 256
llama_kv_cache_unified:      CUDA0 KV buffer size =   510.00 MiB
llama_kv_cache_unified:      CUDA1 KV buffer size =   408.00 MiB
llama_kv_cache_unified:      CUDA2 KV buffer size =   408.00 MiB
llama_kv_cache_unified:      CUDA3 KV buffer size =   748.00 MiB
llama_kv_cache_unified: KV self size  = 2074.00 MiB, K (f16): 1098.00 MiB, V (f16):  976.00 MiB
"""


def test_build_lines_of_each_era():
    # common/common.cpp "build: %d (%s) with %s for %s%s"; tools/server "build_info: b<N>-<commit>";
    # --version "version: %d (%s)"; 2024's "%s: build = %d (%s)"
    assert build_line(["build: 5331 (33eff402) with gcc-14 (GCC) 14.2.1 for x86_64-redhat-linux"])[1:3] == \
        (5331, "33eff402")
    assert build_line(["x", "build_info: b8946-0f1bb602d"])[:3] == (2, 8946, "0f1bb602d")
    assert build_line(["version: 6699 (c08002a1)"])[1:3] == (6699, "c08002a1")
    assert build_line(["main: build = 3000 (4b2e3e5c)"])[1:3] == (3000, "4b2e3e5c")
    assert build_line(["version: 0.0.10587 (build 10587, commit 3f545becc)"])[1:3] == (10587, "3f545becc")
    assert build_line(["llama_context: n_batch = 2048"]) is None


def test_build_numbers_dated_from_masters_history():
    # git rev-list --count 33eff402 = 5331, committed 2025-05-09 (ngxson/llama.cpp mirror of master)
    assert build_date(5331, "33eff402") == ("2025-05-09", [])
    assert build_date(6699, "c08002a1") == ("2025-10-06", [])
    assert _prs()["14363"][:3] == [5913, "2025-07-16", "225e7a143"]
    # a commit that is not master's build 5192 (ubergarm's local build): dated by its number, and said
    date, notes = build_date(5192, "e59a5f1e")
    assert date == "2025-04-26" and "not master's build 5192" in notes[0]
    # build 6974 is of 2025-11-07 but lacks PR #17046 (build 6975, merged that day): checked as the day before the
    # date kvmem's rules give the PR, and said; build 6975 has it
    import datetime

    from kvmem.engines.llamacpp.settings import PR_17046
    date, notes = build_date(6974)
    assert date == (PR_17046 - datetime.timedelta(days=1)).isoformat() and "PR #17046" in notes[0]
    assert build_date(6975)[0] == "2025-11-07" >= PR_17046.isoformat()
    # past the table: the newest rules, flagged
    date, notes = build_date(10600)
    assert date is None and "newer than kvmem's table" in notes[0]
    date, notes = build_date(20000)
    assert date is None and "pinned to" in notes[0]
    # the pinned build itself (11312, 0c1e57098): its own rules, no "undetermined" note (review 5e: it had one);
    # its commit checked as any build's
    assert build_date(11312) == (None, []) == build_date(11312, "0c1e5709")
    date, notes = build_date(11312, "e59a5f1e")
    assert date is None and notes == ["the log's commit e59a5f1e is not master's build 11312 (0c1e57098): a fork or "
                                      "a local branch; checked under the rules of master's build 11312 (2026-10-01)"]
    assert "undetermined" in build_date(11311)[1][0]        # between the table's last build and the pinned one


def test_case02_kv_lines_of_may_2025_read():
    # the KV self line of builds 5262-5440 and the build line: K and V cached (MLA "none" before PR #12801's
    # successor rules), 510/408/408/748 MiB per device, exactly as printed
    result = kvmem.check_log(CASE02, "deepseek-v3")
    assert result.settings["build"] == "2025-05-09"
    assert [(c.line, c.matches) for c in result.checks] == [(11, True), (12, True), (13, True), (14, True), (15, True)]
    # the newest rules cache the latent only: 270/216/216/396 MiB, wrong for this build
    newest = kvmem.check_log(CASE02, "deepseek-v3", build="current")
    assert not any(c.matches for c in newest.checks if c.quantity.endswith("KV buffer"))
    # no build line: the KV self line's prefix dates the era (builds 5262-5440)
    undated = kvmem.check_log(CASE02.split("\n", 1)[1], "deepseek-v3")
    assert undated.settings["build"] == "2025-05-10" and all(c.matches for c in undated.checks)


def test_kv_size_line_of_may_2025_gives_n_ctx():
    found = logs.read(["llama_kv_cache_unified: kv_size = 16384, type_k = 'q8_0', type_v = 'f16', n_layer = 61, "
                       "can_shift = 1, padding = 256"])
    assert found["context"] == {"n_ctx": 16384, "type_k": "q8_0", "type_v": "f16"}


def test_every_file_type_name_read():
    # llama.cpp@0c1e57098 src/llama-model-loader.cpp#L33-L76: every name but NVFP4 is a format kvmem lays out
    from kvmem.engines.llamacpp.file_types import FILE_TYPE_NAMES
    for fmt, name in FILE_TYPE_NAMES.items():
        assert logs.read([f"print_info: file type   = {name}"])["context"]["weight_format"] == fmt
    # case 08 (ik_llama.cpp #822, b6699), case 02 (b5331), case 10 (b5274)
    assert logs.read(["print_info: file type   = MXFP4 MoE"])["context"]["weight_format"] == "mxfp4_moe"
    assert logs.read(["print_info: file type   = Q2_K - Medium"])["context"]["weight_format"] == "q2_k"
    assert logs.read(["print_info: file type   = IQ4_XS - 4.25 bpw"])["context"]["weight_format"] == "iq4_xs"
    # a guessed type: "(guessed) " before the name at the pinned build, " (guessed)" after it earlier; 2023's "mostly"
    for line in ("print_info: file type   = (guessed) Q4_K - Medium", "print_info: file type   = Q4_K - Medium (guessed)",
                 "llm_load_print_meta: model ftype      = mostly Q4_K - Medium"):
        assert logs.read([line])["context"]["weight_format"] == "q4_k_m"
    assert logs.read(["llm_load_print_meta: model ftype      = mostly Q2_K"])["context"]["weight_format"] == "q2_k"
    assert "weight_format" not in logs.read(["print_info: file type   = NVFP4"])["context"]
    assert "weight_format" not in logs.read(["llm_load_print_meta: model ftype      = mostly Q4_1, some F16"])["context"]


def test_an_unmapped_file_type_says_model_and_compute_are_not_checked():
    lines = ["print_info: file type   = NVFP4", "load_tensors: offloaded 33/33 layers to GPU",
             "load_tensors:        CUDA0 model buffer size =  4403.49 MiB",
             "load_tensors:   CPU_Mapped model buffer size =   281.81 MiB", "llama_context: n_ctx         = 8192",
             "llama_context:      CUDA0 compute buffer size =   560.00 MiB"]
    # some layers on the host: their matmuls at >= 32 tokens copy the weights to the GPU, sized by their type
    partial = [line.replace("33/33", "20/33") for line in lines]
    r = kvmem.check_log("\n".join(partial), "llama-3.1-8b")
    assert r.checks == () and r.notes[0].startswith("model and compute buffers are not checked: line 1: file type "
                                                    "'NVFP4' is not a format kvmem lays out")
    # every layer on the GPU: no weight's type enters the compute buffer, which is checked (2026-12-07's rule,
    # test_llamacpp_log_reads_2026_12_07); the model buffer is not
    r = kvmem.check_log("\n".join(lines), "llama-3.1-8b")
    assert [c.quantity for c in r.checks] == ["CUDA0 compute buffer"]
    assert r.notes[0].startswith("model buffers are not checked: line 1: file type 'NVFP4' is not a format kvmem")


def test_weight_dtype_takes_every_name_check_log_takes():
    # --weight-dtype and check-log's weight_format: one list of names (mxfp4_moe was refused by fit)
    from kvmem.engines.llamacpp.tensors import FORMATS
    from kvmem.weights.formats import _lookup
    for name in FORMATS:
        _lookup(name)
    assert _lookup("mxfp4_moe") is _lookup("mxfp4") and _lookup("q4_k") is _lookup("q4_k_m")


def test_gguf_names_read_as_presets_where_the_architecture_agrees():
    path = "llama_model_loader: loaded meta data with 64 key-value pairs and 1086 tensors from /GGUFs/" \
           "DeepSeek-V3-0324-UD-Q2_K_XL-merged.gguf (version GGUF V3 (latest))"
    kv = "llama_kv_cache_unified: kv_size = 16384, type_k = 'f16', type_v = 'f16', n_layer = 61, can_shift = 1, " \
         "padding = 256"
    kv += "\nllama_kv_cache_unified:      CUDA0 KV buffer size =   510.00 MiB"
    r = kvmem.check_log("\n".join([path, "print_info: n_embd           = 7168", kv]))
    assert r.model == "deepseek-v3" and "read as DeepSeek-V3 (its architecture" in r.inputs["model"][1]
    # the date tag dropped only where the log prints an architecture, and one that agrees
    import pytest
    with pytest.raises(ValueError, match="prints no architecture"):
        kvmem.check_log("\n".join([path, "llama_kv_cache_unified:      CUDA0 KV buffer size =   510.00 MiB"]))
    with pytest.raises(ValueError, match=r"n_embd 4096 \(kvmem's deepseek-v3: 7168\)"):
        kvmem.check_log("\n".join([path, "print_info: n_embd           = 4096", kv]))
    with pytest.raises(ValueError, match=r"n_expert 128 \(kvmem's deepseek-v3: 256\)"):
        kvmem.check_log("\n".join([path, "print_info: n_expert         = 128", kv]))
    # ik_llama.cpp #357 (b5269): a split file of Unsloth's 128K variant; n_layer from the kv_size line
    split = "llama_model_loader: loaded meta data with 46 key-value pairs and 1131 tensors from /m/" \
            "Qwen3-235B-A22B-128K-Q6_K-00001-of-00004.gguf (version GGUF V3 (latest))"
    r = kvmem.check_log("\n".join([split, kv.replace("n_layer = 61", "n_layer = 94")]))
    assert r.model == "qwen3-235b-a22b"
    # discussion #562 (b5781): no file path, the GGUF's general.name; "offloaded 33/33": 32 layers
    r = kvmem.check_log("print_info: general.name     = Meta Llama 3.1 8B Instruct\n"
                        "load_tensors: offloaded 33/33 layers to GPU\nllama_context: n_ctx         = 16384\n"
                        "llama_kv_cache_unified:    Vulkan0 KV buffer size =  2048.00 MiB")
    assert r.model == "llama-3.1-8b" and r.matches


# ik_llama.cpp discussion #357 / PR #370 (mainline b5269-b5271): Qwen3-235B-A22B-128K Q6_K, experts -ot to the host
_OT = r"""-c 16384 -t 48 -fa -ctk q8_0 -ctv q8_0 -ngl 99 -ot 'blk\.(0|1|2|3|4)\.ffn.*=CUDA0' -ot 'blk\.(5|6|7|8|9)\.ffn.*=CPU' -ot 'blk\.1[0-9]\.ffn.*=CPU' -ot 'blk\.[2-9][0-9]\.ffn.*=CPU'"""  # noqa: E501
CASE05 = """build: 5269 (1d36b367) with cc (GCC) 14.2.1 20250110 (Red Hat 14.2.1-7) for x86_64-redhat-linux
llama_model_load_from_file_impl: using device CUDA0 (NVIDIA GeForce RTX 3090) - 23871 MiB free
print_info: file type   = Q6_K
load_tensors: offloaded 95/95 layers to GPU
llama_context: n_ctx         = 16384
llama_context: n_ubatch      = 512
llama_context: flash_attn    = 1
llama_kv_cache_unified: kv_size = 16384, type_k = 'q8_0', type_v = 'q8_0', n_layer = 94, can_shift = 1, padding = 256
llama_kv_cache_unified:      CUDA0 KV buffer size =  1598.00 MiB
llama_context:      CUDA0 compute buffer size =   774.00 MiB
llama_context:        CPU compute buffer size =     8.25 MiB
llama_context:  CUDA_Host compute buffer size =    40.01 MiB
"""


def test_other_tools_commands_read():
    from kvmem.logcheck import command
    # the held-out run's own command: ./build/bin/llama-sweep-bench takes llama-server's flags (common/arg.cpp)
    line = "./build/bin/llama-sweep-bench -m /m/Qwen3-235B-A22B-128K-Q6_K-00001-of-00004.gguf " + _OT
    read = command.read([line], logs.READER)
    assert read["type_k"] == ("q8_0", "1, the command") and read["n_gpu_layers"][0] == 99
    assert [rule[1] for rule in read["override_tensor"][0]] == ["CUDA0", "CPU", "CPU", "CPU"]
    for tool in ("llama-completion", "llama-mtmd-cli", "llama-cli.exe"):
        assert command.read([f"{tool} -m x.gguf -c 4096 -ctk q4_0"], logs.READER)["type_k"][0] == "q4_0"
    # llama-bench parses its own flags (comma lists, -p/-n): not read, and said
    bench = "./llama-bench -m x.gguf -p 512 -n 128 -ctk q8_0 -fa 1,0"
    assert command.read([bench], logs.READER) == {}
    r = kvmem.check_log(bench + "\n" + CASE05.split("\n", 1)[1], "qwen3-235b-a22b")
    assert any(note.startswith("line 1: the llama-bench command is not read: llama-bench parses its own flags")
               for note in r.notes)


def test_host_compute_lines_checked_apart():
    # CPU 8.25 MiB beside CUDA_Host 40.01 MiB: the CUDA_Host line is checked alone (was 48.26 MiB "in 2 lines"), the
    # CPU one apart: a GGML_BLAS build's BLAS buffer (Layout.blas_compute_bytes; tests/engines/
    # test_llamacpp_compute_builds.py has the rule), both to the printed MiB
    r = kvmem.check_log(f"llama-server -m /m/Qwen3-235B-A22B-128K-Q6_K-00001-of-00004.gguf {_OT}\n{CASE05}")
    host = [c for c in r.checks if c.quantity.endswith("_Host compute buffer")]
    assert [(c.line, c.logged, c.matches) for c in host] == [(13, "40.01 MiB", True)]
    blas = [(c.line, c.logged, c.matches) for c in r.checks if c.quantity == "CPU (BLAS) compute buffer"]
    assert blas == [(12, "8.25 MiB", True)]


def test_build_option_takes_a_build_number():
    # -o build=b5331 dates the build as the log's line does; the newest rules say so
    plain = kvmem.check_log(CASE02.split("\n", 1)[1], "deepseek-v3", build="b5331")
    assert all(c.matches for c in plain.checks) and len(plain.checks) == 5
    newest = kvmem.check_log(CASE02.split("\n", 1)[1], "deepseek-v3", build="20000")
    assert not all(c.matches for c in newest.checks)
    assert any(note.startswith("build 20000 given: build 20000 is newer than kvmem's table") for note in newest.notes)


def test_build_option_of_the_pinned_build_says_nothing():
    # -o build=11312: the build kvmem's rules are pinned to, checked under them without a note (was "undetermined")
    r = kvmem.check_log(CASE02.split("\n", 1)[1], "deepseek-v3", build="11312")
    assert not any("build 11312" in note for note in r.notes)
    assert r.notes == kvmem.check_log(CASE02.split("\n", 1)[1], "deepseek-v3").notes


def test_a_windows_command_keeps_its_backslashes():
    # review 5d: cmd.exe and PowerShell pass a backslash as it is; shlex's POSIX rules ate them
    # ('C:modelsQwen3-30B-A3B-Q4_K_M.gguf'). A .exe program or a drive letter path: split as Windows does
    exe = command.read([r"llama-server.exe -m C:\models\Qwen3-30B-A3B-Q4_K_M.gguf -c 4096 -ot blk\.1\.ffn.*=CPU"],
                       logs.READER)
    assert exe["model"][0] == r"C:\models\Qwen3-30B-A3B-Q4_K_M.gguf" and exe["n_ctx"][0] == 4096
    assert exe["override_tensor"][0] == [(r"blk\.1\.ffn.*", "CPU")]
    quoted = command.read([r'PS C:\Users\me> .\llama-server -m "D:\my models\Qwen3-30B-A3B-Q4_K_M.gguf" -c 8192'],
                          logs.READER)
    assert quoted["model"][0] == r"D:\my models\Qwen3-30B-A3B-Q4_K_M.gguf" and quoted["n_ctx"][0] == 8192
    r = kvmem.check_log(r"llama-server.exe -m C:\models\Qwen3-30B-A3B-Q4_K_M.gguf -c 4096" + "\n" +
                        "llama_kv_cache: size =  384.00 MiB (  4096 cells,  48 layers,  1/1 seqs), K (f16):  192.00 "
                        "MiB, V (f16):  192.00 MiB\n")
    # 48 layers x 4 KV heads x 128 x 2 (K, V) x 2 B x 4,096 cells = 384 MiB
    assert r.model == "qwen3-30b-a3b" and r.matches
    assert r.inputs["model"][1] == "log line 1, the command: 'C:\\\\models\\\\Qwen3-30B-A3B-Q4_K_M.gguf', read as Qwen3-30B-A3B"
    # a POSIX shell's line still reads \\ as one backslash
    posix = command.read([r"llama-server -m /m/x.gguf -ot blk\\.3\\.ffn=CPU"], logs.READER)
    assert posix["override_tensor"][0] == [(r"blk\.3\.ffn", "CPU")]


def test_size_line_without_seqs_of_builds_5429_to_5440():
    # src/llama-kv-cache.cpp#L132 at e298d2fbd (b5429): "(%6d cells, %3d layers), K (%s)": Llama-3.1-8B at 4096
    # cells, 32 layers x 8 heads x 128 x 2 B = 128 KiB a cell: 512.00 MiB
    line = "llama_kv_cache_unified: size =  512.00 MiB (  4096 cells,  32 layers), K (f16):  256.00 MiB, V (f16):  " \
           "256.00 MiB"
    r = kvmem.check_log("build: 5429 (e298d2fb)\nllama_context: n_ctx         = 4096\n" + line, "llama-3.1-8b")
    assert r.settings["build"] == "2025-05-20" and [c.matches for c in r.checks] == [True]
    assert kvmem.check_log(line, "llama-3.1-8b").settings["build"] == "2025-05-20"     # the format dates it
    # 8192 cells is another -c: a mismatch, named
    other = kvmem.check_log(line.replace("  4096 cells", "  8192 cells"), "llama-3.1-8b", n_ctx=4096)
    assert [c.matches for c in other.checks] == [False]


def test_build_lines_read_in_one_pass():
    import time
    for line in ("build: " * 50_000, "build_info: b" * 30_000, "version: 1 (" * 30_000, "x: build = 1 (" * 30_000):
        start = time.perf_counter()
        assert build_line([line]) is None
        assert time.perf_counter() - start < 1.0


def test_every_dated_pr_has_its_first_build():
    # a PR_<N> rule in kvmem's llama.cpp code needs its first build in the PR table (kvmem/data/llamacpp_prs.json, or
    # llamacpp_builds.json's "prs"): rerun tools/llamacpp_builds.py on a mirror of master. A PR merged past the
    # mirror's tip may stand without one; PR #6438 of 2024 has no "(#6438)" commit on master
    import pathlib
    import re

    source = pathlib.Path(logs.__file__).parent
    named = {int(n) for path in source.glob("*.py") for n in re.findall(r"\bPR_(\d+)\b", path.read_text())}
    prs, last = _prs(), table()["last"][1]
    missing = [pr for pr in sorted(named - {6438})
               if str(pr) not in prs or prs[str(pr)][0] is None and prs[str(pr)][1] <= last]
    assert missing == []


def test_general_name_below_the_path():
    # a GGUF's general.name ("Snapshots", "Models": whatever its converter wrote) never hides the -m path's preset
    kv = "llama_kv_cache_unified:    CUDA0 KV buffer size =  2048.00 MiB\nllama_context: n_ctx         = 16384"
    r = kvmem.check_log("llama-server -m /m/Meta-Llama-3.1-8B-Instruct-Q4_0.gguf -c 16384\n"
                        "print_info: general.name     = Snapshots\n" + kv)
    assert r.model == "llama-3.1-8b" and r.inputs["model"][1].startswith("log line 1, the command")
    # and where the path is no preset's, the GGUF's own name is read (the source named)
    r = kvmem.check_log("llama-server -m /m/model.gguf -c 16384\nprint_info: general.name     = Meta Llama 3.1 8B "
                        "Instruct\nload_tensors: offloaded 33/33 layers to GPU\n" + kv)
    assert r.model == "llama-3.1-8b" and r.inputs["model"][1].startswith("log line 2: 'Meta Llama 3.1 8B Instruct'")

"""kvmem.engines.llamacpp.own_flags: the user's own llama-server flags at a workload (kvmem fit --llama-args)."""

import pytest

from kvmem import check_log
from kvmem.catalog import as_model
from kvmem.engines.llamacpp.layouts import CUDA_CONTEXT_BYTES, layout
from kvmem.engines.llamacpp.offload import llamacpp_offload
from kvmem.engines.llamacpp.own_flags import own_flags
from kvmem.engines.llamacpp.tensors import tensors_for
from kvmem.gpus import get_gpu

GIB = 1 << 30


def _direct(name, fmt, gpus, n_ctx, **flags):
    """layouts.layout called with the same flags: the one layout function."""
    model = as_model(name)
    tensors, _ = tensors_for(model, fmt)
    return layout(model, tensors, gpus=tuple(f"CUDA{i}" for i in range(len(gpus))), n_ctx=n_ctx, **flags)


def _same_bytes(got, lay):
    for d in got.devices:
        held = lay.placement.device(d["device"])
        assert d["model_buffer_bytes"] == held.model_bytes
        assert d["kv_bytes"] == held.kv_bytes
        assert d["compute_bytes"] == lay.compute_bytes[d["device"]]
        assert d["total_bytes"] == lay.total_bytes[d["device"]]


@pytest.mark.parametrize("name, cards, args, direct", [
    # one card: every layer offloaded, the experts of layers 0..29 on the host
    ("qwen3-30b-a3b", ["rtx-3090-24gb"], "-ngl 99 --n-cpu-moe 30 -np 1",
     dict(n_gpu_layers=99, n_cpu_moe=30)),
    # two mixed cards, a 3:1 split
    ("qwen3-30b-a3b", ["rtx-3090-24gb", "rtx-3060-12gb"], "-ngl 99 -ts 3,1 --n-cpu-moe 30 -np 1",
     dict(n_gpu_layers=99, tensor_split=(3.0, 1.0), n_cpu_moe=30)),
    ("gpt-oss-120b", ["rtx-3090-24gb", "rtx-3090-24gb"], "-ngl 999 -ts 1,1 --n-cpu-moe 24 -np 1",
     dict(n_gpu_layers=999, tensor_split=(1.0, 1.0), n_cpu_moe=24)),
    ("glm-4.5-air", ["rtx-4090-24gb", "rtx-3090-24gb"], "-ngl 99 -ts 24,24 --n-cpu-moe 30 -np 1",
     dict(n_gpu_layers=99, tensor_split=(24.0, 24.0), n_cpu_moe=30)),
])
def test_per_device_bytes_are_layouts_layout_of_the_same_flags(name, cards, args, direct):
    got = own_flags(name, cards, llama_args=args, context=16384, weight_dtype="q4_k_m")
    lay = _direct(name, "q4_k_m", cards, 16384, **direct)
    _same_bytes(got, lay)
    assert got.placed_by == "your flags" and got.n_ctx == 16384 and got.n_seq == 1
    budgets = {f"CUDA{i}": get_gpu(c).usable_memory_bytes for i, c in enumerate(cards)}
    assert got.fits == lay.fits(budgets)
    # the GPU totals carry the CUDA context kvmem counts (layouts.CUDA_CONTEXT_BYTES, 512 MiB)
    assert all(d["context_bytes"] == (CUDA_CONTEXT_BYTES if d["device"] != "CPU" else 0) for d in got.devices)


def test_fitting_flags_equal_the_held_placement_and_hold_a_larger_batch():
    """The record's layout is the one llamacpp_offload lays out for the same flags (hold=), so its max batch and
    context probes size the same server."""
    got = own_flags("qwen3-30b-a3b", ["rtx-3090-24gb", "rtx-3060-12gb"], llama_args="-ngl 99 -ts 3,1 --n-cpu-moe 30",
                    context=32768, batch=1, weight_dtype="q4_k_m")
    held = llamacpp_offload("qwen3-30b-a3b", gpus=["rtx-3090-24gb", "rtx-3060-12gb"], context=32768, n_seq=1,
                            weight_dtype="q4_k_m", hold=got.layout)
    assert held.best.total_bytes == got.layout.total_bytes
    assert got.fits
    # CUDA0 holds 37 of the 49 layers (3:1) but the experts of layers 0..29 sit on the host: 2,783.37 MiB of weights;
    # CUDA1 holds layers 37..47 with their experts, 4,328.06 MiB
    assert [line for line in got.log_lines if "model buffer" in line] == [
        "load_tensors:   CPU_Mapped model buffer size = 10917.78 MiB",
        "load_tensors:        CUDA0 model buffer size =  2783.37 MiB",
        "load_tensors:        CUDA1 model buffer size =  4328.06 MiB"]
    assert got.max_batch == 8 and got.max_context == 40960     # max_position_embeddings stops the context


def test_llm_rig_85_a_proportional_split_with_n_cpu_moe_overfills_the_last_card():
    """llm-rig #85: "--tensor-split <f0>,<f1> --n-cpu-moe 27" for a 48-layer MoE of ~933 MiB of experts a layer on
    two cards of ~16/15 GB free: the experts kept on the GPUs (layers 27-47) all land on the last card, which llama.cpp
    failed to allocate 21,335,654,400 B (20,347.08 MiB) for. The issue names no model; Qwen3-Next-80B-A3B at Q4_K_M
    has that shape (48 layers, 931 MiB of q4_k_m experts a layer): kvmem puts 20,384.97 MiB on CUDA1 (0.2 % above
    the issue's buffer) and says CUDA1 is over while CUDA0 holds 2.1 GiB."""
    got = own_flags("qwen3-next-80b-a3b", ["rtx-4060-ti-16gb"] * 2, llama_args="-ngl 99 -ts 16,15 --n-cpu-moe 27",
                    context=8192, batch=1, weight_dtype="q4_k_m")
    cuda0, cuda1 = got.devices[0], got.devices[1]
    assert not got.fits and got.max_batch == 0 and got.max_context == 0
    assert cuda0["fits"] and cuda0["total_bytes"] < 3 * GIB
    assert not cuda1["fits"] and cuda1["total_bytes"] > 16 * GIB
    assert cuda1["model_buffer_bytes"] == 21_375_186_944
    assert abs(cuda1["model_buffer_bytes"] / 21_335_654_400 - 1) < 0.005
    # kvmem's own placement and --fit on's, one line each, fit both cards
    for alt in got.to_dict()["instead"].values():
        assert alt["fits"]


def test_no_placement_flag_leaves_it_to_fit_on():
    """-ngl, -ts and -ot unset with --fit on (the default): llama.cpp's --fit on places (common/fit.cpp#L463-L486)."""
    got = own_flags("qwen3-30b-a3b", ["rtx-3090-24gb", "rtx-3060-12gb"], llama_args="-fa on -np 1", context=16384,
                    weight_dtype="q4_k_m")
    assert got.placed_by == "--fit on"
    assert got.layout.total_bytes == got.plan.fit.total_bytes
    off = own_flags("qwen3-30b-a3b", ["rtx-3090-24gb", "rtx-3060-12gb"], llama_args="-fa on -np 1 --fit off",
                    context=16384, weight_dtype="q4_k_m")
    assert off.placed_by == "your flags" and off.layout.n_gpu_layers == 999


def test_what_llama_cpp_accepts_is_laid_out_as_it_does():
    one = ["rtx-3090-24gb"]
    base = own_flags("qwen3-30b-a3b", one, llama_args="-ngl 99 --n-cpu-moe 48 -np 1", context=8192,
                     weight_dtype="q4_k_m")
    # --n-cpu-moe past the last layer: no error in llama.cpp (its patterns match no more tensors)
    past = own_flags("qwen3-30b-a3b", one, llama_args="-ngl 99 --n-cpu-moe 200 -np 1", context=8192,
                     weight_dtype="q4_k_m")
    assert past.layout.total_bytes == base.layout.total_bytes
    # -ts with one GPU: llama.cpp reads the first value only (src/llama-model.cpp#L1557-L1576), said in a note
    ts = own_flags("qwen3-30b-a3b", one, llama_args="-ngl 99 --n-cpu-moe 48 -np 1 -ts 3,1", context=8192,
                   weight_dtype="q4_k_m")
    assert ts.layout.total_bytes == base.layout.total_bytes
    assert any("llama.cpp reads the first 1" in note for note in ts.notes)
    # -ngl all / auto and a negative count offload every layer (src/llama-model.cpp#L2002-L2005)
    for ngl in ("all", "-5"):
        got = own_flags("qwen3-30b-a3b", one, llama_args=f"-ngl {ngl} --n-cpu-moe 48 -np 1", context=8192,
                        weight_dtype="q4_k_m")
        assert got.layout.placement.offloaded_layers == 49


def test_host_ram_given_bounds_what_the_flags_keep_there():
    # --n-cpu-moe 30 keeps the experts of 30 layers in host RAM: 11,135,807,520 B (10.37 GiB), over 8 GiB
    got = own_flags("qwen3-30b-a3b", ["rtx-3090-24gb", "rtx-3060-12gb"], llama_args="-ngl 99 -ts 3,1 --n-cpu-moe 30",
                    context=32768, batch=1, weight_dtype="q4_k_m", options={"host_memory_bytes": 8 << 30})
    host = got.devices[-1]
    assert (host["device"], host["total_bytes"], host["memory_bytes"], host["fits"]) == (
        "CPU", 11_135_807_520, 8 << 30, False)
    assert not got.fits and got.max_batch == 0
    assert got.host_shortfall == ("your flags keep 11,135,807,520 B in host RAM, more than host_memory_bytes "
                                  "8,589,934,592: they do not run")


def test_words_the_pinned_build_reads_otherwise_are_said():
    got = own_flags("qwen3-30b-a3b", ["rtx-3090-24gb"], llama_args="-ngl 99 --n-cpu-moe 48 -np 1 --no-mmap -fa",
                    context=8192, weight_dtype="q4_k_m")
    assert got.layout.placement.mmap is False and got.settings["flash_attn"] is True
    assert any(n.startswith("llama.cpp@0c1e57098 common/arg.cpp#L2690-L2708 has no --no-mmap") for n in got.notes)
    assert any(n.startswith("-fa with no value") for n in got.notes)
    # -fa 1 / -fa enabled: is_truthy (common/arg.cpp#L1334-L1336); -no-kvu: -kvu's negative
    one = own_flags("qwen3-30b-a3b", ["rtx-3090-24gb"], llama_args="-ngl 99 -np 2 -kvu -no-kvu -fa 1", context=8192,
                    weight_dtype="q4_k_m")
    assert one.settings["flash_attn"] is True and one.kv_unified is False
    assert not any("with no value" in n for n in one.notes)


def test_no_np_is_llama_servers_auto_four_slots_in_one_pool():
    got = own_flags("qwen3-30b-a3b", ["rtx-3090-24gb"], llama_args="-ngl 99 --n-cpu-moe 20 -c 32768", context=32768,
                    weight_dtype="q4_k_m")
    assert (got.n_seq, got.kv_unified, got.batch, got.n_ctx) == (4, True, 1, 32768)
    # the same pool as one stream of 32,768 cells: 48 layers x 32,768 x 2 x 4 x 128 x 2 B = 3,072 MiB
    assert sum(d["kv_bytes"] for d in got.devices) == 48 * 32768 * 2 * 4 * 128 * 2


def test_the_predicted_lines_are_what_check_log_checks_as_matching():
    """The start-up lines, pasted under the command kvmem sized, are read by check-log and match line for line."""
    got = own_flags("qwen3-30b-a3b", ["rtx-3090-24gb", "rtx-3060-12gb"], llama_args="-ngl 99 -ts 3,1 --n-cpu-moe 30 "
                    "-np 1", context=32768, weight_dtype="q4_k_m")
    text = "\n".join(["llama-server -m Qwen3-30B-A3B-Q4_K_M.gguf " + got.command.split(".gguf ", 1)[1],
                      "print_info: file type   = Q4_K - Medium", *got.log_lines])
    checks = check_log(text, model="qwen3-30b-a3b").checks
    # 3 model, 2 KV buffer, the cache's size line, 3 compute buffers
    assert len(checks) == 9 and all(c.matches for c in checks)
    assert "llama_kv_cache: size = 3072.00 MiB ( 32768 cells,  48 layers,  1/1 seqs), K (f16): 1536.00 MiB, V (f16): " \
        "1536.00 MiB" in got.log_lines


def test_a_model_with_several_caches_gets_their_size_lines_and_a_note():
    """Qwen3-Next: a KV cache of 12 attention layers and a recurrent state of 48: llama.cpp prints each cache's
    buffers apart, so no per-device KV line is predicted (the table's KV is their sum), said."""
    got = own_flags("qwen3-next-80b-a3b", ["rtx-4060-ti-16gb"] * 2, llama_args="-ngl 99 -ts 16,15 --n-cpu-moe 27",
                    context=8192, batch=1, weight_dtype="q4_k_m")
    assert [line.split(":")[0] for line in got.log_lines if "size =" in line and "buffer" not in line] == [
        "llama_kv_cache", "llama_memory_recurrent"]
    assert not any("KV buffer" in line for line in got.log_lines)
    assert any(n.startswith("llama.cpp prints each cache's buffers apart") for n in got.notes)


def test_check_log_and_llama_args_read_a_command_alike():
    """The flags pasted above a log (kvmem.logcheck.command.read) and given as --llama-args read to the same values."""
    from kvmem.engines.llamacpp.logs import READER
    from kvmem.engines.llamacpp.own_flags import read_llama_args
    from kvmem.logcheck.command import read as read_command
    flags = ("-ngl 99 -ts 3,1 -ot 'blk\\.(1|2)\\.ffn_.*_exps=CPU' --n-cpu-moe 30 -c 65536 -np 2 -ctk q8_0 -ctv q8_0 "
             "-fa on -ub 1024 -b 4096 -kvu -lm none")
    logged = {k: v for k, (v, _) in read_command([f"llama-server -m model.gguf {flags}"], READER).items()}
    logged.pop("model")
    assert read_llama_args(flags) == logged
    assert logged["override_tensor"][0] == (r"blk\.(1|2)\.ffn_.*_exps", "CPU") and logged["mmap"] is False


@pytest.mark.parametrize("args, kwargs, named", [
    ("-ngl 99 -sm row", {}, "'-sm' is not a flag kvmem reads"),
    ("-ngl 99 -c 65536", {}, "-c 65536 contradicts --context 32,768 x 1 sequence = 32,768 cells: give --context 65536"),
    ("-np 2", {"batch": 1}, "-np 2 contradicts --batch 1"),
    ("-ctk q8_0", {"kv_dtype": "q4_0"}, "-ctk q8_0 contradicts --kv-dtype q4_0"),
    ("-fa off", {"options": {"flash_attn": True}}, "-fa off contradicts -o flash_attn=True"),
    ("-ngl 99", {"options": {"weights_bytes": "20GB"}}, "weights_bytes: kvmem lays out llama.cpp's tensors"),
    ("-ot exps=CUDA1", {}, 'error while handling argument "-ot": unknown buffer type'),
    ("-ngl lots", {}, 'error while handling argument "-ngl": stoi'),
    ("-ts " + ",".join(["1"] * 16), {}, "got 16 input configs, but system only has 16 devices"),
    ("-m other.gguf", {}, "give the model as kvmem's MODEL argument"),
    ("--n-gpu-layers=99", {}, "llama.cpp: error: invalid argument: --n-gpu-layers=99"),
    ("-ngl 99 " + "x" * 2000, {}, "more than the 2,000 kvmem reads"),
])
def test_refusals_are_named(args, kwargs, named):
    with pytest.raises(ValueError) as err:
        own_flags("qwen3-30b-a3b", ["rtx-3090-24gb"], llama_args=args, context=32768, weight_dtype="q4_k_m",
                  **kwargs)
    assert named in str(err.value)


def test_the_flags_own_c_and_np_apart_from_the_c_each_maximum_needs():
    """Review finding 5b: with no -np (4 slots, one pool of -c 32,768 cells) the flags hold one 32,768-token sequence;
    the max batch (3) and max context (40,960) need -c raised, and say so."""
    got = own_flags("qwen3-30b-a3b", ["rtx-3090-24gb"], llama_args="-ngl 99 --n-cpu-moe 10 -fa on", context=32768,
                    weight_dtype="q4_k_m")
    assert (got.n_ctx, got.n_seq, got.kv_unified, got.fits) == (32768, 4, True, True)
    # one pool: a slot takes all 32,768 cells (src/llama-context.cpp#L292-L293), 32,768 // 32,768 = 1 sequence
    assert (got.pool_sequences, got.slot_context) == (1, 32768)
    # the probes' -c: 3 x 32,768 = 98,304 (still 4 slots); 40,960 (the model's positions) x 1
    assert (got.max_batch, got.max_context) == (3, 40960)
    assert got.raised == {"max_batch": {"n_ctx": 98304, "n_seq": 4}, "max_context": {"n_ctx": 40960, "n_seq": 4}}
    lines = got.lines()
    assert "  with -c 32,768 (4 slots, one pool): 1 sequence of 32,768 tokens at once; a sequence up to 32,768 " \
           "tokens" in lines
    assert "  max batch at 32,768 tokens: 3, with -c raised to 98,304" in lines
    assert "  max context at batch 1: 40,960 tokens a sequence, with -c raised to 40,960" in lines
    assert got.to_dict()["pool_sequences"] == 1 and got.to_dict()["raised"]["max_batch"]["n_ctx"] == 98304


@pytest.mark.parametrize("n_ctx, n_seq, unified, context, train, held", [
    (131072, 4, False, 32768, 40960, (4, 32768)),     # 4 streams of 131,072 / 4 = 32,768 cells
    (100000, 4, False, 32768, 40960, (0, 25088)),     # padded to 100,096; / 4 = 25,024, padded to 25,088 < 32,768
    (98304, 4, True, 32768, 40960, (3, 40960)),       # one pool: 3 sequences; a slot capped at n_ctx_train 40,960
    (200000, 4, True, 50000, 40960, (0, 40960)),      # a slot capped below the context: none of 50,000 tokens
    (65536, 1, True, 32768, None, (1, 65536)),        # one slot: one sequence at a time, whatever the cells
])
def test_what_the_flags_own_c_and_np_hold(n_ctx, n_seq, unified, context, train, held):
    from kvmem.engines.llamacpp.server_slots import held as slots_held
    assert slots_held(n_ctx, n_seq, unified, context, train) == held


def test_flags_that_do_not_fit_hold_nothing_and_say_so():
    got = own_flags("qwen3-next-80b-a3b", ["rtx-4060-ti-16gb"] * 2, llama_args="-ngl 99 -ts 16,15 --n-cpu-moe 27",
                    context=8192, batch=1, weight_dtype="q4_k_m")
    assert not got.fits and (got.pool_sequences, got.slot_context, got.max_batch, got.max_context) == (0, 0, 0, 0)
    lines = got.lines()
    assert "  with -c 8,192 (1 slot): nothing runs" in lines
    assert "  max batch at 8,192 tokens: 0, none runs" in lines

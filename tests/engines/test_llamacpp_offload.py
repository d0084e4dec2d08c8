"""kvmem.engines.llamacpp.offload: the placement that keeps the most on the GPUs, --fit on's, the
decode bound, and the three workloads of issue 22 (configs laid out with the Q4_K_M mix)."""

import json

import pytest

import kvmem
from kvmem.cli import main
from kvmem.engines.llamacpp.offload import (
    CUDA_CONTEXT_BYTES,
    FIT_MARGIN_BYTES,
    host_bandwidth,
    host_memory_presets,
    llamacpp_offload,
)
from kvmem.engines.llamacpp.tensors import tensors_for
from kvmem.model import Model


def test_qwen3_30b_a3b_32k_on_a_12gb_card():
    p = llamacpp_offload("qwen3-30b-a3b", gpus="rtx-3060-12gb", context="32k", weight_dtype="q4_k_m",
                         host_memory="ddr5-5600-2ch")
    best = p.best
    # every layer offloaded; the experts of the first 27 layers on the host (--n-cpu-moe 27), then the
    # room left (under one layer's 391,643,136 B of experts) takes blk.0's and blk.1's ffn_down_exps (Q6_K,
    # 165,150,720 B each) back, each named in an -ot ahead of the rest. The compute buffer is the scheduled
    # graph's (llama-server's one output row, PR #23861; the host experts' copies for the prompt): 249.51 MiB
    # (the -ot rules written before --n-cpu-moe: llama.cpp takes the first matching rule in the command's order)
    assert best.flags() == ["-ngl", "49", "-ot", r"blk\.1\.ffn_down_exps\.weight=CUDA0",
                            "-ot", r"blk\.0\.ffn_down_exps\.weight=CUDA0", "--n-cpu-moe", "27"]
    assert p.command_best == ("llama-server -m qwen3-30b-a3b-q4_k_m.gguf -c 32768 -np 1 --fit off -ngl 49 "
                              r"-ot 'blk\.1\.ffn_down_exps\.weight=CUDA0' -ot 'blk\.0\.ffn_down_exps\.weight=CUDA0' "
                              "--n-cpu-moe 27")
    assert best.compute_bytes["CUDA0"] == 261_630_208
    assert best.total_bytes["CUDA0"] <= 12 * 2**30 < p.best.total_bytes["CUDA0"] + 113_246_208
    # 27 layers x (gate + up Q4_K 113,246,208 B each + down 113,246,208 (Q4_K) or 165,150,720 (Q6_K))
    # = 9,847,701,504, less blk.0's and blk.1's down: 9,517,400,064
    assert best.placement.host.group_bytes["experts"] == 9_847_701_504 - 2 * 165_150_720
    # decode: GPU bytes / 360 GB/s + host bytes / 89.6 GB/s, routed experts at 8/128
    # (330,301,440 B x 8 / 128 = 20,643,840 B more read on the GPU, less on the host)
    assert best.decode_bytes == {"CUDA0": 4_525_340_672 + 20_643_840, "CPU": 615_481_344 - 20_643_840}
    assert p.decode_best == pytest.approx(1 / (4_545_984_512 / 360e9 + 594_837_504 / 89.6e9))
    # --fit keeps 1 GiB free: fewer experts on the GPU, those of the LAST layers on the host
    fit = p.fit
    assert fit.total_bytes["CUDA0"] - CUDA_CONTEXT_BYTES <= 12 * 2**30 - CUDA_CONTEXT_BYTES - FIT_MARGIN_BYTES
    assert fit.override_tensor[0] == (r"blk\.18\.ffn_down.*", "CPU")          # one layer split: only ffn_down
    assert fit.override_tensor[1][0].startswith(r"blk\.(19|20|") and "|47)" in fit.override_tensor[1][0]
    assert p.command_fit == "llama-server -m qwen3-30b-a3b-q4_k_m.gguf -c 32768 -np 1 --fit on"


def test_gemma_3_27b_32k_on_an_l4_fits_whole():
    p = llamacpp_offload("gemma-3-27b", gpus="l4-24gb", context="32k", weight_dtype="q4_k_m")
    assert p.best.flags() == ["-ngl", "63"] and p.best.placement.offloaded_layers == 63
    assert p.fit_note == "it fits at full offload: --fit changes nothing"
    # token_embd, tied to the output, takes the output's Q6_K: 5376 x 262208 / 256 x 210 B; it stays on the host
    assert p.best.placement.host.group_bytes["embeddings"] == 1_156_337_280
    # and the tied output is a copy of it on the GPU, with output_norm
    assert p.best.placement.device("CUDA0").group_bytes["output"] == 1_156_337_280 + 5376 * 4


def test_llama_70b_on_24_plus_12_gb():
    p = llamacpp_offload("llama-3.3-70b", gpus=["rtx-3090-24gb", "rtx-3060-12gb"], context="32k",
                         weight_dtype="q4_k_m", host_memory="ddr5-5600-2ch")
    # partial offload: CUDA0 also runs the host layers' prompt-sized products on copies of their weights
    # (ggml_sched offload_op), so its compute buffer is 411.75 MiB, and one layer fewer fits than with the
    # full-offload figure
    assert p.best.flags() == ["-ngl", "55", "-ts", "38,17"]
    assert p.best.placement.device("CUDA0").layers == tuple(range(26, 64))
    assert p.best.placement.device("CUDA1").layers == tuple(range(64, 80))    # + the output layer
    assert p.fit.flags() == ["-ngl", "53", "-ts", "37,16"]
    assert p.decode_best > p.decode_fit > 3.0


def test_fit_lowers_an_unset_context_and_stops_at_fit_ctx():
    p = llamacpp_offload("gemma-3-27b", gpus="rtx-4060-ti-16gb", context="128k", weight_dtype="q4_k_m",
                         context_set=False)
    # -ngl 55 since gemma's partial offload is scheduled on its graph (197 MiB on CUDA0; -ngl 53 with the estimate)
    assert p.fit.n_ctx == 4096 and p.fit.flags() == ["-ngl", "55"]
    assert p.command_fit.endswith("--fit on --fit-ctx 4096")


def test_host_memory_presets_and_refusals():
    presets = host_memory_presets()
    assert presets["ddr5-5600-2ch"]["bandwidth_bytes_per_s"] == 2 * 8 * 5600 * 10**6
    assert all(e["source"] for e in presets.values())
    assert host_bandwidth("100GB/s") == 100 * 10**9
    with pytest.raises(ValueError, match="host_bandwidth must be a preset"):
        host_bandwidth("fast")
    with pytest.raises(ValueError, match="weight_format must be one of"):
        llamacpp_offload("llama-3.3-70b", gpus="l4-24gb", context="8k", weight_dtype="awq")
    with pytest.raises(ValueError, match="no GGUF file was read"):
        tensors_for(kvmem.get_model("llama-3.3-70b"), None)
    # weight_dtype "auto" without a GGUF: the config's own dtype, bf16
    assert llamacpp_offload("llama-3.1-8b", gpus="l4-24gb", context="8k").command_best == \
        "llama-server -m llama-3.1-8b-bf16.gguf -c 8192 -np 1 --fit off -ngl 33"
    # a MiniMax-M1 whose softmax layers are not llama.cpp's every 8th (the GGUF carries no layer list): refused
    cfg = dict(kvmem.get_model("minimax-m1").config)
    cfg["attn_type_list"] = [1] + list(cfg["attn_type_list"][1:])
    with pytest.raises(ValueError, match="makes every 8th layer softmax attention"):
        llamacpp_offload(Model.from_hf_config(cfg, name="m1-layer-0-softmax"), gpus="l4-24gb", context="8k",
                         weight_dtype="q4_k_m")


def test_cli_fit_mixed_gpus(capsys):
    code = main(["fit", "llama-3.3-70b", "--gpu", "rtx-3090-24gb,rtx-3060-12gb", "--context", "32k", "--engine",
                 "llama.cpp", "--weight-dtype", "q4_k_m", "--host-memory", "ddr5-5600-2ch", "--json"])
    data = json.loads(capsys.readouterr().out)["llamacpp_offload"]
    assert code == 0
    assert data["command_best"] == "llama-server -m llama-3.3-70b-q4_k_m.gguf -c 32768 -np 1 --fit off -ngl 55 -ts 38,17"


def test_cli_fit_one_verdict_the_placement_s(capsys):
    """Issue 34's example: kvmem fit printed "does not fit ... What would fit: 2 GPUs", fits: no, max
    context 0 and exit 1 above a working placement. The verdict is now the placement's: it fits with
    the experts of 27 layers (less two tensors) in host RAM, and the placement comes first."""
    code = main(["fit", "qwen3-30b-a3b", "--gpu", "rtx-3060-12gb", "--context", "32k", "--batch", "1", "--engine",
                 "llama.cpp", "--weight-dtype", "q4_k_m", "--host-memory", "ddr5-5600-2ch"])
    captured = capsys.readouterr()
    out = captured.out
    assert code == 0 and "does not fit" not in out + captured.err
    lines = out.splitlines()
    assert lines[1] == ("fits: yes, if the host has 9.07 GiB of free RAM for it (not checked: kvmem does not know the "
                        "host's memory; -o host_memory_bytes=... checks it) — 32,768 tokens x batch 1")
    assert lines[2] == "llama.cpp offload on rtx-3060-12gb at 32,768 tokens:"
    assert "llama-server -m qwen3-30b-a3b-q4_k_m.gguf -c 32768 -np 1 --fit off -ngl 49 -ot" in out
    assert "weight=CUDA0' --n-cpu-moe 27" in out
    assert "decode bound 51.9 tokens/s" in out
    assert "(it chooses -ngl 49 -ot blk\\.18\\.ffn_down.*=CPU -ot blk\\.(19|20|" in out
    # the flags hold 32,768 tokens and no more (they were chosen to fill the card at 32k: 6.6 MiB left)
    assert "max batch at 32,768 tokens: 1" in out and "max context at batch 1: 32,768" in out
    assert "unused 6.56 MiB" in out and "weights 8.25 GiB" in out


def test_host_memory_bounds_the_placement():
    # the placement keeps 9,734,385,696 B in host RAM (experts 9,517,400,064 B + token_embd 175,030,272 B + the
    # host's compute buffer 41,955,360 B)
    fits = kvmem.fit("qwen3-30b-a3b", gpu="rtx-3060-12gb", context="32k", engine="llama.cpp",
                     weight_dtype="q4_k_m", host_memory_bytes="10GiB")
    assert fits.fits and fits.placement["host_bytes"] == 9_734_385_696 and fits.decode_tokens_per_s is None
    assert fits.placement["flags"][:2] == ["-ngl", "49"] and fits.placement["flags"][-2:] == ["--n-cpu-moe", "27"]
    try:
        short = kvmem.fit("qwen3-30b-a3b", gpu="rtx-3060-12gb", context="32k", engine="llama.cpp",
                          weight_dtype="q4_k_m", host_memory_bytes="8GiB")
    except kvmem.FitError as exc:
        short = exc.fit
    assert not short.fits and short.max_batch == 0 and short.placement is None
    assert any("no placement of 1 x 32,768 tokens fits the GPUs and 9,734,385,696 B on the host" in note
               for note in short.notes)
    # a model that fits the GPUs whole: the placement answers too (review finding 3), every layer on the GPU, with no
    # host-RAM condition and the decode bound of the model on the GPU
    whole = kvmem.fit("qwen3-30b-a3b", gpu="rtx-3090-24gb", context="8k", engine="llama.cpp", weight_dtype="q4_k_m")
    assert whole.fits and whole.placement["whole"] and whole.placement["flags"] == ["-ngl", "49"]
    assert whole.placement["condition"] == "" and whole.decode_tokens_per_s is not None


def test_decode_curve_over_n_cpu_moe():
    rows = kvmem.llamacpp_decode_curve("qwen3-30b-a3b", gpus="rtx-3060-12gb", context="32k", weight_dtype="q4_k_m",
                                       host_memory="ddr5-5600-2ch")
    assert [r.value for r in rows] == list(range(48, -1, -1)) and {r.flag for r in rows} == {"--n-cpu-moe"}
    speeds = [r.tokens_per_s for r in rows]
    assert speeds == sorted(speeds)                    # fewer experts on the host, faster
    fitting = [r.value for r in rows if r.fits]
    assert min(fitting) == 27                          # the best placement's --n-cpu-moe
    # which then moves two more expert tensors to the GPU (test_qwen3_30b_a3b_32k_on_a_12gb_card): faster
    # than --n-cpu-moe 27 alone, slower than 26, which does not fit
    best = llamacpp_offload("qwen3-30b-a3b", gpus="rtx-3060-12gb", context="32k", weight_dtype="q4_k_m",
                            host_memory="ddr5-5600-2ch").decode_best
    assert rows[48 - 27].tokens_per_s < best < rows[48 - 26].tokens_per_s
    # frozen records whose plain data keeps the keys of the dicts they were
    step = rows[0]
    assert type(step).__name__ == "DecodeStep" and list(step.to_dict()) == [
        "flag", "value", "fits", "tokens_per_s", "total_bytes"]
    assert step.to_dict() == {"flag": "--n-cpu-moe", "value": 48, "fits": step.fits,
                                      "tokens_per_s": step.tokens_per_s, "total_bytes": step.total_bytes}


def test_mmproj_is_counted_on_the_first_gpu_and_in_the_command():
    base = llamacpp_offload("gemma-3-27b", gpus="l4-24gb", context="32k", weight_dtype="q4_k_m")
    p = llamacpp_offload("gemma-3-27b", gpus="l4-24gb", context="32k", weight_dtype="q4_k_m", mmproj=858_000_000)
    # and its compute buffers (graphs_mmproj, tests/engines/test_llamacpp_mmproj_placement.py): 121.25 MiB on the
    # GPU as a published CUDA log prints it, the 896 x 896 x 3 x 4 B = 9,633,792 B image on the host
    assert p.best.total_bytes["CUDA0"] == base.best.total_bytes["CUDA0"] + 858_000_000 + 127_139_840
    assert p.best.total_bytes["CPU"] == base.best.total_bytes["CPU"] + 9_633_792
    assert "--mmproj mmproj.gguf" in p.command_best
    host = llamacpp_offload("gemma-3-27b", gpus="l4-24gb", context="32k", weight_dtype="q4_k_m", mmproj=858_000_000,
                            mmproj_offload=False)
    assert host.best.total_bytes["CPU"] == base.best.total_bytes["CPU"] + 858_000_000 + 127_139_840
    assert "--no-mmproj-offload" in host.command_best


def test_a_gguf_missing_layers_is_refused_by_name():
    from kvmem.engines.llamacpp.tensors import GGUFTensor
    from kvmem.sources import Checkpoint
    model = kvmem.get_model("llama-3-8b")
    part = Checkpoint("gguf", "part-00001-of-00002.gguf", (GGUFTensor("token_embd.weight", "Q4_K", (4096, 128256), 1),
                                                            GGUFTensor("blk.0.attn_q.weight", "Q4_K", (4096, 4096), 1)))
    with pytest.raises(ValueError, match="lacks layers 1..31 .one part of a split GGUF"):
        tensors_for(model.with_checkpoint(part), None)


def test_plan_writes_the_placement_of_the_verdict():
    """kvmem plan: the command of a fit that holds only with experts in host RAM carries that
    placement's flags (and --fit off), not -ngl 999, which would not load."""
    p = kvmem.plan("qwen3-30b-a3b", gpu="rtx-3060-12gb", context="32k", engine="llama.cpp", weight_dtype="q4_k_m")
    assert p.command == ("llama-server -m qwen3-30b-a3b.gguf -c 32768 -np 1 --fit off -ngl 49 "
                         r"-ot 'blk\.1\.ffn_down_exps\.weight=CUDA0' -ot 'blk\.0\.ffn_down_exps\.weight=CUDA0' "
                         "--n-cpu-moe 27 -fa on -ctk f16 -ctv f16 -ub 512")
    whole = kvmem.plan("qwen3-30b-a3b", gpu="rtx-3090-24gb", context="8k", engine="llama.cpp", weight_dtype="q4_k_m")
    assert " -ngl 999 " in whole.command and "--fit" not in whole.command


def test_fit_answers_its_max_batch_with_the_placement_plan_launches():
    """No batch asked: fit's placement, per-device parts and engine numbers are those of its max batch,
    the flags kvmem.plan(target="max_batch") launches (issue 34 follow-up: fit printed 1/1 seqs beside
    max_batch 18 for glm-5.2 on an A100 and plan 18/18 seqs)."""
    # kimi-k2: 59 since its compute buffers come from the deepseek2 MLA graph (graphs_mla_oss), not the estimate;
    # glm-5.2: 17 (was 18) since they come from the glm-dsa graph (graphs_dsa)
    for model, gpu, n, most in (("glm-5.2", "a100-sxm-80gb", 1, 17), ("kimi-k2-instruct", "h100-sxm-80gb", 2, 59)):
        args = dict(gpu=gpu, num_gpus=n, context=2048, engine="llama.cpp")
        fit = kvmem.fit(model, **args)
        plan = kvmem.plan(model, target="max_batch", **args)
        assert (fit.max_batch, plan.batch) == (most, most)
        # n_ctx = 2048 x max_batch cells, one stream a sequence
        assert (fit.placement["n_seq"], fit.placement["n_ctx"]) == (most, 2048 * most)
        assert fit.engine_numbers.max_concurrency == plan.fit.engine_numbers.max_concurrency == most
        assert fit.engine_numbers.tokens == 2048 * most
        assert fit.placement["flags"] == plan.fit.placement["flags"]
        assert f"-np {most} --fit off {fit.placement['flags'][0]} " in plan.command


def test_cli_fit_on_two_cards_the_verdict_and_the_report_are_one_placement(capsys):
    """--num-gpus 2: the report places over both cards, as the verdict does (it placed one card
    before), and the verdict's flags are the report's."""
    code = main(["fit", "mixtral-8x7b", "--gpu", "rtx-3060-12gb", "--num-gpus", "2", "--context", "32k", "--engine",
                 "llama.cpp", "--weight-dtype", "q4_k_m", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["fits"] is True
    report = data["llamacpp_offload"]
    assert report["gpus"] == ["rtx-3060-12gb", "rtx-3060-12gb"]
    assert data["placement"]["flags"] == report["best"]["flags"]
    assert data["placement"]["gpus"] == ["CUDA0", "CUDA1"] and "-ts" in report["best"]["flags"]


def test_cli_fit_mixed_cards_and_a_host_bound_say_one_verdict(capsys):
    code = main(["fit", "qwen3-30b-a3b", "--gpu", "rtx-3060-12gb,rtx-3060-12gb", "--context", "64k", "--engine",
                 "llama.cpp", "--weight-dtype", "q4_k_m"])
    out = capsys.readouterr().out
    assert code == 0
    assert out.splitlines()[0] == "qwen3-30b-a3b on rtx-3060-12gb + rtx-3060-12gb · llama.cpp: fits with the placement below"
    # host RAM bounded below what the placement keeps there (9,734,385,696 B): no line says it runs
    code = main(["fit", "qwen3-30b-a3b", "--gpu", "rtx-3060-12gb", "--context", "32k", "--engine", "llama.cpp",
                 "--weight-dtype", "q4_k_m", "-o", "host_memory_bytes=8GiB"])
    captured = capsys.readouterr()
    assert code == 1 and "fits: no" in captured.out
    assert ("kvmem's placement needs 9,734,385,696 B of host RAM, more than host_memory_bytes 8,589,934,592: "
            "it does not run") in captured.out

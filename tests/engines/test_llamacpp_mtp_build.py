"""Qwen3.5's MTP block dated by build on every llama.cpp path, not only layouts.layout and check-log: GGUFs carry it
only from PR #22673 (255582687, 2026-05-16; settings.PR_22673, arch_tensors.gguf_nextn_layers), so at an earlier
build kvmem's placement (best.py), its -ngl / -ts, the tensors' note (tensors.tensors_for), the decode curve
(offload.decode_curve) and the pipeline-parallel plan (plan._layer_devices) count 48 + output; nextn=True, and a GGUF
that carries the block, are refused there (plan._check_mtp_build)."""

import gguf
import pytest

import kvmem
from kvmem.engines.llamacpp import log_lines
from kvmem.engines.llamacpp.offload import decode_curve
from kvmem.engines.llamacpp.tensors import synthesised_tensors, tensors_for
from kvmem.oracles.llamacpp_buffers import write_sparse
from tests.fixtures.gguf.published_headers import QWEN36_35B_A3B_MTP

BEFORE, FROM = "2026-04-20", "2026-06-01"    # either side of PR #22673 (2026-05-16)


@pytest.mark.parametrize("build, layers, split, note", [(BEFORE, 49, (15, 34), False), (FROM, 50, (16, 34), True)])
def test_placement_flags_and_note_count_the_build_s_file(build, layers, split, note):
    # Qwen3.5-122B-A10B (48 trunk layers) on 2 x RTX 3090 at 8k: --fit's own search gives -ngl 49 -ts 15,34 at both
    # builds (fit.cpp counts the trunk alone, hp_ngl + 1 = 49); from the PR the file's MTP block is the 50th layer
    # of the split, and kvmem's first_layers takes layer 0 onto CUDA0 (-ngl 50 -ts 16,34). Before it there is no
    # block: -ngl 49 -ts 15,34, 49/49 offloaded, and no MTP sentence in the note (was -ngl 50 -ts 16,34 and the note)
    p = kvmem.llamacpp_offload("qwen3.5-122b-a10b", gpus="rtx-3090,rtx-3090", context=8192, weight_dtype="q4_k_m",
                               build=build)
    best = p.best
    assert (best.n_gpu_layers, best.tensor_split) == (layers, split) and sum(best.tensor_split) == layers
    assert (best.placement.offloaded_layers, best.placement.layers_total) == (layers, layers)
    assert (p.fit.n_gpu_layers, p.fit.tensor_split) == (49, (15, 34))
    assert ("the file carries 1 NextN/MTP block" in p.tensors_source) is note
    assert f"-ngl {layers} -ts {split[0]},{split[1]}" in p.command_best


@pytest.mark.parametrize("build", [BEFORE, FROM, None])
def test_tensors_for_is_check_log_s_layout_at_the_build(build):
    # tensors_for (fit, offload) and check-log (logs.py: synthesised_tensors(..., build=)) lay out the same file
    model = kvmem.get_model("qwen3.5-9b")
    tensors, source = tensors_for(model, "q4_k_m", build)
    assert tensors == synthesised_tensors(model, "q4_k_m", build=build)
    assert ("NextN/MTP" in source) is (build != BEFORE)


@pytest.mark.parametrize("build, top", [(BEFORE, 33), (FROM, 34)])
def test_decode_curve_runs_to_the_build_s_last_layer(build, top):
    # Qwen3.5-9B: 32 trunk layers + the output (+ the MTP block from the PR): -ngl 0 .. 33 before, 0 .. 34 after
    steps = decode_curve("qwen3.5-9b", gpus="rtx-4060-ti-16gb", context=4096, weight_dtype="q4_k_m", build=build)
    assert [s.value for s in steps] == list(range(top + 1)) and {s.flag for s in steps} == {"-ngl"}


def test_pipeline_parallel_devices_split_the_build_s_layers():
    # -sm layer over 3 devices, equal split points 1/3, 2/3 against il / act (plan._layer_devices): before the PR
    # act = 32 + 1 = 33, so il >= 11 and il >= 22 move on (11 / 11 / 10 layers); from it act = 34: il >= 11.33 and
    # il >= 22.67, i.e. 12 / 11 / 9 (the MTP block and the output after layer 31 on the last device)
    def layers(build):
        r = kvmem.estimate("qwen3.5-9b", engine="llama.cpp", tokens=4096, pp=3, build=build, flash_attn=True)
        return [len(d["layers"]) for d in r.details.devices]
    assert layers(BEFORE) == [11, 11, 10] and layers(FROM) == [12, 11, 9]


@pytest.mark.parametrize("name", ["qwen3.5-9b", "qwen3.5-122b-a10b"])
def test_nextn_refused_before_the_pr(name):
    with pytest.raises(ValueError, match=r"nextn=True at build 2026-04-20: llama\.cpp before PR #22673 \(255582687, "
                                         r"2026-05-16.*no nextn_predict_layers.*no draft-mtp"):
        kvmem.estimate(name, engine="llama.cpp", tokens=4096, build=BEFORE, nextn=True)
    with pytest.raises(ValueError, match="before PR #22673"):
        kvmem.llamacpp_offload(name, gpus="h100-sxm-80gb", context=4096, weight_dtype="q4_k_m", build="2026-05-15",
                               nextn=True)


def test_nextn_from_the_pr_and_other_families_unchanged():
    # from the PR day: the recurrent line counts n_layer_all = 32 + 1 = 33 layers; 24 DeltaNet layers of
    # R 3 x 8192 x 4 B = 96 KiB -> 2.25 MiB and S 32 x 128 x 128 x 4 B = 2 MiB -> 48.00 MiB
    r = kvmem.estimate("qwen3.5-9b", engine="llama.cpp", tokens=4096, build="2026-05-16", nextn=True)
    assert log_lines(r)[1] == ("llama_memory_recurrent: size =   50.25 MiB (     1 cells,  33 layers,  1 seqs), "
                               "R (f32):    2.25 MiB, S (f32):   48.00 MiB")
    # glm4moe's converter wrote its NextN layer long before the PR: not refused by this rule
    kvmem.estimate("glm-4.5-air", engine="llama.cpp", tokens=4096, build=BEFORE, nextn=True)


def test_a_gguf_with_the_block_is_refused_before_the_pr(tmp_path):
    # Qwen3.6-35B-A3B's published MTP header (block_count 41, nextn_predict_layers 1: 40 trunk layers). A build before
    # the PR reads no nextn_predict_layers: n_layer 41, and blk.40 is a Gated DeltaNet layer there ((40 + 1) % 4 != 0,
    # llama.cpp@b81c2cdd7 src/models/qwen35moe.cpp#L20-L23) whose ssm_conv1d the MTP block lacks: the load fails
    path = tmp_path / "q36-mtp.gguf"
    writer = gguf.GGUFWriter(str(path), "qwen35moe")
    for key, value in QWEN36_35B_A3B_MTP.items():
        if key != "general.architecture":
            writer.add_uint32(key, value)
    write_sparse(writer, [("token_embd.weight", (2048, 248320), "Q4_K")])
    model = kvmem.Model.from_gguf(path)
    with pytest.raises(ValueError, match=r"the GGUF carries 1 MTP block \(nextn_predict_layers 1, block_count 41;.*"
                                         r"\"missing tensor 'blk\.40\.ssm_conv1d\.weight'\""):
        kvmem.estimate(model, engine="llama.cpp", tokens=4096, build="2026-05-15")
    # from the PR day it loads: 10 full layers x 2 KV heads x 256 x 2 (K, V) x 2 B x 4,096 tokens = 80 MiB
    assert kvmem.estimate(model, engine="llama.cpp", tokens=4096, build="2026-05-16").kv_bytes == 80 * 2**20

"""Issue 34 item 3: llama.cpp's compute buffers at the builds people's logs come from. Held-out published logs
(docs/research/heldout/llamacpp_logs_2026-12-06.md), each excerpt cut from the run its URL shows; kvmem reads the
build from the log's "build: N" line.

Builds before ggml-org/llama.cpp PR #23764 (merged 2026-05-29) make the KQ mask an f32 input and cast it to f16 for
flash attention (graphs.kq_mask, Pass.mask_f32): the host buffer holds the f32 mask, n_kv x n_ubatch x 4 B where later
builds hold an f16 one (x 2 B), and the GPU both the f32 copy and its f16 cast."""

import datetime

import pytest

from kvmem.engines.llamacpp.ggml_graph import Graph
from kvmem.engines.llamacpp.graphs import PR_23764, GraphShape, Pass, attn_inputs, kq_mask
from kvmem.logcheck import check_log

# ikawrakow/ik_llama.cpp discussion #357 (ubergarm, mainline llama-server b5192, 2025-04-26):
# https://github.com/ikawrakow/ik_llama.cpp/discussions/357
QWEN3_235B_Q8_0_B5192 = r"""llama-server --no-mmap --model /mnt/raid/models/ubergarm/Qwen3-235B-A22B-GGUF/Qwen3-235B-A22B-Q8_0.gguf -fa -ctk f16 -ctv f16 -c 32768 -ot 'blk\.1[3-9]\.ffn.*=CPU' -ot 'blk\.[2-8][0-9]\.ffn.*=CPU' -ot 'blk\.9[0-3]\.ffn.*=CPU' -ngl 99 --threads 24
build: 5192 (e59a5f1e) with cc (Ubuntu 13.3.0-6ubuntu2~24.04) 13.3.0 for x86_64-linux-gnu
llama_model_load_from_file_impl: using device CUDA0 (NVIDIA RTX A6000) - 48267 MiB free
print_info: file type   = Q8_0
load_tensors: offloaded 95/95 layers to GPU
llama_context: n_seq_max     = 1
llama_context: n_ctx         = 32768
llama_context: n_batch       = 2048
llama_context: n_ubatch      = 512
llama_context: flash_attn    = 1
init: kv_size = 32768, offload = 1, type_k = 'f16', type_v = 'f16', n_layer = 94, can_shift = 1
init:      CUDA0 KV buffer size =  6016.00 MiB
llama_context:      CUDA0 compute buffer size =  1024.00 MiB
llama_context:  CUDA_Host compute buffer size =    72.01 MiB
"""

# ikawrakow/ik_llama.cpp issue #822 (crat0z, the mainline run, b6699 of 2025-10-06):
# https://github.com/ikawrakow/ik_llama.cpp/issues/822
GPT_OSS_20B_B6699 = """~/llamacpp/llama.cpp/build-cuda/bin/llama-server -m gpt-oss-20b-mxfp4.gguf -ngl 99 --n-cpu-moe 99 -c 131072 -fa on --reasoning-format auto --jinja
build: 6699 (c08002a1) with cc (GCC) 14.3.1 20250808 (Red Hat 14.3.1-3) for x86_64-redhat-linux
llama_model_load_from_file_impl: using device CUDA0 (NVIDIA GeForce RTX 3070) (0000:01:00.0) - 7672 MiB free
print_info: file type   = MXFP4 MoE
load_tensors: offloaded 25/25 layers to GPU
llama_context: n_seq_max     = 1
llama_context: n_ctx         = 131072
llama_context: n_batch       = 2048
llama_context: n_ubatch      = 512
llama_context: flash_attn    = enabled
llama_context: kv_unified    = false
llama_kv_cache_iswa: creating non-SWA KV cache, size = 131072 cells
llama_kv_cache:      CUDA0 KV buffer size =  3072.00 MiB
llama_kv_cache: size = 3072.00 MiB (131072 cells,  12 layers,  1/1 seqs), K (f16): 1536.00 MiB, V (f16): 1536.00 MiB
llama_kv_cache_iswa: creating     SWA KV cache, size = 768 cells
llama_kv_cache:      CUDA0 KV buffer size =    18.00 MiB
llama_kv_cache: size =   18.00 MiB (   768 cells,  12 layers,  1/1 seqs), K (f16):    9.00 MiB, V (f16):    9.00 MiB
llama_context:      CUDA0 compute buffer size =   456.98 MiB
llama_context:  CUDA_Host compute buffer size =   263.15 MiB
"""

# ikawrakow/ik_llama.cpp discussion #562 (a mainline Vulkan run, b5781 of 2025-06-28; the log shows no command):
# https://github.com/ikawrakow/ik_llama.cpp/discussions/562
LLAMA_31_8B_VULKAN_B5781 = """build: 5781 (ba3ef86c5) with cc (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0 for x86_64-linux-gnu
llama_model_load_from_file_impl: using device Vulkan0 (NVIDIA GeForce RTX 4080) - 16376 MiB free
print_info: file type   = Q4_0
load_tensors: offloaded 33/33 layers to GPU
llama_context: n_seq_max     = 1
llama_context: n_ctx         = 16384
llama_context: n_batch       = 2048
llama_context: n_ubatch      = 1024
llama_context: flash_attn    = 1
llama_kv_cache_unified:    Vulkan0 KV buffer size =  2048.00 MiB
llama_kv_cache_unified: size = 2048.00 MiB ( 16384 cells,  32 layers,  1 seqs), K (f16): 1024.00 MiB, V (f16): 1024.00 MiB
llama_context:    Vulkan0 compute buffer size =   613.01 MiB
llama_context: Vulkan_Host compute buffer size =    80.01 MiB
"""


# ikawrakow/ik_llama.cpp discussion #357 (mainline llama-server b5269 of 2025-05-02, a Red Hat GCC build with GGML_BLAS:
# its "CPU compute buffer" beside CUDA_Host is the BLAS backend's): https://github.com/ikawrakow/ik_llama.cpp/discussions/357
_Q6K_HEAD = """build: 5269 (1d36b367) with cc (GCC) 14.2.1 20250110 (Red Hat 14.2.1-7) for x86_64-redhat-linux
llama_model_load_from_file_impl: using device CUDA0 (NVIDIA GeForce RTX 3090) - 23871 MiB free
print_info: file type   = Q6_K
"""
_Q6K_CONTEXT = """llama_context: n_seq_max     = 1
llama_context: n_ctx         = 16384
llama_context: n_batch       = 2048
llama_context: n_ubatch      = 512
llama_context: flash_attn    = 1
llama_kv_cache_unified: kv_size = 16384, type_k = 'q8_0', type_v = 'q8_0', n_layer = 94, can_shift = 1, padding = 256
"""
# no -ngl (0/95 layers offloaded) beside a GPU
QWEN3_235B_Q6_K_NGL0_B5269 = ("llama-server -m Qwen3-235B-A22B-128K-Q6_K-00001-of-00004.gguf -c 16384 -t 48 -fa -ctk q8_0 "
                              "-ctv q8_0\n" + _Q6K_HEAD + "load_tensors: offloaded 0/95 layers to GPU\n" + _Q6K_CONTEXT + """\
llama_kv_cache_unified:        CPU KV buffer size =  1598.00 MiB
llama_context:      CUDA0 compute buffer size =   742.00 MiB
llama_context:        CPU compute buffer size =   304.75 MiB
llama_context:  CUDA_Host compute buffer size =    65.01 MiB
""")
# every layer on CUDA0, the FFN of layers 5-93 (experts, ffn_norm, ffn_gate_inp) on the host
QWEN3_235B_Q6_K_OT_B5269 = (r"llama-server -m Qwen3-235B-A22B-128K-Q6_K-00001-of-00004.gguf -c 16384 -t 48 -fa -ctk q8_0 "
                            r"-ctv q8_0 -ngl 99 -ot 'blk\.(0|1|2|3|4)\.ffn.*=CUDA0' -ot 'blk\.(5|6|7|8|9)\.ffn.*=CPU' "
                            r"-ot 'blk\.1[0-9]\.ffn.*=CPU' -ot 'blk\.[2-9][0-9]\.ffn.*=CPU'" + "\n" + _Q6K_HEAD
                            + "load_tensors: offloaded 95/95 layers to GPU\n" + _Q6K_CONTEXT + """\
llama_kv_cache_unified:      CUDA0 KV buffer size =  1598.00 MiB
llama_context:      CUDA0 compute buffer size =   774.00 MiB
llama_context:        CPU compute buffer size =     8.25 MiB
llama_context:  CUDA_Host compute buffer size =    40.01 MiB
""")


# ikawrakow/ik_llama.cpp PR #370 (a mainline run, b5271 of 2025-05-03, no BLAS: no "CPU compute buffer" line):
# https://github.com/ikawrakow/ik_llama.cpp/pull/370
QWEN3_235B_Q6_K_TWO_GPUS_B5271 = (
    r"llama-server -m Qwen3-235B-A22B-128K-Q6_K-00001-of-00004.gguf -c 16384 -t 48 -fa -ctk q8_0 -ctv q8_0 -ngl 99 "
    r"-ot 'blk\.(0|1|2|3|4|5|6)\.ffn.*=CUDA0' -ot 'blk\.(7|8|9|10|11|12|13)\.ffn.*=CUDA1' "
    r"-ot 'blk\.1[4-9]\.ffn.*=CPU' -ot 'blk\.[2-9][0-9]\.ffn.*=CPU'" + """
build: 5271 (36667c8e) with cc (GCC) 14.2.1 20250110 (Red Hat 14.2.1-7) for x86_64-redhat-linux
llama_model_load_from_file_impl: using device CUDA0 (NVIDIA GeForce RTX 3090) - 23871 MiB free
llama_model_load_from_file_impl: using device CUDA1 (NVIDIA GeForce RTX 3090) - 23871 MiB free
print_info: file type   = Q6_K
load_tensors: offloaded 95/95 layers to GPU
""" + _Q6K_CONTEXT + """llama_kv_cache_unified:      CUDA0 KV buffer size =   816.00 MiB
llama_kv_cache_unified:      CUDA1 KV buffer size =   782.00 MiB
llama_context:      CUDA0 compute buffer size =   774.00 MiB
llama_context:      CUDA1 compute buffer size =   304.75 MiB
llama_context:  CUDA_Host compute buffer size =    40.01 MiB
""")


# ikawrakow/ik_llama.cpp PR #394 (Panchovix, the mainline reference run, b5331 of 2025-05-09): DeepSeek-V3-0324
# UD-Q2_K_XL on 5090 + 4090 + 4090 + A6000, the latent + V MLA cache: https://github.com/ikawrakow/ik_llama.cpp/pull/394
DEEPSEEK_V3_B5331 = (
    r"./llama-server -m '/GGUFs/DeepSeek-V3-0324-UD-Q2_K_XL-merged.gguf' -c 16384 --no-mmap --no-warmup -ngl 99 "
    r"--override-tensor 'blk\.([0-7])\..*_exps\.=CUDA0' --override-tensor 'blk\.([8-9]|1[0-1])\..*_exps\.=CUDA1' "
    r"--override-tensor 'blk\.(1[2-6])\..*_exps\.=CUDA2' --override-tensor 'blk\.(1[7-9]|2[0-6])\..*_exps\.=CUDA3' "
    r"-fa --override-tensor 'blk\..*_exps\.=CPU' -mg 0 --ubatch-size 1024" + """
build: 5331 (33eff402) with gcc-14 (GCC) 14.2.1 20250210 (Red Hat 14.2.1-8) for x86_64-redhat-linux
llama_model_load_from_file_impl: using device CUDA0 (NVIDIA GeForce RTX 5090) - 29249 MiB free
llama_model_load_from_file_impl: using device CUDA1 (NVIDIA GeForce RTX 4090) - 23633 MiB free
llama_model_load_from_file_impl: using device CUDA2 (NVIDIA GeForce RTX 4090) - 23698 MiB free
llama_model_load_from_file_impl: using device CUDA3 (NVIDIA RTX A6000) - 48280 MiB free
print_info: file type   = Q2_K - Medium
load_tensors: offloaded 62/62 layers to GPU
llama_context: n_seq_max     = 1
llama_context: n_ctx         = 16384
llama_context: n_batch       = 2048
llama_context: n_ubatch      = 1024
llama_context: flash_attn    = 1
llama_kv_cache_unified: kv_size = 16384, type_k = 'f16', type_v = 'f16', n_layer = 61, can_shift = 1, padding = 256
llama_kv_cache_unified:      CUDA0 KV buffer size =   510.00 MiB
llama_kv_cache_unified:      CUDA1 KV buffer size =   408.00 MiB
llama_kv_cache_unified:      CUDA2 KV buffer size =   408.00 MiB
llama_kv_cache_unified:      CUDA3 KV buffer size =   748.00 MiB
llama_kv_cache_unified: KV self size  = 2074.00 MiB, K (f16): 1098.00 MiB, V (f16):  976.00 MiB
llama_context:      CUDA0 compute buffer size =  3285.00 MiB
llama_context:      CUDA1 compute buffer size =   788.00 MiB
llama_context:      CUDA2 compute buffer size =   788.00 MiB
llama_context:      CUDA3 compute buffer size =   788.01 MiB
llama_context:  CUDA_Host compute buffer size =    92.01 MiB
""")


def _compute(result) -> dict:
    return {c.quantity: (c.kvmem, c.matches) for c in result.checks if "compute" in c.quantity}


@pytest.mark.parametrize("log, model, expected", [
    # f16 mask (kvmem before): CUDA0 968.00, host 40.01; the host's f32 mask is 32768 x 512 x 2 B = 32.00 MiB more
    (QWEN3_235B_Q8_0_B5192, "qwen3-235b-a22b",
     {"CUDA0 compute buffer": "1024.00 MiB", "CUDA_Host compute buffer": "72.01 MiB"}),
    # before: 404.00 / 134.40; the host: (131072 + 768 SWA cells) x 512 x 2 B = 128.75 MiB more (two masks)
    (GPT_OSS_20B_B6699, "gpt-oss-20b",
     {"CUDA0 compute buffer": "456.98 MiB", "CUDA_Host compute buffer": "263.15 MiB"}),
    # before: 517.00 / 48.01; the host: 16384 x 1024 x 2 B = 32.00 MiB more; the GPU 96.01 MiB (x 6 B: f32 copy + f16)
    (LLAMA_31_8B_VULKAN_B5781, "llama-3.1-8b",
     {"Vulkan0 compute buffer": "613.01 MiB", "Vulkan_Host compute buffer": "80.01 MiB"}),
    # before: CUDA0 766.08 (f16 mask, Hadamard inputs of the q8_0 cache that b5271 did not have), host 24.08: the
    # f32 mask's 16384 x 512 x 2 B = 16.00 MiB more, the rotations' 128 x 128 + 64 x 64 f32 = 0.08 MiB less
    (QWEN3_235B_Q6_K_TWO_GPUS_B5271, "qwen3-235b-a22b",
     {"CUDA0 compute buffer": "774.00 MiB", "CUDA1 compute buffer": "304.75 MiB", "CUDA_Host compute buffer": "40.01 MiB"}),
])
def test_flash_attention_mask_of_older_builds(log, model, expected):
    r = check_log(log, model)
    assert _compute(r) == {quantity: (mib, True) for quantity, mib in expected.items()}


@pytest.mark.parametrize("log, expected", [
    # -ngl 0: kvmem gave CUDA0 0.00 (check-log took the host KV for -nkvo, which _scheduled does not model) and an
    # estimate for the host. The GPU takes the host weights' prompt-sized ops BLAS does not run (the experts'
    # MUL_MAT_ID, the norms' MUL: offload_op); BLAS runs every other matmul, the lm_head's among them:
    # 151936 x 512 x 4 B logits + the 4096 x 512 x 4 B normed input copied to it = 296.75 + 8.00 = 304.75 MiB
    (QWEN3_235B_Q6_K_NGL0_B5269, {"CUDA0 compute buffer": "742.00 MiB", "CPU (BLAS) compute buffer": "304.75 MiB",
                                  "CUDA_Host compute buffer": "65.01 MiB"}),
    # -ot ...ffn.*=CPU moves ffn_norm and ffn_gate_inp too: kvmem gave CUDA0 766.08 (798.08 with the f32 mask alone,
    # 774.00 with no Hadamard inputs before PR #21038) and the host 24.08; BLAS runs the router's matmul of each host
    # layer: its 4096 x 512 x 4 B input copied from CUDA0 + 128 x 512 x 4 B logits = 8.00 + 0.25 = 8.25 MiB
    (QWEN3_235B_Q6_K_OT_B5269, {"CUDA0 compute buffer": "774.00 MiB", "CPU (BLAS) compute buffer": "8.25 MiB",
                                "CUDA_Host compute buffer": "40.01 MiB"}),
])
def test_a_blas_build_beside_a_gpu(log, expected):
    r = check_log(log, "qwen3-235b-a22b")
    assert _compute(r) == {quantity: (mib, True) for quantity, mib in expected.items()}


def test_deepseek_latent_v_cache_of_may_2025():
    # builds PR #12801 to PR #19067 keep V (512 wide) beside the latent K (576): graphs_mla_attn.latent_v_attention
    # (Q and K rope first, V stored by ggml_cpy in a cache of its own, attn_v_b after flash attention), over the f32
    # mask of a build before PR #23764. kvmem gave the estimate, 533.00 MiB on each GPU and 28.00 on the host.
    # CUDA0 (printed 3285.00) 2904.00, 2745.00 with the one GLU op of builds from PR #14158 (graphs.glu)
    r = check_log(DEEPSEEK_V3_B5331, "deepseek-v3")
    assert _compute(r) == {"CUDA0 compute buffer": ("2904.00 MiB", False), "CUDA1 compute buffer": ("788.00 MiB", True),
                           "CUDA2 compute buffer": ("788.00 MiB", True), "CUDA3 compute buffer": ("788.01 MiB", True),
                           "CUDA_Host compute buffer": ("92.01 MiB", True)}
    # CUDA0 takes the host experts' prompt-sized MUL_MAT_IDs (offload_op): its peak is the largest host expert tensor
    # copied, whose type is Unsloth's UD mix (the log counts q2_K 122, q3_K 54, q4_K 389, q5_K 23, q6_K 15 tensors),
    # not llama-quantize's Q2_K mix kvmem lays out: 540 MiB short, as the UD GLM-5.2 lines of
    # docs/research/llamacpp_offload_logs.md


def test_the_day_of_pr_23764_moves_only_the_mask():
    # the same logs read as builds of 2026-05-28 and of the merge day 2026-05-29: the host line differs by the mask's
    # n_kv x n_ubatch x 2 B alone (32768 x 512 x 2 B = 16384 x 1024 x 2 B = 32.00 MiB), every other rule equal
    for log, model, host in ((QWEN3_235B_Q8_0_B5192, "qwen3-235b-a22b", "CUDA_Host compute buffer"),
                             (LLAMA_31_8B_VULKAN_B5781, "llama-3.1-8b", "Vulkan_Host compute buffer")):
        before = float(_compute(check_log(log, model, build="2026-05-28"))[host][0].split()[0])
        after = float(_compute(check_log(log, model, build="2026-05-29"))[host][0].split()[0])
        assert round(before - after, 2) == 32.00


def test_kq_mask_by_build():
    assert PR_23764 == datetime.date(2026, 5, 29)      # 031ddb2e0, PR #23764's squash merge on master
    for mask_f32, fa, types in ((False, True, ("f16",)), (True, True, ("f32", "f16")), (True, False, ("f32",)),
                                (False, False, ("f32",))):
        g = Graph()
        mask = kq_mask(g, Pass(512, 512, 4096, 1, fa, "f16", "f16", mask_f32=mask_f32), 4096)
        chain = [mask.type]
        if mask.op == "CPY":        # the cast: an f16 copy of the f32 input
            chain = [mask.src[0].type, mask.type]
        assert tuple(chain) == types and mask.ne[:2] == (4096, 512)
    # attn_inputs (every graph but deepseek2's latent MLA, which calls kq_mask itself) takes the same mask
    g = Graph()
    shape = GraphShape(arch="llama", n_layer=1, n_embd=64, n_head=1, n_head_kv=1, head_dim=64, n_ff=64, n_vocab=8)
    _, _, mask, _, _ = attn_inputs(g, Pass(32, 32, 256, 1, True, "f16", "f16", mask_f32=True), shape, 256)
    assert (mask.op, mask.type, mask.src[0].type) == ("CPY", "f16", "f32")

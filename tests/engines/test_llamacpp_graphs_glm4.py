"""llama.cpp's dense GLM-4 (glm4: GLM-4-0414, GLM-Z1-0414) layout and compute graph (kvmem/engines/llamacpp/
arch_tensors.py _glm4, graphs_glm4.py): the CPU compute buffers llama.cpp 0c1e57098 printed (llama-cpp-python 0.3.36:
tests/oracles/test_llamacpp_glm4_oracle.py and kvmem.oracles.llamacpp_presets.load with no_alloc on the full shapes),
pinned here so they hold without llama.cpp; the shapes read from the configs; and a held-out startup log of
GLM-Z1-32B-0414 (https://github.com/ikawrakow/ik_llama.cpp/pull/370, the mainline llama.cpp run: build 5274,
bartowski's IQ4_XS on one RTX 3090 Ti, -fa -ngl 99 -c 32768) checked line by line."""

import pytest

import kvmem
from kvmem.engines.llamacpp.compute import graph_shape, llamacpp_compute_buffer
from kvmem.engines.llamacpp.placement import buffer_mib, place
from kvmem.engines.llamacpp.tensors import synthesised_tensors
from kvmem.logcheck import check_log
from kvmem.oracles.llamacpp_glm4 import random_glm4_case


def _model(name):
    return kvmem.get_model(name)


def cpu_compute(model, n_ctx, n_ubatch, flash_attn, type_k="f16", type_v="f16", n_seq=1, kv_unified=False):
    d = kvmem.estimate(model, engine="llama.cpp", tokens=1, n_ctx=n_ctx, n_seq=n_seq, kv_unified=kv_unified,
                       swa_full=False, type_k=type_k, type_v=type_v, flash_attn=flash_attn, n_ubatch=n_ubatch,
                       n_batch=n_ctx).details
    return llamacpp_compute_buffer(model, n_ctx=d.n_ctx, n_ubatch=d.n_ubatch, cells_per_stream=d.cells,
                                   flash_attn=flash_attn, type_k=type_k, type_v=type_v, n_outputs=d.n_batch,
                                   n_seq=n_seq, kv_unified=kv_unified, backend="cpu")


# "CPU compute buffer size" llama.cpp printed for the full shapes (sparse Q4_K_M GGUFs written by
# kvmem.oracles.llamacpp_family_files, no_alloc: the prompt graph's reserve), f16 cache, one sequence
PRESETS = [("glm-z1-32b-0414", 4096, 512, True, 320.00), ("glm-z1-32b-0414", 32768, 512, False, 3197.01),
           ("glm-z1-32b-0414", 32768, 2048, True, 1280.01), ("glm-z1-32b-0414", 131072, 512, True, 320.00),
           ("glm-4-9b-0414", 4096, 512, True, 312.00), ("glm-4-9b-0414", 32768, 512, False, 2153.01),
           ("glm-4-9b-0414", 32768, 2048, True, 1248.01), ("glm-4-9b-0414", 131072, 512, True, 312.00)]


@pytest.mark.parametrize("name, n_ctx, n_ubatch, flash_attn, printed", PRESETS)
def test_full_shape_cpu_compute_buffer_is_llamacpps(name, n_ctx, n_ubatch, flash_attn, printed):
    got = cpu_compute(_model(name), n_ctx, n_ubatch, flash_attn)
    assert got.exact and buffer_mib(got.bytes) == printed


# the four decimals ~llama_context printed for kvmem.oracles.llamacpp_glm4.random_glm4_case(seed): Q/K/V biases
# (seeds 6-11), quantised and f32 caches, 1-4 sequences, unified streams (7, 9, 10), one-token ubatches (0)
SEEDS = {0: "0.0646", 1: "2.9565", 2: "2.8315", 3: "4.0024", 4: "4.3774", 5: "7.0049", 6: "0.1369", 7: "1.7690",
         8: "0.2428", 9: "18.0098", 10: "3.7524", 11: "1.7662"}


@pytest.mark.parametrize("seed", sorted(SEEDS))
def test_random_glm4_cases_are_llamacpps(seed):
    model, _fmt, ctx = random_glm4_case(seed)
    got = cpu_compute(model, ctx["n_ctx"], ctx["n_ubatch"], bool(ctx["flash_attn"]), ctx["type_k"], ctx["type_v"],
                      ctx["n_seq"], ctx["kv_unified"])
    assert got.exact and f"{got.bytes / 1048576.0:.4f}" == SEEDS[seed]


def test_shapes_read_from_the_configs():
    z1 = graph_shape(kvmem.get_model("glm-z1-32b-0414"))
    # 61 layers, 48 heads of 128, 2 KV heads, n_ff 23040 (ffn_up 2 x 23040 wide), no Q/K/V biases
    assert (z1.arch, z1.n_layer, z1.n_embd, z1.n_head, z1.n_head_kv, z1.head_dim, z1.n_ff, z1.n_vocab, z1.qkv_bias) \
        == ("glm4", 61, 6144, 48, 2, 128, 23040, 151552, False)
    assert graph_shape(_model("glm-4-9b-0414")).qkv_bias is True


def test_glm4v_mrope_sections_are_no_graph():
    # a config with M-RoPE sections (GLM-4.1V's text model) makes ggml_rope_multi, not transcribed: the estimate
    cfg = dict(kvmem.get_model("glm-4-9b-0414").config, rope_scaling={"rope_type": "default", "mrope_section": [8, 12, 12]})
    assert graph_shape(kvmem.Model.from_hf_config(cfg, name="mrope")) is None


def test_tensors_are_glm4s():
    # glm4.cpp load_arch_tensors: 10 tensors a layer without biases (attn_norm, attn_q/k/v, attn_output,
    # post_attention_norm, ffn_norm, ffn_down, ffn_up [6144, 46080], post_ffw_norm) and output, output_norm,
    # token_embd: 3 + 61 x 10 = 613, the tensor count of the published GLM-Z1-32B-0414 GGUFs (ik_llama.cpp#370);
    # glm-4-9b-0414 (attention_bias) 3 more a layer (attn_q/k/v.bias)
    z1 = {t.name: t.shape for t in synthesised_tensors(kvmem.get_model("glm-z1-32b-0414"), "q8_0")}
    assert len(z1) == 613 and z1["blk.0.ffn_up.weight"] == (6144, 46080) and z1["blk.60.ffn_down.weight"] == (23040,
                                                                                                             6144)
    assert not any(".bias" in name for name in z1)
    nine = {t.name for t in synthesised_tensors(_model("glm-4-9b-0414"), "q8_0")}
    assert len(nine) == 3 + 40 * 13 and "blk.39.attn_k.bias" in nine


def test_glm_9b_q5_k_m_is_the_published_files_mix():
    # ggml-org/llama.cpp#12946 (a GLM-Z1-9B-0414 Q5_K_M GGUF): "type q5_K: 181 tensors", "type q6_K: 21 tensors",
    # "file size = 6.56 GiB"; kvmem's layout of glm-4-9b-0414: 281 f32 (4 norms and 3 biases a layer, output_norm),
    # 181 q5_K, 21 q6_K (attn_v and ffn_down of the use_more_bits layers, output), 20 q8_0 / 20 q5_1 attn_v / attn_k
    tensors = synthesised_tensors(kvmem.get_model("glm-4-9b-0414"), "q5_k_m")
    counts = {}
    for t in tensors:
        counts[t.dtype] = counts.get(t.dtype, 0) + 1
    assert (counts["Q5_K"], counts["Q6_K"], counts["F32"]) == (181, 21, 281)
    assert f"{sum(t.nbytes for t in tensors) / 2**30:.2f}" == "6.56"


# The held-out log's lines (ikawrakow/ik_llama.cpp#370, the mainline run): llama-server of GLM-Z1-32B-0414 IQ4_XS
HELD_OUT = """\
llama-server -m /mnt/astrodata/llm/models/bartowski/THUDM_GLM-Z1-32B-0414-GGUF/THUDM_GLM-Z1-32B-0414-IQ4_XS.gguf -fa -ngl 99 -c 32768
ggml_cuda_init: found 1 CUDA devices:
build: 5274 (d541533a) with cc (GCC) 14.2.1 20250128 for x86_64-pc-linux-gnu
llama_model_load_from_file_impl: using device CUDA0 (NVIDIA GeForce RTX 3090 Ti) - 23041 MiB free
llama_model_loader: loaded meta data with 37 key-value pairs and 613 tensors from /mnt/astrodata/llm/models/bartowski/THUDM_GLM-Z1-32B-0414-GGUF/THUDM_GLM-Z1-32B-0414-IQ4_XS.gguf (version GGUF V3 (latest))
print_info: file type   = IQ4_XS - 4.25 bpw
load_tensors: offloading 61 repeating layers to GPU
load_tensors: offloading output layer to GPU
load_tensors: offloaded 62/62 layers to GPU
load_tensors:        CUDA0 model buffer size = 16303.48 MiB
load_tensors:   CPU_Mapped model buffer size =   471.75 MiB
llama_context: n_seq_max     = 1
llama_context: n_ctx         = 32768
llama_context: n_ctx_per_seq = 32768
llama_context: n_batch       = 2048
llama_context: n_ubatch      = 512
llama_context: flash_attn    = 1
llama_context:  CUDA_Host  output buffer size =     0.58 MiB
llama_kv_cache_unified: kv_size = 32768, type_k = 'f16', type_v = 'f16', n_layer = 61, can_shift = 1, padding = 256
llama_kv_cache_unified:      CUDA0 KV buffer size =  1952.00 MiB
llama_kv_cache_unified: KV self size  = 1952.00 MiB, K (f16):  976.00 MiB, V (f16):  976.00 MiB
llama_context:      CUDA0 compute buffer size =   353.00 MiB
llama_context:  CUDA_Host compute buffer size =    76.01 MiB
"""


def test_held_out_glm_z1_log_kv_and_compute_as_printed():
    # KV: 32,768 cells x 61 layers x 2 KV heads x 128 x 2 B x (K, V) = 1,952.00 MiB; the compute buffers from the
    # scheduled glm4 graph: CUDA0 353.00 MiB, CUDA_Host 76.01 MiB as printed (before: "not a kvmem preset")
    r = check_log(HELD_OUT, "glm-z1-32b-0414")
    got = {c.quantity: (c.logged, c.kvmem) for c in r.checks}
    assert got["CUDA0 KV buffer"] == ("1952.00 MiB", "1952.00 MiB")
    assert got["CUDA0 compute buffer"] == ("353.00 MiB", "353.00 MiB")
    assert got["CUDA_Host compute buffer"] == ("76.01 MiB", "76.01 MiB")
    assert got["CPU_Mapped model buffer"] == ("471.75 MiB", "471.75 MiB")     # token_embd, IQ4_XS: 6144 x 151552
    # the CUDA0 model buffer: without an importance matrix llama-quantize's IQ4_XS mix gives the first n_layer / 8 = 7
    # ffn_down Q5_K (src/llama-quant.cpp: IQ4_XS without imatrix), 7 x 23040 x 6144 x (5.5 - 4.25) / 8 B = 147.65 MiB
    # more than bartowski's imatrix file (16451.13 MiB); the log does not say the file had one, and check-log finds
    # the printed buffer in that layout, saying so
    assert got["CUDA0 model buffer"] == ("16303.48 MiB", "16303.48 MiB") and r.matches
    assert ("line 10: CUDA0 model buffer: 16303.48 MiB is kvmem's layout of the file quantised with an importance "
            "matrix (llama-quantize --imatrix); without one 16451.13 MiB") in r.notes


def test_held_out_glm_z1_model_buffers_with_the_importance_matrix():
    # the file was quantised with an importance matrix (bartowski's; the same family's quantize.imatrix.* keys in
    # ik_llama.cpp#344): laid out so, every repeating layer and the output on CUDA0, token_embd on the host,
    # both buffers equal the printed ones
    model = kvmem.get_model("glm-z1-32b-0414")
    tensors = synthesised_tensors(model, "iq4_xs", imatrix=True)
    p = place(tensors, n_layer=model.num_layers, n_gpu_layers=99, gpus=("CUDA0",), mmap=True)
    assert buffer_mib(p.device("CUDA0").model_bytes) == 16303.48
    assert buffer_mib(p.host.model_bytes) == 471.75


def test_a_model_buffer_neither_layout_gives_stays_a_mismatch():
    # neither the plain nor the importance-matrix layout gives 16000.00 MiB: a mismatch, with its usual cause
    r = check_log(HELD_OUT.replace("16303.48 MiB", "16000.00 MiB"), "glm-z1-32b-0414")
    line = next(c for c in r.checks if c.quantity == "CUDA0 model buffer")
    assert (line.logged, line.kvmem, line.matches) == ("16000.00 MiB", "16451.13 MiB", False)
    assert line.cause.startswith("other weights on this device") and not r.matches

"""llama.cpp's falcon, gpt2 and gptneox layouts and compute graphs (kvmem/engines/llamacpp/graphs_classic.py): the
bytes and CPU buffers llama.cpp 0c1e57098 printed (llama-cpp-python 0.3.36: tests/oracles/test_llamacpp_classic_oracle.py,
and kvmem.oracles.llamacpp_presets.load with no_alloc on the full shapes), pinned here so they hold without llama.cpp;
the tensors read from the configs; the configs llama.cpp would not load, refused by name."""

import pytest

import kvmem
from kvmem.engines.llamacpp.compute import graph_shape, llamacpp_compute_buffer
from kvmem.engines.llamacpp.ggml_graph import Graph
from kvmem.engines.llamacpp.placement import buffer_mib
from kvmem.engines.llamacpp.tensors import synthesised_tensors
from kvmem.model import Model
from kvmem.oracles.llamacpp_classic import random_classic_case


def cpu_compute(model, n_ctx, n_ubatch, flash_attn, type_k="f16", type_v="f16", n_seq=1, kv_unified=False):
    d = kvmem.estimate(model, engine="llama.cpp", tokens=1, n_ctx=n_ctx, n_seq=n_seq, kv_unified=kv_unified,
                       swa_full=False, type_k=type_k, type_v=type_v, flash_attn=flash_attn, n_ubatch=n_ubatch,
                       n_batch=n_ctx).details
    return llamacpp_compute_buffer(model, n_ctx=d.n_ctx, n_ubatch=d.n_ubatch, cells_per_stream=d.cells,
                                   flash_attn=flash_attn, type_k=type_k, type_v=type_v, n_outputs=d.n_batch,
                                   n_seq=n_seq, kv_unified=kv_unified, backend="cpu")


# llama_model_size of the sparse Q4_K_M GGUF of each preset (its tensors typed by llama_model_quantize --dry-run)
SIZES = {"falcon-7b": 4854609664, "falcon-40b": 25203769344, "gpt2": 89455446, "gpt-neox-20b": 13152694272}


@pytest.mark.parametrize("name", sorted(SIZES))
def test_q4_k_m_file_is_llamacpps_size(name):
    assert sum(t.nbytes for t in synthesised_tensors(kvmem.get_model(name), "q4_k_m")) == SIZES[name]


def test_falcon_tensors_from_the_configs():
    # falcon-7b: multi_query, one KV head: attn_qkv (71 + 2) x 64 = 4672 wide; no attn_norm_2, no biases, tied
    # (token_embd Q8_0: falcon's output rule, llama-quant.cpp#L500); ffn 4 x 4544; 4544 columns are no multiple of 256:
    # attn_qkv (an attn_v under Q4_K_M, layer 0: Q6_K) falls back to Q8_0, attn_output's Q4_K to Q5_0
    t7 = {t.name: t for t in synthesised_tensors(kvmem.get_model("falcon-7b"), "q4_k_m")}
    assert len(t7) == 3 + 32 * 6 and "output.weight" not in t7 and "blk.0.attn_norm_2.weight" not in t7
    assert (t7["blk.0.attn_qkv.weight"].shape, t7["blk.0.attn_qkv.weight"].dtype) == ((4544, 4672), "Q8_0")
    assert (t7["blk.0.ffn_up.weight"].shape, t7["blk.0.attn_output.weight"].dtype) == ((4544, 18176), "Q5_0")
    assert t7["token_embd.weight"].dtype == "Q8_0" and t7["output_norm.bias"].dtype == "F32"
    # falcon-40b: new_decoder_architecture, 8 KV heads: (128 + 16) x 64 = 9216, ln_attn as attn_norm_2
    t40 = {t.name: t.shape for t in synthesised_tensors(kvmem.get_model("falcon-40b"), "q4_k_m")}
    assert t40["blk.59.attn_qkv.weight"] == (8192, 9216) and t40["blk.0.attn_norm_2.bias"] == (8192,)
    assert len(t40) == 3 + 60 * 8


def test_gpt2_and_gptneox_tensors_from_the_configs():
    g = {t.name: t for t in synthesised_tensors(kvmem.get_model("gpt2"), "q4_k_m")}
    # position_embd: n_ctx rows, F32 and never quantised (conversion/base.py#L1095, llama-quant.cpp#L319)
    assert (g["position_embd.weight"].shape, g["position_embd.weight"].dtype) == ((768, 1024), "F32")
    assert g["blk.11.attn_qkv.bias"].shape == (2304,) and g["blk.0.ffn_up.weight"].shape == (768, 3072)
    assert len(g) == 4 + 12 * 12 and "output.weight" not in g
    n = {t.name: t.shape for t in synthesised_tensors(kvmem.get_model("gpt-neox-20b"), "q4_k_m")}
    assert n["output.weight"] == (6144, 50432) and n["blk.43.attn_qkv.weight"] == (6144, 18432)
    assert n["blk.0.ffn_down.weight"] == (24576, 6144) and len(n) == 4 + 44 * 12


# "CPU compute buffer size" llama.cpp printed for the full shapes (sparse Q4_K_M GGUFs, no_alloc), f16 cache
PRESETS = [("falcon-7b", 2048, 512, True, 144.75), ("falcon-7b", 8192, 512, False, 1196.88),
           ("falcon-7b", 4096, 2048, True, 579.01), ("falcon-40b", 2048, 512, True, 159.00),
           ("falcon-40b", 8192, 512, False, 2114.01), ("falcon-40b", 4096, 2048, True, 636.01),
           ("gpt2", 2048, 512, True, 102.66), ("gpt2", 8192, 512, False, 220.01), ("gpt2", 4096, 2048, True, 410.64),
           ("gpt-neox-20b", 2048, 512, True, 122.50), ("gpt-neox-20b", 8192, 512, False, 1100.01),
           ("gpt-neox-20b", 4096, 2048, True, 490.01)]


@pytest.mark.parametrize("name, n_ctx, n_ubatch, flash_attn, printed", PRESETS)
def test_full_shape_cpu_compute_buffer_is_llamacpps(name, n_ctx, n_ubatch, flash_attn, printed):
    got = cpu_compute(kvmem.get_model(name), n_ctx, n_ubatch, flash_attn)
    assert got.exact and buffer_mib(got.bytes) == printed


# llama.cpp's printed (compute to four decimals, KV MiB) for random_classic_case(seed): falcon 0, 3, 6, 9; gpt2 1, 4,
# 7 (one token, a q5_1 K: the Hadamard of a contiguous one-token view), 10; gptneox 2, 5, 8, 11
SEEDS = {0: ("5.5437", 24.0), 1: ("6.2549", 1.5), 2: ("4.2637", 2.25), 3: ("2.4097", 0.11), 4: ("0.4381", 2.25),
         5: ("1.2505", 0.41), 6: ("4.5049", 0.19), 7: ("0.0304", 8.25), 8: ("16.3580", 3.84), 9: ("0.8131", 1.0),
         10: ("0.1145", 1.0), 11: ("4.1475", 2.38)}


@pytest.mark.parametrize("seed", sorted(SEEDS))
def test_random_classic_cases_are_llamacpps(seed):
    model, _fmt, ctx = random_classic_case(seed)
    args = (ctx["n_ctx"], ctx["n_ubatch"], bool(ctx["flash_attn"]), ctx["type_k"], ctx["type_v"], ctx["n_seq"],
            ctx["kv_unified"])
    got = cpu_compute(model, *args)
    kv = kvmem.estimate(model, engine="llama.cpp", tokens=1, n_ctx=ctx["n_ctx"], n_seq=ctx["n_seq"],
                        kv_unified=ctx["kv_unified"], type_k=ctx["type_k"], type_v=ctx["type_v"],
                        flash_attn=bool(ctx["flash_attn"]), n_ubatch=ctx["n_ubatch"], n_batch=ctx["n_ctx"])
    assert got.exact and (f"{got.bytes / 1048576.0:.4f}", buffer_mib(kv.total_bytes)) == SEEDS[seed]


def test_shapes_read_from_the_configs():
    f7, f40 = graph_shape(kvmem.get_model("falcon-7b")), graph_shape(kvmem.get_model("falcon-40b"))
    assert (f7.n_head_kv, f7.n_ff, f7.norm_2, f7.qkv_bias) == (1, 18176, False, False)
    assert (f40.n_head_kv, f40.n_ff, f40.norm_2) == (8, 32768, True)
    g2, nx = graph_shape(kvmem.get_model("gpt2")), graph_shape(kvmem.get_model("gpt-neox-20b"))
    assert (g2.n_pos, g2.n_ff, g2.qkv_bias, g2.par_res) == (1024, 3072, True, False)
    assert (nx.head_dim, nx.n_ff, nx.par_res, nx.n_pos) == (96, 24576, True, 0)


def test_a_one_token_view_is_contiguous_as_ggml_says():
    # ggml_is_contiguous skips dimensions of one element (ggml.c#L1474-L1500): a one-token view of a fused QKV
    # product is reshaped by llama_mul_mat_hadamard, not copied (seed 7 above: 0.0304 MiB, 0.0314 with the copy)
    qkv = Graph.op("MUL_MAT", "f32", (192, 1))
    one = Graph.view(qkv, (64, 1, 1), (4, 256, qkv.nb[1]))
    many = Graph.view(Graph.op("MUL_MAT", "f32", (192, 2)), (64, 1, 2), (4, 256, 768))
    assert one.is_contiguous() and not many.is_contiguous()


def _cfg(name, **changes):
    return Model.from_hf_config(dict(kvmem.get_model(name).config, **changes), name=f"{name}-changed")


@pytest.mark.parametrize("name, changes, named", [
    ("falcon-7b", {"bias": True}, "'bias'"), ("falcon-7b", {"parallel_attn": False}, "'parallel_attn'"),
    ("falcon-40b", {"ffn_hidden_size": 20000}, "'ffn_hidden_size'"), ("gpt2", {"n_ctx": None}, "'n_ctx'"),
    ("gpt2", {"n_positions": 2048}, "'n_positions'"), ("gpt2", {"n_inner": 1000}, "'n_inner'"),
    ("gpt-neox-20b", {"tie_word_embeddings": True}, "'tie_word_embeddings'"),
    ("gpt-neox-20b", {"attention_bias": False}, "'attention_bias'")])
def test_configs_llamacpp_would_not_load_are_refused_by_name(name, changes, named):
    model = _cfg(name, **changes)
    with pytest.raises(ValueError, match=named):
        synthesised_tensors(model, "q4_k_m")
    assert graph_shape(model) is None

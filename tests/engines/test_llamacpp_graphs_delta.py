"""llama.cpp's hybrid Gated DeltaNet compute graphs (kvmem/engines/llamacpp/graphs_delta.py: qwen3next, qwen35,
qwen35moe): the CPU compute buffers llama.cpp 0c1e57098 printed (llama-cpp-python 0.3.36:
tests/oracles/test_llamacpp_graphs_more_oracle.py, and kvmem.oracles.llamacpp_presets.load with no_alloc on the
presets' full shapes), pinned here so they hold without llama.cpp; the shapes read from the configs."""

import random

import pytest

import kvmem
from kvmem.engines.llamacpp.graphs import Pass
from kvmem.engines.llamacpp.graphs_delta import build_delta, delta_shape, hybrid_graph_bytes, with_rs_seq
from kvmem.engines.llamacpp.placement import buffer_mib
from kvmem.oracles.llamacpp_graphs_more import random_delta_case


def cpu_bytes(model, n_ctx, n_ubatch, flash_attn, type_k="f16", type_v="f16", n_seq=1, kv_unified=False, n_rs_seq=None):
    d = kvmem.estimate(model, engine="llama.cpp", tokens=1, n_ctx=n_ctx, n_seq=n_seq, kv_unified=kv_unified,
                       type_k=type_k, type_v=type_v, flash_attn=flash_attn, n_ubatch=n_ubatch, n_batch=n_ctx,
                       n_rs_seq=n_rs_seq).details
    return hybrid_graph_bytes(with_rs_seq(delta_shape(model), n_rs_seq), n_kv=d.cells, n_ubatch=d.n_ubatch, flash_attn=flash_attn,
                              type_k=type_k, type_v=type_v, n_outputs=d.n_batch, n_seq=n_seq, kv_unified=kv_unified)


# "CPU compute buffer size" llama.cpp printed for the presets' full shapes (sparse Q4_K_M GGUFs written by
# kvmem.oracles.llamacpp_family_files, no_alloc: the prompt graph's reserve), f16 cache, one sequence
PRESETS = [("qwen3-next-80b-a3b", 4096, 512, True, 312.76), ("qwen3-next-80b-a3b", 32768, 512, False, 1130.01),
           ("qwen3-next-80b-a3b", 65536, 2048, True, 1235.01), ("qwen3-next-80b-a3b", 262144, 512, True, 342.01),
           ("qwen3.5-27b", 4096, 512, True, 519.02), ("qwen3.5-27b", 32768, 512, False, 1670.02),
           ("qwen3.5-27b", 65536, 2048, True, 2276.08), ("qwen3.5-27b", 262144, 512, True, 761.02),
           ("qwen3.5-397b-a17b", 4096, 512, True, 521.02), ("qwen3.5-397b-a17b", 32768, 512, False, 2194.02),
           ("qwen3.5-397b-a17b", 65536, 2048, True, 2292.08), ("qwen3.5-397b-a17b", 262144, 512, True, 509.00)]


@pytest.mark.parametrize("preset, n_ctx, n_ubatch, flash_attn, printed", PRESETS)
def test_preset_cpu_compute_buffer_is_llamacpps(preset, n_ctx, n_ubatch, flash_attn, printed):
    assert buffer_mib(cpu_bytes(kvmem.get_model(preset), n_ctx, n_ubatch, flash_attn)) == printed


# the four decimals ~llama_context printed for kvmem.oracles.llamacpp_graphs_more.random_delta_case(seed) (qwen3_next,
# qwen3_5_moe_text, qwen3_5_text in turn): 2-3 sequences (0-4, 7, 9, 10, 14), unified (0, 4, 6, 10, 11), quantised
# caches, n_ubatch 7-512
SEEDS = {0: "10.5293", 1: "0.7005", 2: "1.0503", 3: "3.4118", 4: "0.1956", 5: "2.7705", 6: "1.9209", 7: "5.2482",
         8: "3.6289", 9: "1.2585", 10: "0.2915", 11: "0.2981", 26: "49.0157", 33: "0.3537"}


@pytest.mark.parametrize("seed", sorted(SEEDS))
def test_random_hybrid_cases_are_llamacpps(seed):
    model, _fmt, ctx = random_delta_case(seed)
    got = cpu_bytes(model, ctx["n_ctx"], ctx["n_ubatch"], bool(ctx["flash_attn"]), ctx["type_k"], ctx["type_v"],
                    ctx["n_seq"], ctx["kv_unified"])
    assert f"{got / 1048576.0:.4f}" == SEEDS[seed]


def test_shapes_read_from_the_configs():
    nxt = delta_shape(kvmem.get_model("qwen3-next-80b-a3b"))
    # config.json: 48 layers, every 4th full attention (16 heads of 256, 2 KV heads), linear attention 16 key heads
    # and 32 value heads of 128, conv kernel 4; 512 experts of 512, 10 used, a shared expert of 512
    assert (nxt.arch, nxt.n_layer, nxt.recurrent[:4], sum(nxt.recurrent)) == ("qwen3next", 48,
                                                                            (True, True, True, False), 36)
    assert (nxt.n_head, nxt.n_head_kv, nxt.head_dim, nxt.d_state, nxt.n_k_heads, nxt.n_v_heads, nxt.d_inner,
            nxt.d_conv) == (16, 2, 256, 128, 16, 32, 4096, 4)
    assert (nxt.n_expert, nxt.n_expert_used, nxt.n_ff_exp, nxt.n_ff_shexp, nxt.gating, nxt.norm_w) == (
        512, 10, 512, 512, "softmax", True)
    dense = delta_shape(kvmem.get_model("qwen3.5-27b"))
    # text_config: 64 layers, 48 value heads (d_inner 6144), a dense FFN of 17408
    assert (dense.arch, dense.n_layer, dense.n_v_heads, dense.d_inner, dense.n_expert, dense.n_ff) == (
        "qwen35", 64, 48, 6144, 0, 17408)
    assert delta_shape(kvmem.get_model("qwen3.5-397b-a17b")).arch == "qwen35moe"
    assert delta_shape(kvmem.get_model("llama-3-8b")) is None


def test_recurrent_part_follows_the_sequences_not_the_streams():
    # kv_unified: one KV stream, but the ubatch still holds n_seq sequences (ubatch.n_seqs = n_seq_max): the
    # recurrent state rows and the per-sequence conv are n_seq wide, so the graph differs from one with n_seq = 1
    shape = delta_shape(kvmem.get_model("qwen3-next-80b-a3b"))
    p = Pass(8, 8, 256, 1, True, "f16", "f16")
    one, four = build_delta(shape, p, 1), build_delta(shape, p, 4)
    conv = [t for t in four.nodes if t.op == "SSM_CONV"][0]
    assert conv.ne[:3] == (4096 + 2 * 16 * 128, 2, 4)       # channels, tokens per sequence, sequences
    assert [t for t in one.nodes if t.op == "SSM_CONV"][0].ne[:3] == (8192, 8, 1)


# the four decimals llama.cpp printed with n_rs_seq (llama_context_params; 1-16 drawn as the oracle draws it) for the
# same random cases (tests/oracles/test_llamacpp_graphs_rs_oracle.py, 16 of 16 equal): qwen3_next (0, 3) clamps it
# to 0 as llama.cpp does (no rollback), so its buffer is the n_rs_seq 0 one above; seeds 5 and 14 are n_rs_seq-blind
# (the snapshot rows never reach the peak); the rest grow: seed 1 0.7005 -> 1.9505 MiB, 7 5.2482 -> 9.7482 MiB
SEEDS_RS = {0: "10.5293", 1: "1.9505", 2: "2.1753", 3: "3.4118", 4: "0.5278", 5: "2.7705", 7: "9.7482", 8: "3.6407",
            10: "0.8871", 11: "1.2984", 13: "0.5989", 14: "2.5382"}


@pytest.mark.parametrize("seed", sorted(SEEDS_RS))
def test_random_hybrid_cases_with_rollback_snapshots_are_llamacpps(seed):
    model, _fmt, ctx = random_delta_case(seed)
    n_rs_seq = random.Random(f"graphs-rs/{seed}").randint(1, 16)
    # the oracle gave llama.cpp -ub >= n_rs_seq + 2 (below it the first decode aborts: rs_seq.kept_rs_seq)
    got = cpu_bytes(model, ctx["n_ctx"], max(ctx["n_ubatch"], n_rs_seq + 2), bool(ctx["flash_attn"]), ctx["type_k"],
                    ctx["type_v"], ctx["n_seq"], ctx["kv_unified"], n_rs_seq)
    assert f"{got / 1048576.0:.4f}" == SEEDS_RS[seed]


def test_rollback_snapshots_widen_the_gated_delta_net_output_of_qwen35_only():
    nxt, dense = delta_shape(kvmem.get_model("qwen3-next-80b-a3b")), delta_shape(kvmem.get_model("qwen3.5-27b"))
    assert with_rs_seq(nxt, 5).n_rs_seq == 0 and with_rs_seq(dense, 5).n_rs_seq == 5     # llm_arch_supports_rs_rollback
    p = Pass(8, 8, 256, 1, True, "f16", "f16")

    def gdn(shape):
        return [t for t in build_delta(shape, p, 2).nodes if t.op == "GATED_DELTA_NET"][0].ne[:2]
    # qwen3.5-27b: 48 value heads of 128; 8 tokens over 2 sequences: 8 output rows, then K state slots of 128 rows per
    # sequence: K = 1 (8 + 256 = 264 rows) or n_rs_seq + 1 = 4 (8 + 4 x 128 x 2 = 1032 rows)
    assert gdn(dense) == (128 * 48, 264)
    assert gdn(with_rs_seq(dense, 3)) == (128 * 48, 1032)

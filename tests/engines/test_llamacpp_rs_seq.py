"""n_rs_seq (recurrent rollback snapshots) as llama.cpp 0c1e57098 keeps it (kvmem/engines/llamacpp/rs_seq.py
kept_rs_seq): clamped to 0 for an architecture without rollback, and -ub at least n_rs_seq + 2 where it is kept. The
numbers are llama.cpp's own, run here (tests/oracles/test_llamacpp_rs_seq_oracle.py) on the random hybrid cases of
kvmem.oracles.llamacpp_graphs_more, pinned so they hold without it."""

import random

import pytest

import kvmem
from kvmem.oracles.llamacpp_graphs_more import random_delta_case


def case(seed, n_ubatch=None):
    model, _fmt, ctx = random_delta_case(seed)
    n_rs_seq = random.Random(f"graphs-rs/{seed}").randint(1, 16)
    return model, ctx, n_rs_seq, dict(tokens=1, n_ctx=ctx["n_ctx"], n_seq=ctx["n_seq"], kv_unified=ctx["kv_unified"],
                                      type_k=ctx["type_k"], type_v=ctx["type_v"], flash_attn=bool(ctx["flash_attn"]),
                                      n_ubatch=n_ubatch or ctx["n_ubatch"], n_batch=ctx["n_ctx"], n_rs_seq=n_rs_seq)


def test_qwen3next_recurrent_rows_are_clamped_to_no_snapshots():
    model, ctx, n_rs_seq, kw = case(0)
    assert (model.model_type, n_rs_seq, ctx["n_seq"], ctx["kv_unified"]) == ("qwen3_next", 10, 2, True)
    d = kvmem.estimate(model, engine="llama.cpp", **kw).details
    rs = [c for c in d.caches if c["cache"] == "recurrent"][0]
    # llama.cpp printed "n_rs_seq=10 requested but model does not support recurrent partial rollback; clamping to 0",
    # "n_rs_seq = 0" and "CPU RS buffer size = 0.41 MiB": max(1, 2) = 2 rows (not 2 x 11), R 36,864 + S 393,216 B =
    # 430,080 B = 0.41 MiB (kvmem gave 11 x that, 4.51 MiB, before the clamp)
    assert (d.n_rs_seq, rs["rs_seq"], rs["r_bytes"], rs["s_bytes"], rs["size_mib"]) == (0, 0, 36864, 393216, 0.41)


def test_qwen35_keeps_its_snapshots():
    model, _ctx, n_rs_seq, kw = case(4, n_ubatch=12)
    assert (model.model_type, n_rs_seq) == ("qwen3_5_moe_text", 10)
    d = kvmem.estimate(model, engine="llama.cpp", **kw).details
    rs = [c for c in d.caches if c["cache"] == "recurrent"][0]
    assert (d.n_rs_seq, d.n_ubatch, rs["size_mib"]) == (10, 12, 1.22)     # llama.cpp: "CPU RS buffer size = 1.22 MiB"


def test_a_micro_batch_that_cannot_hold_the_snapshots_is_refused_not_raised():
    # -ub 7, n_rs_seq 10: llama.cpp builds the context (a 0.48 MiB compute buffer, n_ubatch = 7), then aborts at
    # the first decode: GGML_ASSERT(n_ubatch > n_keep_tail), n_keep_tail = 11 (src/llama-batch.cpp#L641). kvmem
    # raised -ub to 12 without a word (0.5278 MiB, a buffer llama.cpp never prints at -ub 7)
    model, _ctx, _n, kw = case(4)
    assert kw["n_ubatch"] == 7
    with pytest.raises(ValueError, match=r"n_rs_seq=10 with n_ubatch=7 .*GGML_ASSERT\(n_ubatch > n_keep_tail\).*>= 12"):
        kvmem.estimate(model, engine="llama.cpp", **kw)
    with pytest.raises(ValueError, match="n_ubatch=11"):
        kvmem.estimate(model, engine="llama.cpp", **dict(kw, n_ubatch=11))
    assert kvmem.estimate(model, engine="llama.cpp", **dict(kw, n_ubatch=512)).details.n_ubatch == 256   # -c 256


def test_without_rollback_a_small_micro_batch_stands():
    # qwen3next clamps n_rs_seq to 0: n_keep_tail 0, no assert; -ub 7 stays 7 (kvmem made it n_rs_seq + 2 = 12)
    model, _ctx, n_rs_seq, kw = case(0, n_ubatch=7)
    d = kvmem.estimate(model, engine="llama.cpp", **kw).details
    assert (n_rs_seq, d.n_rs_seq, d.n_ubatch) == (10, 0, 7)


def test_a_context_shorter_than_the_snapshots_is_laid_out_with_a_note():
    # -c 8 caps -b and -ub at 8 (src/llama-context.cpp#L246-L248): what llama.cpp builds, then aborts at decode;
    # the searches probe such contexts, so kvmem lays it out and says so
    model, _ctx, _n, kw = case(4, n_ubatch=512)
    d = kvmem.estimate(model, engine="llama.cpp", **dict(kw, n_ctx=8, n_batch=2048))
    assert (d.details.n_ubatch, d.details.n_rs_seq) == (8, 10)
    assert any("n_ubatch = n_ctx = 8 <= n_rs_seq + 1" in note for note in d.notes)


def test_kimi_k3_keeps_its_snapshots_kimi_linear_does_not():
    # a KimiK3 config reads as its kimi_linear text_config; llama.cpp's architecture is kimi-k3, which keeps n_rs_seq
    # (src/llama-arch.cpp#L1125): RS rows n_seq x (1 + n_rs_seq). One row: 69 KDA layers x (conv 3 x 3 x 96 x 128 x 4 B
    # = 442,368 + state 96 x 128 x 128 x 4 B = 6,291,456) = 464,633,856 B; the MLA cache 24 layers x 4,096 x 576 x 2 B
    # = 113,246,208 B. kvmem clamped it to 0 (577,880,064 B whatever n_rs_seq)
    kw = dict(tokens=1, n_ctx=4096, n_ubatch=512, n_batch=4096)
    for n_rs_seq in (0, 3):
        est = kvmem.estimate("kimi-k3", engine="llama.cpp", n_rs_seq=n_rs_seq, **kw)
        assert (est.details.n_rs_seq, est.total_bytes) == (n_rs_seq, 113_246_208 + (1 + n_rs_seq) * 464_633_856)
    # kimi-linear is not in llm_arch_supports_rs_rollback: clamped to 0
    assert kvmem.estimate("kimi-linear-48b-a3b", engine="llama.cpp", n_rs_seq=3, **kw).details.n_rs_seq == 0

"""SGLang's data-parallel attention and expert parallelism (kvmem.engines.sglang.parallel, kvmem.parallel).

SGLang's own start-up chain judges the pool and the fraction in tests/oracles/test_sglang_dp_oracle.py; these
hold the arithmetic by hand."""

from fractions import Fraction

import pytest

import kvmem
from kvmem.engines.sglang.budget import sglang_mem_fraction_static
from kvmem.engines.sglang.dp_weights import weights_per_device
from kvmem.parallel import attention_tp, check_expert_parallel, expert_share, gpus_of
from kvmem.sizing.setup import model_weights

H200 = "h200-sxm-141gb"


def fit(**options):
    return kvmem.fit("deepseek-v3", engine="sglang", gpu=H200, num_gpus=8, context="32k", **options)


def test_parallel_rules():
    assert attention_tp(8, 8) == 1 and attention_tp(16, 4) == 4
    with pytest.raises(ValueError, match="attn_dp_size=3 must divide tp=8"):
        attention_tp(8, 3)
    assert check_expert_parallel(8, 8, 256) == 32
    assert check_expert_parallel(8, 8, 256, 32) == 36          # (256 + 32) // 8
    with pytest.raises(ValueError, match="ep_size=8 must divide the 260 physical experts"):
        check_expert_parallel(8, 8, 256, 4)
    with pytest.raises(ValueError, match="ep_size=3 must divide tp=8"):
        check_expert_parallel(8, 3, 256)
    assert expert_share(8, 256) == Fraction(1, 8) and expert_share(8, 256, 32) == Fraction(288, 2048)
    assert gpus_of(2, 8) == 16


def test_tp_alone_is_unchanged():
    f = fit()
    assert (f.capacity.tokens, f.max_batch, f.replicas, f.kv_memory_bytes) == (699436, 21, 1, 49150817904)


def test_attn_dp_8_on_8_h200():
    f = fit(attn_dp_size=8)
    # each GPU its own attention group: 273,420 tokens of 70,272 B (576 x 61 x 2 B) from 19,213,818,229 B;
    # 273,420 // 32,768 = 8 requests a group, 8 groups
    assert (f.capacity.tokens, f.kv_memory_bytes, f.replicas, f.max_batch) == (273420, 19213818229, 8, 64)
    assert "SGLang's default mem_fraction_static for this GPU: 0.769" in f.notes
    # per DP worker SGLang's resolve_max_num_reqs: max(min(int(273,420 / 32,768 x 512), 4096), 2048) = 4,096
    assert f.capacity.details.max_running_requests == 4096
    assert ("8 attention groups of 1 GPU, each with this pool: 2,187,360 tokens and up to 32,768 requests at once "
            "in the tp group (4,096 a group, max_running_requests per DP worker)") in f.capacity.notes


def test_default_fraction_with_attn_dp():
    # 143,771 MiB; tp 8: max_bs 512, chunk 8192: 512 + 12,288 + 1,024 + 1,024 = 14,848 MiB -> 0.897;
    # attn_dp 8 adds 512 x 8 x 3 + 512 x 8 x 1.5 = 18,432 MiB -> 33,280 MiB -> 0.769
    mib = 143771 << 20
    assert sglang_mem_fraction_static(mib, tp=8) == Fraction(897, 1000)
    assert sglang_mem_fraction_static(mib, tp=8, attn_dp_size=8) == Fraction(769, 1000)
    # max_bs 256 (tp 2 < 4): only x 3 -- 512 + 12,288 + 512 + 256 + 256 x 2 x 3 = 15,104 MiB
    assert sglang_mem_fraction_static(mib, tp=2, attn_dp_size=2) == round(Fraction(143771 - 15104, 143771), 3)


def test_weights_per_gpu_under_attn_dp():
    model = kvmem.get_model("deepseek-v3")
    w = model_weights(model, "auto")
    # MLA attention a layer: q_a 7168 x 1536 + 1536 + q_b 1536 x 128 x 192 + kv_a 7168 x 576 + 512
    #   + kv_b 512 x 128 x 256 + o 128 x 128 x 7168 = 187,107,328; whole on every rank: q_a + kv_a = 15,138,816
    split = (187107328 - 15138816) * 61                       # 10,490,079,232 params split over attn_tp
    extra = (Fraction(w.dense_bytes * split, w.layout.dense_params) + w.embedding_bytes) * Fraction(7, 8)
    base = w.per_device(tp=8, replicated=True)
    got, notes = weights_per_device(w, model, tp=8, pp=1, options={"attn_dp_size": 8})
    assert got == base + int(extra) == 95741174721
    assert "attn_tp 1" in notes[0]
    # 32 redundant experts: + 32 / (256 x 8) of the routed experts' bytes
    got_r, _ = weights_per_device(w, model, tp=8, pp=1, options={"ep_size": 8, "ep_num_redundant_experts": 32})
    assert got_r == base + w.expert_bytes * 32 // 2048
    # ep alone moves experts between ranks, not bytes
    assert weights_per_device(w, model, tp=8, pp=1, options={"ep_size": 8})[0] == base


def test_weights_per_gpu_under_attn_dp_gqa():
    # qwen3-235b-a22b (qwen3_moe.py): attention a layer q 4096 x 64 x 128 + k, v 4096 x 4 x 256 + o 64 x 128 x 4096
    # = 71,303,168 params, x 94 layers = 6,702,497,792 at 2 B; the embedding 151,936 x 4,096 x 2 B = 1,244,659,712;
    # both over attn_tp 1 instead of tp 8: + 7/8 of them; K/V heads: tp 8 replicated one of 4 heads a rank (half a
    # head above the share), attn_tp 1 holds all four: - 2 B x 1,048,576 x 1/2 x 94 = -98,566,144
    model = kvmem.get_model("qwen3-235b-a22b")
    w = model_weights(model, "auto")
    base = w.per_device(tp=8, replicated=True)
    got, notes = weights_per_device(w, model, tp=8, pp=1, options={"attn_dp_size": 8})
    assert w.dense_bytes == 2 * w.layout.dense_params
    assert got - base == (6702497792 * 2 + 1244659712) * 7 // 8 - 98566144 == 12719882240
    assert got == 71591857024 and "attn_tp 1" in notes[0]
    # attn_tp 4: 1/4 - 1/8 more of the attention and embedding, and one whole KV head a rank (no replication left):
    # (13,404,995,584 + 1,244,659,712) / 8 - 98,566,144 = 1,732,640,768
    got_2, _ = weights_per_device(w, model, tp=8, pp=1, options={"attn_dp_size": 2})
    assert got_2 - base == 1732640768
    f = kvmem.fit("qwen3-235b-a22b", engine="sglang", gpu=H200, num_gpus=8, context="32k", attn_dp_size=8)
    # each GPU lays out the 4 KV heads whole: 94 x 4 x 256 x 2 B = 192,512 B a token; 225,249 tokens, 6 x 32k a group
    assert (f.capacity.tokens, f.replicas, f.max_batch) == (225249, 8, 48)


def test_dp_lm_head_and_dense_mlps_whole():
    model = kvmem.get_model("deepseek-v3")
    w = model_weights(model, "bf16")
    dp8 = weights_per_device(w, model, tp=8, pp=1, options={"attn_dp_size": 8})[0]
    # --enable-dp-lm-head: lm_head 129,280 x 7,168 x 2 B = 1,853,358,080 over attn_tp 1, not tp 8: + 7/8 of it
    head = weights_per_device(w, model, tp=8, pp=1, options={"attn_dp_size": 8, "enable_dp_lm_head": True})
    assert head[0] - dp8 == 1621688320 and "lm_head split over attn_tp 1" in head[1][-1]
    # --moe-dense-tp-size 1: the first_k_dense_replace 3 dense MLPs (3 x 7,168 x 18,432 params each, 2 B) whole
    dense = weights_per_device(w, model, tp=8, pp=1, options={"attn_dp_size": 8, "moe_dense_tp_size": 1})
    assert dense[0] - dp8 == 3 * 3 * 7168 * 18432 * 2 * 7 // 8 == 2080899072
    # without attention DP SGLang turns --enable-dp-lm-head off (overrides.py _data_parallelism_defaults);
    # --moe-dense-tp-size 1 still replicates the dense MLPs
    tp8 = weights_per_device(w, model, tp=8, pp=1, options={})[0]
    assert weights_per_device(w, model, tp=8, pp=1, options={"enable_dp_lm_head": True})[0] == tp8
    assert weights_per_device(w, model, tp=8, pp=1, options={"moe_dense_tp_size": 1})[0] - tp8 == 2080899072
    # Qwen3-MoE's file never reads moe_dense_tp_size: no change; a tied head is the embedding, already over attn_tp
    q = kvmem.get_model("qwen3-30b-a3b")
    qw = model_weights(q, "auto")
    assert (weights_per_device(qw, q, tp=8, pp=1, options={"moe_dense_tp_size": 1})[0]
            == weights_per_device(qw, q, tp=8, pp=1, options={})[0])
    with pytest.raises(ValueError, match="moe_dense_tp_size only supports None, 1, or tp_size"):
        fit(moe_dense_tp_size=2)
    with pytest.raises(ValueError, match="jamba-1.5-mini is JambaForCausalLM, whose file it has not read"):
        kvmem.fit("jamba-1.5-mini", engine="sglang", gpu=H200, num_gpus=8, context="8k", moe_dense_tp_size=1)


def test_deepep_reserve_and_refusals():
    mib = 143771 << 20
    # SGLang 0.5.23 adds 2,048 MiB for DeepEP's buffers on top of the floor: tp 8 14,848 + 2,048 = 16,896 MiB ->
    # round(126,875 / 143,771, 3) = 0.882; attn_dp 8 33,280 + 2,048 = 35,328 MiB -> 0.754
    assert sglang_mem_fraction_static(mib, tp=8, deepep_a2a=True) == Fraction(882, 1000)
    assert sglang_mem_fraction_static(mib, tp=8, attn_dp_size=8, deepep_a2a=True) == Fraction(754, 1000)
    f = kvmem.fit("qwen3-235b-a22b", engine="sglang", gpu=H200, num_gpus=8, context="32k", attn_dp_size=8,
                  moe_a2a_backend="deepep")
    assert "SGLang's default mem_fraction_static for this GPU: 0.754" in f.notes and f.capacity.tokens == 213601
    with pytest.raises(ValueError, match="deepseek-v3's shared experts are whole on every GPU under DeepEP or fused"):
        fit(attn_dp_size=8, moe_a2a_backend="deepep")
    with pytest.raises(ValueError, match="deepep dispatches routed experts; qwen3-32b has none"):
        kvmem.fit("qwen3-32b", engine="sglang", gpu=H200, num_gpus=8, context="8k", moe_a2a_backend="deepep")
    with pytest.raises(ValueError, match="none or deepep, got 'mooncake'"):
        kvmem.fit("qwen3-30b-a3b", engine="sglang", gpu=H200, num_gpus=8, context="8k", moe_a2a_backend="mooncake")


def test_refusals_name_the_setting():
    # llama.py's attention splits heads over tp_size, not attn_tp_size: SGLang has no attention-DP layout for it
    with pytest.raises(ValueError, match=r"no attention-DP layout for LlamaForCausalLM \(llama-3.3-70b\): its model "
                                         r"file python/sglang/srt/models/llama.py#L181-L194 splits"):
        kvmem.fit("llama-3.3-70b", engine="sglang", gpu=H200, num_gpus=8, context="8k", attn_dp_size=8)
    with pytest.raises(ValueError, match=r"qwen2.py#L165-L178"):
        kvmem.fit("qwen2.5-72b", engine="sglang", gpu=H200, num_gpus=8, context="8k", attn_dp_size=2)
    # a file kvmem has not read is a gap, said as one
    with pytest.raises(ValueError, match="jamba-1.5-mini is JambaForCausalLM, whose file kvmem has not read"):
        kvmem.fit("jamba-1.5-mini", engine="sglang", gpu=H200, num_gpus=8, context="8k", attn_dp_size=2)
    with pytest.raises(ValueError, match="llama-3.3-70b has none"):
        kvmem.fit("llama-3.3-70b", engine="sglang", gpu=H200, num_gpus=8, context="8k", ep_size=8)
    with pytest.raises(ValueError, match="attn_dp_size=3 must divide tp=8"):
        fit(attn_dp_size=3)
    with pytest.raises(ValueError, match="refuses --dp-size 2 with --attn-dp-size 8"):
        kvmem.fit("deepseek-v3", engine="sglang", gpu=H200, num_gpus=16, tp=8, context="8k", attn_dp_size=8)
    with pytest.raises(ValueError, match="nnodes=3 must divide the 8 GPUs"):
        fit(attn_dp_size=8, nnodes=3)
    with pytest.raises(ValueError, match="with pp = 1 only"):
        kvmem.fit("deepseek-v3", engine="sglang", gpu=H200, num_gpus=16, pp=2, context="8k", attn_dp_size=8)


def test_decode_bound_under_attn_dp():
    # the fullest GPU reads: the experts and MLPs the group's 64 sequences touch, over tp 8; the attention and
    # embedding it keeps whole (95,741,174,721 - 84,938,426,149 = 10,802,748,572 B); its group's 8 sequences'
    # latents (8 x 32,768 x 70,272 B, and the pool's padding slot) on its one GPU
    model = kvmem.get_model("deepseek-v3")
    w = model_weights(model, "auto")
    f = fit(attn_dp_size=8)
    est = kvmem.estimate(model, engine="sglang", tokens=32768, batch=8)
    assert est.total_bytes == 8 * 32768 * 70272 + 70272
    step = w.active_bytes(64) // 8 + (95741174721 - 84938426149) + est.total_bytes
    assert f.decode_tokens_per_s == pytest.approx(4.8e12 / step)
    assert f.decode_tokens_per_s_aggregate == pytest.approx(4.8e12 / step * 64)
    assert fit().decode_tokens_per_s == pytest.approx(53.2, abs=0.05)      # tp alone: as before

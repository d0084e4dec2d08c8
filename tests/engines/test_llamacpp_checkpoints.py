"""llama-server's context checkpoints and prompt cache (kvmem.engines.llamacpp.checkpoints); llama.cpp's own
state size judges the headers in tests/oracles/test_llamacpp_checkpoints_oracle.py."""

import pytest

import kvmem
from kvmem.engines.llamacpp.checkpoints import checkpoint_bytes, checkpoint_log_size_mib
from kvmem.host import host_memory
from kvmem.sizing.setup import make_setup

GIB = 1 << 30


def test_qwen35_27b_checkpoint_is_the_published_149_6_mib():
    # 48 linear-attention layers, one sequence: R (4 - 1) x 10,240 f32 = 122,880 B, S 48 x 128 x 128 f32
    # = 3,145,728 B a layer: 156,893,184 B; + 8 (magic, seq id) + 20 (cell count, pos, n_seq_id, s_trans,
    # n_layer) + 48 x 24 (types, row sizes) = 156,894,364 B; unsloth#11073 prints 149.6 MiB
    nbytes, what = checkpoint_bytes(kvmem.get_model("qwen3.5-27b"))
    assert nbytes == 156_894_364
    assert checkpoint_log_size_mib(nbytes) == "149.626"
    assert "48 layers" in what


def _setup(model, **options):
    s, _ = make_setup(model, gpu="rtx-4090", num_gpus=1, tp=None, pp=1, context=32768, batch=None,
                      weight_dtype="q4_k_m", kv_dtype="q4_0", engine="llamacpp", gpu_memory_utilization=0.9,
                      options=options)
    return s


def test_32_checkpoints_on_4_slots_are_18_7_gib():
    # unsloth#11073: 4 slots x 32 x 149.6 MiB = 18.7 GiB; 4 x 32 x 156,894,364 = 20,082,478,592 B = 18.70 GiB
    host = host_memory(_setup(kvmem.get_model("qwen3.5-27b"), cache_ram_mib=0), 0)
    (term,) = host.terms
    assert term.bytes_per_node == 20_082_478_592
    assert f"{term.bytes_per_node / GIB:.2f}" == "18.70"


def test_a_host_too_small_for_the_checkpoints_is_refused_naming_them():
    s = _setup(kvmem.get_model("qwen3.5-27b"), host_memory_bytes="16GiB")
    host = host_memory(s, 0)
    # 18.70 GiB of checkpoints > 17,179,869,184 B; the 8 GiB prompt cache is reported, not counted (llama.cpp
    # lowers its limit when an allocation fails)
    assert host.total_bytes == 20_082_478_592
    assert "llama.cpp context checkpoints 18.70 GiB" in host.refusal
    assert "17,179,869,184 B" in host.refusal and "prompt cache" not in host.refusal
    assert [t.binding for t in host.terms] == [True, False]


def test_a_dense_model_makes_no_checkpoint_and_unlimited_cache_ram_is_refused():
    assert checkpoint_bytes(kvmem.get_model("llama-3.1-8b"))[0] == 0
    host = host_memory(_setup(kvmem.get_model("llama-3.1-8b")), 0)
    assert [t.name for t in host.terms] == ["llama.cpp prompt cache (at most)"]
    with pytest.raises(ValueError, match="--cache-ram -1 puts no limit"):
        host_memory(_setup(kvmem.get_model("llama-3.1-8b"), cache_ram_mib=-1), 0)


def test_plan_writes_non_default_checkpoints_and_cache_ram():
    command = kvmem.plan("qwen3.5-27b", gpu="rtx-4090", context="32k", engine="llama.cpp", weight_dtype="q4_k_m",
                         kv_dtype="q4_0", ctx_checkpoints=8, cache_ram_mib=2048).command
    assert command.endswith("--ctx-checkpoints 8 --cache-ram 2048")
    default = kvmem.plan("qwen3.5-27b", gpu="rtx-4090", context="32k", engine="llama.cpp", weight_dtype="q4_k_m",
                         kv_dtype="q4_0").command
    assert "--ctx-checkpoints" not in default and "--cache-ram" not in default


def test_check_log_reads_a_checkpoint_line():
    from kvmem.logcheck import check_log
    log = ("llama_memory_recurrent: size =  598.50 MiB (     4 cells,  64 layers,  4 seqs), R (f32):   22.50 MiB, "
           "S (f32):  576.00 MiB\n"
           "slot update_slots: id  0 | task 0 | created context checkpoint 1 of 32 (pos_min = 1023, pos_max = 1023, "
           "n_tokens = 1024, size = 149.626 MiB)\n")
    (line,) = [c for c in check_log(log, model="qwen3.5-27b").checks if c.quantity == "context checkpoint"]
    assert line.matches and line.kvmem.startswith("149.626 MiB (156,894,364 B")


def test_a_sliding_window_checkpoint_holds_the_window():
    # gemma-3-27b: 52 SWA layers x 16 KV heads x 128 x 2 (K, V) x 2 B = 425,984 B a cell; after 32k tokens the
    # window's 1,024 cells: 1,024 x (425,984 + 12 meta) + 8 + 16 + 52 x 24 = 436,221,176 B; after 100: 100 cells
    nbytes, what = checkpoint_bytes(kvmem.get_model("gemma-3-27b"), tokens=32768)
    assert nbytes == 436_221_176 and "1,024 cells" in what
    assert checkpoint_bytes(kvmem.get_model("gemma-3-27b"), tokens=100)[0] == 100 * 425_996 + 24 + 52 * 24


def test_a_chunked_cache_keeps_the_last_chunk_begun():
    # Llama-4's chunked layers (n_swa 8,192, LLAMA_SWA_TYPE_CHUNKED): state_write keeps the cells is_masked_swa
    # leaves against the last position, ((tokens - 1) % 8192) + 1 -- 8,192 at 8,192 tokens, 1 at 8,193
    model = kvmem.get_model("llama-4-scout-17b-16e")
    one, what = checkpoint_bytes(model, tokens=1)
    full, _ = checkpoint_bytes(model, tokens=8192)
    assert "the 1 cells" in what and checkpoint_bytes(model, tokens=8193)[0] == one
    assert "3,616 cells" in checkpoint_bytes(model, tokens=20_000)[1]      # 19,999 % 8,192 + 1
    per_cell = (full - one) // 8191
    assert (full - one) % 8191 == 0 and per_cell == 12 + 36 * 2 * 8 * 128 * 2   # cell meta + 36 layers' K and V


def test_a_checkpoint_kvmem_has_not_read_is_shown_and_not_counted():
    fit = kvmem.fit("deepseek-v4-flash", gpu="h200-sxm-141gb", num_gpus=8, context=4096, engine="llama.cpp")
    term = next(t for t in fit.host["terms"] if "checkpoints" in t["name"])
    assert term["name"] == "llama.cpp context checkpoints (not sized)" and term["binding"] is False
    assert "llama_kv_cache_dsv4" in term["source"] and term["bytes_per_node"] == 0


@pytest.mark.parametrize("n_rs_seq", [None, 0, 4])
def test_rollback_snapshots_do_not_grow_a_checkpoint(n_rs_seq):
    # qwen3.5-9b: 24 Gated DeltaNet layers, R 3 x (2 x 16 x 128 + 32 x 128) x 4 B = 98,304 and S 32 x 128 x 128 x 4 B =
    # 2,097,152 a layer -> 52,690,944 B, + 8 + 20 + 24 x 24 B of headers = 52,691,548 B whatever n_rs_seq: the state
    # holds the current row of a cell, not its snapshots (review finding: -o n_rs_seq=4 gave 5 x, 263,455,324 B;
    # llama.cpp itself: tests/oracles/test_llamacpp_checkpoints_rs_oracle.py)
    options = {} if n_rs_seq is None else {"n_rs_seq": n_rs_seq}
    one, what = checkpoint_bytes(kvmem.get_model("qwen3.5-9b"), tokens=8192, **options)
    assert (one, what) == (52_691_548, "the recurrent state of one sequence (24 layers)")

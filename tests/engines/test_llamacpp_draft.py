"""llama.cpp's output buffers with speculative decoding (kvmem.engines.llamacpp.draft), by hand; llama.cpp's own
lines judge output_buffer_bytes and n_outputs_max in tests/oracles/test_llamacpp_draft_oracle.py."""

import pytest

from kvmem.engines.llamacpp.draft import (
    draft_outputs,
    n_outputs_max,
    output_buffer_bytes,
    server_outputs,
    speculative_output_buffers,
)


def test_output_counts():
    assert n_outputs_max(2048) == 2048 and n_outputs_max(2048, 12) == 12
    # 4 slots, 2 draft tokens: 4 x 3 = 12 outputs a verify batch; never above n_batch; 1 without speculation
    assert (server_outputs(2048, 4, 2), server_outputs(8, 4, 2), server_outputs(2048, 1)) == (12, 8, 1)
    assert draft_outputs(4) == 4 and draft_outputs(4, n_draft=7, block_draft=True) == 32


def test_output_buffer_rows():
    # 64 rows x (32 logits + 4,096 embeddings) x 4 B = 1,056,768 B (llama.cpp prints 1.01 MiB)
    assert output_buffer_bytes(32, 1, n_seq_max=64, n_embd_out=4096, embeddings=True) == 1_056_768
    with pytest.raises(ValueError, match="nextn must be"):
        output_buffer_bytes(32, 1, nextn="both")


def test_mtp_server_buffers():
    # a Qwen3.6-27B-sized model (vocab 248,320, hidden 5,120), -b 2048 -np 4 --spec-draft-n-max 2, draft-mtp:
    # target 12 outputs: (248,320 x 12 + 5,120 x 2,048 unmasked nextn rows) x 4 = 53,862,400 B;
    # draft 4 outputs: (248,320 + 5,120) x 4 x 4 = 4,055,040 B
    out = speculative_output_buffers(n_vocab=248_320, n_embd=5_120, n_batch=2_048, n_parallel=4, n_draft=2, mtp=True)
    assert (out.target_outputs, out.draft_outputs) == (12, 4)
    assert (out.target_bytes, out.draft_bytes) == (53_862_400, 4_055_040)
    # a separate draft model of another vocabulary, no nextn rows: 32,000 x 4 x 4 = 512,000 B
    assert speculative_output_buffers(n_vocab=248_320, n_embd=5_120, n_batch=2_048, n_parallel=4, n_draft=2,
                                      draft_n_vocab=32_000).draft_bytes == 512_000


# llama.cpp#22673 (https://github.com/ggml-org/llama.cpp/pull/22673, a Qwen3.5 model with n_embd 2560, MTP draft
# context, 8,192 cells, f16):
#   llama_context:  ROCm_Host  output buffer size =     0.95 MiB
#   llama_kv_cache: size =   32.00 MiB (  8192 cells,   1 layers,  1/1 seqs), K (f16):   16.00 MiB, V (f16):   16.00 MiB
#   llama_kv_cache: attn_rot_k = 0, n_embd_head_k_all = 256
def test_mtp_context_reproduces_the_published_lines():
    from kvmem.engines.llamacpp.draft import mtp_kv_bytes
    # made with one sequence, before the MTP head turns on its nextn rows: Qwen3.5's 248,320 logits x 4 B =
    # 993,280 B = 0.95 MiB
    assert f"{output_buffer_bytes(248_320, 1) / 2**20:.2f}" == "0.95"
    # one nextn layer, 4 KV heads of 256 in f16: 8,192 x 1,024 x 2 B = 16 MiB each of K and V
    k, v = mtp_kv_bytes(kv_heads=4, head_dim_k=256, head_dim_v=256, n_ctx=8192)
    assert (k, v) == (16 * 2**20, 16 * 2**20)
    # cells pad to 256 and q8_0 rows take 34 B a 32 values: 8,300 -> 8,448 cells x 1,024 / 32 x 34
    assert mtp_kv_bytes(kv_heads=4, head_dim_k=256, head_dim_v=256, n_ctx=8300, type_k="q8_0")[0] == 8_448 * 1_088

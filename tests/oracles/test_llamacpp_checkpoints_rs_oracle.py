"""A hybrid Gated DeltaNet model's context checkpoint with recurrent rollback snapshots (n_rs_seq) against llama.cpp
0c1e57098 itself (llama-cpp-python 0.3.36, CPU): the random Qwen3.5 / Qwen3.5-MoE cases of
kvmem.oracles.llamacpp_graphs_more written as GGUFs, a prompt decoded, then llama_state_seq_get_size_ext(ctx, 0,
PARTIAL_ONLY), what llama-server stores as a checkpoint. The memory holds 1 + n_rs_seq rows a cell; the state
writes one (src/llama-memory-recurrent.cpp#L801-L803), so the checkpoint does not grow with n_rs_seq (kvmem
multiplied it by 1 + n_rs_seq before). 12 of 12 equal when this was written; about 5 s."""

from tests.oracles.conftest import require

require("llama_cpp")

import pytest  # noqa: E402

from kvmem.engines.llamacpp.checkpoints import checkpoint_bytes  # noqa: E402
from kvmem.oracles.llamacpp_family_files import write_family  # noqa: E402
from kvmem.oracles.llamacpp_graphs_more import random_delta_case  # noqa: E402
from kvmem.oracles.llamacpp_lib import context_params, engine_in_child, load_library  # noqa: E402

TOKENS = 10


def _state_after_prompt(path: str, setting: dict) -> tuple:
    lib, lines, _ = load_library()
    model = lib.llama_model_load_from_file(path.encode(), lib.llama_model_default_params())
    if not model:
        raise RuntimeError("".join(text for _, text in lines[-5:]))
    ctx = lib.llama_init_from_model(model, context_params(lib, setting))
    tokens = (lib.llama_token * TOKENS)(*[1] * TOKENS)
    if lib.llama_decode(ctx, lib.llama_batch_get_one(tokens, TOKENS)) != 0:
        raise RuntimeError("llama_decode failed")
    return lib.llama_state_seq_get_size_ext(ctx, 0, lib.LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY), lib.llama_n_rs_seq(ctx)


@pytest.mark.parametrize("seed", (1, 2, 4, 5))
@pytest.mark.parametrize("n_seq, n_rs_seq", ((1, 0), (1, 3), (2, 8)))
def test_checkpoint_of_a_hybrid_with_rollback_snapshots_equals_llamacpps_state(seed, n_seq, n_rs_seq):
    model, fmt, ctx = random_delta_case(seed)
    assert model.model_type in ("qwen3_5_text", "qwen3_5_moe_text")      # the architectures with rollback
    setting = dict(ctx, n_ctx=256, n_seq=n_seq, n_batch=64, n_ubatch=64, n_rs_seq=n_rs_seq, kv_unified=False)
    reply = engine_in_child(lambda m, path: write_family(m, fmt, path, source=False), model, _state_after_prompt,
                            setting)
    assert reply[0] == "ok", reply
    theirs, kept = reply[1:]
    ours, _ = checkpoint_bytes(model, tokens=TOKENS, n_ctx=256, n_seq=n_seq, n_batch=64, n_ubatch=64,
                               n_rs_seq=n_rs_seq)
    assert kept == n_rs_seq and ours == theirs

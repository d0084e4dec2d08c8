"""check-log's rule "compute buffers are checked without the file type" (kvmem.engines.llamacpp.logs: no GPU, or
every weight on the device that runs its ops) judged by llama.cpp 0c1e57098 itself (llama-cpp-python 0.3.36,
CPU-only): one model written as sparse GGUFs of several file types (F16, Q4_0, Q8_0, and Q4_0 with token_embd in F16,
as --token-embedding-type writes it) prints the same "CPU compute buffer size" for each, to the four decimals
~llama_context prints, and kvmem's check of that log with its "file type" line taken out checks the compute line and
finds it equal. Random llama, qwen2 and qwen3 configs (kvmem.oracles.architectures) and a small qwen3_moe (routed
experts: MUL_MAT_ID); flash attention off and on: 8 of 8 (32 logs) equal when this was written; about 5 s. The GPU
side of the rule (every layer offloaded, token_embd alone on the host) needs a GPU build: not judged here."""

from tests.oracles.conftest import require

require("llama_cpp")

import os  # noqa: E402
import tempfile  # noqa: E402

import pytest  # noqa: E402

from kvmem.engines.llamacpp.tensors import GGUF_ARCH, synthesised_tensors  # noqa: E402
from kvmem.logcheck import check_log  # noqa: E402
from kvmem.model import Model  # noqa: E402
from kvmem.oracles.architectures import random_model  # noqa: E402
from kvmem.oracles.llamacpp_buffers import COMPUTE_CHECK_LINE, in_child, llama_lib, write_sparse  # noqa: E402
from kvmem.oracles.llamacpp_family_files import write_metadata  # noqa: E402

# (file type, --tensor-type rules): the last keeps Q4_0's mix but token_embd, whose GET_ROWS result is f32 whatever
# its type (the weight is read on the host, never copied)
FILES = (("f16", ()), ("q4_0", ()), ("q8_0", ()), ("q4_0", (("token_embd", "f16"),)))


def _moe() -> Model:
    return Model.from_hf_config(dict(
        model_type="qwen3_moe", architectures=["Qwen3MoeForCausalLM"], num_hidden_layers=3, hidden_size=256,
        num_attention_heads=4, num_key_value_heads=2, head_dim=64, intermediate_size=512, moe_intermediate_size=128,
        num_experts=8, num_experts_per_tok=2, vocab_size=512, rms_norm_eps=1e-6, rope_theta=10000.0,
        max_position_embeddings=8192, torch_dtype="bfloat16"), name="small-qwen3-moe")


CASES = [random_model(34, i, family)[1] for i, family in enumerate(("llama", "qwen2", "qwen3"))] + [_moe()]


def _write(model: Model, fmt: str, rules, path: str) -> None:
    import gguf
    arch = GGUF_ARCH.get(model.model_type, model.model_type)
    tensors = synthesised_tensors(model, fmt, tensor_types=rules)
    writer = gguf.GGUFWriter(path, arch)
    write_metadata(writer, model, arch, fmt)
    write_sparse(writer, [(t.name, t.shape, t.dtype) for t in tensors])


def _log(path: str, flash_attn: int) -> str:
    """What llama.cpp prints loading ``path`` and making a context (n_ctx 1024, -ub 512, swa_full off as
    llama-server's default), the context freed: its buffer lines and the four-decimal compute line."""
    lib, lines, _ = llama_lib()
    del lines[:]
    model = lib.llama_model_load_from_file(path.encode(), lib.llama_model_default_params())
    if not model:
        raise RuntimeError("".join(lines[-5:]))
    cparams = lib.llama_context_default_params()
    cparams.n_ctx, cparams.n_batch, cparams.n_ubatch = 1024, 1024, 512
    cparams.flash_attn_type, cparams.swa_full = flash_attn, False
    context = lib.llama_init_from_model(model, cparams)
    if context:
        lib.llama_free(context)
    lib.llama_model_free(model)
    return "".join(lines)


@pytest.mark.parametrize("flash_attn", (0, 1))
@pytest.mark.parametrize("case", range(len(CASES)))
def test_compute_buffer_is_the_same_for_every_file_type_and_check_log_checks_it_untyped(case, flash_attn):
    model = CASES[case]
    printed, checked = set(), []
    for fmt, rules in FILES:
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "model.gguf")
            _write(model, fmt, rules, path)
            log = in_child(_log, path, flash_attn)
        lines = log.splitlines()
        assert any(line.startswith("print_info: file type") for line in lines)
        printed.add(next(m.group(2) for line in lines if (m := COMPUTE_CHECK_LINE.match(line.strip()))))
        result = check_log("\n".join(line for line in lines if not line.startswith("print_info: file type")), model)
        assert not any(c.quantity.endswith("model buffer") for c in result.checks)   # its bytes need the types
        checked += [c for c in result.checks if c.quantity == "CPU compute buffer"]
        assert any(note.startswith("compute buffers are checked without the file type") for note in result.notes)
    assert len(printed) == 1, (model.name, printed)        # llama.cpp: one compute buffer whatever the types
    assert len(checked) == len(FILES) and all(c.matches for c in checked), [(c.logged, c.kvmem) for c in checked]

"""Model.from_gguf against llama.cpp 0c1e57098 (llama-cpp-python 0.3.36, CPU) for the architectures
kvmem/sources/gguf_layered.py maps: the header convert_hf_to_gguf would write for a small config
(kvmem.sources.gguf_converted) is built by llama.cpp (llama_model_init_from_user, every tensor its
load_arch_tensors asks for, F32 in memory) with a context of N_CTX cells; its "llama_kv_cache: size = ..."
lines and "CPU KV buffer size" lines must be kvmem's for the model it reads from the same header, flash attention
off (V rows padded to the widest layer's) and on. The small configs are tests/sources/test_gguf_more_layered.py's."""

from tests.oracles.conftest import require

require("llama_cpp")

import pytest  # noqa: E402

import kvmem  # noqa: E402
from kvmem.oracles.llamacpp_buffers import in_child  # noqa: E402
from kvmem.sources.gguf_converted import converted_metadata  # noqa: E402
from tests.oracles.test_gguf_more_oracle import _SIZE_LINES, N_CTX, _printed  # noqa: E402
from tests.sources.test_gguf_more import write_header  # noqa: E402
from tests.sources.test_gguf_more_layered import SMALL_NAS, SMALL_STEP35  # noqa: E402

CASES = {"deci": SMALL_NAS, "step35": SMALL_STEP35}


@pytest.mark.parametrize("flash", [False, True])
@pytest.mark.parametrize("case", sorted(CASES))
def test_llamacpp_kv_of_the_layered_header_equals_kvmem(case, flash, tmp_path):
    arch, meta = converted_metadata(CASES[case])
    meta[f"{arch}.vocab_size"] = CASES[case]["vocab_size"]      # the tokenizer's count, which the header omits
    path = str(tmp_path / "m.gguf")
    write_header(path, arch, meta)
    back = kvmem.Model.from_gguf(path)
    printed = in_child(_printed, path, N_CTX, flash)
    est = kvmem.estimate(back, engine="llama.cpp", tokens=N_CTX, kv_dtype="f16", flash_attn="on" if flash else "off")
    assert printed["size"], printed
    assert printed["size"] == [line for line in est.log_lines if line.startswith(_SIZE_LINES)]
    assert abs(sum(printed["KV"]) - est.kv_bytes / 2**20) <= 0.005 * len(printed["KV"]), (printed, est.kv_bytes)

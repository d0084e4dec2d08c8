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
from tests.sources.test_gguf_more_layered import (  # noqa: E402
    SMALL_MIMO2,
    SMALL_MINIMAX_M3,
    SMALL_NAS,
    SMALL_STEP35,
    small_deepseek_ocr,
    small_hrm_text,
    small_hy_v4,
)

CASES = {"deci": SMALL_NAS, "step35": SMALL_STEP35, "mimo2": SMALL_MIMO2, "minimax-m3": SMALL_MINIMAX_M3,
         "hy_v4": small_hy_v4(), "hy_v4-no-dsa": {**small_hy_v4(), "indexer_types": None},
         "deepseek2-ocr": {**small_deepseek_ocr(), "sliding_window_size": 1024}, "hrm_text": small_hrm_text()}


def _no_mtp(arch: str, meta: dict, n_layers: int) -> None:
    """The header as the converter's --no-mtp writes it (conversion/mimo.py L29-L31: no MTP layers): with them,
    llama_model_init_from_user aborts on the MTP block's skipped tensors (src/llama-model-loader.cpp#L1329)."""
    if meta.pop(f"{arch}.nextn_predict_layers", 0):
        meta[f"{arch}.block_count"] = n_layers
        for name, value in meta.items():
            if isinstance(value, list):
                meta[name] = value[:n_layers]


@pytest.mark.parametrize("flash", [False, True])
@pytest.mark.parametrize("case", sorted(CASES))
def test_llamacpp_kv_of_the_layered_header_equals_kvmem(case, flash, tmp_path):
    arch, meta = converted_metadata(CASES[case])
    meta[f"{arch}.vocab_size"] = CASES[case]["vocab_size"]      # the tokenizer's count, which the header omits
    _no_mtp(arch, meta, CASES[case]["num_hidden_layers"])
    path = str(tmp_path / "m.gguf")
    write_header(path, arch, meta)
    back = kvmem.Model.from_gguf(path)
    printed = in_child(_printed, path, N_CTX, flash)
    est = kvmem.estimate(back, engine="llama.cpp", tokens=N_CTX, kv_dtype="f16", flash_attn="on" if flash else "off")
    assert printed["size"], printed
    assert printed["size"] == [line for line in est.log_lines if line.startswith(_SIZE_LINES)]
    assert abs(sum(printed["KV"]) - est.kv_bytes / 2**20) <= 0.005 * len(printed["KV"]), (printed, est.kv_bytes)

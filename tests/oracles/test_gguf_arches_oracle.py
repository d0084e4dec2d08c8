"""Model.from_gguf against llama.cpp 0c1e57098 (llama-cpp-python 0.3.36, CPU) on the same file: GGUFs of the
architectures kvmem/sources/gguf_arches.py maps, written as convert_hf_to_gguf writes them with the MTP layer
kept (block_count counts it, nextn_predict_layers 1; the trunk's tensors only, which llama.cpp loads as
"trunk only", src/models/deepseek2.cpp L59-L61), small shapes (4 layers, 4 experts, 32,000 tokens) so the
sparse files load with mmap. Qwen3.5's and MiniMax-M2's files are written without an MTP layer:
Qwen3.5's loader has no trunk-only probe (qwen35moe.cpp L38-L41) and asks for the MTP layer's tensors,
which kvmem does not lay out; the others have none. llama.cpp's printed "CPU KV buffer size" lines (and "CPU RS" for the DeltaNet
state) must equal kvmem's estimate of the model it reads from the header, to the printed MiB, and each cache's
"llama_kv_cache: size = ..." line must be kvmem's. Flash attention off (-fa off) for every family, and on as well
for Gemma 4, whose V rows differ across layers: without flash attention every layer's V row is padded to the
widest (src/llama-kv-cache.cpp L157-L161, L208-L210, n_embd_v_gqa_max of src/llama-hparams.cpp L199-L206), so
the full cache's V doubles. 11 cases, 33 s measured on the shared 2-core machine."""

from tests.oracles.conftest import require

require("llama_cpp")

import re  # noqa: E402

import gguf  # noqa: E402
import pytest  # noqa: E402

import kvmem  # noqa: E402
from kvmem.engines.llamacpp.arch_fields import ARCHS, field  # noqa: E402
from kvmem.engines.llamacpp.tensors import synthesised_tensors  # noqa: E402
from kvmem.oracles.llamacpp_buffers import BUFFER_LINE, in_child, llama_lib, write_sparse  # noqa: E402
from kvmem.oracles.llamacpp_family_files import mtp_layers, write_metadata  # noqa: E402

_TOP2 = {"num_experts_per_tok": 2}
_DSA = {"num_hidden_layers": 4, "n_routed_experts": 4, "n_group": 1, "topk_group": 1, **_TOP2}
SMALL = {"glm-5": _DSA, "glm-5.2": _DSA, "deepseek-v3.2": _DSA,
         "glm-4.7": {"num_hidden_layers": 4, "n_routed_experts": 4, "n_group": 1, "topk_group": 1, **_TOP2},
         "qwen3.5-397b-a17b": {"num_hidden_layers": 4, "num_experts": 4, **_TOP2},
         "qwen3.5-27b": {"num_hidden_layers": 8},
         "minimax-m2.5": {"num_hidden_layers": 2, "num_local_experts": 4, **_TOP2},
         # 5 sliding (window 1,024) then 1 full layer: 26B-A4B 8 x 256 / 2 x 512, 31B 16 x 256 / 4 x 512 (K = V)
         "gemma-4-26b-a4b": {"num_hidden_layers": 6, "num_experts": 4, "top_k_experts": 2},
         "gemma-4-31b": {"num_hidden_layers": 6}}
# MiniMax-M2.5 has no preset: its published config (tests/fixtures/configs/new/SOURCES.md); Gemma-4-31B neither
FIXTURES = {"minimax-m2.5": "tests/fixtures/configs/new/minimax-m2.5.json",
            "gemma-4-31b": "tests/fixtures/configs/corpus/nvidia--Gemma-4-31B-IT-NVFP4.json"}
N_CTX = 4096
# llama.cpp's lines at 4,096 cells, swa_full off (SWA cache: 1,024 + 512 = 1,536 cells), f16:
#   gemma-4-26b-a4b  -fa off: 24.00 (full: K 8.00, V 16.00 padded to 2,048) + 60.00 MiB; -fa on: 16.00 + 60.00
#   gemma-4-31b      -fa off: 48.00 (full: K 16.00, V 32.00 padded to 4,096) + 120.00 MiB; -fa on: 32.00 + 120.00
CASES = [(preset, "off") for preset in sorted(SMALL)] + [("gemma-4-26b-a4b", "on"), ("gemma-4-31b", "on")]


def _small(preset: str):
    source = kvmem.Model.from_hf_config(FIXTURES[preset]) if preset in FIXTURES else kvmem.get_model(preset)
    cfg = dict(source.config)
    text = dict(cfg["text_config"]) if isinstance(cfg.get("text_config"), dict) else cfg
    text.update(SMALL[preset], vocab_size=32000)
    for key in ("layer_types", "indexer_types", "mlp_layer_types"):
        if text.get(key):
            text[key] = text[key][:text["num_hidden_layers"]]
    if "text_config" in cfg:
        cfg["text_config"] = text
    return kvmem.Model.from_hf_config(cfg, name=f"{preset}-small")


RS_LINE = re.compile(r"^\S+: +(\S+) RS buffer size = +([0-9.]+) MiB")


def _printed(path: str, flash_attn: bool = False) -> dict:
    """llama.cpp's KV lines and RS buffer (MiB) for a context of N_CTX cells, f16 K and V."""
    lib, lines, _ = llama_lib()
    del lines[:]
    params = lib.llama_model_default_params()
    params.use_extra_bufts = False
    params.load_mode = lib.LLAMA_LOAD_MODE_MMAP
    model = lib.llama_model_load_from_file(path.encode(), params)
    if not model:
        raise RuntimeError("llama.cpp could not load the GGUF:\n" + "".join(lines[-5:]))
    try:
        cparams = lib.llama_context_default_params()
        cparams.n_ctx, cparams.n_batch, cparams.n_ubatch, cparams.n_seq_max = N_CTX, N_CTX, 512, 1
        cparams.flash_attn_type = 1 if flash_attn else 0     # LLAMA_FLASH_ATTN_TYPE_ENABLED / _DISABLED
        cparams.swa_full = False     # llama-server's default (--swa-full off); the C API defaults to true
        context = lib.llama_init_from_model(model, cparams)
        if context:
            lib.llama_free(context)
    finally:
        lib.llama_model_free(model)
    out = {"KV": [], "RS": 0.0, "size": []}
    for line in "".join(lines).splitlines():
        if line.startswith("llama_kv_cache: size ="):
            out["size"].append(line.strip())
        m = BUFFER_LINE.match(line.strip())
        if m and m.group(2) == "KV":
            out["KV"].append(float(m.group(3)))
        m = RS_LINE.match(line.strip())
        if m:
            out["RS"] += float(m.group(2))
    return out


@pytest.mark.parametrize(("preset", "flash_attn"), CASES)
def test_llamacpp_kv_of_the_header_equals_kvmem(preset, flash_attn, tmp_path):
    model = _small(preset)
    arch, path = ARCHS[model.model_type], str(tmp_path / "m.gguf")
    writer = gguf.GGUFWriter(path, arch)
    # the MTP layer in block_count (nextn_predict_layers 1 in these configs) for glm-dsa, deepseek32, glm4moe
    write_metadata(writer, model, arch, "q8_0", mtp=arch not in ("qwen35", "qwen35moe"))
    assert mtp_layers(model, arch) == (1 if arch in ("glm-dsa", "deepseek32", "glm4moe") else
                                       field(model, "mtp_num_hidden_layers", 0) or 0)
    write_sparse(writer, [(t.name, t.shape, t.dtype) for t in synthesised_tensors(model, "q8_0")])
    back = kvmem.Model.from_gguf(path)
    assert back.num_layers == model.num_layers
    printed = in_child(_printed, path, flash_attn == "on")
    est = kvmem.estimate(back, engine="llama.cpp", tokens=N_CTX, kv_dtype="f16", flash_attn=flash_attn)
    assert printed["size"] == [line for line in est.log_lines if line.startswith("llama_kv_cache: size =")]
    assert printed["KV"] and round(sum(printed["KV"]), 2) == round(est.kv_bytes / 2**20, 2), (printed, est.kv_bytes)
    assert round(printed["RS"], 2) == round(est.state_bytes / 2**20, 2), (printed, est.state_bytes)

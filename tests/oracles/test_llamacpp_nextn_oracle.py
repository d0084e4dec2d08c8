"""A GGUF that carries its NextN/MTP block, loaded by llama.cpp 0c1e57098 (llama-cpp-python 0.3.36, CPU-only),
against kvmem's placement of it (kvmem.engines.llamacpp.placement, n_nextn).

The file is written as convert_hf_to_gguf writes it by default (no --no-mtp): block_count = trunk + 1,
nextn_predict_layers 1, and after the trunk's layers the MTP block blk.N: a decoder layer of the trunk's last
layer's tensors and nextn.eh_proj [2 x n_embd, n_embd], nextn.enorm, nextn.hnorm, nextn.shared_head_norm
(glm4-moe.cpp#L55-L121, glm-dsa.cpp#L119-L185). llama.cpp reads n_layer_all = trunk + 1 ("print_info: n_layer_all"),
skips every MTP tensor ("model has unused tensor blk.N.* -- ignoring": TENSOR_SKIP, load_mtp off; glm-dsa loads
the block's exp_probs_b.bias all the same, glm-dsa.cpp#L155), assigns the
n_layer_all + 1 layers of its split ("load_tensors: layer N assigned to device", at debug level: the MTP block
and the output layer included) and prints the host buffers kvmem predicts: "CPU_Mapped model buffer size" (the
file span of the loaded tensors: the MTP block after them is left out) and "CPU KV buffer size" (the trunk's
layers only). This build has no GPU, so "offloaded N/M layers to GPU" is not printed (llama_supports_gpu_offload
false, src/llama-model.cpp#L1911); the split over GPUs is judged by the published GLM-5.2 logs
(tests/engines/test_llamacpp_logs.py). The files are small (4,000-token vocabulary, 3-4 layers, 4 experts).
"""

from tests.oracles.conftest import require

require("llama_cpp")

import re  # noqa: E402

import pytest  # noqa: E402

from kvmem.catalog import get_model  # noqa: E402
from kvmem.engines.llamacpp.arch_fields import ARCHS  # noqa: E402
from kvmem.engines.llamacpp.layouts import layout  # noqa: E402
from kvmem.engines.llamacpp.nextn import gguf_nextn_layers, nextn_loaded  # noqa: E402
from kvmem.engines.llamacpp.placement import buffer_mib  # noqa: E402
from kvmem.engines.llamacpp.tensors import synthesised_tensors, tensors_for  # noqa: E402
from kvmem.model import Model  # noqa: E402
from kvmem.oracles.llamacpp_buffers import BUFFER_LINE, in_child, llama_lib, write_sparse  # noqa: E402
from kvmem.oracles.llamacpp_family_files import write_metadata  # noqa: E402

_TOP2 = {"num_experts_per_tok": 2, "vocab_size": 4000}
SMALL = {"glm-4.5-air": {"num_hidden_layers": 3, "n_routed_experts": 4, **_TOP2},
         "glm-5.2": {"num_hidden_layers": 4, "n_routed_experts": 4, "n_group": 1, "topk_group": 1, **_TOP2}}
N_CTX = 512


def _small(preset: str) -> Model:
    cfg = dict(get_model(preset).config)
    cfg.update(SMALL[preset])
    for key in ("layer_types", "indexer_types", "mlp_layer_types"):
        if cfg.get(key):
            cfg[key] = cfg[key][:cfg["num_hidden_layers"]]
    return Model.from_hf_config(cfg, name=f"{preset}-small")


def _with_mtp_block(model: Model, tensors) -> list:
    """(name, ne, type) of the file: kvmem's tensors (the trunk, and the MTP block's tensors llama.cpp loads), then
    the rest of the MTP block blk.n (the last trunk layer's tensors under its number, and its nextn tensors)."""
    n, h = model.num_layers, model.hidden_size
    rows = [(t.name, t.shape, t.dtype) for t in tensors]     # glm-dsa's: blk.n.exp_probs_b.bias among them
    have = {t.name for t in tensors}
    last = [(t.name.replace(f"blk.{n - 1}.", f"blk.{n}.", 1), t.shape, t.dtype) for t in tensors
            if t.name.startswith(f"blk.{n - 1}.") and t.name.replace(f"blk.{n - 1}.", f"blk.{n}.", 1) not in have]
    nextn = [(f"blk.{n}.nextn.eh_proj.weight", (2 * h, h), "F16")] + \
        [(f"blk.{n}.nextn.{norm}.weight", (h,), "F32") for norm in ("enorm", "hnorm", "shared_head_norm")]
    return rows + last + nextn


def _load(path: str) -> dict:
    lib, lines, _ = llama_lib()
    del lines[:]
    params = lib.llama_model_default_params()
    params.use_extra_bufts = False
    params.load_mode = lib.LLAMA_LOAD_MODE_MMAP
    model = lib.llama_model_load_from_file(path.encode(), params)
    if not model:
        raise RuntimeError("llama.cpp could not load the GGUF:\n" + "".join(lines)[-3000:])
    try:
        cparams = lib.llama_context_default_params()
        cparams.n_ctx, cparams.n_batch, cparams.n_ubatch = N_CTX, N_CTX, N_CTX
        cparams.flash_attn_type = 1
        context = lib.llama_init_from_model(model, cparams)
        if context:
            lib.llama_free(context)
    finally:
        lib.llama_model_free(model)
    text = "".join(lines)
    out = {"unused": sorted(re.findall(r"model has unused tensor (\S+) ", text)),
           "assigned": [int(x) for x in re.findall(r"load_tensors: layer +(\d+) assigned to device", text)],
           "n_layer_all": [int(x) for x in re.findall(r"print_info: n_layer_all += (\d+)", text)],
           "buffers": {}}
    for line in text.splitlines():
        m = BUFFER_LINE.match(line.strip())
        if m:
            out["buffers"][f"{m.group(1)} {m.group(2)}"] = out["buffers"].get(f"{m.group(1)} {m.group(2)}", 0) \
                + float(m.group(3))
    return out


@pytest.mark.parametrize("preset", sorted(SMALL))
def test_mtp_block_counted_in_the_split_and_not_loaded(preset, tmp_path):
    import gguf
    model = _small(preset)
    arch = ARCHS[model.model_type]
    assert gguf_nextn_layers(model) == 1           # num_nextn_predict_layers: 1, as the published configs
    tensors = synthesised_tensors(model, "q8_0")
    rows = _with_mtp_block(model, tensors)
    path = str(tmp_path / "model.gguf")
    writer = gguf.GGUFWriter(path, arch)
    write_metadata(writer, model, arch, "q8_0", mtp=True)
    write_sparse(writer, rows)
    out = in_child(_load, path)
    n = model.num_layers
    mtp = sorted(name for name, _, _ in rows if name.startswith(f"blk.{n}."))
    loaded = [name for name in mtp if name.endswith(nextn_loaded(model))]
    assert loaded == ([f"blk.{n}.exp_probs_b.bias"] if arch == "glm-dsa" else [])
    assert out["n_layer_all"] == [n + 1]
    # every MTP tensor skipped but glm-dsa's exp_probs_b.bias (created without the MTP flags, glm-dsa.cpp#L155)
    assert out["unused"] == [name for name in mtp if name not in loaded]
    if out["assigned"]:                            # the debug lines, where the log callback gets them
        assert out["assigned"] == list(range(n + 2))     # layers 0..n_layer_all: the MTP block and the output
    # kvmem: the file's own tensor list (MTP block included) placed with n_nextn = 1, every layer on the host
    from kvmem.engines.llamacpp.tensors import GGUFTensor
    listed = [GGUFTensor(name, dtype, tuple(ne), next(t.nbytes for t in tensors if t.name == name)
                         if not name.startswith(f"blk.{n}.") else _nbytes(ne, dtype)) for name, ne, dtype in rows]
    lay = layout(model, listed, gpus=(), n_gpu_layers=0, n_ctx=N_CTX, n_ubatch=N_CTX, flash_attn=True)
    p = lay.placement
    assert (p.n_layer, p.n_nextn, p.layers_total, p.offloaded_layers) == (n, 1, n + 2, 0)
    assert [t.name for t in p.tensors if t.layer == n] == loaded
    # the CPU_Mapped span ends at the last loaded tensor (glm-dsa: the block's exp_probs_b.bias, listed first in
    # it): the skipped MTP tensors after it are not mapped
    assert out["buffers"]["CPU_Mapped model"] == buffer_mib(p.host.model_bytes)
    # the trunk's KV (glm-dsa: the DSA and the indexer cache, two lines, each rounded to 0.01 MiB)
    assert abs(out["buffers"]["CPU KV"] - p.host.kv_bytes / 2**20) <= 0.005 * (2 if arch == "glm-dsa" else 1)
    # the same file read by kvmem (Model.from_gguf: block_count - nextn_predict_layers trunk layers, the file's own
    # tensor infos): the same placement
    read = Model.from_gguf(path)
    assert (read.num_layers, read.mtp_layers, gguf_nextn_layers(read)) == (n, 1, 1)
    again = layout(read, tensors_for(read, None)[0], gpus=(), n_gpu_layers=0, n_ctx=N_CTX, n_ubatch=N_CTX,
                   flash_attn=True).placement
    assert (again.host.model_bytes, again.host.kv_bytes, again.n_nextn) == (p.host.model_bytes, p.host.kv_bytes, 1)


def _nbytes(ne, dtype: str) -> int:
    from kvmem.engines.llamacpp.placement import GGML_TYPES
    block, size = GGML_TYPES[dtype]
    count = 1
    for x in ne:
        count *= x
    return count // block * size


MTP_QUANT = [("deepseek-v3.2", "q5_k_m"), ("glm-5.2", "q4_k_m"), ("glm-4.7", "q3_k_m"), ("glm-4.5-air", "q5_k_m"),
             ("qwen3.5-397b-a17b", "q4_k_m")]


@pytest.mark.parametrize("preset,fmt", MTP_QUANT)
def test_quantiser_types_the_trunk_of_an_mtp_file(preset, fmt, tmp_path):
    # the other MTP-carrying presets: every trunk tensor's type as llama-quantize gives it in the default
    # converter's file (the MTP block's tensors counted by the quantiser, not listed by kvmem)
    ours, theirs = _quantised(get_model(preset), fmt, tmp_path)
    assert {name: theirs[name] for name in ours} == ours


def test_quantiser_counts_the_mtp_block(tmp_path):
    # llama-quantize's layer count is n_layer_all (src/llama-quant.cpp#L940): DeepSeek-V3.2 as converted by
    # default (61 trunk layers + the MTP block: 62) under Q5_K_M gives ffn_down_exps of layer il Q6_K where
    # use_more_bits(il, 62): il < 62/8 = 7, il >= 7 x 62/8 = 54, or (il - 7) % 3 == 2. Layer 53: 53 < 54 and
    # 46 % 3 = 1, so Q5_K (with the trunk's 61 it would be Q6_K: 53 >= 7 x 61/8 = 53)
    ours, theirs = _quantised(get_model("deepseek-v3.2"), "q5_k_m", tmp_path)
    assert ours["blk.53.ffn_down_exps.weight"] == "Q5_K" and ours["blk.54.ffn_down_exps.weight"] == "Q6_K"
    assert {name: theirs[name] for name in ours} == ours


def _quantised(model, fmt, tmp_path) -> tuple[dict, dict]:
    """(kvmem's type of each tensor in ``fmt``, llama-quantize's dry run of the default converter's f16 file, MTP
    block included)."""
    import gguf

    from kvmem.engines.llamacpp.quant_mix import FTYPES
    from kvmem.engines.llamacpp.tensors import source_type
    from tests.oracles.test_llamacpp_layout_families_oracle import _dry_run
    arch, n = ARCHS[model.model_type], model.num_layers
    tensors = synthesised_tensors(model, fmt)
    rows = [(name, ne, source_type(name, ne, "f16") if not name.startswith(f"blk.{n}.nextn.") else dtype)
            for name, ne, dtype in _with_mtp_block(model, tensors)]
    source = str(tmp_path / "source.gguf")
    writer = gguf.GGUFWriter(source, arch)
    write_metadata(writer, model, arch, fmt, mtp=True)
    write_sparse(writer, rows)
    return {t.name: t.dtype for t in tensors}, in_child(_dry_run, source, FTYPES[fmt][0])

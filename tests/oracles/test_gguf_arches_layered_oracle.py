"""Model.from_gguf against llama.cpp 0c1e57098 (llama-cpp-python 0.3.36, CPU) for the architectures
kvmem/sources/gguf_layered.py maps: the header convert_hf_to_gguf would write for a small config
(kvmem.sources.gguf_converted) is built by llama.cpp (llama_model_init_from_user, every tensor its
load_arch_tensors asks for, F32 in memory) with a context of N_CTX cells; its "llama_kv_cache: size = ..."
lines and "CPU KV buffer size" lines must be kvmem's for the model it reads from the same header, flash attention
off (V rows padded to the widest layer's) and on. The small configs are tests/sources/test_gguf_more_layered.py's."""

from tests.oracles.conftest import require

require("llama_cpp")

import re  # noqa: E402

import gguf  # noqa: E402
import pytest  # noqa: E402

import kvmem  # noqa: E402
from kvmem.engines.llamacpp.layouts import layout  # noqa: E402
from kvmem.engines.llamacpp.nextn import nextn_loaded  # noqa: E402
from kvmem.engines.llamacpp.placement import buffer_mib  # noqa: E402
from kvmem.engines.llamacpp.tensors import tensors_for  # noqa: E402
from kvmem.oracles.llamacpp_buffers import BUFFER_LINE, in_child, llama_lib, write_sparse  # noqa: E402
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


def _step35_tensors(n: int, mtp: int) -> list:
    """(name, ne, type) of a Step-3.5 file as step35.cpp#L37-L171 asks for it (SMALL_STEP35: 256 wide, heads 4 full /
    8 sliding of 64, 2 K/V heads, layer 0 dense of 512, 4 experts of 128, a shared expert of 128, 1,000 tokens),
    then ``mtp`` MTP blocks: a MoE decoder block and the nextn tensors."""
    h, v, e, ff = 256, 1000, 4, 128
    rows = [("token_embd.weight", (h, v), "Q8_0"), ("output_norm.weight", (h,), "F32"), ("output.weight", (h, v), "Q8_0")]
    for i in range(n + mtp):
        heads = 4 if i % 4 == 0 or i >= n else 8
        rows += [(f"blk.{i}.{name}", ne, "F32") for name, ne in (
            ("attn_norm.weight", (h,)), ("attn_q_norm.weight", (64,)), ("attn_k_norm.weight", (64,)),
            ("ffn_norm.weight", (h,)))]
        rows += [(f"blk.{i}.{name}", ne, "Q8_0") for name, ne in (
            ("attn_q.weight", (h, 64 * heads)), ("attn_k.weight", (h, 128)), ("attn_v.weight", (h, 128)),
            ("attn_output.weight", (64 * heads, h)))] + [(f"blk.{i}.attn_gate.weight", (h, heads), "F32")]
        if i == 0:
            rows += [(f"blk.0.{name}", ne, "Q8_0") for name, ne in (
                ("ffn_gate.weight", (h, 512)), ("ffn_up.weight", (h, 512)), ("ffn_down.weight", (512, h)))]
            continue
        rows += [(f"blk.{i}.ffn_gate_inp.weight", (h, e), "F32"), (f"blk.{i}.exp_probs_b.bias", (e,), "F32")]
        rows += [(f"blk.{i}.{name}", ne, "Q8_0") for name, ne in (
            ("ffn_gate_exps.weight", (h, ff, e)), ("ffn_up_exps.weight", (h, ff, e)),
            ("ffn_down_exps.weight", (ff, h, e)), ("ffn_gate_shexp.weight", (h, ff)), ("ffn_up_shexp.weight", (h, ff)),
            ("ffn_down_shexp.weight", (ff, h)))]
        if i >= n:
            rows += [(f"blk.{i}.nextn.eh_proj.weight", (2 * h, h), "Q8_0")] + [
                (f"blk.{i}.nextn.{norm}.weight", (h,), "F32") for norm in ("enorm", "hnorm", "shared_head_norm")]
    return rows


def _load_file(path: str) -> dict:
    """llama.cpp loading ``path`` from disk (mmap, no load_mtp): the tensors it leaves unused and its buffers."""
    lib, lines, _ = llama_lib()
    del lines[:]
    params = lib.llama_model_default_params()
    params.use_extra_bufts = False
    model = lib.llama_model_load_from_file(path.encode(), params)
    if not model:
        raise RuntimeError("llama.cpp could not load the GGUF:\n" + "".join(lines)[-3000:])
    lib.llama_model_free(model)
    text = "".join(lines)
    buffers = {f"{m.group(1)} {m.group(2)}": float(m.group(3)) for m in map(BUFFER_LINE.match, text.splitlines())
               if m}
    return {"unused": sorted(re.findall(r"model has unused tensor (\S+) ", text)), "buffers": buffers}


def test_step35_mtp_block_tensors_loaded_as_llama_cpp_loads_them(tmp_path):
    # the converter's default file (conversion/step3.py L114-L123: the MTP block after the trunk, nextn 1): llama.cpp
    # skips the block's attn_norm, Q/K/V/output, ffn_norm and eh_proj/enorm/hnorm (TENSOR_SKIP without load_mtp) and
    # loads the rest (TENSOR_NOT_REQUIRED alone, step35.cpp#L115-L171); kvmem's placement of the file must agree
    cfg = {**SMALL_STEP35, "num_nextn_predict_layers": 1}
    arch, meta = converted_metadata(cfg)
    meta[f"{arch}.vocab_size"] = cfg["vocab_size"]
    rows = _step35_tensors(8, 1)
    path = str(tmp_path / "m.gguf")
    writer = gguf.GGUFWriter(path, arch)
    for key_name, value in meta.items():
        if isinstance(value, bool):
            writer.add_bool(key_name, value)
        elif isinstance(value, int):
            writer.add_uint32(key_name, value)
        elif isinstance(value, float):
            writer.add_float32(key_name, value)
        else:
            writer.add_array(key_name, value)
    writer.add_tokenizer_model("none")
    write_sparse(writer, rows)
    out = in_child(_load_file, path)
    read = kvmem.Model.from_gguf(path)
    loaded = nextn_loaded(read)
    mtp = sorted(name for name, _, _ in rows if name.startswith("blk.8."))
    assert out["unused"] == [name for name in mtp if not name.endswith(loaded)]
    assert "blk.8.ffn_gate_exps.weight" not in out["unused"] and "blk.8.nextn.eh_proj.weight" in out["unused"]
    p = layout(read, tensors_for(read, None)[0], gpus=(), n_gpu_layers=0, n_ctx=N_CTX, flash_attn=True).placement
    assert (p.n_layer, p.n_nextn) == (8, 1)
    assert out["buffers"]["CPU_Mapped model"] == buffer_mib(p.host.model_bytes)


@pytest.mark.parametrize("delta", [-1, 1], ids=["short", "long"])
@pytest.mark.parametrize("case, name", [("step35", "attention.head_count_kv"), ("mimo2", "attention.head_count_kv"),
                                        ("deci", "feed_forward_length"), ("hy_v4", "attention.indexer.types")])
def test_llamacpp_refuses_a_per_layer_array_of_another_length_as_kvmem_does(case, name, delta, tmp_path):
    arch, meta = converted_metadata(CASES[case])
    full = f"{arch}.{name}"
    meta[full] = meta[full][:-1] if delta < 0 else meta[full] + meta[full][-1:]
    path = str(tmp_path / "m.gguf")
    write_header(path, arch, meta)
    with pytest.raises(RuntimeError) as theirs:
        in_child(_printed, path, N_CTX, False)
    with pytest.raises(kvmem.sources.SourceError) as ours:
        kvmem.Model.from_gguf(path)
    said = re.search(r"key \S+ has wrong array length; expected \d+, got \d+", str(theirs.value))
    assert said, str(theirs.value)
    assert f'"{said.group(0)}"' in str(ours.value)

"""kvmem's llama.cpp layout of the families whose tensors are not llama's (kvmem.engines.llamacpp.arch_tensors:
gpt-oss, glm4moe, deepseek2 with MLA, qwen35 and qwen35moe with Gated DeltaNet) against llama.cpp 0c1e57098
(llama-cpp-python 0.3.36, CPU-only) loading a sparse GGUF of each.

Per case (a preset, a file type):
1. the quantiser: the source GGUF convert_hf_to_gguf would write (F16 weights; F32 norms, routers,
   biases, ssm_conv1d, ssm_a) through llama_model_quantize with dry_run gives every tensor the type
   kvmem gives it;
2. the loader: the GGUF written from kvmem's tensor list loads (llama_model_loader creates every tensor
   the architecture's load_arch_tensors asks for, checks each shape and that none is left over), with
   no_alloc (nothing read or allocated); llama_model_size equals the sum of kvmem's bytes, and ggml's
   own GGUF reader sizes every tensor as kvmem does;
3. the model buffer: a smaller model of the same family (fewer layers or experts, a smaller
   vocabulary: every per-layer tensor keeps its real shape) loads with mmap, and the printed
   "CPU_Mapped model buffer size" equals kvmem's placement of it (placement.place, every layer on the
   host) to the printed MiB.
The sparse files are never read (no_alloc), or are small (mmap populates the whole file). About 10 s.
"""

from tests.oracles.conftest import require

require("llama_cpp")

import ctypes  # noqa: E402
import os  # noqa: E402

import pytest  # noqa: E402

from kvmem.catalog import get_model  # noqa: E402
from kvmem.dtypes import GGML_TYPES  # noqa: E402
from kvmem.engines.llamacpp.arch_fields import ARCHS  # noqa: E402
from kvmem.engines.llamacpp.nextn import gguf_nextn_layers, nextn_loaded  # noqa: E402
from kvmem.engines.llamacpp.placement import buffer_mib, place  # noqa: E402
from kvmem.engines.llamacpp.quant_mix import FTYPES  # noqa: E402
from kvmem.engines.llamacpp.tensors import GPT_OSS_EXPERTS, synthesised_tensors  # noqa: E402
from kvmem.model import Model  # noqa: E402
from kvmem.oracles.llamacpp_buffers import in_child, llama_lib  # noqa: E402
from kvmem.oracles.llamacpp_family_files import write_family as _write  # noqa: E402
from kvmem.oracles.llamacpp_presets import BUFFER_LINE, DRY_RUN_LINE, tensor_bytes  # noqa: E402

CASES = [("gpt-oss-20b", "mxfp4_moe"), ("gpt-oss-120b", "q4_k_m"), ("glm-4.5-air", "q4_k_m"),
         ("glm-4.5-air", "iq2_xxs"), ("glm-4.7", "q3_k_m"), ("deepseek-v2-lite", "q4_k_m"), ("deepseek-v3", "q2_k"),
         ("kimi-k2-instruct", "iq1_s"), ("qwen3.5-27b", "q4_k_m"), ("qwen3.5-397b-a17b", "iq4_xs"),
         ("glm-5", "q4_k_m"), ("glm-5.2", "q4_k_m"), ("minimax-m2.5", "iq3_xxs"), ("deepseek-v3.2", "q4_k_s"),
         ("qwen3-next-80b-a3b", "q5_k_m"), ("gemma-4-26b-a4b", "q4_k_m"),
         ("qwen1.5-moe-a2.7b", "q4_k_m"), ("qwen3.5-122b-a10b", "q4_k_m"), ("qwen3.5-9b", "q5_k_m")]
# MiniMax-M2.5 has no preset: its published config (tests/fixtures/configs/new/SOURCES.md)
FIXTURES = {"minimax-m2.5": "tests/fixtures/configs/new/minimax-m2.5.json"}
# qwen2moe (Qwen1.5-MoE-A2.7B's shapes): laid out llama's way plus its shared-expert gate
QWEN2_MOE = {"architectures": ["Qwen2MoeForCausalLM"], "model_type": "qwen2_moe", "hidden_size": 2048,
             "num_hidden_layers": 24, "num_attention_heads": 16, "num_key_value_heads": 16, "intermediate_size": 5632,
             "moe_intermediate_size": 1408, "shared_expert_intermediate_size": 5632, "num_experts": 60,
             "num_experts_per_tok": 4, "vocab_size": 151936, "tie_word_embeddings": False,
             "max_position_embeddings": 8192, "rms_norm_eps": 1e-6}
# a smaller model of each family for the mmap load: fewer layers (DeepSeek-V2-Lite keeps its 27,
# which llama.cpp reads as "lite": no q_lora_rank key), fewer experts, a 32,000-token vocabulary
_TOP2 = {"num_experts_per_tok": 2}
SMALL = {"gpt-oss-20b": {"num_hidden_layers": 2, "num_local_experts": 4, "experts_per_token": 2, **_TOP2},
         "glm-4.5-air": {"num_hidden_layers": 3, "n_routed_experts": 4, **_TOP2},
         "deepseek-v2-lite": {"n_routed_experts": 4, **_TOP2},
         "deepseek-v3": {"num_hidden_layers": 4, "n_routed_experts": 4, "n_group": 1, "topk_group": 1, **_TOP2},
         "qwen3.5-27b": {"num_hidden_layers": 4},
         "qwen3.5-397b-a17b": {"num_hidden_layers": 4, "num_experts": 4, **_TOP2},
         "qwen3.5-122b-a10b": {"num_hidden_layers": 4, "num_experts": 4, **_TOP2},
         "qwen3.5-9b": {"num_hidden_layers": 4},
         "glm-5": {"num_hidden_layers": 4, "n_routed_experts": 4, "n_group": 1, "topk_group": 1, **_TOP2},
         "glm-5.2": {"num_hidden_layers": 4, "n_routed_experts": 4, "n_group": 1, "topk_group": 1, **_TOP2},
         "minimax-m2.5": {"num_hidden_layers": 2, "num_local_experts": 4, **_TOP2},
         "deepseek-v3.2": {"num_hidden_layers": 4, "n_routed_experts": 4, "n_group": 1, "topk_group": 1, **_TOP2},
         "qwen3-next-80b-a3b": {"num_hidden_layers": 4, "num_experts": 4, **_TOP2},
         "gemma-4-26b-a4b": {"num_hidden_layers": 6, "num_experts": 4, "top_k_experts": 2}}


def _model(preset: str) -> Model:
    if preset == "qwen1.5-moe-a2.7b":
        return Model.from_hf_config(QWEN2_MOE, name=preset)
    return Model.from_hf_config(FIXTURES[preset]) if preset in FIXTURES else get_model(preset)


def _dry_run(source: str, ftype: int, overrides=()) -> dict:
    """llama-quantize --dry-run; ``overrides``: --tensor-type PATTERN=TYPE (pattern, ggml type id)."""
    lib, lines, _ = llama_lib()
    del lines[:]
    params = lib.llama_model_quantize_default_params()
    params.ftype, params.dry_run, params.nthread = ftype, True, 1
    if overrides:
        rules = (lib.llama_model_tensor_override * (len(overrides) + 1))(
            *[lib.llama_model_tensor_override(pattern.encode(), type_id) for pattern, type_id in overrides],
            lib.llama_model_tensor_override(None, 0))
        params.tt_overrides = rules
    if lib.llama_model_quantize(source.encode(), os.devnull.encode(), ctypes.byref(params)) != 0:
        raise RuntimeError("".join(lines)[-2000:])
    out = {}
    for line in "".join(lines).splitlines():
        m = DRY_RUN_LINE.match(line.strip())
        if m:
            out[m.group(1)] = (m.group(4) or m.group(3)).upper()
    return out


def _load(path: str, no_alloc: bool) -> dict:
    """llama.cpp's model load alone (no context): llama_model_size and the printed model buffers."""
    lib, lines, _ = llama_lib()
    del lines[:]
    params = lib.llama_model_default_params()
    params.use_extra_bufts = False
    params.no_alloc = no_alloc
    params.load_mode = lib.LLAMA_LOAD_MODE_NONE if no_alloc else lib.LLAMA_LOAD_MODE_MMAP
    model = lib.llama_model_load_from_file(path.encode(), params)
    if not model:
        raise RuntimeError("llama.cpp could not load the GGUF:\n" + "".join(lines)[-3000:])
    size = lib.llama_model_size(model)
    lib.llama_model_free(model)
    buffers = {}
    for line in "".join(lines).splitlines():
        m = BUFFER_LINE.match(line.strip())
        if m and m.group(2) == "model":
            buffers[m.group(1)] = float(m.group(3))
    return {"size": int(size), "buffers": buffers}


def _small(preset: str) -> Model:
    cfg = dict(_model(preset).config)
    text = dict(cfg["text_config"]) if isinstance(cfg.get("text_config"), dict) else cfg
    text.update(SMALL[preset], vocab_size=32000)
    for key in ("layer_types", "indexer_types", "mlp_layer_types"):
        if text.get(key):
            text[key] = text[key][:text["num_hidden_layers"]]
    if "text_config" in cfg:
        cfg["text_config"] = text
    return Model.from_hf_config(cfg, name=f"{preset}-small")


@pytest.mark.parametrize("preset,fmt", CASES, ids=[f"{p}-{f}" for p, f in CASES])
def test_family_gguf_equals_llamacpp(preset, fmt, tmp_path):
    model = _model(preset)
    source, path = str(tmp_path / "source.gguf"), str(tmp_path / "model.gguf")
    _write(model, fmt, source, source=True)
    theirs = in_child(_dry_run, source, FTYPES[fmt][0], _overrides(model))
    os.remove(source)
    tensors = _write(model, fmt, path, source=False)
    # 1. every tensor's type is the quantiser's
    assert {t.name: t.dtype for t in tensors} == theirs
    # 2. llama.cpp loads exactly this tensor set; its bytes are kvmem's
    out = in_child(_load, path, True)
    ggml = tensor_bytes(path)
    assert {t.name: t.nbytes for t in tensors} == {name: nbytes for name, (_, _, nbytes, _) in ggml.items()}
    assert out["size"] == sum(t.nbytes for t in tensors)


@pytest.mark.parametrize("preset", sorted(SMALL))
def test_family_model_buffer_equals_llamacpp(preset, tmp_path):
    model = _small(preset)
    fmt = dict(CASES)[preset] if preset in dict(CASES) else "q4_k_m"
    path = str(tmp_path / "model.gguf")
    tensors = _write(model, fmt, path, source=False)
    out = in_child(_load, path, False)
    host = place(tensors, n_layer=model.num_layers, n_gpu_layers=0, mmap=True, n_nextn=gguf_nextn_layers(model),
                 nextn_loaded=nextn_loaded(model)).host
    assert out["size"] == sum(host.group_bytes.values())
    assert out["buffers"] == {"CPU_Mapped": buffer_mib(host.model_bytes)}


def _overrides(model: Model) -> tuple:
    """kvmem's --tensor-type rules for the family, as (pattern, ggml type id): gpt-oss keeps MXFP4 experts."""
    keep = GPT_OSS_EXPERTS if ARCHS.get(model.model_type) == "gpt-oss" else ()
    return tuple((pattern, GGML_TYPES[ggml].id) for pattern, ggml in keep)


def _dry_runs(source: str, ftypes: list, overrides=()) -> dict:
    return {name: _dry_run(source, FTYPES[name][0], overrides) for name in ftypes}


@pytest.mark.parametrize("preset", ["gpt-oss-20b", "deepseek-v2-lite", "qwen3.5-27b", "qwen3-next-80b-a3b",
                                    "gemma-4-26b-a4b"])
def test_every_file_type_on_the_family_equals_llamacpps_quantiser(preset, tmp_path):
    """The quantiser's rules on each family's own tensors (MLA's 3-D attn_k_b, DeltaNet's attn_qkv counted
    as attn_v, gpt-oss's 2,880 columns): every file type but F32 (its source would be all F32) and
    Q1_0 (llama.cpp throws "no tensor type fallback" where 128 does not divide a tensor's columns)."""
    model = _model(preset)
    source = str(tmp_path / "source.gguf")
    _write(model, "f16", source, source=True)
    # F16/BF16 gpt-oss files are the converter's (its MXFP4 experts kept): llama-quantize applies --tensor-type
    # only to quantised file types, and would not requantize MXFP4 to F16 ("requantizing ... is disabled")
    skip = ("f32", "q1_0") + (("f16", "bf16") if _overrides(model) else ())
    ftypes = [name for name in FTYPES if name not in skip]
    theirs = in_child(_dry_runs, source, ftypes, _overrides(model))
    for ftype in ftypes:
        ours = {t.name: t.dtype for t in synthesised_tensors(model, ftype)}
        assert ours == theirs[ftype], (ftype, {k: (v, theirs[ftype].get(k)) for k, v in ours.items()
                                                if theirs[ftype].get(k) != v})

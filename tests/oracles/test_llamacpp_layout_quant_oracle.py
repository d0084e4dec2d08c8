"""kvmem's transcription of llama.cpp's quantiser (kvmem.engines.llamacpp.quant_mix) against llama.cpp
0c1e57098's own, for every file type llama-quantize offers (tools/quantize/quantize.cpp QUANT_OPTIONS).

For each model here a sparse source GGUF (convert_hf_to_gguf's F16/F32 types, the preset's real shapes:
kvmem.oracles.llamacpp_preset_files.write_gguf) goes through llama_model_quantize with dry_run
(llama-quantize --dry-run: every tensor's target type, nothing read or written), once per file type,
in one forked child per model; each tensor's type must equal quant_types'. The models cover the
rules' inputs: tied embeddings and GQA 4 (llama-3.2-1b), LLM_TYPE_70B (llama-3.3-70b), 128 routed
experts (qwen3-30b-a3b), 8 experts (mixtral-8x7b), a fused attn_qkv counted as attn_v (phi-4) and
ne0 not whole 256-blocks, the fallbacks (gemma-3-1b: 1152). No importance matrix (has_imatrix false).
About 1 s per model.
"""

from tests.oracles.conftest import require

require("llama_cpp")

import ctypes  # noqa: E402
import os  # noqa: E402

import pytest  # noqa: E402

from kvmem.catalog import get_model  # noqa: E402
from kvmem.engines.llamacpp.quant_mix import FTYPES, QuantModel, quant_types  # noqa: E402
from kvmem.engines.llamacpp.tensors import GGUF_ARCH, source_type  # noqa: E402
from kvmem.oracles.llamacpp_buffers import in_child, llama_lib  # noqa: E402
from kvmem.oracles.llamacpp_presets import DRY_RUN_LINE, write_gguf  # noqa: E402

# f32 needs an all-F32 source; the rest are judged (Q1_0 and NVFP4 have no fallback for gemma's 1152
# columns' neighbours: they are judged where the shapes divide)
JUDGED = [name for name in FTYPES if name != "f32"]


def _dry_runs(source: str, ftypes: list) -> dict:
    lib, lines, _ = llama_lib()
    out = {}
    for name in ftypes:
        del lines[:]
        params = lib.llama_model_quantize_default_params()
        params.ftype = FTYPES[name][0]
        params.dry_run = True
        params.nthread = 1
        rc = lib.llama_model_quantize(source.encode(), os.devnull.encode(), ctypes.byref(params))
        text = "".join(lines)
        if rc != 0:
            out[name] = "error: " + text[-300:]
            continue
        types = {}
        for line in text.splitlines():
            m = DRY_RUN_LINE.match(line.strip())
            if m:
                tensor, _, cur, new = m.groups()
                types[tensor] = (new or cur).upper()
        out[name] = types
    return out


@pytest.mark.parametrize("preset", ["llama-3.2-1b", "llama-3.3-70b", "qwen3-30b-a3b", "mixtral-8x7b", "phi-4",
                                    "gemma-3-1b"])
def test_every_file_type_equals_llamacpps_quantiser(preset, tmp_path):
    model = get_model(preset)
    source = str(tmp_path / "source.gguf")
    tensors = write_gguf(model, "f16", source, source=True)
    theirs = in_child(_dry_runs, source, JUDGED)
    first, moe = model.layers[0], model.facts.moe
    arch = GGUF_ARCH.get(model.model_type, model.model_type)
    qm = QuantModel(arch=arch, n_layer=model.num_layers, n_expert=moe.experts if moe else 0,
                    n_head=model.num_attention_heads, n_head_kv=first.kv_heads,
                    llm_type_70b=preset == "llama-3.3-70b")
    specs = [(t.name, t.shape, source_type(t.name, t.shape, "f16")) for t in tensors]
    for ftype in JUDGED:
        try:
            ours = quant_types(specs, ftype, qm)
        except ValueError as error:      # no fallback for the type (Q1_0, NVFP4): llama.cpp throws too
            assert isinstance(theirs[ftype], str) and "no tensor type fallback" in theirs[ftype], (ftype, error)
            continue
        assert ours == theirs[ftype], (ftype, {k: (v, theirs[ftype].get(k)) for k, v in ours.items()
                                                if theirs[ftype].get(k) != v})

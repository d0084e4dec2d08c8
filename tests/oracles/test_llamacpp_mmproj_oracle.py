"""kvmem's mmproj compute buffers (kvmem/engines/llamacpp/graphs_mmproj*.py) against llama.cpp 0c1e57098's libmtmd
(llama-cpp-python 0.3.36, CPU): the "reserve_compute_meta: CPU compute buffer size" line mtmd prints must equal
kvmem's bytes printed the same way (kvmem.oracles.llamacpp_mmproj), flash attention on and off. Gemma 3: random
SigLIP towers and Gemma-3-27B's own (its preset's vision_config). The Qwen-VL, Pixtral, Gemma 4, Llama 4,
InternVL, SmolVLM, LFM2-VL, MiniMax-M3, GLM-4.xV and Kimi-K2.5 towers likewise, read back from the GGUF through
kvmem's header reader: 66 random ones and real models' (Qwen2-VL, Qwen2.5-VL, Qwen3-VL, Qwen3.5, Mistral Small 3.1,
Pixtral 12B, Gemma 4 26B, Llama 4 Scout, InternVL3 8B, SmolVLM2 2.2B, LFM2-VL 1.6B, MiniMax-M3, GLM-4.1V- and
Kimi-K2.5-sized towers). About 2 minutes."""

from tests.oracles.conftest import require

require("llama_cpp")

import pytest  # noqa: E402

import kvmem  # noqa: E402
from kvmem.engines.llamacpp.graphs_mmproj import MmprojShape, mmproj_compute_bytes, mmproj_shape  # noqa: E402
from kvmem.oracles.llamacpp_mmproj import printed_mmproj_mib, random_mmproj_shape  # noqa: E402
from tests.engines.test_llamacpp_mmproj_clip import (  # noqa: E402
    GLM41V_SIZED,
    INTERNVL3_8B,
    KIMIK25_SIZED,
    REAL,
    SIGLIP_REAL,
    random_clip_shape,
    random_gemma4v_shape,
    random_glm4v_shape,
    random_internvl_shape,
    random_kimik25_shape,
    random_llama4_shape,
    random_minimax_shape,
    random_siglip_shape,
    real_shape,
)


def _case(shape, flash_attn, tmp_path):
    printed = printed_mmproj_mib(shape, flash_attn, str(tmp_path / "mmproj.gguf"), str(tmp_path / "text.gguf"))
    assert f"{mmproj_compute_bytes(shape, flash_attn=flash_attn) / 1048576.0:.2f}" == printed


@pytest.mark.parametrize("seed", range(16))
def test_random_gemma3_mmproj_compute_buffer_equals_mtmd(seed, tmp_path):
    _case(random_mmproj_shape(seed), seed % 2 == 0, tmp_path)


@pytest.mark.parametrize("flash_attn", [True, False])
def test_gemma3_27b_mmproj_compute_buffer_equals_mtmd(flash_attn, tmp_path):
    _case(mmproj_shape(kvmem.get_model("gemma-3-27b")), flash_attn, tmp_path)


@pytest.mark.parametrize("flash_attn", [True, False])
def test_siglip_base_sized_mmproj_compute_buffer_equals_mtmd(flash_attn, tmp_path):
    # a SigLIP-B/16-sized tower at 448 px (784 patches, 12 layers) under a 2048-wide text model
    _case(MmprojShape(448, 16, 768, 3072, 12, 12, 2048, 4, "bf16"), flash_attn, tmp_path)


# ---- Qwen-VL and Pixtral (graphs_mmproj_qwen, graphs_mmproj_pixtral) ------------------------------------------
# Each case writes a sparse mmproj GGUF of the ClipShape (the keys and tensors conversion/qwenvl.py,
# conversion/qwen3vl.py and conversion/llava.py + pixtral.py write; a one-layer llama text model as wide as
# clip_n_mmproj_embd), reads it back through kvmem's header reader, and compares the CPU compute buffer mtmd
# prints with kvmem's for the shape read.

def _gemma4v_tensors(s, kernel):
    """(name, ne, type) of every tensor of a gemma4v ``s``'s mmproj GGUF (conversion/gemma.py
    Gemma4VisionAudioModel: the position tables forced to F32, the patch kernel as the conv's)."""
    e, f, d = s.n_embd, s.n_ff, s.n_embd // s.n_head
    t = [("v.patch_embd.weight", (s.patch_size, s.patch_size, 3, e), kernel),
         ("v.position_embd.weight", (e, s.n_pos_embd, 2), "F32"), ("mm.input_projection.weight", (e, s.n_embd_text),
                                                                     "F16")]
    t += [("v.std_bias", (e,), "F32"), ("v.std_scale", (e,), "F32")] if s.has("std") else []
    for il in range(s.n_layer):
        b = f"v.blk.{il}."
        t += [(b + r + ".weight", (e,), "F32") for r in ("ln1", "ln2", "attn_post_norm", "ffn_post_norm")]
        t += [(b + r + ".weight", (d,), "F32") for r in ("attn_q_norm", "attn_k_norm")]
        t += [(b + f"attn_{x}.weight", (e, e), "F16") for x in ("q", "k", "v", "out")]
        t += [(b + "ffn_up.weight", (e, f), "F16"), (b + "ffn_gate.weight", (e, f), "F16"),
              (b + "ffn_down.weight", (f, e), "F16")]
    return t


def _llama4_tensors(s):
    """(name, ne, type) of every tensor of a llama4 ``s``'s mmproj GGUF (conversion/llama4.py: the patch linear
    2-D, [CLS] and the position table, both outer LayerNorms, biases on every layer tensor, the adapter MLP)."""
    e, f, px, sf = s.n_embd, s.n_ff, s.image_size // s.patch_size, s.n_merge
    t = [("v.patch_embd.weight", (3 * s.patch_size ** 2, e), "F16"), ("v.class_embd", (e,), "F32"),
         ("v.position_embd.weight", (e, px * px + 1), "F32"),
         ("mm.model.mlp.1.weight", (e * sf * sf, s.n_mm), "F16"), ("mm.model.mlp.2.weight", (s.n_mm, s.n_mm2), "F16"),
         ("mm.model.fc.weight", (s.n_mm2, s.n_embd_text), "F16")]
    t += [(f"v.{n}.{w}", (e,), "F32") for n in ("pre_ln", "post_ln") for w in ("weight", "bias")]
    for il in range(s.n_layer):
        b = f"v.blk.{il}."
        t += [(b + f"{n}.{w}", (e,), "F32") for n in ("ln1", "ln2") for w in ("weight", "bias")]
        t += [(b + f"attn_{x}.weight", (e, e), "F16") for x in ("q", "k", "v", "out")]
        t += [(b + f"attn_{x}.bias", (e,), "F32") for x in ("q", "k", "v", "out")]
        t += [(b + "ffn_up.weight", (e, f), "F16"), (b + "ffn_up.bias", (f,), "F32"),
              (b + "ffn_down.weight", (f, e), "F16"), (b + "ffn_down.bias", (e,), "F32")]
    return t


def _internvl_tensors(s):
    """(name, ne, type) of every tensor of an internvl ``s``'s mmproj GGUF (conversion/internvl.py: QKV split,
    biases, the layer scales, [CLS], the position table in F32, the projector's LayerNorm and two linears)."""
    e, f, px, m = s.n_embd, s.n_ff, s.image_size // s.patch_size, s.n_embd * s.n_merge ** 2
    kernel = {"f16": "F16", "f32": "F32", "bf16": "BF16"}[s.patch_type]
    t = [("v.patch_embd.weight", (s.patch_size, s.patch_size, 3, e), kernel), ("v.patch_embd.bias", (e,), "F32"),
         ("v.class_embd", (e,), "F32"), ("v.position_embd.weight", (e, px * px + 1), "F32"),
         ("mm.model.mlp.0.weight", (m,), "F32"), ("mm.model.mlp.0.bias", (m,), "F32"),
         ("mm.model.mlp.1.weight", (m, s.n_mm), "F16"), ("mm.model.mlp.1.bias", (s.n_mm,), "F32"),
         ("mm.model.mlp.3.weight", (s.n_mm, s.n_embd_text), "F16"), ("mm.model.mlp.3.bias", (s.n_embd_text,), "F32")]
    for il in range(s.n_layer):
        b = f"v.blk.{il}."
        t += [(b + f"{n}.{w}", (e,), "F32") for n in ("ln1", "ln2") for w in ("weight", "bias")]
        t += [(b + "ls1.weight", (e,), "F32"), (b + "ls2.weight", (e,), "F32")]
        t += [(b + f"attn_{x}.weight", (e, e), "F16") for x in ("q", "k", "v", "out")]
        t += [(b + f"attn_{x}.bias", (e,), "F32") for x in ("q", "k", "v", "out")]
        t += [(b + "ffn_up.weight", (e, f), "F16"), (b + "ffn_up.bias", (f,), "F32"),
              (b + "ffn_down.weight", (f, e), "F16"), (b + "ffn_down.bias", (e,), "F32")]
    return t


def _minimax_tensors(s):
    """(name, ne, type) of every tensor of a minimax_m3 ``s``'s mmproj GGUF (conversion/minimax.py
    MiniMaxM3VisionModel: the Conv3d's two slices, the CLIP tower with biases and its pre LayerNorm, the per-patch
    and merge MLPs, and the sentinel embeddings clip.cpp#L2528-L2540 requires)."""
    e, f, text, m = s.n_embd, s.n_ff, s.n_embd_text, s.n_merge
    kernel = {"f16": "F16", "f32": "F32", "bf16": "BF16"}[s.patch_type]
    t = [("v.patch_embd.weight", (s.patch_size, s.patch_size, 3, e), kernel),
         ("v.patch_embd.weight.1", (s.patch_size, s.patch_size, 3, e), kernel),
         ("v.pre_ln.weight", (e,), "F32"), ("v.pre_ln.bias", (e,), "F32"),
         ("mm.1.weight", (e, s.n_mm), "F16"), ("mm.1.bias", (s.n_mm,), "F32"),
         ("mm.2.weight", (s.n_mm, text), "F16"), ("mm.2.bias", (text,), "F32"),
         ("mm.merger.fc1.weight", (text * m * m, s.n_mm2), "F16"), ("mm.merger.fc1.bias", (s.n_mm2,), "F32"),
         ("mm.merger.fc2.weight", (s.n_mm2, text), "F16"), ("mm.merger.fc2.bias", (text,), "F32")]
    t += [(n, (text,), "F32") for n in ("v.image_newline", "v.token_embd.img_start", "v.token_embd.img_end",
                                         "v.token_embd.img_pad")]
    for il in range(s.n_layer):
        b = f"v.blk.{il}."
        t += [(b + f"{n}.{w}", (e,), "F32") for n in ("ln1", "ln2") for w in ("weight", "bias")]
        t += [(b + f"attn_{x}.weight", (e, e), "F16") for x in ("q", "k", "v", "out")]
        t += [(b + f"attn_{x}.bias", (e,), "F32") for x in ("q", "k", "v", "out")]
        t += [(b + "ffn_up.weight", (e, f), "F16"), (b + "ffn_up.bias", (f,), "F32"),
              (b + "ffn_down.weight", (f, e), "F16"), (b + "ffn_down.bias", (e,), "F32")]
    return t


def _glm4v_tensors(s):
    """(name, ne, type) of every tensor of a glm4v ``s``'s mmproj GGUF (conversion/qwen3vl.py Glm4VVisionModel: the
    Conv3d's two slices and bias, the fused QKV, the merger conv and its MLP; optional tensors by ``s.tensors``)."""
    e, f, m, text = s.n_embd, s.n_ff, s.n_merge, s.n_embd_text
    kernel = {"f16": "F16", "f32": "F32", "bf16": "BF16"}
    t = [("v.patch_embd.weight", (s.patch_size, s.patch_size, 3, e), kernel[s.patch_type]),
         ("v.patch_embd.weight.1", (s.patch_size, s.patch_size, 3, e), kernel[s.patch_type]),
         ("v.patch_embd.bias", (e,), "F32"), ("mm.patch_merger.weight", (m, m, e, s.n_mm0), kernel[s.merger_type]),
         ("mm.patch_merger.bias", (s.n_mm0,), "F32"), ("mm.model.fc.weight", (s.n_mm0, s.n_mm), "F16"),
         ("mm.post_norm.weight", (s.n_mm,), "F32"), ("mm.up.weight", (s.n_mm, s.n_mm2), "F16"),
         ("mm.gate.weight", (s.n_mm, s.n_mm2), "F16"), ("mm.down.weight", (s.n_mm2, text), "F16")]
    sizes = {"norm_embd.bias": e, "mm.post_norm.bias": s.n_mm, "mm.up.bias": s.n_mm2, "mm.gate.bias": s.n_mm2,
             "mm.down.bias": text, "post_ln.bias": e}
    t += [(("v." if r.startswith(("norm", "post")) else "") + r, (n,), "F32") for r, n in sizes.items() if s.has(r)]
    t += [(f"v.{r}.weight", (e,), "F32") for r in ("norm_embd", "post_ln") if s.has(r)]
    t += [("v.position_embd.weight", (e, s.n_pos_embd), "F32")] if s.n_pos_embd else []
    for il in range(s.n_layer):
        b = f"v.blk.{il}."
        t += [(b + "ln1.weight", (e,), "F32"), (b + "ln2.weight", (e,), "F32"), (b + "attn_qkv.weight", (e, 3 * e), "F16"),
              (b + "attn_out.weight", (e, e), "F16"), (b + "ffn_up.weight", (e, f), "F16"),
              (b + "ffn_gate.weight", (e, f), "F16"), (b + "ffn_down.weight", (f, e), "F16")]
        widths = {"ln1.bias": e, "ln2.bias": e, "attn_qkv.bias": 3 * e, "attn_out.bias": e, "ffn_up.bias": f,
                  "ffn_gate.bias": f, "ffn_down.bias": e}
        t += [(b + r, (n,), "F32") for r, n in widths.items() if s.has(r)]
    return t


def _kimik25_tensors(s):
    """(name, ne, type) of every tensor of a kimik25 ``s``'s mmproj GGUF (conversion/kimivl.py KimiK25Model: the
    fused QKV, the square [e, w, h] position table, the merger's LayerNorm and MLP; optional ones by s.tensors)."""
    e, f, m, text = s.n_embd, s.n_ff, s.n_embd * s.n_merge ** 2, s.n_embd_text
    t = [("v.patch_embd.weight", (s.patch_size, s.patch_size, 3, e), {"f16": "F16", "f32": "F32",
                                                                       "bf16": "BF16"}[s.patch_type]),
         ("v.position_embd.weight", (e, s.n_pos_embd, s.n_pos_embd), "F32"), ("mm.input_norm.weight", (e,), "F32"),
         ("mm.input_norm.bias", (e,), "F32"), ("mm.1.weight", (m, s.n_mm), "F16"), ("mm.1.bias", (s.n_mm,), "F32"),
         ("mm.2.weight", (s.n_mm, text), "F16"), ("mm.2.bias", (text,), "F32")]
    t += [("v.patch_embd.bias", (e,), "F32")] if s.has("patch_bias") else []
    t += [(f"v.post_ln.{w}", (e,), "F32") for w in ("weight", "bias")] if s.has("post_ln") else []
    for il in range(s.n_layer):
        b = f"v.blk.{il}."
        t += [(b + f"{n}.{w}", (e,), "F32") for n in ("ln1", "ln2") for w in ("weight", "bias")]
        t += [(b + "attn_qkv.weight", (e, 3 * e), "F16"), (b + "attn_qkv.bias", (3 * e,), "F32"),
              (b + "attn_out.weight", (e, e), "F16"), (b + "attn_out.bias", (e,), "F32"),
              (b + "ffn_up.weight", (e, f), "F16"), (b + "ffn_up.bias", (f,), "F32"),
              (b + "ffn_down.weight", (f, e), "F16"), (b + "ffn_down.bias", (e,), "F32")]
    return t


def _siglip_projector(s):
    """idefics3's mm.model.fc, or lfm2's input LayerNorm and mm.1 / mm.2, over the pixel-shuffled rows."""
    m, text = s.n_embd * s.n_merge ** 2, s.n_embd_text
    if s.projector == "idefics3":
        return [("mm.model.fc.weight", (m, text), "F16")]
    t = [("mm.1.weight", (m, s.n_mm), "F16"), ("mm.1.bias", (s.n_mm,), "F32"), ("mm.2.weight", (s.n_mm, text), "F16"),
         ("mm.2.bias", (text,), "F32")]
    t += [("mm.input_norm.weight", (m,), "F32")] if s.has("input_norm") else []
    return t + ([("mm.input_norm.bias", (m,), "F32")] if s.has("input_norm.bias") else [])


def _clip_tensors(s):
    """(name, ne, type) of every tensor of ``s``'s mmproj GGUF."""
    e, f, m, text = s.n_embd, s.n_ff, s.n_mm, s.n_embd_text
    kernel = {"f16": "F16", "f32": "F32", "bf16": "BF16"}[s.patch_type]
    t = [("v.patch_embd.weight", (s.patch_size, s.patch_size, 3, e), kernel)]
    if s.projector.startswith("qwen"):
        t.append(("v.patch_embd.weight.1", (s.patch_size, s.patch_size, 3, e), kernel))
    if s.has("patch_bias"):
        t.append(("v.patch_embd.bias", (e,), "F32"))
    if s.n_pos_embd:
        t.append(("v.position_embd.weight", (e, s.n_pos_embd), "F32"))
    for role in ("pre_ln", "post_ln"):
        if s.has(role):
            t += [(f"v.{role}.weight", (e,), "F32")] + ([(f"v.{role}.bias", (e,), "F32")] if s.has(role + ".bias")
                                                        else [])
    for il in range(s.n_layer):
        b = f"v.blk.{il}."
        t += [(b + "ln1.weight", (e,), "F32"), (b + "ln2.weight", (e,), "F32"), (b + "attn_out.weight", (e, e), "F16"),
              (b + "ffn_up.weight", (e, f), "F16"), (b + "ffn_down.weight", (f, e), "F16")]
        if s.projector == "qwen3vl":
            t += [(b + "attn_qkv.weight", (e, 3 * e), "F16"), (b + "attn_qkv.bias", (3 * e,), "F32")]
        else:
            t += [(b + f"attn_{x}.weight", (e, e), "F16") for x in "qkv"]
        if s.has("ffn_gate"):
            t.append((b + "ffn_gate.weight", (e, f), "F16"))
        for role in ("ln1.bias", "ln2.bias", "attn_q.bias", "attn_k.bias", "attn_v.bias", "attn_out.bias",
                     "ffn_up.bias", "ffn_gate.bias", "ffn_down.bias"):
            if s.has(role):
                t.append((b + role, (f if role.startswith(("ffn_up", "ffn_gate")) else e,), "F32"))
        if il in s.deepstack:
            d = f"v.deepstack.{il}."
            t += [(d + "norm.weight", (4 * e,), "F32"), (d + "norm.bias", (4 * e,), "F32"),
                  (d + "fc1.weight", (4 * e, m), "F16"), (d + "fc1.bias", (m,), "F32"),
                  (d + "fc2.weight", (m, text), "F16"), (d + "fc2.bias", (text,), "F32")]
    if s.projector in ("idefics3", "lfm2"):
        return t + _siglip_projector(s)
    first = "mm.0" if s.projector.startswith("qwen") else "mm.1"
    t += [(f"{first}.weight", (4 * e if first == "mm.0" else e, m), "F16"), ("mm.2.weight", (m, text), "F16")]
    t += [(f"{first}.bias", (m,), "F32")] if s.has(f"{first}.bias") else []
    t += [("mm.2.bias", (text,), "F32")] if s.has("mm.2.bias") else []
    if s.projector == "pixtral":
        t.append(("v.token_embd.img_break", (text,), "F32"))
        if s.has("patch_merger"):
            t += [("mm.input_norm.weight", (e,), "F32"), ("mm.patch_merger.weight", (e * s.n_merge ** 2, e), "F16")]
    return t


def _write_clip_mmproj(s, path):
    import gguf

    from kvmem.oracles.llamacpp_buffers import write_sparse
    w = gguf.GGUFWriter(path, "clip")
    w.add_bool("clip.has_vision_encoder", True)
    w.add_string("clip.vision.projector_type" if s.projector == "gemma4v" else "clip.projector_type",
                 {"qwen2vl": "qwen2vl_merger", "qwen25vl": "qwen2.5vl_merger",
                  "qwen3vl": "qwen3vl_merger"}.get(s.projector, s.projector))
    w.add_uint32("clip.vision.projection_dim", s.n_embd_text)
    w.add_uint32("clip.vision.image_size", s.image_size if s.projector in ("llama4", "internvl", "idefics3") else 560)
    w.add_uint32("clip.vision.patch_size", s.patch_size)
    w.add_uint32("clip.vision.embedding_length", s.n_embd)
    w.add_uint32("clip.vision.feed_forward_length", s.n_ff)
    w.add_uint32("clip.vision.block_count", s.n_layer)
    w.add_uint32("clip.vision.attention.head_count", s.n_head)
    w.add_float32("clip.vision.attention.layer_norm_epsilon", 1e-6)
    w.add_array("clip.vision.image_mean", [0.5, 0.5, 0.5])
    w.add_array("clip.vision.image_std", [0.5, 0.5, 0.5])
    w.add_bool("clip.use_silu" if s.has("ffn_gate") else "clip.use_gelu", True)
    if s.projector == "gemma4v":
        if s.n_merge != 3:
            w.add_uint32("clip.vision.projector.scale_factor", s.n_merge)
    elif s.projector in ("llama4", "internvl", "idefics3", "lfm2", "kimik25"):
        w.add_uint32("clip.vision.projector.scale_factor", s.n_merge)
    if s.projector == "kimik25":        # conversion/kimivl.py: the preprocessor's patch limits, in pixels
        w.add_uint32("clip.vision.image_min_pixels", 8 * s.patch_size ** 2)
        w.add_uint32("clip.vision.image_max_pixels", s.image_size ** 2)
    elif s.n_merge != (2 if s.projector.startswith("qwen") or s.projector in ("minimax_m3", "glm4v") else 1):
        w.add_uint32("clip.vision.spatial_merge_size", s.n_merge)
    if s.n_wa_pattern:
        w.add_uint32("clip.vision.n_wa_pattern", s.n_wa_pattern)
    kernel = {"f16": "F16", "f32": "F32", "bf16": "BF16"}[s.patch_type]
    write_sparse(w, {"gemma4v": lambda: _gemma4v_tensors(s, kernel), "llama4": lambda: _llama4_tensors(s),
                     "internvl": lambda: _internvl_tensors(s), "minimax_m3": lambda: _minimax_tensors(s),
                     "glm4v": lambda: _glm4v_tensors(s), "kimik25": lambda: _kimik25_tensors(s)}
                 .get(s.projector, lambda: _clip_tensors(s))())


def _write_text_model_with_vocab(n_embd, path):
    """A one-layer llama GGUF ``n_embd`` wide with a small gpt2 vocabulary: mtmd looks up idefics3's and lfm2's
    image marker tokens in the text model's vocabulary (mtmd.cpp#L656-L760 lookup_token), which write_text_model's
    tokenizer "none" cannot answer."""
    import random

    import gguf

    from kvmem.oracles.llamacpp_buffers import random_spec, spec_tensors, write_sparse
    spec = random_spec(0)
    spec.update(arch="llama", n_layer=1, n_embd=n_embd, head_dim=64, n_head=n_embd // 64, n_head_kv=n_embd // 64,
                n_vocab=256, n_ff=256, n_expert=0, n_expert_used=0, tied=False, fused_qkv=False)
    tensors = [(name, ne, "F16" if len(ne) > 1 else "F32") for name, ne, _ in spec_tensors(spec, random.Random(0))]
    w = gguf.GGUFWriter(path, "llama")
    w.add_context_length(8192)
    w.add_embedding_length(n_embd)
    w.add_block_count(1)
    w.add_feed_forward_length(256)
    w.add_head_count(n_embd // 64)
    w.add_head_count_kv(n_embd // 64)
    w.add_rope_dimension_count(64)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    special = ["<unk>", "<s>", "</s>", "<image>", "</image>", "<slice>", "</slice>", "<fake_token_around_image>",
               "<global-img>", "<|image_start|>", "<|image_end|>", "<|img_thumbnail|>"]
    w.add_token_list(special + [f"t{i}" for i in range(256 - len(special))])
    w.add_token_types([3] * len(special) + [1] * (256 - len(special)))
    w.add_token_merges(["t 0"])
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    write_sparse(w, tensors)


def _clip_case(shape, flash_attn, tmp_path):
    """kvmem's bytes for the shape read back from the written file, and the CPU line mtmd printed."""
    from kvmem.engines.llamacpp.graphs_mmproj import mmproj_shape_from_header
    from kvmem.oracles.llamacpp_buffers import in_child
    from kvmem.oracles.llamacpp_mmproj import _mmproj_lines, write_text_model
    from kvmem.sources.gguf import read_header
    mmproj, text = str(tmp_path / "mmproj.gguf"), str(tmp_path / "text.gguf")
    _write_clip_mmproj(shape, mmproj)
    read = mmproj_shape_from_header(read_header(mmproj))
    assert read == shape
    if shape.projector in ("idefics3", "lfm2", "minimax_m3", "glm4v", "kimik25"):
        _write_text_model_with_vocab(shape.n_embd_text, text)
    else:
        write_text_model(shape.n_embd_text * (1 + len(shape.deepstack)), text)
    printed = in_child(_mmproj_lines, mmproj, text, 1 if flash_attn else 0)[-1].split("=")[-1].split()[0]
    assert f"{mmproj_compute_bytes(read, flash_attn=flash_attn) / 1048576.0:.2f}" == printed


@pytest.mark.parametrize("seed", range(16))
def test_random_qwen_pixtral_mmproj_compute_buffer_equals_mtmd(seed, tmp_path):
    _clip_case(random_clip_shape(seed), seed % 8 < 4, tmp_path)


@pytest.mark.parametrize("name, flash_attn", [(name, True) for name in REAL]
                         + [("qwen2.5-vl-7b", False), ("mistral-small-3.1", False)])
def test_real_mmproj_compute_buffer_equals_mtmd(name, flash_attn, tmp_path):
    # the real towers (tests/engines/test_llamacpp_mmproj_clip.REAL) as convert_hf_to_gguf would write them
    _clip_case(real_shape(name), flash_attn, tmp_path)


@pytest.mark.parametrize("seed", range(8))
def test_random_gemma4v_mmproj_compute_buffer_equals_mtmd(seed, tmp_path):
    _clip_case(random_gemma4v_shape(seed), seed % 2 == 0, tmp_path)


@pytest.mark.parametrize("seed", range(6))
def test_random_llama4_mmproj_compute_buffer_equals_mtmd(seed, tmp_path):
    _clip_case(random_llama4_shape(seed), seed % 2 == 0, tmp_path)


@pytest.mark.parametrize("seed", range(6))
def test_random_internvl_mmproj_compute_buffer_equals_mtmd(seed, tmp_path):
    _clip_case(random_internvl_shape(seed), seed % 2 == 0, tmp_path)


@pytest.mark.parametrize("flash_attn", [True, False])
def test_internvl3_8b_mmproj_compute_buffer_equals_mtmd(flash_attn, tmp_path):
    _clip_case(INTERNVL3_8B, flash_attn, tmp_path)


@pytest.mark.parametrize("seed", range(8))
def test_random_siglip_mmproj_compute_buffer_equals_mtmd(seed, tmp_path):
    _clip_case(random_siglip_shape(seed), seed % 2 == 0, tmp_path)


@pytest.mark.parametrize("name, flash_attn", [("smolvlm2-2.2b", True), ("smolvlm2-2.2b", False),
                                              ("lfm2-vl-1.6b", True), ("lfm2-vl-1.6b", False)])
def test_siglip_real_mmproj_compute_buffer_equals_mtmd(name, flash_attn, tmp_path):
    _clip_case(SIGLIP_REAL[name], flash_attn, tmp_path)


@pytest.mark.parametrize("seed", range(6))
def test_random_minimax_m3_mmproj_compute_buffer_equals_mtmd(seed, tmp_path):
    _clip_case(random_minimax_shape(seed), seed % 2 == 0, tmp_path)


@pytest.mark.parametrize("flash_attn", [True, False])
def test_minimax_m3_mmproj_compute_buffer_equals_mtmd(flash_attn, tmp_path):
    # the minimax-m3 preset's vision_config (448 px warmup: 32 x 32 patches, 1280 wide, 32 layers, 6144 projector)
    _clip_case(mmproj_shape(kvmem.get_model("minimax-m3")), flash_attn, tmp_path)


@pytest.mark.parametrize("seed", range(6))
def test_random_glm4v_mmproj_compute_buffer_equals_mtmd(seed, tmp_path):
    _clip_case(random_glm4v_shape(seed), seed % 2 == 0, tmp_path)


@pytest.mark.parametrize("flash_attn", [True, False])
def test_glm41v_sized_mmproj_compute_buffer_equals_mtmd(flash_attn, tmp_path):
    _clip_case(GLM41V_SIZED, flash_attn, tmp_path)


@pytest.mark.parametrize("seed", range(10))
def test_random_kimik25_mmproj_compute_buffer_equals_mtmd(seed, tmp_path):
    _clip_case(random_kimik25_shape(seed), seed % 2 == 0, tmp_path)


def test_kimik25_sized_mmproj_compute_buffer_equals_mtmd(tmp_path):
    # flash attention only: without it the 16 x 16,384^2 f32 scores alone are 16 GiB
    _clip_case(KIMIK25_SIZED, True, tmp_path)


@pytest.mark.parametrize("flash_attn", [True, False])
def test_llama4_scout_mmproj_compute_buffer_equals_mtmd(flash_attn, tmp_path):
    # the llama-4-scout-17b-16e preset's vision_config (one 336 px tile, 34 layers, a 2 x 2 pixel shuffle)
    _clip_case(mmproj_shape(kvmem.get_model("llama-4-scout-17b-16e")), flash_attn, tmp_path)


@pytest.mark.parametrize("flash_attn", [True, False])
def test_gemma4_26b_mmproj_compute_buffer_equals_mtmd(flash_attn, tmp_path):
    # the gemma-4-26b-a4b preset's vision_config (SigLIP-sized, 27 layers, 768 px warmup, a 3 x 3 pool)
    _clip_case(mmproj_shape(kvmem.get_model("gemma-4-26b-a4b")), flash_attn, tmp_path)


def test_qwen35_27b_mmproj_compute_buffer_equals_mtmd(tmp_path):
    # the tower of the qwen3.5-27b preset's vision_config (a qwen3vl_merger without deepstack layers)
    _clip_case(mmproj_shape(kvmem.get_model("qwen3.5-27b")), True, tmp_path)

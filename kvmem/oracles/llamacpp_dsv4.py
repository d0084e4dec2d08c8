"""llama.cpp's own DeepSeek-V4 cache as the judge of kvmem.engines.llamacpp.dsv4.

A sparse GGUF of architecture deepseek4 (every key src/models/deepseek4.cpp load_arch_hparams reads, every
tensor its load_arch_tensors requires) carries the model's cache shapes -- key_length head_dim, one KV head,
sliding_window, compress_ratios, indexer key_length -- on a tiny trunk (n_embd 64, 2 heads, 2 experts);
llama-cpp-python 0.3.36 (llama.cpp 0c1e57098) loads it with no_alloc, builds a context, and the lines
llama_kv_cache_dsv4's constructor and its caches print are compared with kvmem's, line for line.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

from ..engines import engine_estimate
from ..engines.llamacpp.dsv4 import HCA
from ..model import Model
from ..units import pad
from .llamacpp_lib import context_params, engine_in_child, load_library, load_model
from .report import Check

__all__ = ["write_dsv4_keys", "write_dsv4_gguf", "run_case", "random_case", "directed_cases", "aborting_cases"]

_N_EMBD, _N_HEAD, _N_VOCAB, _N_FF, _Q_LORA, _O_GROUPS, _O_LORA, _HC = 64, 2, 32, 16, 16, 2, 16, 4
_LINE = re.compile(r"^(llama_kv_cache(_iswa|_dsv4)?: (size =|creating)|llama_dsv4_comp_state: \w+ ratio)")


def write_dsv4_keys(w, model: Model, d: dict, file_type) -> None:
    """The keys src/models/deepseek4.cpp load_arch_hparams reads, ``model``'s cache shapes (head, window, ratios,
    indexer key) with the trunk widths ``d`` (n_embd, n_ff, n_head, n_vocab, experts, used, q_lora, shared,
    index_heads, top_k, o_groups, o_lora, hc, hash_layers)."""
    arch, n = "deepseek4", model.num_layers
    ratios = [layer.compressor.rate if layer.compressor else 0 for layer in model.layers]
    head = model.layers[0].head_dim_k
    w.add_context_length(model.max_position_embeddings or 4096)
    w.add_embedding_length(d["n_embd"])
    w.add_block_count(n)
    w.add_feed_forward_length(d["n_ff"])
    w.add_head_count(d["n_head"])
    w.add_head_count_kv(1)
    w.add_key_length(head)
    w.add_value_length(head)
    w.add_rope_dimension_count(64)          # qk_rope_head_dim of the published files; head_dim > 64 leaves a NoPE part
    w.add_layer_norm_rms_eps(1e-6)
    w.add_vocab_size(d["n_vocab"])
    w.add_tokenizer_model("none")
    w.add_file_type(file_type)
    w.add_expert_count(d["experts"])
    w.add_expert_used_count(d["used"])
    w.add_uint32(f"{arch}.attention.q_lora_rank", d["q_lora"])
    w.add_uint32(f"{arch}.attention.sliding_window", model.layers[0].window)
    w.add_uint32(f"{arch}.expert_feed_forward_length", d["n_ff"])
    w.add_uint32(f"{arch}.expert_shared_count", d["shared"])
    w.add_float32(f"{arch}.expert_weights_scale", 1.5)
    w.add_bool(f"{arch}.expert_weights_norm", True)
    w.add_array(f"{arch}.swiglu_clamp_exp", [10.0] * n)
    w.add_array(f"{arch}.swiglu_clamp_shexp", [10.0] * n)
    w.add_uint32(f"{arch}.attention.indexer.head_count", d["index_heads"])
    w.add_uint32(f"{arch}.attention.indexer.key_length", int(model.config["index_head_dim"]))
    w.add_uint32(f"{arch}.attention.indexer.top_k", d["top_k"])
    w.add_uint32(f"{arch}.attention.output_group_count", d["o_groups"])
    w.add_uint32(f"{arch}.attention.output_lora_rank", d["o_lora"])
    w.add_array(f"{arch}.attention.compress_ratios", [int(r) for r in ratios])
    w.add_float32(f"{arch}.attention.compress_rope_freq_base", 160000.0)
    w.add_uint32(f"{arch}.hyper_connection.count", d["hc"])
    w.add_uint32(f"{arch}.hyper_connection.sinkhorn_iterations", 2)
    w.add_float32(f"{arch}.hyper_connection.epsilon", 1e-6)
    w.add_uint32(f"{arch}.hash_layer_count", d["hash_layers"])
    w.add_uint32(f"{arch}.expert_gating_func", 4)      # LLAMA_EXPERT_GATING_FUNC_TYPE_SQRT_SOFTPLUS
    w.add_uint32(f"{arch}.embedding_length_out", d["n_embd"] * d["hc"])


def write_dsv4_gguf(model: Model, path: str) -> None:
    """A deepseek4 GGUF with ``model``'s cache shapes (src/models/deepseek4.cpp)."""
    import gguf
    import numpy as np

    arch = "deepseek4"
    ratios = [layer.compressor.rate if layer.compressor else 0 for layer in model.layers]
    head = model.layers[0].head_dim_k
    index = int(model.config["index_head_dim"])
    w = gguf.GGUFWriter(path, arch)
    write_dsv4_keys(w, model, dict(n_embd=_N_EMBD, n_ff=_N_FF, n_head=_N_HEAD, n_vocab=_N_VOCAB, experts=2, used=1,
                                   q_lora=_Q_LORA, shared=1, index_heads=2, top_k=16, o_groups=_O_GROUPS,
                                   o_lora=_O_LORA, hc=_HC, hash_layers=1), gguf.LlamaFileType.MOSTLY_F16)

    tensors = []

    def t(name, *ne):
        tensors.append((name, ne))

    hc_dim, hc_mix = _HC * _N_EMBD, (2 + _HC) * _HC
    t("token_embd.weight", _N_EMBD, _N_VOCAB)
    t("output_norm.weight", _N_EMBD)
    t("output.weight", _N_EMBD, _N_VOCAB)
    t("output_hc_fn.weight", hc_dim, _HC)
    t("output_hc_base.weight", _HC)
    t("output_hc_scale.weight", 1)
    for i, ratio in enumerate(ratios):
        b = f"blk.{i}."
        t(b + "attn_norm.weight", _N_EMBD)
        t(b + "attn_sinks.weight", _N_HEAD)
        t(b + "attn_q_a.weight", _N_EMBD, _Q_LORA)
        t(b + "attn_q_a_norm.weight", _Q_LORA)
        t(b + "attn_q_b.weight", _Q_LORA, _N_HEAD * head)
        t(b + "attn_kv.weight", _N_EMBD, head)
        t(b + "attn_kv_a_norm.weight", head)
        t(b + "attn_output_a.weight", _N_HEAD * head // _O_GROUPS, _O_LORA * _O_GROUPS)
        t(b + "attn_output_b.weight", _O_GROUPS * _O_LORA, _N_EMBD)
        for part in ("attn", "ffn"):
            t(b + f"hc_{part}_fn.weight", hc_dim, hc_mix)
            t(b + f"hc_{part}_base.weight", hc_mix)
            t(b + f"hc_{part}_scale.weight", 3)
        if ratio:
            coff = 2 if ratio == 4 else 1
            t(b + "attn_compressor_kv.weight", _N_EMBD, coff * head)
            t(b + "attn_compressor_gate.weight", _N_EMBD, coff * head)
            t(b + "attn_compressor_ape.weight", coff * head, ratio)
            t(b + "attn_compressor_norm.weight", head)
        if ratio == 4:
            t(b + "indexer.proj.weight", _N_EMBD, 2)
            t(b + "indexer.attn_q_b.weight", _Q_LORA, 2 * index)
            t(b + "indexer_compressor_kv.weight", _N_EMBD, 2 * index)
            t(b + "indexer_compressor_gate.weight", _N_EMBD, 2 * index)
            t(b + "indexer_compressor_ape.weight", 2 * index, ratio)
            t(b + "indexer_compressor_norm.weight", index)
        t(b + "ffn_gate_inp.weight", _N_EMBD, 2)
        if i < 1:
            t(b + "ffn_gate_tid2eid.weight", 1, _N_VOCAB)
        else:
            t(b + "exp_probs_b.bias", 2)
        t(b + "ffn_norm.weight", _N_EMBD)
        t(b + "ffn_gate_exps.weight", _N_EMBD, _N_FF, 2)
        t(b + "ffn_down_exps.weight", _N_FF, _N_EMBD, 2)
        t(b + "ffn_up_exps.weight", _N_EMBD, _N_FF, 2)
        t(b + "ffn_gate_shexp.weight", _N_EMBD, _N_FF)
        t(b + "ffn_down_shexp.weight", _N_FF, _N_EMBD)
        t(b + "ffn_up_shexp.weight", _N_EMBD, _N_FF)
    for name, ne in tensors:
        count = 1
        for x in ne:
            count *= x
        small = len(ne) == 1 or "tid2eid" in name
        kind = np.dtype(np.int32) if "tid2eid" in name else np.dtype(np.float32 if small else np.float16)
        w.add_tensor_info(name, tuple(reversed(ne)), kind, (4 if small else 2) * count)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    fout = w.fout[0]
    fout.flush()
    start = pad(fout.tell(), w.data_alignment)
    size = sum(pad(ti.nbytes, w.data_alignment) for ti in w.tensors[0].values())
    fout.truncate(start + size)   # sparse: no_alloc reads the header only
    w.close()


def _kvmem_side(model: Model, s: dict):
    try:
        result = engine_estimate(model, engine="llama.cpp", tokens=1, n_ctx=s["n_ctx"], n_seq=s["n_seq"],
                                 type_k=s["type_k"], type_v=s["type_v"], flash_attn=s["flash_attn"],
                                 swa_full=s.get("swa_full", False), kv_unified=s.get("kv_unified", False),
                                 n_ubatch=s.get("n_ubatch", 512), n_batch=s.get("n_batch", 2048),
                                 n_rs_seq=s.get("n_rs_seq", 0))
    except ValueError as error:
        return None, str(error)
    return list(result.log_lines), None


def _engine_side(path: str, s: dict):
    lib, lines, _ = load_library()
    del lines[:]
    model = load_model(lib, lines, path)
    try:
        cparams = context_params(lib, {"n_rs_seq": 0, **s})
        ctx = lib.llama_init_from_model(model, cparams)
        text = "".join(chunk for _, chunk in lines).splitlines()
        if not ctx:
            return None, "NULL context: " + " | ".join(text[-3:])
        lib.llama_free(ctx)
        return [line.rstrip() for line in text if _LINE.match(line)], None
    finally:
        lib.llama_model_free(model)


def run_case(name: str, model: Model, setting: dict) -> list[Check]:
    """kvmem's lines for llama_kv_cache_dsv4 beside llama.cpp's own."""
    ours, our_error = _kvmem_side(model, setting)
    reply = engine_in_child(write_dsv4_gguf, model, _engine_side, setting, tail=3)
    if reply[0] != "ok":
        return [Check(name, "llama.cpp builds the context", True, reply[1])]
    theirs, their_error = reply[1], reply[2]
    checks = [Check(name, "refuses", our_error is not None, their_error is not None)]
    if our_error is None and their_error is None:
        checks.append(Check(name, "cache lines", ours, theirs))
    return checks


FLASH = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "configs" / "corpus" / \
    "deepseek-ai--DeepSeek-V4-Flash.json"


def directed_cases() -> list[tuple[str, Model, dict]]:
    """DeepSeek-V4-Flash's own config at a few contexts, sequences, cache types and options."""
    model = Model.from_hf_config(json.loads(FLASH.read_text()), name="deepseek-v4-flash")
    base = dict(type_k="f16", type_v="f16", flash_attn=True)
    settings = [dict(base, n_ctx=8192, n_seq=1), dict(base, n_ctx=32768, n_seq=4),
                dict(base, n_ctx=4096, n_seq=2, type_k="q8_0", type_v="q8_0"),
                dict(base, n_ctx=5000, n_seq=1, swa_full=True), dict(base, n_ctx=8192, n_seq=2, n_rs_seq=3),
                dict(base, n_ctx=8192, n_seq=2, kv_unified=True), dict(base, n_ctx=300, n_seq=1, n_ubatch=64)]
    return [(f"flash-{i}", model, s) for i, s in enumerate(settings)]


def random_case(seed: int) -> tuple[str, Model, dict]:
    """A seeded variation of Flash's config: layers, ratios, head and indexer widths, window, and settings."""
    rng = random.Random(f"dsv4-{seed}")
    cfg = json.loads(FLASH.read_text())
    n = rng.randint(2, 12)
    ratios = [rng.choice((0, 4, 128)) for _ in range(n)]
    ratios[rng.randrange(n)] = 4      # llama.cpp aborts without a ratio-4 layer (kvmem refuses that)
    head = rng.choice((128, 256, 512))
    index = rng.choice((64, 128, 256))
    if HCA not in ratios and index == head:
        index = 64                     # llama.cpp aborts there too (kvmem refuses)
    cfg.update(num_hidden_layers=n, compress_ratios=ratios + [0], head_dim=head, index_head_dim=index,
               sliding_window=rng.choice((16, 64, 128, 256)), num_nextn_predict_layers=0)
    cfg.pop("layer_types", None)
    model = Model.from_hf_config(cfg, name=f"dsv4-random-{seed}")
    kind = rng.choice(("f16", "q8_0", "q4_0", "f32"))
    setting = dict(type_k=kind, type_v=kind, flash_attn=True, n_ctx=rng.choice((256, 1000, 4096, 20000)),
                   n_seq=rng.choice((1, 2, 3)), swa_full=rng.random() < 0.2, n_rs_seq=rng.choice((0, 0, 1, 2)),
                   n_ubatch=rng.choice((64, 512)), n_batch=2048)
    return f"dsv4-random-{seed}", model, setting


def aborting_cases() -> list[tuple[str, Model, dict]]:
    """Flash's config cut to three layers where llama.cpp aborts: no CSA layer (ratios 128, 128, 0), and no HCA
    layer with an indexer key as wide as the head (ratios 0, 4, 4, index_head_dim = head_dim = 512)."""
    setting = dict(type_k="f16", type_v="f16", flash_attn=True, n_ctx=1024, n_seq=1)
    out = []
    for name, change in (("no-csa", dict(compress_ratios=[128, 128, 0, 0])),
                         ("index-as-wide", dict(compress_ratios=[0, 4, 4, 0], index_head_dim=512))):
        cfg = json.loads(FLASH.read_text())
        cfg.update(num_hidden_layers=3, num_nextn_predict_layers=0, **change)
        out.append((f"dsv4-{name}", Model.from_hf_config(cfg, name=f"dsv4-{name}"), setting))
    return out


def write_dsv4_layout(model: Model, fmt: str, path: str, *, source: bool = False) -> list:
    """The sparse deepseek4 GGUF of ``model`` at full shape from kvmem's tensor list in ``fmt`` (``source``: the
    types convert_hf_to_gguf --outtype f16 writes, MXFP4 experts and I32 tid2eid kept, for llama-quantize)."""
    import gguf

    from ..engines.llamacpp.arch_fields import field
    from ..engines.llamacpp.quant_mix import FTYPES
    from ..engines.llamacpp.tensors import GPT_OSS_EXPERTS, source_type, synthesised_tensors
    from .llamacpp_buffers import write_sparse

    tensors = synthesised_tensors(model, fmt)
    moe = model.facts.moe
    if moe is None:
        raise ValueError(f"{model.name}: deepseek4's layers are MoE, and the config gives no experts")

    def converted(t):
        if any(re.search(pattern, t.name) for pattern, _ in GPT_OSS_EXPERTS):
            return "MXFP4"
        return source_type(t.name, t.shape, "f16")

    w = gguf.GGUFWriter(path, "deepseek4")
    d = dict(n_embd=model.hidden_size, n_ff=field(model, "moe_intermediate_size"), n_head=model.num_attention_heads,
             n_vocab=model.facts.vocab_size, experts=moe.experts, used=moe.top_k, q_lora=field(model, "q_lora_rank"),
             shared=field(model, "n_shared_experts"), index_heads=field(model, "index_n_heads"),
             top_k=field(model, "index_topk"), o_groups=field(model, "o_groups"), o_lora=field(model, "o_lora_rank"),
             hc=field(model, "hc_mult"), hash_layers=field(model, "num_hash_layers"))
    write_dsv4_keys(w, model, d, gguf.LlamaFileType.MOSTLY_F16 if source else FTYPES[fmt][0])
    write_sparse(w, [(t.name, t.shape, converted(t) if source else t.dtype) for t in tensors])
    return list(tensors)

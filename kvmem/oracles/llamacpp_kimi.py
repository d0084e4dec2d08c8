"""kimi-linear GGUFs as convert_hf_to_gguf writes them, and random kimi-linear cases, for llama.cpp's own buffers as the
judge of kvmem's kimi layout and graph (kvmem.engines.llamacpp.tensors_kimi, graphs_kimi):
tests/oracles/test_llamacpp_kimi_oracle.py loads them in llama.cpp, tests/engines/test_llamacpp_graphs_kimi.py pins
what llama.cpp printed for them.

The file's metadata is what conversion/kimi_linear.py KimiLinearModel.set_gguf_parameters (L78-L142) and the
TextModel keys before it (conversion/base.py#L1425-L1543) write and src/models/kimi-linear.cpp load_arch_hparams reads:
head_count_kv per layer (1 on MLA layers, 0 on KDA ones), ssm.conv_kernel, kda.head_dim, the MLA widths (key_length
kv_lora + rope over base's head_dim; value_length base's head_dim), the MoE keys, the gating function from
moe_router_activation_func, expert_group_used_count from topk_group. Each random case draws a kimi_linear config (2-6
layers, the MLA ones anywhere, 1-2 leading dense layers, 4-16 experts with one or two shared, KDA heads 2-4 of 32-128)
and a context.
"""

from __future__ import annotations

import random
import re
from typing import Any

from ..engines.llamacpp.arch_fields import field
from ..engines.llamacpp.quant_mix import FTYPES
from ..engines.llamacpp.tensors import source_type, synthesised_tensors
from ..engines.llamacpp.tensors_kimi import kimi_arch
from ..model import Model
from .llamacpp_buffers import printed_buffers, write_sparse
from .llamacpp_graphs_more import random_run

__all__ = ["write_kimi", "random_kimi_case", "random_k3_case", "printed_kimi", "small_k3"]

_RS_LINE = re.compile(r"^\S+: +(\S+) RS buffer size = +([0-9.]+) MiB")


def printed_kimi(path: str, ctx: dict) -> dict:
    """llamacpp_buffers.printed_buffers and the recurrent memory's "RS buffer size" (MiB); where no compute line was
    printed, the log's end (the context's error)."""
    from .llamacpp_buffers import llama_lib
    out = printed_buffers(path, ctx)
    lines = "".join(llama_lib()[1]).splitlines()
    out["RS"] = sum(float(m.group(2)) for m in map(_RS_LINE.match, (x.strip() for x in lines)) if m)
    if "CPU compute 4dp" not in out:
        out["log"] = "\n".join(lines[-15:])
    return out


def write_kimi(model: Model, fmt: str, path: str, *, source: bool = False) -> list:
    """The sparse kimi-linear (or kimi-k3: a KimiK3 config) GGUF of ``model`` in ``fmt`` (``source``: the converter's
    F16/F32 types, for llama-quantize's dry run)."""
    import gguf
    tensors = synthesised_tensors(model, fmt)
    rows = [(t.name, t.shape, source_type(t.name, t.shape, "f16") if source else t.dtype) for t in tensors]
    arch = kimi_arch(model)
    k3 = arch == "kimi-k3"
    w = gguf.GGUFWriter(path, arch)
    lin = field(model, "linear_attn_config")
    kv_lora, rope = field(model, "kv_lora_rank"), field(model, "qk_rope_head_dim")
    w.add_context_length(model.max_position_embeddings or 4096)
    w.add_embedding_length(model.hidden_size)
    w.add_block_count(model.num_layers)
    w.add_feed_forward_length(field(model, "intermediate_size"))
    w.add_head_count(model.num_attention_heads)
    w.add_head_count_kv([int(il + 1 in lin["full_attn_layers"]) for il in range(model.num_layers)])
    w.add_layer_norm_rms_eps(float(field(model, "rms_norm_eps", 1e-5)))
    w.add_rope_freq_base(float(field(model, "rope_theta", 10000.0)))
    w.add_expert_count(field(model, "num_experts"))
    w.add_expert_used_count(field(model, "num_experts_per_token"))
    if field(model, "topk_group") is not None:
        w.add_expert_group_used_count(field(model, "topk_group"))
    w.add_uint32(f"{arch}.expert_gating_func", {"softmax": 1, "sigmoid": 2}[field(model, "moe_router_activation_func")])
    w.add_vocab_size(model.facts.vocab_size)
    w.add_ssm_conv_kernel(lin["short_conv_kernel_size"])
    w.add_kda_head_dim(lin["head_dim"])
    w.add_kv_lora_rank(kv_lora)
    w.add_rope_dimension_count(rope)
    w.add_key_length(kv_lora + rope)
    if k3:      # conversion/kimi_k3.py#L165-L227: K3's own keys (written raw: the installed gguf-py predates them)
        w.add_value_length(kv_lora)
        if lin.get("gate_lower_bound") is not None:
            w.add_float32(f"{arch}.kda.gate_lower_bound", float(lin["gate_lower_bound"]))
        if field(model, "q_lora_rank"):
            w.add_q_lora_rank(field(model, "q_lora_rank"))
        w.add_bool(f"{arch}.expert_weights_norm", bool(field(model, "moe_renormalize")))
        if field(model, "routed_expert_hidden_size"):
            w.add_uint32(f"{arch}.expert_latent_length", field(model, "routed_expert_hidden_size"))
        w.add_float32(f"{arch}.activation.situ_beta", float(field(model, "activation_situ_beta")))
        w.add_float32(f"{arch}.activation.situ_linear_beta", float(field(model, "activation_situ_linear_beta")))
        w.add_uint32(f"{arch}.attn_res.block_size", field(model, "attn_res_block_size"))
    elif field(model, "head_dim") is not None:
        w.add_value_length(field(model, "head_dim"))
    w.add_key_length_mla(field(model, "qk_nope_head_dim") + rope)
    w.add_value_length_mla(field(model, "v_head_dim"))
    w.add_expert_feed_forward_length(field(model, "moe_intermediate_size"))
    w.add_expert_shared_count(field(model, "num_shared_experts"))
    w.add_leading_dense_block_count(field(model, "first_k_dense_replace"))
    w.add_expert_weights_scale(float(field(model, "routed_scaling_factor")))
    w.add_tokenizer_model("none")
    w.add_file_type(FTYPES[fmt][0])
    write_sparse(w, rows)
    return list(tensors)


def _kimi(rng: random.Random) -> dict:
    n = rng.randint(2, 6)
    full = sorted(rng.sample(range(1, n + 1), rng.randint(1, max(1, n // 2))))
    n_head = rng.choice((2, 4))
    rope = rng.choice((32, 64))
    return dict(architectures=["KimiLinearForCausalLM"], model_type="kimi_linear", num_hidden_layers=n,
                hidden_size=256 * rng.randint(1, 3), num_attention_heads=n_head, num_key_value_heads=n_head,
                head_dim=rng.choice((64, 72)), intermediate_size=256 * rng.randint(1, 3),
                moe_intermediate_size=64 * rng.randint(1, 4),
                num_experts=rng.choice((4, 8, 16)), num_experts_per_token=rng.choice((1, 2, 4)),
                num_shared_experts=rng.choice((1, 2)), first_k_dense_replace=rng.choice((0, 1, 2)),
                kv_lora_rank=rng.choice((128, 256, 512)), qk_rope_head_dim=rope, qk_nope_head_dim=rng.choice((64, 128)),
                v_head_dim=rng.choice((64, 128)), q_lora_rank=None, mla_use_nope=True,
                linear_attn_config=dict(full_attn_layers=full, kda_layers=[i for i in range(1, n + 1) if i not in full],
                                        head_dim=rng.choice((32, 64, 128)), num_heads=n_head,
                                        short_conv_kernel_size=rng.choice((3, 4))),
                moe_router_activation_func="sigmoid", moe_renormalize=True, num_expert_group=1, topk_group=1,
                routed_scaling_factor=rng.choice((1.0, 2.446)), rms_norm_eps=1e-5, rope_theta=10000.0,
                vocab_size=rng.choice((256, 1000, 2048)), model_max_length=65536, tie_word_embeddings=False)


def random_kimi_case(seed: int) -> tuple[Model, str, dict]:
    """(model, file type, context) of kimi-linear case ``seed``."""
    rng = random.Random(f"graphs/kimi/{seed}")
    cfg: dict[str, Any] = _kimi(rng)
    model = Model.from_hf_config(cfg, name=f"random-kimi-{seed}")
    fmt, ctx = random_run(rng, contexts=(256, 1000, 4096, 9000), seqs=(1, 1, 2, 3))
    # MLA layers: llama_init_from_model refuses K and V caches of different types (settings.resolve_settings)
    return model, fmt, dict(ctx, type_v=ctx["type_k"])


def small_k3() -> Model:
    """Kimi-K3's config at a small size (8 layers, MLA at 4 and 8, 8 experts over a 256-wide latent, MXFP4 experts as
    its checkpoint has them), for llama.cpp's loader."""
    from ..catalog import as_model
    cfg = dict(as_model("kimi-k3").config)
    text = dict(cfg["text_config"], num_hidden_layers=8, hidden_size=512, num_attention_heads=4,
                num_key_value_heads=4, intermediate_size=512, moe_intermediate_size=64, num_experts=8,
                num_experts_per_token=2, kv_lora_rank=128, q_lora_rank=128, routed_expert_hidden_size=256,
                vocab_size=1000)
    text["linear_attn_config"] = dict(text["linear_attn_config"], full_attn_layers=[4, 8],
                                      kda_layers=[1, 2, 3, 5, 6, 7], head_dim=32, num_heads=4)
    cfg["text_config"] = text
    return Model.from_hf_config(cfg, name="kimi-k3-small")


def random_k3_case(seed: int) -> tuple[Model, str, dict]:
    """(model, file type, context) of kimi-k3 case ``seed``: Kimi-K3's config at 2-8 layers, MLA anywhere, banking
    every 1-4 layers or never, with or without Q compression, latent, routed norm, output gate, gate bound, shared
    experts and MXFP4 experts; a context with 0-3 rollback snapshots."""
    from ..catalog import as_model
    rng = random.Random(f"graphs/kimi-k3/{seed}")
    cfg = dict(as_model("kimi-k3").config)
    n = rng.randint(2, 8)
    full = sorted(rng.sample(range(1, n + 1), rng.randint(1, max(1, n // 2))))
    n_head = rng.choice((2, 4))
    text = dict(cfg["text_config"], num_hidden_layers=n, hidden_size=256 * rng.randint(1, 2),
                num_attention_heads=n_head, num_key_value_heads=n_head, intermediate_size=256 * rng.randint(1, 2),
                moe_intermediate_size=64 * rng.randint(1, 2), num_experts=rng.choice((4, 8)),
                num_experts_per_token=rng.choice((1, 2, 4)), num_shared_experts=rng.choice((0, 1, 2)),
                first_k_dense_replace=rng.choice((0, 1, 2)), kv_lora_rank=rng.choice((128, 256)),
                q_lora_rank=rng.choice((None, 128)), routed_expert_hidden_size=rng.choice((None, 128, 256)),
                latent_moe_use_norm=rng.random() < 0.5, mla_use_output_gate=rng.random() < 0.5,
                attn_res_block_size=rng.choice((0, 1, 2, 4)), routed_scaling_factor=rng.choice((1.0, 2.5)),
                moe_renormalize=rng.random() < 0.5, vocab_size=rng.choice((256, 1000)))
    lin = dict(text["linear_attn_config"], full_attn_layers=full, head_dim=rng.choice((32, 64)), num_heads=n_head,
               kda_layers=[i for i in range(1, n + 1) if i not in full], short_conv_kernel_size=rng.choice((3, 4)))
    if rng.random() < 0.3:
        lin.pop("gate_lower_bound", None)
    text["linear_attn_config"] = lin
    if rng.random() < 0.3:
        text.pop("quantization_config", None)
    cfg["text_config"] = text
    model = Model.from_hf_config(cfg, name=f"random-k3-{seed}")
    fmt, ctx = random_run(rng, contexts=(256, 1000, 4096), seqs=(1, 1, 2, 3))
    ctx = dict(ctx, type_v=ctx["type_k"], n_rs_seq=rng.choice((0, 0, 1, 3)))
    if ctx["n_rs_seq"] and ctx["n_ubatch"] <= ctx["n_rs_seq"] + 1:
        ctx["n_ubatch"] = 32
    return model, fmt, ctx

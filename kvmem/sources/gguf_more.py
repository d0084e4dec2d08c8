"""GGUF metadata -> config.json fields for the llama.cpp 0c1e57098 architectures mapped beyond gguf_arches.py's,
each key read as src/models/<arch>.cpp load_arch_hparams reads it, written as conversion/*.py writes it (the
tests write headers with gguf_converted.py; llama.cpp builds them in tests/oracles/test_gguf_more_oracle.py):

    deepseek4   deepseek4.cpp L19-L75 (_deepseek4)            gemma3n     gemma3n.cpp L3-L19: 20 layers cached
    llama4      llama4.cpp L3-L42: chunked 8,192              mistral4    deepseek2's MLA keys (gguf_config)
    minicpm3    its lora ranks, K nope + rope per head        phimoe      every layer whole (no window read)
    mamba, mamba2 (falcon_mamba)   ssm.*                     falcon-h1   attention + Mamba-2 in every layer
    lfm2, lfm2moe, granitehybrid, kimi-linear   recurrent where head_count_kv is 0 (these: gguf_recurrent.py)
    nemotron_h_moe                 nemotron_h's keys, its feed-forward layers MoE
    the common keys (gguf_config's head_count / head_count_kv / key_length / sliding_window path) and a few
    of their own: olmo, olmo2 (Olmo 3 when it slides), olmoe, granite, granitemoe(shared), granite_swa,
    starcoder2, stablelm, seed_oss, exaone4, exaone-moe, ernie4_5, ernie4_5-moe, hunyuan-dense, hunyuan-moe,
    hy_v3, glm4, chatglm, command-r, cohere2moe, apertus, arcee, phi2, nemotron, smollm3, mellum, dots1, afmoe,
    bitnet, qwen2vl, qwen3vl, qwen3vlmoe, mistral3, jais2, chameleon, muse-glimmer, gpt2, gptneox, bloom,
    starcoder (gpt_bigcode), dbrx, mpt, exaone (EXAONE 3.x), hunyuan_vl, paddleocr (their text models), laguna,
    minimax-01 (MiniMax-Text-01 / M1: lightning layers by recurrent_layers or full_attention_interval 8).
Refused where llama.cpp would not run the file or would size it otherwise than its config: a window
without sliding layers (llama.cpp aborts), exaone4 with a window below 64 layers, gemma3n whose
shared_kv_layers or pattern says otherwise, deepseek4 without sqrtsoftplus routing, an lfm2 window, a phimoe
window shorter than its context.

The architectures whose attention differs per layer (deci: Nemotron-NAS, step35, mimo2, minimax-m3, hy_v4),
deepseek2-ocr and hrm_text are read in gguf_layered.py. Left unmapped, refused naming the architecture with the
reason in UNMAPPED: gptj (no converter at the pin writes it), and the architectures of no family kvmem reads
(rwkv*, plamo*, ...). bert, gemma-embedding, clip and the other encoders, drafts and codecs cache nothing kvmem
sizes from a GGUF.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from . import SourceError
from .gguf_layered import LAYERED_MODEL_TYPES, layered_fields
from .gguf_recurrent import falcon_h1_fields, kimi_linear_fields, mamba_fields, recurrent_by_kv_fields

__all__ = ["MORE_MODEL_TYPES", "MORE_SWA_PATTERN", "UNMAPPED", "ZERO_KV_ARCHES", "more_fields", "GEMMA3N_KV_LAYERS"]

# llama.cpp arch (src/llama-arch.cpp LLM_ARCH_NAMES) -> the Hugging Face model_type kvmem.configs reads;
# olmo2 and granitemoe are refined by more_fields (olmo3 where the file slides, granitemoeshared with a
# shared expert)
MORE_MODEL_TYPES = {"deepseek4": "deepseek_v4", "gemma3n": "gemma3n_text", "olmo2": "olmo2", "olmo": "olmo",
                    "olmoe": "olmoe", "granite": "granite", "granitemoe": "granitemoe", "starcoder2": "starcoder2",
                    "stablelm": "stablelm", "seed_oss": "seed_oss", "exaone4": "exaone4", "ernie4_5": "ernie4_5",
                    "ernie4_5-moe": "ernie4_5_moe", "hunyuan-dense": "hunyuan_v1_dense",
                    "hunyuan-moe": "hunyuan_v1_moe", "glm4": "glm4", "command-r": "cohere", "apertus": "apertus",
                    "arcee": "arcee", "phi2": "phi", "nemotron": "nemotron", "smollm3": "smollm3",
                    "mellum": "mellum", "dots1": "dots1", "afmoe": "afmoe", "bitnet": "bitnet",
                    "llama4": "llama4_text", "qwen2vl": "qwen2_vl_text", "qwen3vl": "qwen3_vl_text",
                    "qwen3vlmoe": "qwen3_vl_moe_text", "mistral3": "ministral3", "mamba": "mamba", "mamba2": "mamba2",
                    "lfm2": "lfm2", "lfm2moe": "lfm2_moe", "granitehybrid": "granitemoehybrid", "gpt2": "gpt2",
                    "gptneox": "gpt_neox", "bloom": "bloom", "starcoder": "gpt_bigcode", "dbrx": "dbrx",
                    "chatglm": "glm", "falcon-h1": "falcon_h1", "mistral4": "mistral4", "jais2": "jais2",
                    "chameleon": "chameleon", "muse-glimmer": "muse_glimmer_text", "exaone-moe": "exaone_moe",
                    "cohere2moe": "cohere2_moe", "nemotron_h_moe": "nemotron_h", "granite_swa": "granite_swa",
                    "hy_v3": "hy_v3", "mpt": "mpt", "phimoe": "phimoe", "minicpm3": "minicpm3",
                    "kimi-linear": "kimi_linear", "exaone": "exaone", "hunyuan_vl": "hunyuan_vl_text",
                    "paddleocr": "paddleocr_vl_text", "laguna": "laguna", "minimax-01": "minimax_m1",
                    **LAYERED_MODEL_TYPES}
# head_count_kv per layer, 0 where the layer is recurrent (lfm2.cpp#L11-L13, lfm2moe.cpp#L12-L14,
# granite-hybrid.cpp#L22-L25, kimi-linear.cpp#L15-L19): gguf_config reads the attention layers' count from the others
ZERO_KV_ARCHES = ("lfm2", "lfm2moe", "granitehybrid", "kimi-linear")
# load_swa_pattern(ml, n) when the file has a window but no pattern: every n-th layer full
# (llama.cpp@0c1e57098 src/models/gemma3n.cpp#L5, olmo2.cpp#L9, exaone4.cpp#L7, mellum.cpp#L11, afmoe.cpp#L17,
# muse-glimmer.cpp load_arch_hparams, exaone-moe.cpp#L6)
MORE_SWA_PATTERN = {"gemma3n": 5, "olmo2": 4, "exaone4": 4, "mellum": 4, "afmoe": 4, "muse-glimmer": 4,
                    "exaone-moe": 4}
# llama.cpp@0c1e57098 src/models/gemma3n.cpp#L7: hparams.n_layer_kv_from_start = 20, whatever the file says
GEMMA3N_KV_LAYERS = 20
# exaone4.cpp#L4-L7: only a 64-layer model slides, with a 4,096-token window unless the file names one
_EXAONE4_SWA_LAYERS, _EXAONE4_WINDOW = 64, 4096
_LLAMA4_CHUNK = 8192       # llama4.cpp#L14: n_swa = 8192 for every chunked file
_SQRT_SOFTPLUS = 4      # src/llama-hparams.h LLAMA_EXPERT_GATING_FUNC_TYPE_SQRT_SOFTPLUS

_NO_FAMILY = "kvmem reads no Hugging Face family of it (kvmem.configs.families)"
# llama.cpp architectures left unmapped, each with why (the message of gguf_config's refusal)
UNMAPPED = {
    "gptj": "no converter at llama.cpp 0c1e57098 writes it (conversion/ has no MODEL_ARCH.GPTJ)",
    **{arch: _NO_FAMILY for arch in ("rwkv6", "rwkv6qwen2", "rwkv7", "arwkv7", "plamo", "plamo2", "plamo3",
                                      "xverse", "orion", "baichuan", "qwen", "internlm2", "minicpm", "openelm",
                                      "arctic", "deepseek", "codeshell", "refact", "grok", "t5", "t5encoder")},
}


def _positive_int(value, name: str) -> int:
    if isinstance(value, list) or value < 1:
        raise SourceError(f"GGUF {name} is {str(value)[:100]}; it must be at least 1")
    return value


def _number(meta: dict, full: str, *, default=SourceError):
    """A float key (or one value of a per-layer float array, which must agree)."""
    value = meta.get(full, default)
    if value is SourceError:
        raise SourceError(f"GGUF metadata {full!r} is missing")
    values = value if isinstance(value, list) else [value]
    if not values or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        raise SourceError(f"GGUF metadata {full!r} is {str(value)[:100]}; expected a number")
    if len(set(values)) != 1:
        raise SourceError(f"GGUF {full} differs per layer ({sorted(set(values))[:8]}); kvmem maps one value")
    return values[0]


def more_fields(arch: str, cfg: dict, key, trunk: int, meta: dict) -> None:
    """Add the fields of ``arch`` (one of MORE_MODEL_TYPES) to ``cfg``."""
    if arch == "deepseek4":
        _deepseek4(cfg, key, meta)
    elif arch == "gemma3n":
        _gemma3n(cfg, key, trunk)
    elif arch == "llama4":
        _llama4(cfg, key, trunk)
    elif arch in ("mamba", "mamba2"):
        mamba_fields(cfg, key, arch)
    elif arch == "cohere2moe" and cfg.get("sliding_window") and "layer_types" not in cfg:
        # cohere2moe.cpp#L27-L28: load_swa_pattern(ml, 4, dense_first): full where i % 4 == 0
        # (src/llama-hparams.cpp#L8-L12)
        cfg["layer_types"] = ["full_attention" if i % 4 == 0 else "sliding_attention" for i in range(trunk)]
    elif arch == "nemotron_h_moe":
        # nemotron-h.cpp#L12-L16 (llama_model_nemotron_h_moe : llama_model_nemotron_h, models.h L1545): the layers
        # with a feed-forward width are the MoE ones ('E'); the pattern is the trunk's
        pattern = cfg["hybrid_override_pattern"][:trunk]
        cfg.update(hybrid_override_pattern=pattern.replace("-", "E"), n_shared_experts=key("expert_shared_count", 0),
                   moe_shared_expert_intermediate_size=key("expert_shared_feed_forward_length", 0))
    elif arch == "minimax-01":
        # minimax-01.cpp#L11-L18: attention.recurrent_layers, else lightning unless (i + 1) % full_attention_interval
        # (8 by default); conversion/minimax.py writes neither: configuration_minimax.py's attn_type_list (1 full)
        listed = key("attention.recurrent_layers", None)
        interval = _positive_int(key("full_attention_interval", 8), "minimax-01.full_attention_interval")
        recurrent = ([bool(x) for x in listed[:trunk]] if isinstance(listed, list)
                     else [(i + 1) % interval != 0 for i in range(trunk)])
        cfg.update(attn_type_list=[0 if r else 1 for r in recurrent], rotary_dim=key("rope.dimension_count"))
    elif arch in _BY_TRUNK:
        _BY_TRUNK[arch](cfg, key, trunk)
    elif arch == "falcon-h1":
        falcon_h1_fields(cfg, key)
    elif arch in ZERO_KV_ARCHES:
        recurrent_by_kv_fields(cfg, key, arch, trunk)
    elif arch == "exaone4":
        _exaone4(cfg, trunk)
    elif arch == "olmo2" and cfg.get("sliding_window"):
        cfg["model_type"] = "olmo3"          # conversion/olmo.py Olmo2Model L52-L68: Olmo 3 writes the window
    if (arch in MORE_SWA_PATTERN and cfg.get("sliding_window") and (arch != "exaone4" or trunk == _EXAONE4_SWA_LAYERS)
            and "sliding_attention" not in cfg.get("layer_types", ())):
        # a window makes the cache iSWA (swa_type STANDARD); with no sliding layer llama.cpp aborts creating it
        raise SourceError(f"GGUF {arch} names a sliding window ({cfg['sliding_window']}) but no sliding layer: "
                          "llama.cpp 0c1e57098 aborts creating its cache (GGML_ASSERT(hparams.is_swa_any()), "
                          "src/llama-model.cpp#L2806-L2807)")
    _named_fields(arch, cfg, key)


def _named_fields(arch: str, cfg: dict, key) -> None:
    """Fields a family names its own way (the cache's heads) or that its weights read."""
    if arch == "starcoder":     # conversion/starcoder.py L20: head_count_kv 1, configuration_gpt_bigcode multi_query
        cfg["multi_query"] = cfg["num_key_value_heads"] == 1
    elif arch == "dbrx":        # conversion/dbrx.py: head_count_kv from attn_config.kv_n_heads
        cfg["attn_config"] = {"kv_n_heads": cfg["num_key_value_heads"]}
    elif arch == "cohere2moe":
        cfg["first_k_dense_replace"] = key("leading_dense_block_count")
    elif arch == "phimoe":
        _phimoe(cfg)
    elif arch == "minicpm3":
        # minicpm3.cpp L3-L7 reads q/kv_lora_rank; conversion/minicpm.py MiniCPM3Model L69-L85 writes key_length
        # nope + rope and no value_length (llama.cpp: n_embd / n_head)
        rope, head = key("rope.dimension_count"), cfg.pop("head_dim")
        cfg.update(kv_lora_rank=key("attention.kv_lora_rank"), q_lora_rank=key("attention.q_lora_rank"),
                   qk_rope_head_dim=rope, qk_nope_head_dim=head - rope,
                   v_head_dim=cfg.pop("v_head_dim", None) or cfg["hidden_size"] // cfg["num_attention_heads"])
    elif arch == "granite_swa" and cfg.get("num_experts"):      # conversion/granite.py: GraniteMoeSWA's experts
        cfg["model_type"] = "granitemoe_swa"
    elif arch == "mpt":         # conversion/mpt.py MPTModel: attn_config.kv_n_heads where the config names one
        cfg["attn_config"] = {"kv_n_heads": cfg["num_key_value_heads"]}
    elif arch == "granitemoe" and key("expert_shared_feed_forward_length", 0):
        # granite-moe.cpp load_arch_hparams: EXPERT_SHARED_FEED_FORWARD_LENGTH > 0 adds the shared expert
        cfg.update(model_type="granitemoeshared", shared_intermediate_size=key("expert_shared_feed_forward_length"))
    elif arch == "hy_v3" and key("expert_shared_feed_forward_length", 0):
        _hy_v3(cfg, key("expert_shared_feed_forward_length"))
    elif arch in ("dots1", "afmoe", "exaone-moe"):
        # dots1.cpp / afmoe.cpp: leading dense layers and shared experts (weights only, not the cache)
        cfg.update(first_k_dense_replace=key("leading_dense_block_count", 0),
                   n_shared_experts=key("expert_shared_count", 0))


def _hy_v3(cfg: dict, shared: int) -> None:
    """hy_v3's shared expert width back to num_shared_experts: llama.cpp@0c1e57098 src/models/hy-v3.cpp#L6 reads
    expert_shared_feed_forward_length (#L49: absent, one expert's width), which conversion/hunyuan.py#L393-L395
    writes as moe_intermediate_size x num_shared_experts, the width transformers' HYV3MoE builds
    (transformers@5.24.0 models/hy_v3/modeling_hy_v3.py#L348-L349)."""
    width = cfg.get("moe_intermediate_size")
    if not width or shared % width:
        raise SourceError(f"GGUF hy_v3.expert_shared_feed_forward_length is {shared}, not a multiple of "
                          f"expert_feed_forward_length ({width}): transformers' HYV3 config has no such shared "
                          "expert (moe_intermediate_size x num_shared_experts, modeling_hy_v3.py#L348)")
    cfg["num_shared_experts"] = shared // width


def _deepseek4(cfg: dict, key, meta: dict) -> None:
    """Every key DeepseekV4Model.set_gguf_parameters writes and deepseek4.cpp L28-L66 reads, as the config
    field it came from (kvmem.engines.llamacpp.dsv4.CONVERTER_KEYS: the llama.cpp mode refuses a config
    without them, as the converter does)."""
    gating = key("expert_gating_func")
    if gating != _SQRT_SOFTPLUS:
        # deepseek4.cpp#L63-L66
        raise SourceError(f"GGUF deepseek4.expert_gating_func is {gating}: llama.cpp 0c1e57098 refuses it "
                          "(\"DeepSeek-V4 loader currently expects sqrtsoftplus MoE scoring\")")
    ratios = key("attention.compress_ratios")
    n_layers = cfg["num_hidden_layers"] + cfg.get("num_nextn_predict_layers", 0)     # n_layer_all, with the MTP ones
    if not isinstance(ratios, list) or len(ratios) < n_layers:
        # deepseek4.cpp#L55-L59
        entries = len(ratios) if isinstance(ratios, list) else "no"
        raise SourceError(f"GGUF deepseek4.attention.compress_ratios has {entries} entries, block_count is "
                          f"{n_layers}: llama.cpp 0c1e57098 refuses it (\"DeepSeek-V4 compress_ratios is shorter than "
                          "block_count\", src/models/deepseek4.cpp#L55-L59)")
    a = "deepseek4."
    cfg.update(qk_rope_head_dim=key("rope.dimension_count"), q_lora_rank=key("attention.q_lora_rank"),
               sliding_window=key("attention.sliding_window"), n_shared_experts=key("expert_shared_count"),
               routed_scaling_factor=_number(meta, a + "expert_weights_scale"),
               norm_topk_prob=bool(key("expert_weights_norm")), swiglu_limit=_number(meta, a + "swiglu_clamp_exp"),
               index_n_heads=key("attention.indexer.head_count"), index_head_dim=key("attention.indexer.key_length"),
               index_topk=key("attention.indexer.top_k"), o_groups=key("attention.output_group_count"),
               o_lora_rank=key("attention.output_lora_rank"), compress_ratios=ratios,
               compress_rope_theta=_number(meta, a + "attention.compress_rope_freq_base"),
               hc_mult=key("hyper_connection.count"), hc_sinkhorn_iters=key("hyper_connection.sinkhorn_iterations"),
               hc_eps=_number(meta, a + "hyper_connection.epsilon"), num_hash_layers=key("hash_layer_count"),
               scoring_func="sqrtsoftplus")
    cfg.pop("layer_types", None)     # deepseek4.cpp#L67-L68: set_swa_pattern(0), every layer sliding


def _gemma3n(cfg: dict, key, trunk: int) -> None:
    """Gemma 3n: llama.cpp caches the first GEMMA3N_KV_LAYERS layers (gemma3n.cpp#L7) and never reads
    attention.shared_kv_layers; a file whose count says otherwise is refused, not sized two ways."""
    shared = key("attention.shared_kv_layers", None)
    kv_layers = min(trunk, GEMMA3N_KV_LAYERS)
    if shared is not None and trunk - shared != kv_layers:
        raise SourceError(f"GGUF gemma3n.attention.shared_kv_layers is {shared} of {trunk} layers, so the model "
                          f"caches {trunk - shared}; llama.cpp 0c1e57098 caches the first {kv_layers} whatever the "
                          "file says (src/models/gemma3n.cpp#L7 n_layer_kv_from_start = 20)")
    every_fifth = ["full_attention" if (i + 1) % 5 == 0 else "sliding_attention" for i in range(trunk)]
    if cfg.get("layer_types", every_fifth) != every_fifth:
        # kvmem.configs reads Gemma 3n as every 5th layer full (configs/layouts.py _gemma3n)
        raise SourceError("GGUF gemma3n.attention.sliding_window_pattern is not every 5th layer full; kvmem sizes "
                          "Gemma 3n by that pattern alone")
    cfg.update(num_kv_shared_layers=trunk - kv_layers,
               hidden_size_per_layer_input=key("embedding_length_per_layer_input"),
               altup_active_idx=key("altup.active_idx", 0), altup_num_inputs=key("altup.num_inputs", 4))


def _llama4(cfg: dict, key, trunk: int) -> None:
    """llama4.cpp#L8-L24: a file with sliding_window 0 attends fully everywhere; any other (or none) is chunked,
    8,192 tokens whatever the key says, in the layers the sliding_window_pattern marks (every 4th full without
    one): configuration_llama4.py's attention_chunk_size and no_rope_layers (1 = chunked, rope)."""
    window = key("attention.sliding_window", None)
    pattern = key("attention.sliding_window_pattern", 4)
    chunked = ([bool(p) for p in pattern] if isinstance(pattern, list)
               else [(i + 1) % pattern != 0 for i in range(trunk)])
    for name in ("sliding_window", "layer_types"):
        cfg.pop(name, None)
    # conversion/llama.py Llama4Model L383-L395: feed_forward_length is intermediate_size_mlp, the experts' the
    # config's intermediate_size; use_qk_norm unless 128 experts (llama4.cpp#L41)
    cfg.update(intermediate_size_mlp=key("feed_forward_length"), intermediate_size=key("expert_feed_forward_length"),
               interleave_moe_layer_step=key("interleave_moe_layer_step"), use_qk_norm=cfg.get("num_experts") != 128)
    if window == 0:
        cfg.update(attention_chunk_size=None, no_rope_layers=[1] * trunk)
    else:
        cfg.update(attention_chunk_size=_LLAMA4_CHUNK, no_rope_layers=[int(c) for c in chunked[:trunk]])




def _phimoe(cfg: dict) -> None:
    """phimoe.cpp load_arch_hparams reads no window: every layer is cached whole. conversion/phi.py Phi3MiniModel
    L169-L173 writes the config's sliding_window (Phi-3.5-MoE: 131,072, its whole context); a window shorter than
    context_length would be the model's sliding and llama.cpp's full cache at once: refused."""
    window, context = cfg.pop("sliding_window", 0), cfg.get("max_position_embeddings", 0)
    cfg.pop("layer_types", None)
    if window and window < context:
        raise SourceError(f"GGUF phimoe.attention.sliding_window is {window}, below context_length ({context}): "
                          "llama.cpp 0c1e57098 caches every layer whole (phimoe.cpp reads no window), the model's "
                          "own code windows them; kvmem does not pick one")



def _laguna(cfg: dict, key, trunk: int) -> None:
    """Laguna (laguna.cpp L9-L55): query heads per layer (conversion/laguna.py L73-L80 writes head_count as a list:
    configuration_laguna.py's num_attention_heads_per_layer), K/V heads one count; a window slides every layer
    but those where i % 4 == 0 (load_swa_pattern(ml, 4, dense_first), llama-hparams.cpp#L8-L12), the
    converter writing no pattern."""
    heads = key("attention.head_count")
    if isinstance(heads, list):
        cfg["num_attention_heads_per_layer"] = heads[:trunk]
    if cfg.get("sliding_window") and "layer_types" not in cfg:
        cfg["layer_types"] = ["full_attention" if i % 4 == 0 else "sliding_attention" for i in range(trunk)]
    cfg["first_k_dense_replace"] = key("leading_dense_block_count")


def _exaone4(cfg: dict, trunk: int) -> None:
    """exaone4.cpp#L4-L14: a 64-layer model slides (window 4,096 unless the file names one, every 4th layer
    full); any other depth is cached whole even where the file names a window."""
    if trunk == _EXAONE4_SWA_LAYERS:
        if not cfg.get("sliding_window"):
            cfg["sliding_window"] = _EXAONE4_WINDOW
            cfg["layer_types"] = ["full_attention" if (i + 1) % 4 == 0 else "sliding_attention"
                                  for i in range(trunk)]
    elif "sliding_attention" in cfg.get("layer_types", ()):
        raise SourceError(f"GGUF exaone4 of {trunk} layers names a sliding window: llama.cpp 0c1e57098 slides only "
                          "64-layer EXAONE 4 (src/models/exaone4.cpp#L4-L8) and caches these layers whole, "
                          "the model's own code windows them; kvmem does not pick one")


# the architectures whose fields come from the keys and the trunk's depth alone
_BY_TRUNK: dict[str, Callable[[dict, Callable, int], None]] = {"laguna": _laguna, "kimi-linear": kimi_linear_fields,
                                                                 **{arch: partial(layered_fields, arch)
                                                                    for arch in LAYERED_MODEL_TYPES}}

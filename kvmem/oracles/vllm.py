"""vLLM's own planning code as the judge of kvmem's ``vllm`` mode.

For each case, the layer specs kvmem's Model implies are built from vLLM's real classes
(vllm/v1/kv_cache_interface.py: FullAttentionSpec, SlidingWindowSpec,
ChunkedLocalAttentionSpec, MLAAttentionSpec, what each attention layer's get_kv_cache_spec
returns), grouped and sized by vLLM's real planning (vllm/v1/core/kv_cache_planning.py
get_global_kv_cache_groups, get_kv_cache_configs; vllm/v1/core/kv_cache_utils.py
get_kv_cache_capacity), under a real VllmConfig. Compared, per case: num_blocks, the
"KV cache size: N tokens" and "Maximum concurrency ... X.XXx" of the log line, auto-fit's
max_model_len (``--max-model-len auto``), and the refusal with its estimated maximum length.

The VllmConfig is built for device "cpu" (this machine has no GPU), then set to what vLLM
decides on CUDA: the hybrid KV cache manager on unless asked off (the CPU platform turns it
off: support_hybrid_kv_cache), model runner V2 (VLLM_USE_V2_MODEL_RUNNER=1, the CUDA default
with Triton), async scheduling as VllmConfig.__post_init__ resolves it (on), and the KV cache
layout resolved by vLLM's resolve_kv_cache_layout from the default preference. model_config is
a stand-in holding max_model_len, original_max_model_len and supports_kv_cache_grouping=False
(building a real ModelConfig needs the model's files). Models with Mamba/linear layers,
or shared-KV layers are left to kvmem/oracles/vllm_states.py and the unit tests; an MLA layer's
sparse-attention indexer key (DeepSeek-V3.2, GLM-5) is the spec DeepseekV32IndexerCache.get_kv_cache_spec
builds (vllm/model_executor/models/deepseek_v2.py): one head of index_head_dim + 4 B per 128, uint8,
cache role INDEXER.

Over 300 lines by design: the cases it draws and the run that judges them (the vLLM classes and layer specs
both build on are kvmem/oracles/vllm_lib.py); a tool of ``kvmem validate --engine vllm``, never imported
by ``import kvmem``.
"""

from __future__ import annotations

import random
import re

from ..catalog import get_model, list_models
from ..engines import capacity
from ..layer import MLA
from ..model import Model
from ..parallel import divides
from .architectures import random_model
from .report import Check
from .vllm_lib import kv_layouts, layer_specs, load_vllm, planning_config, supported

__all__ = ["version", "directed_cases", "random_cases", "random_case", "run_case"]

GIB = 1 << 30
FAMILIES = ("llama", "qwen2", "qwen3", "gemma2", "gemma3", "mistral", "gpt_oss", "llama4", "deepseek_v2", "gemma4")
_MAX_LEN_RE = re.compile(r"estimated maximum model length is (\d+)")


def version() -> str:
    import vllm
    return vllm.__version__


def directed_cases() -> list[tuple[str, Model | None, dict]]:
    """Every attention-only preset across memory, max_model_len (auto too), block size, T, hybrid on/off, tp."""
    out: list[tuple[str, Model | None, dict]] = []
    settings: list[dict] = [dict(kv_memory=3 * GIB, max_model_len=None), dict(kv_memory=20 * GIB, max_model_len=32768),
                dict(kv_memory=8 * GIB, max_model_len=131072, max_num_batched_tokens=2048),
                dict(kv_memory=40 * GIB, max_model_len=None, block_size=32, hybrid_kv_cache_manager=False),
                dict(kv_memory=GIB, max_model_len=8192, tp=2)]
    for name in list_models():
        model = get_model(name)
        if not supported(model):
            continue
        for i, setting in enumerate(settings):
            tp = setting.get("tp", 1)
            if not divides(tp, model.num_attention_heads) or any(
                    layer.kind != MLA and tp > layer.kv_heads and not divides(layer.kv_heads, tp)
                    for layer in model.layers):
                continue
            out.append((f"{name}#{i}", model, setting))
    return out + dp_cases()


def dp_cases(seed: int = 0, n: int = 12) -> list[tuple[str, None, dict]]:
    """--data-parallel-size / --enable-expert-parallel settings (kvmem/oracles/vllm_dp.py): the directed ones and
    ``n`` seeded ones, judged by vLLM's own MoE placement (run_case: the setting holds them under "dp")."""
    from . import vllm_dp, vllm_dp_dcp
    chosen = vllm_dp.cases() + [vllm_dp.random_case(seed, i) for i in range(n)]
    # decode context parallelism (vllm_dp_dcp.py): its setting under "dcp"
    dcp = vllm_dp_dcp.cases() + [vllm_dp_dcp.random_case(seed, i) for i in range(n // 2)]
    return ([(name, None, {"dp": setting}) for name, setting in chosen]
            + [(name, None, {"dcp": setting}) for name, setting in dcp])


# The opt-in families (kvmem.engines.vllm FAMILIES) with a seeded generator here, drawn in turn after the
# base architectures by random_cases: kvmem validate --engine vllm covers them too
ATTENTION_TYPES = ("exaone4", "afmoe", "cohere2", "cohere2_moe", "dbrx", "qwen2_vl_text", "qwen2_5_vl_text",
                   "minicpm3", "longcat_flash", "laguna", "exaone_moe", "nemotron-nas", "ernie4_5_vl_moe_text",
                   "exaone4_5_text", "mimo", "step3p5", "minimax_m3_text", "hy_v4", "axk1", "sarvam_mla",
                   "gpt_bigcode", "smollm3")
OPT_IN_CASES = ("deepseek_v4", "glm_moe_dsa", "mimo_v2_flash", *ATTENTION_TYPES, "inkling_text")


def random_cases(n: int, seed: int) -> list[tuple[str, Model, dict]]:
    """``n`` random architectures from ``seed``: the base families and the opt-in ones in turn."""
    kinds = FAMILIES + OPT_IN_CASES
    return [_random_any(seed, i, kinds[i % len(kinds)]) for i in range(n)]


def _random_any(seed: int, i: int, kind: str) -> tuple[str, Model, dict]:
    if kind in FAMILIES:
        return random_case(seed, i, kind)
    draw = seed * 1_000_003 + i            # one case per (seed, i), as random_case draws its own
    if kind == "deepseek_v4":
        return random_dsv4_case(draw)
    if kind == "glm_moe_dsa":
        return random_glm_dsa_case(draw)
    if kind == "mimo_v2_flash":
        return random_mimo_case(draw)
    if kind == "inkling_text":
        return random_inkling_case(draw)
    return random_attention_case(kind, draw)


def random_inkling_case(seed: int) -> tuple[str, Model, dict]:
    """A seeded Inkling checkpoint as vLLM loads it (model_type inkling_mm_model, its text_config): heads, KV
    heads, head dims, window, local layers, kernel and hidden size drawn; tp at most every layer's KV heads."""
    rng = random.Random(f"inkling-{seed}")
    n = rng.randint(2, 10)
    heads, swa_heads = rng.choice((4, 8, 16)), rng.choice((4, 8, 16))
    kv, swa_kv = rng.choice((1, 2, 4, 8)), rng.choice((1, 2, 4, 8, 16))
    kv, swa_kv = min(kv, heads), min(swa_kv, swa_heads)
    text: dict = dict(model_type="inkling_text", hidden_size=rng.choice((512, 1024, 2048)), num_hidden_layers=n,
                num_attention_heads=heads, num_key_value_heads=kv, head_dim=rng.choice((64, 128)),
                swa_num_attention_heads=swa_heads, swa_num_key_value_heads=swa_kv,
                swa_head_dim=rng.choice((64, 128)), sliding_window_size=rng.choice((64, 256, 512)),
                local_layer_ids=sorted(rng.sample(range(n), rng.randint(0, n))),
                conv_kernel_size=rng.choice((2, 3, 4)), max_position_embeddings=32768, vocab_size=512)
    if rng.random() < 0.3:       # Inkling-Small's text_config sets no swa_* field: vLLM takes the full layers'
        for key in ("swa_num_attention_heads", "swa_num_key_value_heads", "swa_head_dim"):
            del text[key]
        swa_heads, swa_kv = heads, kv
    local = bool(text["local_layer_ids"])
    full = len(text["local_layer_ids"]) < n
    limit = min([kv] * full + [swa_kv] * local)
    tp = rng.choice([t for t in (1, 2, 4) if t <= limit and (not full or (heads % t == 0 and kv % t == 0))
                     and (not local or (swa_heads % t == 0 and swa_kv % t == 0))])
    cfg = dict(model_type="inkling_mm_model", architectures=["InklingForConditionalGeneration"],
               torch_dtype="bfloat16", text_config=text)
    setting = dict(kv_memory=rng.randint(1, 32) * GIB // rng.choice((1, 4, 16)),
                   max_model_len=rng.choice((None, 2048, 8192, 32768)),
                   max_num_batched_tokens=rng.choice((512, 2048, 8192)), tp=tp,
                   hybrid_kv_cache_manager=True)
    return f"random-inkling-{seed}", Model.from_hf_config(cfg), setting


def random_case(seed: int, i: int, family: str) -> tuple[str, Model, dict]:
    """Case ``i`` of ``seed``: its own random.Random, so each case can be drawn alone."""
    rng, model = random_model(seed, i, family)
    setting = dict(kv_memory=rng.randint(1, 64) * GIB // rng.choice((1, 4, 16, 64)),
                   max_model_len=rng.choice((None, 2048, 8192, model.max_position_embeddings)),
                   max_num_batched_tokens=rng.choice((512, 2048, 8192, 16384)),
                   block_size=rng.choice((16, 32, 64)) if family != "deepseek_v2" else 64,
                   hybrid_kv_cache_manager=rng.random() < 0.8)
    return f"random-{seed}-{i}-{family}", model, setting


def random_attention_case(model_type: str, seed: int) -> tuple[str, Model, dict]:
    """A seeded model of an attention-only family the vllm mode reads beyond FAMILIES (exaone4,
    afmoe, cohere2, cohere2_moe, dbrx, qwen2_vl_text, qwen2_5_vl_text, minicpm3, longcat_flash, laguna,
    exaone_moe, nemotron-nas, ernie4_5_vl_moe_text), with
    engine settings. Its
    specs are kvmem's layers (the cohere window + 1 as vLLM's), so this checks vLLM's planning of
    them; the model files' rules (window + 1, head_dim) are in the unit tests."""
    import random
    rng = random.Random(f"{model_type}/{seed}")
    n_layers = rng.randint(2, 16)
    heads, kv_heads = rng.choice((16, 32)), rng.choice((1, 2, 4, 8))
    cfg = {"model_type": model_type, "num_hidden_layers": n_layers, "hidden_size": heads * 64, "vocab_size": 1000,
           "num_attention_heads": heads, "num_key_value_heads": kv_heads, "intermediate_size": 100,
           "max_position_embeddings": rng.choice((8192, 131072)), "torch_dtype": "bfloat16"}
    window = rng.choice((128, 129, 512, 513, 4096))   # w = 1 mod 16: vLLM's +1 crosses a block
    hybrid_off_refused = False
    if model_type == "exaone4":
        cfg.update(architectures=["Exaone4ForCausalLM"], sliding_window=window,
                   sliding_window_pattern=rng.choice((2, 4)), head_dim=rng.choice((64, 128)))
    elif model_type == "afmoe":
        cfg.update(architectures=["AfmoeForCausalLM"], sliding_window=window,
                   global_attn_every_n_layers=rng.choice((2, 4)), head_dim=rng.choice((64, 128)))
    elif model_type in ("cohere2", "cohere2_moe"):
        cfg.update(architectures=["Cohere2ForCausalLM" if model_type == "cohere2" else "Cohere2MoeForCausalLM"],
                   sliding_window=window, sliding_window_pattern=rng.choice((2, 4)))
        if model_type == "cohere2_moe":
            cfg.update(first_k_dense_replace=rng.randint(0, 3), prefix_dense_sliding_window_pattern=1)
    elif model_type == "ernie4_5_vl_moe_text":   # ernie45_vl_moe.py: full attention, head_dim or hidden // heads
        cfg.update(architectures=["Ernie4_5_VLMoeForConditionalGeneration"], head_dim=rng.choice((None, 64, 128)))
        cfg = {k: v for k, v in cfg.items() if v is not None}
    elif model_type in ("qwen2_vl_text", "qwen2_5_vl_text"):   # qwen2_vl.py: Qwen2ForCausalLM, no window
        cfg.update(architectures=["Qwen2ForCausalLM"], use_sliding_window=False)
    elif model_type in ("laguna", "exaone_moe"):
        types = [rng.choice(("sliding_attention", "full_attention")) for _ in range(n_layers)]
        cfg.update(architectures=["LagunaForCausalLM" if model_type == "laguna" else "ExaoneMoeForCausalLM"],
                   layer_types=types, sliding_window=window)
        if model_type == "laguna" and rng.random() < 0.7:
            cfg["num_attention_heads_per_layer"] = [rng.choice((heads, heads // 2)) for _ in range(n_layers)]
        elif model_type == "exaone_moe" and rng.random() < 0.7:
            cfg["sliding_windows"] = [rng.choice((128, 513, 4096)) if t == "sliding_attention" else None
                                      for t in types]
            hybrid_off_refused = True   # several windows with the hybrid manager off: vLLM fails (unit test)
        if rng.random() < 0.5:
            cfg["head_dim"] = rng.choice((64, 128))
    elif model_type == "exaone4_5_text":   # exaone4_5.py: Exaone4ForCausalLM on the text config
        cfg.update(architectures=["Exaone4ForCausalLM"], sliding_window=window,
                   sliding_window_pattern=rng.choice((2, 4)), head_dim=rng.choice((64, 128)))
    elif model_type == "mimo":   # mimo.py: Qwen2ForCausalLM's layers
        cfg.update(architectures=["MiMoForCausalLM"], use_sliding_window=False, num_nextn_predict_layers=1)
    elif model_type == "step3p5":   # step3p5.py: num_attention_groups KV heads, sliding_window on sliding layers
        types = [rng.choice(("sliding_attention", "full_attention")) for _ in range(n_layers)]
        cfg = {k: val for k, val in cfg.items() if k != "num_key_value_heads"}
        cfg.update(architectures=["Step3p5ForCausalLM"], layer_types=types, sliding_window=window, head_dim=128,
                   num_attention_groups=kv_heads, num_sliding_attention_heads=rng.choice((heads, heads // 2)))
    elif model_type == "minimax_m3_text":   # minimax_m3: K/V on every layer, a bf16 index key on sparse ones
        freq = [rng.choice((0, 1, 1)) for _ in range(n_layers)]
        cfg.update(architectures=["MiniMaxM3SparseForCausalLM"], head_dim=128,
                   sparse_attention_config={"sparse_attention_freq": freq,
                                            "sparse_index_dim": rng.choice((64, 128))})
    elif model_type == "gpt_bigcode":   # Transformers backend: one K/V head with multi_query
        cfg = {k: val for k, val in cfg.items() if k not in ("num_key_value_heads", "num_attention_heads",
                                                             "num_hidden_layers", "hidden_size")}
        cfg.update(architectures=["GPTBigCodeForCausalLM"], n_head=heads, n_layer=n_layers, n_embd=heads * 64,
                   multi_query=rng.random() < 0.7, n_positions=cfg["max_position_embeddings"])
    elif model_type == "smollm3":   # Transformers backend: layer_types as SmolLM3Config builds them
        cfg.update(architectures=["SmolLM3ForCausalLM"], use_sliding_window=rng.random() < 0.7, sliding_window=window,
                   no_rope_layers=[rng.choice((0, 1)) for _ in range(n_layers)])
    elif model_type == "sarvam_mla":   # sarvam.py: MultiHeadLatentAttentionWrapper, the MLA latent
        cfg.update(architectures=["SarvamMLAForCausalLM"], num_key_value_heads=heads, q_lora_rank=256,
                   kv_lora_rank=rng.choice((256, 512)), qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128)
    elif model_type in ("hy_v4", "axk1"):   # DeepSeek-style MLA (is_deepseek_mla); HY-V4 adds indexer keys
        cfg.update(num_key_value_heads=heads, q_lora_rank=256, kv_lora_rank=rng.choice((256, 512)),
                   qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128)
        if model_type == "hy_v4":
            cfg.update(architectures=["HYV4ForCausalLM"], index_topk=64, index_head_dim=rng.choice((64, 128, 256)),
                       index_n_heads=8, layer_types=["indexed_attention"] * n_layers)
            if rng.random() < 0.5:
                cfg["indexer_types"] = [rng.choice(("full", "shared")) for _ in range(n_layers)]
        else:
            cfg.update(architectures=["AXK1ForCausalLM"])
    elif model_type == "minicpm3":
        cfg.update(architectures=["MiniCPM3ForCausalLM"], num_key_value_heads=heads, q_lora_rank=256,
                   kv_lora_rank=rng.choice((128, 256)), qk_nope_head_dim=rng.choice((32, 64)),
                   qk_rope_head_dim=rng.choice((16, 32)), v_head_dim=64)
    elif model_type == "longcat_flash":   # two MLA attentions per decoder layer (num_layers)
        cfg = {k: v for k, v in cfg.items() if k != "num_hidden_layers"}
        cfg.update(architectures=["LongcatFlashForCausalLM"], num_layers=n_layers // 2 + 1, num_key_value_heads=heads,
                   q_lora_rank=256, kv_lora_rank=rng.choice((256, 512)), qk_nope_head_dim=128,
                   qk_rope_head_dim=64, v_head_dim=128)
    elif model_type == "nemotron-nas":
        blocks = [{"attention": {"no_op": True, "n_heads_in_group": None}} if rng.random() < 0.3 else
                  {"attention": {"no_op": False, "n_heads_in_group": rng.choice((2, 4, 8))}} for _ in range(n_layers)]
        blocks[0] = {"attention": {"no_op": False, "n_heads_in_group": 4}}
        cfg.update(architectures=["DeciLMForCausalLM"], num_key_value_heads=None, block_configs=blocks)
    elif model_type == "dbrx":
        cfg = {k: v for k, v in cfg.items() if k not in ("num_key_value_heads", "num_attention_heads",
                                                         "num_hidden_layers", "hidden_size")}
        cfg.update(architectures=["DbrxForCausalLM"], d_model=heads * 64, n_heads=heads, n_layers=n_layers,
                   attn_config={"kv_n_heads": kv_heads})
    else:
        raise ValueError(f"no random configs for {model_type!r}")
    setting = dict(kv_memory=rng.randint(1, 64) * GIB // rng.choice((1, 4, 16)),
                   max_model_len=rng.choice((None, 2048, 8192, cfg["max_position_embeddings"])),
                   max_num_batched_tokens=rng.choice((512, 2048, 8192)), tp=rng.choice((1, 2, 4)),
                   block_size=rng.choice((16, 32)), hybrid_kv_cache_manager=rng.random() < 0.8 or hybrid_off_refused)
    model = Model.from_hf_config(cfg)
    if any(layer.index_head_dim for layer in model.layers):   # MiniMax-M3's sparse backends: blocks of 128
        setting["block_size"] = 128
    return f"random-{model_type}-{seed}", model, setting


def random_mimo_case(seed: int) -> tuple[str, Model, dict]:
    """A seeded MiMo-V2-Flash-shaped model (its own sliding-layer heads, dims and window) and settings."""
    import random
    rng = random.Random(f"mimo_v2_flash/{seed}")
    n_layers = rng.randint(2, 16)
    pattern = [rng.choice((0, 1, 1, 1)) for _ in range(n_layers)]
    pattern[0] = 0
    head_dim = rng.choice((64, 128, 192))
    swa_dim = rng.choice((64, 128, 192))
    cfg = {"model_type": "mimo_v2_flash", "architectures": ["MiMoV2FlashForCausalLM"], "num_hidden_layers": n_layers,
           "hidden_size": 1024, "num_attention_heads": 32, "num_key_value_heads": rng.choice((2, 4, 8)),
           "head_dim": head_dim, "v_head_dim": rng.choice((head_dim, 128)), "swa_num_attention_heads": 32,
           "swa_num_key_value_heads": rng.choice((4, 8, 16)), "swa_head_dim": swa_dim,
           "sliding_window_size": rng.choice((64, 128, 1000)), "hybrid_layer_pattern": pattern,
           "max_position_embeddings": rng.choice((32768, 262144)), "vocab_size": 1000, "intermediate_size": 100,
           "torch_dtype": "bfloat16"}
    if rng.random() < 0.7:
        cfg["swa_v_head_dim"] = rng.choice((swa_dim, 128))
    setting = dict(kv_memory=rng.randint(1, 64) * GIB // rng.choice((1, 4, 16)),
                   max_model_len=rng.choice((None, 2048, 8192, cfg["max_position_embeddings"])),
                   max_num_batched_tokens=rng.choice((512, 2048, 8192)), tp=rng.choice((1, 2, 4)),
                   block_size=rng.choice((16, 32)), hybrid_kv_cache_manager=rng.random() < 0.8)
    return f"random-mimo_v2_flash-{seed}", Model.from_hf_config(cfg), setting


def random_dsv4_case(seed: int) -> tuple[str, Model, dict]:
    """A seeded DeepSeek-V4-shaped model (sliding, CSA and HCA layers in a random order, window, head and
    indexer widths) and engine settings (vLLM's CUDA default backend: fp8_ds_mla, blocks of 256)."""
    import random
    rng = random.Random(f"deepseek_v4/{seed}")
    n_layers = rng.randint(2, 24)
    ratios = [rng.choice((0, 4, 4, 128, 128)) for _ in range(n_layers)]
    ratios[rng.randrange(n_layers)] = 4           # at least one CSA layer
    cfg = {"model_type": "deepseek_v4", "architectures": ["DeepseekV4ForCausalLM"], "num_hidden_layers": n_layers,
           "hidden_size": 1024, "num_attention_heads": 64, "num_key_value_heads": 1,
           "head_dim": rng.choice((128, 256, 512)), "qk_rope_head_dim": 64, "q_lora_rank": 256, "o_lora_rank": 256,
           "o_groups": 8, "index_head_dim": rng.choice((64, 128, 256)), "index_n_heads": 8, "index_topk": 64,
           "sliding_window": rng.choice((64, 128, 200, 512)), "compress_ratios": ratios,
           "max_position_embeddings": rng.choice((65536, 1048576)), "vocab_size": 1000, "torch_dtype": "bfloat16"}
    setting = dict(kv_memory=rng.randint(1, 64) * GIB // rng.choice((1, 4, 16, 64)),
                   max_model_len=rng.choice((None, 2048, 8192, 65536)),
                   max_num_batched_tokens=rng.choice((512, 2048, 8192)), tp=rng.choice((1, 2, 4, 8)))
    return f"random-deepseek_v4-{seed}", Model.from_hf_config(cfg), setting


def random_glm_dsa_case(seed: int) -> tuple[str, Model, dict]:
    """A seeded GLM-5-shaped model (glm_moe_dsa: MLA + an indexer key on the layers vLLM keeps one,
    by index_topk_pattern or index_topk_freq / index_skip_topk_offset) and engine settings."""
    import random
    rng = random.Random(f"glm_moe_dsa/{seed}")
    n_layers = rng.randint(2, 12)
    cfg = {"model_type": "glm_moe_dsa", "architectures": ["GlmMoeDsaForCausalLM"], "num_hidden_layers": n_layers,
           "num_attention_heads": 64, "num_key_value_heads": 64, "hidden_size": 1024, "q_lora_rank": 256,
           "kv_lora_rank": rng.choice((256, 512)), "qk_rope_head_dim": 64, "qk_nope_head_dim": 128,
           "v_head_dim": 128, "index_head_dim": rng.choice((64, 128, 256)), "index_n_heads": 8, "index_topk": 256,
           "max_position_embeddings": rng.choice((32768, 202752)), "vocab_size": 1000, "intermediate_size": 100,
           "torch_dtype": "bfloat16"}
    schedule = rng.choice(("all", "freq", "pattern"))
    if schedule == "freq":
        cfg.update(index_topk_freq=rng.randint(2, 4), index_skip_topk_offset=rng.randint(0, 3))
    elif schedule == "pattern":
        cfg["index_topk_pattern"] = "".join(rng.choice("FS") for _ in range(n_layers))
    setting = dict(kv_memory=rng.randint(1, 64) * GIB // rng.choice((1, 4, 16)),
                   max_model_len=rng.choice((None, 2048, 8192, cfg["max_position_embeddings"])),
                   max_num_batched_tokens=rng.choice((512, 2048, 8192)), tp=rng.choice((1, 2, 4)),
                   hybrid_kv_cache_manager=rng.random() < 0.8)
    return f"random-glm_moe_dsa-{seed}", Model.from_hf_config(cfg), setting


def run_case(name: str, model: Model, setting: dict) -> list[Check]:
    """kvmem.capacity(engine='vllm') beside vLLM's own planning for one case."""
    if "dp" in setting:
        from . import vllm_dp
        return vllm_dp.run_case(name, setting["dp"])
    if "dcp" in setting:
        from . import vllm_dp_dcp
        return vllm_dp_dcp.run_case(name, setting["dcp"])
    v = load_vllm()
    tp = setting.get("tp", 1)
    block_size = setting.get("block_size", 64 if any(layer.kind == MLA for layer in model.layers) else 16)
    if model.model_type == "deepseek_v4":   # its backends take only 256 (sparse_mla.py, indexer.py)
        block_size = None
    batched = setting.get("max_num_batched_tokens", 8192)
    hybrid = setting.get("hybrid_kv_cache_manager", True)
    memory = setting["kv_memory"]
    auto = setting["max_model_len"] is None
    # vLLM refuses a max_model_len above the model's own (ModelConfig), so no case asks for one
    length: int = min(setting["max_model_len"] or model.max_position_embeddings, model.max_position_embeddings)  # type: ignore[type-var, assignment]  # every case sets max_position_embeddings
    ours = capacity(model, engine="vllm", kv_memory=memory, max_model_len=length, tp=tp,
                    block_size=block_size, max_num_batched_tokens=batched, hybrid_kv_cache_manager=hybrid)
    # the MLA backend's forced block size is CUDA platform code (vllm/platforms/cuda.py): kvmem's
    block_size = ours.block_size
    if model.model_type == "inkling_text":   # its conv states have blocks of the kernel; the attention the cache's
        block_size = setting.get("block_size", 16)
    config = planning_config(v, max_model_len=length, auto=auto, batched=batched, block_size=block_size,
                     hybrid=hybrid, tp=tp)
    specs = layer_specs(v, model, block_size, tp)
    v.resolve_kv_cache_layout(config, [kv_layouts(v, model)], specs.values())
    refused = next((n for n in ours.notes if n.startswith("vLLM refuses to start")), None)
    if auto:   # auto-fit shortens max_model_len instead; it refuses only when not one token fits
        refused = refused if ours.longest_request_tokens == 0 else None
    checks = []
    try:
        groups = v.get_global_kv_cache_groups(config, [specs])
        kv_config = v.get_kv_cache_configs(config, [specs], [memory], groups)[0]
    except ValueError as error:
        match = _MAX_LEN_RE.search(str(error))
        checks.append(Check(name, "refuses to start", refused is not None, True))
        checks.append(Check(name, "estimated maximum model length", ours.longest_request_tokens,
                            int(match.group(1)) if match else 0))
        return checks
    checks.append(Check(name, "refuses to start", refused is not None, False))
    if auto:
        fitted = config.model_config.max_model_len
        # vLLM serves the longest that fits, or the model's own length when that fits
        checks.append(Check(name, "auto-fit max_model_len", min(ours.longest_request_tokens, length), fitted))
        if fitted != length:   # vLLM now serves `fitted` tokens a request; so does kvmem
            ours = capacity(model, engine="vllm", kv_memory=memory, max_model_len=fitted, tp=tp,
                            block_size=block_size, max_num_batched_tokens=batched,
                            hybrid_kv_cache_manager=hybrid)
    tokens, concurrency = v.get_kv_cache_capacity(config, kv_config)
    checks.append(Check(name, "num_blocks", ours.blocks, kv_config.num_blocks))
    checks.append(Check(name, "KV cache size tokens", ours.tokens, tokens))
    checks.append(Check(name, "maximum concurrency (log, 2 decimals)", f"{ours.max_concurrency:.2f}",
                        f"{concurrency:.2f}"))
    return checks

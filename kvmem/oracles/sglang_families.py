"""SGLang 0.5.23's own reading of a config as the judge of kvmem's ``sglang`` layout, family by family.

For a config.json (a real checkpoint's, or a seeded variation of one) this builds SGLang's
``ModelConfig`` (python/sglang/srt/configs/model_config.py) from a temporary directory on the CPU
and reads off what its pools are made from:
    which layers a pool holds   is_hybrid_swa / swa_attention_layer_ids / full_attention_layer_ids
                                (get_hybrid_layer_ids), or a linear hybrid's mambaish_config
                                (configs/hybrid_arch.py): full_attention_layer_ids and the state layers
    bytes per token per layer   MHA: get_num_kv_heads(tp) x (head_dim + v_head_dim), SWA layers
                                get_swa_num_kv_heads(tp) x (swa_head_dim + swa_v_head_dim) (the
                                pools' shapes, kv_cache_configurator.py / swa_memory_pool.py);
                                MLA: kv_lora_rank + qk_rope_head_dim, one head
    DSA indexer                 index_head_dim on every layer but dsa_layer_skips_topk's
    a request's state           mamba2_cache_params.mamba_cache_per_req (configs/mamba_utils.py)
and compares each with kvmem.engines.sglang.pools.make_layout for the model kvmem reads from the same
config. The KV dtype is bf16 (2 B), tp 1 unless a case says otherwise.

SGLang's conv state dtype is bfloat16 (SGLANG_MAMBA_CONV_DTYPE's default) and its SSM dtype the
config's mamba_ssm_dtype, else float32 (mamba2_state_dtype); kvmem's default options agree for a
bf16 checkpoint whose config names float32 or nothing.
"""

from __future__ import annotations

import json
import os
import random
import tempfile

from ..engines.sglang.families import BACKEND_WITH_PLANS, EXPANDED_MLA, NO_PLANS
from ..engines.sglang.own_configs import sglang_model
from ..engines.sglang.pools import DEFAULTS, make_layout, state_parts_of
from ..model import Model
from .report import Check
from .sglang_runtime import load as _load_sglang

__all__ = ["sglang_view", "kvmem_view", "run_config", "variations", "ARCHITECTURES", "PRESETS", "base_configs",
           "minimax_pool_checks", "minimax_variations"]

# The declared families' cases for ``kvmem validate --engine sglang``: the presets that are real checkpoints'
# configs, and for the families without one the config class's defaults under the architecture SGLang registers
PRESETS = ("glm-5", "glm-5.1", "glm-5.2", "gemma-4-26b-a4b", "kimi-linear-48b-a3b", "kimi-k3", "deepseek-v3.2",
           "qwen3-next-80b-a3b", "qwen3.5-27b", "nemotron-h-8b", "gpt-oss-20b", "llama-4-scout-17b-16e")
ARCHITECTURES = {
    "exaone4": "Exaone4ForCausalLM", "exaone_moe": "ExaoneMoeForCausalLM", "cohere2_moe": "Cohere2MoeForCausalLM",
    "afmoe": "AfmoeForCausalLM", "granitemoehybrid": "GraniteMoeHybridForCausalLM",
    "gpt_bigcode": "GPTBigCodeForCausalLM", "minicpm3": "MiniCPM3ForCausalLM", "sarvam_mla": "SarvamMLAForCausalLM",
    "hy_v4": "HYV4ForCausalLM", "longcat_flash": "LongcatFlashForCausalLM",
    "qwen2_vl_text": "Qwen2VLForConditionalGeneration", "qwen2_5_vl_text": "Qwen2_5_VLForConditionalGeneration",
    "ernie4_5_vl_moe_text": "Ernie4_5_VLMoeForConditionalGeneration", "mamba": "MambaForCausalLM",
    "falcon_mamba": "FalconMambaForCausalLM", "smollm3": "SmolLM3ForCausalLM", "dots1": "Dots1ForCausalLM",
    # through SGLang's Transformers backend (no EntryClass): the checkpoints' generative architectures
    "bert": "BertLMHeadModel", "bert-generation": "BertGenerationDecoder", "camembert": "CamembertForCausalLM",
    "data2vec-text": "Data2VecTextForCausalLM", "electra": "ElectraForCausalLM", "ernie": "ErnieForCausalLM",
    "roberta": "RobertaForCausalLM", "roberta-prelayernorm": "RobertaPreLayerNormForCausalLM",
    "roc_bert": "RoCBertForCausalLM", "xlm-roberta": "XLMRobertaForCausalLM",
    "xlm-roberta-xl": "XLMRobertaXLForCausalLM", "xmod": "XmodForCausalLM",
    "modernbert-decoder": "ModernBertDecoderForCausalLM",
    "kosmos_2_5_text_model": "Kosmos2_5ForConditionalGeneration",
    "exaone4_5_text": "Exaone4_5_ForConditionalGeneration",
    "mamba2": "Mamba2ForCausalLM", "falcon_h1": "FalconH1ForCausalLM",
    "gemma4_unified_text": "Gemma4UnifiedForConditionalGeneration", "step3p5": "Step3p5ForCausalLM",
    # MLA run through the Transformers backend as MHA of the expanded heads
    **{t: arch for t, (arch, _) in EXPANDED_MLA.items()},
}
# text families whose checkpoints are a multimodal wrapper: the wrapper's config class defaults are the case
WRAPPERS = {"kosmos_2_5_text_model": "kosmos-2.5", "exaone4_5_text": "exaone4_5",
            "gemma4_unified_text": "gemma4_unified"}
# fields set on the config class's defaults: the BERT-style classes are encoders unless is_decoder (kvmem refuses
# an encoder: it caches nothing); X-MOD needs a default language under SGLang (kvmem.engines.sglang.families)
SET = {**{t: {"is_decoder": True} for t in ("bert", "bert-generation", "camembert", "data2vec-text", "electra",
                                            "ernie", "roberta", "roberta-prelayernorm", "roc_bert", "xlm-roberta",
                                            "xlm-roberta-xl")},
       "xmod": {"is_decoder": True, "default_language": "en_XX"},
       # SGLang's Mamba2Config reads intermediate_size, which transformers' defaults lack (num_heads x head_dim)
       "mamba2": {"intermediate_size": 128 * 64},
       # Step-3.5's defaults have no sliding layer: Step-3.5-Flash's pattern (full every 4th layer), a 512 window,
       # and sliding layers with their own KV-head count
       "step3p5": {"layer_types": ["full_attention" if i % 4 == 0 else "sliding_attention" for i in range(45)],
                   "sliding_window": 512, "attention_other_setting": {"attention_type": "sliding_attention",
                                                                      "num_attention_heads": 96,
                                                                      "num_attention_groups": 4}}}


def base_configs() -> list[tuple[str, dict]]:
    """(name, config.json dict) of every case above."""
    from ..catalog import preset
    out = [(name, preset(name)["config"]) for name in PRESETS]
    for family in ARCHITECTURES:
        out.append((family, default_case(family)))
    return out


def default_case(family: str) -> dict:
    """The config class's defaults for ``family`` under the architecture SGLang runs it as (ARCHITECTURES),
    with SET's fields."""
    from .transformers import default_config
    cfg = {**default_config(WRAPPERS.get(family, family)).to_dict(), **SET.get(family, {}),
           "architectures": [ARCHITECTURES[family]]}
    if family in WRAPPERS:   # the text model_type the checkpoints publish (transformers renames EXAONE-4.5's exaone4)
        cfg["text_config"]["model_type"] = family
    return cfg

KV_BYTES = 2   # bf16


def _model_config(cfg: dict):
    _load_sglang()   # the torchvision stand-in, before SGLang's config package is imported
    import logging
    import warnings

    from sglang.srt.configs.model_config import ModelConfig
    warnings.filterwarnings("ignore")
    logging.getLogger("sglang").setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory() as path:
        with open(os.path.join(path, "config.json"), "w") as f:
            json.dump(cfg, f)
        return ModelConfig(path, trust_remote_code=False)


def sglang_view(cfg: dict, tp: int = 1) -> dict:
    """What SGLang's ModelConfig says the pools hold (see the module docstring)."""
    _load_sglang()   # the torchvision stand-in first
    from sglang.srt.runtime_context import get_parallel
    # the widths a launched server publishes (runtime_context.py): one attention-TP group of tp ranks
    with get_parallel().override(tp_size=tp, attn_tp_size=tp, enable_cp_tp_group_sharing=False):
        return _view(cfg, tp)


def _view(cfg: dict, tp: int) -> dict:
    from sglang.srt.configs.hybrid_arch import mambaish_config
    from sglang.srt.configs.model_config import AttentionArch, dsa_layer_skips_topk, is_deepseek_dsa
    mc = _model_config(cfg)
    mamba = mambaish_config(mc)
    swa, linear, state = [], [], 0
    if mamba is not None:
        full = list(mamba.full_attention_layer_ids)
        params = mamba.mamba2_cache_params
        linear, state = list(params.layers), int(params.mamba_cache_per_req)
    elif mc.is_hybrid_swa:
        full, swa = list(mc.full_attention_layer_ids), list(mc.swa_attention_layer_ids)
    else:   # every attention of every layer (LongCat-Flash: two per layer, num_attention_layers)
        full = list(range(mc.num_attention_layers))
    rows, index = {}, {}
    if not full and not swa:
        pass   # a pure SSM model: no KV pool layer
    elif mc.attention_arch == AttentionArch.MLA:
        rows["full"] = (mc.kv_lora_rank + mc.qk_rope_head_dim) * KV_BYTES
        if getattr(mc, "index_head_dim", None) and is_deepseek_dsa(mc.hf_config):
            index = {i: not dsa_layer_skips_topk(mc.hf_config, i) for i in full}
    else:
        rows["full"] = mc.get_num_kv_heads(tp) * (mc.head_dim + mc.v_head_dim) * KV_BYTES
        if swa:
            rows["swa"] = mc.get_swa_num_kv_heads(tp) * (mc.swa_head_dim + mc.swa_v_head_dim) * KV_BYTES
    return {"arch": "mla" if mc.attention_arch == AttentionArch.MLA else "mha", "full": sorted(full),
            "swa": sorted(swa), "linear": sorted(linear), "rows": rows, "indexer": index, "state": state}


def kvmem_view(cfg: dict, tp: int = 1) -> dict:
    """The same quantities from kvmem's model and its SGLang layout."""
    model = sglang_model(Model.from_hf_config(cfg))   # as SGLang's own config class fills a left-out field
    options = {k: v for k, v in DEFAULTS.items() if k not in ("version",)}
    layout = make_layout(model, kv_dtype="bf16", tp=tp, **options)
    rows = {role: layout.k_row[role] + layout.v_row[role] for role in layout.k_row}
    index = {}
    if layout.kind == "nsa":
        index = {i: bool(model.layers[i].index_head_dim) for i in layout.full}
    state = sum(sum(state_parts_of(model, layout, i, tp)) for i in layout.linear)
    return {"arch": "mha" if layout.kind == "mha" else "mla", "full": list(layout.full), "swa": list(layout.swa),
            "linear": list(layout.linear), "rows": rows, "indexer": index, "state": state}


def backend_writes(cfg: dict, device: str = "meta") -> dict[int, int]:
    """What SGLang's Transformers backend writes to the pool per token, layer by layer, in bytes at bf16: the
    transformers AutoModel of ``cfg`` built on the meta device with SGLang's attention implementation
    (python/sglang/srt/models/transformers.py: ``_attn_implementation = "sglang"``, AutoModel.from_config,
    sglang_flash_attention_forward) and run on five tokens, each layer's RadixAttention replaced by a recorder
    that checks K and V fit the instance the backend makes (_create_attention_instances: num_key_value_heads
    or num_attention_heads, head_dim or hidden_size // num_attention_heads, as RadixAttention.forward views
    them) and notes their widths. A layer the model never hands to the attention function writes nothing.
    ``device="cpu"`` runs a small config for real (models whose forward reads values)."""
    _load_sglang()
    import sglang.srt.models.transformers  # noqa: F401  (registers the "sglang" attention function)
    import torch
    import transformers
    config = transformers.AutoConfig.for_model(**{k: v for k, v in cfg.items() if k != "architectures"})
    config.architectures = cfg.get("architectures")
    text = config.get_text_config()
    text._attn_implementation = "sglang"
    # as _create_attention_instances reads them (a field present but None stays None: SGLang fails there too)
    heads = text.num_attention_heads
    kv = getattr(text, "num_key_value_heads", heads)
    head_dim = getattr(text, "head_dim", text.hidden_size // heads)
    if not isinstance(kv, int) or not isinstance(head_dim, int):
        raise ValueError(f"the Transformers backend's RadixAttention gets num_kv_heads {kv!r}, head_dim {head_dim!r}")
    written = {i: 0 for i in range(text.num_hidden_layers)}

    class Recorder:   # the RadixAttention of one layer
        def __init__(self, layer):
            self.layer, self.scaling = layer, None

        def forward(self, q, k, v, **_):   # forward_batch
            k.view(-1, kv, head_dim), v.view(-1, kv, head_dim)   # raises where they do not fit
            if k.shape[0] * k.shape[1] != q.shape[0] * kv * head_dim or k.shape != v.shape:
                raise ValueError(f"layer {self.layer}: K {tuple(k.shape)}, V {tuple(v.shape)} do not fit {kv} x "
                                 f"{head_dim}")
            written[self.layer] = (k.shape[-1] + v.shape[-1]) * KV_BYTES
            return torch.zeros(q.shape[0], heads * head_dim, dtype=q.dtype, device=q.device)

    import torch.fx.experimental._config as fx_config
    fx_config.meta_nonzero_assume_all_nonzero = True   # X-MOD's adapter selects rows by language on meta tensors
    # Mistral-Small-4's MoE experts (torch._grouped_mm) take bf16 only; SGLang swaps them for its own fused MoE
    dtype = torch.bfloat16 if text.model_type == "mistral4" else None
    with torch.device(device):
        model = transformers.AutoModel.from_config(config, dtype=dtype)
        ids = torch.ones(1, 5, dtype=torch.long)
        model(input_ids=ids, position_ids=torch.arange(5)[None], use_cache=False, return_dict=False,
              forward_batch=None, attention_instances={i: Recorder(i) for i in written})
    return written


def run_config(name: str, cfg: dict, tp: int = 1) -> list[Check]:
    """kvmem's layout of ``cfg`` beside SGLang's ModelConfig, quantity by quantity; for a family SGLang runs
    through its Transformers backend, also what the backend writes per layer (backend_writes) beside
    kvmem's row of that layer."""
    ours, theirs = kvmem_view(cfg, tp), sglang_view(cfg, tp)
    checks = [Check(name, key, ours[key], theirs[key]) for key in theirs]
    if Model.from_hf_config(cfg).model_type in {*NO_PLANS, *EXPANDED_MLA, "exaone4_5_text"}:
        rows = {i: ours["rows"]["full"] for i in ours["full"]}
        # the recorder runs the unsharded model; a rank's RadixAttention holds 1/tp of the heads (divide())
        writes = {i: row // tp for i, row in backend_writes(cfg).items()}
        checks.append(Check(name, "backend bytes per token per layer (a rank's)", rows, writes))
    return checks


def variations(cfg: dict, n: int, seed: int) -> list[tuple[dict, int]]:
    """``n`` seeded variations of a real config: its KV heads (a divisor of the query heads), its MLA
    latent and rope widths, its head_dim, and tp (1, 2 or 4 where it divides the query heads and divides
    or is divided by the KV heads)."""
    rng = random.Random(seed)
    text = "text_config" if isinstance(cfg.get("text_config"), dict) else None
    out = []
    for _ in range(n):
        varied = json.loads(json.dumps(cfg))
        inner = varied[text] if text else varied
        if inner.get("model_type") == "mamba2":   # the groups, and a tp the mixer accepts (tp | groups, or 1 group)
            inner["n_groups"] = groups = rng.choice((1, 2, 4, 8))
            out.append((varied, rng.choice([t for t in (1, 2, 4) if groups % t == 0 or groups == 1])))
            continue
        heads = inner.get("num_attention_heads")
        if isinstance(inner.get("num_key_value_heads"), int) and isinstance(heads, int) \
                and inner.get("model_type") not in EXPANDED_MLA:   # those expand the latent to every query head
            inner["num_key_value_heads"] = rng.choice([d for d in range(1, heads + 1) if heads % d == 0])
        if inner.get("model_type") in EXPANDED_MLA:   # the backend's fit: nope + rope = v_head_dim = head_dim
            inner["qk_rope_head_dim"] = rope = rng.choice((32, 64))
            inner["head_dim"] = inner["v_head_dim"] = width = rng.choice((96, 128, 192))
            inner["qk_nope_head_dim"] = width - rope
            inner["rope_parameters"] = {**(inner.get("rope_parameters") or {}), "partial_rotary_factor": rope / width}
            inner["kv_lora_rank"] = rng.choice((128, 256, 512))
        elif isinstance(inner.get("kv_lora_rank"), int):
            inner["kv_lora_rank"] = rng.choice((128, 256, 512))
            inner["qk_rope_head_dim"] = rng.choice((32, 64))
        elif isinstance(inner.get("head_dim"), int):
            inner["head_dim"] = rng.choice((64, 128, 256))
        if inner.get("model_type") in NO_PLANS:   # MHA, no head_dim field: vary the heads; tp 1 only (no tp plan)
            count, width = (("num_attention_heads", "hidden_size") if "hidden_size" in inner
                            else ("attention_heads", "embed_dim"))   # Kosmos-2.5's text config
            inner[count] = heads = rng.choice([h for h in (4, 8, 12, 16, 32) if inner[width] % h == 0])
        kv = inner.get("num_key_value_heads") if isinstance(inner.get("num_key_value_heads"), int) else heads
        tps = [t for t in (1, 2, 4) if isinstance(heads, int) and heads % t == 0
               and isinstance(kv, int) and (kv % t == 0 or t % kv == 0)
               and (t == 1 or inner.get("model_type") not in NO_PLANS)
               # the Transformers backend divides the KV heads by tp (no replication)
               and (kv % t == 0 or inner.get("model_type") not in BACKEND_WITH_PLANS)] or [1]
        out.append((varied, rng.choice(tps)))
    return out


def minimax_pool_checks(name: str, cfg: dict, tp: int = 1, num_tokens: int = 1000, page_size: int = 1) -> list[Check]:
    """MiniMax-M3's pools: SGLang's own MiniMaxSparseKVPool (python/sglang/srt/mem_cache/memory_pool.py), built on
    the CPU for ``num_tokens`` with the layers, heads and widths SGLang's ModelConfig reads from ``cfg``
    (get_minimax_sparse_attention_config, get_minimax_sparse_layer_ids, get_minimax_sparse_disable_value_layer_ids,
    get_num_kv_heads(tp), head_dim, sparse_index_dim; the index dtype get_minimax_sparse_index_dtype gives off Hopper
    and without fp8 attention GEMMs: the model's), beside kvmem's pools() for the same model: each sub-pool's K and
    V bytes and the "KV Cache is allocated" lines they log, and the profile's cell (bytes a pool token costs)."""
    s = _load_sglang()
    import torch
    from sglang.srt.configs.model_config import (
        get_minimax_sparse_attention_config,
        get_minimax_sparse_disable_value_layer_ids,
        get_minimax_sparse_layer_ids,
    )
    from sglang.srt.runtime_context import get_parallel

    from ..engines.sglang.pools import cell_size, pools
    mc = _model_config(cfg)
    sparse = get_minimax_sparse_attention_config(mc.hf_config)
    dense_ids, sparse_ids = get_minimax_sparse_layer_ids(sparse)
    with get_parallel().override(tp_size=tp, attn_tp_size=tp, enable_cp_tp_group_sharing=False):
        heads = mc.get_num_kv_heads(tp)
    index_dtype = s.pool.get_minimax_sparse_index_dtype(fp8_attn_gemm=False, kv_cache_dtype=torch.bfloat16,
                                                        model_dtype=mc.dtype)
    del s.lines[:]
    pool = s.pool.MiniMaxSparseKVPool(size=num_tokens, page_size=page_size, dtype=torch.bfloat16, head_num=heads,
                                      head_dim=mc.head_dim, idx_head_dim=sparse["sparse_index_dim"],
                                      dense_layer_ids=dense_ids, sparse_layer_ids=sparse_ids, device="cpu",
                                      disable_value_sparse_layer_ids=get_minimax_sparse_disable_value_layer_ids(sparse),
                                      index_dtype=index_dtype, start_layer=0, end_layer=mc.num_hidden_layers)
    theirs = [tuple(int(x) for x in sub.get_kv_size_bytes())
              for sub in (pool.main_pool, pool.index_kv_pool, pool.index_k_pool) if sub is not None]
    lines = [line for line in s.lines if line.startswith("KV Cache is allocated")]
    del pool
    model = Model.from_hf_config(cfg)
    ours = pools(model, num_tokens=num_tokens, kv_dtype="bf16", tp=tp, page_size=page_size)
    return [Check(name, "pools' (K, V) bytes", [(p.k_bytes, p.v_bytes) for p in ours], theirs),
            Check(name, "log lines", [p.log_line() for p in ours], lines),
            Check(name, "cell bytes per token", cell_size(model, kv_dtype="bf16", tp=tp, page_size=page_size),
                  sum(k + v for k, v in theirs) // (num_tokens + page_size))]


def minimax_variations(cfg: dict, n: int, seed: int) -> list[tuple[dict, int, int, int]]:
    """``n`` seeded variations of a MiniMax-M3 (VL) config: KV heads, head_dim, the sparse layers, which of them keep
    an index value, the index width; with a tp (dividing the query heads, dividing or divided by the KV heads),
    #tokens and page size: (config, tp, num_tokens, page_size)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        varied = json.loads(json.dumps(cfg))
        text = varied["text_config"]
        layers = text["num_hidden_layers"] = rng.choice((4, 8, 12))
        heads = text["num_attention_heads"]
        kv = text["num_key_value_heads"] = rng.choice([d for d in (1, 2, 4, 8) if heads % d == 0])
        text["head_dim"] = rng.choice((64, 128))
        sparse = text["sparse_attention_config"]
        sparse["sparse_attention_freq"] = [rng.choice((0, 1)) for _ in range(layers)]
        sparse["sparse_disable_index_value"] = [rng.choice((0, 1)) for _ in range(layers)]
        sparse["sparse_index_dim"] = rng.choice((64, 128, 256))
        for key in ("layer_types", "mlp_layer_types"):
            text.pop(key, None)
        if "moe_layer_freq" in text:
            text["moe_layer_freq"] = text["moe_layer_freq"][:layers]
        tp = rng.choice([t for t in (1, 2, 4) if heads % t == 0 and (kv % t == 0 or t % kv == 0)])
        out.append((varied, tp, rng.randint(1, 5000), rng.choice((1, 16, 64))))
    return out

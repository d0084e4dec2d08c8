"""SGLang past plain tensor parallelism: data-parallel attention and expert parallelism (issue 36).

Six options, declared here and added to the engine's options (kvmem.engines.sglang SPECS):

    attn_dp_size               --attn-dp-size N (0.5.23's spelling of the deprecated ``--dp-size N
                               --enable-dp-attention``,
                               sglang@v0.5.23 python/sglang/srt/arg_groups/parallel_hook.py#L39-L62):
                               N attention groups of attn_tp = tp // N ranks
    ep_size                    --ep-size N: N ranks share the routed experts, each expert split again over
                               moe_tp = tp // N
                               (sglang@v0.5.23 python/sglang/srt/layers/moe/fused_moe_triton/layer.py#L403-L416)
    ep_num_redundant_experts   --ep-num-redundant-experts R: R extra physical experts (EPLB), held beside the
                               routed ones (sglang@v0.5.23 python/sglang/srt/models/deepseek_v2.py#L750-L756)
    nnodes                     --nnodes N: the GPUs spread over N nodes (the plan's command; sizing is per GPU)
    enable_dp_lm_head          --enable-dp-lm-head: an untied lm_head over attn_tp, not tp (under attention DP;
                               SGLang turns it off without, arg_groups/overrides.py#L1366-L1370)
    moe_dense_tp_size          --moe-dense-tp-size 1: the dense (first_k_dense_replace) MLP layers whole on every GPU,
                               in the files that read it (MOE_DENSE_TP_ARCHITECTURES)

What changes per GPU (kvmem.parallel has the shared rules):
- KV: the pool is laid out for attn_tp (pool_configurator.py#L356 ``tp_size = get_parallel().attn_tp_size``,
  #L438 get_num_kv_heads(attn_tp_size)); each attention group keeps its own requests, so a tp group of
  attn_dp groups holds attn_dp pools (``kv_groups``). An MLA latent is the same on every rank, so an MLA
  model's pool per GPU is unchanged by attn_dp but the tp group holds attn_dp times the tokens.
- Weights: the attention projections split over attn_tp (models/deepseek_v2.py#L2051-L2093
  parallel_group="attn_tp"), the input embedding over attn_tp too (layers/vocab_parallel_embedding.py
  #L166-L185 get_embedding_tp_kwargs: use_attn_tp_group under DP attention); lm_head, the dense and shared
  MLPs and the experts stay over tp (deepseek_v2.py#L3291-L3296 lm_head use_attn_tp_group only with
  --enable-dp-lm-head; #L2664-L2672 the dense MLP over tp unless moe_dense_tp_size is 1; #L888-L897 shared
  experts over tp with the default moe_a2a_backend none). Redundant experts add R / (E x tp) of the routed
  experts' bytes.
- Reserve: the default mem_fraction_static adds max_bs x attn_dp x 3 MiB, and x 1.5 more when the decode
  graph's max_bs is above 300 (arg_groups/memory_hook.py#L370-L378 reserve_for_graph_mb), before the
  10 GiB floor (#L313-L315); kvmem.engines.sglang.budget applies it.
- Requests: --max-running-requests is divided among the attention groups (mem_cache/kv_cache_configurator.py
  #L3130-L3132 resolve_max_num_reqs: max(1, max_running_requests // attn_dp_size) per DP worker).

Sized here (DP_ATTENTION): the architectures whose model file lays attention out for attn_tp, each with the
same placement (cited at the table). Refused with their file's reason (DP_ATTENTION_REFUSED): the files whose
attention splits heads over the whole tp group. Any other architecture is refused by name as not read (a gap).
pp with attn_dp_size is not sized. The weights per GPU are kvmem/engines/sglang/dp_weights.py; the disaggregated
prefill/decode roles kvmem/engines/sglang/disagg.py.
"""

from __future__ import annotations

from ...model import Model
from ...parallel import attention_tp, check_expert_parallel
from ...units import require_positive_int
from ..declared import Option
from .own_configs import sglang_model

__all__ = ["deepep", "head_and_dense", "check", "PARALLEL_DEFAULTS", "DECLARED", "settings", "kv_tp",
           "split_options", "kv_groups", "MOE_DENSE_TP_ARCHITECTURES", "DP_ATTENTION_ARCHITECTURES", "DP_ATTENTION",
           "DP_ATTENTION_REFUSED", "estimate", "capacity"]

PARALLEL_DEFAULTS = {
    "attn_dp_size": 1,               # sglang@v0.5.23 python/sglang/srt/arg_groups/fields/parallel.py#L81-L90
    "ep_size": 1,                    # fields/parallel.py#L281-L288
    "ep_num_redundant_experts": 0,   # fields/exec_.py#L914
    "nnodes": 1,                     # fields/parallel.py#L43 (launch only: the command's --nnodes)
    "enable_dp_lm_head": False,      # fields/parallel.py#L199-L205
    "moe_dense_tp_size": 0,          # fields/parallel.py#L289-L295 (None there: 0 here, unset)
    "moe_a2a_backend": "none",       # --moe-a2a-backend (kvmem: none or deepep)
}
DECLARED = (
    Option("attn_dp_size", 1, help="--attn-dp-size: data-parallel attention groups of tp // N ranks, each with "
                                   "its own requests and KV pool (was --dp-size N --enable-dp-attention)"),
    Option("ep_size", 1, help="--ep-size: expert-parallel ranks sharing the routed experts (divides tp)"),
    Option("ep_num_redundant_experts", 0, help="--ep-num-redundant-experts: extra physical experts (EPLB)"),
    Option("nnodes", 1, help="--nnodes: nodes the GPUs are spread over (the plan's command; sizing is per GPU)"),
    Option("enable_dp_lm_head", False, help="--enable-dp-lm-head: lm_head split over attn_tp, not tp (attention "
                                            "DP only; SGLang turns it off without)"),
    Option("moe_dense_tp_size", 0, choices=(0, 1),
           help="--moe-dense-tp-size 1: DeepSeek/GLM dense MLP layers whole on every GPU (0: unset, over tp)"),
    Option("moe_a2a_backend", "none", choices=("none", "deepep"),
           help="--moe-a2a-backend deepep: DeepEP all-to-all, ep_size = tp and 2 GiB more reserved (MoE models "
                "without shared experts)"),
)
# Model files that read moe_dense_tp_size: their dense (first_k_dense_replace) MLP layers are "replicated" when it is
# 1 (layers/layer_boundary/layout.py#L83-L84 is_dense_ffn_fully_dp); every other file kvmem has read never reads it.
# sglang@v0.5.23 python/sglang/srt/models/deepseek_v2.py#L2665-L2673 DeepseekV2MLP, glm4_moe.py#L745-L753 Glm4MoeMLP
MOE_DENSE_TP_ARCHITECTURES = ("DeepseekV3ForCausalLM", "DeepseekV2ForCausalLM", "Glm4MoeForCausalLM")
# Model files whose attention SGLang 0.5.23 splits over attn_tp, the input embedding with it
# (VocabParallelEmbedding(use_attn_tp_group=is_dp_attention_enabled())), lm_head over tp unless --enable-dp-lm-head
# (ParallelLMHead(use_attn_tp_group=enable_dp_lm_head)), dense MLPs and shared experts over tp with the defaults,
# experts over moe_tp x ep. Per file: attention; embedding; lm_head; MLPs.
DP_ATTENTION = {
    # sglang@v0.5.23 python/sglang/srt/models/deepseek_v2.py#L2051-L2093 MLA over attn_tp; the embedding
    # layers/vocab_parallel_embedding.py#L166-L185; lm_head #L3291-L3296; dense MLP #L2664-L2672; shared #L888-L897
    "DeepseekV3ForCausalLM": "deepseek_v2.py",
    "DeepseekV2ForCausalLM": "deepseek_v2.py",
    # sglang@v0.5.23 python/sglang/srt/models/qwen3_moe.py#L502-L541; embedding qwen2_moe.py#L1115-L1118;
    # lm_head qwen3_moe.py#L1017-L1022; dense layers' Qwen2MoeMLP (#L854) parallel_group "tp" (qwen2_moe.py#L180)
    "Qwen3MoeForCausalLM": "qwen3_moe.py",
    # sglang@v0.5.23 python/sglang/srt/models/qwen2_moe.py#L911-L949; embedding #L1115-L1118; lm_head
    # #L1238-L1243; shared_expert over tp unless fused (#L362-L370)
    "Qwen2MoeForCausalLM": "qwen2_moe.py",
    # sglang@v0.5.23 python/sglang/srt/models/qwen3.py#L164-L211; embedding qwen2.py#L370-L374 (Qwen2Model);
    # lm_head qwen3.py#L582-L586; the MLP Qwen2MLP (#L403) over tp (qwen2.py#L85-L98)
    "Qwen3ForCausalLM": "qwen3.py",
    # sglang@v0.5.23 python/sglang/srt/models/glm4_moe.py#L234-L273; embedding #L880-L883; lm_head #L999-L1004;
    # dense MLP "replicated" only with moe_dense_tp_size 1 (#L745), shared experts over tp, moe_a2a none (#L471-L486)
    "Glm4MoeForCausalLM": "glm4_moe.py",
    # sglang@v0.5.23 python/sglang/srt/models/gpt_oss.py#L391-L438; embedding #L659-L662; lm_head #L768-L773;
    # no dense MLP, no shared experts
    "GptOssForCausalLM": "gpt_oss.py",
}
DP_ATTENTION_ARCHITECTURES = tuple(DP_ATTENTION)
# Model files whose attention splits its heads over get_parallel().tp_size, the whole tp group, not attn_tp, while
# the KV pool is laid out for attn_tp (model_executor/pool_configurator.py#L356): no attention-DP layout to size.
DP_ATTENTION_REFUSED = {
    "LlamaForCausalLM": "llama.py#L181-L194", "MistralForCausalLM": "llama.py#L181-L194 (mistral.py#L33)",
    "Phi3ForCausalLM": "llama.py#L181-L194 (llama.py#L956)", "Qwen2ForCausalLM": "qwen2.py#L165-L178",
    "Gemma2ForCausalLM": "gemma2.py#L114-L117", "Gemma3ForCausalLM": "gemma3_causal.py#L137-L141",
    "MixtralForCausalLM": "mixtral.py#L137-L140",
}


def deepep(options: dict) -> bool:
    """--moe-a2a-backend deepep given (none, SGLang's default, otherwise)."""
    backend = options.get("moe_a2a_backend") or "none"
    if backend not in ("none", "deepep"):
        raise ValueError(f"kvmem sizes moe_a2a_backend none or deepep, got {backend!r}")
    return backend == "deepep"


def head_and_dense(options: dict, tp: int) -> tuple[bool, bool]:
    """(--enable-dp-lm-head given, dense MLPs replicated: --moe-dense-tp-size 1), checked."""
    dp_head = options.get("enable_dp_lm_head", False)
    if not isinstance(dp_head, bool):
        raise ValueError(f"enable_dp_lm_head must be True or False, got {dp_head!r}")
    dense = options.get("moe_dense_tp_size") or 0   # None (SGLang's unset, as a log prints it) is 0
    if isinstance(dense, bool) or not isinstance(dense, int) or dense not in (0, 1, tp):
        # sglang@v0.5.23 python/sglang/srt/arg_groups/validation_hook.py#L207-L211
        raise ValueError(f"moe_dense_tp_size must be unset, 1 or tp={tp} (SGLang 0.5.23: 'moe_dense_tp_size only "
                         f"supports None, 1, or tp_size currently'), got {dense!r}")
    return dp_head, dense == 1 and tp > 1


def settings(options: dict) -> tuple[int, int, int]:
    """(attn_dp_size, ep_size, ep_num_redundant_experts) from engine options, checked."""
    attn_dp = require_positive_int("attn_dp_size", options.get("attn_dp_size", 1))
    ep = require_positive_int("ep_size", options.get("ep_size", 1))
    redundant = options.get("ep_num_redundant_experts", 0)
    if isinstance(redundant, bool) or not isinstance(redundant, int) or redundant < 0:
        raise ValueError(f"ep_num_redundant_experts must be a non-negative integer, got {redundant!r}")
    return attn_dp, ep, redundant


def split_options(options: dict) -> tuple[dict, dict]:
    """(the parallel options, the rest): the pool functions take only the rest."""
    parallel = {name: options[name] for name in PARALLEL_DEFAULTS if name in options}
    return parallel, {name: value for name, value in options.items() if name not in PARALLEL_DEFAULTS}


def check(model: Model, tp: int, pp: int, options: dict) -> tuple[int, int, int]:
    """The settings, refused where SGLang refuses them or kvmem does not size them (with which)."""
    attn_dp, ep, redundant = settings(options)
    attention_tp(tp, attn_dp)
    if attn_dp > 1:
        arch = model.facts.architectures[0] if model.facts.architectures else model.model_type
        if arch in DP_ATTENTION_REFUSED:
            raise ValueError(f"SGLang 0.5.23 has no attention-DP layout for {arch} ({model.name}): its model file "
                             f"python/sglang/srt/models/{DP_ATTENTION_REFUSED[arch]} splits the attention heads over "
                             "the whole tp group (tp_size), not attn_tp_size, while the KV pool is laid out for "
                             "attn_tp_size; give attn_dp_size 1")
        if arch not in DP_ATTENTION:
            raise ValueError(f"kvmem sizes attn_dp_size > 1 for {', '.join(DP_ATTENTION)} only (their model "
                             f"files are read, python/sglang/srt/models/); {model.name} is {arch}, whose file kvmem "
                             "has not read")
        if pp > 1:
            raise ValueError("kvmem sizes attn_dp_size > 1 with pp = 1 only; got pp={pp}".format(pp=pp))
    if ep > 1 or redundant:
        moe = model.facts.moe
        if moe is None or not moe.experts:
            raise ValueError(f"ep_size / ep_num_redundant_experts split routed experts; {model.name} has none")
        check_expert_parallel(tp, ep, moe.experts, redundant)
    _dp_head, dense = head_and_dense(options, tp)
    if deepep(options):
        moe = model.facts.moe
        if moe is None or not moe.experts:
            raise ValueError(f"moe_a2a_backend deepep dispatches routed experts; {model.name} has none")
        if model.config.get("n_shared_experts") or model.config.get("shared_expert_intermediate_size"):
            # sglang@v0.5.23 python/sglang/srt/models/deepseek_v2.py#L871-L897 (glm4_moe.py#L471-L486,
            # qwen2_moe.py#L362-L380): shared experts replicated under DeepEP, or fused into the routed experts
            raise ValueError(f"kvmem sizes moe_a2a_backend deepep for MoE models without shared experts; "
                             f"{model.name}'s shared experts are whole on every GPU under DeepEP or fused into the "
                             "routed experts by a load-time choice (layers/moe/utils.py get_num_fused_shared_experts) "
                             "kvmem has not modelled")
        # the expert-parallel group spans tp (arg_groups/overrides.py#L1611-L1620 _a2a_ep_size)
        check_expert_parallel(tp, tp, moe.experts, redundant)
    arch = model.facts.architectures[0] if model.facts.architectures else model.model_type
    if dense and arch not in MOE_DENSE_TP_ARCHITECTURES and arch not in DP_ATTENTION and \
            arch not in DP_ATTENTION_REFUSED:
        raise ValueError(f"kvmem sizes moe_dense_tp_size 1 for the model files it has read; {model.name} is {arch}, "
                         "whose file it has not read (its dense MLPs may be replicated)")
    return attn_dp, ep, redundant


def kv_tp(model: Model, tp: int, pp: int, options: dict) -> tuple[int, dict]:
    """(the tp SGLang lays the KV pool out for: attn_tp, the options without the parallel ones)."""
    parallel, rest = split_options(options)
    attn_dp, _ep, _r = check(model, tp, pp, parallel)
    return attention_tp(tp, attn_dp), rest


def kv_groups(options: dict) -> int:
    """KV pools (request groups) in one tp group: attn_dp_size."""
    return settings(options)[0]


def estimate(model: Model, *, tp: int, pp: int, **options):
    """entry.estimate for one GPU of an attention group: the pool laid out for attn_tp."""
    from .entry import estimate as pool_estimate
    model = sglang_model(model)   # as SGLang's own config class reads the file (own_configs)
    tp_kv, rest = kv_tp(model, tp, pp, options)
    return pool_estimate(model, tp=tp_kv, pp=pp, **rest)


def capacity(model: Model, *, tp: int, pp: int, **options):
    """entry.capacity for one GPU of an attention group (its own pool, its own requests)."""
    from ..results import with_note
    from .entry import capacity as pool_capacity
    model = sglang_model(model)
    tp_kv, rest = kv_tp(model, tp, pp, options)
    cap = pool_capacity(model, tp=tp_kv, pp=pp, **rest)
    groups = kv_groups(options)
    requests = getattr(cap.details, "max_running_requests", None)     # None: no request cap in the pool
    if groups > 1 and cap.refusal is None and requests:
        cap = with_note(cap, f"{groups} attention groups of {tp_kv} GPU{'s' * (tp_kv != 1)}, each with this pool: "
                             f"{cap.tokens * groups:,} tokens and up to {requests * groups:,} requests at once in the "
                             f"tp group ({requests:,} a group, max_running_requests per DP worker)")
    return cap

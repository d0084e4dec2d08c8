"""Parameter counts from a config: embeddings, attention, MLP/MoE, norms; total and active.

    embeddings  vocab x hidden (x 2 unless tie_word_embeddings), + learned positions (GPT-2)
    attention   q: hidden x heads x head_dim; k, v: hidden x kv_heads x head_dim; o: heads x head_dim x hidden
    MLA         q_a/q_b (or q), kv_a: hidden x (kv_lora_rank + rope), kv_b: kv_lora_rank x heads x
                (nope + v_head_dim), o: heads x v_head_dim x hidden (DeepSeek-V2 paper, sec. 2.1)
    gated MLP   3 x hidden x intermediate (gate, up, down); plain MLP 2 x hidden x intermediate
    MoE layer   experts x expert MLP + shared experts + router (hidden x experts)
Active parameters are the weights one decoded token reads: every dense weight, the top-k
routed experts, the output head — but not the input embedding table, of which a token
reads one row (unless it is tied to the output head). This is the convention of
DeepSeek-V3 (671B total, 37B active) and gpt-oss (116.8B, 5.1B); Qwen's model cards
count the embedding table too (Qwen3-30B-A3B "3.3B activated").
    linear/SSM  Qwen3-Next gated DeltaNet, Mamba-1 (Jamba) and Mamba-2 (Nemotron-H) projections
Norms and biases are counted where the family has them. Multi-token-prediction / NextN layers
are not counted in any family (num_nextn_predict_layers, num_mtp_modules: DeepSeek-V3's 671B,
GLM-5's 744B, MiMo-V2-Flash's 309B, DeepSeek-V4's 284B / 1.6T all leave them out); nor is a
router's e_score_correction_bias where transformers keeps it a buffer (DeepSeek-V3, GLM-5,
Kimi), while Laguna's, a parameter there, is. A multimodal wrapper counts its text model and head.
The 2026 families whose layers differ from the generic one are laid out in params_new.py
(glm_moe_dsa's indexer is here) and the Mamba-2 families in params_ssm.py; each family's count
equals transformers 5.24's model built on the meta device (tests/oracles/test_params_oracle.py),
Kimi-K3's (no transformers class) SGLang's layout by hand. The families in _UNSUPPORTED and
configs whose layout is not laid out (an abridged Gemma-3n, a DeepSeek-V4 with n_shared_experts
other than 1, ...) return None: a guess would be silent; fit then asks for the weight bytes, or
reads them exactly from the checkpoint's headers.
"""

from __future__ import annotations

from ..errors import ConfigError
from ..facts import MoeShape
from ..layer import CHUNKED, FULL, LINEAR, MLA, NONE, SHARED, SLIDING
from ..units import cdiv, show_value
from .params_new import NEW_FAMILIES, body
from .params_ssm import SSM_FAMILIES, ssm_body

__all__ = ["count_params"]

_PLAIN_MLP = {"gpt2", "gpt_neox", "falcon", "gpt_bigcode", "starcoder2", "phi", "nemotron_h"}
_QKV_BIAS = {"qwen2", "qwen2_moe", "qwen2_5_vl_text", "mimo"}
_UNSUPPORTED = {"dbrx", "ernie4_5_vl_moe_text", "modernbert-decoder", "kosmos_2_5_text_model",
                "inkling_text", "zaya", "longcat_flash", "mistral_large4_text", "bailing_hybrid", "inkling2_text",
                "inkling2_loop_text", "step3p5"}
# MoE layouts kvmem does not read (the parameter count refuses these families, and nothing else reads
# their MoE shape): Ernie-4.5-VL lists [text, vision] experts in moe_num_experts / moe_intermediate_size;
# LongCat-Flash adds zero-computation experts (zero_expert_num) of expert_ffn_hidden_size
_UNREAD_MOE = {"ernie4_5_vl_moe_text", "longcat_flash"}
# MiniMax-M3's text model under its three names (transformers' minimax_m3_vl_text; MiniMax's files and vLLM's
# config class: minimax_m3, minimax_m3_text)
_M3 = ("minimax_m3_vl_text", "minimax_m3", "minimax_m3_text")


def moe_shape(f, n_layers: int) -> MoeShape | None:
    """The MoE MLP of a config (None for a dense model): the one reader of these fields."""
    t = f.model_type
    if t in _UNREAD_MOE:
        return None
    if t == "nemotron_h" and "E" not in str(f.get("hybrid_override_pattern", default="")):
        # transformers' NemotronHConfig carries MoE defaults (n_routed_experts=8, for the MoE
        # Nemotron-H models) that a dense checkpoint's config.json never overrides: only "E"
        # blocks of hybrid_override_pattern are MoE.
        return None
    experts = f.int("n_routed_experts", "num_local_experts", "num_experts", "moe_num_experts", default=None,
                    minimum=0)
    if not experts or experts <= 1:
        return None
    # Gemma 4 names its routed top-k top_k_experts (transformers@5.24.0 models/gemma4/configuration_gemma4.py)
    top_k = f.int("num_experts_per_tok", "num_experts_per_token", "moe_top_k", "top_k", "top_k_experts", default=2)
    expert_inter = f.int("moe_intermediate_size", default=None) or f.int("intermediate_size")
    # MiniMax-M3's dense layers are dense_intermediate_size wide, 12,288 by default (intermediate_size is its
    # experts' width: transformers@v5.24.0 src/transformers/models/minimax_m3_vl/configuration_minimax_m3_vl.py#L105)
    dense_inter = f.int("dense_intermediate_size", default=12288, minimum=0) if t in _M3 else \
        f.int("intermediate_size_mlp", "intermediate_size", default=0, minimum=0)
    shared_inter = 0
    if t == "nemotron_h" and f.get("moe_shared_expert_intermediate_size", default=None):
        shared_inter = f.int("moe_shared_expert_intermediate_size")   # one shared expert of its own width
    elif t in _M3 and f.get("shared_intermediate_size", default=None):
        # MiniMaxM3VLSparseMoeBlock's shared_experts: one MLP of shared_intermediate_size (modeling_minimax_m3_vl.py)
        shared_inter = f.int("shared_intermediate_size")
    elif t == "kimi_linear" and f.get("num_shared_experts", "n_shared_experts", default=None):
        # KimiLinearConfig.attribute_map: n_shared_experts -> num_shared_experts, the config.json's name
        # (transformers@5.24.0 models/kimi_linear/configuration_kimi_linear.py#L66-L73)
        shared_inter = f.int("num_shared_experts", "n_shared_experts") * expert_inter
    elif t == "hy_v3":
        # HYV3MoE's shared_experts: one MLP of moe_intermediate_size x num_shared_experts (1 by default)
        # (transformers@5.24.0 models/hy_v3/modeling_hy_v3.py#L348-L349, configuration_hy_v3.py#L101-L102); 0 is
        # refused: HYV3MLP then takes intermediate_size (modeling_hy_v3.py#L117), llama.cpp one expert's width
        # (llama.cpp@0c1e57098 src/models/hy-v3.cpp#L49)
        shared_inter = f.int("num_shared_experts") * expert_inter
    elif t in ("afmoe", "exaone_moe", "cohere2_moe") and f.get("num_shared_experts", "n_shared_experts", default=None):
        # one shared MLP of num_shared_experts x the routed experts' width (transformers@5.24.0
        # models/afmoe/modeling_afmoe.py#L209, exaone_moe/modeling_exaone_moe.py#L319-L320,
        # cohere2_moe/modeling_cohere2_moe.py#L176-L180); GGUF's dots1/afmoe/exaone-moe give n_shared_experts
        shared_inter = f.int("num_shared_experts", "n_shared_experts") * expert_inter
    elif t == "aria_text" and f.get("moe_num_shared_experts", default=None):
        # AriaSharedExpertsMLP: intermediate_size x moe_num_shared_experts (models/aria/modeling_aria.py#L242)
        shared_inter = f.int("moe_num_shared_experts") * expert_inter
    elif f.get("n_shared_experts", default=None):
        shared_inter = f.int("n_shared_experts") * expert_inter
    elif f.get("shared_expert_intermediate_size", default=None):
        shared_inter = f.int("shared_expert_intermediate_size")
    elif t == "llama4_text":
        shared_inter = expert_inter
    mlp_types = f.get("mlp_layer_types", default=None) if t in ("glm_moe_dsa", "kimi_linear", "mimo_v2_flash",
                                                               "laguna", "hy_v3", "exaone_moe", *_M3) else None
    freq = f.get("moe_layer_freq", default=None) if t in ("mimo_v2_flash", *_M3) else None
    if mlp_types is None and isinstance(freq, list):
        # MiMo-V2-Flash's published moe_layer_freq: 1 for a MoE layer, 0 for a dense one (vLLM's mimo_v2_flash.py
        # reads it; transformers' MiMoV2FlashConfig defaults mlp_layer_types to the same: the first layer dense)
        mlp_types = ["sparse" if x else "dense" for x in freq]
    elif mlp_types is None and t in _M3:
        mlp_types = ["sparse"] * n_layers   # configuration_minimax_m3_vl.py#L148-L151
    elif mlp_types is None and t in ("mimo_v2_flash", "laguna", "hy_v3"):
        # configuration_mimo_v2_flash.py#L119-L120, configuration_laguna.py#L131-L132,
        # configuration_hy_v3.py#L110-L113 (HYV3DecoderLayer: modeling_hy_v3.py#L374): the first layer dense
        mlp_types = ["dense"] + ["sparse"] * (n_layers - 1)
    if mlp_types is not None:
        # an explicit per-layer list ("dense" / "sparse") wins over first_k_dense_replace
        # (transformers@5.24.0 models/glm_moe_dsa/configuration_glm_moe_dsa.py#L152-L155, modeling #L582)
        if not isinstance(mlp_types, list) or len(mlp_types) != n_layers or \
                not set(mlp_types) <= {"dense", "sparse"}:
            raise ConfigError(f"config field 'mlp_layer_types' must list 'dense' or 'sparse' per layer, "
                              f"got {show_value(mlp_types)}")
        is_moe = lambda i: mlp_types[i] == "sparse"  # noqa: E731
    elif t in ("deepseek_v2", "deepseek_v3", "deepseek_v32", "kimi_k2", "glm4_moe", "glm4_moe_lite", "glm_moe_dsa",
               "kimi_linear", "exaone_moe"):
        # exaone_moe: mlp_layer_types, else the first first_k_dense_replace (1 by default) dense
        # (transformers@5.24.0 models/exaone_moe/configuration_exaone_moe.py#L126-L129, modeling #L339)
        first_dense = f.int("first_k_dense_replace", default=0, minimum=0)
        freq = f.int("moe_layer_freq", default=1)
        is_moe = lambda i: i >= first_dense and i % freq == 0  # noqa: E731
    elif t in ("lfm2_moe", "afmoe"):
        # transformers@5.24.0 models/lfm2_moe/modeling_lfm2_moe.py#L480-L483, afmoe/modeling_afmoe.py#L413: the
        # first num_dense_layers dense (afmoe's GGUF: first_k_dense_replace from leading_dense_block_count)
        names = ("num_dense_layers", "first_k_dense_replace") if t == "afmoe" else ("num_dense_layers",)
        first_dense = f.int(*names, default=0, minimum=0)
        is_moe = lambda i: i >= first_dense  # noqa: E731
    elif t == "llama4_text":
        step = f.int("interleave_moe_layer_step", default=1)
        is_moe = lambda i: (i + 1) % step == 0  # noqa: E731
    elif t == "nemotron_h":
        pattern = str(f.get("hybrid_override_pattern"))
        is_moe = lambda i: pattern[i] == "E"  # noqa: E731
    elif t == "jamba":
        period, offset = f.int("expert_layer_period"), f.int("expert_layer_offset", minimum=0)
        is_moe = lambda i: i % period == offset  # noqa: E731
    elif t in ("qwen2_moe", "qwen3_moe", "qwen3_next"):
        step = f.int("decoder_sparse_step", default=1)
        only_mlp = f.get("mlp_only_layers", default=[]) or []
        if not isinstance(only_mlp, list) or not all(isinstance(i, int) for i in only_mlp):
            raise ConfigError(f"config field 'mlp_only_layers' must list layer indices, got {show_value(only_mlp)}")
        only_mlp = set(only_mlp)
        is_moe = lambda i: i not in only_mlp and (i + 1) % step == 0  # noqa: E731
    else:
        is_moe = lambda _: True  # noqa: E731
    layers = tuple(is_moe(i) for i in range(n_layers))
    return MoeShape(experts=experts, top_k=top_k, intermediate_size=expert_inter,
                    shared_intermediate_size=shared_inter,
                    dense_intermediate_size=dense_inter if not all(layers) else 0, moe_layers=layers)


def _attention_params(f, layer, hidden, heads, head_dim) -> int:
    t = f.model_type
    if layer.kind == MLA:
        nope, rope = f.int("qk_nope_head_dim"), f.int("qk_rope_head_dim")
        v_dim, rank = f.int("v_head_dim"), f.int("kv_lora_rank")
        q_rank = f.int("q_lora_rank", default=None)
        q = hidden * q_rank + q_rank + q_rank * heads * (nope + rope) if q_rank else hidden * heads * (nope + rope)
        n = q + hidden * (rank + rope) + rank + rank * heads * (nope + v_dim) + heads * v_dim * hidden
        if t in ("deepseek_v32", "glm_moe_dsa") and layer.index_head_dim:
            # GLM-5.2's 'shared' indexer layers have no indexer weights
            # (transformers@5.24.0 models/glm_moe_dsa/modeling_glm_moe_dsa.py#L348-L349)
            idx_heads, idx_dim = f.int("index_n_heads"), f.int("index_head_dim")
            n += q_rank * idx_heads * idx_dim + hidden * idx_dim + 2 * idx_dim + hidden * idx_heads
        return n
    if layer.kind in (FULL, SLIDING, CHUNKED, SHARED):
        kv = layer.kv_heads if layer.kind != SHARED else f.int("num_key_value_heads")
        n = hidden * heads * head_dim + 2 * hidden * kv * head_dim + heads * head_dim * hidden
        if f.get("attention_bias", "bias", default=False) or t in _QKV_BIAS:
            n += heads * head_dim + 2 * kv * head_dim
        if f.get("attention_bias", "bias", default=False) or t in ("gpt2", "gpt_neox"):
            n += hidden
        if t in ("qwen3", "qwen3_moe", "qwen3_next", "gemma3_text", "olmo2", "qwen3_5_text", "hy_v3", "exaone_moe"):
            # q_norm, k_norm (transformers@5.24.0 models/hy_v3/modeling_hy_v3.py#L224-L225,
            # exaone_moe/modeling_exaone_moe.py#L160-L161)
            n += 2 * head_dim
        if t == "qwen3_next":
            n += hidden * heads * head_dim  # output gate doubles q_proj
        if t == "gpt_oss":
            n += heads  # attention sinks
        return n
    if layer.kind == LINEAR:
        s = layer.state
        if t in ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text"):
            k_dim = f.int("linear_num_key_heads") * f.int("linear_key_head_dim")
            v_heads = f.int("linear_num_value_heads")
            v_dim = v_heads * f.int("linear_value_head_dim")
            return (hidden * (2 * k_dim + 2 * v_dim) + hidden * 2 * v_heads + s.conv_channels * s.conv_kernel
                    + 2 * v_heads + f.int("linear_value_head_dim") + v_dim * hidden)
        if t == "jamba":
            inner, d_state = s.conv_channels, f.int("mamba_d_state")
            dt_rank = f.get("mamba_dt_rank", default="auto")
            dt_rank = cdiv(hidden, 16) if dt_rank == "auto" else f.int("mamba_dt_rank")
            return (hidden * 2 * inner + inner * s.conv_kernel + inner + inner * (dt_rank + 2 * d_state)
                    + dt_rank * inner + inner + inner * d_state + inner + inner * hidden + dt_rank + 2 * d_state)
        if t == "nemotron_h":
            m_heads = s.ssm_heads
            inner = m_heads * f.int("mamba_head_dim")
            proj = 2 * inner + 2 * f.int("n_groups") * f.int("ssm_state_size") + m_heads
            return (hidden * proj + s.conv_channels * (s.conv_kernel + 1) + 3 * m_heads + inner + inner * hidden)
    return 0


def count_params(f, layers, *, heads: int, head_dim: int, moe: MoeShape | None):
    """(total, active per token, embedding) parameters, or (None, None, 0) when unknown."""
    t = f.model_type
    if t in _UNSUPPORTED:
        return None, None, 0
    if f.get("vocab_size", "padded_vocab_size", default=None) is None:
        return None, None, 0  # unknown: no guess (a vocab_size that is set but wrong is refused below)
    hidden = f.int("hidden_size", "n_embd", "d_model")
    vocab = f.int("vocab_size", "padded_vocab_size")
    embedding = vocab * hidden
    total = embedding
    # PretrainedConfig's default; DeepSeek-V4's reference-format configs (deepseek_ref) name no such field and
    # read as DeepseekV4Config, whose default is untied (transformers@5.24.0 configuration_deepseek_v4.py)
    tied = f.get("tie_word_embeddings", default=t != "deepseek_ref")
    if not tied:
        total += vocab * hidden
    if t == "gpt2":
        total += f.int("n_positions") * hidden
    gated = t not in _PLAIN_MLP
    per_expert_mult = 3 if gated else 2
    active = total
    if t in NEW_FAMILIES or t in SSM_FAMILIES:
        mla = lambda layer: _attention_params(f, layer, hidden, heads, head_dim)  # noqa: E731
        try:
            got = body(f, layers, hidden=hidden, heads=heads, head_dim=head_dim, moe=moe, mla_params=mla) \
                if t in NEW_FAMILIES else ssm_body(f, layers, hidden=hidden, heads=heads)
        except ConfigError:     # a field only the count reads, missing or odd: no count (the cache is read apart)
            return None, None, 0
        if got is None:
            return None, None, 0
        layers = ()
        total, active = total + got[0], active + got[1]
    for i, layer in enumerate(layers):
        attn = _attention_params(f, layer, hidden, heads, head_dim)
        norms = 2 * hidden if layer.kind != NONE else hidden
        if t in ("gemma2", "gemma3_text"):
            norms = 4 * hidden
        mlp = mlp_active = 0
        if t == "nemotron_h":
            if layer.kind == NONE and moe and moe.is_moe(i):
                # "E" blocks (modeling_nemotron_h.py NemotronHMoE): relu2 experts (up, down), one shared
                # expert of moe_shared_expert_intermediate_size, a router
                routed = 2 * hidden * moe.intermediate_size
                shared = 2 * hidden * moe.shared_intermediate_size + hidden * moe.experts
                mlp, mlp_active = moe.experts * routed + shared, moe.top_k * routed + shared
            elif layer.kind == NONE:
                mlp = mlp_active = 2 * hidden * f.int("intermediate_size")
            norms = hidden
        elif moe and moe.is_moe(i):
            experts, top_k, inter, shared = moe.experts, moe.top_k, moe.intermediate_size, moe.shared_intermediate_size
            router = hidden * experts
            mlp = experts * per_expert_mult * hidden * inter + 3 * hidden * shared + router
            mlp_active = top_k * per_expert_mult * hidden * inter + 3 * hidden * shared + router
            if t == "gpt_oss":
                bias = experts * (2 * inter + hidden) + experts
                mlp += bias
                mlp_active += top_k * (2 * inter + hidden) + experts
            if f.get("shared_expert_intermediate_size", default=None):
                mlp += hidden
                mlp_active += hidden
        elif t == "jamba" or layer.kind != NONE or t == "nemotron_h":
            inter = (moe.dense_intermediate_size if moe else 0) or f.int(
                "intermediate_size", "n_inner", "ffn_hidden_size", default=4 * hidden)
            mlp = mlp_active = (3 if gated else 2) * hidden * inter
            if not gated and t in ("gpt2", "gpt_neox"):
                mlp += inter + hidden
                mlp_active += inter + hidden
        total += attn + mlp + norms
        active += attn + mlp_active + norms
    total += hidden
    active += hidden
    if not tied:
        active -= embedding  # a token reads one row of the input table, not all of it
    return total, active, embedding

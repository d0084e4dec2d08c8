"""Weight memory: bytes of a model's weights in a storage format, whole and per device.

The parameter count comes from the config (kvmem.params: ``params_total``, ``params_active``,
``params_embedding``), split into four groups that formats treat differently:

    embedding  the input table, vocab x hidden
    lm_head    the output projection, vocab x hidden; 0 when tied to the input table
               (tied embeddings are stored and counted once)
    experts    routed MoE experts (every expert is resident); from the config,
               (total - active - untied lm_head) x experts / (experts - top_k)
    dense      everything else: attention, dense and shared-expert MLPs, routers, norms

Formats (bytes per weight of the groups they quantise; docs/research/weight_formats.md):

    bf16, fp16, fp32   2, 2, 4 for every weight
    fp8                1 B, one fp32 scale per tensor (negligible); embedding + lm_head stay 16-bit
    fp8-block          1 B + one fp32 scale per 128x128 block = 1 + 4/16384 (DeepSeek-V3
                       README_WEIGHTS: "weight_block_size": [128, 128], fp32 weight_scale_inv)
    int8               W8A8, one fp32 scale per output channel: 1 + 4/in, in taken as hidden_size
                       (vLLM CompressedTensorsW8A8Int8); embedding + lm_head 16-bit
    awq / int4         4-bit qweight + fp16 scale + 4-bit zero per group of 128:
                       0.5 + 2/128 + 0.5/128 = 133/256 B (vLLM awq.py); embedding + lm_head fp16
    gptq               as awq + an int32 g_idx per input row: + 4/out, out taken as hidden_size
    nvfp4              e2m1 + one fp8 scale per 16 = 9/16 B (vLLM modelopt.py, ModelOpt
                       "exclude_modules": ["lm_head"]); embeddings are not Linear and stay 16-bit
    mxfp4              e2m1 + one e8m0 scale per 32 = 17/32 B for the MoE experts only
                       (gpt-oss "modules_to_not_convert": attention, router, embed_tokens,
                       lm_head; expert biases stay bf16); a dense model gets it on its linears
    GGUF presets       every weight at the preset's measured bits per weight (file size x 8 /
                       params; llama.cpp tools/quantize/README.md, meta-llama/Llama-3.1-8B):
                       q8_0 8.5008, q6_k 6.5633, q5_k_m 5.7036, q5_k_s 5.5704, q4_k_m 4.8944,
                       q4_k_s 4.6672, q3_k_l 4.2979, q3_k_m 4.00 (derived from bartowski's
                       Llama-3.1-8B Q3_K_M file, 4.02 GB / 8.03 B params), q3_k_s 3.6429,
                       q2_k 3.1593. The mixes promote the output and attn_v tensors; an MoE
                       model lands lower for the same preset (Mixtral-8x7B Q4_K_M: 4.53 BPW,
                       llama.cpp issue #5206), so these overestimate MoE GGUFs by up to ~8%.

"auto" is the checkpoint's own format: ``quantization_config`` when the config has one
(fp8 with weight_block_size -> fp8-block; mxfp4; awq; gptq; compressed-tensors int8/fp8/int4;
modelopt FP8/NVFP4), else the published checkpoints of gpt-oss (MXFP4 experts, model card)
and DeepSeek-V3/V3.2/R1 and Kimi K2 (block FP8, DeepSeek README_WEIGHTS), else the config dtype.

Per device: tensor parallelism splits every group (vocab-parallel embedding and lm_head,
column/row-parallel linears, experts by TP or EP); what vLLM replicates is added back: K/V
projections when tp exceeds the KV heads (one head per rank) and MLA's q_a/kv_a projections.
Norms and routers, replicated too, are small and treated as split. Pipeline parallelism gives
each stage its layers' share of the decoder weights (layers taken as equal in size), the input
embedding to the first stage and the lm_head to the last (both, when tied and pp > 1).

Exact bytes (``Weights.source`` "safetensors" / "gguf"): for weight_dtype "auto" on a model that
carries a checkpoint (kvmem.sources: a local folder's or a Hub repository's safetensors headers,
a GGUF file's tensor infos), the bytes are the headers' own, tensor by tensor, grouped by name:
embedding (embed_tokens, wte, word_embeddings, embed_in, token_embd), lm_head (lm_head, embed_out,
GGUF output.weight),
experts (".experts." but not shared experts; GGUF *_exps) and dense (the rest, norms and any
vision/MTP tensors the checkpoint stores included). Without headers the formula above is the
fallback and says so (``source`` "formula", with the reason in the notes).

Active bytes (read per decoded token, for the bandwidth bound): dense + lm_head (the tied table
when tied) + the experts a step touches: with b sequences routed uniformly, a layer reads
E x (1 - (1 - k/E)^b) distinct experts on average; k of E at b = 1.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from fractions import Fraction

from .engines.base import cdiv, pp_stages
from .catalog import as_model
from .model import MLA, Model
from .units import format_bytes

__all__ = ["Weights", "weights", "weight_bytes", "weight_formats", "resolve_weight_dtype"]

_EMBED_16 = Fraction(2)


@dataclass(frozen=True)
class _Format:
    name: str
    linear: Fraction                  # bytes per weight of dense linears (and experts, unless set)
    embedding: Fraction = _EMBED_16   # bytes per weight of the embedding and lm_head
    experts: Fraction | None = None   # bytes per routed-expert weight, when it differs
    experts_only: bool = False        # mxfp4: only experts quantised in MoE models
    per_hidden: int = 0               # + this many bytes per output channel / input row (/ hidden)
    block_scale: int = 0              # fp8-block: + 4 B per block of this many weights
    note: str = ""


def _gguf(name: str, bpw: str) -> _Format:
    rate = Fraction(bpw) / 8
    return _Format(name, rate, rate, note=f"GGUF {name.upper()} at {bpw} bits per weight, measured on Llama-3.1-8B")


_FORMATS = {
    "fp32": _Format("fp32", Fraction(4), Fraction(4)),
    "bf16": _Format("bf16", Fraction(2)),
    "fp16": _Format("fp16", Fraction(2)),
    "fp8": _Format("fp8", Fraction(1)),
    "fp8-block": _Format("fp8-block", Fraction(1), block_scale=128 * 128),
    "int8": _Format("int8", Fraction(1), per_hidden=4),
    "awq": _Format("awq", Fraction(133, 256)),
    "gptq": _Format("gptq", Fraction(133, 256), per_hidden=4),
    "nvfp4": _Format("nvfp4", Fraction(9, 16)),
    "mxfp4": _Format("mxfp4", Fraction(17, 32), experts_only=True),
    "q8_0": _gguf("q8_0", "8.5008"), "q6_k": _gguf("q6_k", "6.5633"),
    "q5_k_m": _gguf("q5_k_m", "5.7036"), "q5_k_s": _gguf("q5_k_s", "5.5704"),
    "q4_k_m": _gguf("q4_k_m", "4.8944"), "q4_k_s": _gguf("q4_k_s", "4.6672"),
    "q3_k_l": _gguf("q3_k_l", "4.2979"), "q3_k_m": _gguf("q3_k_m", "4.00"),
    "q3_k_s": _gguf("q3_k_s", "3.6429"), "q2_k": _gguf("q2_k", "3.1593"),
}
GGUF_FORMATS = tuple(name for name in _FORMATS if name.startswith("q"))

_ALIASES = {
    "float32": "fp32", "f32": "fp32", "bfloat16": "bf16", "float16": "fp16", "f16": "fp16", "half": "fp16",
    "fp8_e4m3": "fp8", "fp8-e4m3": "fp8", "float8": "fp8", "fbgemm_fp8": "fp8",
    "fp8_block": "fp8-block", "fp8-128x128": "fp8-block", "block-fp8": "fp8-block",
    "w8a8": "int8", "int8-w8a8": "int8",
    "int4": "awq", "awq-int4": "awq", "int4-awq": "awq", "w4a16": "awq", "awq_marlin": "awq",
    "gptq-int4": "gptq", "gptq_marlin": "gptq", "fp4": "nvfp4",
}

# Published checkpoints stored quantised although their config carries no quantization_config.
_NATIVE = {"gpt_oss": ("mxfp4", "gpt-oss is published with MXFP4 MoE weights (OpenAI model card)"),
           "deepseek_v3": ("fp8-block", "DeepSeek-V3/R1 and Kimi K2 are published in block FP8 (README_WEIGHTS)"),
           "deepseek_v32": ("fp8-block", "DeepSeek-V3.2 is published in block FP8")}


def weight_formats() -> list[str]:
    """Every weight format name weights()/fit() accept (besides "auto" and the aliases)."""
    return list(_FORMATS)


def _lookup(name: str) -> _Format:
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    if key not in _FORMATS:
        raise ValueError(f"unknown weight_dtype {name!r}; formats: auto, {', '.join(_FORMATS)}")
    return _FORMATS[key]


def _from_quantization_config(qc: dict) -> str:
    method = str(qc.get("quant_method", "")).lower()
    if method == "fp8":
        return "fp8-block" if qc.get("weight_block_size") else "fp8"
    if method in ("fbgemm_fp8", "mxfp4", "awq", "gptq"):
        return _ALIASES.get(method, method)
    if method == "modelopt":
        algo = str(qc.get("quant_algo", "")).upper()
        if algo in ("FP8", "NVFP4"):
            return algo.lower()
    if method == "compressed-tensors":
        groups = qc.get("config_groups") or {}
        for group in groups.values():
            w = (group or {}).get("weights") or {}
            bits, kind = w.get("num_bits"), w.get("type")
            if bits == 8:
                return "fp8" if kind == "float" else "int8"
            if bits == 4 and kind == "int":
                return "awq"
    raise ValueError(f"quantization_config.quant_method {qc.get('quant_method')!r} is not a format kvmem "
                     f"sizes; pass weight_dtype= one of: {', '.join(_FORMATS)}")


def resolve_weight_dtype(model: Model, weight_dtype="auto") -> tuple[str, str]:
    """(format name, why): "auto" resolved from the config, aliases to canonical names."""
    if not isinstance(weight_dtype, str) or not weight_dtype.strip():
        raise ValueError(f"weight_dtype must be a format name or 'auto', got {weight_dtype!r}")
    if weight_dtype.strip().lower() != "auto":
        return _lookup(weight_dtype).name, ""
    qc = model.facts.quantization_config
    if qc is not None:
        name = _from_quantization_config(qc)
        return name, f"weight_dtype auto = {name} from the config's quantization_config"
    if model.model_type in _NATIVE:
        name, why = _NATIVE[model.model_type]
        return name, f"weight_dtype auto = {name}: {why}"
    return _lookup(model.dtype).name, ""


@dataclass(frozen=True)
class WeightLayout:
    """What parallelism and decode reads need to know of the weights beyond their bytes."""

    n_layers: int
    experts: int = 0                 # routed experts (0: dense)
    top_k: int = 0                   # experts each token reads
    expert_params: int = 0
    dense_params: int = 0
    tied: bool = True
    dense_rate: Fraction = Fraction(2)                         # bytes per dense parameter
    kv_proj: tuple[tuple[int, int], ...] = ()                  # per layer (K/V params per KV head, KV heads)
    mla_replicated: int = 0          # MLA down-projection params every tp rank keeps whole
    by_dtype: dict | None = None     # bytes per tensor dtype, when read from a checkpoint's headers


@dataclass(frozen=True)
class Weights:
    """A model's weight bytes in one format (one copy of the model; ints unless named)."""

    model: str
    weight_dtype: str
    params_total: int
    embedding_bytes: int
    lm_head_bytes: int
    dense_bytes: int
    expert_bytes: int
    notes: tuple[str, ...] = ()
    layout: WeightLayout = field(default_factory=lambda: WeightLayout(n_layers=1), compare=False, repr=False)
    source: str = "formula"           # "formula", or "safetensors" / "gguf" when read from headers

    @property
    def details(self) -> dict:
        """The layout as plain data (the keys it had as a dict)."""
        data = asdict(self.layout)
        if data["by_dtype"] is None:
            del data["by_dtype"]
        return data

    @property
    def total_bytes(self) -> int:
        return self.embedding_bytes + self.lm_head_bytes + self.dense_bytes + self.expert_bytes

    @property
    def bits_per_weight(self) -> float:
        return 8 * self.total_bytes / self.params_total

    def active_bytes(self, batch: int = 1) -> int:
        """Weight bytes one decode step reads for ``batch`` sequences (see the module docstring)."""
        head = self.lm_head_bytes or self.embedding_bytes
        experts, top_k = self.layout.experts, self.layout.top_k
        if not self.expert_bytes or not experts:
            return self.dense_bytes + head
        touched = 1 - (1 - Fraction(top_k, experts)) ** min(batch, 4096)
        return self.dense_bytes + head + round(self.expert_bytes * touched)

    def per_device(self, *, tp: int = 1, pp: int = 1) -> int:
        """Bytes on the most loaded device with ``tp``-way tensor and ``pp``-way pipeline parallelism."""
        n_layers = self.layout.n_layers
        decoder = self.dense_bytes + self.expert_bytes
        stages = pp_stages(n_layers, pp)
        largest = 0
        for i, stage in enumerate(stages):
            size = decoder * len(stage) // n_layers
            if i == 0:
                size += self.embedding_bytes
            if i == pp - 1:
                size += self.lm_head_bytes or (self.embedding_bytes if pp > 1 else 0)
            extra = self._replicated_extra(tp) * len(stage) // n_layers
            largest = max(largest, cdiv(size, tp) + extra)
        return largest

    def _replicated_extra(self, tp: int) -> int:
        """Bytes per rank above an even split: replicated K/V heads and MLA down-projections."""
        if tp == 1:
            return 0
        rate = self.layout.dense_rate
        extra = Fraction(0)
        for params_per_head, kv_heads in self.layout.kv_proj:
            if tp > kv_heads:
                extra += params_per_head * (1 - Fraction(kv_heads, tp))
        extra += self.layout.mla_replicated * (1 - Fraction(1, tp))
        return int(extra * rate)

    def to_dict(self) -> dict:
        data = asdict(self)
        data.pop("layout")
        data["notes"] = list(self.notes)
        data.update(total_bytes=self.total_bytes, bits_per_weight=self.bits_per_weight,
                    active_bytes=self.active_bytes())
        return data


def _parallel_facts(model: Model) -> tuple[list[tuple[int, int]], int]:
    """Per layer (K/V projection params per KV head, KV heads), and MLA params vLLM replicates."""
    hidden = model.hidden_size
    kv_proj, mla = [], 0
    for layer in model.layers:
        if layer.kind.per_head:
            kv_proj.append((hidden * (layer.head_dim_k + layer.head_dim_v), layer.kv_heads))
        elif layer.kind == MLA:
            q_rank = model.facts.q_lora_rank
            mla += hidden * q_rank + hidden * (layer.kv_lora_rank + layer.qk_rope_head_dim)
    return kv_proj, mla


def weights(model, weight_dtype="auto") -> Weights:
    """The weight bytes of ``model`` stored as ``weight_dtype`` (see the module docstring)."""
    model = as_model(model)
    fallback = ""
    if isinstance(weight_dtype, str) and weight_dtype.strip().lower() == "auto" and model.checkpoint is not None:
        from .sources import load_checkpoint
        checkpoint, fallback = load_checkpoint(model)
        if checkpoint is not None:
            return _exact(model, checkpoint)
    if not model.params_total:
        raise ValueError(f"model {model.name!r} has no parameter count (params_total is unknown for its "
                         "family); give the weight bytes directly, e.g. fit(..., weights_bytes=...)")
    name, why = resolve_weight_dtype(model, weight_dtype)
    fmt = _FORMATS[name]
    total, active, embedding = model.params_total, model.params_active or model.params_total, model.params_embedding
    tied = model.facts.tie_word_embeddings
    lm_head = 0 if tied else embedding
    moe = model.facts.moe
    experts, top_k = (moe.experts, moe.top_k) if moe else (0, 0)
    expert_params = expert_bias = 0
    if experts:
        expert_params = (total - active - lm_head) * experts // (experts - top_k)
        if model.model_type == "gpt_oss":   # per-expert biases of gate_up (2 x inter) and down (hidden)
            inter = model.facts.intermediate_size
            expert_bias = model.num_layers * experts * (2 * inter + model.hidden_size)
    dense_params = total - embedding - lm_head - expert_params
    if dense_params < 0:
        raise ValueError(f"model {model.name!r}: parameter groups do not add up (dense {dense_params})")

    notes = [why] if why else []
    if fallback:
        notes.append(f"weights: formula estimate from the config's parameter count ({fallback})")
    linear = fmt.linear
    if fmt.per_hidden:
        linear += Fraction(fmt.per_hidden, model.hidden_size)
    emb_rate = fmt.embedding
    dense_rate = linear
    expert_rate = fmt.experts if fmt.experts is not None else linear
    if fmt.experts_only and experts:
        dense_rate = _EMBED_16
    elif fmt.experts_only:
        notes.append(f"{name} on a dense model: every linear layer in {name}")

    def cost(params: int, rate: Fraction, quantised: bool = True) -> int:
        nbytes = params * rate
        scales = 4 * cdiv(params, fmt.block_scale) if fmt.block_scale and quantised else 0
        return -(-nbytes.numerator // nbytes.denominator) + scales

    expert_bytes = cost(expert_params - expert_bias, expert_rate) + 2 * expert_bias
    if name in GGUF_FORMATS and experts:
        notes.append("GGUF presets are measured on a dense model; MoE files land lower "
                     "(Mixtral Q4_K_M 4.53 BPW vs 4.89): expect up to ~8% less")
    kv_proj, mla = _parallel_facts(model)
    return Weights(model=model.name, weight_dtype=name, params_total=total,
                   embedding_bytes=cost(embedding, emb_rate, False), lm_head_bytes=cost(lm_head, emb_rate, False),
                   dense_bytes=cost(dense_params, dense_rate, dense_rate == linear), expert_bytes=expert_bytes,
                   notes=tuple(notes),
                   layout=WeightLayout(n_layers=model.num_layers, experts=experts, top_k=top_k,
                                       expert_params=expert_params, dense_params=dense_params, tied=tied,
                                       dense_rate=dense_rate, kv_proj=tuple(kv_proj), mla_replicated=mla))


_EMBEDDING_NAMES = ("embed_tokens.", "wte.", "word_embeddings.", "tok_embeddings.", "token_embd.", "embed_in.")
_LM_HEAD_NAMES = ("lm_head.", "embed_out.")     # GPT-NeoX names its output projection embed_out


def _group(name: str) -> str:
    """embedding / lm_head / experts / dense, from a safetensors or GGUF tensor name."""
    if any(part in name for part in _EMBEDDING_NAMES) and "embed_tokens_per_layer" not in name:
        return "embedding"
    if any(name.startswith(p) or f".{p}" in name for p in _LM_HEAD_NAMES) or name == "output.weight":
        return "lm_head"
    if (".experts." in name or "_exps." in name) and "shared_expert" not in name:
        return "experts"
    return "dense"


def _exact(model: Model, checkpoint) -> Weights:
    """Weights whose bytes are the checkpoint's own (see the module docstring)."""
    groups = {"embedding": [0, 0], "lm_head": [0, 0], "experts": [0, 0], "dense": [0, 0]}
    for tensor in checkpoint.tensors:
        group = groups[_group(tensor.name)]
        group[0] += tensor.nbytes
        group[1] += tensor.elements
    moe = model.facts.moe
    experts, top_k = (moe.experts, moe.top_k) if moe else (0, 0)
    kv_proj, mla = _parallel_facts(model)
    dense_bytes, dense_params = groups["dense"]
    by_dtype = ", ".join(f"{name} {format_bytes(n)}" for name, n in checkpoint.bytes_by_dtype().items())
    note = (f"weights: exact, {len(checkpoint.tensors):,} tensors from the {checkpoint.source} "
            f"({by_dtype})")
    packed = model.facts.quantization_config is not None and checkpoint.format == "safetensors"
    params = (model.params_total or checkpoint.elements) if packed else checkpoint.elements  # I32 packs 8 int4
    return Weights(model=model.name, weight_dtype=checkpoint.format, params_total=params,
                   embedding_bytes=groups["embedding"][0], lm_head_bytes=groups["lm_head"][0],
                   dense_bytes=dense_bytes, expert_bytes=groups["experts"][0], notes=(note,),
                   layout=WeightLayout(n_layers=model.num_layers, experts=experts if groups["experts"][0] else 0,
                                       top_k=top_k, expert_params=groups["experts"][1], dense_params=dense_params,
                                       tied=not groups["lm_head"][0],
                                       dense_rate=Fraction(dense_bytes, dense_params) if dense_params else Fraction(2),
                                       kv_proj=tuple(kv_proj), mla_replicated=mla,
                                       by_dtype=checkpoint.bytes_by_dtype()),
                   source=checkpoint.format)


def weight_bytes(model, weight_dtype="auto") -> int:
    """Total weight bytes of one copy of ``model`` in ``weight_dtype`` (exact int)."""
    return weights(model, weight_dtype).total_bytes

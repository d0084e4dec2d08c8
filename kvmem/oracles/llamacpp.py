"""llama.cpp's own code as the judge of kvmem's ``llama.cpp`` mode (through llama-cpp-python).

Families: llama, qwen2, qwen3, gemma2, gemma3, deepseek2 (MLA), deepseek32 (DeepSeek-V3.2: MLA with
the DSA indexer, llama_kv_cache_dsa's two caches), glm-dsa (GLM-5: the indexer cache on the layers
indexer_types marks "full"), mamba (Mamba / Falcon-Mamba: the llama_memory_recurrent line) and lfm2
(LFM2: attention layers' cache and the short convolutions' rows, llama_memory_hybrid), and minimax-01
(MiniMax-Text-01 / M1: lightning rows; not in the random turn, as llama.cpp aborts on 3 separate streams) and
granitehybrid (Granite-4.0-H / Bamba: Mamba2 rows beside attention), the architectures gguf_files.py writes.

Each case writes a tiny GGUF with the model's real attention shapes (gguf_files.py), loads it
with ``no_alloc`` (llama.cpp's memory-fit dry run: only metadata, simulated allocations) and
no extra CPU buffer types (``use_extra_bufts=False``: with them deepseek2 aborts in graph
reserve), creates a context with the case's n_ctx, n_seq_max, n_ubatch, type_k, type_v,
flash_attn_type, swa_full and kv_unified (all passed explicitly: llama_context_default_params()
has swa_full = true, the command line false), and captures llama.cpp's own log. Compared:
its "llama_kv_cache[_iswa]: ..." cache lines, line for line, against kvmem's
``details.log``; and a refusal (NULL context) against kvmem's ValueError, reason for reason
(llama.cpp's error text must appear in kvmem's message). Each context is created in a forked
child: where llama.cpp refuses by aborting (GGML_ASSERT, e.g. a quantised row that is not whole
32-value blocks, which kvmem refuses with a ValueError) the child dies and the case counts as a
refusal on llama.cpp's side.
"""

from __future__ import annotations

import functools
import re

from ..catalog import get_model, list_models
from ..engines import engine_estimate
from ..layer import FULL, MLA, SLIDING
from ..model import Model
from .architectures import in_turn, random_model
from .gguf_files import ARCHES, write_gguf
from .llamacpp_lib import GGML_TYPE_IDS, context_params, engine_in_child, load_library, load_model
from .report import Check

__all__ = ["version", "directed_cases", "random_cases", "random_case", "run_case"]

# minimax is drawn on its own (random_case(seed, i, "minimax")): see its oracle test
FAMILIES = ("llama", "qwen2", "qwen3", "gemma2", "gemma3", "deepseek_v2", "deepseek_v32", "mamba", "glm_moe_dsa",
            "lfm2", "granitemoehybrid", "deepseek_v4")
_CACHE_LINE = re.compile(r"^(llama_kv_cache(_iswa|_dsa)?: (size =|creating)|llama_memory_recurrent: size =)")
# The vendored build ends its recurrent line with the PLE rows, ", P (f32):    0.00 MiB" for every family
# here (src/llama-memory-recurrent.cpp L133-L137), which the 2026 logs kvmem's "current" lines follow lack:
# it is dropped from llama.cpp's line before the comparison (bytes, cells, layers, seqs all compared)
_NO_PLE = re.compile(r", P \(f32\):    0\.00 MiB$")
_LOG_ERROR = 4   # ggml.h GGML_LOG_LEVEL_ERROR
_ERROR = re.compile(r"^llama_init_from_model: (.*)$")


def version() -> str:
    import llama_cpp
    return f"(llama-cpp-python {llama_cpp.__version__})"


@functools.cache
def _supported(model: Model) -> bool:
    if model.model_type not in ARCHES:
        return False
    dsa = ARCHES[model.model_type] in ("deepseek32", "glm-dsa")
    if any(layer.index_head_dim for layer in model.layers) and not dsa:
        return False
    if any(layer.kind not in (FULL, SLIDING, MLA) for layer in model.layers):
        return False
    per_head = [layer for layer in model.layers if layer.kind != MLA]
    return len({(layer.kv_heads, layer.head_dim_k, layer.head_dim_v) for layer in per_head}) <= 1


_SETTINGS = (
    dict(n_ctx=4096, n_seq=1, type_k="f16", type_v="f16", flash_attn="auto"),
    dict(n_ctx=32113, n_seq=1, type_k="q8_0", type_v="q8_0", flash_attn="auto"),
    dict(n_ctx=32768, n_seq=4, type_k="q4_0", type_v="f16", flash_attn=False),
    dict(n_ctx=16384, n_seq=4, type_k="f16", type_v="f16", flash_attn=True, kv_unified=True),
    dict(n_ctx=8192, n_seq=2, type_k="bf16", type_v="bf16", flash_attn=False, swa_full=True),
    dict(n_ctx=8192, n_seq=1, type_k="q8_0", type_v="q4_0", flash_attn=False),
    dict(n_ctx=65536, n_seq=1, type_k="q5_1", type_v="q5_1", flash_attn=True, n_ubatch=128),
    dict(n_ctx=100, n_seq=3, type_k="iq4_nl", type_v="f16", flash_attn="auto", n_ubatch=64),
)


def directed_cases() -> list[tuple[str, Model, dict]]:
    """Every preset of an architecture the GGUF writer knows, across the settings above."""
    out = []
    for name in list_models():
        model = get_model(name)
        if _supported(model):
            out.extend((f"{name}#{i}", model, s) for i, s in enumerate(_SETTINGS))
    return out


def random_cases(n: int, seed: int) -> list[tuple[str, Model, dict]]:
    """``n`` random architectures from ``seed``, the families in turn."""
    return in_turn(random_case, FAMILIES, n, seed)


def _dsa_model(seed: int, i: int) -> tuple:
    """A random DeepSeek-V3.2 (deepseek32 GGUF: llama_kv_cache_dsa): deepseek_v2's random attention with a
    q_lora_rank and a lightning indexer of random key width and heads."""
    import random

    from .architectures import random_config
    rng = random.Random(f"{seed}/{i}/deepseek_v32")
    cfg = random_config("deepseek_v2", rng)
    cfg.update(model_type="deepseek_v32", architectures=["DeepseekV32ForCausalLM"], q_lora_rank=rng.choice((64, 128)),
               index_topk=rng.choice((64, 256)), index_head_dim=rng.choice((64, 128)),
               index_n_heads=rng.choice((1, 4, 8)))
    return rng, Model.from_hf_config(cfg)


def _mamba_model(seed: int, i: int) -> tuple:
    """A random Mamba (or Falcon-Mamba): llama_memory_recurrent's R and S rows per layer and sequence."""
    import random
    rng = random.Random(f"{seed}/{i}/mamba")
    hidden = rng.choice((128, 256, 512))
    cfg = dict(model_type=rng.choice(("mamba", "falcon_mamba")), num_hidden_layers=rng.randint(1, 6),
               hidden_size=hidden, intermediate_size=2 * hidden, state_size=rng.choice((8, 16, 32)),
               conv_kernel=rng.choice((2, 4)), vocab_size=32)
    return rng, Model.from_hf_config(cfg)


def _glm_dsa_model(seed: int, i: int) -> tuple:
    """A random GLM-5-style glm_moe_dsa: the DSA model above with indexer_types ("full" first, then a random
    mix), or none with a training context below or at 1M (llama.cpp's GLM-5.2 default pattern)."""
    rng, dsa = _dsa_model(seed, i)
    cfg = dict(dsa.config, model_type="glm_moe_dsa", architectures=["GlmMoeDsaForCausalLM"])
    n = cfg["num_hidden_layers"]
    if rng.random() < 0.6:
        cfg["indexer_types"] = ["full"] + [rng.choice(("full", "shared")) for _ in range(n - 1)]
    else:
        cfg["max_position_embeddings"] = rng.choice((202752, 1048576))
    return rng, Model.from_hf_config(cfg)


def _lfm2_model(seed: int, i: int) -> tuple:
    """A random LFM2: short-convolution and attention layers in a random order (llama_memory_hybrid)."""
    import random
    rng = random.Random(f"{seed}/{i}/lfm2")
    hidden, heads = rng.choice((256, 512)), rng.choice((4, 8))
    n = rng.randint(2, 6)
    types = ["conv"] * n
    for j in rng.sample(range(n), rng.randint(1, n - 1)):
        types[j] = "full_attention"
    cfg = dict(model_type="lfm2", num_hidden_layers=n, hidden_size=hidden, num_attention_heads=heads,
               num_key_value_heads=rng.choice([h for h in (1, 2, 4) if heads % h == 0]),
               conv_L_cache=rng.choice((2, 3, 4)), conv_dim=hidden, layer_types=types,
               intermediate_size=512, vocab_size=32)
    return rng, Model.from_hf_config(cfg)


def _minimax_model(seed: int, i: int) -> tuple:
    """A random MiniMax-01: lightning layers except every eighth (llama.cpp's fixed rule), GQA full layers."""
    import random
    rng = random.Random(f"{seed}/{i}/minimax")
    heads, head_dim = rng.choice((4, 8)), rng.choice((32, 64, 128))
    n = rng.randint(1, 17)
    cfg = dict(model_type="minimax", num_hidden_layers=n, hidden_size=rng.choice((256, 512)), num_attention_heads=heads,
               num_key_value_heads=rng.choice([h for h in (1, 2, 4) if heads % h == 0]), head_dim=head_dim,
               layer_types=["linear_attention" if (j + 1) % 8 else "full_attention" for j in range(n)],
               num_local_experts=2, num_experts_per_tok=1, intermediate_size=64, vocab_size=32)
    return rng, Model.from_hf_config(cfg)


def _granite_hybrid_model(seed: int, i: int) -> tuple:
    """A random Granite-4.0-H / Bamba: Mamba2 and attention layers in a random order (d_inner = 2 x hidden)."""
    import random
    rng = random.Random(f"{seed}/{i}/granitemoehybrid")
    hidden, heads = rng.choice((256, 512)), rng.choice((4, 8))
    d_head = rng.choice((32, 64))
    n = rng.randint(2, 6)
    types = ["mamba"] * n
    for j in rng.sample(range(n), rng.randint(1, n - 1)):
        types[j] = "attention"
    cfg = dict(model_type="granitemoehybrid", num_hidden_layers=n, hidden_size=hidden, num_attention_heads=heads,
               num_key_value_heads=rng.choice([h for h in (1, 2, 4) if heads % h == 0]), layer_types=types,
               mamba_expand=2, mamba_d_head=d_head, mamba_n_heads=2 * hidden // d_head,
               mamba_n_groups=rng.choice((1, 2)), mamba_d_state=rng.choice((16, 64)), mamba_d_conv=rng.choice((2, 4)),
               intermediate_size=512, vocab_size=32)
    return rng, Model.from_hf_config(cfg)


_OWN_DRAWS = {"deepseek_v32": _dsa_model, "mamba": _mamba_model, "glm_moe_dsa": _glm_dsa_model, "lfm2": _lfm2_model,
              "minimax": _minimax_model, "granitemoehybrid": _granite_hybrid_model}


def random_case(seed: int, i: int, family: str) -> tuple[str, Model, dict]:
    """Case ``i`` of ``seed``: its own random.Random, so each case can be drawn alone."""
    if family == "deepseek_v4":   # llama_kv_cache_dsv4: its own GGUF writer and cases (llamacpp_dsv4.py)
        from .llamacpp_dsv4 import random_case as dsv4_case
        name, model, setting = dsv4_case(seed * 1_000_003 + i)
        return f"random-{seed}-{i}-deepseek_v4", model, setting
    rng, model = _OWN_DRAWS[family](seed, i) if family in _OWN_DRAWS else random_model(seed, i, family)
    type_k = rng.choice(tuple(GGML_TYPE_IDS))
    setting = dict(n_ctx=rng.randint(1, 140_000), n_seq=rng.choice((1, 1, 2, 3, 4, 8)), type_k=type_k,
                   type_v=type_k if rng.random() < 0.6 else rng.choice(tuple(GGML_TYPE_IDS)),
                   flash_attn=rng.choice(("auto", True, False)), swa_full=rng.random() < 0.2,
                   kv_unified=rng.random() < 0.3, n_ubatch=rng.choice((512, 512, 256, 64)))
    return f"random-{seed}-{i}-{family}", model, setting


def _kvmem_side(model: Model, s: dict) -> tuple[list[str] | None, str | None]:
    try:
        result = engine_estimate(model, engine="llama.cpp", tokens=1, n_ctx=s["n_ctx"], n_seq=s["n_seq"],
                          type_k=s["type_k"], type_v=s["type_v"], flash_attn=s["flash_attn"],
                          swa_full=s.get("swa_full", False), kv_unified=s.get("kv_unified", False),
                          n_ubatch=s.get("n_ubatch", 512), n_batch=s.get("n_batch", 2048),
                          n_rs_seq=0)   # the vendored build has the rollback rows, none by default
    except ValueError as error:
        return None, str(error)
    return result.details.log, None


def _engine_side(path: str, s: dict) -> tuple[list[str] | None, str | None]:
    lib, lines, _ = load_library()
    del lines[:]
    model = load_model(lib, lines, path)
    try:
        cparams = context_params(lib, s)
        ctx = lib.llama_init_from_model(model, cparams)
        text = "".join(chunk for _, chunk in lines).splitlines()
        if not ctx:   # the refusal is llama.cpp's GGML_LOG_LEVEL_ERROR line
            errors = [m.group(1).strip() for level, chunk in lines if level == _LOG_ERROR
                      for line in chunk.splitlines() if (m := _ERROR.match(line.strip()))]
            return None, errors[0] if errors else "NULL context"
        lib.llama_free(ctx)
        return [_NO_PLE.sub("", line.rstrip()) for line in text if _CACHE_LINE.match(line)], None
    finally:
        lib.llama_model_free(model)


def run_case(name: str, model: Model, setting: dict) -> list[Check]:
    """kvmem's llama.cpp log lines (or refusal) beside llama.cpp's own for one case."""
    if model.model_type == "deepseek_v4":
        from .llamacpp_dsv4 import run_case as dsv4_run
        return dsv4_run(name, model, setting)
    ours, our_error = _kvmem_side(model, setting)
    reply = engine_in_child(write_gguf, model, _engine_side, setting)
    if reply[0] == "load":      # a GGUF this writer got wrong: reported, never skipped
        return [Check(name, "llama.cpp loads the GGUF", True, reply[1])]
    if reply[0] == "abort":    # llama.cpp refuses by aborting: a quantised row that is not whole blocks
        return [Check(name, "refuses", our_error is not None, True),
                Check(name, "refusal (llama.cpp aborts)", "a refusal" if our_error else "a context", "a refusal")]
    theirs, their_error = reply[1], reply[2]
    checks = [Check(name, "refuses", our_error is not None, their_error is not None)]
    if our_error is not None and their_error is not None:
        checks.append(Check(name, "refusal reason", their_error if their_error in our_error else our_error,
                            their_error))
    elif our_error is None and their_error is None:
        checks.append(Check(name, "cache lines", ours, theirs))
    else:
        checks.append(Check(name, "refusal", our_error, their_error))
    return checks

"""SGLang's own KV pools as the judge of kvmem's ``sglang`` pools.

Each case builds SGLang's real MHATokenToKVPool or MLATokenToKVPool
(python/sglang/srt/mem_cache/memory_pool.py) on ``device="cpu"`` for #tokens N, page size,
cache dtype and the per-rank head count, and compares its buffer bytes
(``get_kv_size_bytes()``) and its own "KV Cache is allocated" log line with
``kvmem.engines.sglang.pools``. The per-rank heads are kvmem's max(1, kv_heads // tp)
(SGLang's ModelConfig.get_num_kv_heads needs the model's files). Capacity sizing
(model_executor/pool_configurator.py) is not run: it reads the GPU's free memory.

Importing SGLang on this machine: its config package imports torchvision for InternVL's image
transforms, and the PyPI torchvision wheel links CUDA libtorch and cannot load beside CPU
torch. So the oracle first lets transformers record torchvision as absent, then installs an
inert stand-in module (sglang_runtime.py) that holds only the names those imports
bind; nothing in the KV pools uses it.
"""

from __future__ import annotations

from ..catalog import get_model, list_models
from ..engines import sglang as rules
from ..layer import FULL, MLA, SLIDING
from ..model import Model
from ..parallel import kv_heads_per_rank, kv_heads_split
from .architectures import in_turn, random_model
from .report import Check
from .sglang_runtime import load

__all__ = ["version", "directed_cases", "family_cases", "random_cases", "random_case", "run_case", "NOTES"]

FAMILIES = ("llama", "qwen2", "qwen3", "gemma2", "mistral", "deepseek_v2")
NOTES = ("SGLang capacity sizing (pool_configurator.py) is not run for the pools: it reads a GPU's free memory",
         "the data-parallel attention cases run it on kvmem's weights per GPU (sglang_dp.py)")
_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "fp8_e4m3": "float8_e4m3fn",
           "fp8_e5m2": "float8_e5m2"}


def version() -> str:
    return load().sglang.__version__


def _supported(model: Model) -> bool:
    if rules.is_hybrid_swa(model) or any(layer.index_head_dim for layer in model.layers):
        return False
    kinds = {layer.kind for layer in model.layers}
    if kinds == {MLA}:
        return True
    if not kinds <= {FULL, SLIDING}:
        return False
    return len({(layer.kv_heads, layer.head_dim_k, layer.head_dim_v) for layer in model.layers}) == 1


def directed_cases() -> list[tuple[str, Model | None, dict]]:
    settings: list[dict] = [
        dict(num_tokens=1000, kv_dtype="bf16", page_size=1), dict(num_tokens=4096, kv_dtype="fp8_e4m3", page_size=16),
        dict(num_tokens=777, kv_dtype="fp16", page_size=64, tp=2), dict(num_tokens=300, kv_dtype="fp32", page_size=1),
        dict(num_tokens=2048, kv_dtype="fp8_e5m2", page_size=32)]
    out: list[tuple[str, Model | None, dict]] = []
    for name in list_models():
        model = get_model(name)
        if not _supported(model):
            continue
        for i, setting in enumerate(settings):
            tp = setting.get("tp", 1)
            if tp > 1 and model.layers[0].kind != MLA:
                heads = model.layers[0].kv_heads
                if not kv_heads_split(heads, tp):
                    continue
            out.append((f"{name}#{i}", model, setting))
    return out + family_cases() + dp_cases() + inkling_cases()


def inkling_cases(seed: int = 0, n: int = 4) -> list[tuple[str, None, dict]]:
    """Inkling (kvmem/oracles/sglang_inkling.py): the published shapes and ``n`` seeded checkpoints, judged by
    SGLang's own ServerArgs, ModelConfig, conv-state params and pool configurators (the setting holds them)."""
    from . import sglang_inkling
    chosen = [(name, sglang_inkling.wrap(text), {"kv_memory": 20 << 30})
              for name, text in sglang_inkling.REAL_SHAPES.items()]
    chosen += [sglang_inkling.random_case(seed * 1000 + i) for i in range(n)]
    return [(f"inkling {name}", None, {"inkling": (cfg, setting)}) for name, cfg, setting in chosen]


def dp_cases(seed: int = 0, n: int = 8) -> list[tuple[str, None, dict]]:
    """Data-parallel attention / expert-parallel settings (kvmem/oracles/sglang_dp.py): the directed ones and
    ``n`` seeded ones, judged by SGLang's own start-up chain (run_case: the setting holds them under "dp")."""
    from . import sglang_dp
    chosen = (sglang_dp.cases() + [sglang_dp.random_case(seed, i) for i in range(n)]
              + [sglang_dp.gqa_random_case(seed, i) for i in range(n // 2)])
    return [(name, None, {"dp": setting}) for name, setting in chosen]


def family_cases(seed: int = 0, variations: int = 2) -> list[tuple[str, Model | None, dict]]:
    """The opt-in families' configs (kvmem/oracles/sglang_families.py) and ``variations`` seeded variations
    of each, judged by SGLang's ModelConfig (run_case: the setting holds the config and tp)."""
    from . import sglang_families
    out: list[tuple[str, Model | None, dict]] = []
    for name, cfg in sglang_families.base_configs():
        out.append((f"family {name}", None, {"config": cfg, "tp": 1}))
        for i, (varied, tp) in enumerate(sglang_families.variations(cfg, variations, seed)):
            out.append((f"family {name}#{seed}-{i} tp{tp}", None, {"config": varied, "tp": tp}))
    return out


def random_cases(n: int, seed: int) -> list[tuple[str, Model, dict]]:
    """``n`` random architectures from ``seed``, the families in turn."""
    return in_turn(random_case, FAMILIES, n, seed)


def random_case(seed: int, i: int, family: str) -> tuple[str, Model, dict]:
    """Case ``i`` of ``seed``: its own random.Random, so each case can be drawn alone."""
    rng, model = random_model(seed, i, family)
    setting = dict(num_tokens=rng.randint(1, 4096), kv_dtype=rng.choice(tuple(_DTYPES)),
                   page_size=rng.choice((1, 1, 16, 32, 64)))
    return f"random-{seed}-{i}-{family}", model, setting


def run_case(name: str, model: Model, setting: dict) -> list[Check]:
    """kvmem's pool bytes and log line beside SGLang's real pool, built on the CPU; a family case
    (family_cases) compares kvmem's layout with SGLang's ModelConfig instead."""
    if "dp" in setting:
        from . import sglang_dp
        return sglang_dp.run_case(name, setting["dp"])
    if "inkling" in setting:
        from . import sglang_inkling
        cfg, sizing = setting["inkling"]
        return sglang_inkling.run_case(name, cfg, **sizing)
    if "config" in setting:
        from . import sglang_families
        return sglang_families.run_config(name, setting["config"], setting["tp"])
    s = load()
    tp, page, tokens = setting.get("tp", 1), setting["page_size"], setting["num_tokens"]
    (ours,) = rules.pools(model, num_tokens=tokens, kv_dtype=setting["kv_dtype"], tp=tp, page_size=page)
    dtype = getattr(s.torch, _DTYPES[setting["kv_dtype"]])
    first = model.layers[0]
    common = dict(size=tokens, page_size=page, dtype=dtype, layer_num=model.num_layers, device="cpu",
                  enable_memory_saver=False)
    del s.lines[:]
    if first.kind == MLA:
        pool = s.pool.MLATokenToKVPool(kv_lora_rank=first.kv_lora_rank, qk_rope_head_dim=first.qk_rope_head_dim,
                                       **common)
        k, v = int(pool.get_kv_size_bytes()), 0
    else:
        pool = s.pool.MHATokenToKVPool(head_num=kv_heads_per_rank(first.kv_heads, tp), head_dim=first.head_dim_k,
                                       v_head_dim=first.head_dim_v, **common)
        k, v = (int(x) for x in pool.get_kv_size_bytes())
    line = next((text for text in s.lines if text.startswith("KV Cache is allocated")), None)
    del pool
    return [Check(name, "K bytes", ours.k_bytes, k), Check(name, "V bytes", ours.v_bytes, v),
            Check(name, "log line", ours.log_line(), line)]

"""Fuzz (issue 20): 20,000 seeded calls of the public API per run, derandomised (random.Random
with a fixed seed, so every run makes the same calls), each checked by the harness: a sane result
or a refusal naming its field; no crash, no negative bytes, no refusal without a field name.

Cheaper per call than the hypothesis suites (no shrinking machinery): about 1.5 ms a call here.
Hostile values reach every engine option, tp/pp, tokens, batch, kv_memory, offload, shared
prefixes and custom GPU dicts, mixed with valid ones so that most calls pass the first check.
"""

from __future__ import annotations

import random
from fractions import Fraction

import kvmem
from kvmem.engines import ENGINES

from .harness import Finding, call, check_capacity, check_estimate, check_fit

SEED = 20_260_020
CALLS = 20_000
MODELS = kvmem.list_models()
HOSTILE = [0, -1, 10**300, 2**40 + 1, "abc", "x" * 1000, float("nan"), float("inf"), 1.5, None, True, [1], {},
           "9" * 5000, -(10**400), b"x"]
TOKENS = [1, 7, 512, 4096, 32768, "128k", "1M", 2**40]
KV_DTYPES = ["auto"] * 12 + ["fp16", "bf16", "fp8", "int8", "int4", "q8_0", "q4_0", "nvfp4"]
WORDS = ["tp", "pp", "kv_dtype", "dtype", "engine", "option", "head", "layer", "max_model_len", "tokens", "batch",
         "window", "block", "page", "n_ctx", "type_k", "type_v", "mla", "flash_attn", "backend", "max_cache_len",
         "residual_length", "nbits", "q_group_size", "prompt_tokens", "swa", "model", "kv_memory", "bytes",
         "offload", "shared_prefix", "gpu", "gpu_share", "num_gpus", "context", "memory", "capacity", "fit",
         "n_seq", "n_ubatch"]


def _pick(rng: random.Random, valid, hostile=HOSTILE, odds: float = 0.1):
    return rng.choice(hostile) if rng.random() < odds else rng.choice(valid)


def _options(rng: random.Random, engine: str) -> dict:
    names = sorted(ENGINES[engine].options)
    if not names or rng.random() < 0.6:
        return {}
    name = rng.choice(names)
    default = ENGINES[engine].options[name]
    valid = [default] if default is not None else [1]
    return {name: _pick(rng, valid, odds=0.7)}


def _one(rng: random.Random, i: int):
    kind = rng.random()
    model, engine = rng.choice(MODELS), rng.choice(sorted(ENGINES))
    tokens = _pick(rng, TOKENS, odds=0.05)
    kv_dtype = _pick(rng, KV_DTYPES, odds=0.03)
    tp = _pick(rng, [1] * 8 + [2, 4, 8], [0, -1, 3, 64, 4096, 1.5, "2"], odds=0.05)
    pp = _pick(rng, [1] * 8 + [2], odds=0.02)
    if kind < 0.72:
        options = _options(rng, engine)
        strategy = {}
        if rng.random() < 0.1:
            strategy["offload"] = _pick(rng, [0.25, 0.6, 0.7, 1, Fraction(1, 3)], [10**400, -0.1, float("nan"), "0.5"],
                                        odds=0.3)
        if rng.random() < 0.05:
            strategy["shared_prefix"] = rng.choice([0, 100, 10**9, -1, "1k"])
        return call(f"#{i} estimate({model}, {engine}, tokens={tokens!r:.20}, {kv_dtype!r:.20}, tp={tp!r}, pp={pp!r}, "
                    f"{options!r:.60}, {strategy!r:.40})",
                    lambda: kvmem.estimate(model, engine=engine, tokens=tokens, kv_dtype=kv_dtype, tp=tp, pp=pp,
                                           batch=_pick(rng, [1, 4, 32], [0, -2, 2**41, "4"], odds=0.03),
                                           **strategy, **options),
                    names=WORDS + list(options), check=check_estimate)
    if kind < 0.92:
        engine = rng.choice([e for e in sorted(ENGINES) if ENGINES[e].capacity])
        options = _options(rng, engine)
        kv_memory = _pick(rng, ["20GiB", "1GiB", "80GB", 2**34], ["-1GiB", 10**31, "x", float("nan"), "9" * 5000])
        return call(f"#{i} capacity({model}, {engine}, {kv_memory!r:.20}, tp={tp!r}, {options!r:.60})",
                    lambda: kvmem.capacity(model, engine=engine, kv_memory=kv_memory, kv_dtype=kv_dtype, tp=tp, pp=pp,
                                           **options),
                    names=WORDS + list(options), check=check_capacity)
    gpu = rng.choice(["h100-sxm-80gb", "rtx-4090-24gb", "a100-sxm-80gb",
                      {"name": "custom", "memory": "80GiB", "gpu_share": rng.choice([0.5, "0.5", 2, 0, None, [1]])}])
    engine = rng.choice(["vllm", "sglang", "llama.cpp", "trtllm", "hf-dynamic", "ideal"])

    def fit():
        try:
            return kvmem.fit(model, gpu=gpu, engine=engine, context=tokens, num_gpus=rng.choice([1, 1, 1, 2, 0]),
                             kv_dtype=kv_dtype)
        except kvmem.FitError as exc:
            return exc.fit

    return call(f"#{i} fit({model}, {gpu!r:.60}, {engine}, context={tokens!r:.20})", fit,
                names=WORDS, check=check_fit)


def test_twenty_thousand_seeded_calls():
    rng = random.Random(SEED)
    findings = []
    for i in range(CALLS):
        try:
            _one(rng, i)
        except Finding as finding:
            findings.append(str(finding)[:300])
    assert findings == [], f"{len(findings)} findings, the first: " + "\n".join(findings[:10])

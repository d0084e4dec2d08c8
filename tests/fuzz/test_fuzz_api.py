"""Fuzz: the public API (estimate, capacity, fit, strategies) over presets, engines and hostile
arguments (issue 13). Each call either answers sanely or refuses naming the field."""

from fractions import Fraction

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import kvmem

from .harness import call, check_capacity, check_estimate, check_fit

MODELS = kvmem.list_models()
ENGINES = kvmem.list_engines()
KV_DTYPES = ["auto", "fp16", "bf16", "fp32", "fp8", "fp8_e5m2", "int8", "int4", "int2", "nvfp4", "mxfp4",
             "q8_0", "q5_0", "q5_1", "q4_0", "q4_1", "iq4_nl"]
HOSTILE_TOKENS = st.sampled_from(["1,5k", "0", "-5", "9" * 5000, 2**41, float("nan"), None, 1.5, "lots", [8]])
TOKENS = st.one_of(st.integers(min_value=1, max_value=2**20), st.sampled_from(["128k", "1M", "10M", "1.5k", 2**40]))
HOSTILE_BATCH = st.sampled_from([0, -2, 2**41, 1.5, "4", None])
PARALLEL = st.sampled_from([1] * 8 + [2, 4, 8, 3, 64])
HOSTILE_PARALLEL = st.sampled_from([0, -1, 2**20, 1.5, "2", None])
VALID_OPTIONS = {  # a few real settings per engine mode
    "vllm": [{"block_size": 32}, {"max_num_batched_tokens": 2048}, {"hybrid_kv_cache_manager": False},
             {"version": "v0"}],
    "sglang": [{"page_size": 16}, {"page_size": 64}],
    "trtllm": [{"tokens_per_block": 64}],
    "llama.cpp": [{"type_k": "q8_0", "type_v": "q8_0", "flash_attn": True}, {"n_ubatch": 256}, {"swa_full": True}],
    "hf-dynamic": [{"prompt_tokens": 8}],
    "hf-static": [{"max_cache_len": 2**20}],
    "hf-quantized": [{"residual_length": 32}, {"nbits": 2}, {"backend": "hqq"}],
}
HOSTILE_OPTIONS = st.sampled_from([
    {"block_size": 0}, {"block_size": "abc"}, {"max_num_batched_tokens": "abc"}, {"max_num_batched_tokens": 2**41},
    {"swap_space": float("nan")}, {"page_size": -1}, {"type_k": "zz"}, {"n_ubatch": 0}, {"residual_length": -1},
    {"nbits": 3}, {"bogus": 1}, {"prompt_tokens": -1}, {"tokens_per_block": [1]},
])
# Engine rules that refuse a valid-looking combination say which input they are about
ENGINE_WORDS = ["tp", "pp", "kv_dtype", "dtype", "engine", "option", "head", "layer", "max_model_len", "tokens",
                "batch", "window", "block", "page", "n_ctx", "type_k", "type_v", "mla", "flash_attn", "backend",
                "max_cache_len", "residual_length", "nbits", "q_group_size", "prompt_tokens", "swa"]
NAMES = ENGINE_WORDS + ["model", "kv_memory", "bytes", "swap_space", "max_num_batched_tokens", "tokens_per_block",
                        "n_ubatch", "n_seq"]
SETTINGS = dict(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@st.composite
def workloads(draw, engine):
    """Valid inputs for ``engine``, with at most one field hostile."""
    hostile = draw(st.sampled_from([None, None, None, "tokens", "batch", "tp", "pp", "options"]))
    options = st.sampled_from([{}, {}] + VALID_OPTIONS.get(engine, []))
    w = dict(tokens=draw(HOSTILE_TOKENS if hostile == "tokens" else TOKENS),
             batch=draw(HOSTILE_BATCH if hostile == "batch" else st.integers(min_value=1, max_value=256)),
             tp=draw(HOSTILE_PARALLEL if hostile == "tp" else PARALLEL),
             pp=draw(HOSTILE_PARALLEL if hostile == "pp" else st.sampled_from([1, 1, 1, 2, 4])),
             options=draw(HOSTILE_OPTIONS if hostile == "options" else options))
    # a refusal must name an input (valid inputs may still be refused by an engine rule, by name)
    return w, ENGINE_WORDS + list(w["options"])


@st.composite
def engine_workloads(draw):
    engine = draw(st.sampled_from(ENGINES))
    return engine, draw(workloads(engine))


@settings(max_examples=2500, **SETTINGS)
@given(model=st.sampled_from(MODELS), kv_dtype=st.sampled_from(["auto"] * 12 + KV_DTYPES),
       engine_workload=engine_workloads())
@example(model="llama-3.1-8b", kv_dtype="auto",
         engine_workload=("vllm", (dict(tokens="10M", batch=1, tp=1, pp=1, options={}), ENGINE_WORDS)))
@example(model="llama-3.1-8b", kv_dtype="auto",  # issue 13: tp > query heads was accepted
         engine_workload=("ideal", (dict(tokens=100, batch=1, tp=64, pp=1, options={}), ENGINE_WORDS)))
@example(model="llama-3.1-8b", kv_dtype="auto",
         engine_workload=("sglang", (dict(tokens=100, batch=1, tp=64, pp=1, options={}), ENGINE_WORDS)))
@example(model="llama-3.1-8b", kv_dtype="auto",
         engine_workload=("trtllm", (dict(tokens=100, batch=1, tp=64, pp=1, options={}), ENGINE_WORDS)))
@example(model="llama-3.1-8b", kv_dtype="auto",
         engine_workload=("ideal", (dict(tokens="9" * 5000, batch=1, tp=1, pp=1, options={}),  # issue 13: Overflow
                                    ENGINE_WORDS)))
@example(model="llama-3.1-8b", kv_dtype="auto",
         engine_workload=("ideal", (dict(tokens="1,5k", batch=1, tp=1, pp=1, options={}),  # issue 13: 15,360
                                    ENGINE_WORDS)))
@example(model="falcon-40b", kv_dtype="auto",
         engine_workload=("hf-dynamic", (dict(tokens=1024, batch=1, tp=1, pp=1, options={}), ENGINE_WORDS)))
@example(model="kimi-linear-48b-a3b", kv_dtype="auto",   # a TensorRT-LLM refusal that named no field
         engine_workload=("trtllm", (dict(tokens=1, batch=1, tp=1, pp=1, options={}), ENGINE_WORDS)))
def test_estimate(model, kv_dtype, engine_workload):
    engine, (w, names) = engine_workload
    call(f"estimate({model}, {engine}, {kv_dtype}, {w!r:.120})",
         lambda: kvmem.estimate(model, engine=engine, kv_dtype=kv_dtype, tokens=w["tokens"], batch=w["batch"],
                                tp=w["tp"], pp=w["pp"], **w["options"]),
         names=names, check=check_estimate)


KV_MEMORY = st.one_of(st.integers(min_value=-1, max_value=2**45),
                      st.sampled_from(["20GiB", "16GB", "3.98GiB", "1,5GB", "-1GiB", "20", 10**30, 10**31,
                                       float("nan"), None, "0B"]))


@settings(max_examples=800, **SETTINGS)
@given(model=st.sampled_from(MODELS), engine=st.sampled_from(["ideal", "vllm", "sglang", "llama.cpp", "trtllm",
                                                                "hf-dynamic"]),
       kv_memory=KV_MEMORY, kv_dtype=st.sampled_from(KV_DTYPES), tp=st.one_of(PARALLEL, HOSTILE_PARALLEL),
       max_model_len=st.one_of(st.none(), TOKENS, HOSTILE_TOKENS), options=st.one_of(st.just({}), HOSTILE_OPTIONS))
@example(model="llama-3.1-8b", engine="vllm", kv_memory=10**30, kv_dtype="auto", tp=1, max_model_len=None,
         options={})  # issue 13: float-rounded tokens
@example(model="llama-3.1-8b", engine="vllm", kv_memory="20GiB", kv_dtype="auto", tp=1, max_model_len="1M",
         options={})  # issue 14: past max_position_embeddings
def test_capacity(model, engine, kv_memory, kv_dtype, tp, max_model_len, options):
    call(f"capacity({model}, {engine}, kv_memory={kv_memory!r:.20}, {kv_dtype}, tp={tp!r}, "
         f"max_model_len={max_model_len!r:.20}, {options})",
         lambda: kvmem.capacity(model, engine=engine, kv_memory=kv_memory, kv_dtype=kv_dtype, tp=tp,
                                max_model_len=max_model_len, **options),
         names=NAMES + list(options) + ["capacity"], check=check_capacity)


GPUS = kvmem.list_gpus()
FIT_OPTIONS = st.sampled_from([{}, {}, {}, {"max_num_seqs": 0}, {"max_num_batched_tokens": "abc"},
                               {"swap_space": float("nan")}, {"weights_bytes": "10GiB"}, {"weights_bytes": -1},
                               {"activation_bytes": "abc"}, {"n_ctx": 5}])


@settings(max_examples=300, **SETTINGS)
@given(model=st.sampled_from(MODELS), gpu=st.one_of(st.sampled_from(GPUS), st.sampled_from(
           ["nope", "custom:80GiB:3.35TB/s", "custom:abc", "custom:-1GiB:1TB/s"])),
       engine=st.sampled_from(["vllm", "sglang", "llama.cpp", "trtllm", "hf-dynamic", "ideal"]),
       num_gpus=st.sampled_from([1, 1, 2, 8, 0, -1]), context=st.one_of(TOKENS, TOKENS, HOSTILE_TOKENS),
       batch=st.one_of(st.none(), st.integers(min_value=-1, max_value=64)),
       utilization=st.sampled_from([0.9, 0.9, 0.95, float("nan"), 0, 1.5, "0.9"]), options=FIT_OPTIONS)
@example(model="llama-3.1-8b", gpu="h100-sxm-80gb", engine="vllm", num_gpus=1, context=1000, batch=None,
         utilization=float("nan"), options={})  # issue 13: "Invalid literal for Fraction"
@example(model="llama-3.1-8b", gpu="h100-sxm-80gb", engine="vllm", num_gpus=1, context=1000, batch=None,
         utilization=0.9, options={"swap_space": float("nan")})  # issue 13
@example(model="llama-3.1-70b", gpu="rtx-4090-24gb", engine="vllm", num_gpus=1, context=1000, batch=None,
         utilization=0.9, options={})  # issue 13: negative kv_memory_bytes
def test_fit(model, gpu, engine, num_gpus, context, batch, utilization, options):
    def run():   # a workload that does not fit is a Fit too (.fits False, .why_not): check_fit checks it
        return kvmem.fit(model, gpu=gpu, engine=engine, num_gpus=num_gpus, context=context, batch=batch,
                         gpu_memory_utilization=utilization, **options)

    call(f"fit({model}, {gpu}, {engine}, num_gpus={num_gpus}, context={context!r:.20}, batch={batch}, "
         f"gmu={utilization!r}, {options})", run,
         names=NAMES + list(options) + ["gpu", "num_gpus", "context", "gpu_memory_utilization", "fit"],
         check=check_fit)


@settings(max_examples=300, **SETTINGS)
@given(model=st.sampled_from(MODELS), engine=st.sampled_from(ENGINES), tokens=st.one_of(TOKENS, HOSTILE_TOKENS),
       offload=st.sampled_from([0, 0.5, Fraction(1, 3), 1, 1.5, float("nan"), -0.1, "x"]),
       shared_prefix=st.sampled_from([0, 100, -1, 10**9, "1k"]),
       eviction=st.sampled_from([None, ("streaming", {"sink": 4, "window": 1020}), ("h2o", {"budget": 1024}),
                                 ("snapkv", {"budget": 0}), "x"]))
@example(model="gemma-3-27b", engine="ideal", tokens=1000, offload=Fraction(1, 3), shared_prefix=0, eviction=None)
def test_strategies(model, engine, tokens, offload, shared_prefix, eviction):
    def run():
        ev = kvmem.Eviction(eviction[0], **eviction[1]) if isinstance(eviction, tuple) else eviction
        return kvmem.estimate(model, engine=engine, tokens=tokens, offload=offload, shared_prefix=shared_prefix,
                              eviction=ev)

    call(f"estimate({model}, {engine}, tokens={tokens!r:.20}, offload={offload!r}, prefix={shared_prefix!r}, "
         f"eviction={eviction!r})", run,
         names=NAMES + ["offload", "shared_prefix", "eviction", "budget", "sink"], check=check_estimate)


@settings(max_examples=150, **SETTINGS)
@given(model=st.sampled_from(MODELS), engine=st.sampled_from(ENGINES), tokens=st.sampled_from([512, 4096, "32k"]),
       residual=st.sampled_from([0, 32, 128]))
@example(model="falcon-40b", engine="hf-dynamic", tokens=4096, residual=128)    # issue 13: StopIteration
@example(model="llama-3.2-1b", engine="hf-quantized", tokens=4096, residual=32)  # issue 13: residual_length
def test_compare_strategies(model, engine, tokens, residual):
    def check(rows):
        for row in rows:
            if row["bytes"] is not None and (not isinstance(row["bytes"], int) or row["bytes"] < 0):
                return f"row {row['strategy']!r} has bytes {row['bytes']!r}"
        return None

    call(f"compare_strategies({model}, {engine}, {tokens}, residual={residual})",
         lambda: kvmem.compare_strategies(model, engine=engine, tokens=tokens, residual_length=residual),
         names=NAMES, check=check)


@settings(max_examples=300, **SETTINGS)
@given(lengths=st.one_of(st.lists(st.integers(min_value=-2, max_value=5000), max_size=30),
                         st.sampled_from([5, None, "abc", [1.5], [[1]], {"a": 1}])),
       kv_memory=st.one_of(st.none(), KV_MEMORY), block=st.sampled_from([16, 0, -1, "x", 2**40]))
@example(lengths=5, kv_memory=None, block=16)              # issue 13: TypeError
def test_paging(lengths, kv_memory, block):
    from kvmem.strategies import allocation_sweep
    call(f"preallocation_waste(lengths={lengths!r:.30}, kv_memory={kv_memory!r:.20}, block={block!r})",
         lambda: kvmem.preallocation_waste("llama-3.1-8b", lengths=lengths, max_model_len=4096, block_size=block,
                                           kv_memory=kv_memory),
         names=["lengths", "length", "kv_memory", "bytes", "block_size", "max_model_len"])
    call(f"allocation_sweep(kv_memory={kv_memory!r:.20})",
         lambda: allocation_sweep("llama-3.1-8b", max_model_len=4096, kv_memory=kv_memory, n=20),
         names=["kv_memory", "bytes"])


SMALL_ENTRY_POINTS = {
    "get_model": (kvmem.get_model, ["model"]),
    "dtype": (kvmem.dtype, ["dtype"]),
    "get_gpu": (kvmem.get_gpu, ["gpu", "bytes", "bandwidth", "custom"]),
    "Eviction": (kvmem.Eviction, ["eviction", "policy"]),
    "Eviction budget": (lambda v: kvmem.Eviction("h2o", budget=v), ["budget"]),
    "weight_bytes": (lambda v: kvmem.weight_bytes("llama-3.1-8b", weight_dtype=v), ["weight_dtype", "dtype"]),
    "group_size": (lambda v: kvmem.dtype("int4", group_size=v), ["group_size"]),
}


@settings(max_examples=800, **SETTINGS)
@given(entry=st.sampled_from(sorted(SMALL_ENTRY_POINTS)), value=st.one_of(
    st.sampled_from([None, 5, 1.5, float("nan"), "", "x" * 10000, ["a"], {"a": 1}, b"x", "custom:", "custom:1:2:3",
                     "custom:-1GiB:1TB/s", "custom:80GiB:nanTB/s", "custom:80GiB:3.35TB/s", "llama-3.1-8b", "fp8",
                     "h100-sxm-80gb", "h2o", 0, -1, 2**64]),
    st.text(max_size=10)))
@example(entry="get_model", value=["a"])  # unhashable: TypeError from the preset cache before
def test_small_entry_points(entry, value):
    fn, names = SMALL_ENTRY_POINTS[entry]
    call(f"{entry}({value!r:.30})", lambda: fn(value), names=names)

"""Fuzz: the config reader, from real preset configs with one field made hostile, from JSON text,
and from files (issue 13). A config is either read and sized sanely, or refused by a
ConfigError that names the field."""

import json
import os
import tempfile

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import kvmem
from kvmem import catalog
from kvmem.configs import FIELD_LIMITS

from .harness import call, check_estimate, check_text

MODELS = kvmem.list_models()
HOSTILE_VALUES = st.one_of(
    st.sampled_from([None, True, False, 0, -1, -8, 1, 2, 7.5, float("nan"), float("inf"), "8", "", "*M-E", "x",
                     [], [1], [["x"]], [{}], {}, {"a": 1}, 10**6, 10**7, 2**31, 10**12, 10**30, 10**400,
                     ["llama"], {"model_type": "llama"}]),
    st.integers(min_value=-(2**64), max_value=2**64),
    st.text(max_size=12),
    st.lists(st.sampled_from(["full_attention", "sliding_attention", "mamba", "x", 1, None]), max_size=8),
)
KNOWN_FIELDS = sorted(set(FIELD_LIMITS) | {"model_type", "layer_types", "hybrid_override_pattern", "no_rope_layers",
                                           "mlp_only_layers", "torch_dtype", "_name_or_path", "text_config",
                                           "max_position_embeddings", "tie_word_embeddings", "use_sliding_window",
                                           "max_window_layers", "new_decoder_architecture", "multi_query"})
ENGINES = ["ideal", "vllm", "sglang", "llama.cpp", "trtllm", "hf-dynamic"]
SETTINGS = dict(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _read_and_size(label, cfg, field):
    names = [field, "config", "layer_types", "num_hidden_layers", "model_type", "field"]
    model = call(f"from_hf_config({label})", lambda: kvmem.Model.from_hf_config(cfg), names=names,
                 check=lambda m: check_text(m.describe()))
    if model is None:
        return
    for engine in ENGINES:
        call(f"estimate({label}, {engine})", lambda engine=engine: kvmem.estimate(model, engine=engine, tokens=4096, batch=2),
             names=names + ["tokens", "kv_dtype", "dtype", "window", "head", "layer", "engine", "tp", "state",
                            engine, model.model_type or "model_type"],
             check=check_estimate)


@settings(max_examples=1500, **SETTINGS)
@given(model=st.sampled_from(MODELS), field=st.sampled_from(KNOWN_FIELDS), value=HOSTILE_VALUES,
       nested=st.booleans())
@example(model="llama-3.1-8b", field="model_type", value=["llama"], nested=False)     # issue 13: TypeError
@example(model="llama-3.1-8b", field="model_type", value={"a": 1}, nested=False)      # issue 13: TypeError
@example(model="gemma-3-27b", field="layer_types", value=[["x"]], nested=True)       # issue 13: unhashable
@example(model="llama-4-scout-17b-16e", field="no_rope_layers", value=[1], nested=True)  # issue 13: IndexError
@example(model="nemotron-h-8b", field="hybrid_override_pattern", value=5, nested=False)  # issue 13: TypeError
@example(model="nemotron-h-8b", field="hybrid_override_pattern", value="x" * 52, nested=False)  # 0 bytes before
@example(model="mixtral-8x7b", field="num_local_experts", value="8", nested=False)   # issue 13
@example(model="mixtral-8x7b", field="num_local_experts", value=7.5, nested=False)   # issue 13
@example(model="mixtral-8x7b", field="num_local_experts", value=-8, nested=False)    # issue 13: 7.24B params
@example(model="mixtral-8x7b", field="num_local_experts", value=float("nan"), nested=False)  # "nanB params"
@example(model="llama-3.1-8b", field="num_hidden_layers", value=10**6, nested=False)  # issue 13: 12-18 s
@example(model="llama-3.1-8b", field="head_dim", value=10**30, nested=False)          # issue 13: accepted
@example(model="gemma-3-27b", field="num_hidden_layers", value=10**12, nested=True)   # issue 13: endless loop
@example(model="llama-3.1-8b", field="vocab_size", value=10**400, nested=False)
def test_one_hostile_field(model, field, value, nested):
    cfg = json.loads(json.dumps(catalog.preset(model)["config"]))
    target = cfg["text_config"] if nested and isinstance(cfg.get("text_config"), dict) else cfg
    target[field] = value
    _read_and_size(f"{model} {field}={value!r:.40}", cfg, field)


def _deep(n):
    return '{"a": ' + "[" * n + "]" * n + "}"


JSON_TEXT = st.one_of(
    st.text(max_size=40),
    st.sampled_from([_deep(10_000), _deep(100), _deep(30), "[]", "[1]", "null", "1", '"x"', "{", "{}",
                     '{"num_hidden_layers": ' + "9" * 5000 + "}", '{"model_type": "llama", "num_hidden_layers": 1e400}',
                     '{"num_hidden_layers": 1000000, "num_attention_heads": 1, "hidden_size": 1}',
                     '{"num_hidden_layers": NaN, "num_attention_heads": 1, "hidden_size": 1}',
                     '\ufeff{"num_hidden_layers": 2, "num_attention_heads": 1, "hidden_size": 8}']),
)


@settings(max_examples=600, **SETTINGS)
@given(text=JSON_TEXT)
@example(text=_deep(10_000))  # issue 13: RecursionError
@example(text='{"num_hidden_layers": 1000000, "num_attention_heads": 1, "hidden_size": 1}')  # issue 13: 12-18 s
def test_json_text(text):
    if not text.lstrip().startswith(("{", "[")):
        text = "{" + text  # keep it JSON text, never a path
    _read_and_size(f"text {text[:40]!r}", text, "config")


FILE_BYTES = st.one_of(
    st.binary(max_size=64),
    st.sampled_from([json.dumps({"model_type": "llama"}).encode("utf-16"), b'{"model_type": "caf\xe9"}',
                     b"\xef\xbb\xbf{}", b"\x00" * 32, _deep(10_000).encode()]),
)


@settings(max_examples=300, **SETTINGS)
@given(content=FILE_BYTES)
@example(content=json.dumps({"model_type": "llama"}).encode("utf-16"))  # issue 13: UnicodeDecodeError
@example(content=b'{"model_type": "caf\xe9"}')                          # issue 13: UnicodeDecodeError
def test_config_files(content):
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "config.json")
        with open(path, "wb") as handle:
            handle.write(content)
        _read_and_size(f"file {content[:20]!r}", path, "config")


def test_special_files_are_refused():
    # issue 13: a symlink to /dev/zero was read until memory ran out
    with tempfile.TemporaryDirectory() as folder:
        link = os.path.join(folder, "config.json")
        os.symlink("/dev/zero", link)
        for path in (link, folder, "/dev/null"):
            call(f"file {path}", lambda path=path: kvmem.Model.from_hf_config(path), names=["config"])


@settings(max_examples=12, **SETTINGS)
@given(model=st.sampled_from(["gemma-3-27b", "llama-3.1-8b", "qwen3-next-80b-a3b", "deepseek-v3"]),
       engine=st.sampled_from(["vllm", "sglang", "llama.cpp", "trtllm", "hf-dynamic"]))
@example(model="gemma-3-27b", engine="sglang")  # issue 13: per-layer lookups made this quadratic
def test_the_largest_model_the_reader_admits(model, engine):
    # 1,024 layers, the reader's bound: every call stays far from a hang (the tally counts any over 2 s)
    cfg = json.loads(json.dumps(catalog.preset(model)["config"]))
    text = cfg["text_config"] if "num_hidden_layers" not in cfg else cfg
    text["num_hidden_layers"] = 1024
    text.pop("layer_types", None)
    big = call(f"read {model} x 1024 layers", lambda: kvmem.Model.from_hf_config(cfg), names=["config"])
    call(f"fit {model} x 1024 layers {engine}",
         lambda: kvmem.fit(big, gpu="custom:100TiB:3TB/s", context="32k", engine=engine),
         names=["tp", "engine", "context", "fit"])

"""GGUF headers of the architectures kvmem's llama.cpp mode lays out (glm4moe, glm-dsa, deepseek32, minimax-m2,
qwen35, qwen35moe), judged by round trip: kvmem.oracles.llamacpp_family_files writes the GGUF llama.cpp's
converter would write for a model (the file the llama.cpp oracles load in llama.cpp itself), Model.from_gguf
reads it back, and the KV bytes, the recurrent state and llama.cpp's tensor layout must equal the config's."""

from __future__ import annotations

import json
import random
from pathlib import Path

import gguf
import pytest

import kvmem
from kvmem.engines.llamacpp.tensors import synthesised_tensors
from kvmem.oracles.llamacpp_buffers import write_sparse
from kvmem.oracles.llamacpp_family_files import write_family
from kvmem.sources import SourceError
from tests.fixtures.gguf.published_headers import QWEN36_35B_A3B_MTP

CORPUS = Path(__file__).parent.parent / "fixtures" / "configs" / "corpus"
PRESETS = ("glm-4.5-air", "glm-4.7", "glm-5", "glm-5.1", "glm-5.2", "deepseek-v3.2", "qwen3.5-27b",
           "qwen3.5-397b-a17b", "gemma-4-26b-a4b")
CORPUS_CONFIGS = ("MiniMaxAI--MiniMax-M2.7", "Qwen--Qwen3.6-35B-A3B", "Qwen--Qwen3.5-122B-A10B", "zai-org--GLM-5.2",
                  "nvidia--Gemma-4-31B-IT-NVFP4")


def _corpus(name: str):
    return kvmem.Model.from_hf_config(json.loads((CORPUS / f"{name}.json").read_text()), name=name)


def _same(model, back, fmt: str = "q4_k_m") -> None:
    assert back.num_layers == model.num_layers
    for tokens, batch, kv_dtype in ((8192, 1, "auto"), (32768, 2, "q8_0")):
        mine = kvmem.estimate(back, engine="llama.cpp", tokens=tokens, batch=batch, kv_dtype=kv_dtype)
        theirs = kvmem.estimate(model, engine="llama.cpp", tokens=tokens, batch=batch, kv_dtype=kv_dtype)
        assert (mine.kv_bytes, mine.state_bytes) == (theirs.kv_bytes, theirs.state_bytes), (tokens, kv_dtype)
    # the layout of the file read back: llama-quantize's n_layer counts the MTP layers the file carries
    # (llama-quant.cpp#L940, kvmem.engines.llamacpp.arch_tensors.gguf_nextn_layers), none in a --no-mtp file
    assert synthesised_tensors(back, fmt) == synthesised_tensors(model if back.mtp_layers else _without_mtp(model), fmt)


def _without_mtp(model):
    """``model`` as a config naming no MTP layers: what convert_hf_to_gguf --no-mtp writes."""
    cfg = json.loads(json.dumps(model.config))
    for part in (cfg, cfg.get("text_config") or {}):
        for name in ("num_nextn_predict_layers", "mtp_num_hidden_layers"):
            if part.get(name):
                part[name] = 0
    return kvmem.Model.from_hf_config(cfg, name=model.name)


def _round_trip(model, path, fmt: str = "q4_k_m"):
    tensors = write_family(model, fmt, str(path), source=False)
    back = kvmem.Model.from_gguf(path)
    # the weights read from the header are the layout's bytes, tensor by tensor
    assert sum(t.nbytes for t in back.checkpoint.tensors) == sum(t.nbytes for t in tensors)
    return back


@pytest.mark.parametrize("name", PRESETS)
def test_presets_round_trip(tmp_path, name):
    model = kvmem.get_model(name)
    _same(model, _round_trip(model, tmp_path / f"{name}.gguf"))


@pytest.mark.parametrize("name", CORPUS_CONFIGS)
def test_published_configs_round_trip(tmp_path, name):
    model = _corpus(name)
    _same(model, _round_trip(model, tmp_path / "m.gguf"))


def test_dsa_kv_bytes_by_hand(tmp_path):
    # GLM-5: 78 layers x (512 latent + 64 rope + 128 indexer key) x 2 B = 109,824 B a token (f16 cache);
    # GLM-5.2: 21 "full" layers keep the indexer key, 57 "shared" do not: 78 x 1,152 + 21 x 256 = 95,232 B
    # DeepSeek-V3.2: 61 x (512 + 64 + 128) x 2 = 85,888 B
    for name, per_token in (("glm-5", 109_824), ("glm-5.2", 95_232), ("deepseek-v3.2", 85_888)):
        back = _round_trip(kvmem.get_model(name), tmp_path / f"{name}.gguf")
        assert kvmem.estimate(back, engine="llama.cpp", tokens=32768).kv_bytes == per_token * 32768, name


class _Converted:
    """A GGUFWriter writing what convert_hf_to_gguf writes with the MTP layers kept: block_count counts
    them and nextn_predict_layers says how many (llama.cpp@0c1e57098 conversion/glm.py#L330-L374,
    conversion/deepseek.py#L474-L517, conversion/qwen.py#L298-L354)."""

    def __init__(self, writer, nextn: int, drop: tuple = ()):
        self.writer, self.nextn, self.drop = writer, nextn, drop

    def add_block_count(self, n):
        self.writer.add_block_count(n + self.nextn)
        self.writer.add_nextn_predict_layers(self.nextn)

    def add_array(self, key, value):
        if not any(key.endswith(d) for d in self.drop):
            self.writer.add_array(key, value)

    def __getattr__(self, name):
        return getattr(self.writer, name)


def _write_converted(model, path, nextn: int, *, drop: tuple = (), context: int | None = None):
    from kvmem.engines.llamacpp.arch_fields import ARCHS
    from kvmem.oracles.llamacpp_family_files import write_metadata
    arch = ARCHS[model.model_type]
    writer = gguf.GGUFWriter(str(path), arch)
    proxy = _Converted(writer, nextn, drop)
    if context is not None:
        proxy.add_context_length = lambda _n: writer.add_context_length(context)
    write_metadata(proxy, model, arch, "q4_k_m")
    write_sparse(writer, [(t.name, t.shape, t.dtype) for t in synthesised_tensors(model, "q4_k_m")])
    return kvmem.Model.from_gguf(path)


@pytest.mark.parametrize("name", ("glm-5", "deepseek-v3.2", "qwen3.5-397b-a17b", "glm-4.7"))
def test_mtp_layers_counted_in_block_count_are_not_trunk_layers(tmp_path, name):
    model = kvmem.get_model(name)
    back = _write_converted(model, tmp_path / "m.gguf", nextn=1)
    assert back.config["num_nextn_predict_layers"] == 1
    _same(model, back)


def test_glm_5_2_without_indexer_types_takes_llama_cpps_table(tmp_path):
    # glm-dsa.cpp L62-L72: no indexer.types key -> every layer full below a 1,048,576-token context
    # (GLM-5, 5.1), else the built-in GLM-5.2 table (21 full of 78: layers 0, 1, 2, 6, 10, ..., 74)
    model = kvmem.get_model("glm-5.2")
    assert model.max_position_embeddings == 1_048_576
    back = _write_converted(model, tmp_path / "a.gguf", 0, drop=("indexer.types",))
    assert "indexer_types" in back.config
    _same(model, back)
    short = _write_converted(model, tmp_path / "b.gguf", 0, drop=("indexer.types",), context=202_752)
    assert "indexer_types" not in short.config
    assert kvmem.estimate(short, engine="llama.cpp", tokens=1024).kv_bytes == 109_824 * 1024


def test_a_real_qwen3_6_mtp_header(tmp_path):
    """Qwen3.6-35B-A3B with its MTP layer, keys as published (tests/fixtures/gguf/published_headers.py):
    block_count 41, nextn_predict_layers 1 -> 40 trunk layers, 10 of them full attention."""
    path = tmp_path / "q.gguf"
    writer = gguf.GGUFWriter(str(path), "qwen35moe")
    for key, value in QWEN36_35B_A3B_MTP.items():
        if key != "general.architecture":
            writer.add_uint32(key, value)
    write_sparse(writer, [("token_embd.weight", (2048, 248320), "Q4_K")])
    back = kvmem.Model.from_gguf(path)
    config = _corpus("Qwen--Qwen3.6-35B-A3B")
    assert back.num_layers == 40 and back.kinds == {"full": 10, "linear": 30}
    # 10 full layers x 2 KV heads x 256 x 2 (K, V) x 2 B = 20,480 B a token; each linear layer keeps
    # 32 x 128 x 128 f32 of state + (4 - 1) x (4,096 + 2 x 16 x 128) f32 of conv = 2,195,456 B
    est = kvmem.estimate(back, engine="llama.cpp", tokens=32768)
    assert (est.kv_bytes, est.state_bytes) == (20_480 * 32768, 30 * 2_195_456)
    ref = kvmem.estimate(config, engine="llama.cpp", tokens=32768)
    assert (est.kv_bytes, est.state_bytes) == (ref.kv_bytes, ref.state_bytes)


# seeded random shapes: (model_type's preset or corpus config, {field: choices}); fields under text_config
# where the config nests them
_SHAPES = {
    "glm-5.2": {"num_hidden_layers": (4, 6, 9), "first_k_dense_replace": (0, 1, 3), "num_attention_heads": (8, 16),
                "kv_lora_rank": (128, 512), "qk_rope_head_dim": (32, 64), "qk_nope_head_dim": (64, 192),
                "v_head_dim": (64, 256), "index_n_heads": (8, 32), "index_head_dim": (64, 128),
                "index_topk": (256, 2048), "hidden_size": (512, 1024), "q_lora_rank": (256, 512),
                "max_position_embeddings": (202_752, 1_048_576)},
    "deepseek-v3.2": {"num_hidden_layers": (3, 5, 8), "first_k_dense_replace": (0, 2), "num_attention_heads": (8, 16),
                      "kv_lora_rank": (128, 512), "qk_rope_head_dim": (32, 64), "index_n_heads": (4, 64),
                      "index_head_dim": (64, 128), "hidden_size": (512, 768), "n_routed_experts": (8, 16)},
    "glm-4.7": {"num_hidden_layers": (3, 5), "first_k_dense_replace": (0, 1), "num_attention_heads": (8, 16),
                "num_key_value_heads": (1, 2, 8), "head_dim": (64, 128), "partial_rotary_factor": (0.5, 1.0),
                "use_qk_norm": (True, False), "attention_bias": (True, False), "hidden_size": (512, 1024)},
    "MiniMaxAI--MiniMax-M2.7": {"num_hidden_layers": (2, 5), "num_attention_heads": (8, 16),
                                "num_key_value_heads": (1, 4, 8), "head_dim": (64, 128), "rotary_dim": (32, 64),
                                "hidden_size": (512, 1024), "num_local_experts": (8, 16)},
    "qwen3.5-27b": {"num_hidden_layers": (4, 8, 12), "full_attention_interval": (2, 4), "num_attention_heads": (8, 24),
                    "num_key_value_heads": (1, 4), "head_dim": (128, 256), "linear_num_value_heads": (16, 48),
                    "linear_num_key_heads": (8, 16), "linear_key_head_dim": (64, 128), "hidden_size": (512, 1024)},
    "gemma-4-26b-a4b": {"num_hidden_layers": (4, 6, 12), "num_attention_heads": (8, 16),
                        "num_key_value_heads": (4, 8), "num_global_key_value_heads": (1, 2), "head_dim": (128, 256),
                        "global_head_dim": (256, 512), "attention_k_eq_v": (True, False),
                        "enable_moe_block": (True, False), "sliding_window": (512, 1024), "hidden_size": (512, 1024)},
    "qwen3.5-397b-a17b": {"num_hidden_layers": (4, 8), "full_attention_interval": (2, 4),
                          "num_key_value_heads": (1, 2), "linear_num_value_heads": (32, 64),
                          "linear_key_head_dim": (64, 128), "num_experts": (8, 16), "hidden_size": (512, 1024)},
}


def _base_config(name: str) -> dict:
    if (CORPUS / f"{name}.json").exists():
        return json.loads((CORPUS / f"{name}.json").read_text())
    return json.loads(json.dumps(kvmem.get_model(name).config))


def _shaped(name: str, rng: random.Random) -> dict:
    cfg = _base_config(name)
    text = cfg["text_config"] if isinstance(cfg.get("text_config"), dict) else cfg
    for key, choices in _SHAPES[name].items():
        text[key] = rng.choice(choices)
    text["vocab_size"] = 4096
    if "linear_key_head_dim" in text:
        # one DeltaNet head width for keys and values: the family writer writes ssm.inner_size as
        # linear_key_head_dim x value heads (the converter: linear_value_head_dim x value heads,
        # conversion/qwen.py L381), which agree only so
        text["linear_value_head_dim"] = text["linear_key_head_dim"]
    if "kv_lora_rank" in text:      # MLA configs list every head as a KV head
        text["num_key_value_heads"] = text["num_attention_heads"]
    n = text["num_hidden_layers"]
    text["num_hidden_layers"] = n - n % text.get("full_attention_interval", 1) or text.get("full_attention_interval", 1)
    n = text["num_hidden_layers"]
    if "layer_types" in text and "full_attention_interval" in text:
        interval = text["full_attention_interval"]
        text["layer_types"] = ["linear_attention" if (i + 1) % interval else "full_attention" for i in range(n)]
    if "indexer_types" in text:
        text["indexer_types"] = ["full"] + [rng.choice(("full", "shared")) for _ in range(n - 1)]
    if text.get("model_type") == "gemma4_text":
        text["layer_types"] = [rng.choice(("sliding_attention", "full_attention")) for _ in range(n)]
        if not text["enable_moe_block"]:    # a dense Gemma 4 (31B): no expert fields
            for key in ("num_experts", "top_k_experts", "moe_intermediate_size"):
                text.pop(key, None)
    if "mlp_layer_types" in text:
        text.pop("mlp_layer_types")
    text["first_k_dense_replace"] = min(text.get("first_k_dense_replace", 0), n - 1)
    return cfg


@pytest.mark.parametrize("name", sorted(_SHAPES))
def test_seeded_random_shapes_round_trip(tmp_path, name):
    rng = random.Random(f"h32-{name}")
    for i in range(4):
        cfg = _shaped(name, rng)
        model = kvmem.Model.from_hf_config(cfg, name=f"{name}-{i}")
        _same(model, _round_trip(model, tmp_path / f"{i}.gguf"))


def _header(path, arch: str, items: dict):
    writer = gguf.GGUFWriter(str(path), arch)
    for key, value in items.items():
        if isinstance(value, list):
            writer.add_array(f"{arch}.{key}", value)
        else:
            writer.add_uint32(f"{arch}.{key}", value)
    write_sparse(writer, [("token_embd.weight", (64, 256), "F32")])
    return path


_QWEN35 = {"block_count": 8, "embedding_length": 256, "attention.head_count": 4, "attention.head_count_kv": 2,
           "attention.key_length": 64, "attention.value_length": 64, "ssm.conv_kernel": 4, "ssm.state_size": 32,
           "ssm.group_count": 2, "ssm.time_step_rank": 4, "ssm.inner_size": 128}


def test_qwen35_defaults_and_recurrent_layers(tmp_path):
    # no full_attention_interval: 4 (qwen35.cpp L15-L16): layers 3 and 7 full
    model = kvmem.Model.from_gguf(_header(tmp_path / "a.gguf", "qwen35", _QWEN35))
    assert model.kinds == {"full": 2, "linear": 6}
    # Qwen3-Next the same (qwen3next.cpp L15-L16)
    assert kvmem.Model.from_gguf(_header(tmp_path / "n.gguf", "qwen3next", _QWEN35)).kinds == {"full": 2, "linear": 6}
    # a recurrent_layers list that is the interval's pattern, MTP layer last and not recurrent
    listed = [True, True, True, False, True, True, True, False, False]
    ok = dict(_QWEN35, block_count=9, nextn_predict_layers=1, **{"attention.recurrent_layers": listed})
    assert kvmem.Model.from_gguf(_header(tmp_path / "b.gguf", "qwen35", ok)).kinds == {"full": 2, "linear": 6}
    other = dict(_QWEN35, **{"attention.recurrent_layers": [True, False] * 4})
    with pytest.raises(SourceError, match="recurrent_layers is not every 4th layer full"):
        kvmem.Model.from_gguf(_header(tmp_path / "c.gguf", "qwen35", other))


def test_qwen35_recurrent_layers_of_another_length_are_refused(tmp_path):
    # qwen35.cpp#L17 reads recurrent_layers with get_key_or_arr over block_count (9, with the MTP layer): 8 entries
    # (the trunk's) or 10 are refused as llama.cpp refuses them
    listed = [True, True, True, False, True, True, True, False, False]
    for cut in (listed[:8], listed + [False]):
        bad = dict(_QWEN35, block_count=9, nextn_predict_layers=1, **{"attention.recurrent_layers": cut})
        with pytest.raises(SourceError, match=rf"qwen35.attention.recurrent_layers has {len(cut)} entries, one per "
                                              rf"layer, and block_count is 9: .*expected 9, got {len(cut)}"):
            kvmem.Model.from_gguf(_header(tmp_path / "r.gguf", "qwen35", bad))


def test_refusals_name_the_key(tmp_path):
    with pytest.raises(SourceError, match="nextn_predict_layers is 8; it must be below block_count"):
        kvmem.Model.from_gguf(_header(tmp_path / "a.gguf", "qwen35", dict(_QWEN35, nextn_predict_layers=8)))
    dsa = {"block_count": 4, "embedding_length": 256, "attention.head_count": 4, "attention.head_count_kv": 1,
           "attention.kv_lora_rank": 64, "attention.q_lora_rank": 64, "rope.dimension_count": 16,
           "attention.key_length_mla": 48, "attention.value_length_mla": 32, "attention.indexer.head_count": 2,
           "attention.indexer.key_length": 32, "attention.indexer.top_k": 64,
           "attention.indexer.types": [True, False, True]}
    with pytest.raises(SourceError, match=r"indexer.types has 3 entries, one per layer, and block_count less "
                                          r"nextn_predict_layers is 4: llama.cpp 0c1e57098 refuses the file \("
                                          r"\"key glm-dsa.attention.indexer.types has wrong array length; expected "
                                          r"4, got 3\""):
        kvmem.Model.from_gguf(_header(tmp_path / "b.gguf", "glm-dsa", dsa))
    del dsa["attention.indexer.head_count"]
    dsa["attention.indexer.types"] = [True] * 4
    with pytest.raises(SourceError, match="'glm-dsa.attention.indexer.head_count' is missing"):
        kvmem.Model.from_gguf(_header(tmp_path / "c.gguf", "glm-dsa", dsa))


def test_gemma4_full_layers_with_their_own_kv_heads(tmp_path):
    """A Gemma 4 header whose full layers keep 2 KV heads of 512 and the sliding ones 8 of 256, with V
    projections in every layer (not attention_k_eq_v): the full layers' shape goes per layer."""
    items = {"block_count": 4, "embedding_length": 256, "attention.head_count": 8, "attention.key_length": 512,
             "attention.value_length": 512, "attention.key_length_swa": 256, "attention.value_length_swa": 256,
             "attention.sliding_window": 128, "embedding_length_per_layer_input": 0, "feed_forward_length": 512,
             "attention.sliding_window_pattern": [True, True, True, False], "attention.head_count_kv": [8, 8, 8, 2]}
    path = tmp_path / "g.gguf"
    writer = gguf.GGUFWriter(str(path), "gemma4")
    for key, value in items.items():
        if isinstance(value, list):
            writer.add_array(f"gemma4.{key}", value)
        else:
            writer.add_uint32(f"gemma4.{key}", value)
    write_sparse(writer, [("token_embd.weight", (256, 1024), "F32")]
                 + [(f"blk.{i}.attn_v.weight", (256, 256), "F32") for i in range(4)])
    model = kvmem.Model.from_gguf(path)
    assert [(layer.kv_heads, layer.head_dim_k, bool(layer.window)) for layer in model.layers] == \
        [(8, 256, True)] * 3 + [(2, 512, False)]
    assert model.config["attention_k_eq_v"] is False

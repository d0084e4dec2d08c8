"""The sidebar's upload and paste messages say what the file is (issue 33 finding 8): an empty file or
YAML got a JSON parser's message about braces; a Q4_K_M GGUF was described as "bf16"."""

import io

import pytest

from ui.model_input import _from_text


@pytest.mark.parametrize("text, message", [
    ("", 'config.json is empty (0 bytes): give the model\'s config.json, a JSON object such as {"model_type": '
         '"llama", ...}'),
    (" \n", "config.json is empty (whitespace only): give"),
    ("model_type: llama\nnum_hidden_layers: 32\n", "config.json is not JSON: it reads as YAML (line 1: "
     "'model_type: llama'); kvmem reads a Hugging Face config.json, a JSON object with quoted keys"),
    ("---\n# exported\nmodel_type: llama\n", "config.json is not JSON: it reads as YAML (line 3: 'model_type: llama')"),
])
def test_empty_and_yaml_are_named(text, message):
    with pytest.raises(ValueError) as info:
        _from_text(text, "config.json")
    assert str(info.value).startswith(message) and "double quotes" not in str(info.value)


def test_bare_json_fields_still_read_and_errors_keep_their_grammar():
    model = _from_text('"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64, '
                       '"num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128, '
                       '"vocab_size": 100', "pasted config")
    assert model.num_layers == 2
    with pytest.raises(ValueError, match=r"Expecting ':' delimiter at line 2 column 5$"):
        _from_text('"model_type": "llama",\n"x" 3', "pasted config")


@pytest.mark.slow      # writes and reads a whole q4_k_m GGUF: ~16 s, in `make test`
def test_a_q4_k_m_gguf_is_described_by_its_tensor_types(tmp_path):
    from kvmem.model import Model
    from kvmem.sources.gguf import fields_from_gguf_bytes
    from tests.fixtures import gguf_models
    path = tmp_path / "m.gguf"
    gguf_models.write(path, "llama-3-8b", tiny=False)        # Q4_K everywhere, Q6_K on attn_v/ffn_down/output
    fields = fields_from_gguf_bytes(io.BytesIO(path.read_bytes()[:16 << 20]), name="Meta-Llama-3-8B.Q4_K_M.gguf")
    model = Model(**fields)
    assert model.describe().endswith("8.03B params, weights Q4_K + Q6_K + F32 (GGUF)")
    assert "bf16" not in model.describe()

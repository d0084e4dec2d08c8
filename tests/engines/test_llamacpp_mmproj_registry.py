"""The projectors kvmem builds from a config.json (graphs_mmproj_config.CONFIG_PROJECTORS): one list that
graphs_mmproj.mmproj_shape gates on and the byte-count refusal names (offload.mmproj_memory), so neither can go
stale apart (review finding 5f: the refusal's list had omitted Gemma 4 and Llama 4)."""

from types import SimpleNamespace

import kvmem
from kvmem.engines.llamacpp.graphs_mmproj import mmproj_shape
from kvmem.engines.llamacpp.graphs_mmproj_config import CONFIG_PROJECTORS, config_projector_names
from kvmem.engines.llamacpp.offload import mmproj_memory
from tests.engines.test_llamacpp_mmproj_clip import REAL, _qwen3


def _vision_presets():
    for name in kvmem.list_models():
        model = kvmem.get_model(name)
        if isinstance((model.config or {}).get("vision_config"), dict):
            yield model


def test_every_listed_config_has_a_projector_shape():
    # presets (Gemma 3 / 4, Llama 4, MiniMax-M3, Qwen3.5), the real towers of test_llamacpp_mmproj_clip (Qwen2-VL,
    # Qwen2.5-VL, Qwen3-VL, Mistral 3, Pixtral as llava) and a Qwen3-VL-MoE tower
    configs = {m.config["model_type"]: m for m in _vision_presets()}
    for cfg, text in [*REAL.values(), (_qwen3(27, 1152, 4304, 2048, [8, 16, 24], "qwen3_vl_moe"), 2048)]:
        configs.setdefault(cfg["model_type"], SimpleNamespace(config=cfg, hidden_size=text))
    assert set(CONFIG_PROJECTORS) <= set(configs)
    for model_type in CONFIG_PROJECTORS:
        assert mmproj_shape(configs[model_type]) is not None, model_type


def test_a_preset_with_a_vision_config_has_a_shape_only_where_listed():
    # Kimi-K3 has a vision_config whose tower kvmem builds only from the mmproj GGUF (graphs_mmproj_kimi)
    got = {m.name: (m.config["model_type"] in CONFIG_PROJECTORS, mmproj_shape(m) is not None) for m in _vision_presets()}
    assert all(listed == shaped for listed, shaped in got.values()), got
    assert got["kimi-k3"] == (False, False) and got["gemma-4-26b-a4b"] == (True, True)


def test_the_byte_count_refusal_names_every_listed_projector():
    names = "Gemma 3, Gemma 4, Qwen2-VL, Qwen2.5-VL, Qwen3-VL, Qwen3.5, Mistral 3 / Pixtral, Llava / Pixtral, Llama 4, " \
            "MiniMax-M3"
    assert config_projector_names() == names
    weights, compute, note = mmproj_memory(kvmem.get_model("kimi-k3"), 600_000_000, gpu="CUDA0")
    assert (weights, compute) == (600_000_000, None)
    assert f"config has no vision_config kvmem builds a projector's graph from ({names}); give the mmproj GGUF" in note

"""The README's "Bring your own model" Python example runs, against the loopback Hub."""

from __future__ import annotations

import pathlib
import re

import kvmem
from tests.fixtures import gguf_models

from .conftest import hub_configs

README = (pathlib.Path(__file__).resolve().parents[2] / "README.md").read_text()


def test_bring_your_own_model_example_runs(hub, tmp_path, monkeypatch):
    section = README.split("## Bring your own model", 1)[1].split("\n## ", 1)[0]
    block = re.findall(r"```python\n(.*?)```", section, flags=re.S)[0]
    hub.add("Qwen/Qwen2.5-14B", {"config.json": hub_configs()["Qwen/Qwen2.5-14B"]})
    monkeypatch.chdir(tmp_path)
    gguf_models.write(tmp_path / "Meta-Llama-3-8B-Instruct.Q4_K_M.gguf", "llama-3-8b", tiny=False)
    namespace = {"kvmem": kvmem}
    exec(compile(block, "README.md", "exec"), namespace)
    assert namespace["m"].num_layers == 32 and kvmem.weights.weights(namespace["m"]).source == "gguf"
    assert "What never is:** the weights, any code from the repository, `trust_remote_code`" in section

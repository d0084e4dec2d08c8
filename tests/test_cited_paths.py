"""Every file of this repository that a docstring in kvmem/ or a test names exists (issue 35 item 8):
a module that became a package, or a test that moved, leaves no stale path behind."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# a path inside this repository: one of its top folders, then a file with an extension
CITED = re.compile(r"(?<![\w./-])((?:kvmem|tests|docs|tools|bench|ui)/[\w./-]*\w\.(?:py|md|json|txt|toml|sh|csv))\b")


def _docstrings(path: Path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            text = ast.get_docstring(node, clean=False)
            if text:
                yield node.lineno if hasattr(node, "lineno") else 1, text


# paths of other repositories that share a top folder's name, cited as theirs
UPSTREAM = {
    "docs/gguf.md": "ggml's GGUF specification (kvmem/sources/gguf.py)",
    "tests/unittest/_torch/modeling/test_modeling_nemotron_nas.py": "TensorRT-LLM's own test",
}


def _missing(cited: str) -> bool:
    """Not in this repository (a NAME placeholder stands for any file name)."""
    if cited in UPSTREAM:
        return False
    if "NAME" in cited:
        return not any(ROOT.glob(cited.replace("NAME", "*")))
    return not (ROOT / cited).exists()


def test_every_path_a_docstring_cites_exists():
    missing = [f"{path.relative_to(ROOT)}:{line}: {cited}"
               for path in sorted((ROOT / "kvmem").rglob("*.py"))
               for line, text in _docstrings(path)
               for cited in CITED.findall(text) if _missing(cited)]
    assert missing == []


def test_every_path_a_test_cites_exists():
    missing = [f"{path.relative_to(ROOT)}: {cited}"
               for path in sorted((ROOT / "tests").rglob("*.py"))
               for cited in CITED.findall(path.read_text(encoding="utf-8")) if _missing(cited)]
    assert missing == []


def test_the_pattern_finds_a_repository_path_and_not_an_engines():
    text = "see kvmem/engines/base.py and tests/test_layout.py; vllm/v1/core/kv_cache_utils.py is vLLM's"
    assert CITED.findall(text) == ["kvmem/engines/base.py", "tests/test_layout.py"]

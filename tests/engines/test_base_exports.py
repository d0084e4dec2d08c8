"""kvmem/engines/base.py exports its own names only (issue 35 item 4): the results come from
engines/results.py, the parallelism rules from kvmem/parallel.py, each from its home."""

import ast
from pathlib import Path

from kvmem.engines import base

ROOT = Path(__file__).resolve().parent.parent.parent


def test_every_name_base_exports_is_defined_there():
    foreign = [name for name in base.__all__
               if getattr(getattr(base, name), "__module__", base.__name__) != base.__name__]
    assert foreign == []


def test_no_module_takes_a_name_from_base_that_base_does_not_define():
    own = set(base.__all__)
    found = []
    for path in sorted([*(ROOT / "kvmem").rglob("*.py"), *(ROOT / "tests").rglob("*.py"), *(ROOT / "ui").rglob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and (
                    node.module == "kvmem.engines.base" or node.module.endswith("engines.base")
                    or (node.module == "base" and node.level and "engines" in path.parts)):
                found += [f"{path.relative_to(ROOT)}: {alias.name}" for alias in node.names
                          if alias.name not in own]
    assert found == []

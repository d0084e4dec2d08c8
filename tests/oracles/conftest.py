"""The oracle tests run the engines' own code: only where `make oracles` installed them.

In the shared test environment the engines are absent, and each test module skips with the
reason "run `make oracles`"; `make test` runs this folder a second time with
.venv-oracles/bin/python, where they are present.
"""

import importlib.util

import pytest


def require(module: str):
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed here: run `make oracles` (then `make test` runs these "
                    "with .venv-oracles/bin/python)", allow_module_level=True)

"""Loading the app's pages headless with streamlit.testing's AppTest, for every UI test."""

import pathlib

import pytest

AppTest = pytest.importorskip("streamlit.testing.v1").AppTest
ROOT = pathlib.Path(__file__).resolve().parents[2]
APP = ROOT / "app.py"


def load(path: str = "app.py", timeout: int = 90):
    """An AppTest for ``path`` (relative to the repository), not yet run."""
    return AppTest.from_file(str(ROOT / path), default_timeout=timeout)


def run(path: str = "app.py", timeout: int = 90):
    """An AppTest for ``path``, after its first run."""
    return load(path, timeout).run()

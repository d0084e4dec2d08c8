"""ui/preload.py: the background imports after the first page, and the rule that pandas is imported alone.

Each check runs in a fresh interpreter, where pandas and torch are not yet imported.
"""

import os
import subprocess
import sys
import textwrap
import types

from tests.ui.apptest import ROOT
from ui import preload


def run_fresh(code: str, **env) -> str:
    """Run ``code`` in a new interpreter at the repository root; its stdout (it must exit 0)."""
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, capture_output=True, text=True,
                            timeout=120, env={**os.environ, **env})
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_a_module_still_initialising_is_not_imported(monkeypatch):
    half_built = types.ModuleType("half_built")
    half_built.__spec__ = types.SimpleNamespace(_initializing=True)
    monkeypatch.setitem(sys.modules, "half_built", half_built)
    assert not preload.imported("half_built")
    half_built.__spec__._initializing = False
    assert preload.imported("half_built")
    assert not preload.imported("no_such_module_here")


def test_switched_off_by_the_environment(monkeypatch):
    monkeypatch.setenv("KVMEM_PRELOAD", "0")
    assert not preload.enabled()
    assert not preload.start()
    monkeypatch.setenv("KVMEM_PRELOAD", "1")
    assert preload.enabled()


def test_page_runs_take_turns_until_pandas_is_imported():
    out = run_fresh("""
        import threading, time
        from ui import preload
        order = []
        inside = threading.Event()
        def first():
            with preload.page_run():
                inside.set(); time.sleep(0.3); order.append("first leaves")
        def second():
            inside.wait()
            with preload.page_run():
                order.append("second enters")
        a, b = threading.Thread(target=first), threading.Thread(target=second)
        a.start(); b.start(); a.join(); b.join()
        print(order)
        import pandas
        with preload._pandas_alone:  # once pandas is imported, a page run no longer takes the lock
            with preload.page_run():
                print("ran beside the lock")
    """)
    assert out.splitlines() == ["['first leaves', 'second enters']", "ran beside the lock"]


def test_start_imports_pandas_alone_then_torch_on_one_thread():
    out = run_fresh("""
        import sys, threading, time
        from ui import preload
        preload._pandas_alone.acquire()  # a page is running
        assert preload.start(delay_s=0) and not preload.start()  # once per process
        time.sleep(0.5)
        print("pandas while a page runs:", "pandas" in sys.modules)
        preload._pandas_alone.release()
        next(t for t in threading.enumerate() if t.name == "kvmem-preload").join(120)
        import torch
        print(preload.imported("pandas"), preload.imported("kvmem.lab"), torch.get_num_threads())
    """, KVMEM_PRELOAD="1")
    assert out.splitlines() == ["pandas while a page runs: False", "True True 1"]


def test_the_app_starts_it_after_its_first_run():
    out = run_fresh(f"""
        from streamlit.testing.v1 import AppTest
        from ui import preload
        print(preload._started.locked())
        at = AppTest.from_file({str(ROOT / "app.py")!r}, default_timeout=90).run()
        assert not at.exception
        print(preload._started.locked())
    """, KVMEM_PRELOAD="1")
    assert out.split() == ["False", "True"]

"""The server process's warm-up: keep the garbage collector off imported modules, and import
the modules only some pages need in the background.

Streamlit runs ``gc.collect(2)`` after every script run. A full collection scans every tracked
object, and imported modules are most of them: Streamlit's and plotly's ~90k cost 45-60 ms of
every rerun here, and torch's (once the Learn or Validate page has imported it) another ~90 ms.
``freeze_new_imports`` moves everything alive into the collector's permanent generation
(``gc.freeze``) whenever modules were imported since it last did, at the start of a run, when
the previous run's garbage is already collected. Reference counting still frees frozen objects.

``warm_later`` imports torch (through kvmem.lab) in a daemon thread a few seconds after the
first page is served, once per process, so that the Learn page's first visit does not wait
for it (bench/README.md).
"""

from __future__ import annotations

import gc
import importlib
import sys
import threading

WARM_MODULES = ("pandas", "kvmem.lab")  # Learn and Validate's tables and torch
WARM_DELAY_S = 3.0  # after the first page's run, so as not to compete with its first paint

_lock = threading.Lock()
_state = {"frozen_modules": 0, "warming": False}


def freeze_new_imports() -> bool:
    """gc.freeze() if modules were imported since the last call that froze; True if it froze."""
    with _lock:
        if len(sys.modules) == _state["frozen_modules"]:
            return False
        gc.freeze()
        _state["frozen_modules"] = len(sys.modules)
        return True


def _import_all(modules) -> None:
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001  (the page that needs the module reports the problem)
            break  # the next run's freeze_new_imports freezes what did load


def warm_later(modules=WARM_MODULES, delay_s: float = WARM_DELAY_S) -> threading.Timer | None:
    """Import ``modules`` in a daemon thread ``delay_s`` seconds from now (the next run freezes
    them), once per process: returns the timer the first time, else None. A page that needs one of them
    meanwhile waits on Python's import lock rather than importing it twice."""
    with _lock:
        if _state["warming"]:
            return None
        _state["warming"] = True
    timer = threading.Timer(delay_s, _import_all, args=(tuple(modules),))
    timer.daemon = True
    timer.start()
    return timer

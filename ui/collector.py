"""Keep the garbage collector off imported modules.

Streamlit runs ``gc.collect(2)`` after every script run. A full collection scans every tracked
object, and imported modules are most of them: Streamlit's and plotly's ~90k cost 45-60 ms of
every rerun here, and torch's (once the Learn or Validate page has imported it) another ~90 ms.
``freeze_new_imports`` moves everything alive into the collector's permanent generation
(``gc.freeze``) whenever modules were imported since it last did. app.py calls it at the start
of each run, when the previous run's garbage has been collected; reference counting still
frees frozen objects.

The imports that ui/preload.py runs in the background after the first page are frozen the same
way, at the start of the next run.
"""

from __future__ import annotations

import gc
import sys
import threading

_lock = threading.Lock()
_state = {"frozen_modules": 0}


def freeze_new_imports() -> bool:
    """gc.freeze() if modules were imported since the last call that froze; True if it froze."""
    with _lock:
        if len(sys.modules) == _state["frozen_modules"]:
            return False
        gc.freeze()
        _state["frozen_modules"] = len(sys.modules)
        return True

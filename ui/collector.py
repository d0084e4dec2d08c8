"""Keep the garbage collector off imported modules.

Streamlit runs ``gc.collect(2)`` after every script run. A full collection scans every tracked
object, and imported modules are most of them: Streamlit's and plotly's ~90k cost 45-60 ms of
every rerun here, and torch's (once the Learn or Validate page has imported it) another ~90 ms.
``freeze_new_imports`` moves everything alive into the collector's permanent generation
(``gc.freeze``) whenever modules were imported since it last did. app.py calls it at the start
of each run, when the previous run's garbage has been collected; reference counting still
frees frozen objects.

Importing torch in the background instead, so that the Learn page's first visit would not wait
for it, was tried twice and not kept. A module being imported sits half-initialised in
``sys.modules``, where plotly looks for optional packages while it draws: a chart drawn at the
same moment failed with "partially initialized module 'numpy' has no attribute 'ndarray'"
(torch imports numpy, which the calculator does not otherwise load), or the same for pandas.
Holding page runs back while the imports ran stalled whichever page came next by ~3 s.
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

"""Import the slower pages' libraries in the background, once the first page has been drawn.

A new server imports only what the calculator needs. The Learn page's first visit then waited
for torch and kvmem.lab (~2.2 s here) and for pandas (~0.45 s; Compare, Fit, Strategies and
Validate import it for their tables) before its content was complete: 2.0-2.5x the floor page's
first chart (bench/README.md). app.py calls ``start`` after every run; the first call starts one
daemon thread that imports them while the user reads the first page: 4 s after it, at the
lowest CPU priority (Linux: this thread only). A browser on the same two-core machine was still
drawing that page, or the next one, and importing beside it made that page ~1 s slower to complete.

A module being imported sits half-initialised in ``sys.modules``, so two rules keep this safe:

- **pandas is imported alone.** plotly looks pandas up in ``sys.modules`` without taking the
  import lock (``_plotly_utils.optional_imports.get_module(name, should_load=False)``) while it
  builds and serialises a figure, and a half-built pandas breaks it. Until pandas is fully
  imported, ``page_run`` lets one page run at a time, and none while this thread imports it
  (~0.5 s, once per process); after that it costs nothing. This also closes the same race for
  a page that imports pandas itself before the thread does.
- **torch and kvmem.lab are imported while pages run.** Nothing a page calls looks them up in
  ``sys.modules``: plotly looks only for numpy, pandas, PIL.Image and sage.all (app.py imports
  numpy before any page draws; torch imports neither PIL nor pandas), narwhals skips modules
  still initialising, and a page's own ``import`` waits on that module's import lock.

torch runs the lab's decoders on one intra-op thread here (``lab``): they are tiny (d_model 12
and 64, 128 for the timing), and beside a busy core torch's two threads wait for each other.
``compare_variants`` took 0.52-0.88 s with two threads against 0.15 s with one while another
process held a core, and 2.7 s in the server while the browser drew the page.

``KVMEM_PRELOAD=0`` turns the thread off (it saves the ~260 MB these imports take when no one
opens Learn or Validate). The test suite sets it, so that no background import can race a test
that draws a figure directly; the browser tests' servers turn it back on.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import time

_pandas_alone = threading.Lock()
_started = threading.Lock()
AFTER_FIRST_PAGE_S = 4.0  # between the first page's run and the imports (see above)


def enabled() -> bool:
    """Whether ``start`` starts the thread: unless the environment says ``KVMEM_PRELOAD=0``."""
    return os.environ.get("KVMEM_PRELOAD", "1").strip() != "0"


def imported(name: str) -> bool:
    """Whether module ``name`` is in ``sys.modules`` and has finished initialising."""
    module = sys.modules.get(name)
    return module is not None and not getattr(getattr(module, "__spec__", None), "_initializing", False)


@contextlib.contextmanager
def page_run():
    """Around a page's run: one at a time, and never during the pandas import, until pandas is imported."""
    if imported("pandas"):
        yield
        return
    with _pandas_alone:
        yield


def lab():
    """kvmem.lab, with torch set to one intra-op thread for the whole app (see above)."""
    import torch

    from kvmem import lab as kvmem_lab

    if torch.get_num_threads() != 1:
        torch.set_num_threads(1)
    return kvmem_lab


def start(delay_s: float = AFTER_FIRST_PAGE_S) -> bool:
    """Start the preloading thread, once per process, importing after ``delay_s``; True if this call started it."""
    if not enabled() or not _started.acquire(blocking=False):
        return False
    threading.Thread(target=_preload, args=(delay_s,), name="kvmem-preload", daemon=True).start()
    return True


def _preload(delay_s: float) -> None:
    with contextlib.suppress(AttributeError, OSError):  # Linux: this thread only, the lowest priority
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
    time.sleep(delay_s)
    try:
        with _pandas_alone:
            import pandas  # noqa: F401
        lab()
    except Exception:  # the page that needs it imports it again and reports the failure itself
        logging.getLogger(__name__).exception("kvmem: preloading pandas and torch failed")

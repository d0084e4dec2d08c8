"""Suite-wide settings: hypothesis gives the same verdict on every machine, run after run.

Derandomised (examples follow from each test's own code) and without an example database,
so a failure found once does not silently become a local-only failure: it is kept as an
explicit ``@example`` in the test instead. The app's background imports are off here, and a page's view
sizes its matrix or grid whole.
"""

import os

from hypothesis import settings

# No background imports in the test process (ui/preload.py): a half-imported pandas could break a
# test that draws a figure directly. The browser tests' servers turn it back on.
os.environ["KVMEM_PRELOAD"] = "0"
# A page's view sizes new cells for KVMEM_VIEW_SECONDS (ui/common.view_seconds): here long enough that what a page
# shows does not depend on the machine's speed; the tests of that budget set it themselves.
os.environ["KVMEM_VIEW_SECONDS"] = "600"

settings.register_profile("kvmem", derandomize=True, database=None, deadline=None, print_blob=True)
settings.load_profile("kvmem")

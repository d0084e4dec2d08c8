"""Suite-wide settings: hypothesis gives the same verdict on every machine, run after run.

Derandomised (examples follow from each test's own code) and without an example database,
so a failure found once does not silently become a local-only failure: it is kept as an
explicit ``@example`` in the test instead.
"""

from hypothesis import settings

settings.register_profile("kvmem", derandomize=True, database=None, deadline=None, print_blob=True)
settings.load_profile("kvmem")

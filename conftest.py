"""Repository-wide pytest configuration.

Hypothesis runs derandomized in CI (``CI`` set: the same examples every run,
so a red CI is reproducible) and with fresh random examples on developer
machines, where exploring is the point. No deadlines: the first call of a
Warp kernel compiles it.
"""

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
settings.register_profile("dev", deadline=None, print_blob=True)
settings.load_profile("ci" if os.environ.get("CI") else "dev")

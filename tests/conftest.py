"""Settings for the whole suite.

Hypothesis's per-example deadline is a timed assertion: on a shared, loaded machine a correct
test can miss it. Speed is measured by the benchmarks, so the suite runs without deadlines.
``SESSION_SCHEDULE_FULL=1`` runs ten times as many examples.
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("suite", deadline=None)
settings.register_profile("full", deadline=None, max_examples=1000)
settings.load_profile("full" if os.environ.get("SESSION_SCHEDULE_FULL") == "1" else "suite")

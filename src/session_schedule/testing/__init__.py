"""What users get for their own tests: fakes for virtual time, and the storage contract suite.

- ``FakeClock`` — a virtual wall clock and virtual elapsed time (``advance``, ``jump``, ``set``,
  ``advance_to_next_wakeup``): delivery tests run with no real sleeps.
- ``FakeAgent`` — an Agent whose turns the test drives; records follow-ups, refuses on demand.
- ``IdleAgent`` — an Agent that is always idle and hands each follow-up to a callback (for
  benchmarks and load tests).
- ``session_contract.SessionStoreContract`` — the contract suite every session store passes;
  subclass it to test your own (it imports pytest, so it is not imported here).

Nothing in the library imports this package.
"""

from session_schedule.testing.agent import FakeAgent as FakeAgent
from session_schedule.testing.agent import IdleAgent as IdleAgent
from session_schedule.testing.clock import FakeClock as FakeClock

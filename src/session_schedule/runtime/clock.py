"""The wall clock the shell injects into the core.

Targets are wall-clock instants, so the owner re-reads :meth:`Clock.now` after every wake-up.
:meth:`Clock.sleep` is only ever asked for short, bounded waits: asyncio's loop clock is
monotonic and stops during a suspend, so a long sleep towards a wall-clock target would be late
after a suspend or a clock step — a bounded wait followed by a fresh reading is not.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol, final

from session_schedule.core.instants import Instant


class Clock(Protocol):
    def now(self) -> Instant:
        """The current wall-clock time, UTC epoch milliseconds."""
        ...

    def monotonic(self) -> float:
        """Elapsed time in seconds from an arbitrary origin: it never steps, whatever the wall
        clock does. Back-offs and retry waits are measured on it."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait about ``seconds`` of elapsed (not wall-clock) time."""
        ...


@final
class SystemClock:
    """The machine's wall clock, and asyncio's sleep."""

    def now(self) -> Instant:
        return Instant(time.time_ns() // 1_000_000)

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

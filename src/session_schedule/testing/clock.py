"""A fake clock for tests in virtual time: no real sleeps, full control over the wall clock."""

from __future__ import annotations

import asyncio
import heapq
from typing import final

from session_schedule.core.instants import (
    MS_PER_SECOND,
    Instant,
    format_instant,
    milliseconds,
    parse_instant,
)


@final
class FakeClock:
    """A virtual wall clock and virtual elapsed time, for :class:`~session_schedule.runtime.Clock`.

    The two are kept apart as on a real machine: :meth:`advance` lets time pass (both move, and
    sleepers whose time is up wake), while :meth:`jump` and :meth:`set` step only the wall clock —
    an NTP correction, a manual change, or a suspend during which elapsed time stood still.
    Sleeps are measured in elapsed time, like asyncio's monotonic loop clock. Time is kept in
    whole milliseconds; a duration in seconds becomes milliseconds by
    :func:`~session_schedule.core.instants.milliseconds` (the decimal value, rounded half to
    even, the same for negative steps), so ``advance(2.007)`` moves exactly 2,007 ms.
    """

    def __init__(self, start: Instant | str) -> None:
        self._wall: int = parse_instant(start) if isinstance(start, str) else start
        self._elapsed = 0
        self._sequence = 0
        self._sleepers: list[tuple[int, int, asyncio.Future[None]]] = []

    def now(self) -> Instant:
        return Instant(self._wall)

    def monotonic(self) -> float:
        """Virtual elapsed time, in seconds: moved by :meth:`advance`, never by :meth:`jump`."""
        return self._elapsed / MS_PER_SECOND

    def now_text(self) -> str:
        return format_instant(self.now())

    async def sleep(self, seconds: float) -> None:
        """Wait until :meth:`advance` has let ``seconds`` of virtual time pass."""
        deadline = self._elapsed + max(0, milliseconds(seconds))
        if deadline <= self._elapsed:
            await asyncio.sleep(0)
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._sequence += 1
        heapq.heappush(self._sleepers, (deadline, self._sequence, waiter))
        await waiter

    @property
    def sleepers(self) -> int:
        """How many sleeps are pending."""
        return sum(1 for _, _, waiter in self._sleepers if not waiter.done())

    def next_deadline(self) -> float | None:
        """Seconds of virtual time until the earliest pending sleep ends, or ``None``."""
        self._drop_finished()
        if not self._sleepers:
            return None
        return (self._sleepers[0][0] - self._elapsed) / MS_PER_SECOND

    def advance(self, seconds: float) -> None:
        """Let ``seconds`` pass: the wall clock and elapsed time move, due sleepers wake."""
        if seconds < 0:
            raise ValueError("time cannot pass backwards; use jump() to step the wall clock back")
        self._advance_ms(milliseconds(seconds))

    def _advance_ms(self, step: int) -> None:
        self._wall += step
        self._elapsed += step
        while self._sleepers and self._sleepers[0][0] <= self._elapsed:
            _, _, waiter = heapq.heappop(self._sleepers)
            if not waiter.done():
                waiter.set_result(None)

    def advance_to_next_wakeup(self) -> float:
        """Advance to the end of the earliest pending sleep; the seconds advanced (0 if none)."""
        self._drop_finished()
        if not self._sleepers:
            return 0.0
        step = self._sleepers[0][0] - self._elapsed
        self._advance_ms(step)
        return step / MS_PER_SECOND

    def jump(self, seconds: float) -> None:
        """Step the wall clock by ``seconds`` (either way); elapsed time and sleepers stay put."""
        self._wall += milliseconds(seconds)

    def set(self, instant: Instant | str) -> None:
        """Set the wall clock; elapsed time and sleepers stay put."""
        self._wall = parse_instant(instant) if isinstance(instant, str) else instant

    def _drop_finished(self) -> None:
        while self._sleepers and self._sleepers[0][2].done():
            heapq.heappop(self._sleepers)

"""One wall-clock watch per event loop for every idle owner whose next target is far off.

An owner (:mod:`session_schedule.runtime.live`) never sleeps longer than ``max_wait_seconds``
before re-reading the wall clock (SPEC §8: targets are wall-clock instants; the loop's clock is
monotonic and stops during a suspend). With ten thousand owners that is one wake-up and one
planning pass per owner every ``max_wait_seconds`` — hundreds a second, for nothing. The rules:

1. **One timer for all.** An owner whose next target is more than ``period`` (its
   ``max_wait_seconds``) away, or that has none, parks here instead of arming a timer of its
   own. The watch of that period reads the wall clock once every ``period`` seconds of the
   loop's time and releases every owner whose target is then at most ``period`` away; the owner
   re-reads the clock and arms a precise, bounded timer as before. An owner with nothing active
   is released only by a wake-up (a create, a delete: the log is all that can change that).
2. **The same bound.** A forward step of the wall clock, or a suspend, is noticed within one
   ``period`` of loop time, as an owner's own bounded sleep noticed it: the reading is fresh at
   every tick, and targets are compared with it, not with a time derived from the loop's clock.
3. **Idle costs nothing per owner.** A parked owner is one entry of a heap; a tick costs a
   clock reading and the pops of the owners it releases. The timer runs only while some owner
   is parked.
4. **Only on the system clock.** A :class:`~session_schedule.runtime.clock.Clock` of the
   caller's (a fake clock in virtual time) keeps each owner's own bounded sleep.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import weakref
from typing import Final, final

from session_schedule.core.instants import MS_PER_SECOND, Instant
from session_schedule.runtime.clock import SystemClock

_CLOCK: Final = SystemClock()


@final
class _Watch:
    """The owners of one loop parked for one ``period``, earliest target first."""

    __slots__ = ("_heap", "_loop", "_period", "_sequence", "_timer")

    def __init__(self, loop: asyncio.AbstractEventLoop, period: float) -> None:
        self._loop = loop
        self._period = period
        self._heap: list[tuple[Instant, int, asyncio.Future[None]]] = []
        self._sequence = itertools.count()
        self._timer: asyncio.TimerHandle | None = None

    @property
    def parked(self) -> int:
        return sum(1 for _, _, waiter in self._heap if not waiter.done())

    def park(self, target: Instant, waiter: asyncio.Future[None]) -> None:
        heapq.heappush(self._heap, (target, next(self._sequence), waiter))
        if self._timer is None:
            self._timer = self._loop.call_later(self._period, self._tick)

    def _tick(self) -> None:
        self._timer = None
        horizon = _CLOCK.now() + self._period * MS_PER_SECOND
        heap = self._heap
        while heap and (heap[0][2].done() or heap[0][0] <= horizon):
            _, _, waiter = heapq.heappop(heap)
            if not waiter.done():
                waiter.set_result(None)
        live = [entry for entry in heap if not entry[2].done()]
        if len(live) < len(heap):
            # Owners woken otherwise (a create, a close) leave their entries behind: drop them.
            heapq.heapify(live)
            self._heap = live
        if live:
            self._timer = self._loop.call_later(self._period, self._tick)


_watches: Final[weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[float, _Watch]]] = (
    weakref.WeakKeyDictionary()
)


def park(period: float, target: Instant | None, waiter: asyncio.Future[None]) -> None:
    """Settle ``waiter`` once ``target`` is at most ``period`` seconds away on the wall clock
    (read every ``period`` seconds); never for ``None`` — only its owner's wake-up settles it
    then. The caller cancels ``waiter`` (or settles it) when it stops waiting."""
    if target is None:
        return
    loop = asyncio.get_running_loop()
    by_period = _watches.setdefault(loop, {})
    watch = by_period.get(period)
    if watch is None:
        watch = by_period[period] = _Watch(loop, period)
    watch.park(target, waiter)


def parked() -> int:
    """How many owners of the running loop wait on a watch now (for tests)."""
    by_period = _watches.get(asyncio.get_running_loop(), {})
    return sum(watch.parked for watch in by_period.values())

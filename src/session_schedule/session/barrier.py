"""Group commit: the mechanism behind ``barrier()``.

Rules:

1. At most one flush is in flight per handle. A flush started when ``n`` entries had been
   appended makes entries ``[durable, n)`` durable and, on success, sets ``durable = n``.
2. A barrier that needs ``target`` entries durable waits while ``durable < target``: for the
   flush in flight if there is one (which may cover it), otherwise it starts a flush covering
   everything appended so far. So a hundred appends followed by one barrier cost one flush, and
   barriers called together share one; a barrier called while a flush is in flight whose entries
   that flush does not cover waits for it and then for the next one.
3. A failed flush is final: ``failure`` records why, ``durable`` never moves again and no flush
   is ever started again (a retried fsync proves nothing). The owning handle turns this into
   ``PersistenceUncertain`` on every later operation.

A cancelled barrier does not cancel the shared flush.

**A lone barrier flushes on the spot.** A handle may also give a synchronous ``flush_now``. Then
a barrier that finds no flush in flight first yields once to the event loop, so that barriers
called in the same pass of the loop can join it; if none did, it runs ``flush_now`` right there,
on the loop's thread, instead of handing the flush to the session's thread and waiting to be
called back (a hand-off that costs about as much again as the ``fsync`` itself). If others
joined, the flush goes to the session's thread as above and is shared. Either way rules 1 to 3 hold.

The yield is skipped when it cannot let anyone join: when the loop (asyncio's own, whose queue
of ready callbacks can be seen) has no callback ready to run. A task that yields resumes
after the callbacks ready at that moment and before any that I/O, timers or other threads
add meanwhile, so with none ready it would resume before any other code ran; flushing at once
then gives exactly the flushes the yield would have given, one loop pass sooner.

**Only a barrier alone in its loop flushes on the spot.** When a barrier of another handle on
the same loop is gathering or has a flush in flight — many sessions dispatching in the same
second, say — a lone barrier sends its flush to its session's worker too. Flushing on the spot
would block the loop, and every other session's timers and barriers with it, for the length of
each ``fsync`` in turn; on the workers the ``fsync`` calls of different sessions run at the same
time, which the file system commits together (one journal commit serves the ``fsync`` calls
waiting for it), and the loop keeps running. A barrier alone in its loop — a conversation's
tool call, one session's dispatch — still flushes on the spot.

Each loop counts its barriers that are gathering or have a flush in flight
(:func:`barriers_at_work`): the rule above reads it, and a test in virtual time uses it to let
a flush on a worker thread land before it moves the clock.

**Nor while a timer is due before the flush would end.** A lone barrier also sends its flush
to the worker when the loop's earliest timer (asyncio's own loop, whose heap of timers can be
seen) is due within the time a flush on the spot has recently taken: one-shots of many sessions
due within the same few milliseconds, each at its own instant, find one another's timers due
and their ``fsync`` calls run together on the workers, while the loop runs the timers on time.
That time is measured on each flush on the spot, and reported by the handle for its flushes on
its worker (:meth:`GroupCommit.measured`: the ``fsync`` alone, so that the estimate does not
stay high while every flush goes to the workers), and kept per loop: it follows a longer flush
at once and a shorter one slowly (an eighth of the way per flush), since a tail ``fsync`` on the
loop delays every timer behind it; before any was measured it is taken to be
:data:`FIRST_GUESS`. A timer cancelled during the current pass of the loop still counts (the
loop drops it from the heap only at its next pass); a loop whose timers cannot be seen (not
asyncio's own) is treated as having none due, as before this rule. A conversation's tool call,
with no other timer due within a few milliseconds, still flushes on the spot.
"""

from __future__ import annotations

import asyncio
import collections
import time
import weakref
from collections.abc import Awaitable, Callable
from typing import Final, Literal, TypeAlias, final

Flush = Callable[[int, int], Awaitable[None]]
"""``flush(durable, target)``: make entries ``[durable, target)`` durable, or fail.

It may return a future (no task is then created: one loop iteration less per barrier)."""
FlushNow = Callable[[int, int], None]
"""``flush_now(durable, target)``: the same flush, done before returning (or raising)."""

FIRST_GUESS: Final = 0.001
"""Seconds a flush on the spot is taken to last before one was measured on the loop."""
_DECAY: Final = 8
"""A shorter flush moves the loop's estimate this fraction (one in eight) of the way down."""


@final
class _Activity:
    """How many barriers of a loop's handles are gathering or have a flush in flight, and how
    long a flush on the spot has recently taken there."""

    __slots__ = ("count", "flush_seconds")

    def __init__(self) -> None:
        self.count = 0
        self.flush_seconds = FIRST_GUESS

    def measured(self, seconds: float) -> None:
        """Take a flush on the spot that lasted ``seconds`` into the estimate."""
        estimate = self.flush_seconds
        self.flush_seconds = (
            seconds if seconds >= estimate else estimate + (seconds - estimate) / _DECAY
        )


_ACTIVITY: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Activity] = (
    weakref.WeakKeyDictionary()
)


def barriers_at_work() -> int:
    """How many barriers of the running loop's handles are gathering or have a flush in flight
    now (for tests in virtual time, which must let a flush on a worker thread land)."""
    activity = _ACTIVITY.get(asyncio.get_running_loop())
    return 0 if activity is None else activity.count


def _activity() -> _Activity:
    loop = asyncio.get_running_loop()
    activity = _ACTIVITY.get(loop)
    if activity is None:
        activity = _ACTIVITY[loop] = _Activity()
    return activity


@final
class GroupCommit:
    """Coalesces barriers of one handle into as few flushes as the rules above allow."""

    def __init__(
        self,
        *,
        durable: int,
        appended: Callable[[], int],
        flush: Flush,
        flush_now: FlushNow | None = None,
    ) -> None:
        self.durable = durable
        """Entries below this position are known durable."""
        self.failure: str | None = None
        """Why a flush failed; ``None`` while none has."""
        self.flushes = 0
        """How many flushes were started (for tests and benchmarks)."""
        self._appended = appended
        self._flush = flush
        self._flush_now = flush_now
        self._gathering = False
        """Whether a lone barrier is yielding once before flushing on the spot."""
        self._flight: asyncio.Future[None] | None = None
        self._waiters: list[asyncio.Future[None]] = []
        self._activity: _Activity | None = None
        """The loop's count of barriers at work, once this handle has taken part in it."""

    async def cover(self, target: int) -> None:
        """Return once entries below ``target`` are durable or a flush has failed."""
        while self.durable < target and self.failure is None:
            flush_now = self._flush_now
            if (
                self._flight is None
                and not self._gathering
                and flush_now is not None
                and (activity := self._loop_activity()).count == 0
                and (state := _loop_state(activity.flush_seconds)) is not _TIMER_DUE
                and (
                    state is _IDLE
                    # What ran during the yield may have set a timer.
                    or (
                        await self._alone()
                        and _loop_state(activity.flush_seconds) is not _TIMER_DUE
                    )
                )
            ):
                self._flush_here(flush_now, activity)
                continue
            if self._flight is None and not self._gathering:
                self._launch()
            # Each waiter has its own future, woken when the flush lands: a cancelled waiter
            # cancels only its own, never the shared flush.
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            await waiter

    def measured(self, seconds: float) -> None:
        """Take a flush that was not on the spot (a worker's ``fsync``, say), which lasted
        ``seconds``, into the loop's estimate of how long one on the spot would take."""
        self._loop_activity().measured(seconds)

    async def settle(self) -> None:
        """Return once no flush is in flight (whatever its outcome)."""
        # A lone barrier about to flush on the spot sees this waiter and flushes on the thread.
        while self._flight is not None or self._gathering:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            await waiter

    async def _alone(self) -> bool:
        """Yield once; whether no other barrier joined meanwhile (nor did a flush start), nor is
        a barrier of another handle of this loop at work."""
        activity = self._loop_activity()
        self._gathering = True
        activity.count += 1
        try:
            await asyncio.sleep(0)
        except BaseException:
            # Cancelled: whoever joined must not wait for a flush nobody will start.
            self._gathering = False
            activity.count -= 1
            self._wake_all()
            raise
        self._gathering = False
        activity.count -= 1
        if self._waiters or self._flight is not None or activity.count > 0:
            if self._flight is None:
                self._launch()
            return False
        return True

    def _flush_here(self, flush_now: FlushNow, activity: _Activity) -> None:
        self.flushes += 1
        target = self._appended()
        started = _clock()
        try:
            flush_now(self.durable, target)
        except Exception as error:  # any failure is final, as for a flush on the thread
            self.failure = f"{type(error).__name__}: {error}"
        else:
            self.durable = target
        activity.measured(_clock() - started)

    def _wake_all(self) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def _loop_activity(self) -> _Activity:
        activity = self._activity
        if activity is None:
            activity = self._activity = _activity()
        return activity

    def _launch(self) -> None:
        self.flushes += 1
        target = self._appended()
        flight = asyncio.ensure_future(self._flush(self.durable, target))
        self._flight = flight
        activity = self._loop_activity()
        activity.count += 1
        flight.add_done_callback(lambda done: self._landed(done, target, activity))

    def _landed(self, flight: asyncio.Future[None], target: int, activity: _Activity) -> None:
        activity.count -= 1
        self._flight = None
        if flight.cancelled():
            self.failure = "the flush was cancelled before it finished"
        elif (error := flight.exception()) is not None:
            self.failure = f"{type(error).__name__}: {error}"
        else:
            self.durable = target
        self._wake_all()


LoopState: TypeAlias = Literal["idle", "busy", "timer due"]
"""What :func:`_loop_state` finds: ``idle``, no callback ready to run and no timer due soon;
``busy``, a callback ready to run (or the loop cannot tell) and no timer due soon; ``timer
due``, a timer due within the time asked about."""
_IDLE: Final = "idle"
_BUSY: Final = "busy"
_TIMER_DUE: Final = "timer due"


def _loop_state(seconds: float) -> LoopState:
    """Whether the running loop has a timer due within ``seconds``, else whether it has a
    callback ready to run, in one look. A loop other than asyncio's own, whose heap of timers
    and queue of ready callbacks cannot be seen, is taken to have no timer due and a callback
    ready (so a lone barrier yields once, then flushes on the spot, as before this rule)."""
    loop = asyncio.get_running_loop()
    scheduled = getattr(loop, "_scheduled", None)
    if type(scheduled) is list and scheduled:
        earliest = scheduled[0]  # a heap: its first timer is due first
        if isinstance(earliest, asyncio.TimerHandle) and earliest.when() - loop.time() < seconds:
            return _TIMER_DUE
    ready = getattr(loop, "_ready", None)
    return _IDLE if type(ready) is collections.deque and not ready else _BUSY


_clock: Callable[[], float] = time.perf_counter
"""What a flush on the spot is timed with (a test may replace it)."""

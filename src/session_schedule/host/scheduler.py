"""One process that keeps every session with reminders live, over any store.

Theory of operation
-------------------
A :class:`ScheduleHost` owns no session for long. It reads the store's next-target index
(``due_sessions``), opens a session shortly before its next target, lets its Schedule deliver
what is due, and closes it again once it is idle. Per session it keeps exactly the rules of
:class:`~session_schedule.runtime.live.LiveSchedule` — it runs one, built with ``driven=True``,
and calls its :meth:`~session_schedule.runtime.live.LiveSchedule.step`, the same delivery pass
its own owner task would loop over: one queue, barrier discipline, never into a running turn,
back-off on refusal, the follow-up budget.

Rule 1 — **one timer for all sessions.** One task holds a heap of ``(instant, session)``: when
to open a closed session, or when to run the next pass of an open one. It sleeps until the
earliest entry, but never longer than ``max_wait_seconds``, and re-reads the wall clock whenever
it wakes (a stale heap entry — superseded by a later plan — is dropped when popped). Each plan is
also due once the elapsed time it stood for has passed (``Clock.monotonic``): a wall clock that
steps back during a retry wait or a back-off cannot stretch it, and a pass that comes early for a
wall-clock target finds nothing due and plans again. Polls are spaced in elapsed time too. Opening,
stepping and closing a session run as short tasks of their own, so a slow session never holds
the timer up.

Rule 2 — **the index is re-read periodically.** Every ``poll_seconds`` (and at start) the host
asks for the sessions whose next target is before ``now + lead_seconds + poll_seconds`` and
plans to open each ``lead_seconds`` before its target (at once when that is past). While
sessions wait in the queue (Rule 8) it is re-read every ``queue_poll_seconds`` instead.

Rule 3 — **a session held elsewhere is skipped and retried.** ``SessionBusy`` (a chat has it
open, another host holds its lease) plans another attempt ``busy_retry_seconds`` later, for as
long as the index says it is due: a poll that reads the index whole (fewer than ``due_limit``
rows) drops the planned attempts of sessions it no longer lists — another host delivered them —
so a fleet does not keep opening sessions its peers have served. A session that cannot be opened
for another reason (damaged,
a storage failure of any kind: ``EMFILE``, a locked or unreadable database) is logged and
retried after ``failed_retry_seconds``; one that vanished is forgotten. A failed read of the
index is logged and tried again at the next poll: no store error ever stops the timer.

Rule 4 — **closed when idle.** After a pass, a session whose next pass is more than
``lead_seconds`` away is closed as soon as its agent is idle: the host enters the agent's
maintenance phase (so no turn can start), closes the Schedule, the agent and the session. A
session whose agent is busy (a follow-up turn running) is looked at again once it is idle.

Rule 5 — **a session whose Schedule stops is closed.** A pass that raises — the handle is
poisoned, e.g. its PostgreSQL lease was taken over by another host, or a read of its log failed
— closes the session (nothing more is appended through that handle) and plans a fresh open
from storage after ``failed_retry_seconds``, if the index still lists it.

Rule 6 — **out of descriptors, open no more.** An open that fails because the process (or the
system) has no file descriptor left (``EMFILE``, ``ENFILE``) caps the sessions open at once at
the number open then, until the next poll lifts the cap; that session is tried again after
``busy_retry_seconds``. So a host under a low descriptor limit cycles its due sessions through
the descriptors it has — each is closed once delivered — instead of failing every open past the
limit and waiting ``failed_retry_seconds`` for each.

Rule 7 — **a session a front end asks for is handed over.** When the store takes hand-over
requests (:class:`~session_schedule.session.handover.HandoverStore`), the host asks it every
``handover_check_seconds`` which of its open sessions a front end (chat, page, MCP server) is
waiting for. Such a session is closed as soon as no pass is running and its agent is idle (a turn
in flight finishes first; no new pass starts), and is not opened again while the request is live:
each attempt finds it requested (or held by the front end) and retries ``busy_retry_seconds``
later, so the host takes the session back once the front end has closed it.

Rule 8 — **past ``max_open``, due sessions queue.** A session whose open comes due while
``max_open`` sessions are open or being opened (or fewer, under Rule 6's cap) waits in a queue
ordered by its planned instant (for a tie, an order of its own to each host, so that hosts
sharing a store start on different sessions rather than all on the same ones), and is opened as
soon as another closes — not at the next poll. A poll does not plan a queued session again, and
one that reads the index whole drops from the queue the sessions it no longer lists as due
(delivered by another host meanwhile), so hosts sharing a store do not open each other's
delivered sessions for nothing. So a stampede (every session due in the same second) flows
through the host at the rate sessions open, deliver and close.

Rule 9 — **sessions admitted together open together.** The sessions Rule 8 admits in one pass
of the timer are opened by one task: one look at the hand-over requests for all of them (each
looks on its own if that fails), then their opens, ``max_opening`` at once, so that a store
that serves opens arriving together in one transaction (PostgreSQL) gets them together. Each
open still succeeds, is refused or fails on its own, with Rules 3 to 6.

Rule 10 — **a held session is not reopened before its hold lifts.** A pass that leaves a due
delivery held — the person's quiet hours, a spent budget of reminder turns — reports the hold
and when it lifts (:attr:`~session_schedule.runtime.live.LiveSchedule.hold`); the session is
closed as any other whose next pass is beyond the lead, and the host remembers the hold. While
the index lists the session with the target the hold was waiting on, a poll plans its open for
the instant the hold lifts, not at once (the index lists it as due all along: its target has
passed), so the hold is seen, and logged, once. A different target in the index — a reminder
changed, deleted or delivered elsewhere, a turn queued, the session's quotas set again (a
``schedule/quotas`` entry lists a waiting session from its time) — or a session the index (read
whole) no longer lists forgets the hold, and the session is planned as the index says. The
memory is this host's alone; hosts sharing a store share only the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hashlib
import heapq
import logging
import math
import os
from collections.abc import Callable, Coroutine
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from typing import Final, Literal, TypeAlias, final

import msgspec

from session_schedule.core.errors import ScheduleError
from session_schedule.core.instants import MS_PER_SECOND, Instant
from session_schedule.runtime.clock import Clock, SystemClock
from session_schedule.runtime.events import ScheduleEvent
from session_schedule.runtime.live import MIN_WAIT_SECONDS, Hold, LiveSchedule, Settings
from session_schedule.session.barrier import barriers_at_work
from session_schedule.session.errors import (
    SessionBusy,
    SessionError,
    SessionNotFound,
    session_busy,
)
from session_schedule.session.handover import HandoverStore
from session_schedule.session.ids import SessionId
from session_schedule.session.port import SessionHandle, SessionStore
from session_schedule.session.worker import calls_in_flight

logger = logging.getLogger(__name__)

AgentFactory: TypeAlias = Callable[
    [SessionHandle, Clock, Settings, Callable[[], None]],
    AbstractAsyncContextManager[LiveSchedule],
]
"""Makes the agent of one session and its Schedule: given the open session, the host's clock,
the Schedule settings and the wake callback, it yields a started ``LiveSchedule`` built with
``driven=True`` and ``on_wake=<the callback>``, and stops both (not the session) on exit."""

_Plan: TypeAlias = Literal["open", "retry", "step"]
"""What a heap entry is for: opening a session (from the index), trying again to open it (after
a refusal or failure, not brought forward by a poll), or the next pass of an open one."""
_YIELDS: Final = 8
_FLUSH_POLL_SECONDS: Final = 0.0005
_CHAIN: Final = 8
"""How far down an exception's causes to look for a shortage of descriptors."""
_SHORTAGE: Final = (errno.EMFILE, errno.ENFILE)
_HEADROOM: Final = 4
"""Descriptors a session of any store may need to open: fewer left is a shortage."""


@final
class HostSettings(msgspec.Struct, frozen=True, kw_only=True):
    """Every knob of a host; the defaults are documented in docs/guides/fleet.md."""

    lead_seconds: float = 30.0
    """A session is opened this long before its next target."""
    poll_seconds: float = 10.0
    """The index is re-read at least this often."""
    max_wait_seconds: float = 30.0
    """The timer never sleeps longer than this before re-reading the wall clock."""
    busy_retry_seconds: float = 5.0
    """A session held elsewhere is tried again this much later."""
    failed_retry_seconds: float = 60.0
    """A session that failed to open, or whose Schedule stopped, is tried again this much later."""
    max_open: int = 1000
    """At most this many sessions are open at once; more wait in a queue (Rule 8)."""
    max_opening: int = 64
    """At most this many sessions are being opened at once."""
    due_limit: int = 10_000
    """At most this many sessions are taken from the index per poll."""
    queue_poll_seconds: float = 1.0
    """While sessions wait in the queue (Rule 8), the index is re-read this often."""
    handover_check_seconds: float = 0.5
    """While sessions are open, the store is asked this often whether a front end wants one."""
    drain_seconds: float = 10.0
    """On close, a session's running turn gets this long to finish before it is cancelled."""
    schedule: Settings = Settings()
    """The Settings of every session's Schedule."""


@final
class HostStats(msgspec.Struct, kw_only=True):
    """Counters since the host started."""

    opened: int = 0
    closed: int = 0
    busy: int = 0
    """Opens refused because the session is held elsewhere."""
    failed: int = 0
    """Opens that failed otherwise, and Schedules that stopped."""
    handed_over: int = 0
    """Sessions closed because a front end asked for them."""
    polls: int = 0
    out_of_descriptors: int = 0
    """Opens refused because the process had no file descriptor left (``EMFILE``, ``ENFILE``):
    counted apart from ``failed``, and tried again after ``busy_retry_seconds``."""
    turn_retries: int = 0
    """Failed attempts of a turn that were tried again (per reminder occurrence it delivers,
    or per host prompt)."""
    turns_failed: int = 0
    """Turns recorded ``failed`` after their retries (per reminder occurrence, or host prompt):
    reminders that could not be delivered."""


@final
class _Slot:
    """One open session."""

    __slots__ = (
        "handing_over",
        "handle",
        "releasing",
        "resources",
        "schedule",
        "stepping",
        "waiting_idle",
    )

    def __init__(
        self, handle: SessionHandle, schedule: LiveSchedule, resources: AsyncExitStack
    ) -> None:
        self.handle = handle
        self.schedule = schedule
        self.resources = resources
        self.stepping = False
        self.waiting_idle = False
        self.handing_over = False
        """A front end asked for the session: it is closed once idle (Rule 7)."""
        self.releasing = False
        """The hand-over's close has begun."""


@final
class ScheduleHost:
    """Keeps the sessions of ``store`` that have reminders live, with agents from ``factory``.

    Use ``async with ScheduleHost(store, factory):`` or :meth:`start` and :meth:`close`. See the
    module docstring for the rules.
    """

    def __init__(
        self,
        store: SessionStore,
        factory: AgentFactory,
        *,
        clock: Clock | None = None,
        settings: HostSettings | None = None,
    ) -> None:
        self._store = store
        self._factory = factory
        self._clock = clock or SystemClock()
        self._settings = settings or HostSettings()
        _check(self._settings)
        self._heap: list[tuple[Instant, int, SessionId]] = []
        self._elapsed_heap: list[tuple[float, int, SessionId]] = []
        """The same plans, by the monotonic reading at which their wait has elapsed."""
        self._planned: dict[SessionId, tuple[Instant, _Plan, int]] = {}
        """Each session's one current plan: its instant, its purpose and its sequence number
        (heap entries with another number are stale)."""
        self._sequence = 0
        self._slots: dict[SessionId, _Slot] = {}
        self._opening: set[SessionId] = set()
        self._queued: list[tuple[Instant, int, SessionId]] = []
        """Rule 8: sessions due to open past ``max_open``, by their planned instant."""
        self._queued_ids: set[SessionId] = set()
        self._open_gate = asyncio.Semaphore(self._settings.max_opening)
        self._tasks: set[asyncio.Task[None]] = set()
        self._waiting: dict[asyncio.Task[None], _Slot | bool] = {}
        """Tasks that may wait for an agent: a pass (waiting while its Schedule is parked), or a
        wait for idle (``True``: always waiting)."""
        self._wake = asyncio.Event()
        self._parked = asyncio.Event()
        self._timer: asyncio.Task[None] | None = None
        self._next_poll: float | None = None
        """The monotonic reading at which the index is read again."""
        self._handovers = store if isinstance(store, HandoverStore) else None
        self._next_check: float | None = None
        """The monotonic reading at which hand-over requests are read again (sessions open)."""
        self._checking = False
        self._handovers_failing = False
        """The last reading of the hand-over requests failed (logged once until one succeeds)."""
        self._failure: BaseException | None = None
        self._ceiling: int | None = None
        """Rule 6: the sessions open when the process last ran out of descriptors (until the
        next poll)."""
        self._holds: dict[SessionId, Hold] = {}
        """Rule 10: the sessions closed while quiet hours or a quota held their deliveries, and
        each hold, until it lifts or the index shows the session's log changed."""
        self._salt = os.urandom(16)
        """Orders the sessions due at the same instant for this host alone (Rule 8)."""
        self.stats = HostStats()

    # -- life cycle --------------------------------------------------------------------------

    async def start(self) -> None:
        if self._timer is not None:
            raise RuntimeError("this ScheduleHost was started already")
        self._timer = asyncio.create_task(self._run(), name="schedule host timer")

    async def close(self) -> None:
        """Stop the timer, then close every open session, each once its agent is idle or
        ``drain_seconds`` have passed (a turn still running is then cancelled). Idempotent."""
        timer, self._timer = self._timer, None
        if timer is not None and not timer.done():
            timer.cancel()
            await asyncio.gather(timer, return_exceptions=True)
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.gather(
            *(self._drain(session_id) for session_id in list(self._slots)),
            return_exceptions=True,
        )

    async def __aenter__(self) -> ScheduleHost:
        await self.start()
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.close()

    @property
    def settings(self) -> HostSettings:
        return self._settings

    @property
    def open_sessions(self) -> frozenset[SessionId]:
        """The sessions open in this host now."""
        return frozenset(self._slots)

    @property
    def failure(self) -> BaseException | None:
        """What stopped the timer, if anything did (it is also logged)."""
        return self._failure

    async def wait_stopped(self) -> None:
        """Return once the timer has stopped (closed, or :attr:`failure`)."""
        timer = self._timer
        if timer is not None:
            await asyncio.gather(timer, return_exceptions=True)

    async def settled(self) -> None:
        """Return once the timer sleeps, no open, pass or close is running or waiting to run,
        and no call to a session's worker (a barrier's flush, a turn's included) is waiting to
        report back. For tests in virtual time."""
        while True:
            await self._parked.wait()
            while barriers_at_work() > 0 or calls_in_flight() > 0:
                # Work on the pool's threads runs in real time: let it land.
                await asyncio.sleep(_FLUSH_POLL_SECONDS)
            for _ in range(_YIELDS):
                await asyncio.sleep(0)
            if (
                self._parked.is_set()
                and not self._wake.is_set()
                and self._tasks_parked()
                and barriers_at_work() == 0
                and calls_in_flight() == 0
            ):
                return

    def _tasks_parked(self) -> bool:
        """Whether every task is only waiting for an agent to become idle."""
        for task in self._tasks:
            waiting = self._waiting.get(task)
            if waiting is None:
                return False
            if isinstance(waiting, _Slot) and not waiting.schedule.parked:
                return False
        return True

    # -- the timer (Rule 1, Rule 2) ----------------------------------------------------------

    async def _run(self) -> None:
        try:
            while True:
                self._wake.clear()
                now = self._clock.now()
                if self._next_poll is None or self._clock.monotonic() >= self._next_poll:
                    await self._poll(now)
                    now = self._clock.now()
                    self._next_poll = self._clock.monotonic() + self._poll_interval()
                self._check_due()
                self._run_due(now)
                self._admit()
                await self._sleep(self._bounded(now))
        except asyncio.CancelledError:
            raise
        except Exception as error:
            self._failure = error
            logger.exception("the schedule host's timer failed")
        finally:
            self._parked.set()

    async def _poll(self, now: Instant) -> None:
        settings = self._settings
        horizon = _after(now, settings.lead_seconds + settings.poll_seconds)
        try:
            due = await self._store.due_sessions(horizon, limit=settings.due_limit)
        except Exception as error:  # any store's failure: the next poll tries again
            logger.error(  # noqa: TRY400
                "the next-target index could not be read; trying again in %s s: %s",
                settings.poll_seconds,
                _described(error),
            )
            return
        self.stats.polls += 1
        self._ceiling = None
        if len(due) < settings.due_limit:
            self._forget_undue({session_id for session_id, _ in due})
        lead = round(settings.lead_seconds * MS_PER_SECOND)
        # Rule 8: ties in this host's own order (the index lists them by id, as it does to all).
        for session_id, target in sorted(due, key=self._tie_order):
            if self._held(session_id) or session_id in self._queued_ids:
                continue
            planned = self._planned.get(session_id)
            open_at = Instant(max(now, target - lead))
            hold = self._holds.get(session_id)
            # Rule 10. The index records the hold's ``listed`` target; a record written by an
            # older version says the earliest ``target`` itself until the next commit rewrites it.
            if hold is not None and target in (hold.listed, hold.target) and hold.until > now:
                open_at = hold.until  # Rule 10: not before the hold lifts
            elif hold is not None:
                del self._holds[session_id]  # lifted, or the log changed: open as the index says
                if planned is not None and planned[1] == "open":
                    planned = None
            # A planned retry stands; a planned open moves earlier if the target did.
            if planned is None or (planned[1] == "open" and open_at < planned[0]):
                self._plan(session_id, open_at, "open")

    def _poll_interval(self) -> float:
        """Rule 2: ``poll_seconds``, or ``queue_poll_seconds`` while sessions wait in the queue."""
        settings = self._settings
        if self._queued_ids:
            return min(settings.poll_seconds, settings.queue_poll_seconds)
        return settings.poll_seconds

    def _poll_sooner(self) -> None:
        """Rule 2: with sessions in the queue, the next read of the index is at most
        ``queue_poll_seconds`` away."""
        soon = self._clock.monotonic() + self._poll_interval()
        if self._next_poll is not None and soon < self._next_poll:
            self._next_poll = soon

    def _tie_order(self, due: tuple[SessionId, Instant]) -> tuple[Instant, bytes]:
        """Sessions by target, then in this host's own order (Rule 8)."""
        session_id, target = due
        return target, hashlib.blake2b(session_id.encode(), key=self._salt, digest_size=8).digest()

    def _forget_undue(self, due: set[SessionId]) -> None:
        """Rules 3 and 8: a session planned for another attempt, or waiting in the queue, that
        the index (read whole) no longer lists as due — another host delivered it meanwhile —
        is not opened; the index plans it afresh once it is due."""
        for session_id, (_, plan, _) in list(self._planned.items()):
            if plan == "retry" and session_id not in due and not self._held(session_id):
                del self._planned[session_id]  # its heap entries are stale now
        for session_id in [held for held in self._holds if held not in due]:
            # Rule 10: delivered or deleted elsewhere; the index plans it afresh once due.
            del self._holds[session_id]
            if (planned := self._planned.get(session_id)) is not None and planned[1] == "open":
                del self._planned[session_id]
        # Its heap entry stays, and is skipped once popped.
        self._queued_ids &= due

    def _run_due(self, now: Instant) -> None:
        elapsed = self._clock.monotonic()
        due: list[tuple[int, SessionId]] = []
        while self._heap and self._heap[0][0] <= now:
            _, sequence, session_id = heapq.heappop(self._heap)
            due.append((sequence, session_id))
        while self._elapsed_heap and self._elapsed_heap[0][0] <= elapsed:
            _, sequence, session_id = heapq.heappop(self._elapsed_heap)
            due.append((sequence, session_id))
        for sequence, session_id in sorted(due):
            planned = self._planned.get(session_id)
            if planned is None or planned[2] != sequence:
                continue  # superseded, or run already through the other heap
            del self._planned[session_id]
            if planned[1] != "step":
                if not self._held(session_id) and session_id not in self._queued_ids:
                    # Rule 8: queued in the order of the plans, opened as soon as there is room.
                    heapq.heappush(self._queued, (planned[0], sequence, session_id))
                    self._queued_ids.add(session_id)
            else:
                slot = self._slots.get(session_id)
                if slot is not None and slot.handing_over:
                    self._release_when_idle(session_id, slot)
                elif slot is not None and not slot.stepping:
                    slot.stepping = True
                    self._spawn(self._step(session_id, slot), f"step {session_id}", waiting=slot)

    def _admit(self) -> None:
        """Rule 8: open queued sessions, earliest plan first, while fewer than the limit are
        open or opening; those admitted together are opened as a group (Rule 9)."""
        limit = self._open_limit()
        admitted: list[SessionId] = []
        while self._queued and len(self._slots) + len(self._opening) < limit:
            _, _, session_id = heapq.heappop(self._queued)
            if session_id not in self._queued_ids:
                continue  # no longer due (Rule 8), or taken from an earlier entry
            self._queued_ids.discard(session_id)
            if self._held(session_id) or session_id in self._planned:
                continue  # opened meanwhile, or planned again (a retry)
            self._opening.add(session_id)
            admitted.append(session_id)
        if self._queued_ids:
            self._poll_sooner()  # some wait: the index says soon which no longer need to
        if len(admitted) == 1:
            self._spawn(self._open(admitted[0]), f"open {admitted[0]}")
        elif admitted:
            self._spawn(self._open_group(admitted), f"open {len(admitted)} sessions")

    async def _open_group(self, session_ids: list[SessionId]) -> None:
        """Rule 9: one look at the hand-over requests for every session admitted together, then
        their opens, at most ``max_opening`` at once, in the order admitted."""
        wanted: frozenset[SessionId] | None = frozenset()
        if self._handovers is not None:
            try:
                wanted = await self._handovers.handover_requests(frozenset(session_ids))
            except Exception:  # each open looks again, and fails, on its own
                wanted = None
        await asyncio.gather(*(self._open(session_id, wanted) for session_id in session_ids))

    def _held(self, session_id: SessionId) -> bool:
        return session_id in self._slots or session_id in self._opening

    def _bounded(self, now: Instant) -> float:
        seconds = self._settings.max_wait_seconds
        elapsed = self._clock.monotonic()
        if self._next_poll is not None:
            seconds = min(seconds, self._next_poll - elapsed)
        if self._heap:
            seconds = min(seconds, (self._heap[0][0] - now) / MS_PER_SECOND)
        if self._elapsed_heap:
            seconds = min(seconds, self._elapsed_heap[0][0] - elapsed)
        if self._next_check is not None and self._slots:
            seconds = min(seconds, self._next_check - elapsed)
        return max(0.0, seconds)

    async def _sleep(self, seconds: float) -> None:
        if self._wake.is_set():
            await asyncio.sleep(0)
            return
        sleeper = asyncio.ensure_future(self._clock.sleep(seconds))
        waker = asyncio.ensure_future(self._wake.wait())
        try:
            # Parked only once the sleep has begun (settled() then sees a sleeper on the clock).
            await asyncio.sleep(0)
            self._parked.set()
            await asyncio.wait({sleeper, waker}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self._parked.clear()
            sleeper.cancel()
            waker.cancel()

    def _plan(self, session_id: SessionId, at: Instant, plan: _Plan) -> None:
        self._sequence += 1
        sequence = self._sequence
        self._planned[session_id] = (at, plan, sequence)
        heapq.heappush(self._heap, (at, sequence, session_id))
        wait = max(0, at - self._clock.now()) / MS_PER_SECOND
        heapq.heappush(self._elapsed_heap, (self._clock.monotonic() + wait, sequence, session_id))
        if self._heap[0][1] == sequence or self._elapsed_heap[0][1] == sequence:
            self._wake.set()

    def _spawn(
        self,
        work: Coroutine[object, object, None],
        name: str,
        *,
        waiting: _Slot | bool | None = None,
    ) -> None:
        task = asyncio.create_task(work, name=name)
        self._tasks.add(task)
        if waiting is not None:
            self._waiting[task] = waiting
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        self._waiting.pop(task, None)
        if not task.cancelled() and task.exception() is not None:
            logger.error("schedule host task %s failed", task.get_name(), exc_info=task.exception())
        self._wake.set()

    # -- one session (Rules 3 to 5) ----------------------------------------------------------

    async def _open(
        self, session_id: SessionId, wanted: frozenset[SessionId] | None = None
    ) -> None:
        """Open ``session_id`` and start its Schedule; ``wanted``: the hand-over requests its
        group found, if it was opened in one (Rule 9)."""
        try:
            await self._open_session(session_id, wanted)
        finally:
            self._wake.set()  # room for a queued session, or its first pass

    async def _open_session(
        self, session_id: SessionId, wanted: frozenset[SessionId] | None
    ) -> None:
        try:
            async with self._open_gate:
                handle = await self._open_unless_wanted(session_id, wanted)
        except SessionBusy:
            self.stats.busy += 1
            self._opening.discard(session_id)
            retry_at = _after(self._clock.now(), self._settings.busy_retry_seconds)
            self._plan(session_id, retry_at, "retry")
            return
        except SessionNotFound:
            self._opening.discard(session_id)
            return
        except Exception as error:  # any store's failure (a locked database, ...)
            self._opening.discard(session_id)
            if _out_of_descriptors(error):
                self._short_of_descriptors(session_id, error)
                return
            self.stats.failed += 1
            logger.error(  # noqa: TRY400
                "session %s could not be opened; trying again in %s s: %s",
                session_id,
                self._settings.failed_retry_seconds,
                _described(error),
            )
            self._retry_later(session_id)
            return
        resources = AsyncExitStack()
        try:
            await resources.enter_async_context(handle)
            schedule = await resources.enter_async_context(
                self._factory(
                    handle,
                    self._clock,
                    self._settings.schedule,
                    lambda: self._woken(session_id),
                )
            )
        except BaseException as error:
            self._opening.discard(session_id)
            await resources.aclose()
            if not isinstance(error, Exception):
                raise
            self.stats.failed += 1
            logger.error(  # noqa: TRY400
                "session %s could not be started; trying again in %s s: %s",
                session_id,
                self._settings.failed_retry_seconds,
                _described(error),
            )
            self._retry_later(session_id)
            return
        resources.callback(schedule.events.subscribe(self._count))
        self._opening.discard(session_id)
        self._slots[session_id] = _Slot(handle, schedule, resources)
        self.stats.opened += 1
        self._plan(session_id, self._clock.now(), "step")

    async def _open_unless_wanted(
        self, session_id: SessionId, wanted: frozenset[SessionId] | None
    ) -> SessionHandle:
        """Open ``session_id``; ``SessionBusy`` while a front end asks for it (Rule 7), as
        ``wanted`` says, or the store when its group did not find out (Rule 9)."""
        handovers = self._handovers
        if wanted is None and handovers is not None:
            wanted = await handovers.handover_requests({session_id})
        if wanted is not None and session_id in wanted:
            raise session_busy(session_id)
        return await self._store.open(session_id)

    async def _step(self, session_id: SessionId, slot: _Slot) -> None:
        try:
            resume = await slot.schedule.step()
        except Exception as error:  # a poisoned handle, or any store's failure while reading
            self.stats.failed += 1
            logger.error(  # noqa: TRY400
                "the schedule of session %s stopped; it is closed and opened again from storage "
                "in %s s: %s",
                session_id,
                self._settings.failed_retry_seconds,
                _described(error),
            )
            await self._close_slot(session_id)
            self._retry_later(session_id)
            return
        finally:
            slot.stepping = False
        hold = slot.schedule.hold
        if hold is None:
            self._holds.pop(session_id, None)
        else:
            self._holds[session_id] = hold
        if slot.handing_over:
            self._release_when_idle(session_id, slot)
            return
        now = self._clock.now()
        if resume is not None and resume <= _after(now, self._settings.lead_seconds):
            self._plan(session_id, Instant(max(now, resume)), "step")
            return
        # Nothing due within the lead: close when idle (Rule 4).
        agent = slot.schedule.agent
        if agent.begin_maintenance():
            try:
                await self._close_slot(session_id)
            finally:
                agent.end_maintenance()
            return
        if not slot.waiting_idle:
            slot.waiting_idle = True
            self._spawn(self._after_idle(session_id, slot), f"idle {session_id}", waiting=True)

    async def _after_idle(self, session_id: SessionId, slot: _Slot) -> None:
        try:
            await slot.schedule.agent.wait_idle()
        finally:
            slot.waiting_idle = False
        if self._slots.get(session_id) is slot and not slot.stepping:
            if slot.handing_over:
                self._release_when_idle(session_id, slot)
            else:
                self._plan(session_id, self._clock.now(), "step")

    # -- hand-overs (Rule 7) ------------------------------------------------------------------

    def _check_due(self) -> None:
        """Start reading the hand-over requests when sessions are open and it is time."""
        if self._handovers is None or not self._slots:
            self._next_check = None
            return
        elapsed = self._clock.monotonic()
        if self._next_check is None:
            self._next_check = elapsed  # the first session opened: look at once
        if elapsed >= self._next_check and not self._checking:
            self._checking = True
            self._next_check = elapsed + self._settings.handover_check_seconds
            self._spawn(self._check_handovers(self._handovers), "hand-over requests")

    async def _check_handovers(self, handovers: HandoverStore) -> None:
        try:
            wanted = await handovers.handover_requests(frozenset(self._slots))
        except Exception as error:  # any store's failure (a lost connection): read again later
            if not self._handovers_failing:
                self._handovers_failing = True
                logger.error(  # noqa: TRY400
                    "hand-over requests could not be read; trying again every %s s: %s",
                    self._settings.handover_check_seconds,
                    _described(error),
                )
            return
        finally:
            self._checking = False
        if self._handovers_failing:
            self._handovers_failing = False
            logger.info("hand-over requests can be read again")
        for session_id in sorted(wanted):
            slot = self._slots.get(session_id)
            if slot is not None and not slot.handing_over:
                logger.info("session %s is wanted by a front end; handing it over", session_id)
                slot.handing_over = True
                self._release_when_idle(session_id, slot)

    def _release_when_idle(self, session_id: SessionId, slot: _Slot) -> None:
        """Close a session a front end wants now if no pass runs and its agent is idle, else
        once they are (a running pass, or the wait for idle, comes back here)."""
        if slot.stepping or slot.releasing or self._slots.get(session_id) is not slot:
            return
        agent = slot.schedule.agent
        if agent.begin_maintenance():
            slot.releasing = True
            self._spawn(self._release(session_id, slot), f"hand over {session_id}")
        elif not slot.waiting_idle:
            slot.waiting_idle = True
            self._spawn(self._after_idle(session_id, slot), f"idle {session_id}", waiting=True)

    async def _release(self, session_id: SessionId, slot: _Slot) -> None:
        try:
            await self._close_slot(session_id)
        finally:
            slot.schedule.agent.end_maintenance()
        self.stats.handed_over += 1
        # Taken back once the front end has closed it: until then every attempt is refused.
        retry_at = _after(self._clock.now(), self._settings.busy_retry_seconds)
        self._plan(session_id, retry_at, "retry")

    def _count(self, event: ScheduleEvent) -> None:
        if event.kind == "turn-retry":
            self.stats.turn_retries += 1
        elif event.kind == "turn-failed":
            self.stats.turns_failed += 1

    def _woken(self, session_id: SessionId) -> None:
        """A create or delete in an open session: run its next pass at once."""
        slot = self._slots.get(session_id)
        if slot is not None and not slot.stepping:
            self._plan(session_id, self._clock.now(), "step")

    def _open_limit(self) -> int:
        if self._ceiling is None:
            return self._settings.max_open
        return min(self._settings.max_open, self._ceiling)

    def _short_of_descriptors(self, session_id: SessionId, error: Exception) -> None:
        """Rule 6: open no more sessions than are open now until the next poll; try this one
        again soon."""
        self.stats.out_of_descriptors += 1
        if self._ceiling is None:
            logger.warning(
                "the process has no file descriptor left with %s sessions open; no more are "
                "opened until the next poll (raise the limit, ulimit -n, or lower max_open): %s",
                len(self._slots),
                _described(error),
            )
        self._ceiling = max(1, len(self._slots))
        retry_at = _after(self._clock.now(), self._settings.busy_retry_seconds)
        self._plan(session_id, retry_at, "retry")

    def _retry_later(self, session_id: SessionId) -> None:
        retry_at = _after(self._clock.now(), self._settings.failed_retry_seconds)
        self._plan(session_id, retry_at, "retry")

    async def _drain(self, session_id: SessionId) -> None:
        slot = self._slots.get(session_id)
        if slot is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._settings.drain_seconds):
                    await slot.schedule.agent.wait_idle()
        await self._close_slot(session_id)

    async def _close_slot(self, session_id: SessionId) -> None:
        slot = self._slots.pop(session_id, None)
        if slot is None:
            return
        self._planned.pop(session_id, None)
        # The slot is gone from the host once popped: a cancel (the host closing while this
        # session closes after going idle) must not leave it half closed.
        closing = asyncio.ensure_future(slot.resources.aclose())
        try:
            await asyncio.shield(closing)
        except asyncio.CancelledError:
            await asyncio.gather(closing, return_exceptions=True)
            self.stats.closed += 1
            raise
        except Exception:
            logger.exception("session %s did not close cleanly", session_id)
        self.stats.closed += 1


def _out_of_descriptors(error: BaseException) -> bool:
    """Whether ``error`` (or what caused it) says the process or system has no descriptor left.

    SQLite reports only that it could not open a file (``SQLITE_CANTOPEN``, whatever the
    reason): that counts when the process cannot open a few descriptors itself either.
    """
    seen: BaseException | None = error
    cannot_open = False
    for _ in range(_CHAIN):
        if seen is None:
            break
        if isinstance(seen, OSError) and seen.errno in _SHORTAGE:
            return True
        cannot_open = cannot_open or getattr(seen, "sqlite_errorname", None) == "SQLITE_CANTOPEN"
        seen = seen.__cause__ or seen.__context__
    return cannot_open and not _descriptors_left(_HEADROOM)


def _descriptors_left(count: int) -> bool:
    """Whether the process can open ``count`` more descriptors now (they are closed again)."""
    opened: list[int] = []
    try:
        for _ in range(count):
            opened.append(os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC))  # noqa: PERF401 - kept as soon as open
    except OSError as error:
        if error.errno in _SHORTAGE:
            return False
        raise
    finally:
        for fd in opened:
            os.close(fd)
    return True


def _described(error: Exception) -> str:
    """The error for a log line: its message, with its type where the type is not ours."""
    if isinstance(error, (SessionError, ScheduleError)):
        return str(error)
    return f"{type(error).__name__}: {error}"


def _after(now: Instant, seconds: float) -> Instant:
    return Instant(now + round(seconds * MS_PER_SECOND))


_LOOP_SECONDS: Final = frozenset(
    {
        "poll_seconds",
        "max_wait_seconds",
        "busy_retry_seconds",
        "failed_retry_seconds",
        "queue_poll_seconds",
        "handover_check_seconds",
    }
)
"""The settings that pace the host's timer: each at least ``MIN_WAIT_SECONDS``."""


def _check(settings: HostSettings) -> None:
    positive = (
        "lead_seconds",
        "poll_seconds",
        "max_wait_seconds",
        "busy_retry_seconds",
        "failed_retry_seconds",
        "handover_check_seconds",
        "drain_seconds",
        "queue_poll_seconds",
    )
    for name in positive:
        value = getattr(settings, name)
        if not value > 0:
            raise ValueError(f"{name} must be positive, not {value}")
        if not math.isfinite(value):
            raise ValueError(f"{name} must be a finite number of seconds, not {value}")
        if name in _LOOP_SECONDS and value < MIN_WAIT_SECONDS:
            # As a live Schedule's waits: the timer would wake, or poll, without pause.
            raise ValueError(
                f"{name} must be at least {MIN_WAIT_SECONDS:g} seconds, not {value:g}: a "
                "shorter wait or back-off lets the host spin"
            )
    for name in ("max_open", "max_opening", "due_limit"):
        value = getattr(settings, name)
        if value < 1:
            raise ValueError(f"{name} must be at least 1, not {value}")

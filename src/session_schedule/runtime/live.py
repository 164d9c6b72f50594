"""The live Schedule of one Session: its management operations and its delivery owner.

Theory of operation
-------------------
A :class:`LiveSchedule` exists while a Session is open live. On start it folds the Session's
``schedule/change`` events; from then on it is the only writer of them, so it keeps the fold up to
date by applying each change it appends. A cold Session has no LiveSchedule and does nothing.

Rule 1 — **one queue.** Tool calls and due tasks run through one agent-scoped FIFO
(:class:`~session_schedule.runtime.queue.AgentQueue`), one at a time.

Rule 2 — **barrier discipline** (SPEC §5). Every read or decision first awaits the Session's
persistence barrier; ``create``, ``update`` and an actual ``delete`` await it again after
appending (an update appends its version-3 changes, SPEC §11, before that one barrier). A failed
barrier poisons the Session handle, and every later operation reports ``persistence_uncertain``.

Rule 3 — **bounded waits on the wall clock.** The owner sleeps until the core's next wake-up
instant but never longer than ``max_wait_seconds``, and re-reads the wall clock whenever it wakes;
a delete wakes it at once, and so does a create whose target is due sooner than the owner's
current sleep lasts (otherwise that sleep ends first anyway). On the system clock, an idle owner
whose next target is further off than that (or that has none) does not wake itself to re-read
the clock: it parks on the loop's one wall-clock watch (:mod:`session_schedule.runtime.watch`),
which reads the clock every ``max_wait_seconds`` for all of them and releases each once its
target is within one such wait, so ten thousand idle sessions cost no wake-ups of their own.

Rule 4 — **a due task never interrupts a turn.** It waits until the agent is idle, then — in the
queue — enters the agent's maintenance phase (giving way at once if a turn has started), awaits the
barrier, samples the decision time once, appends a ``miss`` for each due reminder too late to
deliver (SPEC §11 ``maxLatenessSeconds``), plans with the core (one due one-shot alone, or else all
due Every records in one batch), frames the turn, queues it with ``followup()`` (with its
occurrence keys, to an agent's optional ``followup_keyed()``), awaits the agent's optional
``handed_over()``, appends the dispatch change(s) and awaits the barrier.

Rule 4a — **a turn queued once is not queued again.** When every occurrence of a delivery is
already named by a reminder turn in the log with no dispatch after it, its follow-up was queued
and only the dispatch that records it was lost: the two are appended back to back and made
durable by one barrier, so a power cut can keep the turn and drop the dispatch. The queue runs
that turn again (it is unfinished, or ran already), so the dispatch is appended without queuing
a second one, and the person is not reminded twice in a row.

Rule 5 — **failure keeps the reminder.** If framing, ``followup()`` or ``handed_over()`` fails — or
``followup()`` returns an awaitable, which is closed unrun (an ``async def`` agent is refused at
start already) — nothing is appended and the reminder stays active; the owner retries after a
back-off that doubles up to ``retry_max_seconds``, so a permanently failing agent cannot make it
spin. An agent that raises :class:`~session_schedule.runtime.agent.AgentClosed` (a closed turn
queue, while a program shuts down) is treated the same way, but quietly: no failure or back-off
is reported, a debug line is logged. A back-off is elapsed time (``Clock.monotonic``), not a
wall-clock instant: a step of the wall clock during it neither stretches nor shortens it
(targets stay wall-clock, SPEC §8).

Rule 5a — **no busy loop.** Every pass of the owner's loop awaits something that yields to the
event loop. "Nothing due" right after the wake-up said something was due can happen once (a
delete or a clock step in between); a second time in a row means the wake-up and the planner
disagree, and the owner backs off as for a refusal (and logs it) rather than spin.

Rule 5b — **a budget of reminder-driven turns.** At most ``followup_limit`` follow-up turns in
any ``followup_window_seconds`` (wall clock, kept in memory per LiveSchedule). Beyond it a due
delivery waits until the window allows one — nothing is dropped, nothing goes early — and its
frame says since when and why it was held back. A reminder that re-creates itself from its own
follow-up (``after_seconds: 1``) thus cannot make a model loop at full speed.

Rule 5d — **quotas a person sets.** ``max_reminder_turns_per_day`` bounds the reminder turns in
any 24 hours the same way (seeded from the log's queued reminder turns on start, so a restart
does not reset it), and ``quiet_hours`` defers a delivery due during the person's quiet hours to
their end (:mod:`session_schedule.core.quiet`); either frame says why the turn comes late. A
person may set them for one session (:meth:`LiveSchedule.set_quotas`, a ``schedule/quotas``
entry, :mod:`session_schedule.session.quotas`): the session's latest entry, folded on start, beats
the program's ``Settings`` field by field (an active-reminder quota only lowers ``max_active``).

Rule 5c — **one owner, or one driver.** By default each LiveSchedule runs its own owner task.
Built with ``driven=True`` it runs none: a host that keeps many sessions live calls
:meth:`LiveSchedule.step` — the very pass the owner loops over — from its own single timer, and
learns of creates and deletes through ``on_wake``. After a pass, :attr:`LiveSchedule.hold` says
whether quiet hours or a quota held a due delivery back, and until when (a host that closes the
session meanwhile need not open it again before then). The frame's ``delayed since`` (for the
daily quota) and ``deferred since`` are worked out from the log's turns, the due time and the
quiet hours, not from when this Schedule first saw the hold: the same across a close and
reopen.

Rule 6 — **at-least-once.** A crash after ``followup()`` accepted a turn and before the dispatch is
durable repeats that reminder after recovery, with the same occurrence key (``id@scheduledAt``).

Rule 7 — **views show runs.** A listed view carries ``runs`` and ``lastRun`` (its latest
delivery: the occurrence, ``delivered``/``failed``/``pending``, the decision time), derived from
the log (:mod:`session_schedule.session.history`). The history is read when the reminders are
first listed — from the checkpoint the Session was opened from, which records each active
reminder's runs (from the first entry for an older checkpoint that does not) — and from then on
only the entries appended since.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import math
from collections.abc import Awaitable, Callable, Mapping
from types import TracebackType
from typing import Literal, Self, TypeVar, TypeVarTuple, assert_never, cast, final

import msgspec

from session_schedule.core.changes import (
    CHANGE_EVENT_TYPE,
    ScheduleChange,
)
from session_schedule.core.due import Delivery, next_wakeup, plan_delivery, plan_misses
from session_schedule.core.errors import ScheduleError
from session_schedule.core.fold import ScheduleFold, fold
from session_schedule.core.framing import Deferral, Delay, frame
from session_schedule.core.ids import ScheduleId
from session_schedule.core.instants import MS_PER_SECOND, Instant, format_instant, parse_instant
from session_schedule.core.plain import ReadOnlyDict
from session_schedule.core.quiet import (
    QuietHours,
    deferred_since,
    describe,
    quiet_until,
    quiet_window,
)
from session_schedule.core.records import (
    LastRun,
    RunOutcome,
    ScheduleView,
    make_view,
    record_target,
)
from session_schedule.core.rules import (
    Limits,
    check_chain_depth,
    decide_create,
    decide_delete,
    decide_update,
)
from session_schedule.core.visible import escape_unencodable
from session_schedule.runtime import watch
from session_schedule.runtime.agent import (
    Agent,
    AgentClosed,
    FollowUp,
    check_agent,
    discard_awaitable,
    handed_over,
    queue_followup,
)
from session_schedule.runtime.clock import Clock, SystemClock
from session_schedule.runtime.events import BackOffReason, ScheduleEvents
from session_schedule.runtime.queue import AgentQueue
from session_schedule.runtime.retry import TurnRetry
from session_schedule.runtime.turns import TurnAttemptFailed, TurnQueue
from session_schedule.session.errors import PersistenceUncertain
from session_schedule.session.history import OccurrenceLog, OccurrenceRun
from session_schedule.session.port import SessionHandle, schedule_changes
from session_schedule.session.provenance import Provenance, ProvenanceLog
from session_schedule.session.quotas import (
    MAX_TURNS_PER_DAY as MAX_TURNS,
)
from session_schedule.session.quotas import (
    QUOTAS_ENTRY_TYPE,
    QuietHoursField,
    QuotasEntry,
    quotas_entry,
)
from session_schedule.session.targets import listed_target
from session_schedule.session.turns import TurnQueued

logger = logging.getLogger(__name__)

T = TypeVar("T")
Arguments = TypeVarTuple("Arguments")
Outcome = Literal["delivered", "nothing due", "agent busy", "agent refused", "agent closed"]
_BUSY_BEFORE_BACKOFF = 3
"""Consecutive "agent busy" outcomes after which the owner backs off instead of retrying."""
_NOTHING_BEFORE_BACKOFF = 2
"""Consecutive "nothing due" outcomes (after a due wake-up) after which the owner backs off."""
_DAY_SECONDS = 86_400
"""The window of ``Settings.max_reminder_turns_per_day``."""


@final
class ScheduleClosedError(RuntimeError):
    """A management call reached a :class:`LiveSchedule` after :meth:`LiveSchedule.close`: the
    session must be opened again and a new one started. A ``RuntimeError``, as before."""

    def __init__(self, session_id: str) -> None:
        super().__init__("this LiveSchedule is closed: open the session again and start a new one")
        self.session_id = session_id


@final
class _Flag:
    """What :class:`asyncio.Event` is to the owner (``set``, ``clear``, ``is_set``, ``wait``),
    holding no queue of waiters until one waits: ten thousand idle schedules keep three each."""

    __slots__ = ("_set", "_waiters")

    def __init__(self) -> None:
        self._set = False
        self._waiters: list[asyncio.Future[None]] | None = None

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        self._set = True
        waiters, self._waiters = self._waiters, None
        for waiter in waiters or ():
            _settle(waiter)

    def clear(self) -> None:
        self._set = False

    async def wait(self) -> None:
        if self._set:
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self._waiters is None:
            self._waiters = []
        self._waiters.append(waiter)
        try:
            await waiter
        finally:
            if self._waiters is not None and waiter in self._waiters:
                self._waiters.remove(waiter)


def _settle(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


MIN_WAIT_SECONDS = 0.01
"""The shortest ``max_wait_seconds``, ``retry_initial_seconds`` and ``retry_max_seconds`` a
:class:`Settings` accepts. With 0 the owner spins (tens of thousands of refused follow-ups a
second, or a core kept busy re-reading the clock); a microsecond is hardly better (the owner's
instants are whole milliseconds). From 10 ms on, a permanently refusing agent is asked at most
100 times a second and an idle owner wakes at most that often."""
_TIMINGS = ("max_wait_seconds", "retry_initial_seconds", "retry_max_seconds")


@final
class Settings(msgspec.Struct, frozen=True, kw_only=True):
    """Every knob of a live Schedule; the defaults are documented in docs/concepts/schedule.md.

    Raises ``ValueError`` for a wait or back-off that is not a finite number of seconds of at
    least :data:`MIN_WAIT_SECONDS`, or a ``retry_max_seconds`` below ``retry_initial_seconds``.
    """

    limits: Limits = Limits()
    max_wait_seconds: float = 30.0
    """The owner never sleeps longer than this before re-reading the wall clock."""
    retry_initial_seconds: float = 1.0
    """First back-off after ``followup()`` or framing failed."""
    retry_max_seconds: float = 60.0
    """The back-off doubles after each consecutive failure, up to this."""
    followup_limit: int = 6
    """The most reminder follow-up turns queued within any ``followup_window_seconds``."""
    followup_window_seconds: int = 60
    """The rolling window of ``followup_limit``, in seconds of wall-clock time."""
    turn_retry: TurnRetry = TurnRetry()
    """How the turn queue retries a turn that failed (attempts, back-off, elapsed age)."""
    max_reminder_turns_per_day: int | None = None
    """The most reminder turns queued within any 24 hours; ``None``: no such quota."""
    quiet_hours: QuietHours | None = None
    """The person's quiet hours: a delivery due within them waits until they end."""

    def __post_init__(self) -> None:
        for name in _TIMINGS:
            value = getattr(self, name)
            if not math.isfinite(value):
                raise ValueError(f"{name} must be a finite number of seconds, not {value}")
            if value < MIN_WAIT_SECONDS:
                raise ValueError(
                    f"{name} must be at least {MIN_WAIT_SECONDS:g} seconds, not {value:g}: a "
                    "shorter wait or back-off lets the owner spin"
                )
        if self.retry_max_seconds < self.retry_initial_seconds:
            raise ValueError(
                f"retry_max_seconds ({self.retry_max_seconds:g}) must be at least "
                f"retry_initial_seconds ({self.retry_initial_seconds:g}): the back-off doubles "
                "from the first up to the second"
            )


HoldReason = Literal["follow-up budget", "quiet hours"]
"""What holds due deliveries back: the budget of reminder turns (a minute's or a day's), or the
person's quiet hours."""


@final
class Hold(msgspec.Struct, frozen=True, kw_only=True):
    """Why the last pass delivered nothing although a reminder was due, and until when."""

    reason: HoldReason
    until: Instant
    """When the hold lifts, as seen by the pass: the end of the quiet hours, or the instant the
    budget allows a turn again."""
    target: Instant
    """The earliest target waiting under it."""
    listed: Instant
    """The session's next target as the store's index records it while the hold lasts (unless
    an unfinished turn is earlier): ``target``, or the time the session's quotas were last set
    when that is later. A different one there means its log changed."""


QuotaName = Literal["turns_per_day", "quiet_hours", "max_active"]
"""The quotas a person sets for one session (:meth:`LiveSchedule.set_quota`)."""
SetBy = Literal["session", "program"]


@final
class SessionQuotas(msgspec.Struct, frozen=True, kw_only=True):
    """The quotas a live Schedule applies, and whether the session or the program set each."""

    turns_per_day: int | None
    """The most reminder turns in any 24 hours; ``None``: no such quota."""
    turns_per_day_set_by: SetBy
    quiet_hours: QuietHours | None
    """Local hours during which a due reminder waits; ``None``: none."""
    quiet_hours_set_by: SetBy
    max_active: int
    """The most active reminders."""
    max_active_set_by: SetBy
    program_max_active: int
    """The program's bound, which a session's active-reminder quota cannot pass."""


@final
class LiveSchedule:
    """Schedule for one live Session, serving one agent.

    Use ``async with LiveSchedule(session, agent):`` or :meth:`start` and :meth:`close`. Closing
    stops delivery; it does not close the Session. Management (create, list, update, delete,
    quotas) works before :meth:`start` — the first call folds the Session's log, so it decides
    on what the log holds — but nothing is delivered until then; after :meth:`close` it raises
    ``RuntimeError`` (a closed Schedule does not start again). ``driven=True``: no owner task;
    the caller drives delivery with :meth:`step` (Rule 5c) and ``on_wake`` is called after every
    create that may move the next wake-up and every actual delete.
    """

    # A process keeps thousands open: their attributes are slots (more than 30 would not share
    # a dict's keys), with a ``__dict__`` made only if something else is set on one.
    __slots__ = (
        "__dict__",
        "__weakref__",
        "_agent",
        "_backoff",
        "_busy_in_a_row",
        "_chosen",
        "_clock",
        "_deferred",
        "_driven",
        "_events",
        "_failure",
        "_held",
        "_held_by",
        "_history",
        "_hold",
        "_life",
        "_limits",
        "_nothing_in_a_row",
        "_on_wake",
        "_owner",
        "_parked",
        "_per_day",
        "_provenance",
        "_queue",
        "_quiet",
        "_recent",
        "_resting",
        "_retry_until",
        "_session",
        "_settings",
        "_sleep_seconds",
        "_state",
        "_stopped",
        "_today",
        "_turn_failures",
        "_waiter",
        "_wake",
    )

    def __init__(  # noqa: PLR0915 - every slot is given its value here, one statement each
        self,
        session: SessionHandle,
        agent: Agent,
        *,
        clock: Clock | None = None,
        settings: Settings | None = None,
        queue: AgentQueue | None = None,
        driven: bool = False,
        on_wake: Callable[[], None] | None = None,
    ) -> None:
        self._session = session
        self._driven = driven
        self._on_wake = on_wake
        self._agent = agent
        self._clock = clock or SystemClock()
        self._settings = settings or Settings()
        if self._settings.followup_limit < 1 or self._settings.followup_window_seconds < 1:
            raise ValueError("followup_limit and followup_window_seconds must be at least 1")
        per_day = self._settings.max_reminder_turns_per_day
        if per_day is not None and per_day < 1:
            raise ValueError("max_reminder_turns_per_day must be at least 1 (or None)")
        quiet = self._settings.quiet_hours
        self._quiet = None if quiet is None else quiet_window(quiet)
        # The quotas applied (the session's latest ``schedule/quotas`` entry, ``_chosen``, over
        # the program's settings): reminder turns in any 24 hours, and the limits of creates.
        self._per_day = per_day
        self._limits = self._settings.limits
        self._chosen: QuotasEntry | None = None
        self._queue = queue or AgentQueue()
        self._state = ScheduleFold(session=session.id)
        self._wake = _Flag()
        self._waiter: asyncio.Future[None] | None = None
        """What the owner's current wait awaits: settled by its timer or by a wake-up."""
        self._parked, self._stopped = _Flag(), _Flag()
        self._owner: asyncio.Task[None] | None = None
        # "new" until the log is folded into _state (by start, or by the first management
        # call made before it), "started", then "closed".
        self._life: Literal["new", "folded", "started", "closed"] = "new"
        self._failure: BaseException | None = None
        self._events = ScheduleEvents(session.id)
        self._recent: list[Instant] = []
        """Decision times of the follow-ups queued within the last window, oldest first."""
        self._today: list[Instant] = []
        """Decision times of the follow-ups queued within the last 24 hours (only counted with
        a ``max_reminder_turns_per_day``), oldest first."""
        self._held_by = (self._settings.followup_limit, self._settings.followup_window_seconds)
        """The quota that held deliveries back last: (limit, window in seconds)."""
        self._deferred: tuple[Instant, Instant] | None = None
        """When quiet hours first and last deferred deliveries, while some of those wait."""
        self._sleep_seconds: float | None = None
        """How long the owner's current sleep until the next wake-up lasts, while it sleeps."""
        self._held: tuple[Instant, Instant] | None = None
        """When the budget first and last held back deliveries, while some of those wait."""
        self._hold: Hold | None = None
        """The hold the last pass left due deliveries under."""
        self._backoff = self._settings.retry_initial_seconds
        self._retry_until: float | None = None
        """The end of the current back-off on the clock's monotonic reading, if one runs: a
        back-off lasts its elapsed time whatever the wall clock does."""
        self._busy_in_a_row = self._nothing_in_a_row = 0
        self._resting = False
        """Whether the last pass found nothing due (the owner then sleeps until the wake-up)."""
        self._history: OccurrenceLog | None = None
        """The runs of each reminder (Rule 7), read from the log when first listed."""
        self._provenance: ProvenanceLog | None = None
        """Which turn created each reminder, read from the log at the first create."""
        self._turn_failures: Callable[[], None] | None = None
        """Unsubscribes the operator events from the failed attempts of the agent's turns,
        while started (when the agent is a :class:`TurnQueue`)."""

    # -- life cycle --------------------------------------------------------------------------

    async def start(self) -> None:
        """Fold the Session's log and start delivering.

        Raises ``ScheduleError`` — ``corrupt_schedule_log`` for a log the fold rejects,
        ``persistence_uncertain`` for a poisoned handle — and ``TypeError`` for an agent whose
        methods are not those of the Agent port (an ``async def followup``, say).
        """
        if self._life == "started":
            raise RuntimeError("this LiveSchedule was started already")
        if self._life == "closed":
            raise RuntimeError("this LiveSchedule was closed; a closed one does not start again")
        check_agent(self._agent)
        if self._life == "new":
            self._fold_log()
        self._life = "started"
        if isinstance(self._agent, TurnQueue):
            # Its turns' failed attempts are operator events of this Schedule: turn-retry and
            # turn-failed, whoever runs the queue (a host, the chat, a loop of one's own).
            self._turn_failures = self._agent.subscribe(self._turn_attempt_failed)
        if self._driven:
            return
        self._owner = asyncio.create_task(
            self._own_until_stopped(), name=f"schedule owner {self._session.header.id}"
        )

    def _fold_log(self) -> None:
        """Fold the Session's log into the state and apply its quotas (raises as :meth:`start`
        says)."""
        header = self._session.header
        # Opened from a checkpoint: fold only what follows it.
        resume = self._session.resume
        start = 0 if resume is None else resume.position
        try:
            changes = schedule_changes(self._session.entries[start:])
        except PersistenceUncertain as error:
            raise error.as_schedule_error() from None
        if resume is None:
            self._state = fold(changes, seed_length=header.seed_length, session=self._session.id)
        else:
            state = resume.fold(self._session.id)
            state.replay(changes, seed_length=header.seed_length)
            self._state = state
        chosen = resume.quotas if resume is not None else None
        try:
            for entry in self._session.entries[max(start, header.seed_length) :]:
                if entry.type == QUOTAS_ENTRY_TYPE and isinstance(entry.payload, QuotasEntry):
                    chosen = entry.payload
        except PersistenceUncertain as error:
            raise error.as_schedule_error() from None
        self._apply(chosen)
        self._life = "folded"

    def _managed(self, work: Callable[[], Awaitable[T]]) -> Awaitable[T]:
        """``work`` in the agent's queue, on the folded log: a management call made before
        :meth:`start` folds it first (so no change is decided on a state that does not know
        the log, which could reuse an id); one made after :meth:`close` raises
        :class:`ScheduleClosedError`."""

        async def run() -> T:
            if self._life == "closed":
                raise ScheduleClosedError(self._session.id)
            if self._life == "new":
                self._fold_log()
            return await work()

        return self._queue.run(run)

    async def close(self) -> None:
        """Stop delivering. Idempotent; a delivery in progress is cancelled before it appends."""
        self._life = "closed"
        unsubscribe, self._turn_failures = self._turn_failures, None
        if unsubscribe is not None:
            unsubscribe()
        owner, self._owner = self._owner, None
        if owner is not None and not owner.done():
            owner.cancel()
            await asyncio.gather(owner, return_exceptions=True)
        self._stopped.set()

    def _turn_attempt_failed(self, failed: TurnAttemptFailed) -> None:
        self._events.turn_attempt_failed(self._clock.now(), failed)

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    # -- management (SPEC §5) ----------------------------------------------------------------

    @property
    def settings(self) -> Settings:
        return self._settings

    @property
    def events(self) -> ScheduleEvents:
        """Operator events (create, delete, dispatch, refusal, failed follow-up, back-off):
        logged on ``session_schedule.events`` and handed to subscribed callbacks."""
        return self._events

    @property
    def failure(self) -> BaseException | None:
        """What stopped the owner, if anything did (it is also logged)."""
        return self._failure

    async def wait_stopped(self) -> None:
        """Return once the owner has stopped: closed, or stopped by a failure (:attr:`failure`;
        after a storage failure, reopen the Session from storage and start a new Schedule)."""
        await self._stopped.wait()

    def now(self) -> Instant:
        """The wall clock this Schedule reads."""
        return self._clock.now()

    async def create(self, arguments: Mapping[str, object]) -> ScheduleView:
        """Create a reminder from a model's raw ``schedule_create`` arguments; its view.

        Raises ``ScheduleError`` with the stable code of the first failing check.
        """
        return await self._managed(lambda: self._create(arguments, _as_is))

    async def create_plain(self, arguments: Mapping[str, object]) -> dict[str, object]:
        """:meth:`create`, with the view in its JSON-ready form (``msgspec.to_builtins`` of it),
        built before the barrier rather than once the ``fsync`` has returned."""
        return await self._managed(lambda: self._create(arguments, _plain))

    async def update(self, arguments: Mapping[str, object]) -> ScheduleView:
        """Change an active reminder in place from a model's raw ``schedule_update`` arguments
        (SPEC §11); its view afterwards.

        Raises ``ScheduleError`` with a stable code when the arguments are refused (nothing is
        appended then), or ``persistence_uncertain`` when the barrier fails.
        """
        return await self._managed(lambda: self._update(arguments, _as_is))

    async def update_plain(self, arguments: Mapping[str, object]) -> dict[str, object]:
        """:meth:`update`, with the view in its JSON-ready form."""
        return await self._managed(lambda: self._update(arguments, _plain))

    async def active(self) -> tuple[Instant, list[ScheduleView]]:
        """The decision time used and the active reminders, in target then creation order."""
        return await self._managed(self._active)

    async def active_plain(self) -> tuple[Instant, list[ReadOnlyDict]]:
        """:meth:`active`, with each view in its JSON-ready form, as a read-only dict shared
        with later calls (see :mod:`session_schedule.core.plain`)."""
        return await self._managed(self._active_plain)

    async def delete(self, arguments: Mapping[str, object]) -> tuple[str, bool]:
        """Delete the reminder ``arguments["id"]`` names: (the id, whether one was deleted).

        Deleting an id that is not active appends nothing and is not an error. An id holding a
        lone surrogate is returned with it escaped as ``\\uXXXX``.
        """
        return await self._managed(lambda: self._delete(arguments))

    def quotas(self) -> SessionQuotas:
        """The quotas this Schedule applies now (the session's, else the program's)."""
        chosen = self._chosen
        settings = self._settings

        def set_by(value: object) -> SetBy:
            return "program" if value is msgspec.UNSET else "session"

        return SessionQuotas(
            turns_per_day=self._per_day,
            turns_per_day_set_by=set_by(msgspec.UNSET if chosen is None else chosen.turns_per_day),
            quiet_hours=None if self._quiet is None else self._quiet.hours,
            quiet_hours_set_by=set_by(msgspec.UNSET if chosen is None else chosen.quiet_hours),
            max_active=self._limits.max_active,
            max_active_set_by=set_by(msgspec.UNSET if chosen is None else chosen.max_active),
            program_max_active=settings.limits.max_active,
        )

    async def set_quota(self, name: QuotaName, value: object) -> SessionQuotas:
        """Set one of this session's quotas, as a person asked: ``value`` is the quota (an
        ``int`` for ``turns_per_day`` and ``max_active``, a :class:`QuietHours` for
        ``quiet_hours``), ``None`` for none (not for ``max_active``), or ``msgspec.UNSET`` for
        the program's setting. Appends a ``schedule/quotas`` entry holding every quota the
        session sets, awaits the barrier and applies it at once.

        Raises ``ValueError`` with a sentence a person can act on for a value out of range, and
        ``ScheduleError`` (``persistence_uncertain``) when the entry may not be durable.
        """
        return await self.set_quotas({name: value})

    async def set_quotas(self, values: Mapping[QuotaName, object]) -> SessionQuotas:
        """:meth:`set_quota` for several quotas at once, in one entry; none is set when one is
        refused."""
        return await self._managed(lambda: self._set_quotas(values))

    async def _set_quotas(self, values: Mapping[QuotaName, object]) -> SessionQuotas:
        checked = {
            name: _checked_quota(name, value, self._settings.limits.max_active)
            for name, value in values.items()
        }
        await self._barrier()
        chosen = self._chosen
        fields: dict[QuotaName, object] = {
            "turns_per_day": msgspec.UNSET if chosen is None else chosen.turns_per_day,
            "quiet_hours": msgspec.UNSET
            if chosen is None or not isinstance(chosen.quiet_hours, QuietHoursField)
            else chosen.quiet_hours.hours(),
            "max_active": msgspec.UNSET if chosen is None else chosen.max_active,
        }
        if chosen is not None and chosen.quiet_hours is None:
            fields["quiet_hours"] = None
        fields.update(checked)
        entry = quotas_entry(
            at=self._clock.now(),
            turns_per_day=cast("int | msgspec.UnsetType | None", fields["turns_per_day"]),
            quiet_hours=cast("QuietHours | msgspec.UnsetType | None", fields["quiet_hours"]),
            max_active=cast("int | msgspec.UnsetType", fields["max_active"]),
        )
        try:
            self._session.append(QUOTAS_ENTRY_TYPE, entry)
        except PersistenceUncertain as error:
            raise error.as_schedule_error() from None
        await self._barrier()
        self._apply(entry)
        # Quiet hours may have ended, or a quota been lifted: decide again now.
        self._wake_owner()
        return self.quotas()

    def _apply(self, chosen: QuotasEntry | None) -> None:
        """Apply the session's quotas ``chosen`` (``None``: the program's settings)."""
        self._chosen = chosen
        settings = self._settings
        per_day = settings.max_reminder_turns_per_day
        quiet = settings.quiet_hours
        limits = settings.limits
        if chosen is not None:
            if not isinstance(chosen.turns_per_day, msgspec.UnsetType):
                per_day = chosen.turns_per_day
            if chosen.quiet_hours is None:
                quiet = None
            elif isinstance(chosen.quiet_hours, QuietHoursField):
                quiet = chosen.quiet_hours.hours()
            if not isinstance(chosen.max_active, msgspec.UnsetType):
                limits = msgspec.structs.replace(
                    limits, max_active=min(limits.max_active, chosen.max_active)
                )
        self._limits = limits
        self._quiet = None if quiet is None else quiet_window(quiet)
        self._per_day = per_day
        self._today.clear()
        if per_day is not None:
            self._today.extend(self._turns_within(_DAY_SECONDS))

    async def pending(self) -> Delivery | None:
        """The delivery that a decision taken now would make, without making it; ``None`` when
        nothing is due. For hosts that pull their follow-ups and preview them first."""
        return await self._managed(self._pending)

    def frame(self, delivery: Delivery) -> str:
        """The follow-up text this Schedule queues for ``delivery``: with the Session's frame
        budget (``limits.max_frame_chars``), and saying so when the follow-up budget held it."""
        return frame(
            delivery,
            delay=self._delay(delivery),
            deferral=self._deferral(delivery),
            max_chars=self._settings.limits.max_frame_chars,
            set_during=self._set_during(delivery),
        )

    def _set_during(self, delivery: Delivery) -> dict[str, str]:
        """The reminders of ``delivery`` that an earlier reminder turn created, and that turn."""
        provenance = self._provenance_now()
        made: dict[str, str] = {}
        for occurrence in delivery.occurrences:
            found = provenance.of(occurrence.record.id)
            if found.made_by == "reminder":
                made[occurrence.record.id] = found.text()
        return made

    async def _create(
        self, arguments: Mapping[str, object], shape: Callable[[ScheduleView], T]
    ) -> T:
        await self._barrier()
        now = self._clock.now()
        made = self._provenance_now().current()
        change = decide_create(
            arguments,
            now=now,
            state=self._state,
            limits=self._limits,
            chain_depth=made.depth,
        )
        self._append(change)
        # Prepared before the barrier, which may block the loop on an ``fsync`` after which
        # everything runs slowly; only returned once it has succeeded.
        record = change.schedule
        view = shape(with_provenance(make_view(record, now), made))
        due_in = (record_target(record) - now) / MS_PER_SECOND
        await self._barrier()
        # The owner need not re-arm when its current sleep (however much of it is left) ends
        # before the new target would be due anyway.
        sleeping = self._sleep_seconds
        if sleeping is None or due_in < sleeping:
            self._wake_owner()
        self._events.created(record.id, now)
        return view

    async def _update(
        self, arguments: Mapping[str, object], shape: Callable[[ScheduleView], T]
    ) -> T:
        await self._barrier()
        now = self._clock.now()
        schedule_id, changes = decide_update(
            arguments, now=now, state=self._state, limits=self._settings.limits
        )
        # An update from deep in a chain of reminder turns (a reminder snoozing or re-timing
        # itself from its own turn) is refused as a create would be; the update makes the
        # reminder as deep as the turn (session/provenance.py Rule 4), so a reminder that keeps
        # itself alive that way counts up and stops at the bound.
        check_chain_depth(
            self._provenance_now().current().depth, self._settings.limits, operation="update"
        )
        for change in changes:
            self._append(change)
        record = self._state.get(schedule_id)
        if record is None:
            raise RuntimeError(f"the update of {schedule_id} ended it")
        view = shape(
            with_provenance(
                with_runs(
                    make_view(record, now, self._state.status(schedule_id)), self._history_now()
                ),
                self._provenance_now().of(schedule_id),
            )
        )
        await self._barrier()
        # The next delivery may have moved earlier (or a paused reminder was resumed).
        self._wake_owner()
        self._events.updated(schedule_id, now)
        return view

    async def _active(self) -> tuple[Instant, list[ScheduleView]]:
        await self._barrier()
        now = self._clock.now()
        history = self._history_now()
        provenance = self._provenance_now()
        return now, [
            with_provenance(with_runs(view, history), provenance.of(view.id))
            for view in self._state.views(now)
        ]

    async def _active_plain(self) -> tuple[Instant, list[ReadOnlyDict]]:
        await self._barrier()
        now = self._clock.now()
        history = self._history_now()
        provenance = self._provenance_now()
        return now, [
            plain_with_provenance(plain_with_runs(view, history), provenance)
            for view in self._state.plain_views(now)
        ]

    def _history_now(self) -> OccurrenceLog:
        """The runs of the active reminders, read from the log up to now (Rule 7)."""
        history = self._history
        if history is None:
            header = self._session.header
            resume = self._session.resume
            if resume is not None and resume.runs is not None:
                # Opened from a checkpoint that recorded the runs: read only what follows it.
                history = OccurrenceLog.resumed(
                    resume, seed_length=header.seed_length, session=self._session.id
                )
            else:
                history = OccurrenceLog(
                    seed_length=header.seed_length, session=self._session.id, keep=False
                )
            self._history = history
        try:
            history.feed(self._session.entries[history.position :])
        except PersistenceUncertain as error:
            raise error.as_schedule_error() from None
        return history

    def _provenance_now(self) -> ProvenanceLog:
        """Which turn made or last changed each reminder, read from the log up to now: from the
        checkpoint the Session was opened from, which records it for the active reminders (and
        from the first entry for an older checkpoint that does not), so a chain keeps its depth
        across a restart."""
        provenance = self._provenance
        if provenance is None:
            seed_length = self._session.header.seed_length
            resume = self._session.resume
            if resume is not None and resume.provenance is not None:
                provenance = ProvenanceLog.resumed(resume, seed_length=seed_length)
            else:
                provenance = ProvenanceLog(seed_length=seed_length)
            self._provenance = provenance
        try:
            provenance.feed(self._session.entries[provenance.position :])
        except PersistenceUncertain as error:
            raise error.as_schedule_error() from None
        return provenance

    async def _pending(self) -> Delivery | None:
        await self._barrier()
        return plan_delivery(self._state, self._clock.now())

    async def _delete(self, arguments: Mapping[str, object]) -> tuple[str, bool]:
        await self._barrier()
        change = decide_delete(arguments, state=self._state)
        # The id asked for; one that cannot be encoded names no reminder and is kept escaped.
        schedule_id = escape_unencodable(str(arguments["id"]))
        if change is None:
            self._events.deleted(schedule_id, self._clock.now(), deleted=False)
            return schedule_id, False
        self._append(change)
        await self._barrier()
        self._wake_owner()
        self._events.deleted(schedule_id, self._clock.now(), deleted=True)
        return schedule_id, True

    # -- delivery (SPEC §6) ------------------------------------------------------------------

    async def settled(self) -> None:
        """Return once the owner is parked — sleeping, or waiting for the agent to be idle — and
        no queue item is running or waiting. For tests in virtual time: settle *before* moving
        the fake clock too, after a tool call, so that the owner has taken the call in and sleeps
        until the right deadline (a clock moved while it is still deciding is seen only when its
        current sleep, at most ``max_wait_seconds``, ends)."""
        while True:
            await self._parked.wait()
            for _ in range(8):
                await asyncio.sleep(0)
            if self._parked.is_set() and not self._queue.busy:
                return

    async def _own_until_stopped(self) -> None:
        try:
            await self._own()
        finally:
            self._stopped.set()

    async def _own(self) -> None:
        try:
            while True:
                self._wake.clear()
                resume = await self._step()
                now = self._clock.now()
                if resume is not None and resume <= now:
                    # Look again at once, but yield first (Rule 5a).
                    await asyncio.sleep(0)
                elif self._resting and self._far(resume, now):
                    await self._park(resume, now)
                elif self._resting:
                    await self._sleep(self._bounded(resume, now))
                else:
                    await self._wait(self._bounded(resume, now))
        except asyncio.CancelledError:
            raise
        except ScheduleError as error:
            self._failure = error
            # An expected stop (a poisoned Session): the message says it all.
            logger.error(  # noqa: TRY400
                "schedule owner of session %s stopped: %s", self._session.id, error
            )
        except Exception as error:
            self._failure = error
            logger.exception("schedule owner of session %s failed", self._session.id)
        finally:
            self._parked.set()

    async def step(self) -> Instant | None:
        """One pass of the delivery owner, for a host that drives many Schedules from one timer
        (a Schedule built with ``driven=True`` runs no owner task of its own; Rule 5c).

        If something is due now (and the follow-up budget allows it), wait until the agent is
        idle and deliver it exactly as the owner does (Rules 4 to 5b). Return the wall-clock
        instant at which the next pass should run: the next target, the end of a back-off or of
        a budget hold, or about now after a delivery; ``None`` when nothing is active. Raises
        ``ScheduleError`` when the Session is poisoned. Never call it while another call runs.
        """
        if not self._driven:
            raise RuntimeError("this LiveSchedule runs its own owner task (driven=False)")
        return await self._step()

    @property
    def agent(self) -> Agent:
        return self._agent

    @property
    def hold(self) -> Hold | None:
        """The hold under which the last pass (:meth:`step`, or the owner's) left a due
        delivery — quiet hours, or a spent budget of reminder turns — and when it lifts;
        ``None`` when that pass was not held. A host that closes the session meanwhile need not
        open it again before ``until`` unless its log changes (the new Schedule would hold it
        again, and report the hold again)."""
        return self._hold

    @property
    def parked(self) -> bool:
        """Whether the owner (or a driven :meth:`step`) is waiting — for the agent to be idle,
        or sleeping — rather than working. For tests in virtual time."""
        return self._parked.is_set()

    async def _step(self) -> Instant | None:
        self._resting = False
        self._hold = None
        now = self._clock.now()
        if self._retry_until is not None:
            remaining = self._retry_until - self._clock.monotonic()
            if remaining > 0:
                # The wall-clock instant at which the back-off ends, as seen now.
                return Instant(now + math.ceil(remaining * MS_PER_SECOND))
            self._retry_until = None
        wakeup = next_wakeup(self._state)
        if wakeup is None or wakeup > now:
            # Nothing waits: a hold or a deferral whose reminders were deleted meanwhile is
            # over too, and the next one is reported anew.
            self._held = self._deferred = None
            self._nothing_in_a_row = 0
            self._resting = True
            return wakeup
        quiet_end = None if self._quiet is None else quiet_until(self._quiet, now)
        if quiet_end is not None:
            if self._deferred is None and self._quiet is not None:
                self._events.backing_off(
                    now,
                    reason="quiet hours",
                    seconds=(quiet_end - now) / MS_PER_SECOND,
                    detail=describe(self._quiet.hours),
                )
            self._deferred = (now if self._deferred is None else self._deferred[0], now)
            self._hold = self._held_until("quiet hours", quiet_end, wakeup)
            self._resting = True
            return quiet_end
        allowed_at, held_by = self._budget_allows_at(now)
        if allowed_at > now:
            self._held_by = held_by
            if self._held is None:
                limit, window = held_by
                self._events.backing_off(
                    now,
                    reason="follow-up budget",
                    seconds=(allowed_at - now) / MS_PER_SECOND,
                    detail=f"{limit} reminder follow-ups within {window} s",
                )
            self._held = (now if self._held is None else self._held[0], now)
            self._hold = self._held_until("follow-up budget", allowed_at, wakeup)
            return allowed_at
        await self._parked_while(self._agent.wait_idle())
        outcome = await self._queue.run(self._deliver_due)
        self._busy_in_a_row = self._busy_in_a_row + 1 if outcome == "agent busy" else 0
        self._nothing_in_a_row = self._nothing_in_a_row + 1 if outcome == "nothing due" else 0
        if outcome == "delivered":
            self._backoff = self._settings.retry_initial_seconds
        elif outcome == "agent closed":
            # The agent runs no more turns (the program is shutting down): wait as for a
            # refusal, so that the owner cannot spin, but report nothing.
            backoff = self._backoff
            self._backoff = min(backoff * 2, self._settings.retry_max_seconds)
            self._retry_until = self._clock.monotonic() + backoff
            return Instant(self._clock.now() + math.ceil(backoff * MS_PER_SECOND))
        elif (
            outcome == "agent refused"
            or self._busy_in_a_row >= _BUSY_BEFORE_BACKOFF
            or self._nothing_in_a_row >= _NOTHING_BEFORE_BACKOFF
        ):
            # A refusing agent, one that reports idle yet keeps refusing maintenance, or a
            # wake-up the planner keeps contradicting: back off rather than spin.
            reason: BackOffReason = "agent busy"
            detail = None
            if outcome == "agent refused":
                reason = "agent refused"
            elif self._nothing_in_a_row:
                reason = "nothing due"
                detail = (
                    f"a reminder was due at {format_instant(wakeup)} but nothing was due to deliver"
                )
            backoff = self._backoff
            now = self._clock.now()
            self._events.backing_off(now, reason=reason, seconds=backoff, detail=detail)
            self._backoff = min(backoff * 2, self._settings.retry_max_seconds)
            # A create or delete ends the back-off early (it wakes the owner).
            self._retry_until = self._clock.monotonic() + backoff
            return Instant(now + math.ceil(backoff * MS_PER_SECOND))
        # Delivered; or a turn started between idle and the queue slot, or the due reminder
        # went (a delete, a clock step back): look again at once.
        return self._clock.now()

    def _held_until(self, reason: HoldReason, until: Instant, target: Instant) -> Hold:
        """The hold of a pass that found ``target`` due and held it back until ``until``."""
        chosen = self._chosen
        listed = listed_target(target, None if chosen is None else parse_instant(chosen.at))
        return Hold(
            reason=reason, until=until, target=target, listed=target if listed is None else listed
        )

    def _wake_owner(self) -> None:
        self._retry_until = None
        self._wake.set()
        if self._waiter is not None:
            _settle(self._waiter)
        if self._on_wake is not None:
            self._on_wake()

    async def _deliver_due(self) -> Outcome:
        entered: object = self._agent.begin_maintenance()
        if discard_awaitable(entered, "begin_maintenance"):
            return "agent refused"
        if not entered:
            return "agent busy"
        try:
            await self._barrier()
            now = self._clock.now()
            misses = plan_misses(self._state, now)
            for miss in misses:
                self._append(miss)
            delivery = plan_delivery(self._state, now)
            if delivery is None:
                if not misses:
                    return "nothing due"
                await self._barrier()
                for miss in misses:
                    self._events.missed(miss)
                return "delivered"
            keys = tuple(occurrence.key for occurrence in delivery.occurrences)
            if self._history_now().queued_undispatched(keys):
                # Rule 4a: its turn is in the log already, and only the dispatch was lost.
                logger.info(
                    "follow-up for %s in session %s was queued before its dispatch was lost; "
                    "the dispatch is recorded and no second turn is queued",
                    ", ".join(keys),
                    self._session.id,
                )
            else:
                refused = await self._hand_over(delivery, keys)
                if refused is not None:
                    return refused
            self._recent.append(now)
            if self._per_day is not None:
                self._today.append(now)
            for change in delivery.changes:
                self._append(change)
            # A hold or a deferral is over once nothing that was due during it still waits.
            wakeup = next_wakeup(self._state)
            if self._held is not None and (wakeup is None or wakeup > self._held[1]):
                self._held = None
            if self._deferred is not None and (wakeup is None or wakeup > self._deferred[1]):
                self._deferred = None
            await self._barrier()
            for miss in misses:
                self._events.missed(miss)
            self._events.dispatched(delivery)
            return "delivered"
        finally:
            discard_awaitable(_returned(self._agent.end_maintenance), "end_maintenance")

    async def _hand_over(self, delivery: Delivery, keys: tuple[str, ...]) -> Outcome | None:
        """Frame ``delivery`` and queue it with the agent (Rules 4 and 5): ``None`` once the
        agent has taken it, else the outcome of its refusal (nothing queued)."""
        try:
            method, accepted = queue_followup(
                self._agent, FollowUp(text=self.frame(delivery), occurrences=keys)
            )
        except Exception as error:
            return self._refused(delivery, keys, error, "accepted")
        if discard_awaitable(accepted, method):
            self._events.followup_failed(
                delivery, TypeError(f"{method}() returned an awaitable, which was discarded")
            )
            return "agent refused"
        try:
            await handed_over(self._agent)
        except Exception as error:
            return self._refused(delivery, keys, error, "handed over")
        return None

    def _refused(
        self, delivery: Delivery, keys: tuple[str, ...], error: Exception, step: str
    ) -> Outcome:
        """The outcome of an agent that raised ``error`` as it was handed ``delivery`` (called
        while that is handled): a quiet refusal when it is closed, else a failure, logged with
        its traceback and reported."""
        if isinstance(error, AgentClosed):
            self._declined(delivery, error)
            return "agent closed"
        self._events.followup_failed(delivery, error)
        logger.exception(
            "follow-up for %s in session %s was not %s; the reminder stays active",
            ", ".join(keys),
            self._session.id,
            step,
        )
        return "agent refused"

    def _declined(self, delivery: Delivery, error: AgentClosed) -> None:
        """A closed agent declined ``delivery``: nothing was queued, the reminder stays active
        (Rule 5), and a shutdown is no failure to report."""
        logger.debug(
            "follow-up for %s in session %s was declined, the agent is closed (%s); the reminder "
            "stays active",
            ", ".join(occurrence.key for occurrence in delivery.occurrences),
            self._session.id,
            error,
        )

    def _budget_allows_at(self, now: Instant) -> tuple[Instant, tuple[int, int]]:
        """The earliest instant from ``now`` on at which the follow-up budget and the daily
        quota allow a turn, and the quota (limit, window in seconds) that holds it longest."""
        settings = self._settings
        held_by = (settings.followup_limit, settings.followup_window_seconds)
        allowed = _window_allows_at(self._recent, now, *held_by)
        per_day = self._per_day
        if per_day is not None:
            daily = _window_allows_at(self._today, now, per_day, _DAY_SECONDS)
            if daily > allowed:
                allowed, held_by = daily, (per_day, _DAY_SECONDS)
        return allowed, held_by

    def _turns_within(self, seconds: int) -> list[Instant]:
        """When the reminder turns queued within the last ``seconds`` were queued, oldest first,
        read back from the end of the log."""
        now = self._clock.now()
        return self._turns_between(now - seconds * MS_PER_SECOND, now)

    def _turns_between(self, since: int, now: Instant) -> list[Instant]:
        """When the reminder turns queued after ``since`` and at or before ``now`` were queued,
        oldest first, read back from the end of the log."""
        try:
            entries = self._session.entries
            found: list[Instant] = []
            for position in range(len(entries) - 1, self._session.header.seed_length - 1, -1):
                payload = entries[position].payload
                if not isinstance(payload, TurnQueued):
                    continue
                at = parse_instant(payload.at)
                if at <= since:
                    break
                if payload.origin == "schedule" and at <= now:
                    found.append(at)
        except PersistenceUncertain as error:
            raise error.as_schedule_error() from None
        found.reverse()
        return found

    def _delay(self, delivery: Delivery) -> Delay | None:
        """Why ``delivery`` comes late, if the budget held it back.

        The daily quota's hold is read from the log's reminder turns (the first instant from
        the due time on at which they filled the quota), so it reads the same however often
        the session was closed and opened meanwhile; the follow-up budget, kept in memory, from
        what this Schedule saw.
        """
        due = min(record_target(occurrence.record) for occurrence in delivery.occurrences)
        per_day = self._per_day
        if per_day is not None and due < delivery.decided_at:
            turns = self._turns_between(due - _DAY_SECONDS * MS_PER_SECOND, delivery.decided_at)
            since = _full_since(turns, due, delivery.decided_at, per_day, _DAY_SECONDS)
            if since is not None:
                return Delay(since=since, limit=per_day, window_seconds=_DAY_SECONDS)
        if self._held is None:
            return None
        first, last = self._held
        if due > last:
            return None
        limit, window = self._held_by
        return Delay(since=Instant(max(first, due)), limit=limit, window_seconds=window)

    def _deferral(self, delivery: Delivery) -> Deferral | None:
        """Why ``delivery`` comes late, if quiet hours deferred it: since when, from its due
        time and the quiet hours alone (:func:`~session_schedule.core.quiet.deferred_since`)."""
        if self._quiet is None:
            return None
        due = min(record_target(occurrence.record) for occurrence in delivery.occurrences)
        since = deferred_since(self._quiet, due, delivery.decided_at)
        if since is None:
            return None
        return Deferral(since=since, hours=describe(self._quiet.hours))

    def _bounded(self, wakeup: Instant | None, now: Instant) -> float:
        limit = self._settings.max_wait_seconds
        if wakeup is None:
            return limit
        return min(limit, (wakeup - now) / MS_PER_SECOND)

    def _far(self, resume: Instant | None, now: Instant) -> bool:
        """Whether an idle owner's next target is beyond its longest sleep (or there is none),
        on the system clock: it then waits on the loop's wall-clock watch (Rule 3)."""
        if not isinstance(self._clock, SystemClock):
            return False
        return resume is None or (resume - now) / MS_PER_SECOND > self._settings.max_wait_seconds

    async def _park(self, resume: Instant | None, now: Instant) -> None:
        """Wait on the loop's wall-clock watch (:mod:`session_schedule.runtime.watch`) until
        ``resume`` is within one ``max_wait_seconds``, or a create or delete wakes the owner."""
        self._sleep_seconds = math.inf if resume is None else (resume - now) / MS_PER_SECOND
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self._wake.is_set():
            waiter.set_result(None)
        else:
            watch.park(self._settings.max_wait_seconds, resume, waiter)
        self._waiter = waiter
        try:
            await self._parked_while(waiter)
        finally:
            self._waiter = None
            self._sleep_seconds = None
            waiter.cancel()  # a settled one is left as it is

    async def _sleep(self, seconds: float) -> None:
        """:meth:`_wait` for the next wake-up, remembering how long this sleep lasts."""
        self._sleep_seconds = seconds
        try:
            await self._wait(seconds)
        finally:
            self._sleep_seconds = None

    async def _wait(self, seconds: float) -> None:
        """Sleep ``seconds`` on the clock, or less if a create or delete wakes the owner.

        An idle owner costs one future and one timer handle: on the system clock the sleep is
        a ``call_later`` (another clock's ``sleep`` runs as a task), and a wake-up settles the
        future directly (no task waits on the event).
        """
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        if self._wake.is_set():
            waiter.set_result(None)
        timer: asyncio.TimerHandle | None = None
        sleeper: asyncio.Future[None] | None = None
        if isinstance(self._clock, SystemClock):
            timer = loop.call_later(seconds, _settle, waiter)
        else:
            sleeper = asyncio.ensure_future(self._clock.sleep(seconds))
            sleeper.add_done_callback(lambda _: _settle(waiter))
        self._waiter = waiter
        try:
            if sleeper is not None:
                # That task starts first (a virtual clock registers its deadline as it does), so
                # that the owner is parked only once it is really sleeping (see settled()).
                await asyncio.sleep(0)
            await self._parked_while(waiter)
        finally:
            self._waiter = None
            if timer is not None:
                timer.cancel()
            if sleeper is not None:
                sleeper.cancel()

    async def _parked_while(self, waiting: Awaitable[T]) -> T:
        self._parked.set()
        try:
            return await waiting
        finally:
            self._parked.clear()

    # -- the log -----------------------------------------------------------------------------

    def _append(self, change: ScheduleChange) -> None:
        # Folded first, then appended: the fold applies a change whole or not at all, so one it
        # refuses (a decision it does not accept, which would be a bug) is never written, and
        # the log always folds. After a failed append the handle is poisoned: the state held
        # here is never read again.
        position = len(self._session.entries)
        try:
            self._state.apply(change, position=position)
        except ScheduleError as error:
            raise RuntimeError(
                f"the fold refuses a change this Schedule decided: {error.message}"
            ) from error
        try:
            self._session.append(CHANGE_EVENT_TYPE, change)
        except PersistenceUncertain as error:
            raise error.as_schedule_error() from None

    async def _barrier(self) -> None:
        try:
            await self._session.barrier()
        except PersistenceUncertain as error:
            raise error.as_schedule_error() from None


def with_runs(view: ScheduleView, history: OccurrenceLog) -> ScheduleView:
    """``view`` with its reminder's ``runs`` and ``lastRun`` from ``history``."""
    found = history.last(view.id)
    if found is None:
        return view
    run, count = found
    return msgspec.structs.replace(view, runs=count, last_run=last_run(run))


def plain_with_runs(view: ReadOnlyDict, history: OccurrenceLog) -> ReadOnlyDict:
    """:func:`with_runs` for a JSON-ready view (a new dict when it has runs)."""
    schedule_id = view["id"]
    found = history.last(ScheduleId(schedule_id)) if isinstance(schedule_id, str) else None
    if found is None:
        return view
    run, count = found
    return ReadOnlyDict({**view, "runs": count, "lastRun": msgspec.to_builtins(last_run(run))})


def with_provenance(view: ScheduleView, made: Provenance) -> ScheduleView:
    """``view`` with ``setDuring`` when a reminder turn created its reminder or last changed
    it (``made``: that provenance)."""
    if made.made_by != "reminder":
        return view
    return msgspec.structs.replace(view, set_during=made.text())


def plain_with_provenance(view: ReadOnlyDict, provenance: ProvenanceLog) -> ReadOnlyDict:
    """:func:`with_provenance` for a JSON-ready view (a new dict when a reminder turn created
    its reminder)."""
    schedule_id = view["id"]
    if not isinstance(schedule_id, str):
        return view
    made = provenance.of(ScheduleId(schedule_id))
    if made.made_by != "reminder":
        return view
    return ReadOnlyDict({**view, "setDuring": made.text()})


def last_run(run: OccurrenceRun) -> LastRun:
    """The ``lastRun`` of a view, from the reminder's latest run."""
    outcome: RunOutcome
    match run.outcome:
        case "delivered" | "failed" | "pending" | "missed":
            outcome = run.outcome
        case "skipped" | "deleted":  # never a reminder's latest run
            outcome = "delivered"
        case _:
            assert_never(run.outcome)
    at = run.decided_at if run.decided_at is not None else run.due_at
    return LastRun(occurrence=run.key, outcome=outcome, at=format_instant(at))


def _window_allows_at(recent: list[Instant], now: Instant, limit: int, seconds: int) -> Instant:
    """The earliest instant from ``now`` on at which fewer than ``limit`` of the turns queued at
    ``recent`` fall within the last ``seconds``; forgets the turns that left that window."""
    window = seconds * MS_PER_SECOND
    # Forget turns that left the window, and any "in the future" after a clock step back.
    while recent and (recent[0] <= now - window or recent[-1] > now):
        if recent[0] <= now - window:
            del recent[0]  # a short list: at most the quota's limit
        else:
            recent.pop()
    if len(recent) < limit:
        return now
    return Instant(recent[-limit] + window)


def _full_since(
    turns: list[Instant], due: Instant, decided_at: Instant, limit: int, seconds: int
) -> Instant | None:
    """The first instant from ``due`` on, before ``decided_at``, at which ``limit`` of the turns
    queued at ``turns`` (oldest first) fall within the last ``seconds``: when a quota of
    ``limit`` turns in any ``seconds`` began to hold back a delivery due at ``due``; ``None``
    when it never did."""
    window = seconds * MS_PER_SECOND
    for at in (due, *(turn for turn in turns if due < turn < decided_at)):
        within = bisect.bisect_right(turns, at) - bisect.bisect_right(turns, at - window)
        if within >= limit:
            return at
    return None


def _checked_quota(name: QuotaName, value: object, program_max_active: int) -> object:
    """``value`` for the quota ``name`` if it is one a person may set; raises ``ValueError``
    with a sentence a person can act on."""
    if value is msgspec.UNSET:
        return value
    if name == "quiet_hours":
        if value is None:
            return value
        if not isinstance(value, QuietHours):
            raise TypeError("quiet hours are a QuietHours, None or msgspec.UNSET")
        quiet_window(value)  # raises ValueError naming the problem
        return value
    if name == "turns_per_day":
        if value is None:
            return value
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_TURNS:
            raise ValueError(
                f"reminder turns per day must be a whole number from 1 to {MAX_TURNS:,}, "
                "off or default."
            )
        return value
    if name != "max_active":
        raise ValueError(
            f"{name!r} is not a quota; the quotas are turns_per_day, quiet_hours and max_active."
        )
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or not 1 <= value <= program_max_active
    ):
        raise ValueError(
            f"active reminders must be a whole number from 1 to {program_max_active}, the most "
            "this program allows, or default."
        )
    return value


def _as_is(view: ScheduleView) -> ScheduleView:
    return view


def _plain(view: ScheduleView) -> dict[str, object]:
    return msgspec.to_builtins(view)  # type: ignore[no-any-return]


def _returned(method: Callable[[*Arguments], object], *arguments: *Arguments) -> object:
    """What ``method`` returned: the port declares ``None``, and an ``async def`` in its place
    returns a coroutine that must not be dropped unawaited."""
    return method(*arguments)

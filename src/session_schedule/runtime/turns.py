"""The turn queue: a host's conversation turns, one at a time, with durable follow-ups.

:class:`TurnQueue` implements the :class:`~session_schedule.runtime.agent.Agent` port over a
single host function, ``async def run_turn(text: str) -> None``, that runs one turn of the
conversation (show the text to the model, let it call the tools, record its answer). Reminders
Schedule delivers and prompts the host submits go through the same queue, so turns never overlap.

Theory of operation
-------------------
Rule 1 — **accepted means appended.** ``followup()`` and ``submit()`` append a ``turn/queued``
entry to the Session's log before they return (or raise and queue nothing). Schedule appends its
dispatch after ``followup()`` returns, on the same handle, and then awaits the barrier: once the
dispatch is durable, so is the follow-up it stands for. ``submit_durably()`` queues the host's
prompt only once the barrier says it is durable, so a prompt that may be lost never runs.

Rule 2 — **one turn at a time, in order.** A worker task takes the queued turns in the order they
were accepted and awaits ``run_turn`` for each; no turn starts while another runs or while a
maintenance phase is held.

Rule 3 — **finished means recorded.** When ``run_turn`` returns, a ``turn/finished`` entry naming
the turn (``completed``, with its number of attempts) is appended and the barrier awaited before
the next turn starts. A turn cancelled by :meth:`TurnQueue.close` has not finished.

Rule 3a — **a failed turn is retried, then recorded as failed.** When ``run_turn`` raises, the
failure is classified (:mod:`session_schedule.runtime.retry`): a transient one (connection error,
timeout, HTTP 408/409/429/5xx) runs the same turn again after an exponential back-off with
jitter — honouring ``Retry-After`` — within the ``TurnRetry`` bounds on attempts and elapsed age;
a permanent one (HTTP 400/401/403/404, a bug) ends it at once. A turn that finally fails is
recorded ``failed`` with its bounded cause, never ``completed``. Every failed attempt is reported
to the subscribed listeners (:meth:`TurnQueue.subscribe`) and logged (at info level, or as an
error with its traceback when nobody anticipated the failure: a bug in ``run_turn``). The waits
are elapsed time (``Clock.sleep``; the age on ``Clock.monotonic``). Nothing else runs during a
retry wait: the turns behind it keep their order. A close (or a crash) during the wait leaves the
turn pending, and the next queue runs it again.

Rule 4 — **a restart resumes.** Constructing a queue reads the Session's log (from the fork point
``seedLength`` on: a fork inherits no pending turn, as it inherits no active reminder) and queues
every turn that has no ``turn/finished`` entry, in order, marked ``restored``. A turn that was
running when the process died runs again: delivery is at-least-once, and a repeated reminder
carries the same occurrence keys.

Rule 5 — **a storage failure stops the queue.** If an append or a barrier fails (or ``run_turn``
lets ``PersistenceUncertain`` escape), the queue stops: nothing more runs, ``followup()`` and
``submit()`` raise, :attr:`TurnQueue.failure` says why and :meth:`TurnQueue.wait_stopped`
returns. The host reopens the Session from storage and builds a new queue, which resumes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections import deque
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Generic, Self, TypeAlias, TypeVar, final

import msgspec

from session_schedule.core.framing import occurrence_keys
from session_schedule.runtime.agent import AgentClosed, FollowUp
from session_schedule.runtime.clock import Clock, SystemClock
from session_schedule.runtime.retry import Diagnosis, TurnRetry, diagnose, next_wait
from session_schedule.session.errors import PersistenceUncertain, SessionCorrupt
from session_schedule.session.port import LogEntry, SessionHandle
from session_schedule.session.turns import (
    TURN_FINISHED_TYPE,
    TURN_QUEUED_TYPE,
    TurnFailure,
    TurnFinished,
    TurnOrigin,
    TurnQueued,
    turn_failure,
    turn_finished,
    turn_queued,
)

logger = logging.getLogger(__name__)

T = TypeVar("T")
RunTurn: TypeAlias = Callable[[str], Awaitable[None]]
"""The host's turn: ``async def run_turn(text: str) -> None``."""


@final
class Turn(msgspec.Struct, frozen=True, kw_only=True):
    """One queued conversation turn, as the host sees it while it runs (``TurnQueue.current``)."""

    position: int
    """The position of its ``turn/queued`` entry in the Session's log: its identity."""
    origin: TurnOrigin
    """``schedule``: a reminder delivered by Schedule; ``host``: a prompt the host submitted."""
    text: str
    occurrences: tuple[str, ...] = ()
    """A reminder's occurrence keys (``id@scheduledAt``), in frame order; empty for a host
    prompt.

    They are the turn's **idempotency key**. Delivery is at-least-once: a turn cut off by a
    crash runs again after the restart (``restored``), and a reminder handed over just before a
    crash is delivered again — each time with the same keys, because a key names the occurrence
    (the reminder and the instant it was due), not the attempt. A side effect a reminder turn
    causes outside the Session (a message sent, a ticket filed) can therefore be deduplicated on
    them: record each key with the effect, and skip an effect whose key is already recorded.
    The framework adapters pass them to every run (see
    :func:`~session_schedule.integrations.common.turn_metadata`)."""
    zone: str | None = None
    """The IANA zone reported with a host prompt, if any. It is not stored: a prompt restored
    after a restart has none."""
    restored: bool = False
    """Queued before this queue was built (read back from the log after a restart): it may have
    run in part already."""
    attempt: int = 1
    """Which attempt of this turn runs now (above 1: an earlier attempt in this queue failed
    with a transient error, and may have recorded part of the turn already)."""

    @property
    def reminder(self) -> bool:
        """Whether this turn is a reminder Schedule delivered (not text someone typed)."""
        return self.origin == "schedule"


@final
class TurnAttemptFailed(msgspec.Struct, frozen=True, kw_only=True):
    """One attempt of a turn failed: reported to :meth:`TurnQueue.subscribe` listeners."""

    turn: Turn
    """The turn, with :attr:`Turn.attempt` the attempt that failed."""
    diagnosis: Diagnosis
    """What failed, and whether it was transient."""
    retry_in: float | None
    """Seconds until the next attempt; ``None`` when the turn is now recorded ``failed``."""
    max_attempts: int
    """The most attempts the retry policy allows."""

    @property
    def final(self) -> bool:
        """Whether the turn failed for good (it is recorded ``failed``)."""
        return self.retry_in is None


AttemptListener: TypeAlias = Callable[[TurnAttemptFailed], None]


@final
class _Action(Generic[T]):
    """A host's own exclusive step (not a model turn): run in queue order, never stored."""

    def __init__(self, run: Callable[[], Awaitable[T]], future: asyncio.Future[T]) -> None:
        self.run = run
        self.future = future


@final
class TurnQueue:
    """The Agent port over ``run_turn``, with every accepted turn durable in the Session's log.

    Build it before the things that need it and give it ``run_turn`` last, so construction is a
    straight line: ``turns = TurnQueue(session)``, ``schedule = LiveSchedule(session, turns)``,
    ``tools = ScheduleTools(schedule)``, then ``turns.bind(run_turn)`` (``run_turn`` uses the
    tools). Start the Schedule before the queue (a restored turn may call the tools) and close the
    queue first; ``async with schedule, turns:`` does both.

    Construction reads the log (Rule 4) and raises ``PersistenceUncertain`` for a poisoned handle
    and ``SessionCorrupt`` for a ``turn/finished`` entry that names no pending turn.
    """

    def __init__(
        self,
        session: SessionHandle,
        run_turn: RunTurn | None = None,
        *,
        clock: Clock | None = None,
        retry: TurnRetry | None = None,
        random_fraction: Callable[[], float] = random.random,
    ) -> None:
        self._session = session
        self._run_turn = run_turn
        self._clock = clock or SystemClock()
        self._retry = retry or TurnRetry()
        self._random = random_fraction
        self._listeners: dict[object, AttemptListener] = {}
        self._pending: deque[Turn | _Action[object]] = deque(_restore(session))
        self._current: Turn | None = None
        self._taken: list[Turn] = []
        self._running = False
        self._maintenance = False
        self._idle = asyncio.Event()
        self._ready = asyncio.Event()
        self._stopped = asyncio.Event()
        self._worker: asyncio.Task[None] | None = None
        self._closed = False
        self._failure: BaseException | None = None
        self._refresh()

    @property
    def retry(self) -> TurnRetry:
        """How a failed turn is retried (Rule 3a)."""
        return self._retry

    @property
    def clock(self) -> Clock:
        """The clock the queue reads (the time the adapters tell the model comes from it)."""
        return self._clock

    @property
    def session(self) -> SessionHandle:
        """The Session whose turns the queue runs (a durable adapter keeps its history there)."""
        return self._session

    def subscribe(self, listener: AttemptListener) -> Callable[[], None]:
        """Call ``listener`` with every failed attempt of a turn (Rule 3a); returns an idempotent
        unsubscribe. A listener that raises is logged and skipped."""
        token = object()
        self._listeners[token] = listener

        def unsubscribe() -> None:
            self._listeners.pop(token, None)

        return unsubscribe

    def bind(self, run_turn: RunTurn) -> None:
        """Give the queue the host's turn function (before :meth:`start`)."""
        if self._worker is not None:
            raise RuntimeError("bind run_turn before the turn queue starts")
        self._run_turn = run_turn

    # -- life cycle --------------------------------------------------------------------------

    async def start(self) -> None:
        """Start running turns, the restored ones first. Raises ``RuntimeError`` without a
        ``run_turn`` or when started already."""
        if self._run_turn is None:
            raise RuntimeError("the turn queue has no run_turn: pass it or call bind() first")
        if self._worker is not None or self._closed:
            raise RuntimeError("this TurnQueue was started already")
        self._worker = asyncio.create_task(self._work(), name=f"turns {self._session.id}")

    async def close(self) -> None:
        """Stop: a turn in progress is cancelled (it has not finished, so a restart runs it
        again); waiting host steps are cancelled. Idempotent. The Session stays open."""
        self._closed = True
        worker, self._worker = self._worker, None
        if worker is not None and not worker.done():
            worker.cancel()
            await asyncio.gather(worker, return_exceptions=True)
        for item in self._pending:
            if isinstance(item, _Action):
                item.future.cancel()
        self._stopped.set()

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

    @property
    def failure(self) -> BaseException | None:
        """What stopped the queue, if a storage failure did (it is also logged)."""
        return self._failure

    async def wait_stopped(self) -> None:
        """Return once the queue has stopped: closed, or stopped by a storage failure."""
        await self._stopped.wait()

    # -- the host's side ---------------------------------------------------------------------

    @property
    def current(self) -> Turn | None:
        """The turn ``run_turn`` is running now (``None`` between turns and during host steps)."""
        return self._current

    @property
    def pending(self) -> tuple[Turn, ...]:
        """The turns waiting to run, in order."""
        return tuple(item for item in self._pending if isinstance(item, Turn))

    def submit(self, text: str, *, zone: str | None = None) -> Turn:
        """Queue the host's own prompt ``text`` as a turn; ``zone`` is the IANA zone reported
        with it, if any.

        The turn is appended to the log at once; it is durable after the next barrier
        (:meth:`submit_durably` awaits it). Raises ``PersistenceUncertain`` — and queues
        nothing — when the Session cannot take it, :class:`AgentClosed` (a ``RuntimeError``) once
        the queue is closed.
        """
        return self._accept(text, origin="host", occurrences=(), zone=zone)

    async def submit_durably(self, text: str, *, zone: str | None = None) -> Turn:
        """:meth:`submit`, but the turn is queued only once the barrier says it is durable: on
        return the prompt survives a crash.

        Raises ``PersistenceUncertain`` when it may not have been stored (tell the person it
        was not sent); it does not run in this queue then.
        """
        self._check_open()
        payload = turn_queued(text, at=self._clock.now(), origin="host")
        # Queued only once durable: a prompt that may not be stored never runs here (if it was
        # stored after all, the queue built on the reopened Session runs it).
        try:
            position = self._session.append(TURN_QUEUED_TYPE, payload)
            await self._session.barrier()
        except PersistenceUncertain as error:
            self._stop(error)
            raise
        self._check_open()
        turn = Turn(position=position, origin="host", text=text, zone=zone)
        self._pending.append(turn)
        self._refresh()
        return turn

    def call(self, step: Callable[[], Awaitable[T]]) -> asyncio.Future[T]:
        """Run the host's own ``step`` in queue order, between turns (never overlapping one);
        a future of its result. Not stored: a crash forgets a step that has not run."""
        self._check_open()
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        action: _Action[T] = _Action(step, future)
        self._pending.append(action)  # type: ignore[arg-type]
        self._refresh()
        return future

    def take_prompts(self) -> list[Turn]:
        """While ``run_turn`` runs a host turn: take the host prompts queued directly behind it
        (up to the first reminder or host step), to answer them in the same turn. They count
        as finished with it."""
        current = self._current
        if current is None or current.reminder:
            return []
        taken: list[Turn] = []
        while self._pending:
            following = self._pending[0]
            if not isinstance(following, Turn) or following.reminder:
                break
            taken.append(following)
            self._pending.popleft()
        self._taken.extend(taken)
        return taken

    # -- the Agent port ----------------------------------------------------------------------

    async def wait_idle(self) -> None:
        """Return once no turn runs, none is queued and no maintenance phase is held."""
        await self._idle.wait()

    def begin_maintenance(self) -> bool:
        if not self._idle.is_set():
            return False
        self._maintenance = True
        self._refresh()
        return True

    def end_maintenance(self) -> None:
        self._maintenance = False
        self._refresh()

    def followup_keyed(self, followup: FollowUp) -> None:
        """Queue Schedule's follow-up as a turn with the occurrence keys it names, durably
        ordered before the dispatch (Rule 1). Raises when the queue is closed
        (:class:`AgentClosed`, which Schedule takes as a quiet refusal) or stopped, or the
        Session cannot take the entry — then nothing is queued."""
        if not followup.occurrences:
            raise ValueError("a follow-up must name the occurrences it delivers")
        self._accept(followup.text, origin="schedule", occurrences=followup.occurrences, zone=None)

    def followup(self, message: str) -> None:
        """Queue Schedule's reminder frame ``message`` as a turn, as :meth:`followup_keyed` does,
        its occurrence keys read back from the frame — for an agent of the host's own that wraps
        this queue and forwards only the text (Schedule itself calls :meth:`followup_keyed`)."""
        keys = occurrence_keys(message)
        if not keys:
            raise ValueError("a follow-up must be a reminder frame that names its occurrences")
        self.followup_keyed(FollowUp(text=message, occurrences=keys))

    # -- the loop ----------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._failure is not None:
            if isinstance(self._failure, PersistenceUncertain):
                raise self._failure
            reason = str(self._failure) or type(self._failure).__name__
            raise RuntimeError(f"the turn queue stopped: {reason}")
        if self._closed:
            raise AgentClosed("the turn queue is closed")

    def _accept(
        self, text: str, *, origin: TurnOrigin, occurrences: tuple[str, ...], zone: str | None
    ) -> Turn:
        self._check_open()
        payload = turn_queued(text, at=self._clock.now(), origin=origin, occurrences=occurrences)
        try:
            position = self._session.append(TURN_QUEUED_TYPE, payload)
        except PersistenceUncertain as error:
            self._stop(error)
            raise
        turn = Turn(position=position, origin=origin, text=text, occurrences=occurrences, zone=zone)
        self._pending.append(turn)
        self._refresh()
        return turn

    def _stop(self, error: PersistenceUncertain) -> None:
        """Stop for good: the Session can no longer confirm its writes (Rule 5)."""
        if self._failure is None:
            self._failure = error
            logger.error("turn queue of session %s stopped: %s", self._session.id, error)
        worker = self._worker
        if worker is not None and not worker.done() and worker is not asyncio.current_task():
            worker.cancel()
        self._stopped.set()

    def _refresh(self) -> None:
        if self._running or self._pending or self._maintenance:
            self._idle.clear()
        else:
            self._idle.set()
        if self._pending and not self._running and not self._maintenance:
            self._ready.set()
        else:
            self._ready.clear()

    async def _work(self) -> None:
        try:
            while True:
                await self._ready.wait()
                item = self._pending.popleft()
                self._running = True
                self._refresh()
                try:
                    if isinstance(item, Turn):
                        await self._run(item)
                    else:
                        await self._act(item)
                finally:
                    self._running = False
                    self._current = None
                    self._refresh()
        except PersistenceUncertain as error:
            self._stop(error)
        except asyncio.CancelledError as error:
            # Whatever stops the worker stops the queue for good, and says so: a queue that
            # looked idle while nothing runs its turns would have reminders dispatched into it.
            if self._closed:
                raise
            if _cancelling():
                if self._failure is None:
                    self._failure = RuntimeError("its worker task was cancelled")
                raise
            self._failure = error  # raised inside a host step, not asked for: ends the worker
            logger.exception("turn queue of session %s failed", self._session.id)
        except Exception as error:
            self._failure = error
            logger.exception("turn queue of session %s failed", self._session.id)
        finally:
            self._stopped.set()

    async def _run(self, turn: Turn) -> None:
        run_turn = self._run_turn
        if run_turn is None:  # start() refuses to start without one
            raise RuntimeError("the turn queue has no run_turn")
        self._taken = [turn]
        started = self._clock.monotonic()
        attempt = 1
        failure: TurnFailure | None = None
        while True:
            current = turn if attempt == 1 else msgspec.structs.replace(turn, attempt=attempt)
            self._current = current
            try:
                await run_turn(current.text)
            except PersistenceUncertain:
                raise
            except (Exception, asyncio.CancelledError) as error:
                if isinstance(error, asyncio.CancelledError) and _cancelling():
                    raise  # close() (or whoever runs the queue) is stopping it: not finished
                # A ``CancelledError`` nobody asked for escaped the turn (a sub-task or a scope
                # of its own was cancelled): a failure of this attempt, never the end of the
                # queue (Rule 3a).
                diagnosis = diagnose(error)
                wait = next_wait(
                    self._retry,
                    diagnosis,
                    attempts=attempt,
                    age=self._clock.monotonic() - started,
                    random=self._random,
                )
                self._report(current, diagnosis, wait, error)
                if wait is not None:
                    self._current = None
                    await self._clock.sleep(wait)
                    attempt += 1
                    continue
                failure = turn_failure(
                    diagnosis.error, message=diagnosis.message, status=diagnosis.status
                )
            break
        now = self._clock.now()
        for taken in self._taken:
            self._session.append(
                TURN_FINISHED_TYPE,
                turn_finished(
                    taken.position,
                    at=now,
                    outcome="completed" if failure is None else "failed",
                    attempts=attempt,
                    failure=failure,
                ),
            )
        await self._session.barrier()

    def _report(
        self, turn: Turn, diagnosis: Diagnosis, wait: float | None, error: BaseException
    ) -> None:
        status = "" if diagnosis.status is None else f" (HTTP {diagnosis.status})"
        what = (
            f"turn at entry {turn.position} of session {self._session.id} failed (attempt "
            f"{turn.attempt} of {self._retry.max_attempts}, {diagnosis.kind}: "
            f"{diagnosis.error}{status}: {diagnosis.message})"
        )
        # An anticipated failure is the listeners' to show (the operator events log it at
        # warning and error level); one nobody anticipated (a bug in run_turn) is an error here,
        # with its traceback.
        if wait is not None:
            logger.info("%s; trying again in %.1f s", what, wait)
        elif diagnosis.expected:
            logger.info("%s; recorded as failed", what)
        else:
            logger.error("%s; recorded as failed", what, exc_info=error)
        event = TurnAttemptFailed(
            turn=turn, diagnosis=diagnosis, retry_in=wait, max_attempts=self._retry.max_attempts
        )
        for listener in list(self._listeners.values()):
            try:
                listener(event)
            except Exception:
                logger.exception("a turn attempt listener raised; the queue goes on")

    async def _act(self, action: _Action[object]) -> None:
        if action.future.cancelled():
            return
        try:
            result = await action.run()
        except PersistenceUncertain as error:
            action.future.set_exception(error)
            raise
        except Exception as error:
            action.future.set_exception(error)
            return
        except asyncio.CancelledError:
            if _cancelling():
                raise
            action.future.cancel()  # cancelled inside the step, not by the queue's close
            return
        with contextlib.suppress(asyncio.InvalidStateError):
            action.future.set_result(result)


def _cancelling() -> bool:
    """Whether the running task has been asked to stop (``Task.cancel``): a ``CancelledError``
    raised inside it then stops it; any other is an error like another."""
    task = asyncio.current_task()
    return task is None or task.cancelling() > 0


def _restore(session: SessionHandle) -> list[Turn | _Action[object]]:
    """The turns queued in ``session`` (from its fork point on) that have not finished.

    A session opened from a checkpoint says which turns were pending at its position
    (``session.resume``): only the entries from there on are read.
    """
    pending: dict[int, Turn] = {}
    entries = session.entries
    resume = session.resume
    start = session.header.seed_length
    if resume is not None:
        for entry in resume.pending:
            _queue(pending, entry)
        start = max(start, resume.position)
    for entry in entries[start:]:
        payload = entry.payload
        if entry.type == TURN_QUEUED_TYPE:
            _queue(pending, entry)
        elif (
            entry.type == TURN_FINISHED_TYPE
            and isinstance(payload, TurnFinished)
            and pending.pop(payload.turn, None) is None
        ):
            raise SessionCorrupt(
                session.id,
                f"session {session.id} is corrupt at entry {entry.position}: it finishes "
                f"entry {payload.turn}, which is not a pending turn of this session; the "
                "storage was left untouched for inspection",
            )
    return list(pending.values())


def _queue(pending: dict[int, Turn], entry: LogEntry) -> None:
    payload = entry.payload
    if isinstance(payload, TurnQueued):
        pending[entry.position] = Turn(
            position=entry.position,
            origin=payload.origin,
            text=payload.text,
            occurrences=payload.occurrences,
            restored=True,
        )

"""The port: what every Session store and handle promises, whatever the storage behind it.

A Session is a header plus an ordered sequence of typed entries (SPEC §4). Positions are 0-based
over the entries; the header is not an entry. A handle is the single live owner of a session:

- ``append`` is immediate — the entry takes its position at once and ``entries`` shows it;
- ``barrier()`` resolves once everything appended so far is durable (fsync'd or committed);
- a failed write or barrier poisons the handle: every later append, barrier and read raises
  :class:`~session_schedule.session.errors.PersistenceUncertain` until the session is reopened
  from storage (a failed fsync is never retried and called durable);
- a second live owner of the same session — from this process or another — is refused with
  :class:`~session_schedule.session.errors.SessionBusy`.

After a crash, reopening shows every entry a barrier acknowledged, in order, followed by at most
some of the entries appended after the last acknowledged barrier (a prefix of them, never a gap).
A fork copies a prefix of its parent's durable entries and records its length as ``seedLength``;
the Schedule fold of a fork reads only the entries from ``seedLength`` on.

The same behaviour is pinned down by the contract suite in
``session_schedule.testing.session_contract``, which every backend runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from types import TracebackType
from typing import (
    TYPE_CHECKING,
    Annotated,
    Final,
    Literal,
    NamedTuple,
    Protocol,
    Self,
    TypeAlias,
    final,
)

import msgspec

from session_schedule.core.changes import (
    CHANGE_CLASSES,
    CHANGE_EVENT_TYPE,
    ScheduleChange,
)
from session_schedule.core.fold import ScheduleFold
from session_schedule.core.ids import ScheduleId
from session_schedule.core.instants import Instant, format_instant
from session_schedule.core.records import InstantField, RecordStatus, ScheduleRecord
from session_schedule.session.errors import SessionError
from session_schedule.session.ids import SESSION_ID_PATTERN, SessionId

if TYPE_CHECKING:
    from session_schedule.session.history import OccurrenceRun
    from session_schedule.session.provenance import Provenance
    from session_schedule.session.quotas import QuotasEntry

FORMAT_VERSION: Final = 1
DEFAULT_DUE_LIMIT: Final = 1000
"""How many sessions ``due_sessions`` lists at most, unless told otherwise."""

SessionIdField: TypeAlias = Annotated[
    SessionId, msgspec.Meta(extra_json_schema={"pattern": SESSION_ID_PATTERN})
]


@final
class SessionHeader(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, rename="camel"
):
    """What a session says about itself; written once, when the session is created."""

    format: Literal[1, 2]
    """The storage format version (JSONL files: 1 or 2; the other stores: 1)."""
    id: SessionIdField
    created_at: InstantField
    """The ``now`` given to ``create`` or ``fork``, canonical UTC."""
    parent_id: SessionIdField | None
    """The session this one was forked from, or ``None``."""
    seed_length: Annotated[int, msgspec.Meta(ge=0)]
    """How many leading entries were copied from the parent (0 for a fresh session)."""


@final
class LogEntry(msgspec.Struct, frozen=True, gc=False):
    """One entry of a session: its position, its catalog type and its decoded payload."""

    position: int
    type: str
    payload: object
    """The value the catalog decoder of ``type`` produced (a frozen struct)."""


def schedule_changes(entries: Iterable[LogEntry]) -> Iterator[tuple[int, ScheduleChange]]:
    """The position and change of each ``schedule/change`` entry among ``entries``, in order:
    what the fold takes.

    Raises ``TypeError`` for such an entry whose payload is not a change (a decoder registered
    for the type returned something else: a programming error, not damage).
    """
    for entry in entries:
        if entry.type == CHANGE_EVENT_TYPE:
            payload = entry.payload
            if not isinstance(payload, CHANGE_CLASSES):
                raise TypeError(
                    f"entry {entry.position} holds a {type(payload).__name__}, not a change"
                )
            yield entry.position, payload


@final
class ResumePoint(NamedTuple):
    """The schedule fold and the pending turns of a session's first ``position`` entries, as a
    checkpoint stored them (see :mod:`session_schedule.session.checkpoint`): a live Schedule
    folds only the entries from ``position`` on."""

    position: int
    records: tuple[ScheduleRecord, ...]
    """The active records, in creation order."""
    highest_id: int
    """The largest schedule id number the first ``position`` entries use."""
    pending: tuple[LogEntry, ...] = ()
    """The ``turn/queued`` entries among the first ``position`` (from the fork point on) that
    no ``turn/finished`` entry among them answers, in log order: a turn queue resumes from them
    and folds only the entries from ``position`` on."""
    statuses: tuple[tuple[ScheduleId, RecordStatus], ...] = ()
    """The SPEC §11 status of each active record that has one (paused, snoozed, runs made,
    resumed late), in creation order."""
    runs: tuple[tuple[ScheduleId, OccurrenceRun, int], ...] | None = None
    """Each active reminder's latest run and run count (what its view's ``runs`` and
    ``lastRun`` say), in creation order; ``None`` when the checkpoint did not record them (an
    older format): the history is then read from the log's first entry."""
    provenance: tuple[tuple[ScheduleId, Provenance], ...] | None = None
    """Which turn made or last changed each active reminder that a turn did, and its chain
    depth, in creation order; ``None`` when the checkpoint did not record it (an older format):
    provenance is then read from the log's first entry."""
    person_turns: tuple[int, ...] = ()
    """The positions of the pending turns during which a person's message was recorded."""
    quotas: QuotasEntry | None = None
    """The latest ``schedule/quotas`` entry among the first ``position`` entries, if any."""

    def fold(self, session: str) -> ScheduleFold:
        """The schedule fold of the first ``position`` entries (a new one on each call)."""
        return ScheduleFold.resumed(
            self.records, highest_id=self.highest_id, session=session, statuses=self.statuses
        )


@final
class SessionSnapshot(NamedTuple):
    """A read-only copy of a session's durable content (``header, entries = snapshot``)."""

    header: SessionHeader
    entries: tuple[LogEntry, ...]


@final
class DueSession(NamedTuple):
    """A session with an active reminder or an unfinished turn due before some instant (see
    ``due_sessions``)."""

    session_id: SessionId
    next_target: Instant
    """Its earliest active target (or, when that is at or before the time its quotas were last
    set, that time), or the queue time of its earliest unfinished turn."""


@final
class SessionListing(NamedTuple):
    """Every stored session: the readable headers, and the sessions whose header is not."""

    headers: tuple[SessionHeader, ...]
    """By creation instant, then id."""
    problems: tuple[SessionError, ...]
    """One error per session whose header could not be read, by id: ``SessionCorrupt`` for
    stored bytes that are not a header, a plain ``SessionError`` for a file that could not be
    read at all (its permissions, an I/O error)."""


class SessionHandle(Protocol):
    """The live, single owner of one session, used from one event loop."""

    @property
    def id(self) -> SessionId: ...

    @property
    def header(self) -> SessionHeader: ...

    @property
    def entries(self) -> Sequence[LogEntry]:
        """Every entry, including those appended but not yet covered by a barrier.

        A live view: it shows later appends. Raises ``PersistenceUncertain`` when the handle is
        poisoned (also on every later use of the view) and ``SessionClosed`` once closed.
        """
        ...

    @property
    def closed(self) -> bool: ...

    @property
    def resume(self) -> ResumePoint | None:
        """Where the schedule fold may start instead of entry 0: set when the session was
        opened from a checkpoint, otherwise ``None``."""
        ...

    @property
    def poisoned(self) -> bool: ...

    def append(self, type: str, payload: object) -> int:  # noqa: A002 - the wire name
        """Append one entry now and return its position.

        ``type`` must be registered in the persistence catalog and ``payload`` must encode to
        bytes that type's strict decoder accepts, otherwise ``ValueError`` (a developer error;
        the handle stays usable). Raises ``PersistenceUncertain`` when the write fails (the
        handle is then poisoned) or the handle is poisoned already, ``SessionClosed`` once
        closed.
        """
        ...

    async def barrier(self) -> None:
        """Resolve once every entry appended so far is durable.

        Concurrent barriers share one flush. Raises ``PersistenceUncertain`` when the flush fails
        (poisoning the handle) or the handle is poisoned already; ``SessionClosed`` once closed.
        """
        ...

    async def close(self) -> None:
        """Release the session (and its ownership). Idempotent; works on a poisoned handle.

        Closing is not a barrier: entries appended since the last barrier may or may not
        survive. A flush already in progress completes first.
        """
        ...

    async def __aenter__(self) -> Self: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None: ...


class SessionStore(Protocol):
    """Where sessions live. Every method runs its blocking work off the event loop."""

    async def create(self, *, now: Instant, session_id: SessionId | None = None) -> SessionHandle:
        """Create an empty session (header durable on return) and own it.

        Raises ``SessionExists`` when ``session_id`` is taken, ``ValueError`` when it is not of
        the id form.
        """
        ...

    async def open(self, session_id: str) -> SessionHandle:
        """Own an existing session, with every stored entry.

        Raises ``SessionNotFound`` (also for text that is not of the id form), ``SessionBusy``
        when it is owned elsewhere, ``SessionCorrupt`` or ``ScheduleError("corrupt_schedule_log")``
        for damaged content — which is then left untouched. A torn last line (a crash in the
        middle of an append) is the one thing cut.
        """
        ...

    async def fork(
        self,
        parent_id: str,
        *,
        at: int | None = None,
        now: Instant,
        session_id: SessionId | None = None,
    ) -> SessionHandle:
        """Create and own a session seeded with the parent's first ``at`` durable entries.

        ``at=None`` copies every durable entry. The parent may be owned elsewhere; its content is
        not modified (the file store fsyncs it first, so whatever it copies is durable). Raises
        ``ValueError`` when ``at`` is negative or beyond the parent's durable entries, and the
        errors of ``open`` for the parent.
        """
        ...

    async def read(self, session_id: str) -> SessionSnapshot:
        """What storage holds of a session, without owning or modifying it.

        That is every entry a barrier confirmed, possibly followed by some entries appended
        since (a prefix of them: the file store shows what its owner has written, the database
        and memory stores only what was committed). A torn last line is ignored, not cut.
        Raises like ``open``, except ``SessionBusy``.
        """
        ...

    async def list(self) -> tuple[SessionHeader, ...]:
        """The headers of every stored session, by creation instant, then id.

        Raises ``SessionCorrupt`` for the first session whose header cannot be read (a plain
        ``SessionError`` when its file cannot be read at all).
        """
        ...

    async def scan(self) -> SessionListing:
        """Like :meth:`list`, but a session whose header cannot be read is reported beside the
        others instead of stopping the listing."""
        ...

    async def due_sessions(
        self, before: Instant, *, limit: int = DEFAULT_DUE_LIMIT
    ) -> tuple[DueSession, ...]:
        """The sessions whose next target is before ``before``: soonest first, then by id, at
        most ``limit`` (``ValueError`` when it is below 1). The next target is the earliest
        active reminder target, or the queue time of an unfinished turn (a ``turn/queued``
        entry no ``turn/finished`` entry answers) when that is earlier: a session whose turn
        was cut off by a crash is due at once. An earliest reminder target at or before the
        ``at`` of the session's latest ``schedule/quotas`` entry is listed as that ``at``, so a
        change of quotas while reminders wait shows (:mod:`session_schedule.session.targets`).

        Answered from the store's next-target index, without reading any log: every commit
        that holds ``schedule/change``, ``turn/*`` or ``schedule/quotas`` entries records the
        session's next target (or that it has none) with it. Only committed changes count;
        ownership is not considered (a listed session may be open elsewhere). A session whose
        log the fold rejects is indexed as having nothing active.
        """
        ...


def make_header(
    session_id: SessionId,
    *,
    now: Instant,
    parent_id: SessionId | None,
    seed_length: int,
    format_version: Literal[1, 2] = FORMAT_VERSION,
) -> SessionHeader:
    """The header of a session created at ``now`` (``ValueError`` when ``now`` is out of range)."""
    return SessionHeader(
        format=format_version,
        id=session_id,
        created_at=format_instant(now),
        parent_id=parent_id,
        seed_length=seed_length,
    )


def listing(headers: list[SessionHeader], problems: Sequence[SessionError]) -> SessionListing:
    """The listing of ``headers`` and ``problems``, each in its documented order."""
    return SessionListing(
        tuple(sorted(headers, key=lambda header: (header.created_at, header.id))),
        tuple(sorted(problems, key=lambda problem: problem.session_id)),
    )


def listed(scanned: SessionListing) -> tuple[SessionHeader, ...]:
    """``list()`` from ``scan()``: the headers, unless a session's header is unreadable."""
    if scanned.problems:
        raise scanned.problems[0]
    return scanned.headers


def seed_length(at: int | None, available: int, parent_id: str) -> int:
    """How many entries a fork at ``at`` copies; ``ValueError`` when ``at`` is out of range."""
    if at is None:
        return available
    if not 0 <= at <= available:
        raise ValueError(
            f"cannot fork session {parent_id} at entry {at}: it has {available} durable entries"
        )
    return at

"""The PostgreSQL store: many sessions in one database, owned across processes and hosts.

Tables are in :mod:`session_schedule.session.postgres_schema` (created by ``session-schedule db
init``; the store refuses a missing, older or newer schema). Payloads are stored as the exact
canonical JSON bytes the other stores write (``bytea``), and read back through the same strict
codec. psycopg 3, asynchronous, with a connection pool: an open session holds no connection of
its own, so a few connections serve many sessions.

- **Append is immediate, the barrier is a COMMIT.** ``append`` assigns the position and queues
  the row in memory; the barrier sends every queued row in one statement — one transaction, one
  commit — and barriers called together share it (group commit).
- **Ownership is a lease with a fencing token.** Each session has a ``leases`` row: an ``epoch``
  that only grows and an expiry on the database's clock (``now()``, never the host's).
  ``open`` takes the lease when it has expired (or was released), incrementing the epoch, and is
  refused with ``SessionBusy`` while another holder's lease is live. Every flush is conditional
  on the epoch: the statement first extends the lease ``WHERE session_id = … AND epoch = …`` and
  inserts the rows only through that update, so a holder whose lease was taken over (paused,
  partitioned, slow) cannot write another byte — its flush inserts nothing and the handle is
  poisoned with a message saying it lost its ownership.
- **Renewal.** One task per store renews the leases of all its open handles together, in one
  statement every ``lease_seconds / 3`` (a handle opened meanwhile is renewed early, which is
  harmless): ten thousand open sessions cost one statement per interval, no task per session,
  and little Python work per session (whether it is still live, marking it renewed). The
  statement extends each lease ``WHERE session_id = … AND epoch = …`` and answers only the
  sessions it did not extend; the ids and epochs are sent as two strings, rebuilt only when the
  set of handles changes. A renewal that finds another epoch poisons that handle; so does a
  lease that could not be renewed before it would expire (measured from the start of the last
  successful renewal, on this host's monotonic clock, which can only err early); a failed
  attempt is tried again after a quarter of the interval. ``close`` releases the lease at once.
- **Many sessions at once** (:class:`~session_schedule.session.gather.Gather`). A barrier's
  flush that finds another session's in flight waits for it, then goes with the others that
  waited in one statement, each session's rows inserted only through its own lease update (a
  holder that lost its lease inserts nothing while the others commit). Opens that arrive
  together take their leases (locked in session id order), read their checkpoints and the rows
  from each window on in one transaction; closes that arrive together write their last
  checkpoints and release their leases in one. A session held elsewhere, missing or damaged gets
  its own error, a damaged one's lease put back as it was; a batch whose statement fails is
  served again one session at a time.
- **Reads see commits only**: ``read``, ``list`` and ``fork`` see exactly what barriers made
  durable, and neither take nor need the lease. ``checked_read`` (``check``'s reading) also
  compares the session's checkpoint with the fold of every row, in the same snapshot: rows carry
  no checksum, and an open from a checkpoint does not notice a hand edit of a row before the
  last one it covers.
- **A fork copies its rows in SQL and is created with its checkpoint**
  (:mod:`session_schedule.session.forks`). It reads its parent in one snapshot: from the
  parent's checkpoint, verified as an open verifies it (bound to the log, the rows of its window
  and after it strictly decoded, so damage there refuses the fork), decoding the rows before the
  fork point only when it lies before that checkpoint; without a checkpoint that matches the
  log, the whole log is strictly decoded, once. The transaction that inserts the fork and its
  lease also copies its rows from the parent's (``INSERT … SELECT``, never re-encoded) and
  stores its checkpoint (no active reminder: the highest id its history uses), bound to its own
  header and last row: there is no fork without its checkpoint, and opening it reads the rows of
  its window only. Should the rows copied not be the ones read (a gap before the parent's
  window, which the copy's row count shows, or rows edited meanwhile) the transaction is rolled
  back and the parent read again, whole, so its damage is reported as a read reports it.
- **A next-target index.** A commit that holds ``schedule/change`` entries also records, in the
  same statement, the session's earliest active target (``NULL`` when nothing is active), from
  the handle's own fold of the log (:mod:`session_schedule.session.targets`);
  :meth:`PostgresSessionStore.due_sessions` lists the sessions due before an instant. A handle
  remembers the target its own last such commit recorded, and leaves the row alone while the
  target stays the same (a reminder created later than the earliest one, say): only the owner
  writes it, and a failed or uncertain commit poisons the handle, so what it remembers is what
  the row holds. Each update of the row is a write the commit would otherwise wait for.

A store and its handles belong to the event loop they are first used in. Close the store (or use
it as an async context manager) to close its pool; handles still open are closed first.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import datetime as dt
import logging
import os
import socket
from collections.abc import Awaitable, Callable, Collection, Sequence
from contextlib import AbstractAsyncContextManager, suppress
from types import TracebackType
from typing import Final, NamedTuple, Self, TypeAlias, final

from session_schedule.extras import require

require("postgres", purpose="the PostgreSQL store")  # before anything imports psycopg

import psycopg
import psycopg.sql
from psycopg.rows import TupleRow
from psycopg_pool import AsyncConnectionPool

from session_schedule.core.instants import Instant
from session_schedule.session import checkpoint, forks, stores
from session_schedule.session.codec import Source, check_seed_length, decode_header, encode_header
from session_schedule.session.errors import (
    PersistenceUncertain,
    SessionError,
    ownership_lost,
    session_busy,
    session_exists,
    session_not_found,
)
from session_schedule.session.gather import Gather
from session_schedule.session.handle import LazyEntries, LogHandle
from session_schedule.session.handover import REQUEST_SECONDS
from session_schedule.session.ids import (
    SessionId,
    chosen_session_id,
    new_session_id,
    require_session_id,
)
from session_schedule.session.port import (
    DEFAULT_DUE_LIMIT,
    DueSession,
    LogEntry,
    ResumePoint,
    SessionHeader,
    SessionListing,
    SessionSnapshot,
    listed,
    make_header,
    seed_length,
)
from session_schedule.session.postgres_schema import (
    DEFAULT_SCHEMA,
    quoted,
    version_problem,
    version_queries,
)
from session_schedule.session.targets import check_limit

DEFAULT_LEASE_SECONDS: Final = 15.0
DEFAULT_POOL_SIZE: Final = 10
BATCH: Final = 64
"""The most sessions opened, or closed, in one transaction of a batch."""
CHUNK: Final = 1024
"""How many entries before those held in memory are read from the database at once."""

_log = logging.getLogger(__name__)
_CONNECT_FAILED: Final = "error connecting in %r: %s"
_WORKER_STUCK: Final = "couldn't stop task %r within %s seconds"


class _CancelledOpens(logging.Filter):
    """Keeps psycopg's pool from reporting a cancelled connection attempt as an error: an
    attempt its pool's close (or the loop's end) cancelled, and the wait for a worker still
    connecting when an open of a pool was cancelled. A connection that failed is still
    reported."""

    def __init__(self) -> None:
        super().__init__()
        self.abandoned: set[str] = set()
        """The names of pools whose open was cancelled."""

    def filter(self, record: logging.LogRecord) -> bool:
        arguments = record.args
        if not isinstance(arguments, tuple) or len(arguments) != 2:
            return True
        if record.msg == _CONNECT_FAILED:
            return not isinstance(arguments[1], asyncio.CancelledError)
        if record.msg == _WORKER_STUCK:
            task = str(arguments[0])
            return not any(task.startswith(f"{name}-") for name in self.abandoned)
        return True


_CANCELLED_OPENS: Final = _CancelledOpens()
logging.getLogger("psycopg.pool").addFilter(_CANCELLED_OPENS)
_EPOCH: Final = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_MILLISECOND: Final = dt.timedelta(milliseconds=1)


@final
class _Unrecorded:
    """The next target a handle's commits recorded, before any has."""


_UNRECORDED: Final = _Unrecorded()

Row: TypeAlias = tuple[int, str, bytes]
"""An entry row as inserted: position, type, canonical JSON payload."""
Connection: TypeAlias = psycopg.AsyncConnection[TupleRow]
_Rows: TypeAlias = list[Row]
_Outcomes: TypeAlias = list["PostgresSessionHandle | Exception"]


class _LeaseLost(Exception):  # noqa: N818 - what happened, not a failure of this code
    """A flush found that another owner holds the session's lease now."""


_CHANNEL_BYTES: Final = 63
"""PostgreSQL's longest identifier, hence channel name."""


@final
class _Statements:
    """The store's SQL, with its schema's name in place."""

    def __init__(self, schema: str) -> None:
        name = quoted(schema)

        def q(template: str) -> str:
            return template.replace("{s}", name)

        self.version_exists, self.version = version_queries(schema)
        # One statement, hence one transaction: the lease update takes the row lock first, and
        # the rows are inserted only if it matched (a takeover between the two is impossible).
        self.flush = q(
            "WITH lease AS (UPDATE {s}.leases SET expires_at = now() + make_interval(secs => %s)"
            " WHERE session_id = %s AND epoch = %s RETURNING session_id)"
            " INSERT INTO {s}.entries (session_id, position, type, data)"
            " SELECT lease.session_id, r.position, r.type, r.data"
            " FROM lease, unnest(%s::integer[], %s::text[], %s::bytea[])"
            " AS r (position, type, data)"
        )
        # The same, also setting the session's next target (when the rows hold schedule changes).
        self.flush_with_target = q(
            "WITH lease AS (UPDATE {s}.leases SET expires_at = now() + make_interval(secs => %s)"
            " WHERE session_id = %s AND epoch = %s RETURNING session_id),"
            " target AS (UPDATE {s}.next_targets SET next_target = %s FROM lease"
            " WHERE next_targets.session_id = lease.session_id)"
            " INSERT INTO {s}.entries (session_id, position, type, data)"
            " SELECT lease.session_id, r.position, r.type, r.data"
            " FROM lease, unnest(%s::integer[], %s::text[], %s::bytea[])"
            " AS r (position, type, data)"
        )
        # The same two for one row, the usual flush of a tool call or a dispatch: its values
        # are sent as they are, not as arrays to unnest (about 60 µs less per commit here).
        one_row = (
            " INSERT INTO {s}.entries (session_id, position, type, data)"
            " SELECT lease.session_id, %s::integer, %s::text, %s::bytea FROM lease"
        )
        self.flush_one = self.flush[: self.flush.index(" INSERT INTO")] + q(one_row)
        self.flush_one_with_target = self.flush_with_target[
            : self.flush_with_target.index(" INSERT INTO")
        ] + q(one_row)
        # Rows locked in session id order (_locked), as every batch does. The ids and epochs
        # come as comma-separated strings (an id has no comma); only the sessions whose lease
        # was not extended come back.
        self.renew = q(
            "WITH h AS (SELECT * FROM unnest(string_to_array(%s, ','),"  # noqa: S608 - constants
            " string_to_array(%s, ',')::bigint[]) AS h (session_id, epoch)),"
            f" locked AS ({_locked('h')}),"
            " kept AS (UPDATE {s}.leases AS l SET expires_at = now() + make_interval(secs => %s)"
            " FROM locked WHERE l.session_id = locked.session_id RETURNING l.session_id)"
            " SELECT session_id FROM h EXCEPT SELECT session_id FROM kept"
        )
        self.release = q(
            "UPDATE {s}.leases SET expires_at = now() WHERE session_id = %s AND epoch = %s"
        )
        self.acquire = q(
            "UPDATE {s}.leases SET epoch = epoch + 1, holder = %s,"
            " expires_at = now() + make_interval(secs => %s)"
            " WHERE session_id = %s AND expires_at <= now() RETURNING epoch"
        )
        self.insert_session = q(
            "INSERT INTO {s}.sessions (id, header) VALUES (%s, %s) ON CONFLICT (id) DO NOTHING"
        )
        self.insert_lease = q(
            "INSERT INTO {s}.leases (session_id, epoch, holder, expires_at)"
            " VALUES (%s, 1, %s, now() + make_interval(secs => %s))"
        )
        self.insert_target = q(
            "INSERT INTO {s}.next_targets (session_id, next_target) VALUES (%s, NULL)"
        )
        self.due = q(
            "SELECT session_id, next_target FROM {s}.next_targets WHERE next_target < %s"
            " ORDER BY next_target, session_id LIMIT %s"
        )
        self.copy_entries = q(
            "INSERT INTO {s}.entries (session_id, position, type, data)"
            " SELECT %s, position, type, data FROM {s}.entries"
            " WHERE session_id = %s AND position < %s ORDER BY position"
        )
        # A session's row, and the seconds its lease has left (NULL: no lease row).
        self.exists = q(
            "SELECT GREATEST(EXTRACT(EPOCH FROM l.expires_at - now()), 0)::float8"
            " FROM {s}.sessions AS s LEFT JOIN {s}.leases AS l ON l.session_id = s.id"
            " WHERE s.id = %s"
        )
        self.header = q("SELECT header FROM {s}.sessions WHERE id = %s")
        self.entries = q(
            "SELECT position, type, data FROM {s}.entries WHERE session_id = %s ORDER BY position"
        )
        self.headers = q("SELECT id, header FROM {s}.sessions")
        self.checkpoint = q(
            "SELECT header, data FROM {s}.sessions"
            " LEFT JOIN {s}.checkpoints ON checkpoints.session_id = sessions.id"
            " WHERE sessions.id = %s"
        )
        self.row = q("SELECT type, data FROM {s}.entries WHERE session_id = %s AND position = %s")
        self.entries_from = q(
            "SELECT position, type, data FROM {s}.entries WHERE session_id = %s"
            " AND position >= %s ORDER BY position"
        )
        self.entries_range = q(
            "SELECT position, type, data FROM {s}.entries WHERE session_id = %s"
            " AND position >= %s AND position < %s ORDER BY position"
        )
        # The batch paths (many sessions opened or closed together); rows locked in session id
        # order, as every batch does.
        self.acquire_many = q(
            "WITH old AS (SELECT session_id, holder, expires_at FROM {s}.leases"
            " WHERE session_id = ANY(%s) AND expires_at <= now() ORDER BY session_id FOR UPDATE)"
            " UPDATE {s}.leases AS l SET epoch = l.epoch + 1, holder = %s,"
            " expires_at = now() + make_interval(secs => %s)"
            " FROM old WHERE l.session_id = old.session_id"
            " RETURNING l.session_id, l.epoch, old.holder, old.expires_at"
        )
        self.restore_many = q(
            "UPDATE {s}.leases AS l SET epoch = w.epoch, holder = w.holder, expires_at = w.expires"
            " FROM unnest(%s::text[], %s::bigint[], %s::text[], %s::timestamptz[])"
            " AS w (session_id, epoch, holder, expires) WHERE l.session_id = w.session_id"
        )  # only rows acquire_many has just locked, in the same transaction
        self.existing = q(
            "SELECT s.id, GREATEST(EXTRACT(EPOCH FROM l.expires_at - now()), 0)::float8"
            " FROM {s}.sessions AS s LEFT JOIN {s}.leases AS l ON l.session_id = s.id"
            " WHERE s.id = ANY(%s)"
        )
        self.checkpoints_of = q(
            "SELECT id, header, data FROM {s}.sessions"
            " LEFT JOIN {s}.checkpoints ON checkpoints.session_id = sessions.id"
            " WHERE sessions.id = ANY(%s)"
        )
        self.entries_of = q(
            "SELECT e.session_id, e.position, e.type, e.data"
            " FROM unnest(%s::text[], %s::integer[]) AS w (session_id, first)"
            " JOIN {s}.entries AS e ON e.session_id = w.session_id AND e.position >= w.first"
            " ORDER BY e.session_id, e.position"
        )
        self.rows_at = q(
            "SELECT w.session_id, s.header, e.type, e.data"
            " FROM unnest(%s::text[], %s::integer[]) AS w (session_id, position)"
            " JOIN {s}.sessions AS s ON s.id = w.session_id"
            " JOIN {s}.entries AS e ON e.session_id = w.session_id AND e.position = w.position"
        )
        self.save_checkpoints = q(
            "INSERT INTO {s}.checkpoints (session_id, data)"
            " SELECT l.session_id, w.data"
            " FROM unnest(%s::text[], %s::bigint[], %s::bytea[]) AS w (session_id, epoch, data)"
            " JOIN {s}.leases AS l ON l.session_id = w.session_id AND l.epoch = w.epoch"
            " ORDER BY l.session_id"
            " ON CONFLICT (session_id) DO UPDATE SET data = excluded.data RETURNING session_id"
        )
        # The flushes of many sessions in one statement: each session's rows inserted only
        # through its own lease update, so a holder that lost its lease inserts nothing while
        # the others commit.
        self.flush_many = q(
            "WITH w AS (SELECT * FROM unnest(%s::text[], %s::bigint[], %s::boolean[],"  # noqa: S608
            " %s::timestamptz[]) AS w (session_id, epoch, indexed, next_target)),"
            f" locked AS ({_locked('w')}),"
            " lease AS (UPDATE {s}.leases AS l"
            " SET expires_at = now() + make_interval(secs => %s)"
            " FROM locked WHERE l.session_id = locked.session_id RETURNING l.session_id),"
            " target AS (UPDATE {s}.next_targets AS t SET next_target = w.next_target"
            " FROM w JOIN lease ON lease.session_id = w.session_id"
            " WHERE t.session_id = w.session_id AND w.indexed)"
            " INSERT INTO {s}.entries (session_id, position, type, data)"
            " SELECT r.session_id, r.position, r.type, r.data"
            " FROM lease JOIN unnest(%s::text[], %s::integer[], %s::text[], %s::bytea[])"
            " AS r (session_id, position, type, data) ON r.session_id = lease.session_id"
            " RETURNING session_id"
        )
        self.release_many = q(
            "WITH h AS (SELECT * FROM unnest(%s::text[], %s::bigint[]) AS h (session_id, epoch)),"  # noqa: S608
            f" locked AS ({_locked('h')})"
            " UPDATE {s}.leases AS l SET expires_at = now()"
            " FROM locked WHERE l.session_id = locked.session_id"
        )
        # Only while the writer holds the lease: a fenced owner leaves its successor's alone.
        self.save_checkpoint = q(
            "INSERT INTO {s}.checkpoints (session_id, data)"
            " SELECT session_id, %s FROM {s}.leases WHERE session_id = %s AND epoch = %s"
            " ON CONFLICT (session_id) DO UPDATE SET data = excluded.data"
        )


def _seconds(left: object) -> float | None:
    """The seconds a lease has left as a query gives them (``None``: the session has no lease)."""
    return float(left) if isinstance(left, int | float) else None


def _locked(held: str) -> str:
    """The lease rows of the sessions of ``held`` (a ``session_id``, ``epoch`` relation) whose
    epoch is theirs still, locked in session id order.

    A statement that updates several lease rows through a join takes their locks in whatever
    order its plan visits them (for a batch of some dozens, the table's physical order), and two
    such statements at once — a renewal and a flush, or two hosts' batches — can each hold a
    row the other waits for: a deadlock, which fails both batches. Rows locked first, in one
    order, by every batch cannot. A row updated meanwhile is read again once its lock is taken,
    so one whose epoch moved on (another owner took it) is not locked and not returned."""
    return (
        "SELECT l.session_id FROM {s}.leases AS l"  # noqa: S608 - ``held`` is a name of ours
        f" JOIN {held} ON l.session_id = {held}.session_id AND l.epoch = {held}.epoch"
        " ORDER BY l.session_id FOR UPDATE OF l"
    )


def _moment(instant: Instant | None) -> dt.datetime | None:
    return None if instant is None else _EPOCH + dt.timedelta(milliseconds=instant)


def _columns(rows: Sequence[Row]) -> tuple[list[int], list[str], list[bytes]]:
    return [row[0] for row in rows], [row[1] for row in rows], [row[2] for row in rows]


@final
class PostgresSessionHandle(LogHandle):
    """The owner of one session in the database: its lease and its epoch (the store renews the
    lease)."""

    def __init__(
        self,
        *,
        header: SessionHeader,
        entries: LazyEntries,
        resume: ResumePoint | None,
        store: PostgresSessionStore,
        epoch: int,
        renewed_at: float,
    ) -> None:
        super().__init__(header=header, entries=entries, resume=resume)
        self._saving: asyncio.Task[None] | None = None
        """The checkpoint being written while the session is open, if any."""
        self._store = store
        self._epoch = epoch
        self._renewed_at = renewed_at
        """When (loop time) the last successful lease extension was sent."""
        self._lost: str | None = None
        """Why this handle lost its ownership (it is then poisoned)."""
        self._renewal_error: BaseException | None = None
        """Why the last renewal attempt failed, until one succeeds."""
        self._loop = asyncio.get_running_loop()
        self._pending: stores.PendingRows[Row] = stores.PendingRows(len(entries))
        self._recorded: Instant | _Unrecorded | None = _UNRECORDED
        """The next target this handle's last commit recorded in the index (unknown until one
        has): a commit whose target is the same leaves the row as it is."""

    @property
    def epoch(self) -> int:
        """The fencing token: this handle's lease epoch (it only grows from owner to owner)."""
        return self._epoch

    def _write(self, position: int, entry_type: str, data: bytes) -> None:
        self._pending.append((position, entry_type, data))

    def _flush(self, durable: int, target: int) -> Awaitable[None]:
        # With the flushes of other sessions in flight, it waits for them, then goes with the
        # others that waited: one statement for all.
        return self._store._commits.call((self, self._pending.flushing(durable, target)))

    async def _commit_rows(self, rows: list[Row]) -> None:
        started = self._loop.time()
        store = self._store
        lease = (store.lease_seconds, self.id, self._epoch)
        end = rows[-1][0] + 1 if rows else 0
        indexed, next_target = self._index_update(rows[0][0], end) if rows else (False, None)
        if indexed and next_target == self._recorded:
            indexed = False
        sql = store._sql
        if indexed:
            statement = sql.flush_with_target if len(rows) != 1 else sql.flush_one_with_target
            moment = (
                None if next_target is None else _EPOCH + dt.timedelta(milliseconds=next_target)
            )
            parameters: tuple[object, ...] = (*lease, moment)
        else:
            statement = sql.flush if len(rows) != 1 else sql.flush_one
            parameters = lease
        values = rows[0] if len(rows) == 1 else _columns(rows)
        async with store._connection() as connection:
            cursor = await connection.execute(statement, (*parameters, *values))
            inserted = cursor.rowcount
        self._committed(rows, started, inserted, (indexed, next_target))

    def _committed(
        self,
        rows: list[Row],
        started: float,
        inserted: int,
        index: tuple[bool, Instant | None],
    ) -> None:
        """After the statement that flushed ``rows`` (sent at loop time ``started``, with the
        next-target record ``index``: whether it was written, and what) inserted ``inserted``
        of them: the handle poisoned if its lease was taken over, else renewed, and a checkpoint
        started when one is due."""
        indexed, next_target = index
        if inserted != len(rows):
            self._lose(
                f"another owner took over its lease; this handle held epoch {self._epoch}, and "
                "nothing it appended since its last barrier was written"
            )
            raise _LeaseLost(self._lost)
        if indexed:
            self._recorded = next_target
        self._renewed(started)
        end = rows[-1][0] + 1 if rows else 0
        if end - self._checkpointed >= checkpoint.EVERY and (
            self._saving is None or self._saving.done()
        ):
            # Its own transaction, after this commit: the barrier does not wait for it.
            self._saving = self._loop.create_task(
                self._save_checkpoint(end), name=f"session-checkpoint-{self.id}"
            )

    async def _save_checkpoint(self, count: int) -> None:
        """Write a checkpoint at ``count`` (every entry before it committed by this owner)."""
        content = self._checkpoint_draft(count, window=False)
        if content is None:
            return
        try:
            saved = await self._store._save_checkpoint(self.id, self._epoch, content)
        except psycopg.Error as error:
            _log.warning("no checkpoint written for session %s: %s", self.id, error)
            return
        if saved:
            self._checkpoint_stored(count)

    async def _release(self) -> None:
        store = self._store
        # No renewal of this lease may land after its release.
        await store._forget(self)
        if self._saving is not None:
            await asyncio.gather(self._saving, return_exceptions=True)
        # With the sessions closing together: their checkpoints and releases in one transaction.
        await store._closes.call(self)

    async def _release_alone(self) -> None:
        """The last checkpoint and the release of this handle's lease, in statements of its
        own (when a batch of closes failed)."""
        store = self._store
        await self._save_checkpoint(self._commit.durable)
        try:
            async with store._connection() as connection:
                await connection.execute(store._sql.release, (self.id, self._epoch))
        except psycopg.Error as error:
            # Nothing is lost: the lease runs out by itself after ``lease_seconds``.
            _log.warning("session %s: could not release its lease: %s", self.id, error)

    def _failure(self) -> PersistenceUncertain | None:
        if self._lost is None and not self._closed and self._expired():
            self._lose(self._expiry_reason())
        if self._lost is not None:
            return ownership_lost(self.id, self._lost)
        return super()._failure()

    def _lose(self, reason: str) -> None:
        if self._lost is None and self._poison() is None:
            self._lost = reason

    def _renewed(self, started: float) -> None:
        self._renewed_at = max(self._renewed_at, started)

    def _deadline(self) -> float:
        return self._renewed_at + self._store.lease_seconds

    def _expired(self) -> bool:
        return self._loop.time() >= self._deadline()

    def _expiry_reason(self) -> str:
        error = self._renewal_error
        last = "" if error is None else f"; last attempt: {type(error).__name__}: {error}"
        return f"its lease could not be renewed before it expired{last}"

    def _renewing(self) -> bool:
        """Whether the store should keep renewing this lease."""
        return self._lost is None and self._poison() is None

    def _renewal_failed(self, failure: BaseException) -> None:
        self._renewal_error = failure
        if self._expired():
            self._lose(self._expiry_reason())

    def _renewal_lost(self) -> None:
        self._renewal_error = None
        self._lose(f"another owner took over its lease; this handle held epoch {self._epoch}")


class _Loaded(NamedTuple):
    header: SessionHeader
    entries: list[LogEntry]


@dataclasses.dataclass(frozen=True, slots=True, eq=False)
class _Renewal:
    """One batch of lease renewals and the arguments of its statement."""

    handles: Sequence[PostgresSessionHandle]
    """The handles, in the order they were found (to tell whether the next batch is the same)."""
    members: frozenset[PostgresSessionHandle]
    ordered: Sequence[PostgresSessionHandle]
    """In session id order: the order the statement locks their rows in."""
    ids: str
    """The ids of ``ordered``, comma-separated."""
    epochs: str
    """Their epochs, comma-separated."""


class _Verified(NamedTuple):
    """A session's checkpoint that matches its log, and the log's rows from its window on."""

    header: SessionHeader
    found: checkpoint.CheckpointFile
    restored: checkpoint.Checkpoint
    first: int
    """The position of the first row read (:func:`.stores.window_start`)."""
    held: list[LogEntry]
    """The entries from ``first`` to the log's end, strictly decoded."""


class _Owned(NamedTuple):
    header: SessionHeader
    entries: LazyEntries
    epoch: int
    resume: ResumePoint | None = None


@final
class PostgresSessionStore:
    """Sessions in the PostgreSQL database at ``dsn``, in the tables of ``schema``.

    ``lease_seconds`` is how long an owner's lease lasts without renewal (it is renewed every
    third of that); ``pool_size`` bounds the connections the store opens.
    """

    def __init__(
        self,
        dsn: str,
        *,
        schema: str = DEFAULT_SCHEMA,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        pool_size: int = DEFAULT_POOL_SIZE,
    ) -> None:
        if not lease_seconds > 0:
            raise ValueError(f"lease_seconds must be positive, not {lease_seconds}")
        if pool_size < 1:
            raise ValueError(f"pool_size must be at least 1, not {pool_size}")
        self._sql = _Statements(schema)
        self._schema = schema
        self._dsn = dsn
        self.lease_seconds = lease_seconds
        self._pool_size = pool_size
        self._pool: AsyncConnectionPool[Connection] | None = None
        self._opening: asyncio.Lock | None = None
        self._place = f"schema {schema} of PostgreSQL"
        self._holder = f"{socket.gethostname()} pid {os.getpid()}"
        self._handles: set[PostgresSessionHandle] = set()
        self._channel = f"session_schedule_handover.{schema}"[:_CHANNEL_BYTES]
        self._listener: Connection | None = None
        self._requests: dict[SessionId, float] = {}
        """Hand-over requests heard, with the loop time each was last renewed."""
        self._keeper: asyncio.Task[None] | None = None
        """The task that renews the leases of this store's open handles, while any is open."""
        self._renewing: tuple[frozenset[PostgresSessionHandle], asyncio.Future[None]] | None = None
        """The handles of the batch renewal under way, and a future done when it has landed."""
        self._renewal: _Renewal | None = None
        """The last batch renewed and its statement's arguments, reused while it is the same."""
        self._opens: Gather[SessionId, PostgresSessionHandle] = Gather(
            "session-schedule opens",
            self._open_many,
            self._open_one,
            limit=BATCH,
            discard=_close_quietly,
        )
        """Opens that arrive together: one transaction for their leases and reads."""
        self._closes: Gather[PostgresSessionHandle, None] = Gather(
            "session-schedule closes",
            self._close_many,
            PostgresSessionHandle._release_alone,
            limit=BATCH,
        )
        """Closes that arrive together: one transaction for their checkpoints and releases."""
        self._commits: Gather[tuple[PostgresSessionHandle, _Rows], None] = Gather(
            "session-schedule commits",
            self._commit_many,
            _commit_alone,
            limit=BATCH,
            eager=True,
        )
        """Flushes of different sessions: one that finds none in flight is sent at once; those
        that come while one is in flight go together, in one statement."""

    @property
    def schema(self) -> str:
        return self._schema

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Close every handle still open, then the pool. Idempotent."""
        for handle in list(self._handles):
            await handle.close()
        listener, self._listener = self._listener, None
        if listener is not None:
            await listener.close()
        keeper, self._keeper = self._keeper, None
        if keeper is not None:
            keeper.cancel()
            with suppress(asyncio.CancelledError):
                await keeper
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    async def create(
        self, *, now: Instant, session_id: SessionId | None = None
    ) -> PostgresSessionHandle:
        chosen = chosen_session_id(session_id)
        return await self._create(
            chosen, lambda new_id: make_header(new_id, now=now, parent_id=None, seed_length=0)
        )

    async def request_handover(self, session_id: SessionId) -> None:
        """Ask the holder of ``session_id`` to let it go (a ``NOTIFY`` on the schema's channel,
        heard by the hosts that listen to it)."""
        await self._notify(f"+{session_id}")

    async def withdraw_handover(self, session_id: SessionId) -> None:
        await self._notify(f"-{session_id}")

    async def handover_requests(self, session_ids: Collection[SessionId]) -> frozenset[SessionId]:
        """Those of ``session_ids`` asked for since this store began listening (at its first
        call) and not withdrawn, renewed less than ``REQUEST_SECONDS`` ago.

        Raises ``psycopg.Error`` when the listening connection fails (the server restarted, the
        connection was ended); it is dropped, and the next call listens on a new one (a front end
        renews its request while it waits, so one heard meanwhile is not lost)."""
        await self._start()
        now = asyncio.get_running_loop().time()
        try:
            if self._listener is None:
                self._listener = await self._listen()
            async for heard in self._listener.notifies(timeout=0):
                wanted, session_id = heard.payload[:1], SessionId(heard.payload[1:])
                if wanted == "+":
                    self._requests[session_id] = now
                else:
                    self._requests.pop(session_id, None)
        except psycopg.Error:
            listener, self._listener = self._listener, None
            if listener is not None:
                with suppress(psycopg.Error):
                    await listener.close()
            raise
        for session_id, renewed in list(self._requests.items()):
            if now - renewed >= REQUEST_SECONDS:
                del self._requests[session_id]
        return frozenset(session_id for session_id in session_ids if session_id in self._requests)

    async def _listen(self) -> Connection:
        """A connection of its own that listens to the schema's hand-over channel."""
        listener = await psycopg.AsyncConnection.connect(self._dsn, autocommit=True)
        try:
            listen = psycopg.sql.SQL("LISTEN {}").format(psycopg.sql.Identifier(self._channel))
            await listener.execute(listen)
        except BaseException:
            await listener.close()
            raise
        return listener

    async def _notify(self, payload: str) -> None:
        await self._start()
        async with self._connection() as connection:
            await connection.execute("SELECT pg_notify(%s, %s)", (self._channel, payload))

    async def open(self, session_id: str) -> PostgresSessionHandle:
        checked = require_session_id(session_id)
        await self._start()
        # With the sessions opened together: one transaction takes their leases and reads them.
        return await self._opens.call(checked)

    async def _open_one(self, checked: SessionId) -> PostgresSessionHandle:
        """Open one session in a transaction of its own (when a batch of opens failed)."""
        started = await self._start()
        async with self._connection() as connection, connection.transaction():
            cursor = await connection.execute(
                self._sql.acquire, (self._holder, self.lease_seconds, checked)
            )
            acquired = await cursor.fetchone()
            if acquired is None:
                cursor = await connection.execute(self._sql.exists, (checked,))
                held = await cursor.fetchone()
                if held is not None:
                    raise session_busy(checked, lease_left=_seconds(held[0]))
                raise session_not_found(checked, self._place)
            # Decoding fails inside the transaction: damaged content leaves the lease untouched.
            owned = await self._load_from_checkpoint(connection, checked, int(acquired[0]))
            if owned is None:
                loaded = await self._load(connection, checked)
                entries = self._entries(checked, 0, loaded.entries)
                owned = _Owned(loaded.header, entries, int(acquired[0]))
        return self._own(owned, started)

    async def fork(
        self,
        parent_id: str,
        *,
        at: int | None = None,
        now: Instant,
        session_id: SessionId | None = None,
    ) -> PostgresSessionHandle:
        chosen = chosen_session_id(session_id)
        parent = require_session_id(parent_id)
        whole = False
        while True:
            plan = await self._plan_fork(parent, at, whole=whole)

            def header_for(new_id: SessionId, count: int = plan.length) -> SessionHeader:
                return make_header(new_id, now=now, parent_id=parent, seed_length=count)

            try:
                return await self._create(
                    chosen, header_for, fork=(parent, plan) if plan.length else None
                )
            except forks.ParentChangedError:
                if whole:
                    raise self._source(parent).corrupt(
                        plan.length - 1, "the entry changed while the session was being forked"
                    ) from None
                whole = True

    async def _plan_fork(self, parent: SessionId, at: int | None, *, whole: bool) -> forks.Plan:
        """What a fork of ``parent`` at ``at`` inherits, read in one snapshot: from the
        parent's checkpoint, verified as an open verifies it (its window's and later rows
        strictly decoded: damage there refuses the fork), when it matches the log and ``whole``
        is not asked for; the rows before the fork point are then decoded only when it lies
        before the checkpoint. Otherwise the parent's whole log is strictly decoded, once."""
        await self._start()
        async with self._connection() as connection, connection.transaction():
            await connection.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            verified = None if whole else await self._verified_checkpoint(connection, parent)
            if verified is None:
                everything = (await self._load(connection, parent)).entries
                count = seed_length(at, len(everything), parent)
                digest = await self._digest(connection, parent, count)
                return forks.from_entries(parent, everything[:count], digest)
            _, found, restored, first, held = verified
            count = seed_length(at, first + len(held), parent)
            digest = await self._digest(connection, parent, count)
            planned = forks.from_checkpoint(parent, count, (found, restored, first, held), digest)
            if planned is not None:
                return planned
            cursor = await connection.execute(self._sql.entries_range, (parent, 0, count))
            rows: list[Row] = await cursor.fetchall()
            inherited = stores.decode_range(rows, 0, count, self._source(parent))
            return forks.from_entries(parent, inherited, digest)

    async def _digest(
        self, connection: Connection, session_id: SessionId, count: int
    ) -> int | None:
        """:func:`~.checkpoint.row_digest` of the session's header and entry ``count - 1`` as
        stored; ``None`` when either is missing."""
        cursor = await connection.execute(self._sql.header, (session_id,))
        header = await cursor.fetchone()
        cursor = await connection.execute(self._sql.row, (session_id, count - 1))
        last = await cursor.fetchone()
        if header is None or last is None:
            return None
        return checkpoint.row_digest(header[0], last[0], last[1])

    async def _copy_fork(
        self, connection: Connection, header: SessionHeader, parent: SessionId, plan: forks.Plan
    ) -> None:
        """Copy the parent's first rows to the fork ``header`` names, in SQL, and store its
        checkpoint, in the caller's transaction (the one that inserts the fork and its lease);
        ``ParentChangedError`` when the rows copied are not the ones ``plan`` read."""
        content = plan.content(header.id)
        cursor = await connection.execute(self._sql.copy_entries, (header.id, parent, plan.length))
        if (
            cursor.rowcount != plan.length
            or await self._digest(connection, parent, plan.length) != plan.digest
        ):
            raise forks.ParentChangedError
        chain = await self._digest(connection, header.id, plan.length)
        sealed = checkpoint.seal(content, chain=chain)
        cursor = await connection.execute(self._sql.save_checkpoint, (sealed, header.id, 1))
        if cursor.rowcount != 1:
            raise forks.ParentChangedError

    async def read(self, session_id: str) -> SessionSnapshot:
        loaded = await self._snapshot(require_session_id(session_id))
        return SessionSnapshot(loaded.header, tuple(loaded.entries))

    async def checked_read(self, session_id: str) -> stores.CheckedRead:
        """Like :meth:`read`, and also whether the session's checkpoint says what its log says
        (``check``'s reading, see :func:`.stores.checked_read`): its rows and its checkpoint read
        in one snapshot, its changes folded once."""
        checked = require_session_id(session_id)
        await self._start()
        async with self._connection() as connection, connection.transaction():
            await connection.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            cursor = await connection.execute(self._sql.checkpoint, (checked,))
            stored = await cursor.fetchone()
            if stored is None:
                raise session_not_found(checked, self._place)
            cursor = await connection.execute(self._sql.entries, (checked,))
            rows: list[Row] = await cursor.fetchall()
        header_bytes, data = stored
        return stores.checked_read(
            header_bytes,
            rows,
            data,
            self._source(checked),
            # A statement the message names, never run (a session id needs no quoting).
            delete=(
                f"DELETE FROM {quoted(self._schema)}.checkpoints"  # noqa: S608
                f" WHERE session_id = '{checked}'"
            ),
        )

    async def list(self) -> tuple[SessionHeader, ...]:
        return listed(await self.scan())

    async def scan(self) -> SessionListing:
        await self._start()
        async with self._connection() as connection:
            cursor = await connection.execute(self._sql.headers)
            rows = await cursor.fetchall()
        return stores.header_listing(
            (self._source(stored_id), header) for stored_id, header in rows
        )

    async def due_sessions(
        self, before: Instant, *, limit: int = DEFAULT_DUE_LIMIT
    ) -> tuple[DueSession, ...]:
        check_limit(limit)
        await self._start()
        async with self._connection() as connection:
            cursor = await connection.execute(
                self._sql.due, (_EPOCH + dt.timedelta(milliseconds=before), limit)
            )
            rows = await cursor.fetchall()
        return tuple(
            DueSession(SessionId(session_id), Instant((target - _EPOCH) // _MILLISECOND))
            for session_id, target in rows
        )

    # -- internals ---------------------------------------------------------------------------

    def _connection(self) -> AbstractAsyncContextManager[Connection]:
        if self._pool is None:
            raise RuntimeError("the store was used before it started")
        return self._pool.connection()

    async def _start(self) -> float:
        """Open the pool and check the schema on first use; return the loop time now."""
        if self._pool is None:
            if self._opening is None:
                self._opening = asyncio.Lock()
            async with self._opening:
                if self._pool is None:
                    await self._open_pool()
        return asyncio.get_running_loop().time()

    async def _open_pool(self) -> None:
        pool: AsyncConnectionPool[Connection] = AsyncConnectionPool(
            self._dsn,
            kwargs={"autocommit": True},
            min_size=1,
            max_size=self._pool_size,
            open=False,
            name=f"session-schedule {self._schema}",
        )
        await self._probe()
        try:
            # A failed or cancelled open closes the pool, whose workers would otherwise go on
            # connecting (and keep ``asyncio.run`` from ending when it cancels its tasks). A
            # cancelled one is no connection failure: psycopg's pool does not report it as one.
            await pool.open(wait=True)
            async with pool.connection() as connection:
                database = await self._check_version(connection)
        except BaseException as error:
            if isinstance(error, asyncio.CancelledError):
                _CANCELLED_OPENS.abandoned.add(pool.name)
            await pool.close()
            if isinstance(error, psycopg.Error):
                raise _unreachable(error) from error
            raise
        self._place = f"schema {self._schema} of PostgreSQL database {database}"
        self._pool = pool

    async def _probe(self) -> None:
        """Connect once before the pool opens: a database that cannot be reached (no server
        listening, no such database, refused credentials) is reported at once, with libpq's
        reason, where the pool would retry in the background for its whole timeout and then
        say only that it timed out."""
        try:
            async with asyncio.timeout(_PROBE_SECONDS):
                probe = await psycopg.AsyncConnection.connect(self._dsn, autocommit=True)
        except psycopg.Error as error:
            raise _unreachable(error) from error
        except TimeoutError:
            raise SessionError(
                "",
                f"the PostgreSQL database cannot be used: the server did not answer within "
                f"{_PROBE_SECONDS:g} s",
            ) from None
        await probe.close()

    async def _check_version(self, connection: Connection) -> str:
        """The database's name, once its schema is known to be this program's version."""
        database = connection.info.dbname
        cursor = await connection.execute(self._sql.version_exists)
        row = await cursor.fetchone()
        found: int | None = None
        if row is not None and row[0]:
            cursor = await connection.execute(self._sql.version)
            row = await cursor.fetchone()
            found = None if row is None or row[0] is None else int(row[0])
        problem = version_problem(found, database=database, schema=self._schema, dsn=self._dsn)
        if problem is not None:
            raise problem
        return database

    def _source(self, session_id: str) -> Source:
        return Source(session_id=session_id, name=self._place, storage="database", lines=False)

    def _own(self, owned: _Owned, renewed_at: float) -> PostgresSessionHandle:
        handle = PostgresSessionHandle(
            header=owned.header,
            entries=owned.entries,
            resume=owned.resume,
            store=self,
            epoch=owned.epoch,
            renewed_at=renewed_at,
        )
        self._handles.add(handle)
        if self._keeper is None or self._keeper.done():
            self._keeper = asyncio.get_running_loop().create_task(
                self._keep_leases(), name=f"session-schedule leases {self._schema}"
            )
        return handle

    async def _forget(self, handle: PostgresSessionHandle) -> None:
        """Renew ``handle``'s lease no more; return once no renewal of it is under way."""
        self._handles.discard(handle)
        while self._renewing is not None and handle in self._renewing[0]:
            await asyncio.shield(self._renewing[1])

    async def _keep_leases(self) -> None:
        """Renew the leases of the open handles, all in one statement every interval (a quarter
        of it after a failure), while any still needs it."""
        loop = asyncio.get_running_loop()
        interval = self.lease_seconds / 3
        # A handle is renewed when it is opened: the first renewal is due an interval later.
        wake = loop.time() + interval
        while True:
            await asyncio.sleep(max(0.0, wake - loop.time()))
            renewing = [handle for handle in self._handles if handle._renewing()]
            if not renewing:
                return
            started = loop.time()
            renewed = await self._renew_batch(self._batch(renewing), started)
            wake = started + (interval if renewed else interval / 4)

    def _batch(self, renewing: Sequence[PostgresSessionHandle]) -> _Renewal:
        """The renewal of ``renewing``: the last one when the handles are the same."""
        last = self._renewal
        if last is not None and last.handles == renewing:
            return last
        ordered: Sequence[PostgresSessionHandle] = sorted(renewing, key=lambda handle: handle.id)
        self._renewal = _Renewal(
            handles=renewing,
            members=frozenset(renewing),
            ordered=ordered,
            ids=",".join(handle.id for handle in ordered),
            epochs=",".join(str(handle.epoch) for handle in ordered),
        )
        return self._renewal

    async def _renew_batch(self, batch: _Renewal, started: float) -> bool:
        """Renew ``batch`` (sent at loop time ``started``): whether the statement succeeded."""
        loop = asyncio.get_running_loop()
        landed: asyncio.Future[None] = loop.create_future()
        self._renewing = (batch.members, landed)
        handles = batch.ordered
        deadline = min(handle._renewed_at for handle in handles) + self.lease_seconds
        try:
            async with asyncio.timeout_at(deadline):
                lost = await self._renew_leases(batch)
        except (psycopg.Error, TimeoutError) as failure:
            for handle in handles:
                handle._renewal_failed(failure)
            return False
        else:
            for handle in handles:
                handle._renewal_error = None
                handle._renewed(started)
            if lost:
                for handle in handles:
                    if handle.id in lost:
                        handle._renewal_lost()
            return True
        finally:
            self._renewing = None
            landed.set_result(None)

    async def _renew_leases(self, batch: _Renewal) -> set[str]:
        """Extend the leases of ``batch`` in one statement; the ids whose epoch no longer held."""
        async with self._connection() as connection:
            cursor = await connection.execute(
                self._sql.renew, (batch.ids, batch.epochs, self.lease_seconds)
            )
            return {row[0] for row in await cursor.fetchall()}

    async def _open_many(
        self, session_ids: Sequence[SessionId]
    ) -> Sequence[PostgresSessionHandle | Exception]:
        """Open ``session_ids`` in one transaction: their leases taken in one statement, their
        checkpoints and the rows from each window on read in two more. A session held elsewhere,
        missing or damaged gets its own error; a damaged one's lease is put back as it was."""
        started = await self._start()
        wanted = sorted(set(session_ids))
        outcomes: dict[SessionId, _Owned | Exception] = {}
        async with self._connection() as connection, connection.transaction():
            cursor = await connection.execute(
                self._sql.acquire_many, (wanted, self._holder, self.lease_seconds)
            )
            acquired: dict[SessionId, tuple[int, str, dt.datetime]] = {
                SessionId(row[0]): (int(row[1]), row[2], row[3]) for row in await cursor.fetchall()
            }
            refused = [session_id for session_id in wanted if session_id not in acquired]
            if refused:
                cursor = await connection.execute(self._sql.existing, (refused,))
                existing = {row[0]: _seconds(row[1]) for row in await cursor.fetchall()}
                for session_id in refused:
                    outcomes[session_id] = (
                        session_busy(session_id, lease_left=existing[session_id])
                        if session_id in existing
                        else session_not_found(session_id, self._place)
                    )
            if acquired:
                epochs = {session_id: held[0] for session_id, held in acquired.items()}
                outcomes.update(await self._read_many(connection, epochs))
                damaged = sorted(
                    session_id
                    for session_id in acquired
                    if isinstance(outcomes[session_id], Exception)
                )
                if damaged:
                    await connection.execute(
                        self._sql.restore_many,
                        (
                            damaged,
                            [acquired[session_id][0] - 1 for session_id in damaged],
                            [acquired[session_id][1] for session_id in damaged],
                            [acquired[session_id][2] for session_id in damaged],
                        ),
                    )
        results: _Outcomes = []
        handed: set[SessionId] = set()
        for session_id in session_ids:
            outcome = outcomes[session_id]
            if isinstance(outcome, Exception):
                results.append(outcome)
            elif session_id in handed:  # asked for twice in one batch: the second is refused
                results.append(session_busy(session_id))
            else:
                handed.add(session_id)
                results.append(self._own(outcome, started))
        return results

    async def _read_many(
        self, connection: Connection, epochs: dict[SessionId, int]
    ) -> dict[SessionId, _Owned | Exception]:
        """The sessions whose leases were just taken (with these epochs), each from its
        checkpoint when one matches its log, else from its whole log; a damaged one's error."""
        ids = sorted(epochs)
        cursor = await connection.execute(self._sql.checkpoints_of, (ids,))
        stored: dict[SessionId, tuple[bytes, bytes | None]] = {
            SessionId(row[0]): (row[1], row[2]) for row in await cursor.fetchall()
        }
        found: dict[SessionId, checkpoint.CheckpointFile] = {}
        firsts: dict[SessionId, int] = {}
        for session_id, (_, data) in stored.items():
            firsts[session_id] = 0
            if data is None:
                continue
            decoded = checkpoint.decode_checkpoint(data, self._source(session_id))
            if isinstance(decoded, checkpoint.Rejected):
                stores.report_rejected(_log, session_id, decoded)
                continue
            found[session_id] = decoded
            firsts[session_id] = stores.window_start(decoded)
        cursor = await connection.execute(
            self._sql.entries_of, (list(firsts), list(firsts.values()))
        )
        rows: dict[str, _Rows] = {session_id: [] for session_id in firsts}
        for session_id, position, entry_type, data in await cursor.fetchall():
            rows[session_id].append((position, entry_type, data))
        outcomes: dict[SessionId, _Owned | Exception] = {}
        for session_id in ids:
            if session_id not in stored:
                outcomes[session_id] = session_not_found(session_id, self._place)
                continue
            try:
                outcomes[session_id] = await self._restored(
                    connection,
                    session_id,
                    stored[session_id][0],
                    found.get(session_id),
                    firsts[session_id],
                    rows[session_id],
                    epochs[session_id],
                )
            except psycopg.Error:
                raise  # the transaction is gone: the batch fails, and each is opened alone
            except Exception as error:  # damaged content: this session's own failure
                outcomes[session_id] = error
        return outcomes

    async def _restored(
        self,
        connection: Connection,
        session_id: SessionId,
        header_bytes: bytes,
        found: checkpoint.CheckpointFile | None,
        first: int,
        rows: _Rows,
        epoch: int,
    ) -> _Owned:
        """One session of a batch open, from the rows read from ``first`` on: restored from its
        checkpoint ``found`` when it is bound to the log, else strictly decoded from its whole
        log (read again in this transaction when ``first`` was past its start)."""
        source = self._source(session_id)
        header = decode_header(header_bytes, source)
        if found is not None:
            index = found.entries - 1 - first
            bound = (
                found.entries >= 1
                and index < len(rows)
                and rows[index][0] == found.entries - 1
                and checkpoint.row_digest(header_bytes, rows[index][1], rows[index][2])
                == found.chain
            )
            restored = checkpoint.restore_bound(found, source, bound=bound)
            if not isinstance(restored, checkpoint.Rejected):
                held = stores.decode_window(header, rows, first, source)
                entries = self._entries(session_id, first, held)
                return _Owned(header, entries, epoch, restored.resume_point())
            stores.report_rejected(_log, session_id, restored)
        if first > 0:
            loaded = await self._load(connection, session_id)
            return _Owned(loaded.header, self._entries(session_id, 0, loaded.entries), epoch)
        decoded = stores.decode_rows(rows, 0, source)
        check_seed_length(header, len(decoded), source)
        return _Owned(header, self._entries(session_id, 0, decoded), epoch)

    async def _commit_many(
        self, flushes: Sequence[tuple[PostgresSessionHandle, _Rows]]
    ) -> Sequence[Exception | None]:
        """The flushes of several sessions in one statement (one transaction): each handle
        poisoned alone if its lease was taken over. A failed statement committed nothing: it
        raises, and each flush is then sent alone."""
        if len(flushes) == 1:
            try:
                await _commit_alone(flushes[0])
            except Exception as error:  # its own outcome: it was sent alone
                return [error]
            return [None]
        started = asyncio.get_running_loop().time()
        sessions: list[tuple[str, int, bool, dt.datetime | None]] = []
        rows: list[tuple[str, int, str, bytes]] = []
        indexes: dict[str, tuple[bool, Instant | None]] = {}
        for handle, flushed in sorted(flushes, key=lambda flush: flush[0].id):
            end = flushed[-1][0] + 1 if flushed else 0
            indexed, next_target = (
                handle._index_update(flushed[0][0], end) if flushed else (False, None)
            )
            if indexed and next_target == handle._recorded:
                indexed = False  # the row says so already: left alone, as a lone flush does
            indexes[handle.id] = (indexed, next_target)
            sessions.append((handle.id, handle.epoch, indexed, _moment(next_target)))
            rows.extend((handle.id, *row) for row in flushed)
        async with self._connection() as connection:
            cursor = await connection.execute(
                self._sql.flush_many,
                (
                    *(list(column) for column in zip(*sessions, strict=True)),
                    self.lease_seconds,
                    *(list(column) for column in zip(*rows, strict=True)),
                ),
            )
            inserted = collections.Counter(row[0] for row in await cursor.fetchall())
        outcomes: list[Exception | None] = []
        for handle, flushed in flushes:
            try:
                handle._committed(flushed, started, inserted[handle.id], indexes[handle.id])
            except _LeaseLost as error:
                outcomes.append(error)
            else:
                outcomes.append(None)
        return outcomes

    async def _close_many(self, handles: Sequence[PostgresSessionHandle]) -> Sequence[None]:
        """The last checkpoints and the lease releases of ``handles``, in one transaction: the
        rows the checkpoints are bound to read in one statement, the checkpoints written in
        another (each only while its writer's epoch holds the lease), the leases let go in a
        third."""
        drafts: list[tuple[PostgresSessionHandle, checkpoint.CheckpointFile]] = []
        for handle in handles:
            content = handle._checkpoint_draft(handle._commit.durable, window=False)
            if content is not None:
                drafts.append((handle, content))
        ordered = sorted(handles, key=lambda handle: handle.id)
        saved: set[str] = set()
        async with self._connection() as connection, connection.transaction():
            if drafts:
                cursor = await connection.execute(
                    self._sql.rows_at,
                    ([handle.id for handle, _ in drafts], [c.entries - 1 for _, c in drafts]),
                )
                bound = {row[0]: (row[1], row[2], row[3]) for row in await cursor.fetchall()}
                sealed = sorted(
                    (
                        handle.id,
                        handle.epoch,
                        checkpoint.seal(content, chain=checkpoint.row_digest(*bound[handle.id])),
                    )
                    for handle, content in drafts
                    if handle.id in bound
                )
                if sealed:
                    cursor = await connection.execute(
                        self._sql.save_checkpoints,
                        tuple(list(column) for column in zip(*sealed, strict=True)),
                    )
                    saved = {row[0] for row in await cursor.fetchall()}
            await connection.execute(
                self._sql.release_many,
                ([handle.id for handle in ordered], [handle.epoch for handle in ordered]),
            )
        for handle, content in drafts:
            if handle.id in saved:
                handle._checkpoint_stored(content.entries)
        return [None] * len(handles)

    async def _create(
        self,
        chosen: SessionId | None,
        header_for: Callable[[SessionId], SessionHeader],
        *,
        fork: tuple[SessionId, forks.Plan] | None = None,
    ) -> PostgresSessionHandle:
        """Create and own a session, or with ``fork`` (its parent and what it inherits) a fork
        with its rows and checkpoint, in one transaction."""
        started = await self._start()
        while True:
            session_id = chosen or new_session_id()
            header = header_for(session_id)
            created = False
            async with self._connection() as connection, connection.transaction():
                cursor = await connection.execute(
                    self._sql.insert_session, (session_id, encode_header(header))
                )
                if cursor.rowcount == 1:
                    await connection.execute(
                        self._sql.insert_lease, (session_id, self._holder, self.lease_seconds)
                    )
                    # A new session, and a fork, have no active reminder of their own.
                    await connection.execute(self._sql.insert_target, (session_id,))
                    if fork is not None:
                        await self._copy_fork(connection, header, *fork)
                    created = True
            if created:
                # Owned only once the transaction committed: a renewal run before then would
                # not see the lease and take the new handle for one another owner took over,
                # and a failed commit would leave a handle that renews a lease nobody holds.
                if fork is None:
                    return self._own(_Owned(header, self._entries(session_id, 0, []), 1), started)
                plan = fork[1]
                held = self._entries(session_id, plan.start, plan.window)
                return self._own(_Owned(header, held, 1, plan.resume), started)
            if chosen is not None:
                raise session_exists(session_id, self._place)

    async def _snapshot(self, session_id: SessionId) -> _Loaded:
        await self._start()
        async with self._connection() as connection, connection.transaction():
            # One snapshot for the header and every entry.
            await connection.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            return await self._load(connection, session_id)

    async def _load(self, connection: Connection, session_id: SessionId) -> _Loaded:
        """The committed header and entries of a session (``SessionNotFound`` if absent)."""
        source = self._source(session_id)
        cursor = await connection.execute(self._sql.header, (session_id,))
        found = await cursor.fetchone()
        if found is None:
            raise session_not_found(session_id, self._place)
        header = decode_header(found[0], source)
        cursor = await connection.execute(self._sql.entries, (session_id,))
        rows: list[Row] = [(row[0], row[1], row[2]) for row in await cursor.fetchall()]
        entries = stores.decode_rows(rows, 0, source)
        check_seed_length(header, len(entries), source)
        return _Loaded(header, entries)

    def _entries(self, session_id: SessionId, start: int, held: Sequence[LogEntry]) -> LazyEntries:
        """A handle's entries: ``held`` from ``start`` on, the ones before read when asked."""
        dsn, statement, source = self._dsn, self._sql.entries_range, self._source(session_id)
        return LazyEntries(
            start,
            [*held],
            lambda begin, end: _read_range(dsn, statement, source, begin, end),
            chunk=CHUNK,
        )

    async def _load_from_checkpoint(
        self, connection: Connection, session_id: SessionId, epoch: int
    ) -> _Owned | None:
        """The session from its checkpoint and the rows from its window on, read in the
        caller's transaction; ``None`` when no checkpoint matches the log (the reason logged)."""
        verified = await self._verified_checkpoint(connection, session_id)
        if verified is None:
            return None
        header, _, restored, first, held = verified
        entries = self._entries(session_id, first, held)
        return _Owned(header, entries, epoch, restored.resume_point())

    async def _verified_checkpoint(
        self, connection: Connection, session_id: SessionId
    ) -> _Verified | None:
        """The session's checkpoint, verified against its log as an open verifies it, with the
        rows from its window on, read in the caller's transaction; ``None`` when no checkpoint
        matches the log (the reason logged)."""
        source = self._source(session_id)
        cursor = await connection.execute(self._sql.checkpoint, (session_id,))
        stored = await cursor.fetchone()
        if stored is None or stored[1] is None:
            return None  # no session (the whole read says so), or no checkpoint
        header_bytes, data = stored
        found = checkpoint.decode_checkpoint(data, source)
        if isinstance(found, checkpoint.Rejected):
            stores.report_rejected(_log, session_id, found)
            return None
        header = decode_header(header_bytes, source)
        # The window before the checkpoint and everything after it, from the log itself; the
        # last covered row among them is the binding's.
        first = stores.window_start(found)
        cursor = await connection.execute(self._sql.entries_from, (session_id, first))
        rows: list[Row] = await cursor.fetchall()
        index = found.entries - 1 - first
        bound = (
            found.entries >= 1
            and index < len(rows)
            and rows[index][0] == found.entries - 1
            and checkpoint.row_digest(header_bytes, rows[index][1], rows[index][2]) == found.chain
        )
        restored = checkpoint.restore_bound(found, source, bound=bound)
        if isinstance(restored, checkpoint.Rejected):
            stores.report_rejected(_log, session_id, restored)
            return None
        held = stores.decode_window(header, rows, first, source)
        return _Verified(header, found, restored, first, held)

    async def _save_checkpoint(
        self, session_id: SessionId, epoch: int, content: checkpoint.CheckpointFile
    ) -> bool:
        """Store ``content`` bound to the committed rows it covers, in a transaction of its own,
        if ``epoch`` still holds the lease; whether it was stored."""
        async with self._connection() as connection, connection.transaction():
            cursor = await connection.execute(self._sql.header, (session_id,))
            header = await cursor.fetchone()
            cursor = await connection.execute(self._sql.row, (session_id, content.entries - 1))
            last = await cursor.fetchone()
            if header is None or last is None:
                return False
            chain = checkpoint.row_digest(header[0], last[0], last[1])
            cursor = await connection.execute(
                self._sql.save_checkpoint,
                (checkpoint.seal(content, chain=chain), session_id, epoch),
            )
            return cursor.rowcount == 1


async def _commit_alone(flush: tuple[PostgresSessionHandle, _Rows]) -> None:
    handle, rows = flush
    await handle._commit_rows(rows)


async def _close_quietly(handle: PostgresSessionHandle) -> None:
    """Close a handle opened for a caller that is gone (its lease is let go)."""
    with suppress(Exception):
        await handle.close()


def _read_range(dsn: str, statement: str, source: Source, begin: int, end: int) -> list[LogEntry]:
    """Entries ``begin … end-1`` of an open session, strictly decoded.

    Called from a synchronous read of the handle's entries, so it blocks the caller on a
    connection of its own (the store's pool is asynchronous).
    """
    with psycopg.connect(dsn, autocommit=True) as connection:
        rows = connection.execute(statement, (source.session_id, begin, end)).fetchall()
    return stores.decode_range(rows, begin, end, source)


_PROBE_SECONDS: Final = 30.0
"""How long a store's first connection may take (what psycopg's pool waits for by default)."""


def _unreachable(error: psycopg.Error) -> SessionError:
    """The store's failure to reach its database, with psycopg's reason (never the password:
    libpq does not repeat it)."""
    reason = " ".join(str(error).split()) or type(error).__name__
    return SessionError("", f"the PostgreSQL database cannot be used: {reason}")

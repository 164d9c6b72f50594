"""The SQLite store: many sessions in one database file.

Schema (``PRAGMA user_version = 3``)::

    sessions(id TEXT PRIMARY KEY, header TEXT NOT NULL)  -- the header's canonical JSON
    entries(session_id TEXT, position INTEGER, type TEXT, data TEXT,  -- data: canonical JSON
            PRIMARY KEY (session_id, position))
    next_targets(session_id TEXT PRIMARY KEY, next_target INTEGER)  -- epoch ms, NULL: none
    checkpoints(session_id TEXT PRIMARY KEY, data BLOB NOT NULL)  -- derived, see below

A database of version 1 (without ``next_targets``) is upgraded when it is first opened: the table
is created and filled from every session's log, in one transaction. One of version 2 (without
``checkpoints``) gets the empty table.

The database runs in WAL mode with ``synchronous=FULL``, so a commit is durable when it returns.

- **A serial worker per open session; one reading connection per database file per process.**
  A session is opened and read on its worker (:mod:`session_schedule.session.worker`), a lane of
  the process's shared thread pool whose calls run one at a time, in order; the event loop never
  waits on SQLite. The open sessions of a process share one connection to the database for that
  (:class:`_Shared`, each call holding its lock for its whole transaction), so ten thousand open
  sessions cost its three descriptors (the database, its ``-wal`` and ``-shm``) and the commit
  lane's, not thirty thousand. It is closed when the last session using it is.
- **Append is immediate, the barrier is the commit.** ``append`` assigns the position and queues
  the row in memory; the barrier hands every queued row to the store's **commit lane**
  (:mod:`session_schedule.session.commit_lane`): one writer connection whose transaction —
  ``BEGIN IMMEDIATE``, each barrier's rows in a savepoint of its own, ``COMMIT`` — takes the
  barriers of every session that arrived together. So one commit covers every append since the
  last barrier (group commit) and the barriers of many sessions (a stampede of dispatches costs
  a few syncs, not one per session); one session's failed insert is rolled back alone; and a
  session that appends without a barrier never holds the database's write lock.
- **Ownership is a lock on a byte** of one sidecar file, ``<database>.locks/owners``
  (:mod:`session_schedule.session.owners`: a descriptor per process, not per session). Chosen
  over an owner-lease row because the kernel drops the lock when its owner dies — a SIGKILLed
  process leaves nothing stale to detect, no pid to trust across pid reuse or containers — and a
  second handle in the same process is refused like another process. The primary key is the
  backstop: should two writers ever reach one session, the second commit fails on the taken
  position (and poisons that handle); positions can never interleave.
- **The next-target index** (``next_targets``) is written in the barrier's own transaction
  whenever the rows it commits hold ``schedule/change`` entries; ``due_sessions`` reads only it.
- **Checkpoints** (:mod:`session_schedule.session.checkpoint`): a derived row per session, the
  fold and pending turns of its first ``n`` entries and the last few before ``n``, bound to ``n``
  and to a digest of the header and of entry ``n-1`` as stored. Rows are append-only — a
  committed ``(session, position)`` row is never rewritten, the primary key refuses a second
  one, and every commit is one transaction — so the rows ``0 … n-1`` a checkpoint was computed
  from stay exactly those rows; the digest tells them apart from a log that was replaced (the
  database restored from an older copy, the session deleted and created again, rows edited by
  hand at ``n-1``). ``open`` reads the checkpoint and strictly decodes only the rows from ``n``
  on; a checkpoint that is missing, damaged, of another version, of another session or not
  bound to the log is ignored (the reason logged) and replaced. One is written on the commit
  lane, in a transaction after the barrier's, once :data:`~.checkpoint.EVERY` entries have
  become durable since the last, and on close; a transaction of checkpoints only is not synced
  (``synchronous = NORMAL``): a checkpoint lost to a power cut is written again. The entries
  before its window then leave memory and are read again, a range at a time, when asked for.
  ``read`` still decodes every row. Rows carry no checksum, so a row before ``n-1`` edited by
  hand and still decoding is not seen by an open, which folds from the checkpoint:
  :meth:`SqliteSessionStore.checked_read` (``check``'s reading) compares the checkpoint with the
  fold of every row.
- **A fork copies its rows in SQL and is written with its checkpoint**
  (:mod:`session_schedule.session.forks`). It reads its parent in one transaction: from the
  parent's checkpoint, verified as an open verifies it (bound to the log, the rows of its window
  and after it strictly decoded, so damage there refuses the fork), decoding the rows before the
  fork point only when it lies before that checkpoint; without a checkpoint that matches the
  log, the whole log is strictly decoded, once. Then, in one write transaction: the fork's
  session row, its rows copied from the parent's by ``INSERT … SELECT`` (never re-encoded), and
  its checkpoint (no active reminder: the highest id its history uses), bound to its own header
  and last row. A crash leaves no fork or a whole one, and opening it reads its checkpoint and
  the rows of its window only. Should the rows copied not be the ones read (a gap before the
  parent's window, which the copy's row count shows, or rows edited meanwhile) nothing is
  written and the parent is read again, whole, so its damage is reported as a read reports it.
- **Reads see commits only**: ``read``, ``list`` and ``fork`` see exactly what barriers made
  durable.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import sqlite3
import threading
from collections.abc import Awaitable, Callable, Collection, Iterable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Final, NamedTuple, TypeAlias, final

from session_schedule.core.errors import ScheduleError
from session_schedule.core.instants import Instant
from session_schedule.session import checkpoint, forks, stores
from session_schedule.session.codec import Source, check_seed_length, decode_header, encode_header
from session_schedule.session.commit_lane import CommitLane
from session_schedule.session.errors import (
    SessionError,
    database_damaged,
    database_unusable,
    session_busy,
    session_exists,
    session_not_found,
)
from session_schedule.session.handle import LazyEntries, LogHandle
from session_schedule.session.handover import RequestFiles
from session_schedule.session.ids import (
    SessionId,
    chosen_session_id,
    new_session_id,
    require_session_id,
)
from session_schedule.session.owners import OwnerLocks
from session_schedule.session.port import (
    DEFAULT_DUE_LIMIT,
    DueSession,
    LogEntry,
    ResumePoint,
    SessionHeader,
    SessionListing,
    SessionSnapshot,
    listed,
    listing,
    make_header,
    seed_length,
)
from session_schedule.session.private import private_directory
from session_schedule.session.targets import check_limit, next_target_of
from session_schedule.session.worker import Worker

SCHEMA_VERSION: Final = 3
OWNERS_NAME: Final = "owners"
"""The owners' lock file, in the database's ``.locks`` directory."""
_log: Final = logging.getLogger(__name__)
BUSY_TIMEOUT_SECONDS: Final = 10.0
"""How long a barrier waits for another connection's write transaction before it fails."""

_SCHEMA: Final = (
    "CREATE TABLE sessions (id TEXT PRIMARY KEY, header TEXT NOT NULL)",
    (
        "CREATE TABLE entries ("
        " session_id TEXT NOT NULL REFERENCES sessions (id),"
        " position INTEGER NOT NULL CHECK (position >= 0),"
        " type TEXT NOT NULL,"
        " data TEXT NOT NULL,"
        " PRIMARY KEY (session_id, position)"
        ") WITHOUT ROWID"
    ),
    f"PRAGMA user_version = {SCHEMA_VERSION}",
)
_TARGETS_SCHEMA: Final = (
    (
        "CREATE TABLE next_targets ("
        " session_id TEXT PRIMARY KEY REFERENCES sessions (id),"
        " next_target INTEGER"
        ") WITHOUT ROWID"
    ),
    "CREATE INDEX next_targets_by_target ON next_targets (next_target)",
)
_CHECKPOINTS_SCHEMA: Final = (
    "CREATE TABLE checkpoints ("
    " session_id TEXT PRIMARY KEY REFERENCES sessions (id),"
    " data BLOB NOT NULL"
    ") WITHOUT ROWID"
)
_SET_CHECKPOINT: Final = (
    "INSERT INTO checkpoints (session_id, data) VALUES (?, ?)"
    " ON CONFLICT (session_id) DO UPDATE SET data = excluded.data"
)
_HEADER: Final = "SELECT header FROM sessions WHERE id = ?"
_CHECKPOINT: Final = "SELECT data FROM checkpoints WHERE session_id = ?"
_ALL: Final = "SELECT position, type, data FROM entries WHERE session_id = ? ORDER BY position"
_ROW: Final = "SELECT type, data FROM entries WHERE session_id = ? AND position = ?"
_RANGE: Final = (
    "SELECT position, type, data FROM entries"
    " WHERE session_id = ? AND position >= ? AND position < ? ORDER BY position"
)
_PROBLEMS_SHOWN: Final = 3
"""How many of the problems ``PRAGMA quick_check`` lists an error message quotes."""
CHUNK: Final = 1024
"""How many entries before those held in memory are read from the database at once."""
_INSERT: Final = "INSERT INTO entries (session_id, position, type, data) VALUES (?, ?, ?, ?)"
_COPY: Final = (
    "INSERT INTO entries (session_id, position, type, data)"
    " SELECT ?, position, type, data FROM entries"
    " WHERE session_id = ? AND position < ? ORDER BY position"
)
"""A fork's rows: the parent's first ``n``, as stored."""
_SET_TARGET: Final = (
    "INSERT INTO next_targets (session_id, next_target) VALUES (?, ?)"
    " ON CONFLICT (session_id) DO UPDATE SET next_target = excluded.next_target"
)
_DUE: Final = (
    "SELECT session_id, next_target FROM next_targets WHERE next_target < ?"
    " ORDER BY next_target, session_id LIMIT ?"
)

Row: TypeAlias = tuple[str, int, str, str]
"""An entry row as inserted: session id, position, type, canonical JSON payload."""


@final
class SqliteSessionHandle(LogHandle):
    """The owner of one session in a database: its lane, its ownership and the shared
    connection it was opened through."""

    def __init__(
        self,
        *,
        opened: _Opened,
        worker: Worker,
        lane: CommitLane,
    ) -> None:
        super().__init__(header=opened.header, entries=opened.entries, resume=opened.resume)
        self._shared = opened.shared
        self._owners = opened.owners
        self._worker = worker
        self._lane = lane
        lane.attach()
        self._pending: stores.PendingRows[Row] = stores.PendingRows(len(opened.entries))

    def _write(self, position: int, entry_type: str, data: bytes) -> None:
        self._pending.append((self.id, position, entry_type, data.decode()))

    def _flush(self, durable: int, target: int) -> Awaitable[None]:
        rows = self._pending.flushing(durable, target)
        indexed, next_target = self._index_update(durable, target)
        index = (self.id, next_target) if indexed else None
        # On the store's commit lane: one transaction, one sync, for the flushes of every
        # session that arrive together.
        committed = self._lane.commit(lambda connection: _insert(connection, rows, index))
        return self._flushed(committed, target)

    async def _flushed(self, inserted: Awaitable[None], target: int) -> None:
        await inserted
        if target - self._checkpointed >= checkpoint.EVERY:
            # After this commit, in a later transaction: the barrier does not wait for it.
            job = self._checkpoint_job(target)
            if job is not None:
                saved = self._lane.commit(job, durable=False)
                saved.add_done_callback(lambda done: self._saved(done, target))

    def _saved(self, done: asyncio.Future[bool], count: int) -> None:
        if done.cancelled():
            return
        error = done.exception()
        if error is not None:
            _log.warning("no checkpoint written for session %s: %s", self.id, error)
        elif done.result():
            self._checkpoint_stored(count)

    def _checkpoint_job(self, count: int) -> Callable[[sqlite3.Connection], bool] | None:
        # The window is read from the rows on open: only the fold and the pending turns.
        content = self._checkpoint_draft(count, window=False)
        if content is None:
            return None
        session_id = self.id
        return lambda connection: _write_checkpoint(connection, session_id, content)

    async def _release(self) -> None:
        shared, owners, session_id = self._shared, self._owners, self.id
        job = self._checkpoint_job(self._commit.durable)
        try:
            if job is not None:
                try:
                    # Shielded: the lock is held until the checkpoint has landed either way.
                    await asyncio.shield(self._lane.commit(job, durable=False))
                except sqlite3.Error as error:
                    _log.warning("no checkpoint written for session %s: %s", self.id, error)
        finally:
            try:
                await self._worker.stop(lambda: _close(shared, owners, session_id))
            finally:
                # After the shared connection is given up: SQLite folds the write-ahead log back
                # in only when the connection it closes is the database's last, so two closing
                # at the same moment on two threads could each leave it to the other.
                lane_closed = self._lane.detach()
                if lane_closed is not None:
                    await asyncio.shield(lane_closed)


class _Opened(NamedTuple):
    shared: _Shared
    owners: OwnerLocks
    header: SessionHeader
    entries: LazyEntries
    resume: ResumePoint | None = None


class _Loaded(NamedTuple):
    header: SessionHeader
    entries: list[LogEntry]


@final
class _Database(NamedTuple):
    """A database file and the directory of its ownership locks."""

    path: Path
    locks: Path

    @property
    def place(self) -> str:
        return str(self.path)

    def source(self, session_id: str) -> Source:
        return Source(session_id=session_id, name=self.path.name, storage="database", lines=False)

    @property
    def owners(self) -> OwnerLocks:
        return OwnerLocks(self.locks / OWNERS_NAME)


@final
class _Shared:
    """The process's connection to one database file, shared by its open sessions to open and
    read them: used only while holding :attr:`lock` (a transaction and everything in it under
    one hold)."""

    __slots__ = ("connection", "key", "lock", "users")

    def __init__(self, key: str, connection: sqlite3.Connection) -> None:
        self.key = key
        self.connection = connection
        self.lock = threading.Lock()
        self.users = 0


_sharing: Final = threading.Lock()
_shared: Final[dict[str, _Shared]] = {}
"""The process's shared connections, by the database file's absolute path."""


def _share(path: Path, *, create: bool) -> _Shared:
    """The process's connection to ``path``, with one more user (see :func:`_unshare`); made
    as :func:`_connect` makes one when there is none."""
    key = str(path.absolute())
    with _sharing:
        shared = _shared.get(key)
        if shared is None:
            shared = _shared[key] = _Shared(key, _connect(path, create=create))
        shared.users += 1
        return shared


def _unshare(shared: _Shared) -> None:
    """One user fewer; the last one closes the connection."""
    with _sharing:
        shared.users -= 1
        if shared.users:
            return
        if _shared.get(shared.key) is shared:
            del _shared[shared.key]
    with shared.lock:
        shared.connection.close()


def shared_connections() -> int:
    """How many database connections the open sessions of this process share (one per file)."""
    with _sharing:
        return len(_shared)


@final
class SqliteSessionStore:
    """Sessions in the SQLite database ``path`` (created ``0600`` when missing)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        """``path``: the database file, as a string or a path object."""
        path = Path(path)
        self._db = _Database(path, path.with_name(f"{path.name}.locks"))
        self._handovers = RequestFiles(self._db.locks)
        self._lane = CommitLane(lambda: _connect(path, create=False))

    @property
    def path(self) -> Path:
        return self._db.path

    @property
    def locks_dir(self) -> Path:
        """Where the ownership lock files live."""
        return self._db.locks

    async def request_handover(self, session_id: SessionId) -> None:
        """Ask the holder of ``session_id`` to let it go (a file beside its lock file)."""
        await asyncio.to_thread(private_directory, self._db.locks)
        await self._handovers.request(session_id)

    async def withdraw_handover(self, session_id: SessionId) -> None:
        await self._handovers.withdraw(session_id)

    async def handover_requests(self, session_ids: Collection[SessionId]) -> frozenset[SessionId]:
        return await self._handovers.live(session_ids)

    async def create(
        self, *, now: Instant, session_id: SessionId | None = None
    ) -> SqliteSessionHandle:
        chosen = chosen_session_id(session_id)
        db = self._db

        def job() -> _Opened:
            with _failures(db, chosen or ""):
                shared = _share(db.path, create=True)
                return _guarded(
                    shared,
                    lambda: _create(
                        db,
                        shared,
                        chosen,
                        lambda new_id: make_header(new_id, now=now, parent_id=None, seed_length=0),
                        _insert_session,
                    ),
                )

        return await _own(job, self._lane)

    async def open(self, session_id: str) -> SqliteSessionHandle:
        checked = require_session_id(session_id)
        db = self._db

        def job() -> _Opened:
            with _failures(db, checked):
                shared = _share_existing(db, checked)
                return _guarded(shared, lambda: _open(db, shared, checked))

        return await _own(job, self._lane)

    async def fork(
        self,
        parent_id: str,
        *,
        at: int | None = None,
        now: Instant,
        session_id: SessionId | None = None,
    ) -> SqliteSessionHandle:
        chosen = chosen_session_id(session_id)
        parent = require_session_id(parent_id)
        db = self._db

        def job() -> _Opened:
            with _failures(db, parent):
                shared = _share_existing(db, parent)
                return _guarded(shared, lambda: _fork(db, shared, parent, at, now, chosen))

        return await _own(job, self._lane)

    async def read(self, session_id: str) -> SessionSnapshot:
        checked = require_session_id(session_id)
        db = self._db

        def job() -> SessionSnapshot:
            with _failures(db, checked):
                connection = _connect_existing(db, checked)
                try:
                    loaded = _load(db, connection, checked)
                finally:
                    connection.close()
            return SessionSnapshot(loaded.header, tuple(loaded.entries))

        return await asyncio.to_thread(job)

    async def checked_read(self, session_id: str) -> stores.CheckedRead:
        """Like :meth:`read`, and also whether the session's checkpoint says what its log says
        (``check``'s reading, see :func:`.stores.checked_read`): its rows and its checkpoint read
        in one transaction, its changes folded once."""
        checked = require_session_id(session_id)
        db = self._db

        def job() -> stores.CheckedRead:
            with _failures(db, checked):
                connection = _connect_existing(db, checked)
                try:
                    connection.execute("BEGIN")
                    try:
                        header = connection.execute(_HEADER, (checked,)).fetchone()
                        rows = list(_stored_rows(connection.execute(_ALL, (checked,)).fetchall()))
                        stored = connection.execute(_CHECKPOINT, (checked,)).fetchone()
                    finally:
                        _rollback(connection)
                    if header is None:
                        raise _missing(db, connection, checked)
                finally:
                    connection.close()
            return stores.checked_read(
                _stored_bytes(header[0]),
                rows,
                None if stored is None else _stored_bytes(stored[0]),
                db.source(checked),
                # A statement the message names, never run (a session id needs no quoting).
                delete=f"DELETE FROM checkpoints WHERE session_id = '{checked}'",  # noqa: S608
            )

        return await asyncio.to_thread(job)

    async def list(self) -> tuple[SessionHeader, ...]:
        return listed(await self.scan())

    async def scan(self) -> SessionListing:
        return await asyncio.to_thread(_scan, self._db)

    async def due_sessions(
        self, before: Instant, *, limit: int = DEFAULT_DUE_LIMIT
    ) -> tuple[DueSession, ...]:
        check_limit(limit)
        return await asyncio.to_thread(_due, self._db, before, limit)


async def _own(job: Callable[[], _Opened], lane: CommitLane) -> SqliteSessionHandle:
    worker = Worker("session-sqlite")
    opened = await worker.start(
        job, undo=lambda opened: _close(opened.shared, opened.owners, opened.header.id)
    )
    return SqliteSessionHandle(opened=opened, worker=worker, lane=lane)


# Blocking work, run on a worker thread.


def _guarded(shared: _Shared, call: Callable[[], _Opened]) -> _Opened:
    """``call()``, giving up the use of ``shared`` if it fails."""
    try:
        return call()
    except BaseException:
        _unshare(shared)
        raise


def _share_existing(db: _Database, session_id: SessionId) -> _Shared:
    try:
        return _share(db.path, create=False)
    except FileNotFoundError:
        raise session_not_found(session_id, db.place) from None


def _connect_existing(db: _Database, session_id: SessionId) -> sqlite3.Connection:
    try:
        return _connect(db.path, create=False)
    except FileNotFoundError:
        raise session_not_found(session_id, db.place) from None


def _open(db: _Database, shared: _Shared, session_id: SessionId) -> _Opened:
    connection, owners = shared.connection, db.owners
    with shared.lock:
        if not _exists(connection, session_id):
            raise _missing(db, connection, session_id)
        _lock(db, session_id)
        try:
            connection.execute("BEGIN")
            try:
                resumed = _load_from_checkpoint(db, connection, session_id)
                if resumed is None:
                    loaded = _load_rows(db, connection, session_id)
                    entries = _entries(db, session_id, 0, loaded.entries)
                    return _Opened(shared, owners, loaded.header, entries)
            finally:
                _rollback(connection)
        except BaseException:
            owners.release(session_id)
            raise
    header, entries, found = resumed
    return _Opened(shared, owners, header, entries, found.resume_point())


def _entries(db: _Database, session_id: SessionId, start: int, held: list[LogEntry]) -> LazyEntries:
    """A handle's entries: ``held`` from ``start`` on, the ones before read when asked for."""
    return LazyEntries(
        start, held, lambda begin, end: _read_range(db, session_id, begin, end), chunk=CHUNK
    )


def _load_from_checkpoint(
    db: _Database, connection: sqlite3.Connection, session_id: SessionId
) -> tuple[SessionHeader, LazyEntries, checkpoint.Checkpoint] | None:
    """The session from its checkpoint and the rows after it, read in the caller's transaction;
    ``None`` when there is no checkpoint that matches the log (the reason is logged)."""
    verified = _verified_checkpoint(db, connection, session_id)
    if verified is None:
        return None
    header, _, restored, first, held = verified
    return header, _entries(db, session_id, first, held), restored


class _Verified(NamedTuple):
    """A session's checkpoint that matches its log, and the log's rows from its window on."""

    header: SessionHeader
    found: checkpoint.CheckpointFile
    restored: checkpoint.Checkpoint
    first: int
    """The position of the first row read (:func:`.stores.window_start`)."""
    held: list[LogEntry]
    """The entries from ``first`` to the log's end, strictly decoded."""


def _verified_checkpoint(
    db: _Database, connection: sqlite3.Connection, session_id: SessionId
) -> _Verified | None:
    """The session's checkpoint, verified against its log as an open verifies it, with the rows
    from its window on, read in the caller's transaction; ``None`` when there is no checkpoint
    that matches the log (the reason is logged)."""
    source = db.source(session_id)
    stored = connection.execute(_CHECKPOINT, (session_id,)).fetchone()
    if stored is None:
        return None
    found = checkpoint.decode_checkpoint(_stored_bytes(stored[0]), source)
    if isinstance(found, checkpoint.Rejected):
        stores.report_rejected(_log, session_id, found)
        return None
    header_row = connection.execute(
        "SELECT header FROM sessions WHERE id = ?", (session_id,)
    ).fetchone()
    if header_row is None:
        raise _missing(db, connection, session_id)
    header_bytes = _stored_bytes(header_row[0])
    header = decode_header(header_bytes, source)
    last = connection.execute(_ROW, (session_id, found.entries - 1)).fetchone()
    bound = (
        found.entries >= 1
        and last is not None
        and checkpoint.row_digest(header_bytes, _stored_text(last[0]), _stored_bytes(last[1]))
        == found.chain
    )
    restored = checkpoint.restore_bound(found, source, bound=bound)
    if isinstance(restored, checkpoint.Rejected):
        stores.report_rejected(_log, session_id, restored)
        return None
    # The window before the checkpoint and everything after it, from the log itself.
    first = stores.window_start(found)
    rows = connection.execute(
        "SELECT position, type, data FROM entries WHERE session_id = ? AND position >= ?"
        " ORDER BY position",
        (session_id, first),
    ).fetchall()
    held = stores.decode_window(header, _stored_rows(rows), first, source)
    return _Verified(header, found, restored, first, held)


def _read_range(db: _Database, session_id: SessionId, begin: int, end: int) -> list[LogEntry]:
    """Entries ``begin … end-1`` of an open session, strictly decoded, from a connection of
    their own (the session's connection belongs to its thread)."""
    source = db.source(session_id)
    with _failures(db, session_id):
        connection = _connect(db.path, create=False)
        try:
            rows = connection.execute(_RANGE, (session_id, begin, end)).fetchall()
        finally:
            connection.close()
    return stores.decode_range(_stored_rows(rows), begin, end, source)


def _stored_rows(
    rows: Iterable[tuple[object, object, object]],
) -> Iterator[tuple[object, bytes, bytes]]:
    """Rows of ``position, type, data`` with their type and data as stored bytes."""
    return ((position, _stored_bytes(kind), _stored_bytes(data)) for position, kind, data in rows)


def _write_checkpoint(
    connection: sqlite3.Connection, session_id: SessionId, content: checkpoint.CheckpointFile
) -> bool:
    """Store ``content`` bound to the committed rows it covers, within the caller's transaction
    (the commit lane's); ``False`` when they are not all committed (nothing is written)."""
    header = connection.execute(
        "SELECT header FROM sessions WHERE id = ?", (session_id,)
    ).fetchone()
    last = connection.execute(_ROW, (session_id, content.entries - 1)).fetchone()
    if header is None or last is None:
        return False
    chain = checkpoint.row_digest(
        _stored_bytes(header[0]), _stored_text(last[0]), _stored_bytes(last[1])
    )
    connection.execute(_SET_CHECKPOINT, (session_id, checkpoint.seal(content, chain=chain)))
    return True


def _create(
    db: _Database,
    shared: _Shared,
    chosen: SessionId | None,
    header_for: Callable[[SessionId], SessionHeader],
    write: Callable[[sqlite3.Connection, SessionHeader], bool],
    held: tuple[int, list[LogEntry]] = (0, []),
    resume: ResumePoint | None = None,
) -> _Opened:
    """Create and own a session: ``write`` inserts it (``False``: its id is taken) in a
    transaction of its own; ``held``: the position of the first entry its handle holds in memory,
    and those entries; ``resume``: what it resumes from."""
    connection, owners = shared.connection, db.owners
    while True:
        session_id = chosen or new_session_id()
        with shared.lock:
            if _exists(connection, session_id):
                if chosen is not None:
                    raise session_exists(session_id, db.place)
                continue
            header = header_for(session_id)
            _lock(db, session_id)
            try:
                created = write(connection, header)
            except BaseException:
                owners.release(session_id)
                raise
        if created:
            start, entries = held
            return _Opened(
                shared, owners, header, _entries(db, session_id, start, list(entries)), resume
            )
        owners.release(session_id)
        if chosen is not None:
            raise session_exists(session_id, db.place)


def _fork(
    db: _Database,
    shared: _Shared,
    parent: SessionId,
    at: int | None,
    now: Instant,
    chosen: SessionId | None,
) -> _Opened:
    """Create and own a fork of ``parent`` holding its first ``at`` entries (all when
    ``None``), with its checkpoint, in one transaction (see the module's rules)."""
    whole = False
    while True:
        with shared.lock:
            plan = _plan_fork(db, shared.connection, parent, at, whole=whole)

        def header_for(new_id: SessionId, count: int = plan.length) -> SessionHeader:
            return make_header(new_id, now=now, parent_id=parent, seed_length=count)

        if plan.length == 0:
            # Nothing inherited: a new session whose header names its parent, no checkpoint.
            return _create(db, shared, chosen, header_for, _insert_session)
        try:
            return _create(
                db,
                shared,
                chosen,
                header_for,
                functools.partial(_insert_fork, parent=parent, plan=plan),
                (plan.start, plan.window),
                plan.resume,
            )
        except forks.ParentChangedError:
            if whole:
                raise db.source(parent).corrupt(
                    plan.length - 1, "the entry changed while the session was being forked"
                ) from None
            whole = True


def _plan_fork(
    db: _Database, connection: sqlite3.Connection, parent: SessionId, at: int | None, *, whole: bool
) -> forks.Plan:
    """What a fork of ``parent`` at ``at`` inherits, read in one transaction: from the parent's
    checkpoint, verified as an open verifies it (its window's and later rows strictly decoded:
    damage there refuses the fork), when it matches the log and ``whole`` is not asked for; the
    rows before the fork point are then decoded only when it lies before the checkpoint.
    Otherwise the parent's whole log is strictly decoded, once."""
    connection.execute("BEGIN")
    try:
        verified = None if whole else _verified_checkpoint(db, connection, parent)
        if verified is None:
            everything = _load_rows(db, connection, parent).entries
            count = seed_length(at, len(everything), parent)
            return forks.from_entries(
                parent, everything[:count], _digest(connection, parent, count)
            )
        _, found, restored, first, held = verified
        count = seed_length(at, first + len(held), parent)
        digest = _digest(connection, parent, count)
        planned = forks.from_checkpoint(parent, count, (found, restored, first, held), digest)
        if planned is not None:
            return planned
        rows = connection.execute(_RANGE, (parent, 0, count)).fetchall()
        inherited = stores.decode_range(_stored_rows(rows), 0, count, db.source(parent))
        return forks.from_entries(parent, inherited, digest)
    finally:
        _rollback(connection)


def _digest(connection: sqlite3.Connection, session_id: SessionId, count: int) -> int | None:
    """:func:`~.checkpoint.row_digest` of the session's header and entry ``count - 1`` as
    stored; ``None`` when either is missing."""
    header = connection.execute(_HEADER, (session_id,)).fetchone()
    last = connection.execute(_ROW, (session_id, count - 1)).fetchone()
    if header is None or last is None:
        return None
    return checkpoint.row_digest(
        _stored_bytes(header[0]), _stored_text(last[0]), _stored_bytes(last[1])
    )


def _insert_fork(
    connection: sqlite3.Connection,
    header: SessionHeader,
    *,
    parent: SessionId,
    plan: forks.Plan,
) -> bool:
    """Insert the fork ``header`` names, its rows copied from ``parent``'s in SQL and its
    checkpoint, in one transaction; ``False`` if its id is taken. Raises
    ``ParentChangedError`` (nothing written) when the rows copied are not the ones ``plan``
    read."""
    content = plan.content(header.id)

    def write() -> None:
        _add_session(connection, header)
        copied = connection.execute(_COPY, (header.id, parent, plan.length)).rowcount
        if copied != plan.length or _digest(connection, parent, plan.length) != plan.digest:
            raise forks.ParentChangedError
        if not _write_checkpoint(connection, header.id, content):
            raise forks.ParentChangedError

    return _in_transaction(connection, write)


def _scan(db: _Database) -> SessionListing:
    with _failures(db):
        try:
            connection = _connect(db.path, create=False)
        except FileNotFoundError:
            return listing([], [])
        try:
            rows = connection.execute("SELECT id, header FROM sessions").fetchall()
        finally:
            connection.close()
    return stores.header_listing(
        (db.source(_stored_text(session_id)), _stored_bytes(header)) for session_id, header in rows
    )


def _due(db: _Database, before: Instant, limit: int) -> tuple[DueSession, ...]:
    with _failures(db):
        try:
            connection = _connect(db.path, create=False)
        except FileNotFoundError:
            return ()
        try:
            rows = connection.execute(_DUE, (before, limit)).fetchall()
        finally:
            connection.close()
    return tuple(
        DueSession(SessionId(_stored_text(session_id)), Instant(target))
        for session_id, target in rows
    )


def _connect(path: Path, *, create: bool) -> sqlite3.Connection:
    """A connection in WAL mode with ``synchronous=FULL`` and the schema in place.

    Raises ``FileNotFoundError`` when the database (or, unless ``create``, its schema) is
    missing, and ``SessionError`` for a database of another schema version.
    """
    if not path.exists():
        if not create:
            raise FileNotFoundError(path)
        private_directory(path.parent)  # parents too: 0700 whatever the umask
        # SQLite gives its -wal and -shm files the database file's mode.
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600))
    connection = sqlite3.connect(
        path, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None, check_same_thread=False
    )
    try:
        connection.text_factory = bytes
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute("PRAGMA synchronous = FULL")
        _prepare_schema(connection, path, create=create)
    except BaseException:
        connection.close()
        raise
    return connection


def _prepare_schema(connection: sqlite3.Connection, path: Path, *, create: bool) -> None:
    version = connection.execute("PRAGMA user_version").fetchone()[0]
    if version == SCHEMA_VERSION:
        return
    if version in {1, 2}:
        _upgrade(connection, path)
        return
    if version != 0:
        raise SessionError(
            "",
            f"database {path} has schema version {version}, "
            f"but this program reads version {SCHEMA_VERSION}; upgrade the program",
        )
    if not create:
        raise FileNotFoundError(path)
    _create_schema(connection)


def _create_schema(connection: sqlite3.Connection) -> None:
    connection.execute("BEGIN IMMEDIATE")
    try:
        # Another process may have created it since we looked.
        if connection.execute("PRAGMA user_version").fetchone()[0] == 0:
            for statement in (*_SCHEMA[:-1], *_TARGETS_SCHEMA, _CHECKPOINTS_SCHEMA, _SCHEMA[-1]):
                connection.execute(statement)
        connection.execute("COMMIT")
    except BaseException:
        _rollback(connection)
        raise


def _upgrade(connection: sqlite3.Connection, path: Path) -> None:
    """Bring a database of version 1 or 2 to this version, in one transaction: version 1 gets
    the next-target index, filled from every session's log; both get the checkpoints table."""
    db = _Database(path, path.with_name(f"{path.name}.locks"))
    connection.execute("BEGIN IMMEDIATE")
    try:
        # Another process may have upgraded it since we looked.
        version = connection.execute("PRAGMA user_version").fetchone()[0]
        if version == 1:
            for statement in _TARGETS_SCHEMA:
                connection.execute(statement)
            session_ids = [
                _stored_text(row[0])
                for row in connection.execute("SELECT id FROM sessions").fetchall()
            ]
            for session_id in session_ids:
                try:
                    loaded = _load_rows(db, connection, SessionId(session_id))
                except (SessionError, ScheduleError) as error:
                    # Opening the session reports the damage; the index says nothing is active.
                    _log.warning(
                        "session %s: its next target is not indexed: %s", session_id, error
                    )
                    continue
                connection.execute(
                    _SET_TARGET, (session_id, next_target_of(loaded.header, loaded.entries))
                )
        if version in {1, 2}:
            connection.execute(_CHECKPOINTS_SCHEMA)
            connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        connection.execute("COMMIT")
    except BaseException:
        _rollback(connection)
        raise


@contextmanager
def _failures(db: _Database, session_id: str = "") -> Iterator[None]:
    """Raise sqlite3's errors as the session layer's, naming ``session_id`` (none: the whole
    store): damage SQLite finds in the file (``SQLITE_CORRUPT``, ``SQLITE_NOTADB``) as
    ``SessionCorrupt`` — pages of derived data (the index, checkpoints) included, for SQLite
    cannot read past them and nothing here can rebuild them in place — and any other failure
    (an I/O error, a lock held too long, a file that cannot be opened) as ``SessionError``.
    Misuse of the driver (``ProgrammingError``, ``InterfaceError``) is a bug, and passes."""
    try:
        yield
    except (sqlite3.ProgrammingError, sqlite3.InterfaceError):
        raise
    except sqlite3.Error as error:
        code = getattr(error, "sqlite_errorcode", 0) & 0xFF  # the primary code
        if code == sqlite3.SQLITE_NOTADB:
            problem = (
                "SQLite does not take it for a database: its first page is damaged, "
                "or it is another kind of file"
            )
            raise database_damaged(session_id, db.place, problem) from error
        if code == sqlite3.SQLITE_CORRUPT:
            raise database_damaged(session_id, db.place, str(error)) from error
        problem = str(error)
        if code == sqlite3.SQLITE_CANTOPEN and db.path.is_dir():
            problem = "it is a directory, not a database file"
        raise database_unusable(session_id, db.place, problem) from error


def _missing(db: _Database, connection: sqlite3.Connection, session_id: SessionId) -> SessionError:
    """The error for a session the ``sessions`` table does not find: ``SessionNotFound``, unless
    a check of that table and its index (``PRAGMA quick_check``, run only here: opens stay fast)
    finds them damaged — a lookup through a damaged index can miss a row that is there."""
    found = connection.execute("PRAGMA quick_check(sessions)").fetchall()
    problems = [
        line.strip()
        for row in found
        for line in _stored_text(row[0]).splitlines()
        if line.strip() and not line.startswith("***")  # "*** in database main ***"
    ]
    if problems == ["ok"]:
        return session_not_found(session_id, db.place)
    shown = "; ".join(problems[:_PROBLEMS_SHOWN])
    if len(problems) > _PROBLEMS_SHOWN:
        shown += f"; {len(problems) - _PROBLEMS_SHOWN} more"
    return database_damaged(session_id, db.place, f"its table of sessions does not verify: {shown}")


def _exists(connection: sqlite3.Connection, session_id: SessionId) -> bool:
    found = connection.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone()
    return found is not None


def _lock(db: _Database, session_id: SessionId) -> None:
    """Own ``session_id`` (its byte of the owners' lock file), or raise ``SessionBusy``."""
    private_directory(db.locks)
    if not db.owners.acquire(session_id):
        raise session_busy(session_id)


def _load(db: _Database, connection: sqlite3.Connection, session_id: SessionId) -> _Loaded:
    """The committed header and entries of a session, read in one transaction."""
    connection.execute("BEGIN")
    try:
        return _load_rows(db, connection, session_id)
    finally:
        _rollback(connection)


def _load_rows(db: _Database, connection: sqlite3.Connection, session_id: SessionId) -> _Loaded:
    """The header and entries of a session, read in the transaction the caller holds."""
    source = db.source(session_id)
    found = connection.execute(_HEADER, (session_id,)).fetchone()
    rows = connection.execute(_ALL, (session_id,)).fetchall()
    if found is None:
        raise _missing(db, connection, session_id)
    header = decode_header(_stored_bytes(found[0]), source)
    entries = stores.decode_rows(_stored_rows(rows), 0, source)
    check_seed_length(header, len(entries), source)
    return _Loaded(header, entries)


def _stored_bytes(value: object) -> bytes:
    # text_factory=bytes: TEXT comes back as bytes; anything else was never written by us, and
    # its repr() fails to decode like any other damage.
    if isinstance(value, bytes):
        return value
    return repr(value).encode()


def _stored_text(value: object) -> str:
    return _stored_bytes(value).decode(errors="replace")


def _insert_session(connection: sqlite3.Connection, header: SessionHeader) -> bool:
    """Insert a session without entries in one transaction; ``False`` if the id is taken."""
    return _in_transaction(connection, lambda: _add_session(connection, header))


def _add_session(connection: sqlite3.Connection, header: SessionHeader) -> None:
    connection.execute(
        "INSERT INTO sessions (id, header) VALUES (?, ?)",
        (header.id, encode_header(header).decode()),
    )


def _in_transaction(connection: sqlite3.Connection, write: Callable[[], None]) -> bool:
    """``write()`` in a write transaction of its own, committed; ``False`` (nothing written) if
    it breaks a uniqueness rule (a session id that is taken)."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        write()
        connection.execute("COMMIT")
    except sqlite3.IntegrityError:
        _rollback(connection)
        return False
    except BaseException:
        _rollback(connection)
        raise
    return True


def _insert(
    connection: sqlite3.Connection,
    rows: list[Row],
    index: tuple[SessionId, Instant | None] | None,
) -> None:
    """Insert ``rows`` (a barrier's), with the session's ``index`` record when the rows hold
    schedule changes, within the caller's transaction (the commit lane's)."""
    connection.executemany(_INSERT, rows)
    if index is not None:
        connection.execute(_SET_TARGET, index)


def _rollback(connection: sqlite3.Connection) -> None:
    if connection.in_transaction:
        with suppress(sqlite3.Error):
            connection.execute("ROLLBACK")


def _close(shared: _Shared, owners: OwnerLocks, session_id: SessionId) -> None:
    """Give up the shared connection, then the ownership (nothing is written after it)."""
    try:
        _unshare(shared)
    finally:
        owners.release(session_id)

"""The commit lane of a SQLite store: the writes of every open session, in shared transactions.

Rules:

1. **One lane per store, one writer connection.** Every barrier's rows and every checkpoint of
   the store's open sessions are written through its lane: a serial
   :class:`~session_schedule.session.worker.Worker` with one connection of its own, opened when
   a write finds none and closed once no handle is attached and the writes queued before are
   done. Sessions no longer queue for SQLite's one write lock from a connection each (whose
   busy handler sleeps between attempts); they queue here, in memory.
2. **Writes that arrive together share a transaction.** A write is a function of the connection,
   run inside the lane's transaction (``BEGIN IMMEDIATE`` … ``COMMIT``). Whatever is queued when
   the lane comes to it goes into one transaction, in the order it was queued: so a thousand
   dispatches due in the same second cost a few commits, not a thousand.
3. **One write's failure is its own.** Each write runs inside a ``SAVEPOINT`` of its own; one
   that raises is rolled back to it alone and its caller gets the exception, while the others
   commit. Only a failure of the transaction itself (``BEGIN``, ``COMMIT``, or an error after
   which SQLite rolled the whole transaction back) fails every write in it — none of them was
   committed.
4. **Durable when reported.** A transaction holding any durable write runs with
   ``synchronous = FULL``, and no write's result is reported before its ``COMMIT`` has returned:
   a barrier acknowledged through the lane is on disk. A transaction of derived writes only
   (checkpoints) runs with ``synchronous = NORMAL``: a checkpoint lost to a power cut is written
   again.
5. **Counted like any worker call.** A transaction is one call on the lane's worker, so
   :func:`~session_schedule.session.worker.calls_in_flight` covers it until it has reported.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
from collections.abc import Callable
from typing import Final, TypeVar, cast, final

from session_schedule.session.worker import Worker

T = TypeVar("T")

_FULL: Final = 2
_NORMAL: Final = 1


_Settle = Callable[[object, "BaseException | None"], None]
"""Settles one write's future with its value or its error (on the future's loop)."""


@final
class _Write:
    """One queued write: its work, whether it must be durable, and where its result goes."""

    __slots__ = ("durable", "loop", "settle", "work")

    def __init__(
        self,
        work: Callable[[sqlite3.Connection], object],
        *,
        durable: bool,
        loop: asyncio.AbstractEventLoop,
        settle: _Settle,
    ) -> None:
        self.work = work
        self.durable = durable
        self.loop = loop
        self.settle = settle

    def report(self, value: object, error: BaseException | None) -> None:
        """Settle the future on its own loop (from the lane's thread)."""
        with contextlib.suppress(RuntimeError):  # its loop is closed: nobody is waiting
            self.loop.call_soon_threadsafe(self.settle, value, error)


@final
class CommitLane:
    """The serial writer of one SQLite database (see the module docstring for its rules).

    ``connect()`` opens a connection to the database (in WAL mode, autocommit), on the lane.
    """

    def __init__(self, connect: Callable[[], sqlite3.Connection]) -> None:
        self._connect = connect
        self._worker = Worker("session-sqlite-commits")
        self._lock = threading.Lock()
        self._waiting: list[_Write] = []
        """Writes queued and not yet taken by a transaction (under ``_lock``)."""
        self._connection: sqlite3.Connection | None = None
        """Used on the lane only."""
        self._synchronous: int | None = None
        self._attached = 0
        """Open handles that may still write (changed on the loop's thread; read on the lane,
        where a stale reading only closes a connection the next write opens again)."""
        self._committed = 0

    @property
    def transactions(self) -> int:
        """How many transactions the lane has committed (for tests and benchmarks)."""
        return self._committed

    def attach(self) -> None:
        """A handle that writes through the lane was opened."""
        self._attached += 1

    def detach(self) -> asyncio.Future[None] | None:
        """A handle that wrote through the lane is closing (its last write was queued before):
        with none left, the lane closes its connection once the writes queued are done — the
        future returned then is done once it has (so the last session closed leaves the store
        no connection, and SQLite folds its write-ahead log back into the database)."""
        self._attached -= 1
        if self._attached == 0:
            return self._worker.submit(self._close_if_unused)
        return None

    def commit(
        self, work: Callable[[sqlite3.Connection], T], *, durable: bool = True
    ) -> asyncio.Future[T]:
        """A future of ``work(connection)``, run in the lane's next transaction and reported once
        it has committed (Rules 2 to 4)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()

        def settle(value: object, error: BaseException | None) -> None:
            if future.done():
                return  # the caller was cancelled: what it queued still ran, unreported
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(cast("T", value))

        write = _Write(work, durable=durable, loop=loop, settle=settle)
        with self._lock:
            self._waiting.append(write)
            first = len(self._waiting) == 1
        if first:
            # Each transaction takes everything queued by the time it starts.
            self._worker.submit(self._drain).add_done_callback(_consumed)
        return future

    # On the lane.

    def _drain(self) -> None:
        with self._lock:
            writes, self._waiting = self._waiting, []
        if not writes:
            return
        try:
            outcomes = self._transaction(writes)
        except Exception as failure:  # the transaction itself: nothing of it was committed
            self._drop_connection()
            for write in writes:
                write.report(None, failure)
            return
        self._committed += 1
        for write, (value, error) in zip(writes, outcomes, strict=True):
            write.report(value, error)

    def _transaction(self, writes: list[_Write]) -> list[tuple[object, BaseException | None]]:
        connection = self._connection
        if connection is None:
            connection = self._connection = self._connect()
            self._synchronous = None
        wanted = _FULL if any(write.durable for write in writes) else _NORMAL
        if self._synchronous != wanted:
            connection.execute(f"PRAGMA synchronous = {wanted}")
            self._synchronous = wanted
        outcomes: list[tuple[object, BaseException | None]] = []
        connection.execute("BEGIN IMMEDIATE")
        try:
            for write in writes:
                connection.execute("SAVEPOINT write")
                try:
                    value = write.work(connection)
                except Exception as error:
                    if not connection.in_transaction:
                        raise  # SQLite rolled the whole transaction back
                    connection.execute("ROLLBACK TO write")
                    connection.execute("RELEASE write")
                    outcomes.append((None, error))
                else:
                    connection.execute("RELEASE write")
                    outcomes.append((value, None))
            connection.execute("COMMIT")
        except BaseException:
            if connection.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    connection.execute("ROLLBACK")
            raise
        return outcomes

    def _close_if_unused(self) -> None:
        if self._attached == 0:
            with self._lock:
                if self._waiting:
                    return  # a transaction is queued behind this call
            self._drop_connection()

    def _drop_connection(self) -> None:
        connection, self._connection = self._connection, None
        self._synchronous = None
        if connection is not None:
            with contextlib.suppress(sqlite3.Error):
                connection.close()


def _consumed(done: asyncio.Future[None]) -> None:
    """A transaction's call reports through its writes; its own future carries nothing."""
    if not done.cancelled():
        done.exception()

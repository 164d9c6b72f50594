"""The serial lane of an open session: its blocking calls run in order, off the loop, on a
small pool of threads shared by every session of the process.

Rules:

1. **One lane per open session, one pool per process.** A :class:`Worker` is a lane: the calls
   submitted to it run strictly one after another, in submission order, never two at once. The
   lanes share at most :data:`POOL_THREADS` daemon threads, started as work needs them and kept
   for the life of the process; so ten thousand open sessions cost the same threads as ten.
2. **Order is what makes closing safe.** Because a lane's calls run strictly in submission
   order, a file descriptor or connection is closed only after every flush queued before the
   close has returned (so an ``fsync`` can never land on a descriptor number that was closed and
   reused). A lane's calls may run on different threads of the pool, one after another; a
   resource used by a lane must therefore not be tied to one thread (SQLite connections are
   opened with ``check_same_thread=False`` and used by one lane only).
3. **Fairness.** A thread runs at most :data:`_TURN` calls of a lane before putting the lane
   back at the end of the queue of ready lanes, so a busy session cannot starve the others.
4. **A blocking call that was started runs to its end** even when the coroutine awaiting it is
   cancelled; :meth:`Worker.start` lets the caller say how to undo a result nobody will receive.
5. **A stopped lane takes nothing more:** submitting to it raises ``RuntimeError``.

The hand-off is as short as it can be: a deque under a lock to the lane, a ``SimpleQueue`` of
ready lanes to the pool, ``call_soon_threadsafe`` back (a ``ThreadPoolExecutor`` plus future
chaining costs about twice as much per call, which shows directly in barrier latency).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import logging
import threading
import weakref
from collections.abc import Callable
from queue import SimpleQueue
from typing import Final, Generic, TypeVar, final

T = TypeVar("T")
_log = logging.getLogger(__name__)

POOL_THREADS: Final = 32
"""At most this many threads run the blocking calls of every open session of the process."""
_TURN: Final = 16
"""A thread runs at most this many calls of one lane before serving the next ready lane."""


@final
class _Pending:
    """How many calls submitted from one loop have not reported back to it yet."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0


_PENDING: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Pending] = (
    weakref.WeakKeyDictionary()
)


def calls_in_flight() -> int:
    """How many calls submitted from the running loop (:meth:`Worker.submit`, :meth:`Worker.run`,
    :meth:`Worker.start`) have not reported back to it yet: for tests in virtual time, which
    must let work on the pool's threads land before they move the clock."""
    pending = _PENDING.get(asyncio.get_running_loop())
    return 0 if pending is None else pending.count


@final
class _Call(Generic[T]):
    __slots__ = ("call", "future", "loop", "pending")

    def __init__(
        self, loop: asyncio.AbstractEventLoop, future: asyncio.Future[T], call: Callable[[], T]
    ) -> None:
        self.loop = loop
        self.future = future
        self.call = call
        pending = _PENDING.get(loop)
        if pending is None:
            pending = _PENDING[loop] = _Pending()
        pending.count += 1
        self.pending = pending

    def run(self) -> None:
        try:
            result = self.call()
        except BaseException as error:  # handed to the awaiting coroutine, whatever it is
            self._report(functools.partial(self.future.set_exception, error))
        else:
            self._report(functools.partial(self.future.set_result, result))

    def _report(self, settle: Callable[[], None]) -> None:
        def in_loop() -> None:
            self.pending.count -= 1
            if not self.future.done():
                settle()

        # A closed loop has nobody waiting any more.
        with contextlib.suppress(RuntimeError):
            self.loop.call_soon_threadsafe(in_loop)


@final
class _Lane:
    """The calls of one worker not yet run; ``queued`` while the lane waits for or holds a
    thread of the pool."""

    __slots__ = ("calls", "lock", "queued")

    def __init__(self) -> None:
        self.calls: collections.deque[Callable[[], None]] | None = None
        """``None`` while the lane is idle: ten thousand idle lanes hold no queue."""
        self.lock = threading.Lock()
        self.queued = False


@final
class _Pool:
    """The threads that serve every lane of the process (Rules 1 and 3)."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._ready: SimpleQueue[_Lane] = SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0
        """Threads waiting for a ready lane."""
        self._waiting = 0
        """Ready lanes no thread has taken yet."""

    @property
    def threads(self) -> int:
        return self._threads

    def push(self, lane: _Lane, call: Callable[[], None]) -> None:
        with lane.lock:
            if lane.calls is None:
                lane.calls = collections.deque()
            lane.calls.append(call)
            if lane.queued:
                return
            lane.queued = True
        self._schedule(lane)

    def _schedule(self, lane: _Lane) -> None:
        with self._lock:
            self._waiting += 1
            spawn = self._waiting > self._idle and self._threads < self._limit
            if spawn:
                self._threads += 1
                number = self._threads
        self._ready.put(lane)
        if spawn:
            threading.Thread(
                target=self._serve, name=f"session-worker-{number}", daemon=True
            ).start()

    def _serve(self) -> None:
        ready, lock = self._ready, self._lock
        while True:
            with lock:
                self._idle += 1
            lane = ready.get()
            with lock:
                self._idle -= 1
                self._waiting -= 1
            self._run(lane)

    def _run(self, lane: _Lane) -> None:
        calls = lane.calls
        for _ in range(_TURN):
            with lane.lock:
                if not calls:
                    lane.queued = False
                    lane.calls = None
                    return
                call = calls.popleft()
            try:
                call()
            except BaseException:  # a pool thread outlives whatever one call raises
                _log.exception("a call on a session worker failed")
        with lane.lock:
            if not calls:
                lane.queued = False
                lane.calls = None
                return
        self._schedule(lane)


_POOL: Final = _Pool(POOL_THREADS)


def pool_threads() -> int:
    """How many threads the shared pool has started so far (at most :data:`POOL_THREADS`)."""
    return _POOL.threads


@final
class Worker:
    """A serial lane for the blocking calls of one session, served by the shared pool."""

    __slots__ = ("_lane", "_name", "_stopping")

    def __init__(self, name: str) -> None:
        self._name = name
        self._lane = _Lane()
        self._stopping = False

    @property
    def stopped(self) -> bool:
        """Whether the lane was stopped (it then takes no more calls)."""
        return self._stopping

    def submit(self, call: Callable[[], T]) -> asyncio.Future[T]:
        """A future of ``call()``, run after every call submitted before it.

        Raises ``RuntimeError`` once the lane is stopped.
        """
        self._check()
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        _POOL.push(self._lane, _Call(loop, future, call).run)
        return future

    def post(self, call: Callable[[], object]) -> None:
        """Run ``call()`` after every call submitted before it, without waiting for it: for work
        nobody awaits (an exception it raises is logged).

        Raises ``RuntimeError`` once the lane is stopped.
        """
        self._check()
        name = self._name

        def run() -> None:
            try:
                call()
            except Exception:
                _log.exception("a background call on %s failed", name)

        _POOL.push(self._lane, run)

    async def run(self, call: Callable[[], T]) -> T:
        return await self.submit(call)

    async def start(self, call: Callable[[], T], undo: Callable[[T], None]) -> T:
        """Like :meth:`run`; if the caller is cancelled, ``undo(result)`` runs on the lane.

        For calls that acquire something (a descriptor, a lock, a connection): cancellation of
        the caller must not leak it. When the call fails or the caller is cancelled, the lane
        is stopped (after the undo); the caller has nothing to clean up.
        """
        future = self.submit(call)
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            self._stopping = True
            future.add_done_callback(lambda done: self._abandon(done, undo))
            raise
        except BaseException:
            self._stopping = True
            raise

    async def stop(self, last: Callable[[], None]) -> None:
        """Run ``last()`` after every queued call, then stop the lane.

        ``last`` runs (and the lane stops) even when the caller is cancelled meanwhile.
        """
        future = self.submit(last)
        self._stopping = True
        await asyncio.shield(future)

    def _check(self) -> None:
        if self._stopping:
            raise RuntimeError(f"the worker {self._name} is stopped")

    def _abandon(self, done: asyncio.Future[T], undo: Callable[[T], None]) -> None:
        if not done.cancelled() and done.exception() is None:
            result = done.result()

            def release() -> None:
                # Nobody is left to tell: releasing is all that can be done.
                with contextlib.suppress(Exception):
                    undo(result)

            _POOL.push(self._lane, release)

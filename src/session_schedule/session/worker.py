"""The dedicated thread of an open session: its blocking calls run there, in order, off the loop.

One thread per open file or database session keeps the event loop free while an ``fsync`` or a
``COMMIT`` waits for the disk, and — because calls run strictly in submission order — a file
descriptor or connection is closed only after every flush queued before the close has returned
(so an ``fsync`` can never land on a descriptor number that was closed and reused).

The hand-off is as short as it can be: a ``SimpleQueue`` to the thread, ``call_soon_threadsafe``
back (a ``ThreadPoolExecutor`` plus future chaining costs about twice as much per call, which
shows directly in barrier latency).

A blocking call that was started runs to its end even when the coroutine awaiting it is
cancelled; :meth:`Worker.start` lets the caller say how to undo a result nobody will receive.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import threading
from collections.abc import Callable
from queue import SimpleQueue
from typing import Generic, TypeVar, final

T = TypeVar("T")
_log = logging.getLogger(__name__)


@final
class _Call(Generic[T]):
    __slots__ = ("call", "future", "loop")

    def __init__(
        self, loop: asyncio.AbstractEventLoop, future: asyncio.Future[T], call: Callable[[], T]
    ) -> None:
        self.loop = loop
        self.future = future
        self.call = call

    def run(self) -> None:
        try:
            result = self.call()
        except BaseException as error:  # handed to the awaiting coroutine, whatever it is
            self._report(functools.partial(self.future.set_exception, error))
        else:
            self._report(functools.partial(self.future.set_result, result))

    def _report(self, settle: Callable[[], None]) -> None:
        def in_loop() -> None:
            if not self.future.done():
                settle()

        # A closed loop has nobody waiting any more.
        with contextlib.suppress(RuntimeError):
            self.loop.call_soon_threadsafe(in_loop)


@final
class Worker:
    """A single daemon thread that runs blocking calls for one session, in order."""

    def __init__(self, name: str) -> None:
        self._calls: SimpleQueue[Callable[[], None] | None] = SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()
        self._stopping = False

    def submit(self, call: Callable[[], T]) -> asyncio.Future[T]:
        """A future of ``call()``, run on the thread after every call submitted before it."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._calls.put(_Call(loop, future, call).run)
        return future

    def post(self, call: Callable[[], object]) -> None:
        """Run ``call()`` on the thread after every call submitted before it, without waiting
        for it: for work nobody awaits (an exception it raises is logged)."""

        def run() -> None:
            try:
                call()
            except Exception:
                _log.exception("a background call on %s failed", self._thread.name)

        self._calls.put(run)

    async def run(self, call: Callable[[], T]) -> T:
        return await self.submit(call)

    async def start(self, call: Callable[[], T], undo: Callable[[T], None]) -> T:
        """Like :meth:`run`; if the caller is cancelled, ``undo(result)`` runs on the thread.

        For calls that acquire something (a descriptor, a lock, a connection): cancellation of
        the caller must not leak it. When the call fails or the caller is cancelled, the worker
        is stopped (after the undo); the caller has nothing to clean up.
        """
        future = self.submit(call)
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            future.add_done_callback(lambda done: self._abandon(done, undo))
            raise
        except BaseException:
            self._end()
            raise

    async def stop(self, last: Callable[[], None]) -> None:
        """Run ``last()`` after every queued call, then end the thread.

        ``last`` runs (and the thread ends) even when the caller is cancelled meanwhile.
        """
        future = self.submit(last)
        self._end()
        await asyncio.shield(future)
        # The thread has nothing left to do: joining it is immediate.
        self._thread.join()

    def _serve(self) -> None:
        while (call := self._calls.get()) is not None:
            call()

    def _end(self) -> None:
        if not self._stopping:
            self._stopping = True
            self._calls.put(None)

    def _abandon(self, done: asyncio.Future[T], undo: Callable[[T], None]) -> None:
        if not done.cancelled() and done.exception() is None:
            result = done.result()

            def release() -> None:
                # Nobody is left to tell: releasing is all that can be done.
                with contextlib.suppress(Exception):
                    undo(result)

            self._calls.put(release)
        self._end()

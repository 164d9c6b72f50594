"""Calls that arrive together, served as one batch: how a store opens or closes many sessions in
a few statements.

Rules:

1. **What is waiting goes together.** :meth:`Gather.call` queues its argument and waits. While
   no batch runs, one starts at the next turn of the event loop with everything queued by then
   (at most ``limit``); calls queued while a batch runs wait for the next one. So one call alone
   costs one batch of one, a turn of the loop later; a thousand at once cost a few batches.
2. **One outcome per call.** A batch returns, for each argument in order, its result or the
   exception that call raises; one call's failure is its own. A batch that raises fails none
   of its calls: each is then served alone by ``single`` (so a failure caused by one of them
   stays with that one).
3. **Eager, when asked.** A ``Gather`` made ``eager`` serves a call that finds nothing running
   and nothing queued at once, alone, without waiting for the loop to turn (a lone barrier
   keeps its latency); calls that arrive while one runs wait for it and then go together.
4. **Nothing acquired is lost to a cancelled caller.** When a caller was cancelled before its
   result came, ``discard(result)`` is given the result (a handle to close, a lease to let go)
   as a task of its own.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Generic, TypeVar, final

A = TypeVar("A")
R = TypeVar("R")

_log = logging.getLogger(__name__)


@final
class Gather(Generic[A, R]):
    """Serves calls with ``batch(arguments)``, those that arrive together as one."""

    def __init__(
        self,
        name: str,
        batch: Callable[[Sequence[A]], Awaitable[Sequence[R | Exception]]],
        single: Callable[[A], Awaitable[R]],
        *,
        limit: int,
        discard: Callable[[R], Coroutine[object, object, None]] | None = None,
        eager: bool = False,
    ) -> None:
        if limit < 1:
            raise ValueError(f"limit must be at least 1, not {limit}")
        self._name = name
        self._batch = batch
        self._single = single
        self._limit = limit
        self._discard = discard
        self._eager = eager
        self._alone_running = False
        """An eager call is being served alone (Rule 3)."""
        self._waiting: list[tuple[A, asyncio.Future[R]]] = []
        self._runner: asyncio.Task[None] | None = None
        self._discarding: set[asyncio.Task[None]] = set()
        self.batches = 0
        """How many batches have been run (for tests and benchmarks)."""

    async def call(self, argument: A) -> R:
        """``argument``'s outcome, served with the others waiting (Rule 1)."""
        if self._eager and not self._alone_running and not self._running() and not self._waiting:
            self._alone_running = True
            try:
                return await self._single(argument)
            finally:
                self._alone_running = False
                if self._waiting:
                    self._start()
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._waiting.append((argument, future))
        if not self._alone_running and not self._running():
            self._start()
        return await future

    def _running(self) -> bool:
        return self._runner is not None and not self._runner.done()

    def _start(self) -> None:
        loop = asyncio.get_running_loop()
        self._runner = loop.create_task(self._run(), name=f"{self._name} batches")

    async def _run(self) -> None:
        if not self._eager:
            await asyncio.sleep(0)  # let the callers of this turn of the loop queue theirs
        while self._waiting:
            taken, self._waiting = self._waiting[: self._limit], self._waiting[self._limit :]
            live = [(argument, future) for argument, future in taken if not future.cancelled()]
            if not live:
                continue
            self.batches += 1
            try:
                outcomes = await self._batch([argument for argument, _ in live])
            except Exception as error:  # the batch as a whole: each is served alone (Rule 2)
                _log.warning(
                    "%s: a batch of %s failed; each is served alone: %s",
                    self._name,
                    len(live),
                    error,
                )
                await asyncio.gather(*(self._alone(argument, future) for argument, future in live))
                continue
            for (_, future), outcome in zip(live, outcomes, strict=True):
                self._settle(future, outcome)

    async def _alone(self, argument: A, future: asyncio.Future[R]) -> None:
        try:
            result = await self._single(argument)
        except Exception as error:
            self._settle(future, error)
        else:
            self._settle(future, result)

    def _settle(self, future: asyncio.Future[R], outcome: R | Exception) -> None:
        if isinstance(outcome, Exception):
            if not future.done():
                future.set_exception(outcome)
            return
        if not future.done():
            future.set_result(outcome)
            return
        if self._discard is not None:  # its caller is gone (Rule 4)
            task = asyncio.get_running_loop().create_task(self._discard(outcome))
            self._discarding.add(task)
            task.add_done_callback(self._discarding.discard)

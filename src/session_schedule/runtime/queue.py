"""The agent-scoped queue: everything Schedule does for one agent, one item at a time (SPEC §5).

Tool calls and due tasks are serialised through one FIFO, so a decision never interleaves with
another's appends.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar, final

T = TypeVar("T")


@final
class AgentQueue:
    """A FIFO of coroutine functions, run strictly one after another, in submission order."""

    def __init__(self) -> None:
        self._lock = asyncio.Lock()
        self._waiting = 0

    @property
    def busy(self) -> bool:
        """Whether an item is running or waiting."""
        return self._lock.locked() or self._waiting > 0

    async def run(self, item: Callable[[], Awaitable[T]]) -> T:
        """Run ``item`` once every item submitted before it has finished; return its result.

        ``asyncio.Lock`` wakes its waiters in the order they started waiting, which is what makes
        this a FIFO. A cancelled waiter leaves the queue without running.
        """
        self._waiting += 1
        try:
            await self._lock.acquire()
        finally:
            self._waiting -= 1
        try:
            return await item()
        finally:
            self._lock.release()

"""The Agent port for a host that pulls its follow-ups: :class:`PullAgent`.

A generic MCP client cannot be handed a turn: the server can only answer requests. So here the
agent is "idle and accepting" exactly while a host request for a follow-up — a *take* — is
waiting, and at no other time:

- ``wait_idle()`` is called by the live Schedule's owner only when something is due. The agent
  announces that a follow-up is pending (the ``announce`` callback; the MCP server sends
  ``notifications/resources/updated`` and a log message) and returns once a take is waiting.
- ``begin_maintenance()`` succeeds only while a take is waiting, and binds that take to the
  phase.
- ``followup(text)`` hands ``text`` to the bound take — that hand-over is the synchronous queue
  acceptance after which the owner appends the dispatch. If the take has gone (the host
  cancelled it, or it timed out), ``followup`` raises, so no dispatch is recorded and the
  reminder stays due.
- ``end_maintenance()`` answers a bound take that got nothing (nothing was due at the decision
  time) with ``None``.

So the owner's discipline is unchanged — one queue, barriers, one decision time, at-least-once —
and a follow-up nobody takes is never dispatched: it stays due, across restarts too.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import final

from session_schedule.runtime.clock import Clock, SystemClock

logger = logging.getLogger(__name__)


@final
class FollowupNotTakenError(Exception):
    """``followup()`` found no waiting take to hand the follow-up to; nothing was accepted."""


@final
class PullAgent:
    """An :class:`~session_schedule.runtime.Agent` whose follow-ups are taken, not pushed.

    ``announce`` is awaited whenever the owner starts waiting with something due and no take is
    waiting; an exception from it is logged and does not stop delivery. ``clock`` times the
    takes' waits (the system clock by default; a fake one in tests).
    """

    def __init__(
        self,
        announce: Callable[[], Awaitable[None]] | None = None,
        *,
        clock: Clock | None = None,
    ) -> None:
        self._announce = announce
        self._clock = clock or SystemClock()
        self._takers: deque[asyncio.Future[str | None]] = deque()
        self._unclaimed: deque[str] = deque()
        self._signal = asyncio.Event()
        self._in_phase = False
        self._phase_taker: asyncio.Future[str | None] | None = None
        self._recheck = False
        self._owner_waiting = False

    @property
    def unclaimed(self) -> int:
        """How many accepted follow-ups wait for a take (their first take was cancelled)."""
        return len(self._unclaimed)

    @property
    def waiting_takes(self) -> int:
        """How many takes are waiting for the owner."""
        return sum(1 for taker in self._takers if not taker.done())

    async def take(self, *, timeout: float) -> str | None:
        """Wait up to ``timeout`` seconds for the owner to hand over the next follow-up.

        Returns its text, or ``None`` when nothing was handed over (nothing was due when the
        owner decided, or the time ran out — then nothing was accepted and the reminder is still
        due). A follow-up that was accepted for a take that was then cancelled is kept and
        returned by the next take of this process.
        """
        if self._unclaimed:
            return self._unclaimed.popleft()
        taker: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        self._takers.append(taker)
        self._signal.set()
        sleeper = asyncio.ensure_future(self._clock.sleep(timeout))
        try:
            # ``asyncio.wait`` leaves the taker alone when this take is cancelled, so an
            # accepted follow-up can still be read from it below.
            waits: set[asyncio.Future[str | None] | asyncio.Future[None]] = {taker, sleeper}
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            return taker.result() if taker.done() and not taker.cancelled() else None
        except asyncio.CancelledError:
            if taker.done() and not taker.cancelled():
                accepted = taker.result()
                if accepted is not None:
                    logger.warning(
                        "a follow-up was accepted for a take that was then cancelled; "
                        "the next take receives it"
                    )
                    self._unclaimed.append(accepted)
            raise
        finally:
            sleeper.cancel()
            if not taker.done():
                taker.cancel()
            if taker in self._takers:
                self._takers.remove(taker)

    def recheck(self) -> None:
        """Let an owner that is waiting for a take look again at what is due.

        Call it when what it waits to deliver may have gone (a delete): the owner then finds
        nothing due and goes back to sleeping until the next target, instead of waiting for a
        take that would get nothing.
        """
        if self._owner_waiting:
            self._recheck = True
            self._signal.set()

    # -- the Agent port ----------------------------------------------------------------------

    async def wait_idle(self) -> None:
        """Announce the pending follow-up, then return once a take is waiting (or a
        :meth:`recheck` asks the owner to look again)."""
        if not self._has_taker() and self._announce is not None:
            try:
                await self._announce()
            except Exception:
                logger.exception("announcing a pending follow-up failed")
        self._owner_waiting = True
        try:
            while not self._has_taker() and not self._recheck:
                self._signal.clear()
                await self._signal.wait()
        finally:
            self._owner_waiting = False

    def begin_maintenance(self) -> bool:
        if self._in_phase:
            return False
        while self._takers and self._takers[0].done():
            self._takers.popleft()
        if self._takers:
            self._phase_taker = self._takers.popleft()
        elif self._recheck:
            self._phase_taker = None
        else:
            return False
        self._recheck = False
        self._in_phase = True
        return True

    def end_maintenance(self) -> None:
        if not self._in_phase:
            raise RuntimeError("end_maintenance without a maintenance phase")
        taker, self._phase_taker = self._phase_taker, None
        self._in_phase = False
        if taker is not None and not taker.done():
            taker.set_result(None)

    def followup(self, message: str) -> None:
        if not self._in_phase:
            raise RuntimeError("followup() outside a maintenance phase")
        taker = self._phase_taker
        if taker is None:
            raise FollowupNotTakenError("no host is waiting to take a follow-up")
        if taker.done():
            raise FollowupNotTakenError("the take ended before the follow-up was accepted")
        taker.set_result(message)

    def _has_taker(self) -> bool:
        return any(not taker.done() for taker in self._takers)

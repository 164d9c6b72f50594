"""A fake agent for tests: busy and idle on command, follow-ups recorded, refusals on demand."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import final


@final
class FakeAgent:
    """An :class:`~session_schedule.runtime.Agent` whose turns the test drives.

    ``start_turn``/``finish_turn`` make it busy and idle. A follow-up accepted during a maintenance
    phase starts its turn when the phase ends; with ``finish_followups=True`` (the default) that
    turn completes at once, otherwise the agent stays busy until ``finish_turn``. ``refuse``
    makes ``followup`` raise until ``accept`` is called. The fake also checks Schedule's side of
    the contract: ``followup`` outside a maintenance phase, or a turn started during one, raises.
    """

    def __init__(self, *, finish_followups: bool = True) -> None:
        self.followups: list[str] = []
        """Every accepted follow-up, in order."""
        self.refused = 0
        """How many follow-ups were refused."""
        self.maintenance_phases = 0
        self._finish_followups = finish_followups
        self._busy = False
        self._maintenance = False
        self._queued_turns = 0
        self._refusal: str | None = None
        self._idle = asyncio.Event()
        self._idle.set()

    @property
    def busy(self) -> bool:
        return self._busy

    @property
    def in_maintenance(self) -> bool:
        return self._maintenance

    def start_turn(self) -> None:
        if self._maintenance:
            raise RuntimeError("a turn started during a maintenance phase")
        self._busy = True
        self._idle.clear()

    def finish_turn(self) -> None:
        self._busy = False
        self._start_queued_turn()

    def refuse(self, reason: str = "the agent refused the follow-up") -> None:
        """Make every ``followup`` raise ``RuntimeError(reason)`` until :meth:`accept`."""
        self._refusal = reason

    def accept(self) -> None:
        self._refusal = None

    # -- the Agent port ----------------------------------------------------------------------

    async def wait_idle(self) -> None:
        await self._idle.wait()

    def begin_maintenance(self) -> bool:
        if self._busy or self._maintenance or self._queued_turns:
            return False
        self._maintenance = True
        self.maintenance_phases += 1
        self._idle.clear()
        return True

    def end_maintenance(self) -> None:
        if not self._maintenance:
            raise RuntimeError("end_maintenance without a maintenance phase")
        self._maintenance = False
        self._start_queued_turn()

    def followup(self, message: str) -> None:
        if not self._maintenance:
            raise RuntimeError("followup() outside a maintenance phase")
        if self._refusal is not None:
            self.refused += 1
            raise RuntimeError(self._refusal)
        self.followups.append(message)
        self._queued_turns += 1
        self._idle.clear()

    def _start_queued_turn(self) -> None:
        if self._maintenance or self._busy:
            return
        if self._queued_turns:
            self._queued_turns -= 1
            self._busy = True
            if self._finish_followups:
                self.finish_turn()
                return
        if not self._busy:
            self._idle.set()


@final
class IdleAgent:
    """An :class:`~session_schedule.runtime.Agent` that is always idle and hands every accepted
    follow-up to ``accept`` — for benchmarks, load tests and hosts' crash children, where
    reminders only need to be taken and counted, as fast as they come due.

    Maintenance phases never overlap (a second ``begin_maintenance`` before ``end_maintenance``
    is refused), so it keeps Schedule's side of the contract as a real agent would. With no
    ``accept``, a follow-up is an error: for runs where nothing may come due.
    """

    def __init__(self, accept: Callable[[str], None] | None = None) -> None:
        self._accept = accept
        self._maintenance = False

    async def wait_idle(self) -> None:
        return

    def begin_maintenance(self) -> bool:
        if self._maintenance:
            return False
        self._maintenance = True
        return True

    def end_maintenance(self) -> None:
        self._maintenance = False

    def followup(self, message: str) -> None:
        if self._accept is None:
            raise RuntimeError(f"no follow-up was expected, got {message[:60]!r}")
        self._accept(message)

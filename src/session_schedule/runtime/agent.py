"""The Agent port: the little Schedule needs from the agent it serves (SPEC §6).

Schedule never steers and never interrupts a turn. It waits until the agent is fully idle, takes
a maintenance phase (while it is held no turn starts), queues exactly one follow-up turn, and
lets go. A host implements this Protocol over its own agent loop.
"""

from __future__ import annotations

from typing import Protocol


class Agent(Protocol):
    async def wait_idle(self) -> None:
        """Return once the agent is fully idle: no turn running, none queued to start, and no
        maintenance phase held (by anyone)."""
        ...

    def begin_maintenance(self) -> bool:
        """Enter the maintenance phase if the agent is idle right now, and say whether it did.

        While the phase is held no turn starts. Never blocks: a due task that finds the agent
        busy gives way (a turn's own tool calls may be queued behind it) and waits for idle
        again.
        """
        ...

    def end_maintenance(self) -> None:
        """Leave the maintenance phase; a follow-up queued during it may now start."""
        ...

    def followup(self, message: str) -> None:
        """Queue ``message`` as the next follow-up turn, synchronously, or raise.

        Returning means the turn was accepted; any exception means it was not, and Schedule
        records no dispatch (the reminder stays active and is retried).
        """
        ...

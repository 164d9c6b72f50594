"""Virtual time for tests of a live Schedule or a host: let time pass as the owner would see it."""

from __future__ import annotations

from typing import Protocol

from session_schedule.testing.clock import FakeClock


class Settles(Protocol):
    """A live Schedule or a host: what runs on the clock's deadlines, and says when it is idle."""

    async def settled(self) -> None: ...


async def run_for(owner: Settles, clock: FakeClock, seconds: float) -> None:
    """Let ``seconds`` of virtual time pass, waking ``owner`` at each of its deadlines."""
    remaining = seconds
    await owner.settled()
    while True:
        step = clock.next_deadline()
        if step is None or step > remaining:
            clock.advance(remaining)
            await owner.settled()
            return
        clock.advance(step)
        remaining -= step
        await owner.settled()

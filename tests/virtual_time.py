"""Virtual time for tests of a live Schedule: let time pass as the owner would see it."""

from __future__ import annotations

from session_schedule.runtime.live import LiveSchedule
from session_schedule.testing.clock import FakeClock


async def run_for(schedule: LiveSchedule, clock: FakeClock, seconds: float) -> None:
    """Let ``seconds`` of virtual time pass, waking the owner at each of its deadlines."""
    remaining = seconds
    await schedule.settled()
    while True:
        step = clock.next_deadline()
        if step is None or step > remaining:
            clock.advance(remaining)
            await schedule.settled()
            return
        clock.advance(step)
        remaining -= step
        await schedule.settled()

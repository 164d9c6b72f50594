"""Session histories shared by the session tests: turns and schedule changes (Every records
kept active, one-shots created and deleted, dispatches) written in several barriers."""

from __future__ import annotations

from session_schedule.core.changes import (
    ScheduleCreateChange,
    create_change,
    delete_change,
    dispatch_change,
)
from session_schedule.core.ids import make_schedule_id
from session_schedule.core.instants import parse_instant
from session_schedule.core.records import EveryScheduleRecord
from session_schedule.session import SessionHandle
from session_schedule.testing.session_contract import schedule_create, turn


def every(number: int, *, every_seconds: int = 600) -> ScheduleCreateChange:
    """The create of ``sch_<number>``, every ``every_seconds`` (ten minutes) from 2030-01-01
    00:00."""
    return create_change(
        EveryScheduleRecord(
            id=make_schedule_id(number),
            prompt=f"every {number}",
            every_seconds=every_seconds,
            scheduled_at="2030-01-01T00:00:00.000Z",
        )
    )


async def append_history(
    handle: SessionHandle, first: int, last: int, *, dispatched: bool = False
) -> None:
    """For each number from ``first`` to ``last``: a turn, then the create of an Every record
    (odd numbers, which stay active) or of a one-shot deleted at once (even numbers); with
    ``dispatched``, each Every record is also dispatched once and a second turn follows. A
    barrier after every seventh number and one at the end."""
    for number in range(first, last + 1):
        handle.append("message", turn(number))
        handle.append("schedule/change", every(number) if number % 2 else schedule_create(number))
        if number % 2 == 0:
            handle.append("schedule/change", delete_change(make_schedule_id(number)))
        elif dispatched:
            handle.append(
                "schedule/change",
                dispatch_change(
                    make_schedule_id(number), parse_instant("2030-01-01T01:00:00.000Z")
                ),
            )
        if dispatched:
            handle.append("message", turn(1000 + number))
        if number % 7 == 0:
            await handle.barrier()
    await handle.barrier()

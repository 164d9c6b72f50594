"""Schedule ids: short, opaque, safe for a model to copy (``sch_1``, ``sch_2``, …).

An id is minted only by the fold's allocator (one more than the largest number ever used in the
Session's whole stream, inherited history included) and read back only through
:func:`parse_schedule_id`, so an arbitrary string can never pass for one.
"""

from __future__ import annotations

import re
from typing import Final, NewType

ScheduleId = NewType("ScheduleId", str)

ID_PREFIX: Final = "sch_"
ID_PATTERN: Final = r"^sch_[1-9][0-9]{0,15}\Z"
"""The id form as a ``re.search`` pattern (``\\Z``: a ``$`` would allow a final newline)."""
SCHEDULE_ID: Final = re.compile(r"sch_[1-9][0-9]{0,15}", re.ASCII)
"""The id form, for ``fullmatch``."""


def parse_schedule_id(text: str) -> ScheduleId | None:
    """The id ``text`` names, or ``None`` when it is not of the id form. Always a ``str`` itself,
    whatever subclass of it ``text`` is: the id goes into the log's records."""
    return ScheduleId(str.__str__(text)) if SCHEDULE_ID.fullmatch(text) else None


def id_number(schedule_id: ScheduleId) -> int:
    return int(schedule_id[len(ID_PREFIX) :])


def make_schedule_id(number: int) -> ScheduleId:
    """The id with the given sequence number (``number`` ≥ 1)."""
    if number < 1:
        raise ValueError(f"schedule id numbers start at 1, got {number}")
    return ScheduleId(f"{ID_PREFIX}{number}")

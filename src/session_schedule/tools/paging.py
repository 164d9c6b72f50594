"""``schedule_list`` pages: every result a model can receive is bounded.

A session may hold :attr:`~session_schedule.core.rules.Limits.max_active` reminders of
:attr:`~session_schedule.core.rules.Limits.max_prompt_chars` each — hundreds of thousands of
characters, which a single ``schedule_list`` once put into the model's request. A call now
returns one page: never more than :data:`MAX_PAGE_CHARS` characters of reminders beyond the
first (the first is always included, so a page is at most that plus one reminder), and at most
``limit`` reminders when the caller gives one (1 to :data:`MAX_LIST_LIMIT`). With ``limit`` null
the character budget alone bounds the page, so a session of short reminders (60 or more)
gets every one in the first call, as SPEC §8 has ``schedule_list`` return the active views.
``next_cursor`` continues where the page ended (null: it was the last); ``total`` counts every
active reminder.

A cursor names the last reminder of the page it ended, by its target time and id
(``<scheduledAt>/<id>``): the next page starts at the first reminder after it in the list's order
(target time, then id), so a reminder created or delivered between two calls moves no other from
one page to the next or out of both.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Final, TypeVar

from session_schedule.core.errors import ScheduleError
from session_schedule.core.ids import id_number, parse_schedule_id
from session_schedule.core.instants import canonical_instant

MAX_LIST_LIMIT: Final = 100
"""The largest ``limit`` a ``schedule_list`` call may ask for."""
MAX_PAGE_CHARS: Final = 16_000
"""A page holds reminders until their JSON text passes this many characters (the first always)."""
_ARGUMENTS: Final = frozenset({"cursor", "limit"})

V = TypeVar("V")
Key = tuple[str, int]
"""A reminder's place in the list: its target time (canonical text) and its id's number."""


def list_arguments(arguments: Mapping[str, object]) -> tuple[Key | None, int | None]:
    """The page ``arguments`` ask for: after which reminder (``None``: from the first), and how
    many at most (``None``: as many as fit :data:`MAX_PAGE_CHARS`). Raises ``ScheduleError``
    (``invalid_selector``) for anything else."""
    unknown = sorted(set(arguments) - _ARGUMENTS)
    if unknown:
        names = ", ".join(f"`{name}`" for name in unknown)
        raise ScheduleError(
            "invalid_selector",
            f"schedule_list takes only cursor and limit, got {names}; call it with "
            '{"cursor": null, "limit": null} for the first page.',
        )
    limit = arguments.get("limit")
    count: int | None = None
    if limit is not None:
        whole = _whole_number(limit)
        if whole is None or not 1 <= whole <= MAX_LIST_LIMIT:
            raise ScheduleError(
                "invalid_selector",
                f"limit must be a whole number from 1 to {MAX_LIST_LIMIT}, or null for as many "
                "reminders as fit in one page.",
            )
        count = whole
    cursor = arguments.get("cursor")
    if cursor is None:
        return None, count
    key = _cursor_key(cursor) if isinstance(cursor, str) else None
    if key is None:
        raise ScheduleError(
            "invalid_selector",
            "cursor must be a next_cursor that schedule_list returned, or null for the first "
            "page; call it with cursor null to start again.",
        )
    return key, count


def page(
    views: Sequence[V],
    *,
    after: Key | None,
    limit: int | None,
    key: Callable[[V], Key],
    size: Callable[[V], int],
) -> tuple[list[V], str | None]:
    """The page of ``views`` (in the list's order) after ``after``, and its ``next_cursor``: at
    most ``limit`` views (``None``: no count bound), within :data:`MAX_PAGE_CHARS`."""
    start = 0
    if after is not None:
        while start < len(views) and key(views[start]) <= after:
            start += 1
    chosen: list[V] = []
    used = 0
    end = len(views) if limit is None else min(len(views), start + limit)
    for index in range(start, end):
        view = views[index]
        cost = size(view)
        if chosen and used + cost > MAX_PAGE_CHARS:
            break
        chosen.append(view)
        used += cost
    if start + len(chosen) >= len(views):
        return chosen, None
    scheduled_at, number = key(chosen[-1])
    return chosen, f"{scheduled_at}/sch_{number}"


def schedule_key(scheduled_at: str, schedule_id: str) -> Key:
    """The place of the reminder ``schedule_id`` due at ``scheduled_at`` in the list."""
    parsed = parse_schedule_id(schedule_id)
    return scheduled_at, id_number(parsed) if parsed is not None else 0


def _cursor_key(cursor: str) -> Key | None:
    scheduled_at, _, schedule_id = cursor.rpartition("/")
    parsed = parse_schedule_id(schedule_id)
    if parsed is None or canonical_instant(scheduled_at) is None:
        return None
    return scheduled_at, id_number(parsed)


def _whole_number(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None

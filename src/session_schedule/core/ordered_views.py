"""The active records in target order, then creation order, with their views ready.

``schedule_list`` answers with every active view in that order, and a view's ``state`` depends
on ``now``. Sorting the records and building their views on every call costs O(n log n) Python
work. Here the order is kept as each change lands (a binary search and a list insertion per
change), and each record's two possible views — ``scheduled`` and ``overdue`` — are built once,
when it takes its place. Because the order is target order, the overdue records are exactly a
prefix of it: a list at ``now`` is one binary search and two slices.

The plain (JSON-ready, read-only) forms of both views, which ``ScheduleTools.call`` returns, are
built the first time a plain list is asked for and kept beside them from then on, so a plain list
is two slices as well.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Mapping
from typing import Final, TypeAlias, final

from session_schedule.core.ids import ScheduleId, id_number
from session_schedule.core.plain import ReadOnlyDict, plain
from session_schedule.core.records import (
    NO_STATUS,
    RecordStatus,
    ScheduleRecord,
    ScheduleView,
    view_pair,
)

_Key: TypeAlias = tuple[str, int]
_AFTER_EVERY_ID: Final = 1 << 64
"""Greater than every id number: ``(t, _AFTER_EVERY_ID)`` sorts after every key at ``t``."""
_UNBUILT: Final = ReadOnlyDict()
"""Stands for a plain view not built yet (compared by identity)."""


def order_key(record: ScheduleRecord) -> _Key:
    """Target order, then creation order (canonical instants sort as text; ids increase)."""
    return record.scheduled_at, id_number(record.id)


@final
class OrderedViews:
    """Active records kept in :func:`order_key` order, each with both of its views."""

    __slots__ = (
        "_keys",
        "_overdue",
        "_plain_overdue",
        "_plain_scheduled",
        "_records",
        "_scheduled",
        "_unbuilt",
    )

    def __init__(
        self,
        records: Iterable[ScheduleRecord],
        statuses: Mapping[ScheduleId, RecordStatus] | None = None,
    ) -> None:
        """Hold ``records``, with the fold status ``statuses`` gives (none: no status)."""
        ordered = sorted(records, key=order_key)
        self._keys = [order_key(record) for record in ordered]
        self._records = ordered
        found = statuses or {}
        pairs = [view_pair(record, found.get(record.id, NO_STATUS)) for record in ordered]
        self._scheduled = [scheduled for scheduled, _ in pairs]
        self._overdue = [overdue for _, overdue in pairs]
        # Plain forms: ``_UNBUILT`` until a plain list is first asked for (``_unbuilt`` of them).
        self._plain_scheduled = [_UNBUILT] * len(ordered)
        self._plain_overdue = [_UNBUILT] * len(ordered)
        self._unbuilt = len(ordered)

    def __len__(self) -> int:
        return len(self._records)

    def add(self, record: ScheduleRecord, status: RecordStatus = NO_STATUS) -> None:
        key = order_key(record)
        index = bisect_left(self._keys, key)
        scheduled, overdue = view_pair(record, status)
        self._keys.insert(index, key)
        self._records.insert(index, record)
        self._scheduled.insert(index, scheduled)
        self._overdue.insert(index, overdue)
        self._plain_scheduled.insert(index, _UNBUILT)
        self._plain_overdue.insert(index, _UNBUILT)
        self._unbuilt += 1

    def remove(self, record: ScheduleRecord) -> None:
        """Forget ``record``, which must be held (with the same target)."""
        index = bisect_left(self._keys, order_key(record))
        if index == len(self._records) or self._records[index].id != record.id:
            raise KeyError(record.id)
        del self._keys[index]
        del self._records[index]
        del self._scheduled[index]
        del self._overdue[index]
        if self._plain_scheduled[index] is _UNBUILT:
            self._unbuilt -= 1
        del self._plain_scheduled[index]
        del self._plain_overdue[index]

    def records(self) -> list[ScheduleRecord]:
        """The records, in order (a new list)."""
        return self._records.copy()

    def views(self, now_text: str) -> list[ScheduleView]:
        """The views at ``now_text`` (a canonical instant), in order (a new list): ``overdue``
        for a target at or before it, ``scheduled`` after (``paused`` for a paused record)."""
        due = bisect_right(self._keys, (now_text, _AFTER_EVERY_ID))
        return self._overdue[:due] + self._scheduled[due:]

    def plain_views(self, now_text: str) -> list[ReadOnlyDict]:
        """:meth:`views` in their plain form (a new list of shared, read-only dicts)."""
        if self._unbuilt:
            self._build_plain()
        due = bisect_right(self._keys, (now_text, _AFTER_EVERY_ID))
        return self._plain_overdue[:due] + self._plain_scheduled[due:]

    def _build_plain(self) -> None:
        for index, built in enumerate(self._plain_scheduled):
            if built is _UNBUILT:
                self._plain_scheduled[index] = plain(self._scheduled[index])
                self._plain_overdue[index] = plain(self._overdue[index])
        self._unbuilt = 0

"""The result objects the tools return (SPEC §8 "Tool results"), as types.

Success is ``{"ok": true, ...}``; failure is ``{"ok": false, "error": {"code", "message"}}``.
"""

from __future__ import annotations

from typing import Literal, TypeAlias, final

import msgspec

from session_schedule.core.errors import ErrorCode
from session_schedule.core.records import InstantField, ScheduleView


class _Result(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    pass


@final
class ErrorDetail(_Result, frozen=True):
    code: ErrorCode
    """A stable error code."""
    message: str
    """One sentence saying what went wrong and what to do instead."""


@final
class ErrorResult(_Result, frozen=True):
    ok: Literal[False]
    error: ErrorDetail


@final
class CreateResult(_Result, frozen=True):
    ok: Literal[True]
    schedule: ScheduleView
    """The reminder as stored: its id, rule, UTC target and state."""


@final
class UpdateResult(_Result, frozen=True):
    ok: Literal[True]
    schedule: ScheduleView
    """The reminder after the update: its id, rule, next delivery in UTC and state."""


@final
class ListResult(_Result, frozen=True):
    ok: Literal[True]
    now: InstantField
    """The current time used to decide each reminder's state."""
    schedules: list[ScheduleView]
    """A page of the active reminders, soonest first (then in creation order)."""
    next_cursor: str | None
    """The ``cursor`` of the next page; ``None`` when this page is the last."""
    total: int
    """How many reminders are active, on every page."""


@final
class DeleteResult(_Result, frozen=True):
    ok: Literal[True]
    id: str
    """The id asked for."""
    deleted: bool
    """Whether an active reminder had that id and was deleted."""


SuccessResult: TypeAlias = CreateResult | UpdateResult | ListResult | DeleteResult
ToolResult: TypeAlias = SuccessResult | ErrorResult

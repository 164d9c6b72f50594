"""A reminder's standing in words (SPEC §11): paused, snoozed, bounded, lateness-limited.

One wording for every place a person reads it — ``session-schedule list``, the chat's reminder
lines and the web page's reminder cards — and, for the end of a bounded reminder, the frame a
model reads. A reminder that uses none of SPEC §11 has no standing (the empty string). Why a
recurring reminder ended is worded here too, once for ``session-schedule resolve`` and
``session-schedule show``.
"""

from __future__ import annotations

from typing import Final

from msgspec import UnsetType

from session_schedule.core.records import ScheduleView, record_ends


def standing(view: ScheduleView, *, beside_state: bool = False) -> str:
    """``paused``, ``snoozed until X``, ``N runs left``, ``no delivery after X`` and ``missed if
    more than N s late``, those that apply, joined by ``, ``; ``""`` when none does.
    ``beside_state``: shown under the view's ``state``, which says ``paused`` already."""
    parts: list[str] = []
    if view.paused is True and not (beside_state and view.state == "paused"):
        parts.append("paused")
    if not isinstance(view.snoozed_until, UnsetType):
        parts.append(f"snoozed until {view.snoozed_until}")
    runs_left = None if isinstance(view.runs_left, UnsetType) else view.runs_left
    ends = record_ends(view)
    until = None if ends is None else ends.until
    if runs_left is not None:
        parts.append(f"{runs_left} run{'' if runs_left == 1 else 's'} left")
    if until is not None:
        parts.append(no_delivery_after(until))
    if not isinstance(view.max_lateness_seconds, UnsetType):
        parts.append(f"missed if more than {view.max_lateness_seconds} s late")
    return ", ".join(parts)


def no_delivery_after(until: str) -> str:
    """``no delivery after X``: a reminder's ``ends.until``, in the words every view uses."""
    return f"no delivery after {until}"


LAST_RUN: Final = "its last run under ends.max_runs"
"""Why a recurring reminder ended with a delivery: it was its ``ends.max_runs``-th."""

NO_LATER_TARGET: Final = "no later target fits in year 9999"
"""Why a recurring reminder ended when it has no occurrence left up to
``9999-12-31T23:59:59.999Z`` (SPEC's last instant), with no ``ends`` to say sooner."""


def no_occurrence_left(until: str) -> str:
    """Why a recurring reminder ended when its next occurrence would pass ``ends.until``."""
    return f"no occurrence left up to ends.until {until}"

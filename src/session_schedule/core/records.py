"""Durable schedule records (SPEC §1, §10, §11) and the views a tool returns (SPEC §5, §11).

Records are frozen msgspec structs whose wire names are exactly the camelCase names of the
specification (``afterSeconds``, ``everySeconds``, ``timeZone``, ``scheduledAt``), tagged by
``kind``. The optional fields of SPEC §11 (``ends`` on recurring records, ``maxLatenessSeconds``
on any) default to unset and are then left out of the wire form, so a record that uses neither
encodes exactly as before. A view is a record plus the delivery state derived from a given ``now``
and from the fold's :class:`RecordStatus` (paused, snoozed, runs made); it never enters the log.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Final, Literal, TypeAlias, assert_never, final, get_args

import msgspec
from msgspec import UNSET, UnsetType

from session_schedule.core.ids import ID_PATTERN, ScheduleId
from session_schedule.core.instants import (
    CANONICAL_INSTANT_PATTERN,
    Instant,
    format_instant,
    instant_of_canonical,
)

MAX_SAFE_INTEGER: Final = 2**53 - 1
MIN_EVERY_SECONDS: Final = 300

IdField: TypeAlias = Annotated[ScheduleId, msgspec.Meta(pattern=ID_PATTERN)]
InstantField: TypeAlias = Annotated[
    str,
    msgspec.Meta(
        pattern=CANONICAL_INSTANT_PATTERN,
        description="An instant in UTC, canonical form YYYY-MM-DDTHH:MM:SS.sssZ.",
    ),
]
# The fields of records and changes carry the same patterns in their JSON schemas, but msgspec
# does not run them when decoding: a pattern costs about 460 ns a field there, more than the rest
# of a change's decode. The strict change decoder checks ids, instants and times itself, with
# precompiled checks (session_schedule.core.changes), and names the field as msgspec would.
RecordIdField: TypeAlias = Annotated[
    ScheduleId, msgspec.Meta(extra_json_schema={"pattern": ID_PATTERN})
]
RecordInstantField: TypeAlias = Annotated[
    str,
    msgspec.Meta(
        description="An instant in UTC, canonical form YYYY-MM-DDTHH:MM:SS.sssZ.",
        extra_json_schema={"pattern": CANONICAL_INSTANT_PATTERN},
    ),
]
PromptField: TypeAlias = Annotated[str, msgspec.Meta(min_length=1)]
AfterSecondsField: TypeAlias = Annotated[int, msgspec.Meta(ge=1, le=MAX_SAFE_INTEGER)]
EverySecondsField: TypeAlias = Annotated[
    int, msgspec.Meta(ge=MIN_EVERY_SECONDS, le=MAX_SAFE_INTEGER)
]

DAILY_TIME_PATTERN: Final = r"^(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]\.[0-9]{3}\Z"
DailyTimeField: TypeAlias = Annotated[
    str,
    msgspec.Meta(
        description="A local wall-clock time, canonical form HH:MM:SS.sss.",
        extra_json_schema={"pattern": DAILY_TIME_PATTERN},
    ),
]

MaxRunsField: TypeAlias = Annotated[int, msgspec.Meta(ge=1, le=MAX_SAFE_INTEGER)]
MaxLatenessField: TypeAlias = Annotated[int, msgspec.Meta(ge=1, le=MAX_SAFE_INTEGER)]

RecordKind = Literal["after", "at", "every", "daily", "calendar"]
Weekday = Literal["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
WEEKDAYS: Final[tuple[Weekday, ...]] = get_args(Weekday)
"""The days of the week in week order, Monday first (Monday is weekday 0)."""
ScheduleState = Literal["scheduled", "overdue", "paused"]
DeliveryMode = Literal["session-local"]
RunOutcome = Literal["delivered", "failed", "pending", "missed"]
"""What became of a reminder's latest run: its follow-up turn completed, failed after its
retries, has not finished yet, or (SPEC §11) the occurrence was too late and was missed."""


class _Record(
    msgspec.Struct,
    frozen=True,
    forbid_unknown_fields=True,
    rename="camel",
    tag_field="kind",
    gc=False,
):
    id: RecordIdField
    prompt: PromptField
    """The reminder content, trimmed at creation."""


@final
class Ends(msgspec.Struct, frozen=True, forbid_unknown_fields=True, rename="camel", gc=False):
    """When a recurring record ends (SPEC §11): both keys are always written, at least one set."""

    until: RecordInstantField | None
    """No occurrence after this instant is delivered; the record ends when its next target
    would pass it."""
    max_runs: MaxRunsField | None
    """The record ends with its ``max_runs``-th dispatch."""


class AfterScheduleRecord(_Record, tag="after", frozen=True):
    after_seconds: AfterSecondsField
    """The delay as given at creation."""
    scheduled_at: RecordInstantField
    """Creation decision time plus the delay."""
    max_lateness_seconds: MaxLatenessField | UnsetType = UNSET
    """A delivery decided more than this after its target is recorded as missed instead."""


class AtScheduleRecord(_Record, tag="at", frozen=True):
    scheduled_at: RecordInstantField
    """The absolute instant the model named, in canonical UTC."""
    max_lateness_seconds: MaxLatenessField | UnsetType = UNSET


class EveryScheduleRecord(_Record, tag="every", frozen=True):
    every_seconds: EverySecondsField
    """The fixed interval, never below 300 seconds."""
    scheduled_at: RecordInstantField
    """The earliest anchor-aligned occurrence not yet dispatched."""
    ends: Ends | UnsetType = UNSET
    """When the record ends, besides the representable range."""
    max_lateness_seconds: MaxLatenessField | UnsetType = UNSET


class DailyScheduleRecord(_Record, tag="daily", frozen=True):
    local_time: DailyTimeField = msgspec.field(name="time")
    """The local wall-clock time of every occurrence (``time`` on the wire)."""
    time_zone: str
    """``UTC`` or the IANA zone whose wall clock ``time`` reads."""
    weekdays: Annotated[list[Weekday], msgspec.Meta(min_length=1)]
    """The listed days of the week, distinct, in week order (all seven for every day)."""
    scheduled_at: RecordInstantField
    """The earliest occurrence not yet dispatched."""
    ends: Ends | UnsetType = UNSET
    max_lateness_seconds: MaxLatenessField | UnsetType = UNSET


CALENDAR_DATE_PATTERN: Final = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}\Z"
CalendarDateField: TypeAlias = Annotated[
    str,
    msgspec.Meta(
        description="A local calendar date, YYYY-MM-DD.",
        extra_json_schema={"pattern": CALENDAR_DATE_PATTERN},
    ),
]


class CalendarScheduleRecord(_Record, tag="calendar", frozen=True):
    rule: Annotated[str, msgspec.Meta(description="The calendar rule, in canonical form.")]
    """The RRULE subset of SPEC §12, in canonical order (``FREQ`` first, ``INTERVAL=1`` left
    out, lists ascending)."""
    local_time: DailyTimeField = msgspec.field(name="time")
    """The local wall-clock time of every occurrence (``time`` on the wire)."""
    time_zone: str
    """``UTC`` or the IANA zone whose calendar and wall clock the rule reads."""
    start_date: CalendarDateField
    """The local date the rule counts from (``DTSTART``'s date)."""
    scheduled_at: RecordInstantField
    """The earliest occurrence not yet dispatched."""
    ends: Ends | UnsetType = UNSET
    max_lateness_seconds: MaxLatenessField | UnsetType = UNSET


OneShotScheduleRecord: TypeAlias = AfterScheduleRecord | AtScheduleRecord
RecurringScheduleRecord: TypeAlias = (
    EveryScheduleRecord | DailyScheduleRecord | CalendarScheduleRecord
)
ScheduleRecord: TypeAlias = (
    AfterScheduleRecord
    | AtScheduleRecord
    | EveryScheduleRecord
    | DailyScheduleRecord
    | CalendarScheduleRecord
)
RECURRING_RECORDS: Final = (EveryScheduleRecord, DailyScheduleRecord, CalendarScheduleRecord)
"""The recurring record classes, for ``isinstance`` and ``type(...) in``."""


def record_kind(record: ScheduleRecord) -> RecordKind:
    match record:
        case AfterScheduleRecord():
            return "after"
        case AtScheduleRecord():
            return "at"
        case EveryScheduleRecord():
            return "every"
        case DailyScheduleRecord():
            return "daily"
        case CalendarScheduleRecord():
            return "calendar"
        case _:
            assert_never(record)


def is_recurring(record: ScheduleRecord) -> bool:
    """Whether ``record`` recurs (``every``, ``daily``, ``calendar``) rather than firing once."""
    return isinstance(record, RECURRING_RECORDS)


def record_target(record: ScheduleRecord) -> Instant:
    """The record's ``scheduledAt`` as an instant (records hold only canonical instants)."""
    return instant_of_canonical(record.scheduled_at)


def record_ends(record: ScheduleRecord) -> Ends | None:
    """The record's ``ends``, or ``None`` when it has none (one-shots never do)."""
    if isinstance(record, RECURRING_RECORDS) and isinstance(record.ends, Ends):
        return record.ends
    return None


def record_max_lateness(record: ScheduleRecord) -> int | None:
    """The record's ``maxLatenessSeconds``, or ``None`` (deliver however late)."""
    lateness = record.max_lateness_seconds
    return None if isinstance(lateness, UnsetType) else lateness


def is_managed(record: ScheduleRecord) -> bool:
    """Whether ``record`` carries a SPEC §11 field (hence is written with version 3)."""
    return record_ends(record) is not None or record_max_lateness(record) is not None


@final
class LastRun(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A reminder's latest run, as its view shows it."""

    occurrence: str
    """The occurrence key its follow-up carried (``id@scheduledAt``)."""
    outcome: RunOutcome
    at: InstantField
    """When its delivery was decided."""


@final
class RecordStatus(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """What the fold knows of an active record beyond the record itself (SPEC §11); never stored.

    The record's ``scheduledAt`` is always its next delivery: the snooze instant while snoozed.
    """

    paused: bool = False
    snoozed_from: str | None = None
    """While snoozed: the occurrence the snoozed delivery stands for (canonical instant)."""
    runs: int = 0
    """Dispatches made as a recurring record since it was created (kept when an update makes it a
    one-shot, for a later ``maxRuns``; a miss is none)."""
    late_from: str | None = None
    """A one-shot resumed after its target: the resume time, from which lateness is measured."""


NO_STATUS: Final = RecordStatus()


# Views: a record's wire fields, then ``state`` and ``deliveryMode``, then ``runs`` and
# ``lastRun`` (derived from the log's history, not from the record: 0 and null as the core
# builds a view; the live Schedule fills them in), then the SPEC §11 fields that apply (left out
# otherwise), then ``setDuring`` (derived from the log's turns, present only for a reminder a
# reminder turn created). A view class extends its record class only to share the field
# declarations; views never enter the log.


@final
class AfterScheduleView(AfterScheduleRecord, tag="after", frozen=True, kw_only=True):
    state: ScheduleState
    """``scheduled`` while the next delivery is in the future, ``overdue`` once it has passed,
    ``paused`` while paused (never due)."""
    delivery_mode: DeliveryMode = "session-local"
    """Delivery never leaves the owning Session."""
    runs: int = 0
    """How many times it has been delivered (a catch-up of missed occurrences counts once)."""
    last_run: LastRun | None = None
    """Its latest delivery and what became of it; null before the first."""
    paused: bool | UnsetType = UNSET
    """``true`` while paused; left out otherwise."""
    snoozed_until: str | UnsetType = UNSET
    """While snoozed: the snooze instant (also ``scheduledAt``)."""
    runs_left: int | UnsetType = UNSET
    """With ``ends.maxRuns``: the dispatches left before the record ends."""
    set_during: str | msgspec.UnsetType = msgspec.UNSET
    """The reminder turn that created it (``reminder sch_3@…``); absent when a person, a host
    prompt or a program created it."""


@final
class AtScheduleView(AtScheduleRecord, tag="at", frozen=True, kw_only=True):
    state: ScheduleState
    delivery_mode: DeliveryMode = "session-local"
    runs: int = 0
    last_run: LastRun | None = None
    paused: bool | UnsetType = UNSET
    snoozed_until: str | UnsetType = UNSET
    runs_left: int | UnsetType = UNSET
    set_during: str | msgspec.UnsetType = msgspec.UNSET


@final
class EveryScheduleView(EveryScheduleRecord, tag="every", frozen=True, kw_only=True):
    state: ScheduleState
    delivery_mode: DeliveryMode = "session-local"
    runs: int = 0
    last_run: LastRun | None = None
    paused: bool | UnsetType = UNSET
    snoozed_until: str | UnsetType = UNSET
    runs_left: int | UnsetType = UNSET
    set_during: str | msgspec.UnsetType = msgspec.UNSET


@final
class DailyScheduleView(DailyScheduleRecord, tag="daily", frozen=True, kw_only=True):
    state: ScheduleState
    delivery_mode: DeliveryMode = "session-local"
    runs: int = 0
    last_run: LastRun | None = None
    paused: bool | UnsetType = UNSET
    snoozed_until: str | UnsetType = UNSET
    runs_left: int | UnsetType = UNSET
    set_during: str | msgspec.UnsetType = msgspec.UNSET


@final
class CalendarScheduleView(CalendarScheduleRecord, tag="calendar", frozen=True, kw_only=True):
    state: ScheduleState
    delivery_mode: DeliveryMode = "session-local"
    runs: int = 0
    last_run: LastRun | None = None
    paused: bool | UnsetType = UNSET
    snoozed_until: str | UnsetType = UNSET
    runs_left: int | UnsetType = UNSET
    set_during: str | msgspec.UnsetType = msgspec.UNSET


ScheduleView: TypeAlias = (
    AfterScheduleView
    | AtScheduleView
    | EveryScheduleView
    | DailyScheduleView
    | CalendarScheduleView
)


def make_view(
    record: ScheduleRecord, now: Instant, status: RecordStatus = NO_STATUS
) -> ScheduleView:
    """The tool view of ``record`` (with fold status ``status``) as seen at ``now``."""
    return _view(record, format_instant(now), status)


def make_views(records: Iterable[ScheduleRecord], now: Instant) -> list[ScheduleView]:
    """The views of ``records`` (none paused or snoozed) as seen at ``now``, in the same order."""
    now_text = format_instant(now)
    return [_view(record, now_text, NO_STATUS) for record in records]


def view_pair(
    record: ScheduleRecord, status: RecordStatus = NO_STATUS
) -> tuple[ScheduleView, ScheduleView]:
    """Both views of ``record``: while its next delivery is in the future, and once it has
    passed (both ``paused`` while paused)."""
    if status.paused:
        paused = view_in_state(record, "paused", status)
        return paused, paused
    return view_in_state(record, "scheduled", status), view_in_state(record, "overdue", status)


def _view(record: ScheduleRecord, now_text: str, status: RecordStatus) -> ScheduleView:
    # Canonical instants sort as text, so the state needs no conversion.
    if status.paused:
        return view_in_state(record, "paused", status)
    return view_in_state(
        record, "scheduled" if record.scheduled_at > now_text else "overdue", status
    )


def view_in_state(
    record: ScheduleRecord, state: ScheduleState, status: RecordStatus = NO_STATUS
) -> ScheduleView:
    """The view of ``record`` in delivery state ``state``, with fold status ``status``."""
    paused, snoozed_until, runs_left = _status_fields(record, status)
    match record:
        case AfterScheduleRecord():
            return AfterScheduleView(
                id=record.id,
                prompt=record.prompt,
                after_seconds=record.after_seconds,
                scheduled_at=record.scheduled_at,
                max_lateness_seconds=record.max_lateness_seconds,
                state=state,
                paused=paused,
                snoozed_until=snoozed_until,
                runs_left=runs_left,
            )
        case AtScheduleRecord():
            return AtScheduleView(
                id=record.id,
                prompt=record.prompt,
                scheduled_at=record.scheduled_at,
                max_lateness_seconds=record.max_lateness_seconds,
                state=state,
                paused=paused,
                snoozed_until=snoozed_until,
                runs_left=runs_left,
            )
        case EveryScheduleRecord():
            return EveryScheduleView(
                id=record.id,
                prompt=record.prompt,
                every_seconds=record.every_seconds,
                scheduled_at=record.scheduled_at,
                ends=record.ends,
                max_lateness_seconds=record.max_lateness_seconds,
                state=state,
                paused=paused,
                snoozed_until=snoozed_until,
                runs_left=runs_left,
            )
        case DailyScheduleRecord():
            return DailyScheduleView(
                id=record.id,
                prompt=record.prompt,
                local_time=record.local_time,
                time_zone=record.time_zone,
                weekdays=record.weekdays,
                scheduled_at=record.scheduled_at,
                ends=record.ends,
                max_lateness_seconds=record.max_lateness_seconds,
                state=state,
                paused=paused,
                snoozed_until=snoozed_until,
                runs_left=runs_left,
            )
        case CalendarScheduleRecord():
            return CalendarScheduleView(
                id=record.id,
                prompt=record.prompt,
                rule=record.rule,
                local_time=record.local_time,
                time_zone=record.time_zone,
                start_date=record.start_date,
                scheduled_at=record.scheduled_at,
                ends=record.ends,
                max_lateness_seconds=record.max_lateness_seconds,
                state=state,
                paused=paused,
                snoozed_until=snoozed_until,
                runs_left=runs_left,
            )
        case _:
            assert_never(record)


_StatusFields: TypeAlias = tuple[bool | UnsetType, str | UnsetType, int | UnsetType]
_NO_FIELDS: Final[_StatusFields] = (UNSET, UNSET, UNSET)


def _status_fields(record: ScheduleRecord, status: RecordStatus) -> _StatusFields:
    """The view's ``paused``, ``snoozedUntil`` and ``runsLeft``, each unset where it does not
    apply."""
    ends = record_ends(record)
    if status is NO_STATUS and ends is None:
        return _NO_FIELDS
    return (
        True if status.paused else UNSET,
        UNSET if status.snoozed_from is None else record.scheduled_at,
        UNSET if ends is None or ends.max_runs is None else ends.max_runs - status.runs,
    )

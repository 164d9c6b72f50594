"""Hypothesis strategies for core values."""

from __future__ import annotations

import msgspec
from hypothesis import strategies as st

from session_schedule.core.changes import (
    ScheduleChange,
    create_change,
    delete_change,
    dispatch_change,
    miss_change,
    pause_change,
    resume_change,
    snooze_change,
    update_change,
)
from session_schedule.core.ids import ScheduleId, make_schedule_id
from session_schedule.core.instants import MAX_INSTANT, MIN_INSTANT, Instant, format_instant
from session_schedule.core.prompts import trim
from session_schedule.core.records import (
    MAX_SAFE_INTEGER,
    WEEKDAYS,
    AfterScheduleRecord,
    AtScheduleRecord,
    CalendarScheduleRecord,
    DailyScheduleRecord,
    Ends,
    EveryScheduleRecord,
    ScheduleRecord,
    is_recurring,
)
from session_schedule.core.time_input import format_time_of_day

instants = st.integers(min_value=MIN_INSTANT, max_value=MAX_INSTANT).map(Instant)
canonical_instants = instants.map(format_instant)
ids = st.integers(min_value=1, max_value=10**16 - 1).map(make_schedule_id)
# What a create can store: trimmed, non-empty, no control character but newline and tab.
prompts = (
    st.text(
        st.characters(blacklist_categories=("Cc", "Cs")) | st.sampled_from("\n\t"),
        min_size=1,
        max_size=40,
    )
    .map(trim)
    .filter(bool)
)
local_times = st.integers(min_value=0, max_value=86_400_000 - 1).map(format_time_of_day)
zone_names = st.sampled_from(["UTC", "Asia/Tokyo", "America/New_York", "Pacific/Apia"])
weekday_lists = st.sets(st.sampled_from(WEEKDAYS), min_size=1).map(
    lambda days: tuple(day for day in WEEKDAYS if day in days)
)

calendar_rules = st.sampled_from(
    [
        "FREQ=DAILY",
        "FREQ=WEEKLY;INTERVAL=2;BYDAY=MO,FR",
        "FREQ=MONTHLY;BYDAY=1MO",
        "FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1",
        "FREQ=MONTHLY;BYMONTHDAY=-1;COUNT=12",
        "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=29;UNTIL=21001231",
    ]
)


def records(schedule_id: st.SearchStrategy[ScheduleId] = ids) -> st.SearchStrategy[ScheduleRecord]:
    return st.one_of(
        st.builds(
            AfterScheduleRecord,
            id=schedule_id,
            prompt=prompts,
            after_seconds=st.integers(min_value=1, max_value=MAX_SAFE_INTEGER),
            scheduled_at=canonical_instants,
        ),
        st.builds(
            AtScheduleRecord, id=schedule_id, prompt=prompts, scheduled_at=canonical_instants
        ),
        st.builds(
            EveryScheduleRecord,
            id=schedule_id,
            prompt=prompts,
            every_seconds=st.integers(min_value=300, max_value=MAX_SAFE_INTEGER),
            scheduled_at=canonical_instants,
        ),
        st.builds(
            DailyScheduleRecord,
            id=schedule_id,
            prompt=prompts,
            local_time=local_times,
            time_zone=zone_names,
            weekdays=weekday_lists.map(list),
            scheduled_at=canonical_instants,
        ),
        st.builds(
            CalendarScheduleRecord,
            id=schedule_id,
            prompt=prompts,
            rule=calendar_rules,
            local_time=local_times,
            time_zone=zone_names,
            start_date=st.dates().map(lambda date: f"{date.year:04d}-{date:%m-%d}"),
            scheduled_at=canonical_instants,
        ),
    )


positive = st.integers(min_value=1, max_value=MAX_SAFE_INTEGER)


@st.composite
def managed_records(draw: st.DrawFn) -> ScheduleRecord:
    """A record with the SPEC §11 fields: a lateness, and on a recurring one an end (an
    ``until`` at or after its target)."""
    record = draw(records())
    record = msgspec.structs.replace(record, max_lateness_seconds=draw(positive | st.just(0)))
    if record.max_lateness_seconds == 0:
        record = msgspec.structs.replace(record, max_lateness_seconds=msgspec.UNSET)
    if is_recurring(record) and draw(st.booleans()):
        until = draw(st.none() | canonical_instants.filter(lambda at: at >= record.scheduled_at))
        runs = draw(positive) if until is None else draw(st.none() | positive)
        record = msgspec.structs.replace(record, ends=Ends(until=until, max_runs=runs))
    elif record.max_lateness_seconds is msgspec.UNSET:
        record = msgspec.structs.replace(record, max_lateness_seconds=draw(positive))
    return record


changes: st.SearchStrategy[ScheduleChange] = st.one_of(
    records().map(create_change),
    ids.map(delete_change),
    ids.map(dispatch_change),
    st.builds(dispatch_change, ids, instants),
    managed_records().map(create_change),
    st.one_of(records(), managed_records()).map(update_change),
    ids.map(pause_change),
    st.builds(resume_change, ids, instants),
    st.builds(snooze_change, ids, instants),
    st.builds(miss_change, ids, instants, instants),
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=5)
    ),
    max_leaves=20,
)

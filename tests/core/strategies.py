"""Hypothesis strategies for core values."""

from __future__ import annotations

from hypothesis import strategies as st

from session_schedule.core.changes import (
    ScheduleChange,
    create_change,
    delete_change,
    dispatch_change,
)
from session_schedule.core.ids import ScheduleId, make_schedule_id
from session_schedule.core.instants import MAX_INSTANT, MIN_INSTANT, Instant, format_instant
from session_schedule.core.records import (
    MAX_SAFE_INTEGER,
    WEEKDAYS,
    AfterScheduleRecord,
    AtScheduleRecord,
    DailyScheduleRecord,
    EveryScheduleRecord,
    ScheduleRecord,
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
    .map(str.strip)
    .filter(bool)
)
local_times = st.integers(min_value=0, max_value=86_400_000 - 1).map(format_time_of_day)
zone_names = st.sampled_from(["UTC", "Asia/Tokyo", "America/New_York", "Pacific/Apia"])
weekday_lists = st.sets(st.sampled_from(WEEKDAYS), min_size=1).map(
    lambda days: tuple(day for day in WEEKDAYS if day in days)
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
    )


changes: st.SearchStrategy[ScheduleChange] = st.one_of(
    records().map(create_change),
    ids.map(delete_change),
    ids.map(dispatch_change),
    st.builds(dispatch_change, ids, instants),
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=5)
    ),
    max_leaves=20,
)
